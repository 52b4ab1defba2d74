"""numpyro's and blackjax's chains run in chunks: the chunking changes no draw.

The draws must not depend on where the chunks end (the chunks carry the sampler's state
and read keys split before the draws), and a run stopped after some chunks holds the
first draws of the uninterrupted run. blackjax's draws are those of the engine written
as one program (warm-up and draws, as before chunking); numpyro's agree with theirs to
rounding (XLA fuses, and so rounds, a program that runs warm-up and draws together
differently from two programs). blackjax's warm-up runs in chunks too: its window
adaptation's steps (``_blackjax_warmup``) give the state and parameters of its ``run``.
"""

from __future__ import annotations

import signal
import threading
import time
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("numpyro")
pytest.importorskip("blackjax")

import jax.numpy as jnp  # noqa: E402

import kiln_samplers as ks  # noqa: E402
from kiln_samplers import _jax_nuts  # noqa: E402

MU = np.array([1.0, -2.0, 0.5, 10.0])
SD = np.array([1.0, 0.1, 3.0, 20.0])
ENGINES = {"numpyro": ks.sample_numpyro, "blackjax": ks.sample_blackjax}
RUN = {"draws": 120, "tune": 80, "chains": 2, "random_seed": 11, "progressbar": False}


class JaxGaussian:
    """An independent normal posterior in the JAX path of the compiled-model protocol."""

    ndim = 4
    out_names = ["x"]

    def logp_jax(self, x):
        z = (x - MU) / SD
        return -0.5 * jnp.sum(z * z)

    def expand_jax(self, x):
        return {"x": x}

    def initial_point(self, seed=None):
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


def _chunks_of(monkeypatch, most: int | None, rows: int | None) -> None:
    """Make every chunk at most ``most`` transitions and the draw buffer ``rows`` rows."""
    if most is None:
        monkeypatch.setattr(_jax_nuts._Sizer, "size", lambda self, m: m)
    else:
        monkeypatch.setattr(_jax_nuts._Sizer, "size", lambda self, m: min(m, most))
    if rows is not None:
        monkeypatch.setattr(_jax_nuts, "CHUNK_BYTES", 8 * (JaxGaussian.ndim + 8) * rows)


def _assert_same(a: ks.Trace, b: ks.Trace) -> None:
    np.testing.assert_array_equal(a.unconstrained, b.unconstrained)
    np.testing.assert_array_equal(a.posterior["x"], b.posterior["x"])
    assert set(a.sample_stats) == set(b.sample_stats)
    for name, value in a.sample_stats.items():
        np.testing.assert_array_equal(value, b.sample_stats[name], err_msg=name)


