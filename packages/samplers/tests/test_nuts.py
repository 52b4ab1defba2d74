"""kiln's NUTS on models given as plain NumPy / Numba functions (no graphs)."""

from __future__ import annotations

import inspect
import math
import os
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from numba import carray, cfunc

import kiln_samplers as ks
from kiln_compile import CacheWarning, DiskCache
from kiln_samplers import _c_nuts, _dense_metric, _nuts_settings
from kiln_samplers import _nuts_core as core
from kiln_samplers._adaptation import final_buffer, regularized_variance, warmup_schedule
from kiln_samplers._native import NativeLogp
from kiln_samplers._nuts_settings import ADAPTATIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_models import LOGP_C, MU, SD, Native, gaussian_logp  # noqa: E402
from native_models import gaussian_native as _gaussian_native  # noqa: E402


class Gaussian:
    """An independent normal posterior, in the compiled-model protocol."""

    ndim = 4
    out_names = ["x"]
    dims = {"x": None}
    coords: dict = {}

    def logp_dlogp(self, x):
        z = (x - MU) / SD
        return -0.5 * float(z @ z), -z / SD

    def logp(self, x):
        return self.logp_dlogp(x)[0]

    def expand(self, x):
        return {"x": x.copy()}

    def initial_point(self, seed=None):
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


@cfunc(LOGP_C)
def _cauchy_c(n, x_, grad_, logp_, user_data):
    # Independent standard Cauchy coordinates: heavy tails and a curvature that changes
    # sign, where every U-turn check of a trajectory (across subtrees too) ends some.
    x, grad = carray(x_, (n,)), carray(grad_, (n,))
    total = 0.0
    for i in range(n):
        grad[i] = -2.0 * x[i] / (1.0 + x[i] * x[i])
        total += math.log1p(x[i] * x[i])
    logp_[0] = -total
    return 0


_cauchy_native = NativeLogp(Native(_cauchy_c))


def _check_posterior(trace, tol_sd=0.1):
    x = trace.posterior["x"].reshape(-1, 4)
    n = x.shape[0]
    # Means within 5 Monte Carlo standard errors (ESS ~ n / 2 is ample for NUTS here).
    se = SD / np.sqrt(n / 2)
    assert np.all(np.abs(x.mean(0) - MU) < 5 * se), (x.mean(0), MU)
    np.testing.assert_allclose(x.std(0), SD, rtol=tol_sd)


@pytest.mark.parametrize("native", [None, Native()], ids=["python", "numba"])
def test_samples_a_badly_scaled_gaussian(native):
    trace = ks.sample_nuts(
        Gaussian(), draws=1000, tune=1000, chains=2, random_seed=3, native=native, progressbar=False
    )
    _check_posterior(trace)
    stats = trace.sample_stats
    assert not stats["diverging"].any()
    assert 0.6 < stats["acceptance_rate"].mean() < 0.95  # dual averaging targets 0.8
    assert stats["tree_depth"].mean() < 3.5  # the adapted metric makes it isotropic
    assert set(stats) == set(ks.STAT_NAMES)


def test_the_same_seed_gives_the_same_draws_whatever_the_cores():
    kwargs = dict(draws=200, tune=200, chains=3, random_seed=11, native=Native(), progressbar=False)
    a = ks.sample_nuts(Gaussian(), cores=1, **kwargs)
    b = ks.sample_nuts(Gaussian(), cores=3, **kwargs)
    np.testing.assert_array_equal(a.unconstrained, b.unconstrained)
    c = ks.sample_nuts(Gaussian(), cores=1, **{**kwargs, "random_seed": 12})
    assert not np.array_equal(a.unconstrained, c.unconstrained)


def test_chain_seeds_of_a_seed_sequence_are_its_children_and_leave_it_unchanged():
    """A chain's task (kl.sample(executor=...)) hands its SeedSequence to an engine."""
    seq = np.random.SeedSequence(7).spawn(4)[2]
    seeds = ks.chain_seeds(seq, 3)
    expected = np.random.SeedSequence(7).spawn(4)[2].spawn(3)
    for got, want in zip(seeds, expected, strict=True):
        np.testing.assert_array_equal(got.generate_state(4), want.generate_state(4))
    assert seq.n_children_spawned == 0
    again = ks.chain_seeds(seq, 3)
    np.testing.assert_array_equal(again[1].generate_state(4), seeds[1].generate_state(4))
    assert [s.spawn_key for s in ks.chain_seeds([1, 2], 2)] == [(), ()]


