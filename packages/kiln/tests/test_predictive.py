"""kl.sample_prior_predictive and kl.sample_posterior_predictive.

Moments, seeds, groups, shapes and coords, out-of-sample prediction after set_data,
bad input.

Posteriors are mostly fake (arviz_base.from_dict) to keep the tests fast; one test
samples for real. Most run on the Python VM; one on Numba.
"""

from __future__ import annotations

import arviz_base
import numpy as np
import pytest

import kiln as kl
import kiln._predictive as predictive
from kiln_graph import KilnTypeError, KilnValueError

VM = "vm"


def _mc_bound(x: np.ndarray, k: float = 4.5) -> float:
    """``k`` Monte Carlo standard errors of the mean of independent draws ``x``."""
    return k * float(np.std(x)) / np.sqrt(x.size)


def _var_bound(x: np.ndarray, k: float = 4.5) -> float:
    """``k`` Monte Carlo standard errors of the variance estimate of ``x``."""
    c = x - x.mean()
    return k * float(np.sqrt((np.mean(c**4) - np.mean(c**2) ** 2) / x.size))


def _normal_model(n: int = 3) -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        sigma = kl.HalfNormal("sigma", 1.0)
        kl.Normal("y", mu, sigma, observed=np.linspace(-1.0, 1.0, n))
        kl.Deterministic("mu2", 2.0 * mu)
    return m


def _fake_posterior(chains: int, draws: int, **values: object) -> object:
    """Return a posterior DataTree; scalars are broadcast to ``(chains, draws)``."""
    post = {
        k: np.array(v if np.ndim(v) >= 2 else np.broadcast_to(v, (chains, draws)), dtype=float)
        for k, v in values.items()
    }
    return arviz_base.from_dict({"posterior": post})


# --- prior predictive -----------------------------------------------------------------------


def test_prior_moments_and_groups():
    m = _normal_model()
    n = 4000
    with m:
        idata = kl.sample_prior_predictive(draws=n, random_seed=11, backend=VM)
    assert set(idata.children) >= {"prior", "prior_predictive", "observed_data"}
    prior, pp = idata["prior"], idata["prior_predictive"]
    assert set(prior.data_vars) == {"mu", "sigma", "mu2"}
    assert set(pp.data_vars) == {"y"}
    assert prior["mu"].dims == ("chain", "draw") and prior["mu"].shape == (1, n)
    assert pp["y"].shape == (1, n, 3)
    np.testing.assert_allclose(idata["observed_data"]["y"].values, np.linspace(-1.0, 1.0, 3))

    mu = prior["mu"].values.ravel()
    sigma = prior["sigma"].values.ravel()
    y = pp["y"].values[0]
    # mu ~ Normal(0, 1)
    assert abs(mu.mean()) < _mc_bound(mu)
    assert abs(mu.var() - 1.0) < _var_bound(mu)
    # sigma ~ HalfNormal(1): mean sqrt(2/pi), variance 1 - 2/pi
    assert abs(sigma.mean() - np.sqrt(2 / np.pi)) < _mc_bound(sigma)
    assert abs(sigma.var() - (1 - 2 / np.pi)) < _var_bound(sigma)
    assert sigma.min() > 0
    # deterministic from the same draws
    np.testing.assert_allclose(prior["mu2"].values.ravel(), 2 * mu)
    # y | mu, sigma ~ Normal(mu, sigma): marginal mean 0, variance 1 + E[sigma^2] = 2
    for j in range(3):
        yj = y[:, j]
        assert abs(yj.mean()) < _mc_bound(yj)
        assert abs(yj.var() - 2.0) < _var_bound(yj)
    # y is drawn from the prior draws of mu and sigma (one joint draw): the
    # standardized residuals are standard normal and independent of mu
    z = (y - mu[:, None]) / sigma[:, None]
    assert abs(z.mean()) < _mc_bound(z.ravel())
    assert abs(z.var() - 1.0) < _var_bound(z.ravel())
    assert abs(np.corrcoef(mu, y[:, 0])[0, 1] - np.sqrt(0.5)) < 0.05
    # distinct elements and distinct draws
    assert np.all(np.abs(np.corrcoef(z.T) - np.eye(3)) < 0.06)


