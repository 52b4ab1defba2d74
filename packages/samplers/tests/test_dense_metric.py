"""kiln's NUTS with a dense mass matrix (``NutsSettings(metric="dense")``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import kiln_samplers as ks
from kiln_samplers import _c_nuts, _nuts
from kiln_samplers._dense_metric import DenseMetric
from kiln_samplers._native import NativeLogp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_models import Native, correlated_gaussian  # noqa: E402

# A correlated, badly scaled 5-d Gaussian: a diagonal metric cannot make it isotropic.
SCALES = np.array([1.0, 0.01, 5.0, 2.0, 100.0])
CORR = 0.97 ** np.abs(np.subtract.outer(np.arange(5), np.arange(5)))
COV = CORR * np.outer(SCALES, SCALES)
MEAN = np.array([1.0, -0.02, 3.0, 0.0, 50.0])


_correlated_c, Correlated = correlated_gaussian(MEAN, COV)


def _native():
    return Native(_correlated_c, n=5)


def _sample(metric, native, seed=5, draws=1000):
    settings = ks.NutsSettings(metric=metric)
    return ks.sample_nuts(
        Correlated(), draws=draws, tune=1000, chains=2, random_seed=seed, native=native,
        settings=settings, progressbar=False,
    )  # fmt: skip


@pytest.mark.parametrize("native", [None, "c"], ids=["python", "c"])
def test_a_dense_metric_samples_a_correlated_gaussian(native):
    trace = _sample("dense", _native() if native else None)
    x = trace.posterior["x"].reshape(-1, 5)
    n = x.shape[0]
    se = SCALES / np.sqrt(n / 2)
    assert np.all(np.abs(x.mean(0) - MEAN) < 5 * se), (x.mean(0), MEAN)
    np.testing.assert_allclose(x.std(0), SCALES, rtol=0.1)
    np.testing.assert_allclose(np.corrcoef(x, rowvar=False), CORR, atol=0.03)
    stats = trace.sample_stats
    assert not stats["diverging"].any()
    # The adapted metric makes the posterior isotropic: short trajectories.
    assert stats["tree_depth"].mean() < 3.0


def test_a_dense_metric_takes_fewer_steps_than_a_diagonal_one_on_a_correlated_posterior():
    dense = _sample("dense", _native()).sample_stats["n_steps"].mean()
    diag = _sample("diag", _native()).sample_stats["n_steps"].mean()
    assert 2 * dense < diag, (dense, diag)


def test_the_c_map_computes_what_the_python_map_computes():
    rng = np.random.default_rng(0)
    native = _native()
    metric = DenseMetric(5)
    metric.factor[:] = np.tril(rng.normal(size=(5, 5))) + 3 * np.eye(5)
    address = _c_nuts.affine_logp_address()
    assert address is not None
    in_c = NativeLogp(metric.native(native, address))
    in_python = metric.python_fn(NativeLogp(native))
    for _ in range(5):
        y = rng.normal(size=5)
        g_c, g_py = np.empty(5), np.empty(5)
        logp_c = in_c(y, g_c, in_c.user_data)
        logp_py = in_python(y, g_py, 0)
        assert logp_c == pytest.approx(logp_py, rel=1e-12)
        np.testing.assert_allclose(g_c, g_py, rtol=1e-12, atol=1e-12)
        # The gradient in y against central finite differences of the log-density in y.
        h, fd = 1e-6, np.empty(5)
        for i in range(5):
            e = np.zeros(5)
            e[i] = h
            up = in_c(y + e, np.empty(5), in_c.user_data)
            fd[i] = (up - in_c(y - e, np.empty(5), in_c.user_data)) / (2 * h)
        np.testing.assert_allclose(g_c, fd, rtol=1e-5, atol=1e-4)


def test_the_metric_is_the_scale_free_regularized_covariance_of_the_window():
    rng = np.random.default_rng(1)
    window = rng.multivariate_normal(MEAN, COV, size=200)
    metric = DenseMetric(5)
    assert metric.adapt(window)
    m, cov = window.shape[0], np.cov(window, rowvar=False)
    # Stan's regularization, free of the scale: 1e-3 of each variance, not 1e-3.
    expected = (m / (m + 5.0)) * cov + 1e-3 * (5.0 / (m + 5.0)) * np.diag(np.diag(cov))
    np.testing.assert_allclose(metric.factor @ metric.factor.T, expected, rtol=1e-12)
    np.testing.assert_array_equal(metric.factor, np.tril(metric.factor))
    y = rng.normal(size=5)
    np.testing.assert_allclose(metric.coordinates(metric.positions(y)), y, rtol=1e-10)


def test_a_window_of_fewer_than_twice_n_draws_sets_the_variances_only():
    rng = np.random.default_rng(2)
    window = rng.multivariate_normal(MEAN, COV, size=9)
    metric = DenseMetric(5)
    assert metric.adapt(window)
    variance = window.var(0, ddof=1)
    expected = (9 / 14) * variance + (5 / 14) * 1e-3 * variance
    np.testing.assert_allclose(metric.factor, np.diag(np.sqrt(expected)), rtol=1e-12)


def test_the_metric_is_reported():
    assert _sample("dense", _native(), draws=50).metric == "dense"
    assert _sample("diag", _native(), draws=50).metric == "diag"


def test_a_window_that_gives_no_metric_leaves_it_unchanged():
    metric = DenseMetric(3)
    metric.factor[:] = 2 * np.eye(3)
    assert not metric.adapt(np.full((10, 3), np.nan))
    assert not metric.adapt(np.ones((1, 3)))
    np.testing.assert_array_equal(metric.factor, 2 * np.eye(3))


def test_a_chain_ends_in_the_models_coordinates():
    model, native = Correlated(), _native()
    state = _nuts.init_chain(model, 3, native=native)
    settings = ks.NutsSettings(metric="dense")
    result = _nuts.run_chain(model, state, 50, 300, settings, native)
    np.testing.assert_allclose(state.q, result.draws[-1], rtol=1e-12)
    logp, grad = model.logp_dlogp(state.q)
    assert state.logp == pytest.approx(logp, rel=1e-9)
    np.testing.assert_allclose(state.grad, grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": "full"}, "metric: expected one of 'auto', 'diag', 'dense', got 'full'"),
        ({"metric": "dense", "adaptation": "grad"}, "adaptation: metric='dense'"),
    ],
)
def test_bad_metric_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ks.NutsSettings(**kwargs)


def test_without_the_c_kernel_a_dense_metric_says_it_runs_in_python(monkeypatch):
    monkeypatch.setattr(_c_nuts, "affine_logp_address", lambda: None)
    monkeypatch.setattr(_nuts, "_warned", set())
    with pytest.warns(RuntimeWarning, match="metric='dense'.*NUTS in Python"):
        trace = _sample("dense", _native(), draws=300)
    assert trace.kernel == "python"
    x = trace.posterior["x"].reshape(-1, 5)
    np.testing.assert_allclose(x.std(0), SCALES, rtol=0.25)


def test_a_native_log_density_refuses_arrays_it_would_misread():
    fn = NativeLogp(_native())
    grad = np.empty(5)
    strided = np.repeat(MEAN, 2)[::2]  # MEAN, every other element of a longer array
    with pytest.raises(ValueError, match="x: expected a C-contiguous float64 array"):
        fn(strided, grad, fn.user_data)
    assert fn(np.ascontiguousarray(strided), grad, fn.user_data) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="grad: expected a C-contiguous float64"):
        fn.status(MEAN.copy(), np.empty((5, 2))[:, 0])
