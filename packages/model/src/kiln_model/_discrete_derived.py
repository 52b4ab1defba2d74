"""Discrete distributions built from other draws (PyMC's names and parameters).

Discrete uniform, beta-binomial, Dirac delta, discrete Weibull, zero-inflated, hurdle
and ordinal ones.

Each is a :class:`SymbolicDistribution`: its draw is a graph of :mod:`kiln_random`
draws, so it runs on every backend. Zero-inflated ones put an extra mass ``1 - psi`` at
0; hurdle ones draw 0 with probability ``1 - psi`` and otherwise the base distribution
truncated to ``x > 0`` (``psi`` is the probability of a non-zero, as in PyMC).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._continuous import Gamma, LogNormal
from kiln_model._discrete import Binomial, NegativeBinomial, Poisson, negative_binomial_log_zero
from kiln_model._distribution import Distribution, broadcast_like, icdf_bound
from kiln_model._math import bound, log1m, log_diff_exp, log_gamma_ratio, normal_lcdf
from kiln_model._parametrizations import precision
from kiln_model._symbolic import SymbolicDistribution, batch_shape
from kiln_model._truncated import Truncated

_PSI_CHECK = (("psi",), lambda psi: (psi >= 0) & (psi <= 1), "psi must be in [0, 1]")


def _f(x: Any) -> TensorVariable:
    return kt.as_tensor(x, dtype="float64") if not isinstance(x, TensorVariable) else x


def _round(x: Any) -> TensorVariable:
    return kt.cast(kt.floor(_f(x) + 0.5), "int64")


def _logaddexp(a: Any, b: Any) -> TensorVariable:
    """Return ``log(exp(a) + exp(b))`` (finite where either is)."""
    hi = kt.maximum(a, b)
    lo = kt.minimum(a, b)
    return hi + kt.log1p(kt.exp(lo - hi))


def _is_integer(value: np.ndarray) -> bool:
    return bool(np.all(np.mod(value, 1) == 0))


def _psi_valid(psi: Any) -> tuple[Any, Any]:
    return psi >= 0, psi <= 1


class DiscreteUniform(SymbolicDistribution):
    """DiscreteUniform(lower, upper): each integer of ``lower..upper`` equally likely."""

    params = ("lower", "upper")
    support = "integer"
    discrete = True
    param_checks = ((("lower", "upper"), lambda lo, hi: lo <= hi, "lower must be <= upper"),)

    @classmethod
    def build(cls, lower: Any, upper: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, lower, upper)
        lo, hi = kt.floor(_f(lower)), kt.floor(_f(upper))
        u = kr.uniform(0.0, 1.0, size=size, rng=rng)
        return kt.cast(kt.minimum(lo + kt.floor(u * (hi - lo + 1.0)), hi), "int64")

    @staticmethod
    def logp(value: Any, lower: Any, upper: Any) -> TensorVariable:
        logp = -kt.log(_f(upper) - lower + 1.0) + kt.zeros_like(_f(value))
        return bound(logp, value >= lower, value <= upper, lower <= upper)

    @staticmethod
    def logcdf(value: Any, lower: Any, upper: Any) -> TensorVariable:
        k = kt.minimum(kt.floor(_f(value)), upper)
        lcdf = kt.log(k - lower + 1.0) - kt.log(_f(upper) - lower + 1.0)
        return bound(kt.switch(value < lower, -np.inf, lcdf), lower <= upper)

    @staticmethod
    def icdf(value: Any, lower: Any, upper: Any) -> TensorVariable:
        lo = _f(lower)
        k = kt.maximum(lo - 1.0 + kt.ceil(value * (_f(upper) - lo + 1.0)), lo)
        return icdf_bound(k, value, lower <= upper)

    @classmethod
    def support_point(cls, rv: TensorVariable, lower: Any, upper: Any) -> TensorVariable:
        return broadcast_like(_round(kt.floor((_f(lower) + upper) / 2.0)), rv)

    @classmethod
    def discrete_bounds(cls, lower: Any, upper: Any) -> tuple[Any, Any]:
        """Return the smallest and largest value (the bounds of a sampler's proposals)."""
        return lower, upper

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        if not _is_integer(value):
            raise KilnValueError(f"{name}: observed values must be integers for {cls.__name__}")


class BetaBinomial(SymbolicDistribution):
    """BetaBinomial(alpha, beta, n): a Binomial(n, p) count with p ~ Beta(alpha, beta)."""

    params = ("alpha", "beta", "n")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (
        (("alpha",), lambda a: a > 0, "alpha must be > 0"),
        (("beta",), lambda b: b > 0, "beta must be > 0"),
        (("n",), lambda n: (n >= 0) & (np.mod(n, 1) == 0), "n must be a non-negative integer"),
    )

    @classmethod
    def build(cls, alpha: Any, beta: Any, n: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, alpha, beta, n)
        p = kr.beta(alpha, beta, size=size, rng=rng)
        return kr.binomial(n, p, size=size, rng=kr.rng())

    @staticmethod
    def logp(value: Any, alpha: Any, beta: Any, n: Any) -> TensorVariable:
        x = _f(value)
        log_choose = kt.gammaln(n + 1.0) - kt.gammaln(x + 1.0) - kt.gammaln(n - x + 1.0)
        # betaln(x + alpha, n - x + beta) - betaln(alpha, beta), as three log-Gamma ratios:
        # the difference of the betaln values cancels to noise of 1e15 at alpha, beta ~ 1e30
        # (a spurious mode a sampler under a flat prior finds: +6e17 there).
        logp = (
            log_choose
            + log_gamma_ratio(alpha, x)
            + log_gamma_ratio(beta, n - x)
            - log_gamma_ratio(alpha + beta, n + 0.0)
        )
        return bound(logp, value >= 0, value <= n, alpha > 0, beta > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, beta: Any, n: Any) -> TensorVariable:
        return broadcast_like(_round(n * _f(alpha) / (_f(alpha) + beta)), rv)

    @classmethod
    def discrete_bounds(cls, alpha: Any, beta: Any, n: Any) -> tuple[Any, Any]:
        """Return the smallest and largest value (the bounds of a sampler's proposals)."""
        return 0, n

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        super().check_observed(name, value)


class DiracDelta(SymbolicDistribution):
    """DiracDelta(c): the constant ``c`` with probability 1 (log-probability 0 there)."""

    params = ("c",)
    support = "integer"
    discrete = True

    @classmethod
    def build(cls, c: Any, *, size: Any, rng: Any) -> TensorVariable:
        c = kt.as_tensor(c)
        if size is None:
            return c + kt.zeros_like(c)
        shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
        return kt.broadcast_to(c, shape)

    @staticmethod
    def logp(value: Any, c: Any) -> TensorVariable:
        return kt.switch(kt.eq(value, c), 0.0, -np.inf)

    @staticmethod
    def logcdf(value: Any, c: Any) -> TensorVariable:
        return kt.switch(value < c, -np.inf, 0.0)

    @classmethod
    def support_point(cls, rv: TensorVariable, c: Any) -> TensorVariable:
        return broadcast_like(c, rv)

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        return None


class DiscreteWeibull(SymbolicDistribution):
    """DiscreteWeibull(q, beta): ``P(x) = q**(x**beta) - q**((x + 1)**beta)``, x >= 0."""

    params = ("q", "beta")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (
        (("q",), lambda q: (q > 0) & (q < 1), "q must be in (0, 1)"),
        (("beta",), lambda b: b > 0, "beta must be > 0"),
    )

    @classmethod
    def build(cls, q: Any, beta: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, q, beta)
        u = kr.uniform(0.0, 1.0, size=size, rng=rng)
        # The smallest x with 1 - q**((x + 1)**beta) >= u (inverse CDF).
        t = kt.exp(kt.log(kt.log1p(-u) / kt.log(q)) / beta) - 1.0
        return kt.cast(kt.maximum(kt.ceil(t), 0.0), "int64")

    @staticmethod
    def logp(value: Any, q: Any, beta: Any) -> TensorVariable:
        x = kt.maximum(_f(value), 0.0)
        logq = kt.log(q)
        # 0**beta as a switch: its gradient in beta, log(0) 0**beta, would be NaN.
        x_beta = kt.switch(x > 0, kt.switch(x > 0, x, 1.0) ** beta, 0.0)
        logp = log_diff_exp(x_beta * logq, (x + 1.0) ** beta * logq)
        return bound(logp, value >= 0, q > 0, q < 1, beta > 0)

    @staticmethod
    def logcdf(value: Any, q: Any, beta: Any) -> TensorVariable:
        x = kt.maximum(kt.floor(_f(value)), 0.0)
        lcdf = kt.log1mexp((x + 1.0) ** beta * kt.log(q))
        return bound(kt.switch(value < 0, -np.inf, lcdf), q > 0, q < 1, beta > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, q: Any, beta: Any) -> TensorVariable:
        median = kt.exp(kt.log(np.log(0.5) / kt.log(q)) / beta) - 1.0
        return broadcast_like(kt.cast(kt.maximum(kt.ceil(median), 0.0), "int64"), rv)


# -- zero-inflated ------------------------------------------------------------------


def _zero_inflated_logp(
    value: Any, psi: Any, base_logp: Any, base_logp0: Any, valid: list[Any]
) -> Any:
    """``log((1 - psi) [x = 0] + psi base(x))``: ``base_logp`` at x, ``base_logp0`` at 0.

    ``valid``: the base's parameter conditions (-inf where one fails, at 0 too).
    """
    # log(1 - psi + psi e^b) = log1p(psi expm1(b)) keeps its digits where e^b is near 1;
    # the sum in logs where it is small. Each branch sees a finite stand-in of the other.
    near_one = base_logp0 > -1.0
    b_hi = kt.switch(near_one, base_logp0, 0.0)
    b_lo = kt.switch(near_one, -1.0, base_logp0)
    at_zero = kt.switch(
        near_one,
        kt.log1p(psi * kt.expm1(b_hi)),
        _logaddexp(log1m(psi), kt.log(psi) + b_lo),
    )
    logp = kt.switch(kt.eq(value, 0), at_zero, kt.log(psi) + base_logp)
    return bound(logp, *_psi_valid(psi), *valid)


class ZeroInflatedPoisson(SymbolicDistribution):
    """ZeroInflatedPoisson(psi, mu): 0 with probability ``1 - psi``, else Poisson(mu)."""

    params = ("psi", "mu")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (_PSI_CHECK, (("mu",), lambda mu: mu >= 0, "mu must be >= 0"))

    @classmethod
    def build(cls, psi: Any, mu: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, mu)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        return keep * kr.poisson(mu, size=size, rng=kr.rng())

    @staticmethod
    def logp(value: Any, psi: Any, mu: Any) -> TensorVariable:
        valid = kr.OPS["poisson"].conditions(mu=mu)
        return _zero_inflated_logp(value, psi, Poisson.logp(value, mu), -_f(mu), valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, mu: Any) -> TensorVariable:
        return broadcast_like(_round(kt.floor(psi * _f(mu))), rv)


class ZeroInflatedBinomial(SymbolicDistribution):
    """ZeroInflatedBinomial(psi, n, p): 0 with probability ``1 - psi``, else Binomial(n, p)."""

    params = ("psi", "n", "p")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (
        _PSI_CHECK,
        (("n",), lambda n: (n >= 0) & (np.mod(n, 1) == 0), "n must be a non-negative integer"),
        (("p",), lambda p: (p >= 0) & (p <= 1), "p must be in [0, 1]"),
    )

    @classmethod
    def build(cls, psi: Any, n: Any, p: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, n, p)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        return keep * kr.binomial(n, p, size=size, rng=kr.rng())

    @staticmethod
    def logp(value: Any, psi: Any, n: Any, p: Any) -> TensorVariable:
        at0 = n * log1m(p)
        valid = kr.OPS["binomial"].conditions(n=n, p=p)
        return _zero_inflated_logp(value, psi, Binomial.logp(value, n, p), at0, valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, n: Any, p: Any) -> TensorVariable:
        return broadcast_like(_round(psi * n * _f(p)), rv)

    @classmethod
    def discrete_bounds(cls, psi: Any, n: Any, p: Any) -> tuple[Any, Any]:
        """Return the smallest and largest value (the bounds of a sampler's proposals)."""
        return 0, n


def _nb_params(cls_name: str, mu: Any, alpha: Any, p: Any, n: Any) -> tuple[Any, Any]:
    """Return NegativeBinomial's ``(n, p)`` from PyMC's ``(mu, alpha)`` or ``(p, n)``."""
    try:
        n_, p_ = NegativeBinomial.rv_params(mu=mu, alpha=alpha, p=p, n=n)
    except KilnTypeError:
        raise KilnTypeError(f"{cls_name}: give (mu, alpha) or (p=..., n=...)") from None
    return n_, p_


_NB_CHECKS = (
    (("mu",), lambda mu: mu >= 0, "mu must be >= 0"),
    (("alpha",), lambda alpha: alpha > 0, "alpha must be > 0"),
    (("p",), lambda p: (p > 0) & (p <= 1), "p must be in (0, 1]"),
    (("n",), lambda n: n > 0, "n must be > 0"),
)


class ZeroInflatedNegativeBinomial(SymbolicDistribution):
    """ZeroInflatedNegativeBinomial(psi, mu, alpha) or (psi, p=..., n=...).

    0 with probability ``1 - psi``, else NegativeBinomial (mean ``mu``, overdispersion
    ``alpha``; or ``n`` successes of probability ``p``).
    """

    params = ("psi", "mu", "alpha", "p", "n")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (_PSI_CHECK, *_NB_CHECKS)

    @classmethod
    def rv_params(
        cls, psi: Any = None, mu: Any = None, alpha: Any = None, p: Any = None, n: Any = None
    ) -> tuple[Any, ...]:
        if psi is None:
            raise KilnTypeError(f"{cls.__name__}: missing parameter 'psi'")
        return (psi, *_nb_params(cls.__name__, mu, alpha, p, n))

    @classmethod
    def build(cls, psi: Any, n: Any, p: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, n, p)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        return keep * kr.negative_binomial(n, p, size=size, rng=kr.rng())

    @staticmethod
    def logp(value: Any, psi: Any, n: Any, p: Any) -> TensorVariable:
        at0 = negative_binomial_log_zero(n, p)
        valid = kr.OPS["negative_binomial"].conditions(n=n, p=p)
        return _zero_inflated_logp(value, psi, NegativeBinomial.logp(value, n, p), at0, valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, n: Any, p: Any) -> TensorVariable:
        return broadcast_like(_round(kt.floor(psi * n * (1.0 - _f(p)) / p)), rv)


# -- hurdle -------------------------------------------------------------------------


def _hurdle_logp(value: Any, psi: Any, positive_logp: Any, valid: list[Any]) -> Any:
    """``log(1 - psi)`` at 0, ``log(psi) + positive_logp`` above (-inf below 0).

    ``valid``: the base's parameter conditions (-inf where one fails, at 0 too).
    """
    logp = kt.switch(kt.eq(value, 0), log1m(psi), kt.log(psi) + positive_logp)
    return bound(logp, value >= 0, *_psi_valid(psi), *valid)


class HurdlePoisson(SymbolicDistribution):
    """HurdlePoisson(psi, mu): 0 with probability ``1 - psi``, else Poisson(mu) given > 0."""

    params = ("psi", "mu")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (_PSI_CHECK, (("mu",), lambda mu: mu > 0, "mu must be > 0"))

    @classmethod
    def build(cls, psi: Any, mu: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, mu)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        # Zero-truncated Poisson (exact): the first event time t of a rate-mu process on
        # [0, 1], given that there is one, then 1 + the events left in (t, 1].
        u = kr.uniform(0.0, 1.0, size=size, rng=kr.rng())
        t = -kt.log1p(u * kt.expm1(-_f(mu))) / mu
        rest = kr.poisson(mu * kt.maximum(1.0 - t, 0.0), size=size, rng=kr.rng())
        return keep * (rest + 1)

    @staticmethod
    def logp(value: Any, psi: Any, mu: Any) -> TensorVariable:
        positive = Poisson.logp(value, mu) - kt.log1mexp(-_f(mu))
        return _hurdle_logp(value, psi, positive, [mu > 0])

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, mu: Any) -> TensorVariable:
        mean = psi * _f(mu) / -kt.expm1(-_f(mu))
        return broadcast_like(_round(kt.floor(mean)), rv)


