"""logp/logcdf of the derived continuous distributions against SciPy, and their draws (vm)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_model._continuous_derived import (
    ChiSquared,
    ExGaussian,
    Gumbel,
    Kumaraswamy,
    Moyal,
    Pareto,
    PolyaGamma,
    SkewNormal,
)


def _kuma_logpdf(x, a, b):
    with np.errstate(all="ignore"):
        out = np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-(x**a))
    return np.where((x > 0) & (x < 1), out, -np.inf)


CASES = [
    (Gumbel, (0.5, 2.0), stats.gumbel_r(0.5, 2.0), [-3.0, 0.5, 4.0]),
    (ChiSquared, (3.0,), stats.chi2(3.0), [-1.0, 0.5, 4.0]),
    (ExGaussian, (1.0, 0.7, 2.0), stats.exponnorm(2.0 / 0.7, 1.0, 0.7), [-1.0, 1.0, 5.0]),
    (Pareto, (3.0, 2.0), stats.pareto(3.0, scale=2.0), [1.0, 2.5, 6.0]),
    (Moyal, (0.3, 1.5), stats.moyal(0.3, 1.5), [-2.0, 0.3, 5.0]),
    (SkewNormal, (0.2, 1.3, 2.0), stats.skewnorm(2.0, 0.2, 1.3), [-1.0, 0.5, 3.0]),
]


@pytest.mark.parametrize(("dist", "params", "ref", "values"), CASES, ids=lambda c: str(c)[:20])
def test_logp_against_scipy(dist, params, ref, values):
    x = np.array(values)
    rv = dist.dist(*params)
    f = kiln.function([], [km.logp(rv, x)])
    np.testing.assert_allclose(f()[0], ref.logpdf(x), rtol=1e-9)
    if "logcdf" in dist.__dict__:
        g = kiln.function([], [km.logcdf(rv, x)])
        np.testing.assert_allclose(g()[0], ref.logcdf(x), rtol=1e-8)


def test_kumaraswamy_logp():
    x = np.array([-0.1, 0.3, 0.8, 1.2])
    rv = Kumaraswamy.dist(2.0, 3.0)
    got = kiln.function([], [km.logp(rv, x)])()[0]
    np.testing.assert_allclose(got, _kuma_logpdf(x, 2.0, 3.0), rtol=1e-10)


@pytest.mark.parametrize(("dist", "params", "ref", "values"), CASES, ids=lambda c: str(c)[:20])
def test_draws_ks(dist, params, ref, values):
    rv = dist.dist(*params, size=20_000, rng=kr.rng(7))
    draws = kiln.function([], [rv])()[0]
    assert stats.kstest(draws, ref.cdf).pvalue > 1e-3


def test_bad_parameter_and_polyagamma():
    with pytest.raises(Exception, match="beta"):
        Gumbel.dist(0.0, -1.0)
    with pytest.raises(NotImplementedError, match="PolyaGamma"):
        PolyaGamma.dist(1.0, 0.0)
