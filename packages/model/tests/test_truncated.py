"""``Truncated``: log-densities against SciPy, inverse-CDF draws against the truncated CDF."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

#: (id, base draw, lower, upper, SciPy base, values, discrete)
CASES: list[tuple[str, Callable[[], Any], float, float, Any, list[float], bool]] = [
    (
        "exponential",
        lambda: km.Exponential.dist(0.5),
        1.0,
        4.0,
        stats.expon(scale=2.0),
        [0.5, 1.0, 2.5, 4.0, 4.5],
        False,
    ),
    (
        "weibull_lower",
        lambda: km.Weibull.dist(1.5, 2.0),
        2.0,
        np.inf,
        stats.weibull_min(1.5, scale=2.0),
        [1.0, 2.0, 3.0, 30.0],
        False,
    ),
    (
        "logistic_upper",
        lambda: km.Logistic.dist(0.5, 2.0),
        -np.inf,
        -1.0,
        stats.logistic(0.5, 2.0),
        [-40.0, -3.0, -1.0, 0.0],
        False,
    ),
    (
        "logistic_far_tail",
        lambda: km.Logistic.dist(0.0, 1.0),
        30.0,
        35.0,
        stats.logistic(0.0, 1.0),
        [29.0, 30.0, 31.0, 35.0],
        False,
    ),
    (
        "cauchy_none",
        lambda: km.Cauchy.dist(1.0, 0.5),
        -np.inf,
        np.inf,
        stats.cauchy(1.0, 0.5),
        [-3.0, 1.0, 9.0],
        False,
    ),
    ("geometric", lambda: km.Geometric.dist(0.3), 2.0, 6.0, stats.geom(0.3), [1, 2, 4, 6, 7], True),
]


def _ref_logp(dist: Any, lo: float, hi: float, x: float, discrete: bool) -> float:
    if x < lo or x > hi:
        return -np.inf
    if discrete:
        mass = dist.cdf(hi) - dist.cdf(lo - 1)
        return float(dist.logpmf(x) - np.log(mass))
    mass = dist.sf(lo) - dist.sf(hi) if lo > dist.median() else dist.cdf(hi) - dist.cdf(lo)
    return float(dist.logpdf(x) - np.log(mass))


def _ref_cdf(dist: Any, lo: float, hi: float, x: Any, discrete: bool) -> Any:
    if not discrete and lo > dist.median():  # from the upper tail, where the CDF rounds
        return np.clip((dist.sf(lo) - dist.sf(x)) / (dist.sf(lo) - dist.sf(hi)), 0.0, 1.0)
    below = dist.cdf(lo - 1) if discrete else dist.cdf(lo)
    return np.clip((dist.cdf(x) - below) / (dist.cdf(hi) - below), 0.0, 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_logp_and_logcdf_match_scipy(backend: str) -> None:
    inputs, outputs, args = [], [], []
    for name, base, lo, hi, _, values, discrete in CASES:
        value = kt.vector(f"{name}_value", dtype="int64" if discrete else "float64")
        rv = km.Truncated.dist(base(), lower=lo, upper=hi)
        inputs.append(value)
        args.append(np.array(values, dtype="int64" if discrete else "float64"))
        outputs += [km.logp(rv, value), km.logcdf(rv, value)]
    results = kiln.function(inputs, outputs, mode=kiln.Mode(linker=backend))(*args)
    for i, (name, _, lo, hi, dist, values, discrete) in enumerate(CASES):
        logp, logcdf = results[2 * i], results[2 * i + 1]
        ref = [_ref_logp(dist, lo, hi, x, discrete) for x in values]
        np.testing.assert_allclose(logp, ref, rtol=1e-9, err_msg=name)
        with np.errstate(divide="ignore"):
            ref_cdf = np.log(_ref_cdf(dist, lo, hi, np.array(values, dtype=float), discrete))
        np.testing.assert_allclose(logcdf, ref_cdf, rtol=1e-8, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_draws_follow_the_truncated_cdf(case: Any) -> None:
    name, base, lo, hi, dist, _, discrete = case
    rv = km.Truncated.dist(base(), lower=lo, upper=hi, size=4000, rng=kr.rng(11))
    draws = kiln.function([], rv)()
    assert draws.min() >= lo and draws.max() <= hi
    if discrete:
        ks = np.arange(int(lo), int(hi) + 1)
        freq = np.array([np.mean(draws == k) for k in ks])
        ref = np.diff(_ref_cdf(dist, lo, hi, np.concatenate([[lo - 1], ks]), True))
        assert np.all(np.abs(freq - ref) < 4 * np.sqrt(ref * (1 - ref) / draws.size) + 1e-3)
    else:
        result = stats.kstest(draws, lambda x: _ref_cdf(dist, lo, hi, x, False))
        assert result.pvalue > 1e-3, (name, result)


def test_gradient_matches_finite_differences() -> None:
    lam = kt.scalar("lam")
    rv = km.Truncated.dist(km.Exponential.dist(lam), lower=0.5, upper=3.0)
    total = kt.sum(km.logp(rv, np.array([0.6, 1.0, 2.9])))
    f = kiln.function([lam], [total, kiln.grad(total, lam)])
    h = 1e-6
    numeric = (f(0.7 + h)[0] - f(0.7 - h)[0]) / (2 * h)
    np.testing.assert_allclose(f(0.7)[1], numeric, rtol=1e-6)


def test_truncated_normal_is_the_exact_one() -> None:
    rv = km.Truncated.dist(km.Normal.dist(0.0, 1.0), lower=0.0, upper=None)
    assert rv.owner.op is kr.OPS["truncated_normal"]


def test_truncated_likelihood_recovers_the_rate() -> None:
    rng = np.random.default_rng(2)
    y = rng.exponential(2.0, size=2000)
    y = y[(y > 0.5) & (y < 4.0)][:300]
    with km.Model():
        lam = km.HalfNormal("lam", 2.0)
        km.Truncated("y", km.Exponential.dist(lam), lower=0.5, upper=4.0, observed=y)
        idata = kiln.sample(draws=1000, tune=600, chains=2, progressbar=False, random_seed=2)
    post = idata.posterior["lam"].values
    assert abs(post.mean() - 0.5) < 4 * post.std() + 0.02
    assert int(idata.sample_stats["diverging"].sum()) == 0


def test_bad_arguments_are_named() -> None:
    with pytest.raises(KilnTypeError, match="dist must be an unnamed draw"):
        km.Truncated.dist(1.0, lower=0.0, upper=1.0)
    with pytest.raises(KilnValueError, match="lower must be < upper"):
        km.Truncated.dist(km.Exponential.dist(1.0), lower=2.0, upper=1.0)
    with pytest.raises(KilnTypeError, match="has no logcdf"):
        km.Truncated.dist(km.VonMises.dist(0.0, 1.0), lower=1.0, upper=None)
