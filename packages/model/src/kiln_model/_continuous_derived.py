"""Continuous distributions drawn as graphs of kiln's existing draws (``SymbolicDistribution``)."""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import TensorVariable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._continuous import Gamma, _interval_transform
from kiln_model._distribution import broadcast_like, density_of, icdf_bound
from kiln_model._math import LOG_2, LOG_2PI, bound, log_diff_exp, normal_lcdf
from kiln_model._parametrizations import precision
from kiln_model._symbolic import SymbolicDistribution, batch_shape

_EULER = 0.5772156649015329


def _positive(*names: str) -> tuple[Any, ...]:
    return tuple(((n,), lambda v: v > 0, f"{n} must be > 0") for n in names)


def _normal_logp(x: Any, mu: Any, sigma: Any) -> Any:
    z = (x - mu) / sigma
    return -0.5 * z * z - kt.log(sigma) - 0.5 * LOG_2PI


class Gumbel(SymbolicDistribution):
    """Gumbel(mu, beta): location ``mu``, scale ``beta`` (``mu - beta * log(Exponential(1))``)."""

    params = ("mu", "beta")
    param_checks = _positive("beta")

    @classmethod
    def build(cls, mu: Any, beta: Any, *, size: Any, rng: Any) -> TensorVariable:
        e = kr.exponential(size=batch_shape(size, mu, beta), rng=rng)
        return mu - beta * kt.log(e)

    @staticmethod
    def logp(value: Any, mu: Any, beta: Any) -> TensorVariable:
        z = (value - mu) / beta
        return bound(-kt.log(beta) - z - kt.exp(-z), beta > 0)

    @staticmethod
    def logcdf(value: Any, mu: Any, beta: Any) -> TensorVariable:
        return bound(-kt.exp(-(value - mu) / beta), beta > 0)

    @staticmethod
    def icdf(value: Any, mu: Any, beta: Any) -> TensorVariable:
        return icdf_bound(mu - beta * kt.log(-kt.log(value)), value, beta > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, beta: Any) -> TensorVariable:
        return broadcast_like(mu + _EULER * beta, rv)


class ChiSquared(SymbolicDistribution):
    """ChiSquared(nu): ``Gamma(nu / 2, rate 1 / 2)``."""

    params = ("nu",)
    param_checks = _positive("nu")
    support = "positive"

    @classmethod
    def build(cls, nu: Any, *, size: Any, rng: Any) -> TensorVariable:
        return kr.gamma(nu / 2.0, 2.0, size=batch_shape(size, nu), rng=rng)

    @staticmethod
    def logp(value: Any, nu: Any) -> TensorVariable:
        # Gamma's: finite at 0 where nu = 2, +inf there where nu < 2 (as SciPy's chi2).
        return Gamma.logp(value, nu / 2.0, 2.0)

    @staticmethod
    def logcdf(value: Any, nu: Any) -> TensorVariable:
        return Gamma.logcdf(value, nu / 2.0, 2.0)

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any) -> TensorVariable:
        return broadcast_like(nu, rv)


class ExGaussian(SymbolicDistribution):
    """ExGaussian(mu, sigma, nu): ``Normal(mu, sigma) + Exponential(mean nu)``."""

    params = ("mu", "sigma", "nu")
    param_checks = _positive("sigma", "nu")

    @classmethod
    def build(cls, mu: Any, sigma: Any, nu: Any, *, size: Any, rng: Any) -> TensorVariable:
        s = batch_shape(size, mu, sigma, nu)
        return kr.normal(mu, sigma, size=s, rng=rng) + kr.exponential(nu, size=s, rng=kr.rng())

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any, nu: Any) -> TensorVariable:
        z = (value - mu) / sigma
        lp = -kt.log(nu) + (mu - value) / nu + sigma * sigma / (2.0 * nu * nu)
        return bound(lp + normal_lcdf(z - sigma / nu), sigma > 0, nu > 0)

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any, nu: Any) -> TensorVariable:
        z = (value - mu) / sigma
        shift = (mu - value) / nu + sigma * sigma / (2.0 * nu * nu) + normal_lcdf(z - sigma / nu)
        return bound(log_diff_exp(normal_lcdf(z), shift), sigma > 0, nu > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, sigma: Any, nu: Any) -> TensorVariable:
        return broadcast_like(mu + nu, rv)