def test_prior_dirichlet_categorical():
    a = np.array([1.0, 2.0, 5.0])
    with kl.Model(coords={"k": ["a", "b", "c"], "obs": range(4)}):
        p = kl.Dirichlet("p", a, dims="k")
        kl.Categorical("c", p=p, observed=np.array([0, 1, 2, 2]), dims="obs")
        idata = kl.sample_prior_predictive(draws=3000, random_seed=3, backend=VM)
    pv = idata["prior"]["p"]
    assert pv.dims == ("chain", "draw", "k")
    assert list(pv["k"].values) == ["a", "b", "c"]
    draws = pv.values[0]
    np.testing.assert_allclose(draws.sum(axis=-1), 1.0, rtol=1e-12)
    mean = a / a.sum()
    # Var(p_k) = m_k (1 - m_k) / (A + 1)
    sd = np.sqrt(mean * (1 - mean) / (a.sum() + 1))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4.5 * sd / np.sqrt(draws.shape[0]))
    np.testing.assert_allclose(draws.var(axis=0), sd**2, rtol=0.12)
    c = idata["prior_predictive"]["c"]
    assert c.dims == ("chain", "draw", "obs") and c.dtype.kind == "i"
    cv = c.values[0]
    # marginally c ~ Categorical(E[p]); draws are independent, elements of one draw not
    for k in range(3):
        per_draw = (cv == k).mean(axis=1)
        assert abs(per_draw.mean() - mean[k]) < _mc_bound(per_draw)
    assert set(np.unique(cv)) == {0, 1, 2}


def test_prior_seed_reproducible_and_var_names():
    m = _normal_model()
    with m:
        a = kl.sample_prior_predictive(50, random_seed=5, backend=VM)
        b = kl.sample_prior_predictive(50, random_seed=5, backend=VM)
        c = kl.sample_prior_predictive(50, random_seed=6, backend=VM)
        d = kl.sample_prior_predictive(50, var_names=["y"], random_seed=5, backend=VM)
    for g, name in [("prior", "mu"), ("prior", "sigma"), ("prior_predictive", "y")]:
        np.testing.assert_array_equal(a[g][name].values, b[g][name].values)
        assert not np.array_equal(a[g][name].values, c[g][name].values)
    assert "prior" not in d.children
    assert set(d["prior_predictive"].data_vars) == {"y"}
    # generators are put back: an unseeded call after a seeded one is not the seeded one
    with m:
        e = kl.sample_prior_predictive(50, backend=VM)
    assert not np.array_equal(e["prior"]["mu"].values, a["prior"]["mu"].values)
    with m:
        with pytest.raises(KilnValueError, match=r"valid names: \['mu', 'sigma', 'y', 'mu2'\]"):
            kl.sample_prior_predictive(10, var_names=["nope"])
        with pytest.raises(KilnValueError, match="draws"):
            kl.sample_prior_predictive(0)


def test_prior_adds_to_idata():
    m = _normal_model()
    post = _fake_posterior(2, 5, mu=np.zeros((2, 5)), sigma=np.ones((2, 5)))
    with m:
        out = kl.sample_prior_predictive(20, random_seed=1, backend=VM, idata=post)
    assert out is post
    assert {"posterior", "prior", "prior_predictive", "observed_data"} <= set(post.children)
    assert post["prior"]["mu"].shape == (1, 20)


def test_prior_compiles_once(monkeypatch):
    calls = []
    real = predictive.function

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(predictive, "function", counting)
    with _normal_model():
        kl.sample_prior_predictive(100, random_seed=1, backend=VM)
    assert len(calls) == 1


def test_prior_potential_warns():
    with kl.Model():
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Potential("pot", -(mu**2))
        with pytest.warns(UserWarning, match="Potential"):
            kl.sample_prior_predictive(5, backend=VM)


# --- posterior predictive -------------------------------------------------------------------


