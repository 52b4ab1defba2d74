"""kl.sample on the MLX backend: NUTS (host path), Metropolis, prior/posterior predictive."""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl
from kiln_compile import BackendNotInstalledError

# A divergence or two on eight schools is not what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:There were:UserWarning")

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools() -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_tilde = kl.Normal("theta_tilde", 0.0, 1.0, shape=8)
        theta = kl.Deterministic("theta", mu + tau * theta_tilde)
        kl.Normal("y", theta, SIGMA, observed=Y)
    return m


def _sample(backend: str, **kwargs: object) -> object:
    return kl.sample(
        draws=1000,
        tune=1000,
        chains=2,
        cores=1,
        random_seed=3,
        model=eight_schools(),
        backend=backend,
        progressbar=False,
        target_accept=0.95,
        **kwargs,
    )


@pytest.fixture(scope="module")
def nuts_mlx() -> object:
    return _sample("mlx")


def test_eight_schools_posterior_agrees_with_numba(nuts_mlx):
    ref = _sample("numba")
    for name in ("mu", "tau"):
        a = np.asarray(nuts_mlx.posterior[name]).reshape(-1)
        b = np.asarray(ref.posterior[name]).reshape(-1)
        # Monte Carlo error of each mean (effective sample size at least ~200 draws)
        error = np.hypot(a.std(), b.std()) / np.sqrt(200)
        assert abs(a.mean() - b.mean()) < 4 * error, name
    assert np.asarray(nuts_mlx.posterior["mu"]).shape == (2, 1000)


def test_the_same_seed_gives_the_same_draws(nuts_mlx):
    again = _sample("mlx")
    np.testing.assert_array_equal(
        np.asarray(again.posterior["mu"]), np.asarray(nuts_mlx.posterior["mu"])
    )


def test_metropolis_on_mlx():
    with kl.Model() as m:
        x = kl.Normal("x", 1.0, 2.0)
        kl.Normal("y", x, 1.0, observed=np.array([0.5, 1.5]))
    idata = kl.sample(
        draws=3000,
        tune=1000,
        chains=2,
        cores=1,
        random_seed=1,
        model=m,
        step=kl.Metropolis([x]),
        backend="mlx",
        progressbar=False,
    )
    draws = np.asarray(idata.posterior["x"]).reshape(-1)
    # conjugate posterior: precision 1/4 + 2, mean (1/4 + 2) ** -1 * (1/4 + 2)
    post_var = 1.0 / (0.25 + 2.0)
    post_mean = post_var * (1.0 * 0.25 + 2.0)
    assert abs(draws.mean() - post_mean) < 0.1
    assert abs(draws.var() - post_var) < 0.1


def test_prior_and_posterior_predictive_on_mlx(nuts_mlx):
    model = eight_schools()
    prior = kl.sample_prior_predictive(draws=4000, model=model, random_seed=2, backend="mlx")
    mu = np.asarray(prior.prior["mu"]).reshape(-1)
    assert abs(mu.mean()) < 0.3 and abs(mu.std() - 5.0) < 0.3
    y = np.asarray(prior.prior_predictive["y"])
    assert y.shape[-1] == 8 and np.all(np.isfinite(y))
    post = kl.sample_posterior_predictive(
        nuts_mlx, model=model, random_seed=2, backend="mlx", progressbar=False
    )
    yp = np.asarray(post.posterior_predictive["y"])
    theta = np.asarray(nuts_mlx.posterior["theta"])
    assert yp.shape == theta.shape
    resid = (yp - theta) / SIGMA
    assert abs(resid.mean()) < 0.05 and abs(resid.std() - 1.0) < 0.05


def test_a_missing_mlx_names_the_extra_to_install(monkeypatch):
    from kiln import _arguments

    monkeypatch.setattr(_arguments, "_importable", lambda name: name != "mlx.core")
    with pytest.raises(BackendNotInstalledError, match=r"pip install kiln\[mlx\]"):
        _sample("mlx")
