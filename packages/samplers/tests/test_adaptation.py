"""The warm-up of kiln's NUTS: the gradient Welford sums, the schedules, the adapted chains."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import kiln_samplers as ks
from kiln_samplers import _nuts_core as core
from kiln_samplers._adaptation import (
    GradSchedule,
    grad_schedule,
    gradient_variance,
    initial_inv_mass,
    new_welford,
    regularized_variance,
    switch_draws,
)
from kiln_samplers._diagnostics import rhat_ess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_models import MU, SD, Native, correlated_gaussian  # noqa: E402
from native_models import gaussian_native as _gaussian_native  # noqa: E402


def _run(inv_mass, collect, update, n_draws=300, seed=0):
    """Run ``sample_chunk`` on the 4-d Gaussian in Python; return welford, draws, grads."""
    rng = np.random.default_rng(seed)
    q = np.array([0.1, 0.2, 0.3, 0.4])
    grad = np.empty(4)
    logp = _gaussian_native(q, grad, 0)
    adapt = np.array([np.log(0.3), 0.0, 0.0, 0.0, np.log(3.0), 0.0])
    welford = new_welford(4)
    draws, stats = np.empty((n_draws, 4)), np.empty((n_draws, core.N_STATS))
    core.sample_chunk(
        _gaussian_native, 0, rng, q, grad, logp, inv_mass, adapt, welford, n_draws, draws,
        stats, 0.8, 10, 1000.0, 0.0, True, collect, update,
    )  # fmt: skip
    return welford, draws, -(draws - MU) / SD**2  # the Gaussian's gradient at each draw


def _expected_sums(draws, grads):
    n = draws.shape[0]
    count = np.zeros(draws.shape[1])
    count[0] = n
    return np.stack(
        [count, draws.mean(0), draws.var(0) * n, grads.mean(0), grads.var(0) * n]
    )  # fmt: skip


def test_the_kernel_collects_the_welford_sums_of_the_draws_and_their_gradients():
    welford, draws, grads = _run(np.ones(4), True, False)
    np.testing.assert_allclose(welford[:5], _expected_sums(draws, grads), rtol=1e-9, atol=1e-12)
    assert not welford[core.FOREGROUND :].any()  # the foreground only while update_metric


def test_the_gradient_based_metric_is_the_foregrounds_sqrt_of_the_variance_ratio():
    inv_mass = np.ones(4)
    welford, draws, grads = _run(inv_mass, False, True)
    assert not welford[:5].any()
    # only the draws that moved count (no divergence here)
    moved = np.any(draws != np.vstack([[0.1, 0.2, 0.3, 0.4], draws[:-1]]), axis=1)
    assert 0 < (~moved).sum() < 100
    draws, grads = draws[moved], grads[moved]
    np.testing.assert_allclose(welford[5:], _expected_sums(draws, grads), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(inv_mass, np.sqrt(draws.var(0) / grads.var(0)), rtol=1e-9)
    # For a Gaussian it is the posterior variance: Var[x] / Var[(x - mu) / sd**2] = sd**4.
    np.testing.assert_allclose(inv_mass, SD**2, rtol=1e-12)


def test_the_metric_keeps_an_element_without_an_estimate():
    welford = new_welford(3)
    inv_mass = np.array([2.0, 3.0, 4.0])
    for x, g in [([1.0, 0.0, 5.0], [1.0, 2.0, 7.0]), ([2.0, 0.0, 5.0], [3.0, 1.0, 7.0])]:
        core.welford_add(welford, core.FOREGROUND, np.array(x), np.array(g))
    core.grad_metric(welford, inv_mass)
    assert inv_mass.tolist() == [2.0, 3.0, 4.0]  # fewer than 3 points: no estimate yet
    core.welford_add(welford, core.FOREGROUND, np.array([3.0, 0.0, 5.0]), np.array([5.0, 0.0, 7.0]))
    core.grad_metric(welford, inv_mass)
    # x0 and g0 vary alike (ratio 1/2); x1 is constant (zero: kept); g2 is constant (kept)
    assert inv_mass.tolist() == [0.5, 3.0, 4.0]


def test_the_last_windows_gradient_estimate_is_the_sqrt_of_the_variance_ratio():
    welford, draws, grads = _run(np.ones(4), True, False)
    estimate = gradient_variance(welford)
    np.testing.assert_allclose(estimate, np.sqrt(draws.var(0) / grads.var(0)), rtol=1e-9)
    np.testing.assert_allclose(estimate, SD**2, rtol=1e-12)  # a Gaussian's variances
    # Stan's estimate of the same draws is noisier: 300 draws, about 8% sd.
    assert np.abs(regularized_variance(welford) / SD**2 - 1.0).max() > 1e-3


def test_the_gradient_estimate_falls_back_to_the_draws_variance():
    welford = new_welford(4)
    points = [
        ([1.0, 0.0, 5.0, 1.0], [1.0, 2.0, 7.0, 1.0]),
        ([2.0, 0.0, 5.0, 1e150], [3.0, 1.0, 7.0, 1e-160]),
    ]
    for x, g in points:
        core.welford_add(welford, 0, np.array(x), np.array(g))
    np.testing.assert_array_equal(gradient_variance(welford), regularized_variance(welford))
    core.welford_add(welford, 0, np.array([3.0, 0.0, 5.0, 2e150]), np.array([5.0, 0.0, 7.0, 0.0]))
    estimate, fallback = gradient_variance(welford), regularized_variance(welford)
    # x0 and g0 vary alike (ratio 1/2); x1 and g2 are constant; x3/g3 overflows
    assert estimate[0] == 0.5
    np.testing.assert_array_equal(estimate[1:3], fallback[1:3])
    assert estimate[3] == 1e20  # nutpie's upper limit


def test_the_first_inverse_mass_is_one_over_the_gradient():
    grad = np.array([-4.0, 0.5, 0.0, np.inf, np.nan, 1e-30])
    np.testing.assert_array_equal(initial_inv_mass(grad), [0.25, 2.0, 1.0, 1.0, 1.0, 1e20])


def test_the_gradient_based_schedule_switches_windows_as_nutpie_does():
    schedule = grad_schedule(1000)
    assert schedule == GradSchedule(300, 850, 10, 80, 1.5)
    draws = switch_draws(schedule)
    # early: every 10 draws (the start point counts in the first window)
    assert draws[:30] == list(range(8, 300, 10))
    # then windows of 80 and 120; the last (180 would end past 850) grows to the end
    assert draws[30:] == [378, 498]
    assert grad_schedule(100) == GradSchedule(30, 85, 10, 80, 1.5)
    assert switch_draws(grad_schedule(100)) == [8, 18, 28]
    assert switch_draws(grad_schedule(0)) == []


def test_bad_adaptation():
    with pytest.raises(ValueError, match="adaptation: expected one of 'stan', 'grad', got 'x'"):
        ks.NutsSettings(adaptation="x")


# A badly scaled 6-d Gaussian, two coordinates correlated (0.3): standard deviations from
# 0.01 to 100. (Under strong correlation the gradient-based diagonal, the geometric mean of
# the marginal and the conditional variance, can do worse than the variance of the draws.)
_SCALES = np.array([0.01, 0.3, 1.0, 5.0, 30.0, 100.0])
_CORR = np.eye(6)
_CORR[2, 3] = _CORR[3, 2] = 0.3
_COV = _SCALES[:, None] * _CORR * _SCALES[None, :]
_correlated_c, _Correlated = correlated_gaussian(np.zeros(6), _COV)


def _ess_per_gradient(adaptation, seed):
    trace = ks.sample_nuts(
        _Correlated(), draws=1000, tune=1000, chains=2, random_seed=seed,
        native=Native(_correlated_c, 6), progressbar=False,
        settings=ks.NutsSettings(adaptation=adaptation, metric="diag"),
    )  # fmt: skip
    x = trace.posterior["x"]
    flat = x.reshape(-1, 6)
    _, ess = rhat_ess(x)
    # means within 5 Monte Carlo standard errors, standard deviations within 15%
    assert np.all(np.abs(flat.mean(0)) < 5 * _SCALES / np.sqrt(ess)), (flat.mean(0), ess)
    np.testing.assert_allclose(flat.std(0), _SCALES, rtol=0.15)
    assert not trace.sample_stats["diverging"].any()
    return ess.min() / trace.sample_stats["n_steps"].sum()


def test_the_gradient_based_warmup_samples_a_badly_scaled_gaussian_better():
    # ESS per gradient with seeds 1 and 2: about 0.24 and 0.31 against Stan's 0.20 and 0.19
    stan = [_ess_per_gradient("stan", seed) for seed in (1, 2)]
    grad = [_ess_per_gradient("grad", seed) for seed in (1, 2)]
    assert np.mean(grad) >= np.mean(stan), (grad, stan)
