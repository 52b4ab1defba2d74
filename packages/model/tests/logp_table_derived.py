"""The derived distributions' rows of ``test_logp.py``'s table, with their references.

The SymbolicDistributions and the distributions added after them; the table's
``Case`` and the basic rows are ``logp_table.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special, stats

import kiln_model as km
from logp_table import INF, Case, _frozen_logcdf, _invalid

# -- derived distributions (SymbolicDistribution): their own block ------------------------


def _log1mexp(d: float) -> float:
    """Return ``log(1 - exp(d))`` for ``d <= 0``, exact at both ends (Maechler's split)."""
    return float(np.log(-np.expm1(d)) if d > -np.log(2.0) else np.log1p(-np.exp(d)))


def _log_diff(a: float, b: float) -> float:
    """Return ``log(exp(a) - exp(b))`` for ``a >= b`` (-inf where they are equal)."""
    return -INF if a == b else a + _log1mexp(b - a)


def _exgaussian_logcdf(x: float, mu: float, sigma: float, nu: float) -> float:
    """``log(Phi(z) - exp((mu - x) / nu + sigma^2 / (2 nu^2)) Phi(z - sigma / nu))``.

    In logs (SciPy's ``exponnorm.logcdf`` is ``log(cdf)``: -inf below ~ -40 sigma).
    """
    z = (x - mu) / sigma
    shift = (mu - x) / nu + sigma**2 / (2.0 * nu**2) + special.log_ndtr(z - sigma / nu)
    return _log_diff(float(special.log_ndtr(z)), float(shift))


def _moyal_logp(x: float, mu: float, sigma: float) -> float:
    """Return the Moyal log-density (SciPy's ``moyal.logpdf`` is ``log(pdf)``: -inf in tails)."""
    z = (x - mu) / sigma
    return float(-0.5 * (z + np.exp(-z)) - np.log(sigma) - 0.5 * np.log(2.0 * np.pi))


def _kumaraswamy_logp(x: float, a: float, b: float) -> float:
    if not 0.0 < x < 1.0:
        return -INF
    return float(np.log(a * b) + (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-(x**a)))


def _kumaraswamy_logcdf(x: float, a: float, b: float) -> float:
    if x <= 0.0:
        return -INF
    if x >= 1.0:
        return 0.0
    return float(np.log(-np.expm1(b * np.log1p(-(x**a)))))


def _moyal_logcdf(x: float, mu: float, sigma: float) -> float:
    """``log erfc(exp(-z / 2) / sqrt 2) = log 2 + log Phi(-exp(-z / 2))`` (SciPy's underflows)."""
    return float(np.log(2.0) + special.log_ndtr(-np.exp(-0.5 * (x - mu) / sigma)))


def _discrete_weibull_logp(x: int, q: float, beta: float) -> float:
    if x < 0:
        return -INF
    return _log_diff(x**beta * np.log(q), (x + 1.0) ** beta * np.log(q))


def _discrete_weibull_logcdf(x: int, q: float, beta: float) -> float:
    return -INF if x < 0 else _log1mexp((x + 1.0) ** beta * np.log(q))


def _zero_inflated(base_logpmf: Callable[..., float]) -> Callable[..., float]:
    """``log((1 - psi) [x = 0] + psi base(x))`` from the base's SciPy log-pmf."""

    def ref(x: int, psi: float, *params: float) -> float:
        logp = np.log(psi) + base_logpmf(x, *params) if psi > 0 else -INF
        return float(np.logaddexp(np.log1p(-psi), logp)) if x == 0 else float(logp)

    return ref


def _hurdle(positive_logp: Callable[..., float]) -> Callable[..., float]:
    """``log(1 - psi)`` at 0, ``log(psi) + positive_logp(x)`` above 0, -inf below."""

    def ref(x: float, psi: float, *params: float) -> float:
        if x < 0:
            return -INF
        if x == 0:
            return float(np.log1p(-psi))
        return float(np.log(psi) + positive_logp(x, *params)) if psi > 0 else -INF

    return ref


def _ordered(dist: Any) -> Callable[..., float]:
    """``log(F(c_k - eta) - F(c_{k-1} - eta))`` (``c_{-1} = -inf``, ``c_K = inf``) of ``dist``.

    The difference of the CDFs, or of the survival functions where both CDFs are near 1.
    """

    def ref(k: int, eta: float, cut: np.ndarray, sigma: float = 1.0) -> float:
        if k < 0 or k > len(cut):
            return -INF
        z = np.concatenate([[-INF], (cut - eta) / sigma, [INF]])
        lo, hi = z[k], z[k + 1]
        if lo > 0:
            return _log_diff(float(dist.logsf(lo)), float(dist.logsf(hi)))
        return _log_diff(float(dist.logcdf(hi)), float(dist.logcdf(lo)))

    return ref


def _normal_mixture_logcdf(x: float, w: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> float:
    """``log sum w Phi``, or ``log1p(-sum w sf)`` where the CDF is near 1."""
    sf = float(np.sum(w * stats.norm.sf(x, mu, sigma)))
    if sf < 0.5:
        return float(np.log1p(-sf))
    return float(special.logsumexp(stats.norm.logcdf(x, mu, sigma), b=w))


_CUT = np.array([-1.5, 0.0, 2.0])
_CUT_FAR = np.array([-40.0, 30.0, 35.0])  # classes far in both tails
_CUT_TIED = np.array([0.5, 0.5, 3.0])  # a class of probability 0

DERIVED_CASES = [
    Case(
        "gumbel",
        km.Gumbel,
        ("mu", "beta"),
        [(0.0, 1.0), (0.5, 2.0), (-3.0, 0.1)],
        [-20.0, -3.0, -1.0, 0.0, 0.5, 3.0, 40.0, 700.0],
        lambda x, mu, b: stats.gumbel_r.logpdf(x, mu, b),
        lambda x, mu, b: stats.gumbel_r.logcdf(x, mu, b),
    ),
    Case(
        "chisquared",
        km.ChiSquared,
        ("nu",),
        [(1.0,), (2.0,), (3.0,), (50.0,)],
        [-1.0, 0.0, 1e-8, 0.5, 4.0, 60.0, 500.0],
        lambda x, nu: stats.chi2.logpdf(x, nu),
        lambda x, nu: _frozen_logcdf(stats.chi2(nu), x),
    ),
    Case(
        "exgaussian",
        km.ExGaussian,
        ("mu", "sigma", "nu"),
        [(0.0, 1.0, 1.0), (1.0, 0.7, 2.0), (-2.0, 3.0, 0.2), (0.0, 0.1, 5.0)],
        [-20.0, -3.0, -1.0, 0.0, 0.5, 3.0, 10.0, 80.0],
        lambda x, mu, s, nu: stats.exponnorm.logpdf(x, nu / s, mu, s),
        _exgaussian_logcdf,
        # Where Phi(z) and the shifted term nearly cancel (x well below mu), the difference
        # keeps ~1e-9 relative (both sides compute it in logs, each from rounded terms).
        rtol=1e-8,
    ),
    Case(
        "pareto",
        km.Pareto,
        ("alpha", "m"),
        [(3.0, 2.0), (0.5, 1.0), (10.0, 0.1)],
        [-1.0, 0.0, 0.05, 0.1, 1.0, 1.5, 2.0, 2.5, 100.0, 1e10],
        lambda x, a, m: stats.pareto.logpdf(x, a, scale=m),
        lambda x, a, m: stats.pareto.logcdf(x, a, scale=m),
    ),
    Case(
        "kumaraswamy",
        km.Kumaraswamy,
        ("a", "b"),
        [(2.0, 3.0), (0.5, 0.5), (1.0, 1.0), (5.0, 0.8)],
        [-0.1, 0.0, 1e-9, 0.3, 0.5, 0.99, 1.0, 1.2],
        _kumaraswamy_logp,
        _kumaraswamy_logcdf,
    ),
    Case(
        "moyal",
        km.Moyal,
        ("mu", "sigma"),
        [(0.0, 1.0), (0.3, 1.5), (-2.0, 0.2)],
        [-30.0, -5.0, -1.0, 0.0, 0.3, 4.0, 50.0, 1e3],
        _moyal_logp,
        _moyal_logcdf,
    ),
    Case(
        "skewnormal",
        km.SkewNormal,
        ("mu", "sigma", "alpha"),
        [(0.0, 1.0, 0.0), (0.2, 1.3, 2.0), (-1.0, 0.5, -4.0), (0.0, 2.0, 30.0)],
        [-30.0, -3.0, -1.0, 0.0, 0.5, 3.0, 30.0],
        lambda x, mu, s, a: stats.skewnorm.logpdf(x, a, mu, s),
    ),
    Case(
        "skewnormal_tau",
        km.SkewNormal,
        ("mu", "tau", "alpha"),
        [(0.0, 4.0, 1.0), (1.0, 0.25, -2.0)],
        [-5.0, 0.0, 0.7, 6.0],
        lambda x, mu, tau, a: stats.skewnorm.logpdf(x, a, mu, 1.0 / np.sqrt(tau)),
    ),
    Case(
        "discrete_uniform",
        km.DiscreteUniform,
        ("lower", "upper"),
        [(0, 4), (-3, 3), (5, 5), (0, 100)],
        [-4, -3, -1, 0, 2, 3, 4, 5, 6, 100, 101],
        lambda k, lo, hi: stats.randint.logpmf(k, lo, hi + 1),
        lambda k, lo, hi: stats.randint.logcdf(k, lo, hi + 1),
    ),
    Case(
        "betabinomial",
        km.BetaBinomial,
        ("alpha", "beta", "n"),
        [(2.0, 3.0, 10), (0.5, 0.5, 1), (1.0, 1.0, 0), (30.0, 0.2, 50)],
        [-1, 0, 1, 3, 10, 11, 50, 51],
        lambda k, a, b, n: stats.betabinom.logpmf(k, n, a, b),
    ),
    Case(
        "diracdelta",
        km.DiracDelta,
        ("c",),
        [(0,), (3,), (-2,)],
        [-3, -2, 0, 2, 3, 4],
        lambda k, c: 0.0 if k == c else -INF,
        lambda k, c: 0.0 if k >= c else -INF,
    ),
    Case(
        "diracdelta_float",
        km.DiracDelta,
        ("c",),
        [(0.5,), (-2.25,)],
        [-2.25, 0.0, 0.5, 1.0],
        lambda x, c: 0.0 if x == c else -INF,
        lambda x, c: 0.0 if x >= c else -INF,
    ),
    Case(
        "discrete_weibull",
        km.DiscreteWeibull,
        ("q", "beta"),
        [(0.5, 1.0), (0.9, 0.5), (0.2, 2.5), (0.999, 1.3)],
        [-1, 0, 1, 2, 5, 30, 1000],
        _discrete_weibull_logp,
        _discrete_weibull_logcdf,
    ),
    Case(
        "zero_inflated_poisson",
        km.ZeroInflatedPoisson,
        ("psi", "mu"),
        [(0.7, 3.0), (1.0, 0.5), (0.0, 2.0), (0.3, 0.0), (0.5, 500.0)],
        [-1, 0, 1, 5, 500],
        _zero_inflated(lambda k, mu: stats.poisson.logpmf(k, mu)),
    ),
    Case(
        "zero_inflated_binomial",
        km.ZeroInflatedBinomial,
        ("psi", "n", "p"),
        [(0.7, 10, 0.3), (1.0, 5, 0.5), (0.4, 10, 0.0), (0.4, 10, 1.0), (0.0, 3, 0.2)],
        [-1, 0, 1, 3, 10, 11],
        _zero_inflated(lambda k, n, p: stats.binom.logpmf(k, n, p)),
    ),
    Case(
        "zero_inflated_negative_binomial",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(0.7, 3.0, 2.0), (0.2, 0.5, 100.0), (1.0, 30.0, 0.2)],
        [-1, 0, 1, 5, 50],
        _zero_inflated(lambda k, mu, a: stats.nbinom.logpmf(k, a, a / (mu + a))),
    ),
    Case(
        "zero_inflated_negative_binomial_np",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "n", "p"),
        [(0.7, 3.0, 0.4), (0.5, 1.0, 1.0), (0.9, 20.0, 0.9)],
        [-1, 0, 1, 5, 50],
        _zero_inflated(lambda k, n, p: stats.nbinom.logpmf(k, n, p)),
    ),
    Case(
        "hurdle_poisson",
        km.HurdlePoisson,
        ("psi", "mu"),
        [(0.7, 3.0), (1.0, 0.5), (0.0, 2.0), (0.4, 1e-6), (0.5, 500.0)],
        [-1, 0, 1, 5, 500],
        _hurdle(lambda k, mu: stats.poisson.logpmf(k, mu) - np.log(-np.expm1(-mu))),
    ),
    Case(
        "hurdle_negative_binomial",
        km.HurdleNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(0.7, 3.0, 2.0), (0.0, 2.0, 1.0), (0.4, 1e-4, 5.0), (0.5, 300.0, 0.5)],
        [-1, 0, 1, 5, 500],
        _hurdle(
            lambda k, mu, a: (
                stats.nbinom.logpmf(k, a, a / (mu + a))
                - np.log(-np.expm1(a * np.log(a / (mu + a))))
            )
        ),
    ),
    Case(
        "hurdle_negative_binomial_np",
        km.HurdleNegativeBinomial,
        ("psi", "n", "p"),
        [(0.7, 3.0, 0.4), (1.0, 0.5, 0.9)],
        [0, 1, 5, 40],
        _hurdle(lambda k, n, p: stats.nbinom.logpmf(k, n, p) - np.log(-np.expm1(n * np.log(p)))),
    ),
    Case(
        "hurdle_gamma",
        km.HurdleGamma,
        ("psi", "alpha", "beta"),
        [(0.7, 2.0, 1.5), (1.0, 0.5, 1.0), (0.3, 30.0, 0.2)],
        [-1.0, 0.0, 1e-8, 0.5, 2.0, 200.0],
        _hurdle(lambda x, a, b: stats.gamma.logpdf(x, a, scale=1.0 / b)),
    ),
    Case(
        "hurdle_gamma_mu_sigma",
        km.HurdleGamma,
        ("psi", "mu", "sigma"),
        [(0.6, 2.0, 1.0), (0.9, 0.5, 2.0)],
        [-1.0, 0.0, 0.3, 4.0],
        _hurdle(lambda x, mu, s: stats.gamma.logpdf(x, (mu / s) ** 2, scale=s * s / mu)),
    ),
    Case(
        "hurdle_lognormal",
        km.HurdleLogNormal,
        ("psi", "mu", "sigma"),
        [(0.7, 0.0, 1.0), (0.2, 1.5, 0.3), (1.0, -2.0, 2.0)],
        [-1.0, 0.0, 1e-8, 0.5, 3.0, 100.0],
        _hurdle(lambda x, mu, s: stats.lognorm.logpdf(x, s, scale=np.exp(mu))),
    ),
    Case(
        "hurdle_lognormal_tau",
        km.HurdleLogNormal,
        ("psi", "mu", "tau"),
        [(0.5, 0.3, 4.0)],
        [0.0, 0.5, 3.0],
        _hurdle(lambda x, mu, tau: stats.lognorm.logpdf(x, 1.0 / np.sqrt(tau), scale=np.exp(mu))),
    ),
    Case(
        "ordered_logistic",
        km.OrderedLogistic,
        ("eta", "cutpoints"),
        [(0.0, _CUT), (0.3, _CUT), (-50.0, _CUT), (50.0, _CUT), (0.0, _CUT_FAR), (1.0, _CUT_TIED)],
        [-1, 0, 1, 2, 3, 4],
        _ordered(stats.logistic),
    ),
    Case(
        "ordered_probit",
        km.OrderedProbit,
        ("eta", "cutpoints", "sigma"),
        [
            (0.0, _CUT, 1.0),
            (0.3, _CUT, 2.0),
            (-20.0, _CUT, 1.0),
            (20.0, _CUT, 1.0),
            (0.0, _CUT_FAR, 1.0),
            (1.0, _CUT_TIED, 0.5),
        ],
        [-1, 0, 1, 2, 3, 4],
        _ordered(stats.norm),
    ),
    Case(
        "normal_mixture",
        km.NormalMixture,
        ("w", "mu", "sigma"),
        [
            (np.array([0.3, 0.7]), np.array([-2.0, 2.0]), np.array([1.0, 0.5])),
            (np.array([1.0, 0.0]), np.array([0.0, 50.0]), np.array([1.0, 1.0])),
            (np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([0.1, 10.0])),
        ],
        [-60.0, -2.0, 0.0, 1.0, 2.0, 50.0],
        lambda x, w, mu, s: float(special.logsumexp(stats.norm.logpdf(x, mu, s), b=w)),
        _normal_mixture_logcdf,
        # The class's logcdf is a log-sum-exp of the components' log-CDFs: near CDF = 1 it
        # keeps absolute (not relative) digits, ~1e-16.
        atol=1e-15,
    ),
    _invalid("gumbel_invalid", km.Gumbel, ("mu", "beta"), [(0.0, 0.0), (0.0, -1.0)], [0.0, 1.0]),
    _invalid("chisquared_invalid", km.ChiSquared, ("nu",), [(0.0,), (-1.0,)], [0.5, 2.0]),
    _invalid(
        "exgaussian_invalid",
        km.ExGaussian,
        ("mu", "sigma", "nu"),
        [(0.0, -1.0, 1.0), (0.0, 1.0, 0.0)],
        [0.0, 1.0],
    ),
    _invalid("pareto_invalid", km.Pareto, ("alpha", "m"), [(0.0, 1.0), (2.0, -1.0)], [2.0]),
    _invalid("kumaraswamy_invalid", km.Kumaraswamy, ("a", "b"), [(0.0, 1.0), (1.0, -1.0)], [0.5]),
    _invalid("moyal_invalid", km.Moyal, ("mu", "sigma"), [(0.0, 0.0)], [0.0, 1.0]),
    _invalid(
        "skewnormal_invalid", km.SkewNormal, ("mu", "sigma", "alpha"), [(0.0, -1.0, 1.0)], [0.0]
    ),
    _invalid("discrete_uniform_invalid", km.DiscreteUniform, ("lower", "upper"), [(3, 1)], [1, 2]),
    _invalid(
        "betabinomial_invalid",
        km.BetaBinomial,
        ("alpha", "beta", "n"),
        [(0.0, 1.0, 5), (1.0, -1.0, 5)],
        [0, 2],
    ),
    _invalid(
        "discrete_weibull_invalid",
        km.DiscreteWeibull,
        ("q", "beta"),
        [(0.0, 1.0), (1.0, 1.0), (0.5, 0.0)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_poisson_invalid",
        km.ZeroInflatedPoisson,
        ("psi", "mu"),
        [(1.5, 1.0), (-0.1, 1.0), (0.5, -1.0)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_binomial_invalid",
        km.ZeroInflatedBinomial,
        ("psi", "n", "p"),
        [(1.5, 5, 0.5), (0.5, 5, 1.5)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_negative_binomial_invalid",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(1.5, 1.0, 1.0), (0.5, 1.0, -1.0)],
        [0, 2],
    ),
    _invalid(
        "hurdle_poisson_invalid", km.HurdlePoisson, ("psi", "mu"), [(1.5, 1.0), (0.5, 0.0)], [0, 2]
    ),
    _invalid(
        "hurdle_gamma_invalid",
        km.HurdleGamma,
        ("psi", "alpha", "beta"),
        [(1.5, 1.0, 1.0), (0.5, -1.0, 1.0)],
        [0.0, 2.0],
    ),
    _invalid(
        "hurdle_lognormal_invalid",
        km.HurdleLogNormal,
        ("psi", "mu", "sigma"),
        [(-0.5, 0.0, 1.0), (0.5, 0.0, -1.0)],
        [0.0, 2.0],
    ),
    _invalid(
        "ordered_logistic_invalid",
        km.OrderedLogistic,
        ("eta", "cutpoints"),
        [(0.0, np.array([1.0, 0.0, 2.0]))],  # not increasing
        [0, 1, 3],
    ),
    _invalid(
        "ordered_probit_invalid",
        km.OrderedProbit,
        ("eta", "cutpoints", "sigma"),
        [(0.0, np.array([1.0, 0.0, 2.0]), 1.0), (0.0, _CUT, 0.0)],
        [0, 1, 3],
    ),
]


def _logitnorm_logpdf(x: float, mu: float, sigma: float) -> float:
    if not 0.0 < x < 1.0:
        return -np.inf
    return stats.norm.logpdf(special.logit(x), mu, sigma) - np.log(x) - np.log1p(-x)


def _logitnorm_logcdf(x: float, mu: float, sigma: float) -> float:
    if x <= 0.0:
        return -np.inf
    return 0.0 if x >= 1.0 else stats.norm.logcdf(special.logit(x), mu, sigma)


def _vonmises_logpdf(x: float, mu: float, kappa: float) -> float:
    return stats.vonmises.logpdf(x, kappa, loc=mu) if abs(x) <= np.pi else -np.inf


#: The distributions of _continuous_more.py and HyperGeometric (Interpolated takes
#: vectors of points: test_continuous_more.py checks it).
MORE_CASES = [
    Case(
        "logitnormal",
        km.LogitNormal,
        ("mu", "sigma"),
        [(0.0, 1.0), (0.3, 0.8), (-2.0, 3.0)],
        [-0.1, 1e-8, 0.2, 0.6, 1 - 1e-8, 1.2],
        _logitnorm_logpdf,
        _logitnorm_logcdf,
    ),
    Case(
        "triangular",
        km.Triangular,
        ("lower", "c", "upper"),
        [(-1.0, 0.5, 2.0), (0.0, 0.0, 2.0), (0.0, 1.0, 1.0)],
        [-1.5, -0.9, 0.0, 0.2, 0.5, 0.99, 1.7, 2.5],
        lambda x, lo, c, hi: stats.triang.logpdf(x, (c - lo) / (hi - lo), lo, hi - lo),
        lambda x, lo, c, hi: stats.triang.logcdf(x, (c - lo) / (hi - lo), lo, hi - lo),
        pairs=[(i, j) for i in range(3) for j in range(8) if not (i == 0 and j == 2)],
    ),
    Case(
        "asymmetric_laplace",
        km.AsymmetricLaplace,
        ("b", "kappa", "mu"),
        [(1.5, 0.6, 0.4), (1.0, 1.0, 0.0), (0.2, 4.0, -3.0)],
        [-60.0, -1.0, 0.3, 0.4, 2.0, 40.0],
        lambda x, b, k, mu: stats.laplace_asymmetric.logpdf(x, k, mu, 1 / b),
        lambda x, b, k, mu: stats.laplace_asymmetric.logcdf(x, k, mu, 1 / b),
    ),
    Case(
        "wald",
        km.Wald,
        ("mu", "lam", "alpha"),
        [(1.5, 2.0, 0.0), (0.7, 5.0, -1.0), (3.0, 0.5, 2.0)],
        [-1.5, 0.0, 1e-3, 0.4, 2.5, 6.0, 40.0],
        lambda x, mu, lam, a: stats.invgauss.logpdf(x, mu / lam, a, lam),
        lambda x, mu, lam, a: stats.invgauss.logcdf(x, mu / lam, a, lam),
        atol=1e-12,
    ),
    Case(
        "skew_student_t",
        km.SkewStudentT,
        ("a", "b", "mu", "sigma"),
        [(2.0, 5.0, 0.5, 1.5), (1.0, 1.0, 0.0, 1.0), (6.0, 0.5, -2.0, 3.0)],
        [-200.0, -20.0, -2.0, 0.5, 3.0, 50.0],
        lambda x, a, b, mu, s: stats.jf_skew_t.logpdf(x, a, b, mu, s),
        lambda x, a, b, mu, s: stats.jf_skew_t.logcdf(x, a, b, mu, s),
        rtol=1e-9,
    ),
    Case(
        "rice",
        km.Rice,
        ("nu", "sigma"),
        [(2.0, 0.8), (0.0, 1.0), (30.0, 2.0)],
        [-1.0, 0.0, 1e-3, 1.0, 2.0, 4.0, 31.0],
        lambda x, nu, s: stats.rice.logpdf(x, nu / s, scale=s),
        rtol=1e-9,
    ),
    Case(
        "vonmises",
        km.VonMises,
        ("mu", "kappa"),
        [(0.5, 2.0), (-3.0, 0.01), (0.0, 500.0)],
        [-4.0, -np.pi, -1.0, 0.0, 0.5, 3.0, np.pi, 3.5],
        _vonmises_logpdf,
        atol=1e-12,
    ),
    Case(
        "hypergeometric",
        km.HyperGeometric,
        ("N", "k", "n"),
        [(20, 7, 12), (10, 0, 5), (50, 50, 7), (1000, 300, 400)],
        [-1, 0, 2, 5, 7, 12, 130],
        lambda x, n_items, k, n: stats.hypergeom.logpmf(x, n_items, k, n),
        atol=1e-12,
    ),
]