class HurdleNegativeBinomial(SymbolicDistribution):
    """HurdleNegativeBinomial(psi, mu, alpha) or (psi, p=..., n=...).

    0 with probability ``1 - psi``, else NegativeBinomial (mean ``mu``, overdispersion
    ``alpha``; or ``n`` successes of probability ``p``) given that it is positive.
    """

    params = ("psi", "mu", "alpha", "p", "n")
    support = "nonnegative_integer"
    discrete = True
    param_checks = (_PSI_CHECK, *_NB_CHECKS)

    @classmethod
    def rv_params(
        cls, psi: Any = None, mu: Any = None, alpha: Any = None, p: Any = None, n: Any = None
    ) -> tuple[Any, ...]:
        if psi is None:
            raise KilnTypeError(f"{cls.__name__}: missing parameter 'psi'")
        return (psi, *_nb_params(cls.__name__, mu, alpha, p, n))

    @classmethod
    def build(cls, psi: Any, n: Any, p: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, n, p)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        # Zero-truncated NegativeBinomial (exact): Truncated's inverse-CDF draw.
        base = NegativeBinomial.dist(n=n, p=p, size=size, rng=kr.rng())
        positive = Truncated.dist(base, lower=1, upper=None, size=size, rng=kr.rng())
        return keep * positive

    @staticmethod
    def logp(value: Any, psi: Any, n: Any, p: Any) -> TensorVariable:
        # P(K > 0) = 1 - p^n, which must be positive
        log_zero = negative_binomial_log_zero(n, p)
        positive = NegativeBinomial.logp(value, n, p) - kt.log1mexp(log_zero)
        valid = kr.OPS["negative_binomial"].conditions(n=n, p=p)
        return _hurdle_logp(value, psi, positive, [*valid, log_zero < 0])

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, n: Any, p: Any) -> TensorVariable:
        mean = psi * n * (1.0 - _f(p)) / p / -kt.expm1(negative_binomial_log_zero(n, p))
        return broadcast_like(_round(kt.floor(mean)), rv)


