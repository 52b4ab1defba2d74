"""Log-probabilities of the derived discrete distributions against SciPy (vm)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln
from kiln_model import _discrete_derived as dd
from kiln_model._distribution import logp


def _logp(rv, values):
    return np.array([kiln.function([], logp(rv, v))() for v in values])


def test_discrete_uniform():
    vals = [-1, 0, 2, 4, 5]
    np.testing.assert_allclose(
        _logp(dd.DiscreteUniform.dist(0, 4), vals), stats.randint(0, 5).logpmf(vals)
    )


def test_beta_binomial():
    vals = [-1, 0, 3, 10, 11]
    ref = stats.betabinom(10, 2.0, 3.0).logpmf(vals)
    np.testing.assert_allclose(_logp(dd.BetaBinomial.dist(2.0, 3.0, 10), vals), ref)


def test_zero_inflated_poisson():
    vals = [-1, 0, 1, 5]
    pmf = 0.7 * stats.poisson(3.0).pmf(vals) + 0.3 * (np.array(vals) == 0)
    with np.errstate(divide="ignore"):
        ref = np.log(pmf)
    np.testing.assert_allclose(_logp(dd.ZeroInflatedPoisson.dist(0.7, 3.0), vals), ref)


def test_ordered_logistic():
    cut = np.array([-1.0, 0.5, 2.0])
    f = np.concatenate([[0.0], stats.logistic.cdf(cut - 0.3), [1.0]])
    ref = np.log(np.diff(f))
    got = _logp(dd.OrderedLogistic.dist(0.3, cut), [0, 1, 2, 3])
    np.testing.assert_allclose(got, ref, rtol=1e-10)


@pytest.mark.parametrize("bad", [{"psi": 1.5, "mu": 1.0}])
def test_bad_psi(bad):
    with pytest.raises(Exception, match="psi"):
        dd.ZeroInflatedPoisson.dist(**bad)
