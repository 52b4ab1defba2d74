"""kl.sample and the predictive functions on the torch backend (kiln's NUTS on the host)."""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl
import kiln_model as km
from kiln_compile import Mode


def _conjugate() -> tuple[km.Model, float, float]:
    rng = np.random.default_rng(5)
    y = rng.normal(1.5, 1.0, size=50)
    with km.Model() as model:
        mu = km.Normal("mu", 0.0, 10.0)
        km.Normal("y", mu, 1.0, observed=y)
    post_var = 1.0 / (1.0 / 100.0 + len(y))
    return model, post_var * y.sum(), post_var


def test_logp_dlogp_on_torch_matches_the_vm():
    model, _, _ = _conjugate()
    on_torch = model.logp_dlogp_function(mode=Mode(linker="torch"))
    on_vm = model.logp_dlogp_function(mode=Mode(linker="vm"))
    for seed in range(3):
        x = on_vm.initial_point(seed)
        (a, da), (b, db) = on_torch.logp_dlogp(x), on_vm.logp_dlogp(x)
        np.testing.assert_allclose(a, b, rtol=1e-13)
        np.testing.assert_allclose(da, db, rtol=1e-12)


def test_kiln_nuts_samples_on_the_torch_backend():
    """kl.sample(backend='torch'): kiln's NUTS through the host logp_dlogp; a conjugate mean."""
    model, post_mean, post_var = _conjugate()
    with model:
        idata = kl.sample(
            draws=800,
            tune=300,
            chains=2,
            cores=2,
            random_seed=3,
            backend="torch",
            progressbar=False,
        )
    draws = idata.posterior["mu"].values.ravel()
    assert idata.attrs["backend"] == "torch" and idata.attrs["nuts_sampler"] == "kiln"
    assert abs(draws.mean() - post_mean) < 5 * np.sqrt(post_var / 300)
    assert abs(draws.std() - np.sqrt(post_var)) < 0.3 * np.sqrt(post_var)


@pytest.mark.filterwarnings("ignore::kiln.SamplingWarning")  # Metropolis: a low ESS is expected
def test_metropolis_on_the_torch_backend():
    model, post_mean, post_var = _conjugate()
    with model:
        idata = kl.sample(
            draws=3000,
            tune=1000,
            chains=2,
            random_seed=4,
            backend="torch",
            step=kl.Metropolis(),
            progressbar=False,
        )
    draws = idata.posterior["mu"].values.ravel()
    assert abs(draws.mean() - post_mean) < 5 * np.sqrt(post_var / 200)


def test_prior_and_posterior_predictive_on_torch_reproduce_per_seed():
    model, post_mean, post_var = _conjugate()
    with model:
        prior = kl.sample_prior_predictive(2000, random_seed=1, backend="torch")
        again = kl.sample_prior_predictive(2000, random_seed=1, backend="torch")
        mu = prior.prior["mu"].values.ravel()
        np.testing.assert_array_equal(mu, again.prior["mu"].values.ravel())
        assert abs(mu.mean()) < 5 * 10 / np.sqrt(2000) and abs(mu.std() - 10) < 0.6
        idata = kl.sample(
            draws=600, tune=300, chains=2, random_seed=3, backend="torch", progressbar=False
        )
        pp = kl.sample_posterior_predictive(idata, random_seed=2, backend="torch")
    y = pp.posterior_predictive["y"].values
    assert y.shape == (2, 600, 50)
    # y ~ N(mu, 1) with mu from the posterior: mean post_mean, variance 1 + post_var.
    assert abs(y.mean() - post_mean) < 0.1
    assert abs(y.var() - (1.0 + post_var)) < 0.1