class _ContinuousHurdle(SymbolicDistribution):
    """A continuous positive distribution with a point mass ``1 - psi`` at 0."""

    support = "nonnegative"
    discrete = False
    base: Any

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        return None  # a point mass at 0: no bijection to the real line


class HurdleGamma(_ContinuousHurdle):
    """HurdleGamma(psi, alpha, beta) or (psi, mu=..., sigma=...): 0 w.p. ``1 - psi``, else Gamma."""

    params = ("psi", "alpha", "beta", "mu", "sigma")
    param_checks = (
        _PSI_CHECK,
        (("alpha",), lambda a: a > 0, "alpha must be > 0"),
        (("beta",), lambda b: b > 0, "beta must be > 0"),
        (("mu",), lambda m: m > 0, "mu must be > 0"),
        (("sigma",), lambda s: s > 0, "sigma must be > 0"),
    )

    @classmethod
    def rv_params(
        cls,
        psi: Any = None,
        alpha: Any = None,
        beta: Any = None,
        mu: Any = None,
        sigma: Any = None,
    ) -> tuple[Any, ...]:
        if psi is None:
            raise KilnTypeError(f"{cls.__name__}: missing parameter 'psi'")
        if alpha is not None and beta is not None and mu is None and sigma is None:
            return (psi, alpha, 1.0 / _f(beta))
        if mu is not None and sigma is not None and alpha is None and beta is None:
            var = _f(sigma) * sigma
            return (psi, _f(mu) * mu / var, var / mu)
        raise KilnTypeError(f"{cls.__name__}: give (alpha, beta) or (mu=..., sigma=...)")

    @classmethod
    def build(cls, psi: Any, shape: Any, scale: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, shape, scale)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        return kt.switch(kt.eq(keep, 1), kr.gamma(shape, scale, size=size, rng=kr.rng()), 0.0)

    @staticmethod
    def logp(value: Any, psi: Any, shape: Any, scale: Any) -> TensorVariable:
        safe = kt.switch(value > 0, value, 1.0)
        valid = kr.OPS["gamma"].conditions(shape=shape, scale=scale)
        return _hurdle_logp(value, psi, Gamma.logp(safe, shape, scale), valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, shape: Any, scale: Any) -> TensorVariable:
        return broadcast_like(psi * _f(shape) * scale, rv)


