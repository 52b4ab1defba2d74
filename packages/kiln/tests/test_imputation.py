"""Sampling models with imputed observed values, dims without coords, set_data with coords.

The imputed entries' posterior is checked against the conjugate Normal result: with
``mu ~ Normal(0, 10)`` and ``y ~ Normal(mu, 1)``, a missing ``y`` given the observed
ones is ``Normal(m, sqrt(1 + v))`` where ``m``, ``v`` are ``mu``'s posterior mean and
variance. Tolerances come from the Monte Carlo error (half the draws as the effective
sample size, which NUTS exceeds on this Gaussian posterior). Most runs use the Python
VM; one uses Numba.
"""

from __future__ import annotations

import warnings

import arviz_base
import numpy as np
import pytest

import kiln as kl

VM = "vm"
N_MISSING = 3


def _data() -> np.ndarray:
    data = np.random.default_rng(0).normal(1.0, 1.0, size=20)
    data[[2, 7, 11]] = np.nan
    return data


def _model(data: np.ndarray) -> kl.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.ImputationWarning)
        with kl.Model(coords={"obs": [f"o{i}" for i in range(data.size)]}) as m:
            mu = kl.Normal("mu", 0.0, 10.0)
            kl.Normal("y", mu, 1.0, observed=data, dims="obs")
    return m


def _conjugate(data: np.ndarray) -> tuple[float, float]:
    """Return the posterior mean and variance of mu."""
    obs = data[~np.isnan(data)]
    precision = 1 / 100 + obs.size
    return float(obs.sum() / precision), float(1 / precision)


def _bounds(x: np.ndarray, k: float = 4.5) -> tuple[float, float]:
    """``k`` Monte Carlo errors of the mean and of the sd of draws ``x`` (ESS = size / 2)."""
    ess = x.size / 2
    return k * float(np.std(x)) / np.sqrt(ess), k * float(np.std(x)) / np.sqrt(2 * ess)


def _check_imputed_posterior(idata: object, data: np.ndarray) -> None:
    post = idata["posterior"]  # type: ignore[index]
    missing = np.isnan(data)
    mean, var = _conjugate(data)
    mu = post["mu"].values.ravel()
    tol_mean, tol_sd = _bounds(mu)
    assert abs(mu.mean() - mean) < tol_mean and abs(mu.std() - np.sqrt(var)) < tol_sd
    imputed = post["y_unobserved"].values.reshape(-1, N_MISSING)
    for j in range(N_MISSING):
        tol_mean, tol_sd = _bounds(imputed[:, j])
        assert abs(imputed[:, j].mean() - mean) < tol_mean
        assert abs(imputed[:, j].std() - np.sqrt(1 + var)) < tol_sd
    joined = post["y"].transpose("chain", "draw", "obs").values
    np.testing.assert_array_equal(
        joined[..., ~missing], np.broadcast_to(data[~missing], joined[..., ~missing].shape)
    )
    np.testing.assert_array_equal(joined[..., missing], post["y_unobserved"].values)
    assert list(post["y"].coords["obs"].values) == [f"o{i}" for i in range(data.size)]


