"""kiln's default mass matrix, ``NutsSettings(metric="auto")``.

Diagonal, or dense where the warm-up finds correlations on a posterior that looks
Gaussian.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from arviz_stats import ess

import kiln_samplers as ks
from kiln_samplers import _c_nuts, _dense_metric, _nuts
from kiln_samplers._dense_metric import prefers_dense

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_models import Native, correlated_gaussian  # noqa: E402

# Correlated and badly scaled: a diagonal metric cannot make it isotropic.
SCALES = np.array([1.0, 0.01, 5.0, 2.0, 100.0])
CORR = 0.97 ** np.abs(np.subtract.outer(np.arange(5), np.arange(5)))
MEAN = np.array([1.0, -0.02, 3.0, 0.0, 50.0])
_correlated_c, Correlated = correlated_gaussian(MEAN, CORR * np.outer(SCALES, SCALES))
# The same scales, independent coordinates: the diagonal metric fits it.
_independent_c, Independent = correlated_gaussian(MEAN, np.diag(SCALES**2))


def _sample(model, c_function, metric="auto", native=True, seed=5, draws=1000):
    return ks.sample_nuts(
        model(), draws=draws, tune=1000, chains=2, random_seed=seed,
        native=Native(c_function, n=5) if native else None,
        settings=ks.NutsSettings(metric=metric), progressbar=False,
    )  # fmt: skip


@pytest.mark.parametrize("native", [False, True], ids=["python", "c"])
def test_auto_takes_the_dense_metric_for_a_correlated_gaussian(native):
    trace = _sample(Correlated, _correlated_c, native=native)
    assert trace.metric == "dense"
    x = trace.posterior["x"].reshape(-1, 5)
    se = SCALES / np.sqrt(x.shape[0] / 2)
    assert np.all(np.abs(x.mean(0) - MEAN) < 5 * se), (x.mean(0), MEAN)
    np.testing.assert_allclose(x.std(0), SCALES, rtol=0.1)
    np.testing.assert_allclose(np.corrcoef(x, rowvar=False), CORR, atol=0.03)
    stats = trace.sample_stats
    assert not stats["diverging"].any()
    assert stats["tree_depth"].mean() < 3.0  # isotropic in the dense metric's coordinates
    # Under the dense metric the step size is jittered by 10% around the adapted one.
    ratio = stats["step_size"] / stats["step_size_bar"]
    assert np.all((0.9 <= ratio) & (ratio <= 1.1)) and np.ptp(ratio) > 0.15
    diag = _sample(Correlated, _correlated_c, "diag", native=native)
    assert 2 * stats["n_steps"].mean() < diag.sample_stats["n_steps"].mean()


def _as_stan(monkeypatch):
    """Make ``metric="auto"``'s diagonal warm-up Stan's.

    The variance of the draws after the last window, Stan's final 50 iterations, its
    acceptance statistic and its dual averaging restarted at 0.
    """
    monkeypatch.setattr(_nuts, "gradient_variance", _nuts.regularized_variance)
    monkeypatch.setattr(_nuts, "GAUSSIAN_FINAL_COUNT", 0.0)
    monkeypatch.setattr(_nuts, "final_buffer", lambda tune: 50)
    monkeypatch.setattr(_nuts, "AUTO_FINAL_STEP", _nuts.core.ADAPT_ACCEPT)


def test_auto_keeps_the_diagonal_metric_where_it_fits(monkeypatch):
    auto = _sample(Independent, _independent_c, draws=300)
    diag = _sample(Independent, _independent_c, "diag", draws=300)
    assert auto.metric == diag.metric == "diag"
    assert np.all(auto.sample_stats["step_size"] == auto.sample_stats["step_size_bar"])
    x = auto.posterior["x"].reshape(-1, 5)
    np.testing.assert_allclose(x.std(0), SCALES, rtol=0.2)
    # Its longer step-size-only end settles closer to target_accept=0.8 (0.85-0.86
    # against Stan's 0.89-0.92 over seeds 1-5).
    accept, stan_accept = (t.sample_stats["acceptance_rate"].mean() for t in (auto, diag))
    assert 0.8 < accept < stan_accept - 0.015, (accept, stan_accept)
    # That, its statistic and the last window's estimate (nutpie's) are all that differ
    # from Stan's.
    _as_stan(monkeypatch)
    as_stan = _sample(Independent, _independent_c, draws=300)
    np.testing.assert_array_equal(as_stan.unconstrained, diag.unconstrained)


def test_auto_keeps_the_diagonal_metric_above_its_size_limit(monkeypatch):
    monkeypatch.setattr(_nuts, "AUTO_MAX_DIM", 4)
    _as_stan(monkeypatch)
    auto = _sample(Correlated, _correlated_c, draws=200)
    diag = _sample(Correlated, _correlated_c, "diag", draws=200)
    assert auto.metric == "diag"
    np.testing.assert_array_equal(auto.unconstrained, diag.unconstrained)


def test_without_the_c_kernel_auto_says_it_keeps_the_diagonal_metric(monkeypatch):
    monkeypatch.setattr(_c_nuts, "affine_logp_address", lambda: None)
    monkeypatch.setattr(_nuts, "_warned", set())
    with pytest.warns(RuntimeWarning, match="metric='auto'.*keep the diagonal mass matrix"):
        trace = _sample(Correlated, _correlated_c, draws=300)
    assert trace.metric == "diag"
    assert trace.kernel == "c"
    x = trace.posterior["x"].reshape(-1, 5)
    np.testing.assert_allclose(x.std(0), SCALES, rtol=0.25)


@pytest.mark.skipif(_c_nuts.affine_logp_address() is None, reason="needs the C kernel")
def test_the_c_and_numba_kernels_switch_to_the_dense_metric_alike(monkeypatch):
    c = _sample(Correlated, _correlated_c, draws=200)
    monkeypatch.setattr(_c_nuts, "sample_chunk_for", lambda *args: None)
    numba = _sample(Correlated, _correlated_c, draws=200)
    assert c.metric == numba.metric == "dense"
    assert (c.kernel, numba.kernel) == ("c", "numba")
    np.testing.assert_array_equal(c.unconstrained, numba.unconstrained)
    for name in ks.STAT_NAMES:
        np.testing.assert_array_equal(c.sample_stats[name], numba.sample_stats[name])


class ShearedFunnel:
    """A mild Neal funnel, sheared: correlated coordinates, and no Gaussian.

    ``v ~ N(0, 1.5)``, ``x_i | v ~ N(0, exp(v / 2))``, ``y = shear (v, x)``.
    """

    ndim, sd = 5, 1.5
    shear = np.eye(5) + 0.9 * np.tril(np.ones((5, 5)), -1)
    unshear = np.linalg.inv(shear)
    out_names = ["y"]
    dims = {"y": None}
    coords: dict = {}

    def logp_dlogp(self, y):
        z = self.unshear @ y
        v, x = z[0], z[1:]
        logp = -0.5 * v**2 / self.sd**2 - 0.5 * (x @ x) * np.exp(-v) - 0.5 * x.size * v
        dz = np.concatenate([[-v / self.sd**2 + 0.5 * (x @ x) * np.exp(-v) - 0.5 * x.size],
                             -x * np.exp(-v)])  # fmt: skip
        return float(logp), self.unshear.T @ dz

    def logp(self, y):
        return self.logp_dlogp(y)[0]

    def expand(self, y):
        return {"y": y.copy()}

    def initial_point(self, seed=None):
        return self.shear @ np.random.default_rng(seed).uniform(-0.5, 0.5, self.ndim)


def test_auto_tries_the_dense_metric_on_a_correlated_funnel_and_goes_back(monkeypatch):
    tried = []
    use_dense = _nuts._Pieces.use_dense
    monkeypatch.setattr(_nuts._Pieces, "use_dense", lambda self: tried.append(1) or use_dense(self))
    kwargs = dict(draws=1000, tune=1000, chains=2, random_seed=3, progressbar=False)
    trace = ks.sample_nuts(ShearedFunnel(), **kwargs)
    assert tried  # its correlations asked for a try
    assert trace.metric == "diag"  # and the last window said it is no Gaussian
    v = (trace.posterior["y"] @ ShearedFunnel.unshear.T)[..., 0]  # (chain, draw)
    # Within 4 Monte Carlo standard errors: a funnel's neck leaves few effective draws.
    n_eff = float(ess(v, chain_axis=0, draw_axis=1))
    assert abs(v.mean()) < 4 * ShearedFunnel.sd / np.sqrt(n_eff), (v.mean(), n_eff)
    assert abs(v.std() - ShearedFunnel.sd) < 4 * ShearedFunnel.sd / np.sqrt(2 * n_eff)
    # The choice depends on the draws alone: the same seed makes the same chains.
    again = ks.sample_nuts(ShearedFunnel(), **kwargs)
    np.testing.assert_array_equal(again.unconstrained, trace.unconstrained)


# The rule itself, on exact draws and gradients.
def _gaussian(m, cov=CORR, seed=0):
    draws = np.random.default_rng(seed).multivariate_normal(np.zeros(5), cov, size=m)
    return draws, lambda x: -x @ np.linalg.inv(cov)


def _correlated_funnel(m, seed, k=4, sd=1.5):
    """Return draws of a mild, sheared Neal funnel, and its gradient function."""
    rng = np.random.default_rng(seed)
    shear = np.eye(k + 1) + 0.9 * np.tril(np.ones((k + 1, k + 1)), -1)
    v = rng.normal(0.0, sd, m)
    z = np.column_stack([v, rng.normal(size=(m, k)) * np.exp(v / 2)[:, None]])

    def gradients(y):
        z = np.linalg.solve(shear, y.T).T
        v, x = z[:, 0], z[:, 1:]
        dv = -v / sd**2 + (x**2).sum(1) / (2 * np.exp(v)) - k / 2
        dz = np.column_stack([dv, -x / np.exp(v)[:, None]])
        return dz @ np.linalg.inv(shear)

    return z @ shear.T, gradients


@pytest.mark.parametrize("final", [False, True])
def test_a_correlated_gaussian_asks_for_the_dense_metric(final):
    assert prefers_dense(*_gaussian(500), final) is True
    assert prefers_dense(*_gaussian(20), final) is True  # 2 n draws: enough to say


def test_independent_coordinates_do_not():
    assert prefers_dense(*_gaussian(500, np.diag(SCALES**2)), True) is False
    assert prefers_dense(*_gaussian(500, np.diag(SCALES**2)), False) is False


@pytest.mark.parametrize("seed", range(4))
def test_a_correlated_funnel_is_tried_but_not_kept(seed):
    draws, gradients = _correlated_funnel(500, seed)
    assert prefers_dense(draws, gradients, False) is True  # correlated: worth a try
    assert prefers_dense(draws, gradients, True) is False  # not Gaussian: not for the draws


def test_too_few_draws_say_nothing_and_cost_no_gradient():
    def never(x):
        raise AssertionError("no gradient is needed")

    assert prefers_dense(_gaussian(9)[0], never, True) is None


def test_non_finite_gradients_keep_the_diagonal_metric():
    draws, _ = _gaussian(100)
    assert prefers_dense(draws, lambda x: np.full_like(x, np.nan), False) is False


def test_the_gaussian_bound_is_marchenko_pasturs_largest_eigenvalue():
    # Exact Gaussian draws: the whitened gradients' largest eigenvalue is near (1 + √(n/m))².
    draws, gradients = _gaussian(2000)
    covariance = _dense_metric.regularized_covariance(draws)
    fisher = np.cov(gradients(draws), rowvar=False)
    largest = _dense_metric._whitened(covariance, fisher)[-1]
    assert largest == pytest.approx((1 + np.sqrt(5 / 2000)) ** 2, rel=0.15)
    assert largest < _dense_metric.GAUSSIAN_SLACK * (1 + np.sqrt(5 / 2000)) ** 2


@pytest.mark.parametrize("seed", range(4))
def test_gaussian_draws_look_gaussian_and_a_funnels_do_not(seed):
    # Correlated or not: the test whitens by the draws' own covariance.
    assert _dense_metric.looks_gaussian(*_gaussian(500, seed=seed)) is True
    assert _dense_metric.looks_gaussian(*_gaussian(500, np.diag(SCALES**2), seed)) is True
    assert _dense_metric.looks_gaussian(*_correlated_funnel(500, seed)) is False


def test_too_few_draws_or_non_finite_gradients_do_not_look_gaussian():
    assert _dense_metric.looks_gaussian(*_gaussian(9)) is False
    draws, _ = _gaussian(100)
    assert _dense_metric.looks_gaussian(draws, lambda x: np.full_like(x, np.inf)) is False


def _final_restart_counts(monkeypatch, model, native, tune=1000):
    """Run ``metric="auto"`` on ``model``; return the count of each chain's last restart."""
    counts: dict[int, float] = {}
    restart = _nuts._restart_step_size

    def recording(state, eps, count=0.0):
        counts[id(state)] = count  # the last restart of each chain wins
        restart(state, eps, count)

    monkeypatch.setattr(_nuts, "_restart_step_size", recording)
    ks.sample_nuts(
        model, draws=100, tune=tune, chains=2, random_seed=3, native=native, progressbar=False
    )
    return sorted(counts.values())


def test_a_gaussian_posteriors_final_dual_averaging_counts_from_3000(monkeypatch):
    counts = _final_restart_counts(monkeypatch, Correlated(), Native(_correlated_c, n=5))
    assert counts == [3000.0, 3000.0]


def test_a_funnels_final_dual_averaging_restarts_at_0(monkeypatch):
    assert _final_restart_counts(monkeypatch, ShearedFunnel(), None) == [0.0, 0.0]


def test_a_short_warm_up_counts_from_the_square_of_the_iterations_left(monkeypatch):
    # tune=100: the last window ends at 90, so 10 iterations are left to settle the step.
    counts = _final_restart_counts(monkeypatch, Correlated(), Native(_correlated_c, n=5), 100)
    assert counts == [100.0, 100.0]
    draws = ks.sample_nuts(
        Correlated(), draws=200, tune=100, chains=2, random_seed=3,
        native=Native(_correlated_c, n=5), progressbar=False,
    )  # fmt: skip
    assert not draws.sample_stats["diverging"].any()