def test_the_python_and_numba_kernels_make_valid_draws_from_one_seed():
    a = ks.sample_nuts(Gaussian(), draws=300, tune=300, chains=1, random_seed=5, progressbar=False)
    b = ks.sample_nuts(
        Gaussian(), draws=300, tune=300, chains=1, random_seed=5, native=Native(), progressbar=False
    )
    assert a.unconstrained.shape == b.unconstrained.shape == (1, 300, 4)


@pytest.mark.parametrize("adaptation", ADAPTATIONS)
def test_chains_that_start_in_python_while_the_kernel_compiles_continue_bit_for_bit(
    monkeypatch, adaptation
):
    """The Python pieces before the Numba kernel is ready change no draw."""
    from kiln_samplers import _c_nuts, _numba_nuts

    monkeypatch.setattr(_c_nuts, "sample_chunk_for", lambda *args: None)  # no C compiler

    kwargs = dict(
        draws=150, tune=150, chains=2, random_seed=4, native=Native(), progressbar=False,
        settings=ks.NutsSettings(adaptation=adaptation),
    )  # fmt: skip
    compiled = ks.sample_nuts(Gaussian(), **kwargs)
    polls = {"n": 0}

    def pending() -> bool:  # "still compiling" for the first 6 checks
        polls["n"] += 1
        return polls["n"] <= 6

    monkeypatch.setattr(_numba_nuts, "kernel_pending", pending)
    hybrid = ks.sample_nuts(Gaussian(), **kwargs)
    assert polls["n"] > 6  # some pieces ran in Python, then the kernel took over
    np.testing.assert_array_equal(hybrid.unconstrained, compiled.unconstrained)
    for name in ks.STAT_NAMES:
        np.testing.assert_array_equal(hybrid.sample_stats[name], compiled.sample_stats[name])


def test_a_stop_request_returns_what_was_drawn():
    model = Gaussian()
    state = ks.init_chain(model, 0)
    stop = threading.Event()
    calls = []

    def progress(n, stats, tuning):
        calls.append(n)
        if sum(calls) >= 300:
            stop.set()

    result = ks.run_chain(model, state, 1000, 200, ks.NutsSettings(), Native(), progress, stop)
    assert result.warmup_done and 0 < result.n_done < 1000
    assert result.draws.shape == (result.n_done, 4)


def test_a_divergence_is_detected_and_reported():
    class Funnel(Gaussian):
        ndim = 2

        def logp_dlogp(self, x):
            with np.errstate(all="ignore"):
                return self._logp_dlogp(x)

        def _logp_dlogp(self, x):
            v, z = x
            lp = -0.5 * v**2 / 9.0 - 0.5 * z**2 * np.exp(-v) - 0.5 * v
            return lp, np.array([-v / 9.0 + 0.5 * z**2 * np.exp(-v) - 0.5, -z * np.exp(-v)])

        def initial_point(self, seed=None):
            return np.random.default_rng(seed).uniform(-1, 1, 2)

    trace = ks.sample_nuts(
        Funnel(), draws=300, tune=300, chains=2, random_seed=1, progressbar=False
    )
    assert trace.sample_stats["diverging"].sum() > 0
    idata = ks.to_datatree(trace)
    with pytest.warns(ks.SamplingWarning) as record:
        report = ks.check_diagnostics(idata, 10)
    assert any("divergences" in str(w.message) for w in record)
    assert report["divergences"] == trace.sample_stats["diverging"].sum()


def test_stan_warmup_schedule():
    assert warmup_schedule(1000) == (75, [100, 150, 250, 450, 950])
    # kiln's default ends with the last 15%, at least Stan's 50
    assert [final_buffer(t) for t in (100, 300, 1000, 2000)] == [50, 50, 150, 300]
    assert warmup_schedule(1000, term_buffer=final_buffer(1000)) == (75, [100, 150, 250, 450, 850])
    start, ends = warmup_schedule(100)  # short: 15% / 75% / 10%
    assert start == 15 and ends == [90]
    assert warmup_schedule(10) == (10, [])
    welford = np.zeros((3, 2))
    xs = np.random.default_rng(0).normal(size=(500, 2)) * [1.0, 3.0]
    for x in xs:
        welford[0, 0] += 1
        delta = x - welford[1]
        welford[1] += delta / welford[0, 0]
        welford[2] += delta * (x - welford[1])
    n = 500
    expected = n / (n + 5) * xs.var(0, ddof=1) + 1e-3 * 5 / (n + 5)
    np.testing.assert_allclose(regularized_variance(welford), expected)