def test_sampled_imputation_and_its_predictive_groups():
    data = _data()
    m = _model(data)
    with m:
        idata = kl.sample(
            draws=1000, tune=500, chains=2, random_seed=3, backend=VM, progressbar=False
        )
    _check_imputed_posterior(idata, data)
    observed = data[~np.isnan(data)]
    np.testing.assert_array_equal(idata["observed_data"]["y_observed"].values, observed)
    with m:
        pp = kl.sample_posterior_predictive(idata, random_seed=1, backend=VM, progressbar=False)
        joined = kl.sample_posterior_predictive(
            idata,
            var_names=["y"],
            random_seed=1,
            backend=VM,
            progressbar=False,
            extend_inferencedata=False,
        )
        prior = kl.sample_prior_predictive(2000, random_seed=2, backend=VM)
    y_obs = pp["posterior_predictive"]["y_observed"].values
    assert y_obs.shape == (2, 1000, observed.size)
    mean, var = _conjugate(data)
    draws = y_obs[..., 0].ravel()
    tol_mean, tol_sd = _bounds(draws)
    assert abs(draws.mean() - mean) < tol_mean and abs(draws.std() - np.sqrt(1 + var)) < tol_sd
    y = joined["posterior_predictive"]["y"]
    assert y.shape == (2, 1000, data.size) and y.coords["obs"].values[0] == "o0"
    # the missing entries of the joined draw are the posterior's imputed values
    np.testing.assert_array_equal(
        y.values[..., np.isnan(data)], idata["posterior"]["y_unobserved"].values
    )
    assert set(prior["prior"].data_vars) == {"mu", "y_unobserved", "y"}
    assert set(prior["prior_predictive"].data_vars) == {"y_observed"}
    prior_y = prior["prior"]["y"].values[0]
    for j in (0, 2):  # an observed entry and a missing one: both drawn from the prior
        assert abs(prior_y[:, j].std() - np.sqrt(101.0)) < _bounds(prior_y[:, j])[1]
    np.testing.assert_array_equal(prior_y[:, np.isnan(data)], prior["prior"]["y_unobserved"][0])
    np.testing.assert_array_equal(
        prior_y[:, ~np.isnan(data)], prior["prior_predictive"]["y_observed"][0]
    )


def test_sampled_imputation_on_numba():
    data = _data()
    with _model(data):
        idata = kl.sample(
            draws=1000, tune=500, chains=2, random_seed=5, backend="numba", progressbar=False
        )
    assert idata.attrs["backend"] == "numba"
    _check_imputed_posterior(idata, data)


def test_dims_without_coords_get_integer_labels_in_the_results():
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("y", mu, 1.0, observed=np.array([0.2, -0.1, 0.4, 0.0]), dims="obs")
        kl.Deterministic("shifted", mu + kl.math.zeros(4), dims="obs")
        idata = kl.sample(draws=50, tune=50, chains=1, random_seed=1, backend=VM, progressbar=False)
    assert "obs" not in m.coords
    shifted = idata["posterior"]["shifted"]
    assert shifted.dims == ("chain", "draw", "obs")
    np.testing.assert_array_equal(shifted.coords["obs"].values, np.arange(4))
    np.testing.assert_array_equal(idata["observed_data"]["y"].coords["obs"].values, np.arange(4))


def test_set_data_with_coords_labels_the_predictions():
    with kl.Model(coords={"obs": ["a", "b", "c"]}) as m:
        x = kl.Data("x", np.array([0.0, 1.0, 2.0]), dims="obs")
        b = kl.Normal("b", 0.0, 1.0)
        kl.Normal("y", b * x, 0.1, observed=np.array([0.1, 0.9, 2.2]), dims="obs")
    post = arviz_base.from_dict({"posterior": {"b": np.full((1, 400), 2.0)}})
    x_new = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    with m:
        kl.set_data({"x": x_new}, coords={"obs": list("vwxyz")})
        out = kl.sample_posterior_predictive(
            post, predictions=True, random_seed=1, backend=VM, progressbar=False
        )
    y = out["predictions"]["y"]
    assert y.dims == ("chain", "draw", "obs")
    assert list(y.coords["obs"].values) == list("vwxyz")
    means = y.values.reshape(-1, 5).mean(axis=0)
    np.testing.assert_allclose(means, 2.0 * x_new, atol=4.5 * 0.1 / np.sqrt(400))
    const = out["predictions_constant_data"]["x"]
    assert list(const.coords["obs"].values) == list("vwxyz")
    with pytest.raises(kl.ModelError, match=r"^set_data: 'x' has length 2 along dim 'obs'"):
        kl.set_data({"x": np.zeros(2)}, model=m)