class Pareto(SymbolicDistribution):
    """Pareto(alpha, m): shape ``alpha``, lower bound ``m`` (``m exp(Exponential(1) / alpha)``)."""

    params = ("alpha", "m")
    param_checks = _positive("alpha", "m")
    support = "interval"

    @classmethod
    def build(cls, alpha: Any, m: Any, *, size: Any, rng: Any) -> TensorVariable:
        return m * kt.exp(kr.exponential(size=batch_shape(size, alpha, m), rng=rng) / alpha)

    @staticmethod
    def logp(value: Any, alpha: Any, m: Any) -> TensorVariable:
        lp = kt.log(alpha) + alpha * kt.log(m) - (alpha + 1.0) * kt.log(value)
        return bound(lp, value >= m, alpha > 0, m > 0)

    @staticmethod
    def logcdf(value: Any, alpha: Any, m: Any) -> TensorVariable:
        inside = kt.log1mexp(alpha * (kt.log(m) - kt.log(kt.maximum(value, m))))
        return bound(kt.switch(value < m, -np.inf, inside), alpha > 0, m > 0)

    @staticmethod
    def icdf(value: Any, alpha: Any, m: Any) -> TensorVariable:
        return icdf_bound(m * kt.exp(-kt.log1p(-value) / alpha), value, alpha > 0, m > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, m: Any) -> TensorVariable:
        return broadcast_like(m * 2.0 ** (1.0 / alpha), rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        _, (_, m) = density_of(rv)
        return _interval_transform(m, kt.as_tensor(np.inf))


class Kumaraswamy(SymbolicDistribution):
    """Kumaraswamy(a, b) on (0, 1): density ``a b x^(a-1) (1 - x^a)^(b-1)`` (inverse CDF draw)."""

    params = ("a", "b")
    param_checks = _positive("a", "b")
    support = "unit"

    @classmethod
    def build(cls, a: Any, b: Any, *, size: Any, rng: Any) -> TensorVariable:
        u = kr.uniform(size=batch_shape(size, a, b), rng=rng)
        return (-kt.expm1(kt.log1p(-u) / b)) ** (1.0 / a)

    @staticmethod
    def logp(value: Any, a: Any, b: Any) -> TensorVariable:
        lp = kt.log(a) + kt.log(b) + (a - 1.0) * kt.log(value) + (b - 1.0) * kt.log1p(-(value**a))
        return bound(lp, value > 0, value < 1, a > 0, b > 0)

    @staticmethod
    def logcdf(value: Any, a: Any, b: Any) -> TensorVariable:
        x = kt.clip(value, 0.0, 1.0)
        inside = kt.log1mexp(b * kt.log1p(-(x**a)))
        return bound(
            kt.switch(value <= 0, -np.inf, kt.switch(value >= 1, 0.0, inside)), a > 0, b > 0
        )

    @staticmethod
    def icdf(value: Any, a: Any, b: Any) -> TensorVariable:
        x = (-kt.expm1(kt.log1p(-value) / b)) ** (1.0 / a)
        return icdf_bound(x, value, a > 0, b > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, a: Any, b: Any) -> TensorVariable:
        return broadcast_like((1.0 - 0.5 ** (1.0 / b)) ** (1.0 / a), rv)


class Moyal(SymbolicDistribution):
    """Moyal(mu, sigma): ``mu - sigma * log(Normal(0, 1)^2)``."""

    params = ("mu", "sigma")
    defaults = {"mu": 0.0, "sigma": 1.0}
    param_checks = _positive("sigma")

    @classmethod
    def build(cls, mu: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        n = kr.normal(size=batch_shape(size, mu, sigma), rng=rng)
        return mu - sigma * kt.log(n * n)

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        z = (value - mu) / sigma
        return bound(-0.5 * (z + kt.exp(-z)) - kt.log(sigma) - 0.5 * LOG_2PI, sigma > 0)

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        # log erfc(exp(-z / 2) / sqrt 2) = log 2 + log Phi(-exp(-z / 2)): digits in both tails.
        z = (value - mu) / sigma
        return bound(LOG_2 + normal_lcdf(-kt.exp(-0.5 * z)), sigma > 0)


class SkewNormal(SymbolicDistribution):
    """SkewNormal(mu, sigma, alpha, tau=): density ``2 phi(z) Phi(alpha z) / sigma``."""

    params = ("mu", "sigma", "alpha", "tau")
    defaults = {"mu": 0.0, "sigma": 1.0, "alpha": 0.0}
    alternatives = (precision("tau", "sigma"),)
    param_checks = _positive("sigma")

    @classmethod
    def build(cls, mu: Any, sigma: Any, alpha: Any, *, size: Any, rng: Any) -> TensorVariable:
        s = batch_shape(size, mu, sigma, alpha)
        u0 = kr.normal(size=s, rng=rng)
        v = kr.normal(size=s, rng=kr.rng())
        delta = alpha / kt.sqrt(1.0 + alpha * alpha)
        u1 = delta * u0 + kt.sqrt(1.0 - delta * delta) * v
        return mu + sigma * kt.switch(u0 >= 0, u1, -u1)

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any, alpha: Any) -> TensorVariable:
        z = (value - mu) / sigma
        return bound(LOG_2 + _normal_logp(value, mu, sigma) + normal_lcdf(alpha * z), sigma > 0)


class PolyaGamma(SymbolicDistribution):
    """PolyaGamma(h, z): not implemented in kiln (``.dist`` raises ``NotImplementedError``)."""

    params = ("h", "z")

    @classmethod
    def dist(cls, *args: Any, **kwargs: Any) -> TensorVariable:
        raise NotImplementedError(
            "PolyaGamma is not implemented in kiln (its density is an infinite series); "
            "use a Bernoulli/Binomial likelihood with a logit link instead"
        )