def test_leapfrog_conserves_energy_for_small_steps():
    model = Gaussian()
    ud = 0
    q = np.zeros(4)
    g = np.empty(4)
    _gaussian_native(q, g, ud)
    p = np.ones(4)
    inv_mass = SD**2
    h0 = -model.logp(q) + core.kinetic(p, inv_mass)
    q1, p1, g1 = np.empty(4), np.empty(4), np.empty(4)
    logp = core.leapfrog(_gaussian_native, ud, q, p, g, 1e-3, inv_mass, q1, p1, g1)
    assert abs(-logp + core.kinetic(p1, inv_mass) - h0) < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"draws": 0}, "draws"),
        ({"chains": 0}, "chains"),
        ({"tune": -1}, "tune"),
        ({"draws": 1.5}, "draws"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ks.sample_nuts(Gaussian(), progressbar=False, **kwargs)


def test_bad_settings():
    with pytest.raises(ValueError, match="target_accept"):
        ks.NutsSettings(target_accept=1.5)
    with pytest.raises(ValueError, match="max_treedepth"):
        ks.NutsSettings(max_treedepth=0)


def test_a_log_density_that_raises_rejects_the_point():
    """As in Stan: an error at a leapfrog point (e.g. a failed Cholesky) is a divergence."""

    class Walled(Gaussian):
        ndim = 1

        def logp_dlogp(self, x):
            if x[0] > 0.5:
                raise np.linalg.LinAlgError("not positive definite")
            return -0.5 * float(x[0] ** 2), -x.copy()

        def initial_point(self, seed=None):
            return np.array([-0.5])

    trace = ks.sample_nuts(
        Walled(), draws=200, tune=200, chains=1, random_seed=2, progressbar=False
    )
    x = trace.posterior["x"].ravel()
    assert x.max() <= 0.5 and trace.sample_stats["diverging"].sum() > 0


def test_without_tuning_the_initial_step_size_search_is_used():
    kwargs = dict(draws=50, tune=0, chains=1, random_seed=4, progressbar=False)
    trace = ks.sample_nuts(Gaussian(), **kwargs)  # a diagonal metric: no jitter
    step = trace.sample_stats["step_size"]
    assert np.all(step == step[0, 0]) and 0.0 < step[0, 0] < 0.5  # the heuristic's, not 1.0
    # Jittered: each transition's step is within 10% of that one.
    jittered = ks.NutsSettings(step_size_jitter=0.1)
    ratio = ks.sample_nuts(Gaussian(), settings=jittered, **kwargs).sample_stats["step_size"]
    ratio = ratio / step[0, 0]
    assert np.all((0.9 <= ratio) & (ratio <= 1.1)) and np.ptp(ratio) > 0.1


def test_the_default_jitter_follows_the_mass_matrix():
    default, grad = ks.NutsSettings(), ks.NutsSettings(adaptation="grad")
    assert _nuts_settings.jitter_of(default, None) == 0.0  # Stan's diagonal metric
    assert _nuts_settings.jitter_of(grad, None) == _nuts_settings.GAUSSIAN_JITTER == 0.1  # nutpie's
    dense = _dense_metric.DenseMetric(3)
    assert _nuts_settings.jitter_of(default, dense) == 0.0  # diagonal until it adapts
    dense.factor[:] = np.linalg.cholesky(np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0, 0, 1]]))
    assert _nuts_settings.jitter_of(default, dense) == 0.1
    assert _nuts_settings.jitter_of(ks.NutsSettings(step_size_jitter=0.0), dense) == 0.0
    with pytest.raises(
        ValueError, match=r"step_size_jitter: expected None or a number in \[0, 1\), got 1.5"
    ):
        ks.NutsSettings(step_size_jitter=1.5)


