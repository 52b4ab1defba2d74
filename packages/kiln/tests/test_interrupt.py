"""Ctrl-C during kl.sample: every path stops within about a second and returns its draws.

Each test sends SIGINT to the main thread (what Ctrl-C does) once the chains have
reported their first piece of work, then checks how soon ``kl.sample`` returned, that
the result is the usual DataTree with the draws kept, and that one warning says so.
The bounds are generous (a loaded CI machine): the chains look at the stop flag every
``kiln_samplers._nuts.PIECE_S`` (0.2 s).
"""

from __future__ import annotations

import signal
import threading
import time
import warnings

import pytest

import kiln as kl
import kiln_samplers as ks
from kiln_samplers import _c_nuts, _compound, _sample

#: The most seconds kl.sample may take to return after the signal (a loaded machine).
_LATENCY_S = 5.0
#: The chains every interrupted run samples.
_CHAINS = 2


def _interrupt_once_started(monkeypatch, module, delay: float = 0.5) -> dict[str, float]:
    """Send SIGINT to the main thread ``delay`` s after every chain's first progress report.

    Waiting for every chain (at most 30 s after the first) keeps a chain that a loaded
    machine started late from being interrupted before its first draw, which would drop
    it from the result. Returns the dict that receives the signal's time (``"sent"``).
    """
    first = threading.Event()
    everyone = threading.Event()
    reported: set[int] = set()
    sent: dict[str, float] = {}

    class Watched(module.Progress):
        def updater(self, chain):
            update = super().updater(chain)

            def watch(*args):
                reported.add(chain)
                first.set()
                if len(reported) == _CHAINS:
                    everyone.set()
                update(*args)

            return watch

    monkeypatch.setattr(module, "Progress", Watched)
    main = threading.main_thread().ident

    def fire() -> None:
        if first.wait(120):
            everyone.wait(30)
            time.sleep(delay)
            sent["sent"] = time.perf_counter()
            signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    return sent