def _regression(x: np.ndarray, y: np.ndarray) -> kl.Model:
    with kl.Model(coords={"coef": ["a", "b"]}) as m:
        xd = kl.Data("x", x, dims="obs")
        beta = kl.Normal("beta", 0.0, 1.0, dims="coef")
        sigma = kl.HalfNormal("sigma", 1.0)
        mu = kl.Deterministic("mu", beta[0] + beta[1] * xd, dims="obs")
        kl.Normal("y", mu, sigma, observed=y, dims="obs")
    return m


def test_posterior_predictive_shapes_and_coords():
    x = np.linspace(0, 1, 6)
    m = _regression(x, 2 * x)
    chains, draws = 3, 4
    post = arviz_base.from_dict(
        {
            "posterior": {
                "beta": np.random.default_rng(0).normal(size=(chains, draws, 2)),
                "sigma": np.full((chains, draws), 0.1),
            }
        },
        dims={"beta": ["coef"]},
        coords={"coef": ["a", "b"], "draw": np.arange(100, 100 + draws)},
    )
    with m:
        out = kl.sample_posterior_predictive(post, random_seed=1, backend=VM, progressbar=False)
    assert out is post
    y = post["posterior_predictive"]["y"]
    assert y.dims == ("chain", "draw", "obs")
    assert y.shape == (chains, draws, 6)
    np.testing.assert_array_equal(y["draw"].values, np.arange(100, 104))
    np.testing.assert_array_equal(y["chain"].values, np.arange(chains))
    np.testing.assert_allclose(post["observed_data"]["y"].values, 2 * x)
    # each draw uses its own posterior point
    beta = post["posterior"]["beta"].values
    expected = beta[..., :1] + beta[..., 1:] * x
    assert np.all(np.abs(y.values - expected) < 0.6)
    # var_names: a deterministic recomputed, a free variable copied
    with m:
        new = kl.sample_posterior_predictive(
            post,
            var_names=["mu", "beta"],
            backend=VM,
            progressbar=False,
            extend_inferencedata=False,
        )
    assert set(new.children) == {"posterior_predictive", "observed_data"}
    np.testing.assert_allclose(new["posterior_predictive"]["mu"].values, expected)
    np.testing.assert_array_equal(new["posterior_predictive"]["beta"].values, beta)
    assert list(new["posterior_predictive"]["beta"]["coef"].values) == ["a", "b"]


def test_posterior_predictive_fixed_point_moments_and_seed():
    m = _normal_model(n=10)
    chains, draws = 2, 600
    post = _fake_posterior(chains, draws, mu=np.full((chains, draws), 1.5), sigma=0.5)
    with m:
        a = kl.sample_posterior_predictive(
            post, random_seed=7, backend=VM, progressbar=False, extend_inferencedata=False
        )
        b = kl.sample_posterior_predictive(
            post, random_seed=7, backend=VM, progressbar=False, extend_inferencedata=False
        )
        c = kl.sample_posterior_predictive(
            post, random_seed=8, backend=VM, progressbar=False, extend_inferencedata=False
        )
    y = a["posterior_predictive"]["y"].values
    assert y.shape == (chains, draws, 10)
    np.testing.assert_array_equal(y, b["posterior_predictive"]["y"].values)
    assert not np.array_equal(y, c["posterior_predictive"]["y"].values)
    flat = y.ravel()
    assert abs(flat.mean() - 1.5) < _mc_bound(flat)
    assert abs(flat.var() - 0.25) < _var_bound(flat)
    # draws differ from one posterior draw to the next, and between chains
    assert not np.array_equal(y[0, 0], y[0, 1])
    assert not np.array_equal(y[0], y[1])
    assert abs(np.corrcoef(y[0, :-1, 0], y[0, 1:, 0])[0, 1]) < 0.15


