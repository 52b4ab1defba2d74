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


def _interrupt_once_started(monkeypatch, module, delay: float = 0.5) -> dict[str, float]:
    """Send SIGINT to the main thread ``delay`` s after a chain's first progress report.

    Returns the dict that receives the signal's time (``"sent"``).
    """
    started = threading.Event()
    sent: dict[str, float] = {}

    class Watched(module.Progress):
        def updater(self, chain):
            update = super().updater(chain)

            def watch(*args):
                started.set()
                update(*args)

            return watch

    monkeypatch.setattr(module, "Progress", Watched)
    main = threading.main_thread().ident

    def fire() -> None:
        if started.wait(120):
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
        idata = kl.sample(chains=2, cores=2, progressbar=False, random_seed=1, **kwargs)
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
