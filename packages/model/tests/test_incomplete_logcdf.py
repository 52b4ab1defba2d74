"""Log-CDFs written with gammainc / gammaincc / betainc: gradients, Truncated and Censored.

The values are in the SciPy table of ``test_logp.py``; here the gradients of a few of
them in the parameters against central finite differences of SciPy's log-CDF (in both
tails), and a truncated Gamma and a censored Poisson against SciPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_graph import tensor as kt

VM = kiln.Mode(linker="vm")


def _log_cdf(frozen: Any, x: float) -> float:
    """Return SciPy's log CDF, from the survival function where the CDF is near 1."""
    sf = float(frozen.sf(x))
    return float(np.log1p(-sf)) if sf < 0.5 else float(frozen.logcdf(x))


#: (id, distribution, its parameters, value, SciPy's distribution of the parameters):
#: points in both tails.
CASES: list[tuple[str, type, dict[str, float], float, Callable[..., Any]]] = [
    (
        "gamma_low",
        km.Gamma,
        {"alpha": 2.5, "beta": 1.5},
        0.05,
        lambda alpha, beta: stats.gamma(alpha, scale=1 / beta),
    ),
    (
        "gamma_high",
        km.Gamma,
        {"alpha": 2.5, "beta": 1.5},
        9.0,
        lambda alpha, beta: stats.gamma(alpha, scale=1 / beta),
    ),
    (
        "invgamma",
        km.InverseGamma,
        {"alpha": 3.0, "beta": 0.5},
        0.4,
        lambda alpha, beta: stats.invgamma(alpha, scale=beta),
    ),
    (
        "beta_low",
        km.Beta,
        {"alpha": 2.0, "beta": 5.0},
        0.02,
        lambda alpha, beta: stats.beta(alpha, beta),
    ),
    (
        "beta_high",
        km.Beta,
        {"alpha": 2.0, "beta": 5.0},
        0.9,
        lambda alpha, beta: stats.beta(alpha, beta),
    ),
    (
        "studentt_low",
        km.StudentT,
        {"nu": 4.0, "mu": 1.0, "sigma": 2.0},
        -15.0,
        lambda nu, mu, sigma: stats.t(nu, mu, sigma),
    ),
    (
        "studentt_high",
        km.StudentT,
        {"nu": 4.0, "mu": 1.0, "sigma": 2.0},
        9.0,
        lambda nu, mu, sigma: stats.t(nu, mu, sigma),
    ),
    ("chisquared", km.ChiSquared, {"nu": 3.0}, 7.0, lambda nu: stats.chi2(nu)),
    ("poisson", km.Poisson, {"mu": 4.5}, 2.0, lambda mu: stats.poisson(mu)),
    ("poisson_high", km.Poisson, {"mu": 4.5}, 15.0, lambda mu: stats.poisson(mu)),
    (
        "negative_binomial",
        km.NegativeBinomial,
        {"n": 3.0, "p": 0.4},
        5.0,
        lambda n, p: stats.nbinom(n, p),
    ),
    ("binomial", km.Binomial, {"n": 20, "p": 0.3}, 4.0, lambda n, p: stats.binom(n, p)),
]


@pytest.mark.parametrize(
    ("name", "dist", "params", "value", "frozen"), CASES, ids=[c[0] for c in CASES]
)
def test_logcdf_gradient_matches_finite_differences(name, dist, params, value, frozen) -> None:
    """The gradient of logcdf in each float parameter: central differences of SciPy's."""
    names = [k for k, v in params.items() if isinstance(v, float)]
    symbols = {k: kt.scalar(k) for k in names}
    kwargs = {k: symbols.get(k, v) for k, v in params.items()}
    lcdf = km.logcdf(dist.dist(**kwargs), value)
    f = kiln.function(
        list(symbols.values()), [lcdf, *kiln.grad(lcdf, list(symbols.values()))], mode=VM
    )
    got = f(*[params[k] for k in names])
    np.testing.assert_allclose(got[0], _log_cdf(frozen(**params), value), rtol=1e-10)
    for i, k in enumerate(names):
        h = 1e-6 * params[k]
        up, down = dict(params), dict(params)
        up[k] += h
        down[k] -= h
        want = (_log_cdf(frozen(**up), value) - _log_cdf(frozen(**down), value)) / (2 * h)
        np.testing.assert_allclose(got[1 + i], want, rtol=1e-6, atol=1e-10, err_msg=f"d/d{k}")


def test_truncated_gamma_matches_scipy() -> None:
    """Truncated(Gamma(2, 1), 1, 3): logp is the density over the mass of [1, 3]."""
    rv = km.Truncated.dist(km.Gamma.dist(2.0, 1.0), lower=1.0, upper=3.0)
    values = np.array([0.5, 1.0, 1.7, 2.9, 3.0, 3.5])
    got = kiln.function([], km.logp(rv, values), mode=VM)()
    base = stats.gamma(2.0)
    mass = base.cdf(3.0) - base.cdf(1.0)
    inside = (values >= 1.0) & (values <= 3.0)
    want = np.where(inside, base.logpdf(values) - np.log(mass), -np.inf)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_censored_poisson_matches_scipy() -> None:
    """Censored(Poisson(3), upper=5): mass P(K >= 5) at 5, the pmf below, -inf above."""
    rv = km.Censored.dist(km.Poisson.dist(3.0), lower=None, upper=5)
    values = np.array([0, 2, 4, 5, 6])
    got = kiln.function([], km.logp(rv, values), mode=VM)()
    want = stats.poisson.logpmf(values, 3.0)
    want[3] = stats.poisson.logsf(4, 3.0)
    want[4] = -np.inf
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_hurdle_negative_binomial_draws() -> None:
    """Zeros with probability 1 - psi; the positive draws follow NB given K > 0 (chi-square).

    On the VM: the zero-truncated part is Truncated's inverse-CDF draw, which
    ``test_truncated.py`` runs on Numba too (its compile takes minutes here).
    """
    psi, n, p, size = 0.6, 2.0, 0.3, 4000
    rv = km.HurdleNegativeBinomial.dist(psi, p=p, n=n, size=size, rng=kr.rng(3))
    draws = kiln.function([], rv, mode=VM)()
    assert draws.shape == (size,) and draws.dtype.kind == "i" and draws.min() >= 0
    zeros = np.mean(draws == 0)
    assert abs(zeros - (1 - psi)) < 4 * np.sqrt(psi * (1 - psi) / size)
    positive = draws[draws > 0]
    base = stats.nbinom(n, p)
    edges = np.arange(1, 16)
    probs = base.pmf(edges) / base.sf(0)
    probs = np.append(probs, base.sf(edges[-1]) / base.sf(0))  # the tail above 15
    counts = np.append([np.sum(positive == k) for k in edges], np.sum(positive > edges[-1]))
    result = stats.chisquare(counts, probs * positive.size)
    assert result.pvalue > 1e-3, result