def test_the_step_size_jitter_is_uniform_over_its_band():
    # 2000 draws of the factor: their quartiles against the uniform's (a 3-sigma band).
    trace = ks.sample_nuts(
        Gaussian(), settings=ks.NutsSettings(step_size_jitter=0.3), draws=2000, tune=0,
        chains=1, random_seed=5, progressbar=False,
    )  # fmt: skip
    factor = trace.sample_stats["step_size"].ravel()
    factor = factor / factor.mean()
    assert np.all((0.7 - 1e-2 <= factor) & (factor <= 1.3 + 1e-2))
    quartiles = np.quantile(factor, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(quartiles, [0.85, 1.0, 1.15], atol=0.03)


def test_log_add_exp_matches_numpy():
    values = [-np.inf, -800.0, -3.0, 0.0, 2.5, 700.0]
    for a in values:
        for b in values:
            assert core.log_add_exp(a, b) == pytest.approx(np.logaddexp(a, b), rel=1e-14)


_FOLDER_STORE = (
    "import pathlib, sys\n"
    "from kiln_samplers import _c_nuts, _numba_nuts as nn\n"
    "class Store:\n"
    "    def get(self, key):\n"
    "        return None\n"
    "    def put(self, key, payload):\n"
    "        return False\n"
    "    def folder(self, *parts, whole_tree=False):\n"
    "        path = pathlib.Path(sys.argv[1]).joinpath(*parts)\n"
    "        path.mkdir(parents=True, exist_ok=True)\n"
    "        return path\n"
    "_c_nuts.use_kernel_store(Store() if sys.argv[1] else None)\n"
)


def test_prefetch_compiles_the_kernel_in_another_process(tmp_path):
    """An empty cache: prefetch starts a process whose compile the kernel then loads."""
    import subprocess
    import sys

    script = _FOLDER_STORE + (
        "was_cached = nn._kernel_cached(nn._cache_folder())\n"
        "nn.prefetch()\n"
        "started = nn._prefetching is not None\n"
        "nn.compiled_sample_chunk()\n"
        "stats = nn.compiled_sample_chunk().stats\n"
        "print(was_cached, started, sum(stats.cache_hits.values()),"
        " nn._kernel_cached(nn._cache_folder()))\n"
    )
    run = [sys.executable, "-c", script, str(tmp_path / "store")]
    first = subprocess.run(run, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    # The kernel was missing, a background process compiled it, and this one loaded it.
    assert first.stdout.split() == ["False", "True", "1", "True"]
    second = subprocess.run(run, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["True", "False", "1", "True"]
    # Numba's cache files are in the store's folder, private to the user.
    files = [p for p in (tmp_path / "store" / "numba").rglob("*") if p.is_file()]
    assert any(p.suffix == ".nbi" for p in files)
    assert all(p.stat().st_mode & 0o077 == 0 for p in files)


def test_without_a_store_the_numba_kernel_writes_nothing(tmp_path):
    """No kernel store (or the cache off): compiled in this process, no file anywhere."""
    import os
    import subprocess
    import sys

    script = _FOLDER_STORE + (
        "nn.prefetch()\n"
        "assert nn._prefetching is None\n"
        "print(sum(nn.compiled_sample_chunk().stats.cache_hits.values()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-B", "-c", script, ""], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]
    assert list(tmp_path.rglob("*")) == []


# kiln's C kernel: the same draws as the Python and Numba kernels, and its cache.

_needs_cc = pytest.mark.skipif(_c_nuts._compiler() is None, reason="no C compiler")


def _chunk(
    sample_chunk, seed, adapt_step_size, collect_variance, update_metric, n_draws=200,
    max_depth=10, model=_gaussian_native, inv_mass=(1.0, 0.01, 9.0, 400.0), jitter=0.0,
    count=0.0,
):  # fmt: skip
    """Run ``sample_chunk`` on a 4-d model from one state; return everything it wrote.

    Without ``adapt_step_size`` the step size is 1 (``exp(adapt[LOG_EPS_BAR])``);
    ``count``: the dual averaging's count, as restarted there.
    """
    user_data = 0
    rng = np.random.default_rng(seed)
    q = np.array([0.1, 0.2, 0.3, 0.4])
    grad = np.empty(4)
    logp = model(q, grad, user_data)
    adapt = np.array([np.log(0.3), 0.0, 0.0, count, np.log(3.0), count])
    welford = np.zeros((core.WELFORD_ROWS, 4))
    inv_mass = np.array(inv_mass)
    draws, stats = np.empty((n_draws, 4)), np.empty((n_draws, core.N_STATS))
    logp = sample_chunk(
        model, user_data, rng, q, grad, logp, inv_mass, adapt, welford, n_draws,
        draws, stats, 0.8, max_depth, 1000.0, jitter, adapt_step_size, collect_variance,
        update_metric,
    )  # fmt: skip
    return [logp, q, grad, inv_mass, adapt, welford, draws, stats, rng.random()]


@_needs_cc
@pytest.mark.parametrize(
    "flags",
    [
        (core.ADAPT_ACCEPT, True, False, 0.0),
        (core.ADAPT_OFF, False, False, 0.0),
        (core.ADAPT_ACCEPT, True, True, 0.0),
        (core.ADAPT_ACCEPT, False, True, 0.0),
        (core.ADAPT_SYMMETRIC, True, True, 0.1),
        (core.ADAPT_OFF, False, False, 0.3),
    ],
)
@_needs_cc
def test_the_c_kernel_computes_what_the_python_core_computes_to_the_bit(flags):
    # flags: adapt_step_size, collect_variance, update_metric (the gradient-based
    # metric), step-size jitter
    *flags, jitter = flags
    c_chunk = _c_nuts.sample_chunk_for(_gaussian_native)
    assert c_chunk is not None, _c_nuts._state.error
    for seed in (0, 1):
        expected = _chunk(core.sample_chunk, seed, *flags, jitter=jitter)
        got = _chunk(c_chunk, seed, *flags, jitter=jitter)
        for a, b in zip(expected, got, strict=True):
            np.testing.assert_array_equal(a, b)  # the generator too: the same numbers drawn


@_needs_cc
def test_the_c_kernel_agrees_to_the_bit_after_a_restart_that_counts_from_400():
    c_chunk = _c_nuts.sample_chunk_for(_gaussian_native)
    assert c_chunk is not None, _c_nuts._state.error
    flags = (core.ADAPT_ACCEPT, True, False)
    expected = _chunk(core.sample_chunk, 0, *flags, count=400.0)
    got = _chunk(c_chunk, 0, *flags, count=400.0)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)
    assert expected[4][core.COUNT] == 600.0  # 200 draws on from 400


def test_the_averaged_step_restarts_with_weight_one_whatever_the_count():
    for count in (0.0, 400.0):
        adapt = np.array([np.log(0.3), 0.0, 0.0, count, np.log(3.0), count])
        core.dual_averaging(adapt, 0.6, 0.8)
        assert adapt[core.LOG_EPS_BAR] == adapt[core.LOG_EPS]  # the first iterate, alone
        # the gain: about 1 / (γ √count) on the first error, (0.8 - 0.6) / (count + T0)
        h = 0.2 / (count + 1.0 + core.T0)
        expected = np.log(3.0) - np.sqrt(count + 1.0) / core.GAMMA * h
        assert adapt[core.LOG_EPS] == pytest.approx(expected)
        previous = adapt[core.LOG_EPS_BAR]
        core.dual_averaging(adapt, 0.9, 0.8)
        weight = 2.0**-core.KAPPA  # the second iterate's weight, counted from the restart
        assert adapt[core.LOG_EPS_BAR] == pytest.approx(
            weight * adapt[core.LOG_EPS] + (1 - weight) * previous
        )


@_needs_cc
def test_the_c_kernel_agrees_to_the_bit_where_every_u_turn_check_ends_trajectories(
    monkeypatch,
):
    # The U-turn checks of nuts_step: each balanced sub-subtree's own ends, its first
    # half extended by the second half's first leaf, the second half extended by the
    # first half's last leaf; at the top, the same two across the merge and the whole.
    # On these chunks every one of them ends some trajectory, and C agrees to the bit.
    sites = [
        number
        for number, line in enumerate(inspect.getsourcelines(core.nuts_step)[0])
        if "is_turning(" in line
    ]
    first = inspect.getsourcelines(core.nuts_step)[1]
    assert len(sites) == 6
    fired = set()
    is_turning = core.is_turning

    def recording(*args):
        turning = is_turning(*args)
        if turning:
            fired.add(sys._getframe(1).f_lineno - first)
        return turning

    monkeypatch.setattr(core, "is_turning", recording)
    c_chunk = _c_nuts.sample_chunk_for(_cauchy_native)
    assert c_chunk is not None, _c_nuts._state.error
    kwargs = dict(n_draws=300, model=_cauchy_native, inv_mass=(1.0, 1.0, 1.0, 1.0))
    for seed in (0, 1):
        expected = _chunk(core.sample_chunk, seed, False, False, False, **kwargs)
        got = _chunk(c_chunk, seed, False, False, False, **kwargs)
        for a, b in zip(expected, got, strict=True):
            np.testing.assert_array_equal(a, b)
    assert fired == set(sites)


@_needs_cc
@pytest.mark.parametrize(
    "settings",
    [{"adaptation": "stan", "metric": "diag"}, {"adaptation": "stan", "metric": "dense"},
     {"adaptation": "grad"}],
    ids=["stan-diag", "stan-dense", "grad"],
)  # fmt: skip
def test_the_c_and_numba_kernels_make_the_same_chains(monkeypatch, settings):
    # The dense metric's map is C (kiln_affine_logp): the Numba kernel calls it too.
    kwargs = dict(
        draws=300, tune=300, chains=2, random_seed=8, native=Native(), progressbar=False,
        settings=ks.NutsSettings(**settings),
    )  # fmt: skip
    c = ks.sample_nuts(Gaussian(), **kwargs)
    _check_posterior(ks.sample_nuts(Gaussian(), **{**kwargs, "draws": 1000, "tune": 1000}))
    monkeypatch.setattr(_c_nuts, "sample_chunk_for", lambda *args: None)
    numba = ks.sample_nuts(Gaussian(), **kwargs)
    np.testing.assert_array_equal(c.unconstrained, numba.unconstrained)
    for name in ks.STAT_NAMES:
        np.testing.assert_array_equal(c.sample_stats[name], numba.sample_stats[name])


@cfunc(LOGP_C)
def _walled_c(n, x_, grad_, logp_, user_data):
    x, grad = carray(x_, (n,)), carray(grad_, (n,))
    if x[0] > 0.5:
        return 1  # a point the model rejects (e.g. a raised error)
    grad[0] = -x[0]
    logp_[0] = -0.5 * x[0] * x[0]
    return 0


@cfunc(LOGP_C)
def _broken_c(n, x_, grad_, logp_, user_data):
    x, grad = carray(x_, (n,)), carray(grad_, (n,))
    if x[0] > 0.5:
        return -7  # fatal
    grad[0] = -x[0]
    logp_[0] = -0.5 * x[0] * x[0]
    return 0


class _Walled(Gaussian):
    ndim = 1

    def initial_point(self, seed=None):
        return np.array([-0.5])


class _WalledNative(Native):
    def __init__(self):
        super().__init__(_walled_c, 1)


@_needs_cc
def test_an_error_raised_by_the_model_rejects_the_point_in_c(capfd):
    trace = ks.sample_nuts(
        _Walled(), draws=300, tune=300, chains=1, random_seed=2, native=_WalledNative(),
        progressbar=False,
    )  # fmt: skip
    x = trace.posterior["x"].ravel()
    assert x.max() <= 0.5 and trace.sample_stats["diverging"].sum() > 0
    assert "Exception" not in capfd.readouterr().err  # nothing printed per rejected point


@pytest.mark.parametrize("kernel", ["c", "numba"])
def test_a_fatal_code_from_the_model_stops_sampling_with_what_it_means(kernel, monkeypatch):
    if kernel == "numba":
        monkeypatch.setattr(_c_nuts, "sample_chunk_for", lambda *args: None)
    elif _c_nuts._compiler() is None:
        pytest.skip("no C compiler")
    with pytest.raises(RuntimeError, match="native log-density"):
        ks.sample_nuts(
            _Walled(), draws=300, tune=300, chains=1, random_seed=2,
            native=Native(_broken_c, 1), progressbar=False,
        )  # fmt: skip


def _fresh_state(monkeypatch, tmp_path):
    """Start as a new process would: no kernel loaded, a disk cache at ``tmp_path``."""
    store = DiskCache("samplers", root=tmp_path)
    monkeypatch.setattr(_c_nuts, "_store", store)
    monkeypatch.setattr(_c_nuts, "_state", _c_nuts._State())
    return store


@_needs_cc
def test_the_library_is_built_once_and_a_damaged_one_is_built_again(monkeypatch, tmp_path):
    store = _fresh_state(monkeypatch, tmp_path)
    assert _c_nuts.library() is not None
    (entry,) = (tmp_path / "samplers").iterdir()
    mtime = entry.stat().st_mtime_ns
    # No copy on disk is left; an in-memory copy stays open while the kernel is mapped.
    assert _c_nuts._state.path is None
    fd = _c_nuts._state.fd
    assert fd is None or os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:kiln-nuts")
    assert not list(Path(tempfile.gettempdir()).glob(f"kiln-nuts-{os.getpid()}-*"))
    _fresh_state(monkeypatch, tmp_path)
    assert _c_nuts.library() is not None and entry.stat().st_mtime_ns == mtime  # reused
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    corrupt = store.stats.corrupt
    _fresh_state(monkeypatch, tmp_path)
    assert _c_nuts.library() is not None
    assert store.stats.corrupt == corrupt + 1  # found damaged, discarded, built again
    assert entry.is_file() and entry.stat().st_mtime_ns != mtime


@_needs_cc
def test_without_a_store_the_kernel_is_built_for_the_process(monkeypatch):
    monkeypatch.setattr(_c_nuts, "_store", None)
    monkeypatch.setattr(_c_nuts, "_state", _c_nuts._State())
    assert _c_nuts.library() is not None


@_needs_cc
def test_a_cache_that_cannot_be_written_still_gives_the_kernel(monkeypatch, tmp_path):
    root = tmp_path / "not-a-folder"
    root.write_text("")  # the cache root is a file (works as root too, unlike chmod)
    _fresh_state(monkeypatch, root)
    with pytest.warns(CacheWarning, match="cannot write the cache folder"):
        assert _c_nuts.library() is not None


@_needs_cc
def test_without_a_c_compiler_the_numba_kernel_runs(monkeypatch, tmp_path):
    _fresh_state(monkeypatch, tmp_path)
    monkeypatch.setattr(_c_nuts, "_compiler", lambda: None)
    assert _c_nuts.prefetch() is False
    assert _c_nuts.sample_chunk_for(_gaussian_native) is None
    assert "no C compiler" in _c_nuts._state.error
    trace = ks.sample_nuts(
        Gaussian(), draws=100, tune=100, chains=1, random_seed=1, native=Native(),
        progressbar=False,
    )  # fmt: skip
    assert trace.unconstrained.shape == (1, 100, 4)


@_needs_cc
def test_a_compiler_that_fails_leaves_the_numba_kernel(monkeypatch, tmp_path):
    _fresh_state(monkeypatch, tmp_path)
    monkeypatch.setattr(_c_nuts, "_FLAGS", (*_c_nuts._FLAGS, "-DKILN_NOT_A_FLAG", "--no-such"))
    assert _c_nuts.library() is None
    assert "failed" in _c_nuts._state.error
    assert not (tmp_path / "samplers").exists()  # nothing written


@cfunc(LOGP_C)
def _picky_c(n, x_, grad_, logp_, user_data):
    """``gaussian_c``'s Gaussian; rejects x[0] < 0 (code 1), fails at x[0] > 100 (-3)."""
    x = carray(x_, (n,))
    if x[0] > 100.0:
        return -3
    if x[0] < 0.0:
        return 1
    return gaussian_logp(n, x_, grad_, logp_)


@_needs_cc
def test_the_c_kernel_computes_a_windows_gradients_as_the_python_loop_does():
    assert _c_nuts.library() is not None
    fn = NativeLogp(Native(_picky_c))
    x = np.random.default_rng(3).normal(2.0, 1.0, size=(50, 4))
    x[:, 0] = np.abs(x[:, 0])
    x[7, 0] = -1.0
    want = np.empty_like(x)
    for i, row in enumerate(x):
        fn(row, want[i], fn.user_data)
    got = _c_nuts.gradients(fn, x)
    assert np.isnan(got[7]).all() and not np.isnan(np.delete(got, 7, axis=0)).any()
    np.testing.assert_array_equal(np.delete(got, 7, axis=0), np.delete(want, 7, axis=0))
    x[20, 0] = 101.0
    with pytest.raises(RuntimeError, match="native log-density failed: the test model's code -3"):
        _c_nuts.gradients(fn, x)