class HurdleLogNormal(_ContinuousHurdle):
    """HurdleLogNormal(psi, mu, sigma) or (psi, mu, tau=...): 0 w.p. ``1 - psi``, else LogNormal."""

    params = ("psi", "mu", "sigma", "tau")
    defaults = {"mu": 0.0, "sigma": 1.0}
    alternatives = (precision("tau", "sigma"),)
    param_checks = (_PSI_CHECK, (("sigma",), lambda s: s > 0, "sigma must be > 0"))

    @classmethod
    def build(cls, psi: Any, mu: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        size = batch_shape(size, psi, mu, sigma)
        keep = kr.bernoulli(psi, size=size, rng=rng)
        draw = kr.lognormal(mu, sigma, size=size, rng=kr.rng())
        return kt.switch(kt.eq(keep, 1), draw, 0.0)

    @staticmethod
    def logp(value: Any, psi: Any, mu: Any, sigma: Any) -> TensorVariable:
        safe = kt.switch(value > 0, value, 1.0)
        valid = kr.OPS["lognormal"].conditions(mu=mu, sigma=sigma)
        return _hurdle_logp(value, psi, LogNormal.logp(safe, mu, sigma), valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, psi: Any, mu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(psi * kt.exp(mu + 0.5 * _f(sigma) * sigma), rv)


# -- ordinal ------------------------------------------------------------------------


def _pick(table: Any, index: Any) -> Any:
    """Return ``table[..., index]`` for an elementwise integer ``index`` (one-hot sum)."""
    k = kt.shape_i(table, -1)
    picked = kt.eq(kt.expand_dims(index, -1), kt.arange(k))
    return kt.sum(kt.switch(picked, table, 0.0), axis=-1)


def _ordinal_logp(value: Any, z: Any, log_cdf: Callable[[Any], Any]) -> Any:
    """``log(F(z_k) - F(z_{k-1}))`` for class ``k`` of cutpoints ``z`` (..., K), stably.

    Class 0 is ``log F(z_0)``, class K ``log(1 - F(z_{K-1}))``; between, the difference
    of the CDFs or (where ``z_{k-1} > 0``, both near 1) of the survival functions.
    """
    ncut = kt.shape_i(z, -1)
    lower_cdf, upper_sf = log_cdf(z), log_cdf(-z)  # log F(z), log(1 - F(z)) (symmetric F)
    value = kt.as_tensor(value)
    hi = kt.clip(value, 0, ncut - 1)
    lo = kt.clip(value - 1, 0, ncut - 1)
    f_hi, f_lo = _pick(lower_cdf, hi), _pick(lower_cdf, lo)
    s_hi, s_lo = _pick(upper_sf, hi), _pick(upper_sf, lo)
    inside = kt.logical_and(value > 0, value < ncut)
    # Outside the middle classes, and in the branch of the two a class does not take, the
    # differences see finite, distinct stand-ins, so that neither the value nor the
    # gradient is NaN there (in the tails both CDFs, or both survivals, round to 0).
    upper_side = _pick(z, lo) > 0
    f_lo_m = kt.switch(kt.logical_and(inside, ~upper_side), f_lo, f_hi - 1.0)
    s_hi_m = kt.switch(kt.logical_and(inside, upper_side), s_hi, s_lo - 1.0)
    middle = kt.switch(upper_side, log_diff_exp(s_lo, s_hi_m), log_diff_exp(f_hi, f_lo_m))
    logp = kt.switch(kt.eq(value, 0), f_hi, kt.switch(kt.eq(value, ncut), s_lo, middle))
    ordered = kt.all(z[..., 1:] >= z[..., :-1], axis=-1)
    return bound(logp, value >= 0, value <= ncut, ordered)


def _ordinal_draw(z: Any, cdf: Callable[[Any], Any], size: Any, rng: Any) -> TensorVariable:
    c = cdf(z)
    zero = kt.zeros_like(c[..., :1])
    upper = kt.concatenate([c, zero + 1.0], axis=-1)
    lower = kt.concatenate([zero, c], axis=-1)
    p = kt.maximum(upper - lower, 0.0)
    return kr.categorical(p, size=size, rng=rng)


def _ordinal_mode(z: Any, cdf: Callable[[Any], Any]) -> Any:
    c = cdf(z)
    zero = kt.zeros_like(c[..., :1])
    p = kt.concatenate([c, zero + 1.0], axis=-1) - kt.concatenate([zero, c], axis=-1)
    return kt.argmax(p, axis=-1)


class _Ordinal(SymbolicDistribution):
    support = "ordinal"
    discrete = True

    @classmethod
    def discrete_bounds(cls, eta: Any, cutpoints: Any, *rest: Any) -> tuple[Any, Any]:
        """Return the smallest and largest class: 0 and the number of cutpoints."""
        return 0, kt.shape_i(cutpoints, -1)

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        if not np.all((value >= 0) & (np.mod(value, 1) == 0)):
            raise KilnValueError(f"{name}: observed classes must be non-negative integers")


def _check_cutpoints(cls_name: str, cutpoints: Any) -> None:
    if kt.as_tensor(cutpoints).ndim < 1:
        raise KilnValueError(f"{cls_name}: cutpoints must be a vector (..., K), got a scalar")


class OrderedLogistic(_Ordinal):
    """OrderedLogistic(eta, cutpoints): class k of K + 1 with cutpoints c (increasing).

    ``P(k) = sigmoid(eta - c_{k-1}) - sigmoid(eta - c_k)`` (``c_{-1} = -inf``,
    ``c_K = inf``). ``compute_p`` is accepted and ignored.
    """

    params = ("eta", "cutpoints", "compute_p")
    defaults = {"compute_p": True}
    param_checks = (
        (
            ("cutpoints",),
            lambda c: np.all(np.diff(c, axis=-1) >= 0),
            "cutpoints must be increasing along the last axis",
        ),
    )

    @classmethod
    def rv_params(
        cls, eta: Any = None, cutpoints: Any = None, compute_p: Any = True
    ) -> tuple[Any, ...]:
        if eta is None or cutpoints is None:
            raise KilnTypeError(f"{cls.__name__}: give eta and cutpoints")
        _check_cutpoints(cls.__name__, cutpoints)
        return (eta, cutpoints)

    @staticmethod
    def _z(eta: Any, cutpoints: Any) -> Any:
        return _f(cutpoints) - kt.expand_dims(_f(eta), -1)

    @classmethod
    def build(cls, eta: Any, cutpoints: Any, *, size: Any, rng: Any) -> TensorVariable:
        z = cls._z(eta, cutpoints)
        return _ordinal_draw(z, kt.sigmoid, batch_shape(size, eta, cutpoints[..., 0]), rng)

    @staticmethod
    def logp(value: Any, eta: Any, cutpoints: Any) -> TensorVariable:
        z = OrderedLogistic._z(eta, cutpoints)
        return _ordinal_logp(value, z, lambda t: -kt.softplus(-t))

    @classmethod
    def support_point(cls, rv: TensorVariable, eta: Any, cutpoints: Any) -> TensorVariable:
        return broadcast_like(_ordinal_mode(cls._z(eta, cutpoints), kt.sigmoid), rv)


def _phi(z: Any) -> Any:
    return 0.5 * kt.erfc(-z * float(np.sqrt(0.5)))


class OrderedProbit(_Ordinal):
    """OrderedProbit(eta, cutpoints, sigma=1): ``P(k) = Phi((c_k - eta) / sigma) - ...``.

    Class k of K + 1 with increasing cutpoints c (``c_{-1} = -inf``, ``c_K = inf``).
    """

    params = ("eta", "cutpoints", "sigma", "compute_p")
    defaults = {"sigma": 1.0, "compute_p": True}
    param_checks = (
        OrderedLogistic.param_checks[0],
        (("sigma",), lambda s: s > 0, "sigma must be > 0"),
    )

    @classmethod
    def rv_params(
        cls, eta: Any = None, cutpoints: Any = None, sigma: Any = 1.0, compute_p: Any = True
    ) -> tuple[Any, ...]:
        if eta is None or cutpoints is None:
            raise KilnTypeError(f"{cls.__name__}: give eta and cutpoints")
        _check_cutpoints(cls.__name__, cutpoints)
        return (eta, cutpoints, sigma)

    @staticmethod
    def _z(eta: Any, cutpoints: Any, sigma: Any) -> Any:
        return (_f(cutpoints) - kt.expand_dims(_f(eta), -1)) / kt.expand_dims(_f(sigma), -1)

    @classmethod
    def build(cls, eta: Any, cutpoints: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        z = cls._z(eta, cutpoints, sigma)
        return _ordinal_draw(z, _phi, batch_shape(size, eta, cutpoints[..., 0], sigma), rng)

    @staticmethod
    def logp(value: Any, eta: Any, cutpoints: Any, sigma: Any) -> TensorVariable:
        z = OrderedProbit._z(eta, cutpoints, sigma)
        return bound(_ordinal_logp(value, z, normal_lcdf), sigma > 0)

    @classmethod
    def support_point(
        cls, rv: TensorVariable, eta: Any, cutpoints: Any, sigma: Any
    ) -> TensorVariable:
        return broadcast_like(_ordinal_mode(cls._z(eta, cutpoints, sigma), _phi), rv)


def _log_choose(n: Any, k: Any) -> TensorVariable:
    """Return ``log C(n, k)`` for ``0 <= k <= n`` (float64)."""
    return kt.gammaln(n + 1.0) - kt.gammaln(k + 1.0) - kt.gammaln(n - k + 1.0)


class HyperGeometric(Distribution):
    """HyperGeometric(N, k, n): successes in ``n`` draws without replacement.

    From ``N`` items of which ``k`` are successes (PyMC's names).
    """

    rv_op = kr.OPS["hypergeometric"]
    params = ("N", "k", "n")
    support = "nonnegative_integer"
    discrete = True

    @staticmethod
    def logp(value: Any, N: Any, k: Any, n: Any) -> TensorVariable:  # noqa: N803 (PyMC's name)
        x, total, good, draws = (kt.cast(v, "float64") for v in (value, N, k, n))
        lo = kt.maximum(0.0, draws - total + good)
        hi = kt.minimum(good, draws)
        ok = kt.logical_and(x >= lo, x <= hi)
        xs = kt.switch(ok, x, lo)  # every gammaln argument stays >= 1 off the support
        lp = (
            _log_choose(good, xs)
            + _log_choose(total - good, draws - xs)
            - _log_choose(total, draws)
        )
        valid = kr.OPS["hypergeometric"].conditions(N=N, k=k, n=n)
        return bound(kt.switch(ok, lp, -np.inf), *valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, N: Any, k: Any, n: Any) -> TensorVariable:  # noqa: N803
        mean = kt.cast(n, "float64") * k / kt.maximum(kt.cast(N, "float64"), 1.0)
        return broadcast_like(_round(kt.floor(mean)), rv)