def _sample_interrupted(monkeypatch, module=_sample, **kwargs):
    """Return kl.sample's result, the seconds from SIGINT to its return, its warnings."""
    sent = _interrupt_once_started(monkeypatch, module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = kl.sample(chains=_CHAINS, cores=_CHAINS, progressbar=False, random_seed=1, **kwargs)
    latency = time.perf_counter() - sent["sent"]
    interrupted = [w for w in caught if issubclass(w.category, ks.SamplingInterrupted)]
    return idata, latency, interrupted, caught


def _big_model() -> kl.Model:
    with kl.Model() as m:
        kl.Normal("x", 0.0, 1.0, shape=50)
    return m


def _warm(**kwargs) -> None:
    """Compile (and cache) the model's functions, so the timed call starts sampling soon."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kl.sample(draws=5, tune=5, chains=1, progressbar=False, **kwargs)


@pytest.mark.skipif(_c_nuts._compiler() is None, reason="no C compiler")
def test_ctrl_c_stops_the_c_kernel_within_a_second_and_keeps_the_draws(monkeypatch):
    with _big_model():
        _warm(backend="numba")
        idata, latency, interrupted, caught = _sample_interrupted(
            monkeypatch, draws=10**7, tune=0, backend="numba"
        )
    assert idata.attrs["nuts_kernel"] == "c"
    assert latency < _LATENCY_S
    n = idata["posterior"].sizes["draw"]
    assert 0 < n < 10**7 and idata["posterior"]["x"].shape == (2, n, 50)
    assert idata.attrs["interrupted"] == 1
    assert len(interrupted) == 1 and f"kept {n} draws per chain" in str(interrupted[0].message)
    assert not [w for w in caught if issubclass(w.category, ks.SamplingWarning)]


def test_ctrl_c_stops_the_numba_kernel_within_a_second(monkeypatch):
    monkeypatch.setattr(_c_nuts, "sample_chunk_for", lambda *args: None)  # no C compiler
    with _big_model():
        _warm(backend="numba")
        idata, latency, interrupted, _ = _sample_interrupted(
            monkeypatch, draws=10**7, tune=0, backend="numba"
        )
    assert idata.attrs["nuts_kernel"] == "numba"
    assert latency < _LATENCY_S
    assert 0 < idata["posterior"].sizes["draw"] < 10**7 and len(interrupted) == 1


def test_ctrl_c_stops_the_python_loop_of_the_vm_backend_and_keeps_the_draws(monkeypatch):
    with _big_model():
        _warm(backend="vm")
        idata, latency, interrupted, _ = _sample_interrupted(
            monkeypatch, draws=10**6, tune=0, backend="vm"
        )
    assert idata.attrs["nuts_kernel"] == "python"
    assert latency < _LATENCY_S
    n = idata["posterior"].sizes["draw"]
    assert 0 < n < 10**6 and idata["sample_stats"]["diverging"].shape == (2, n)
    assert len(interrupted) == 1 and "warming up" not in str(interrupted[0].message)


def test_ctrl_c_during_warm_up_returns_no_draws_and_says_warm_up_is_not_kept(monkeypatch):
    with _big_model():
        _warm(backend="vm")
        idata, latency, interrupted, _ = _sample_interrupted(
            monkeypatch, draws=100, tune=10**6, backend="vm"
        )
    assert latency < _LATENCY_S
    assert idata["posterior"]["x"].shape == (2, 0, 50)
    assert idata["sample_stats"]["diverging"].shape == (2, 0)
    (warning,) = interrupted
    assert "kept 0 draws per chain" in str(warning.message)
    assert "warm-up draws are not kept" in str(warning.message)


def test_ctrl_c_stops_gradient_free_steps_and_keeps_the_draws(monkeypatch):
    with _big_model() as m:
        step = kl.Metropolis([m["x"]])
        idata, latency, interrupted, _ = _sample_interrupted(
            monkeypatch, _compound, draws=10**7, tune=0, step=step, backend="vm"
        )
    assert latency < _LATENCY_S
    assert 0 < idata["posterior"].sizes["draw"] < 10**7 and len(interrupted) == 1


@pytest.mark.parametrize("engine", ["numpyro", "blackjax"])
@pytest.mark.parametrize("method", ["parallel", "vectorized"])
def test_ctrl_c_stops_the_jax_engines_between_chunks_and_keeps_the_draws(
    monkeypatch, engine, method
):
    pytest.importorskip(engine)
    from kiln_samplers import _jax_nuts

    options = {"chain_method": method}
    with _big_model():
        _warm(nuts_sampler=engine, nuts_sampler_kwargs=options)
        idata, latency, interrupted, caught = _sample_interrupted(
            monkeypatch, _jax_nuts, draws=10**7, tune=0, nuts_sampler=engine,
            nuts_sampler_kwargs=options,
        )  # fmt: skip
    assert latency < _LATENCY_S
    n = idata["posterior"].sizes["draw"]
    assert 0 < n < 10**7 and idata["posterior"]["x"].shape == (2, n, 50)
    assert idata["sample_stats"]["diverging"].shape == (2, n)
    assert idata.attrs["interrupted"] == 1
    assert len(interrupted) == 1 and f"kept {n} draws per chain" in str(interrupted[0].message)
    assert not [w for w in caught if issubclass(w.category, ks.SamplingWarning)]


#: Warm-up steps that take far longer than the test waits (blackjax's schedule is built
#: in Python, about 16 s per 10**6 steps, so it gets fewer).
_LONG_TUNE = {"numpyro": 10**7, "blackjax": 2 * 10**5}


@pytest.mark.parametrize("engine", ["numpyro", "blackjax"])
def test_ctrl_c_during_the_jax_engines_warm_up_returns_no_draws(monkeypatch, engine):
    pytest.importorskip(engine)
    from kiln_samplers import _jax_nuts

    with _big_model():
        _warm(nuts_sampler=engine)
        idata, latency, interrupted, _ = _sample_interrupted(
            monkeypatch, _jax_nuts, draws=100, tune=_LONG_TUNE[engine], nuts_sampler=engine
        )
    assert latency < _LATENCY_S
    assert idata["posterior"]["x"].shape == (2, 0, 50)
    assert idata["sample_stats"]["diverging"].shape == (2, 0)
    (warning,) = interrupted
    assert "kept 0 draws per chain" in str(warning.message)
    assert "warm-up draws are not kept" in str(warning.message)


@pytest.mark.parametrize("engine", ["numpyro", "blackjax"])
def test_an_interrupted_jax_run_compiles_no_expansion_for_its_number_of_draws(monkeypatch, engine):
    """A second interrupted run (another number of draws) finds every program cached.

    The draws are expanded in fixed-size batches, so no program depends on their number;
    the deterministics are those of the draws kept.
    """
    pytest.importorskip(engine)
    import jax.monitoring
    import numpy as np

    from kiln_samplers import _jax_nuts

    with kl.Model() as m:
        x = kl.Normal("x", 0.0, 1.0, shape=50)
        kl.Deterministic("ex", kl.math.exp(x))
    events: list[str] = []  # JAX's persistent-cache requests and hits

    def count(event: str, **kwargs) -> None:
        if event.startswith("/jax/compilation_cache/"):
            events.append(event.rsplit("/", 1)[1])

    run = {"draws": 10**7, "tune": 0, "nuts_sampler": engine}
    with m:
        first, *_ = _sample_interrupted(monkeypatch, _jax_nuts, **run)
        jax.monitoring.register_event_listener(count)
        try:
            second, latency, interrupted, _ = _sample_interrupted(monkeypatch, _jax_nuts, **run)
        finally:
            jax.monitoring.unregister_event_listener(count)
    assert latency < _LATENCY_S and len(interrupted) == 1
    n = second["posterior"].sizes["draw"]
    assert 0 < n < 10**7 and second["posterior"]["ex"].shape == (2, n, 50)
    requests = events.count("compile_requests_use_cache")
    assert requests > 0 and events.count("cache_hits") == requests  # nothing compiled
    xs = second["posterior"]["x"].values
    np.testing.assert_allclose(second["posterior"]["ex"].values, np.exp(xs), rtol=1e-15)