def test_out_of_sample_after_set_data_compiles_once(monkeypatch):
    x = np.linspace(0, 1, 8)
    m = _regression(x, 1 + 2 * x)
    chains, draws = 2, 300
    beta = np.broadcast_to([1.0, 2.0], (chains, draws, 2))
    post = arviz_base.from_dict(
        {"posterior": {"beta": beta, "sigma": np.full((chains, draws), 0.3)}},
        dims={"beta": ["coef"]},
        coords={"coef": ["a", "b"]},
    )
    calls = []
    real = predictive.function

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(predictive, "function", counting)
    x_new = np.array([-1.0, 0.0, 3.0])
    with m:
        kl.sample_posterior_predictive(post, random_seed=1, backend=VM, progressbar=False)
        kl.set_data({"x": x_new})
        kl.sample_posterior_predictive(
            post,
            var_names=["y", "mu"],
            predictions=True,
            random_seed=2,
            backend=VM,
            progressbar=False,
        )
    assert len(calls) == 2  # one compilation per call, none per draw
    assert post["posterior_predictive"]["y"].shape == (chains, draws, 8)
    pred = post["predictions"]
    assert pred["y"].shape == (chains, draws, 3)
    assert pred["y"].dims == ("chain", "draw", "obs")
    np.testing.assert_allclose(pred["mu"].values, np.broadcast_to(1 + 2 * x_new, (2, draws, 3)))
    yv = pred["y"].values.reshape(-1, 3)
    for j in range(3):
        assert abs(yv[:, j].mean() - (1 + 2 * x_new[j])) < _mc_bound(yv[:, j])
        assert abs(yv[:, j].var() - 0.09) < _var_bound(yv[:, j])
    np.testing.assert_allclose(post["predictions_constant_data"]["x"].values, x_new)
    assert "observed_data" in post.children  # kept from the first call


def test_shapes_that_cannot_follow_set_data():
    x = np.linspace(0, 1, 5)
    post = _fake_posterior(1, 3, b=np.ones((1, 3)))
    # constant observed data with no dims: the observed variable has a fixed length
    with kl.Model() as m1:
        xd = kl.Data("x", x)
        b = kl.Normal("b", 0.0, 1.0)
        kl.Normal("y", b * xd, 1.0, observed=np.zeros(5))
    kl.set_data({"x": np.ones(2)}, model=m1)
    with pytest.raises(KilnValueError, match=r"y \(fixed shape \(5,\)\).*kl\.Data"):
        kl.sample_posterior_predictive(post, model=m1, backend=VM, progressbar=False)
    # observed Data with no dims: it must be set too
    with kl.Model() as m2:
        xd = kl.Data("x", x)
        yd = kl.Data("y_obs", np.zeros(5))
        b = kl.Normal("b", 0.0, 1.0)
        kl.Normal("y", b * xd, 1.0, observed=yd)
    with m2:
        kl.set_data({"x": np.ones(2)})
        with pytest.raises(KilnValueError, match="set_data every Data"):
            kl.sample_posterior_predictive(post, backend=VM, progressbar=False)
        kl.set_data({"y_obs": np.zeros(2)})
        out = kl.sample_posterior_predictive(post, predictions=True, backend=VM, progressbar=False)
    assert out["predictions"]["y"].shape == (1, 3, 2)


def test_posterior_predictive_bad_input():
    m = _normal_model()
    post = _fake_posterior(1, 4, mu=np.zeros((1, 4)), sigma=np.ones((1, 4)))
    with m:
        with pytest.raises(KilnValueError, match=r"valid names: \['y', 'mu2', 'mu', 'sigma'\]"):
            kl.sample_posterior_predictive(post, var_names=["z"], progressbar=False)
        prior_only = arviz_base.from_dict({"prior": {"mu": np.zeros((1, 4))}})
        with pytest.raises(KilnValueError, match="no posterior group"):
            kl.sample_posterior_predictive(prior_only, progressbar=False)
        with pytest.raises(KilnTypeError, match="DataTree"):
            kl.sample_posterior_predictive({"posterior": {}}, progressbar=False)
        partial = _fake_posterior(1, 4, mu=np.zeros((1, 4)))
        with pytest.raises(KilnValueError, match=r"no values of \['sigma'\]"):
            kl.sample_posterior_predictive(partial, backend=VM, progressbar=False)
        # a variable the requested draws do not need may be missing
        out = kl.sample_posterior_predictive(
            partial,
            var_names=["mu2"],
            backend=VM,
            progressbar=False,
            extend_inferencedata=False,
        )
        np.testing.assert_array_equal(out["posterior_predictive"]["mu2"].values, 0.0)
        wrong = _fake_posterior(1, 4, mu=np.zeros((1, 4, 2)), sigma=np.ones((1, 4)))
        with pytest.raises(KilnValueError, match="'mu' has shape"):
            kl.sample_posterior_predictive(wrong, backend=VM, progressbar=False)
    with kl.Model():
        kl.Normal("a", 0.0, 1.0)
        with pytest.raises(KilnValueError, match="no observed variables"):
            kl.sample_posterior_predictive(post, progressbar=False)


