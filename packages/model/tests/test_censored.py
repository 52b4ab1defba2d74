"""``Censored``: log-densities against SciPy, draws' masses at the bounds, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_compile import available_linkers
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph import tensor as kt

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]
VALUES = np.array([-3.0, -1.0, -0.999, 0.3, 1.999, 2.0, 2.5])


def _normal_reference(x: float, mu: float, sigma: float, lo: float, hi: float) -> float:
    d = stats.norm(mu, sigma)
    if x < lo or x > hi:
        return -np.inf
    if x == lo:
        return float(d.logcdf(lo))
    if x == hi:
        return float(d.logsf(hi))
    return float(d.logpdf(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_censored_normal_logp_and_logcdf_match_scipy(backend: str) -> None:
    mu, sigma = kt.scalar("mu"), kt.scalar("sigma")
    value = kt.vector("value")
    rv = km.Censored.dist(km.Normal.dist(mu, sigma), lower=-1.0, upper=2.0)
    f = kiln.function(
        [mu, sigma, value],
        [km.logp(rv, value), km.logcdf(rv, value)],
        mode=kiln.Mode(linker=backend),
    )
    logp, logcdf = f(0.4, 1.3, VALUES)
    ref = [_normal_reference(x, 0.4, 1.3, -1.0, 2.0) for x in VALUES]
    np.testing.assert_allclose(logp, ref, rtol=1e-10)
    ref_cdf = [
        -np.inf if x < -1 else 0.0 if x >= 2 else stats.norm(0.4, 1.3).logcdf(x) for x in VALUES
    ]
    np.testing.assert_allclose(logcdf, ref_cdf, rtol=1e-10)


def test_one_sided_and_infinite_bounds() -> None:
    value = kt.vector("value")
    x = np.array([-5.0, 0.0, 0.5, 8.0])
    left = km.Censored.dist(km.Normal.dist(1.0, 2.0), lower=0.0, upper=None)
    right = km.Censored.dist(km.Normal.dist(1.0, 2.0), lower=-np.inf, upper=0.5)
    f = kiln.function([value], [km.logp(left, value), km.logp(right, value)])
    got_left, got_right = f(x)
    d = stats.norm(1.0, 2.0)
    np.testing.assert_allclose(got_left, [-np.inf, d.logcdf(0.0), d.logpdf(0.5), d.logpdf(8.0)])
    np.testing.assert_allclose(got_right, [d.logpdf(-5.0), d.logpdf(0.0), d.logsf(0.5), -np.inf])


def test_censored_geometric_masses_count_the_bounds() -> None:
    value = kt.vector("value", dtype="int64")
    rv = km.Censored.dist(km.Geometric.dist(0.3), lower=2, upper=5)
    (got,) = kiln.function([value], [km.logp(rv, value)])(np.array([1, 2, 3, 5, 6]))
    d = stats.geom(0.3)
    ref = [-np.inf, d.logcdf(2), d.logpmf(3), d.logsf(4), -np.inf]
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_gradient_matches_finite_differences() -> None:
    mu = kt.scalar("mu")
    rv = km.Censored.dist(km.Normal.dist(mu, 1.5), lower=-1.0, upper=2.0)
    total = kt.sum(km.logp(rv, np.array([-1.0, 0.2, 2.0, 1.1])))
    f = kiln.function([mu], [total, kiln.grad(total, mu)])
    h = 1e-6
    numeric = (f(0.3 + h)[0] - f(0.3 - h)[0]) / (2 * h)
    np.testing.assert_allclose(f(0.3)[1], numeric, rtol=1e-6)


def test_draws_put_the_tail_masses_on_the_bounds() -> None:
    base = km.Normal.dist(0.0, 1.0)
    rv = km.Censored.dist(base, lower=-1.0, upper=0.5, size=40_000, rng=kr.rng(3))
    draws = kiln.function([], rv)()
    n = draws.size
    for share, mass in [
        (np.mean(draws == -1.0), stats.norm.cdf(-1.0)),
        (np.mean(draws == 0.5), stats.norm.sf(0.5)),
    ]:
        assert abs(share - mass) < 4 * np.sqrt(mass * (1 - mass) / n)
    assert draws.min() == -1.0 and draws.max() == 0.5


def test_censored_regression_recovers_the_mean() -> None:
    rng = np.random.default_rng(0)
    y = np.clip(rng.normal(1.0, 1.0, size=300), -np.inf, 1.5)
    with km.Model():
        mu = km.Normal("mu", 0.0, 5.0)
        km.Censored("y", km.Normal.dist(mu, 1.0), lower=None, upper=1.5, observed=y)
        idata = kiln.sample(draws=1000, tune=1000, chains=2, progressbar=False, random_seed=1)
    post = idata.posterior["mu"].values
    assert abs(post.mean() - 1.0) < 0.2  # the naive mean of the clipped data is about 0.8
    assert int(idata.sample_stats["diverging"].sum()) == 0


def test_bad_arguments_are_named() -> None:
    with pytest.raises(KilnTypeError, match="dist must be an unnamed draw"):
        km.Censored.dist(1.0, lower=0.0, upper=1.0)
    with pytest.raises(KilnValueError, match="lower must be <= upper"):
        km.Censored.dist(km.Normal.dist(0.0, 1.0), lower=2.0, upper=1.0)
    with pytest.raises(KilnTypeError, match="has no logcdf"):
        km.Censored.dist(km.VonMises.dist(0.0, 1.0), lower=0.0, upper=None)