@pytest.mark.parametrize("method", ["sequential", "vectorized"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_draws_do_not_depend_on_the_chunks(monkeypatch, engine, method):
    options = {"chain_method": method}
    with monkeypatch.context() as m:
        _chunks_of(m, None, None)  # one chunk of warm-up, one of draws
        whole, _ = ENGINES[engine](JaxGaussian(), **RUN, options=options)
    with monkeypatch.context() as m:
        _chunks_of(m, 7, 5)  # 16 warm-up chunks; 24 draw chunks of a 5-row buffer
        chunked, _ = ENGINES[engine](JaxGaussian(), **RUN, options=options)
    assert whole.unconstrained.shape == (2, 120, 4) and not whole.interrupted
    _assert_same(whole, chunked)


def _one_program_blackjax(key, x0):
    """Run the blackjax chain as one program: window adaptation, then a scan of draws."""
    import blackjax

    warm_key, draw_key = jax.random.split(key)
    warmup = blackjax.window_adaptation(blackjax.nuts, JaxGaussian().logp_jax)
    (state, params), _ = warmup.run(warm_key, x0, num_steps=RUN["tune"])
    step = blackjax.nuts(JaxGaussian().logp_jax, **params).step

    def body(s, k):
        s, _ = step(k, s)
        return s, s.position

    return jax.lax.scan(body, state, jax.random.split(draw_key, RUN["draws"]))[1]


def _one_program_numpyro(key, x0):
    """Run the numpyro chain as one program: initialization, warm-up and draws."""
    from numpyro.infer.hmc import hmc

    init_kernel, sample_kernel = hmc(potential_fn=lambda x: -JaxGaussian().logp_jax(x))
    state = init_kernel(x0, num_warmup=RUN["tune"], rng_key=key)
    state = jax.lax.fori_loop(0, RUN["tune"], lambda _, s: sample_kernel(s), state)

    def body(s, _):
        s = sample_kernel(s)
        return s, s.z

    return jax.lax.scan(body, state, None, length=RUN["draws"])[1]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_chunks_give_the_draws_of_the_chain_as_one_program(engine):
    trace, _ = ENGINES[engine](JaxGaussian(), **RUN, options={"chain_method": "sequential"})
    seeds = ks.chain_seeds(RUN["random_seed"], 2)
    one = {"numpyro": _one_program_numpyro, "blackjax": _one_program_blackjax}[engine]
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(_jax_nuts._key_seed(RUN["random_seed"])), 2)
        for c in range(2):
            x0 = jnp.asarray(JaxGaussian().initial_point(seeds[c]))
            reference = np.asarray(jax.jit(one)(keys[c], x0))
            if engine == "blackjax":
                np.testing.assert_array_equal(trace.unconstrained[c], reference)
            else:
                np.testing.assert_allclose(trace.unconstrained[c], reference, rtol=1e-6)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_stopped_run_keeps_the_first_draws_of_the_uninterrupted_run(monkeypatch, engine):
    """SIGINT once both chains made three chunks of draws: their first draws, cut alike."""
    _chunks_of(monkeypatch, 10, None)
    whole, _ = ENGINES[engine](JaxGaussian(), **RUN)
    seen = {0: 0, 1: 0}  # chunks of draws per chain (the chains' threads run apart)
    lock = threading.Lock()
    sent = threading.Event()
    main = threading.main_thread().ident

    class Interrupting(ks._progress.Progress):
        def updater(self, chain):
            update = super().updater(chain)

            def watch(n, stats, tuning):
                if not tuning:
                    with lock:
                        seen[chain] += 1
                        if min(seen.values()) == 3 and seen[chain] == 3:
                            signal.pthread_kill(main, signal.SIGINT)
                            sent.set()
                    if seen[chain] == 3:
                        # each chain waits here once, until a second after the signal,
                        # so that the main thread takes it before a fast chain runs to
                        # its end (a loaded machine delays the main thread)
                        sent.wait(30)
                        time.sleep(1.0)
                update(n, stats, tuning)

            return watch

    monkeypatch.setattr(_jax_nuts, "Progress", Interrupting)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        part, _ = ENGINES[engine](JaxGaussian(), **RUN)
    n = part.unconstrained.shape[1]
    assert part.interrupted and 30 <= n < RUN["draws"]
    assert part.unconstrained.shape == (2, n, 4)
    np.testing.assert_array_equal(part.unconstrained, whole.unconstrained[:, :n])
    for name, value in part.sample_stats.items():
        np.testing.assert_array_equal(value, whole.sample_stats[name][:, :n], err_msg=name)
    (warning,) = [w for w in caught if issubclass(w.category, ks.SamplingInterrupted)]
    assert f"kept {n} draws per chain from 2 of 2 chain(s)" in str(warning.message)


def test_blackjax_without_warm_up_samples_the_posterior():
    """``tune=0``: blackjax's window adaptation cannot run 0 steps; a searched step size."""
    trace, _ = ks.sample_blackjax(
        JaxGaussian(), draws=3000, tune=0, chains=2, random_seed=2, progressbar=False
    )
    flat = trace.posterior["x"].reshape(-1, 4)
    assert np.all(np.abs(flat.mean(0) - MU) < 6 * SD / np.sqrt(flat.shape[0] / 20))
    np.testing.assert_allclose(flat.std(0), SD, rtol=0.25)
    assert np.all(trace.sample_stats["step_size"] == trace.sample_stats["step_size"][0, 0])


def test_ctrl_c_during_blackjaxs_warm_up_stops_it_between_chunks(monkeypatch):
    """SIGINT at the first warm-up chunk: the warm-up stops there, no draws are kept."""
    _chunks_of(monkeypatch, 5, None)  # tune=80: 16 chunks of warm-up
    tuning_reports = []
    main = threading.main_thread().ident

    class Interrupting(ks._progress.Progress):
        def updater(self, chain):
            update = super().updater(chain)

            def watch(n, stats, tuning):
                if tuning:
                    tuning_reports.append(n)
                    if len(tuning_reports) == 1:
                        signal.pthread_kill(main, signal.SIGINT)
                update(n, stats, tuning)

            return watch

    monkeypatch.setattr(_jax_nuts, "Progress", Interrupting)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace, _ = ks.sample_blackjax(JaxGaussian(), **{**RUN, "chains": 1})
    assert trace.interrupted
    assert 1 <= len(tuning_reports) < 16 and sum(tuning_reports) < RUN["tune"]
    assert trace.unconstrained.shape == (1, 0, 4) and trace.posterior["x"].shape == (1, 0, 4)
    assert trace.sample_stats["diverging"].shape == (1, 0)
    (warning,) = [w for w in caught if issubclass(w.category, ks.SamplingInterrupted)]
    assert "kept 0 draws per chain" in str(warning.message)
    assert "1 chain(s) were still warming up" in str(warning.message)


@pytest.mark.parametrize("diagonal", [True, False])
@pytest.mark.parametrize("tune", [15, 80, 300])  # all fast; Stan's windows resized; 3 slow
def test_blackjaxs_window_adaptation_in_steps_equals_its_run(diagonal, tune):
    """``tune`` steps of ``window_steps``: the state and parameters of blackjax's ``run``."""
    import blackjax

    from kiln_samplers._blackjax_warmup import window_steps

    logp = JaxGaussian().logp_jax
    init, step, parameters = window_steps(logp, tune, diagonal, 0.8, 10)

    def in_steps(key, x0):
        chain, window = init(key, x0)
        chain, window = jax.lax.fori_loop(0, tune, lambda _, c: step(*c), (chain, window))
        return chain, parameters(window)

    def by_run(key, x0):
        warmup = blackjax.window_adaptation(
            blackjax.nuts, logp, is_mass_matrix_diagonal=diagonal, max_num_doublings=10
        )
        (chain, params), _ = warmup.run(key, x0, num_steps=tune)
        return chain, {k: params[k] for k in ("step_size", "inverse_mass_matrix")}

    with jax.enable_x64(True):
        key, x0 = jax.random.key(5), jnp.asarray(JaxGaussian().initial_point(3))
        ours, theirs = jax.jit(in_steps)(key, x0), jax.jit(by_run)(key, x0)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert ours[1]["inverse_mass_matrix"].shape == ((4,) if diagonal else (4, 4))
    if tune >= 150:  # the slow windows estimated the variances (Welford, shrunk to 1e-3)
        variances = np.asarray(ours[1]["inverse_mass_matrix"])
        variances = variances if diagonal else np.diag(variances)
        assert np.all(variances > 0) and not np.allclose(variances, 1.0)


class JaxWithDeterministic(JaxGaussian):
    """The Gaussian with a deterministic of another shape: ``exp(x)`` and a sum."""

    out_names = ["x", "ex", "total"]

    def expand_jax(self, x):
        return {"x": x, "ex": jnp.exp(x), "total": jnp.sum(x)}


@pytest.mark.parametrize("draws", [0, 1, 3, 4, 5, 13])
def test_expanding_in_fixed_batches_gives_the_direct_expansion(monkeypatch, draws):
    """Any number of draws (an interrupted run's) in batches of 4: the values of one vmap."""
    monkeypatch.setattr(_jax_nuts, "EXPAND_ROWS", 4)
    model = JaxWithDeterministic()
    xs = np.random.default_rng(draws).normal(size=(2, draws, 4))
    with jax.enable_x64(True):
        ours = _jax_nuts._posterior(model, xs)
        direct = jax.vmap(model.expand_jax)(jnp.asarray(xs.reshape(-1, 4)))
    assert set(ours) == set(model.out_names)
    assert ours["ex"].shape == (2, draws, 4) and ours["total"].shape == (2, draws)
    for name in model.out_names:
        expected = np.asarray(direct[name]).reshape(2, draws, *ours[name].shape[2:])
        np.testing.assert_allclose(ours[name], expected, rtol=1e-15, atol=0, err_msg=name)
    np.testing.assert_allclose(ours["ex"], np.exp(xs), rtol=1e-15)
    np.testing.assert_allclose(ours["total"], xs.sum(-1), rtol=1e-14)