@pytest.mark.filterwarnings("ignore::kiln_samplers.SamplingWarning")  # short chains
def test_real_sampling_then_predictive():
    rng = np.random.default_rng(42)
    data = rng.normal(1.0, 2.0, size=20)
    with kl.Model(coords={"obs": range(20)}):
        mu = kl.Normal("mu", 0.0, 10.0)
        sigma = kl.HalfNormal("sigma", 5.0)
        kl.Normal("y", mu, sigma, observed=data, dims="obs")
        idata = kl.sample(
            draws=100, tune=100, chains=2, random_seed=1, progressbar=False, backend=VM
        )
        kl.sample_posterior_predictive(idata, random_seed=2, backend=VM, progressbar=False)
    y = idata["posterior_predictive"]["y"]
    assert y.dims == ("chain", "draw", "obs") and y.shape == (2, 100, 20)
    np.testing.assert_array_equal(y["obs"].values, np.arange(20))
    # the predictive is centred near the data and about as spread
    assert abs(float(y.mean()) - data.mean()) < 0.5
    assert 0.7 < float(y.std()) / data.std() < 1.5


def test_numba_backend():
    m = _normal_model(n=4)
    with m:
        prior = kl.sample_prior_predictive(300, random_seed=4, backend="numba")
        again = kl.sample_prior_predictive(300, random_seed=4, backend="numba")
        post = _fake_posterior(2, 200, mu=np.full((2, 200), -1.0), sigma=0.2)
        kl.sample_posterior_predictive(post, random_seed=4, backend="numba", progressbar=False)
    np.testing.assert_array_equal(prior["prior"]["mu"].values, again["prior"]["mu"].values)
    assert prior["prior_predictive"]["y"].shape == (1, 300, 4)
    y = post["posterior_predictive"]["y"].values.ravel()
    assert abs(y.mean() + 1.0) < _mc_bound(y)
    assert abs(y.var() - 0.04) < _var_bound(y)


def test_mixture_draws_are_graphs_of_draws():
    # a mixture's draw is a graph (component index selecting component draws)
    with kl.Model() as m:
        w = kl.Dirichlet("w", np.ones(2))
        mu = kl.Normal("mu", np.array([-3.0, 3.0]), 0.1)
        kl.NormalMixture("y", w, mu, 0.5, observed=np.zeros(4))
    chains, draws = 2, 500
    post = arviz_base.from_dict(
        {
            "posterior": {
                "w": np.broadcast_to([0.2, 0.8], (chains, draws, 2)),
                "mu": np.broadcast_to([-3.0, 3.0], (chains, draws, 2)),
            }
        }
    )
    kl.sample_posterior_predictive(post, model=m, random_seed=1, backend=VM, progressbar=False)
    positive = (post["posterior_predictive"]["y"].values > 0).ravel().astype(float)
    assert abs(positive.mean() - 0.8) < _mc_bound(positive)
    prior = kl.sample_prior_predictive(1000, model=m, random_seed=1, backend=VM)
    frac = (prior["prior_predictive"]["y"].values > 0).mean(axis=-1).ravel()
    assert abs(frac.mean() - 0.5) < _mc_bound(frac)
