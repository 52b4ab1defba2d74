"""Continuous univariate distributions: log-densities written in the draw op's parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import Constant, TensorVariable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._distribution import Distribution, broadcast_like, icdf_bound
from kiln_model._incomplete_cdf import log_betainc, log_gammainc, log_gammaincc
from kiln_model._math import (
    LOG_2,
    LOG_2PI,
    LOG_PI,
    bound,
    log_diff_exp,
    normal_lcdf,
    xlog1py,
    xlogy,
)
from kiln_model._parametrizations import (
    BETA_NU_CHECKS,
    BETA_SD_CHECKS,
    MEAN_SD_CHECKS,
    Alternative,
    as_float,
    beta_concentration,
    beta_moments,
    gamma_moments,
    inverse_gamma_moments,
    precision,
)
from kiln_random import RandomVariable


def _normal_logp(x: Any, mu: Any, sigma: Any) -> Any:
    z = (x - mu) / sigma
    return -0.5 * z * z - kt.log(sigma) - 0.5 * LOG_2PI


class Normal(Distribution):
    """Normal(mu, sigma, tau): mean ``mu``, standard deviation ``sigma`` (or precision ``tau``)."""

    rv_op = kr.OPS["normal"]
    params = ("mu", "sigma", "tau")
    alternatives = (precision("tau", "sigma"),)
    defaults = {"mu": 0.0, "sigma": 1.0}

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        return bound(_normal_logp(value, mu, sigma), *kr.OPS["normal"].conditions(sigma=sigma))

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        return bound(normal_lcdf((value - mu) / sigma), *kr.OPS["normal"].conditions(sigma=sigma))

    @staticmethod
    def icdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        z = np.sqrt(2.0) * kt.erfinv(2.0 * value - 1.0)
        return icdf_bound(mu + sigma * z, value, *kr.OPS["normal"].conditions(sigma=sigma))


class HalfNormal(Distribution):
    """HalfNormal(sigma, tau): ``|Normal(0, sigma)|`` (or precision ``tau``)."""

    rv_op = kr.OPS["halfnormal"]
    params = ("sigma", "tau")
    alternatives = (precision("tau", "sigma"),)
    defaults = {"sigma": 1.0}
    support = "nonnegative"

    @staticmethod
    def logp(value: Any, sigma: Any) -> TensorVariable:
        valid = kr.OPS["halfnormal"].conditions(sigma=sigma)
        return bound(LOG_2 + _normal_logp(value, 0.0, sigma), value >= 0, *valid)

    @staticmethod
    def logcdf(value: Any, sigma: Any) -> TensorVariable:
        # log erf(z), through log1p(-erfc(z)) where erf(z) rounds to 1.
        z = value / (sigma * np.sqrt(2.0))
        lcdf = kt.switch(z < 1.0, kt.log(kt.erf(z)), kt.log1p(-kt.erfc(z)))
        return bound(lcdf, value >= 0, *kr.OPS["halfnormal"].conditions(sigma=sigma))

    @staticmethod
    def icdf(value: Any, sigma: Any) -> TensorVariable:
        x = sigma * np.sqrt(2.0) * kt.erfinv(value)
        return icdf_bound(x, value, *kr.OPS["halfnormal"].conditions(sigma=sigma))

    @classmethod
    def support_point(cls, rv: TensorVariable, sigma: Any) -> TensorVariable:
        return broadcast_like(sigma, rv)


class LogNormal(Distribution):
    """LogNormal(mu, sigma, tau): ``exp(Normal(mu, sigma))`` (or precision ``tau``)."""

    rv_op = kr.OPS["lognormal"]
    params = ("mu", "sigma", "tau")
    alternatives = (precision("tau", "sigma"),)
    defaults = {"mu": 0.0, "sigma": 1.0}
    support = "positive"

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        logx = kt.log(value)
        valid = kr.OPS["lognormal"].conditions(sigma=sigma)
        return bound(_normal_logp(logx, mu, sigma) - logx, value > 0, *valid)

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        valid = kr.OPS["lognormal"].conditions(sigma=sigma)
        return bound(normal_lcdf((kt.log(value) - mu) / sigma), value > 0, *valid)

    @staticmethod
    def icdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        x = kt.exp(mu + sigma * np.sqrt(2.0) * kt.erfinv(2.0 * value - 1.0))
        return icdf_bound(x, value, *kr.OPS["lognormal"].conditions(sigma=sigma))

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(kt.exp(mu + 0.5 * sigma * sigma), rv)


#: PyMC's other spelling of :class:`LogNormal`.
Lognormal = LogNormal


def _is_infinite(x: Any, sign: float) -> bool:
    return isinstance(x, Constant) and bool(np.all(x.data == sign * np.inf))


def _interval_transform(lower: Any, upper: Any) -> tr.Transform | None:
    lo = None if _is_infinite(lower, -1) else lower
    hi = None if _is_infinite(upper, 1) else upper
    if lo is None and hi is None:
        return None
    return tr.interval(lo, hi)


class Uniform(Distribution):
    """Uniform(lower, upper)."""

    rv_op = kr.OPS["uniform"]
    params = ("lower", "upper")
    defaults = {"lower": 0.0, "upper": 1.0}
    support = "interval"

    @staticmethod
    def logp(value: Any, lower: Any, upper: Any) -> TensorVariable:
        return bound(-kt.log(upper - lower) + 0.0 * value, value >= lower, value <= upper)

    @staticmethod
    def logcdf(value: Any, lower: Any, upper: Any) -> TensorVariable:
        inside = kt.log(value - lower) - kt.log(upper - lower)
        return kt.switch(value < lower, -np.inf, kt.switch(value > upper, 0.0, inside))

    @staticmethod
    def icdf(value: Any, lower: Any, upper: Any) -> TensorVariable:
        return icdf_bound(lower + value * (upper - lower), value, lower <= upper)

    @classmethod
    def support_point(cls, rv: TensorVariable, lower: Any, upper: Any) -> TensorVariable:
        return broadcast_like(0.5 * (lower + upper), rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        _, _, lower, upper = rv.owner.inputs  # type: ignore[union-attr]
        return _interval_transform(lower, upper)


class FlatRV(RandomVariable):
    """The draw op of an improper flat prior: it has none (drawing raises)."""

    name, signature, dtype = "flat", "->()", "float64"
    params = ()

    @staticmethod
    def core_fn(rng: Any) -> float:
        raise ValueError("Flat: an improper prior has no draws (give the variable a proper prior)")


class HalfFlatRV(FlatRV):
    """The draw op of an improper flat prior on (0, inf): it has none."""

    name = "halfflat"

    @staticmethod
    def core_fn(rng: Any) -> float:
        raise ValueError("HalfFlat: an improper prior has no draws (give it a proper prior)")


class Flat(Distribution):
    """An improper uniform density on the real line (log-density 0; no draws)."""

    rv_op = FlatRV()
    params = ()

    @staticmethod
    def logp(value: Any) -> TensorVariable:
        return kt.zeros_like(value, dtype="float64")

    @staticmethod
    def logcdf(value: Any) -> TensorVariable:
        raise NotImplementedError("Flat has no CDF")

    @classmethod
    def support_point(cls, rv: TensorVariable) -> TensorVariable:
        return broadcast_like(0.0, rv)


class HalfFlat(Distribution):
    """An improper uniform density on (0, inf) (log-density 0 there; no draws)."""

    rv_op = HalfFlatRV()
    params = ()
    support = "positive"

    @staticmethod
    def logp(value: Any) -> TensorVariable:
        return bound(kt.zeros_like(value, dtype="float64"), value > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable) -> TensorVariable:
        return broadcast_like(1.0, rv)


class Exponential(Distribution):
    """Exponential(lam, scale): rate ``lam`` (or mean ``scale = 1 / lam``)."""

    rv_op = kr.OPS["exponential"]
    params = ("lam", "scale")
    alternatives = (
        Alternative(
            ("scale",),
            ("lam",),
            lambda scale: (1.0 / as_float(scale),),
            ((("scale",), lambda scale: scale > 0, "scale must be > 0"),),
        ),
    )
    param_checks = ((("lam",), lambda lam: lam > 0, "lam must be > 0"),)
    defaults = {"lam": 1.0}
    support = "nonnegative"

    @classmethod
    def rv_params(cls, lam: Any = None) -> tuple[Any, ...]:
        return (
            1.0 / kt.as_tensor(lam, dtype="float64")
            if not isinstance(lam, int | float)
            else 1.0 / lam,
        )

    @staticmethod
    def logp(value: Any, scale: Any) -> TensorVariable:
        valid = kr.OPS["exponential"].conditions(scale=scale)
        return bound(-kt.log(scale) - value / scale, value >= 0, *valid)

    @staticmethod
    def logcdf(value: Any, scale: Any) -> TensorVariable:
        valid = kr.OPS["exponential"].conditions(scale=scale)
        return bound(kt.log1mexp(-value / scale), value >= 0, *valid)

    @staticmethod
    def icdf(value: Any, scale: Any) -> TensorVariable:
        valid = kr.OPS["exponential"].conditions(scale=scale)
        return icdf_bound(-scale * kt.log1p(-value), value, *valid)


class Gamma(Distribution):
    """Gamma(alpha, beta, mu, sigma): shape ``alpha``, rate ``beta`` (or mean, sd)."""

    rv_op = kr.OPS["gamma"]
    params = ("alpha", "beta", "mu", "sigma")
    alternatives = (Alternative(("mu", "sigma"), ("alpha", "beta"), gamma_moments, MEAN_SD_CHECKS),)
    param_checks = (
        (("alpha",), lambda alpha: alpha > 0, "alpha must be > 0"),
        (("beta",), lambda beta: beta > 0, "beta must be > 0"),
    )
    support = "nonnegative"  # the density at 0 is finite for alpha = 1 (Exponential)

    @classmethod
    def rv_params(cls, alpha: Any = None, beta: Any = None) -> tuple[Any, ...]:
        alpha, beta = super().rv_params(alpha=alpha, beta=beta)
        return (alpha, 1.0 / as_float(beta))

    @staticmethod
    def logp(value: Any, shape: Any, scale: Any) -> TensorVariable:
        logp = (
            -kt.gammaln(shape) - shape * kt.log(scale) + xlogy(shape - 1.0, value) - value / scale
        )
        return bound(logp, value >= 0, *kr.OPS["gamma"].conditions(shape=shape, scale=scale))

    @staticmethod
    def logcdf(value: Any, shape: Any, scale: Any) -> TensorVariable:
        lcdf = log_gammainc(shape, kt.maximum(value, 0.0) / scale)
        return bound(lcdf, value >= 0, *kr.OPS["gamma"].conditions(shape=shape, scale=scale))

    @classmethod
    def support_point(cls, rv: TensorVariable, shape: Any, scale: Any) -> TensorVariable:
        return broadcast_like(shape * scale, rv)


class Beta(Distribution):
    """Beta(alpha, beta, mu, sigma, nu): or mean ``mu`` with sd ``sigma`` or ``nu = a + b``."""

    rv_op = kr.OPS["beta"]
    params = ("alpha", "beta", "mu", "sigma", "nu")
    alternatives = (
        Alternative(("mu", "sigma"), ("alpha", "beta"), beta_moments, BETA_SD_CHECKS),
        Alternative(("mu", "nu"), ("alpha", "beta"), beta_concentration, BETA_NU_CHECKS),
    )
    support = "unit"

    @staticmethod
    def logp(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        # xlogy: with alpha = 1 (beta = 1) the density is finite at 0 (at 1).
        logp = xlogy(alpha - 1.0, value) + xlog1py(beta - 1.0, -value) - kt.betaln(alpha, beta)
        valid = kr.OPS["beta"].conditions(alpha=alpha, beta=beta)
        return bound(logp, value >= 0, value <= 1, *valid)

    @staticmethod
    def logcdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        x = kt.clip(value, 0.0, 1.0)  # 1 above the support: log1p(-I_0(beta, alpha)) = 0
        lcdf = log_betainc(alpha, beta, x, 1.0 - x)
        return bound(lcdf, value >= 0, *kr.OPS["beta"].conditions(alpha=alpha, beta=beta))

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, beta: Any) -> TensorVariable:
        return broadcast_like(alpha / (alpha + beta), rv)


class InverseGamma(Distribution):
    """InverseGamma(alpha, beta, mu, sigma): shape ``alpha``, scale ``beta`` (or mean, sd)."""

    rv_op = kr.OPS["invgamma"]
    params = ("alpha", "beta", "mu", "sigma")
    alternatives = (
        Alternative(("mu", "sigma"), ("alpha", "beta"), inverse_gamma_moments, MEAN_SD_CHECKS),
    )
    defaults = {"beta": 1.0}
    support = "positive"

    @staticmethod
    def logp(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        logp = (
            alpha * kt.log(beta) - kt.gammaln(alpha) - (alpha + 1.0) * kt.log(value) - beta / value
        )
        return bound(logp, value > 0, *kr.OPS["invgamma"].conditions(alpha=alpha, beta=beta))

    @staticmethod
    def logcdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        # P(X <= x) = Q(alpha, beta / x)
        lcdf = log_gammaincc(alpha, beta / kt.switch(value > 0, value, 1.0))
        return bound(lcdf, value > 0, *kr.OPS["invgamma"].conditions(alpha=alpha, beta=beta))

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, beta: Any) -> TensorVariable:
        return broadcast_like(beta / (alpha + 1.0), rv)  # the mode


def _student_t_logp(x: Any, nu: Any, mu: Any, sigma: Any) -> Any:
    z = (x - mu) / sigma
    return (
        kt.gammaln(0.5 * (nu + 1.0))
        - kt.gammaln(0.5 * nu)
        - 0.5 * (kt.log(nu) + LOG_PI)
        - kt.log(sigma)
        - 0.5 * (nu + 1.0) * kt.log1p(z * z / nu)
    )


def _student_t_log_tail(z2: Any, nu: Any) -> Any:
    """Return ``log P(T <= -|z|)`` of a standard Student t from ``z2 = z**2``."""
    return log_betainc(0.5 * nu, 0.5, nu / (nu + z2), z2 / (nu + z2)) - LOG_2


class StudentT(Distribution):
    """StudentT(nu, mu, sigma, lam): degrees of freedom, location, scale (or precision ``lam``)."""

    rv_op = kr.OPS["studentt"]
    params = ("nu", "mu", "sigma", "lam")
    alternatives = (precision("lam", "sigma"),)
    defaults = {"mu": 0.0, "sigma": 1.0}

    @staticmethod
    def logp(value: Any, nu: Any, mu: Any, sigma: Any) -> TensorVariable:
        valid = kr.OPS["studentt"].conditions(nu=nu, sigma=sigma)
        return bound(_student_t_logp(value, nu, mu, sigma), *valid)

    @staticmethod
    def logcdf(value: Any, nu: Any, mu: Any, sigma: Any) -> TensorVariable:
        z = (value - mu) / sigma
        # P(T <= -|z|) = I_{nu/(nu+z^2)}(nu/2, 1/2) / 2; the CDF above 0 is 1 minus it.
        log_tail = _student_t_log_tail(z * z, nu)
        lcdf = kt.switch(z < 0, log_tail, kt.log1mexp(log_tail))
        return bound(lcdf, *kr.OPS["studentt"].conditions(nu=nu, sigma=sigma))

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any, mu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


class HalfStudentT(Distribution):
    """HalfStudentT(nu, sigma, lam): ``|StudentT(nu, 0, sigma)|`` (or precision ``lam``)."""

    rv_op = kr.OPS["halfstudentt"]
    params = ("nu", "sigma", "lam")
    alternatives = (precision("lam", "sigma"),)
    defaults = {"sigma": 1.0}
    support = "nonnegative"

    @staticmethod
    def logp(value: Any, nu: Any, sigma: Any) -> TensorVariable:
        logp = LOG_2 + _student_t_logp(value, nu, 0.0, sigma)
        return bound(logp, value >= 0, *kr.OPS["halfstudentt"].conditions(nu=nu, sigma=sigma))

    @staticmethod
    def logcdf(value: Any, nu: Any, sigma: Any) -> TensorVariable:
        # P(|T| <= z) = 1 - 2 P(T <= -z) = I_{z^2/(nu+z^2)}(1/2, nu/2)
        z2 = kt.square(kt.maximum(value, 0.0) / sigma)
        lcdf = log_betainc(0.5, 0.5 * nu, z2 / (nu + z2), nu / (nu + z2))
        return bound(lcdf, value >= 0, *kr.OPS["halfstudentt"].conditions(nu=nu, sigma=sigma))

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(sigma, rv)


def _cauchy_lcdf(z: Any) -> Any:
    """Return ``log(1/2 + arctan(z) / pi)`` with no cancellation in either tail.

    In the tails ``1/2 + arctan(z) / pi`` is ``arctan(-1/z) / pi`` (z < -1) and
    ``1 - arctan(1/z) / pi`` (z > 1).
    """
    z = kt.as_tensor(z)
    lower = kt.log(kt.arctan(-1.0 / z)) - LOG_PI
    upper = kt.log1p(-kt.arctan(1.0 / z) / np.pi)
    middle = kt.log(0.5 + kt.arctan(z) / np.pi)
    return kt.switch(z < -1.0, lower, kt.switch(z > 1.0, upper, middle))


class Cauchy(Distribution):
    """Cauchy(alpha, beta): location ``alpha``, scale ``beta``."""

    rv_op = kr.OPS["cauchy"]
    params = ("alpha", "beta")

    @staticmethod
    def logp(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        z = (value - alpha) / beta
        valid = kr.OPS["cauchy"].conditions(beta=beta)
        return bound(-LOG_PI - kt.log(beta) - kt.log1p(z * z), *valid)

    @staticmethod
    def logcdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        return bound(_cauchy_lcdf((value - alpha) / beta), *kr.OPS["cauchy"].conditions(beta=beta))

    @staticmethod
    def icdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        x = alpha + beta * kt.tan(np.pi * (value - 0.5))
        return icdf_bound(x, value, *kr.OPS["cauchy"].conditions(beta=beta))


class HalfCauchy(Distribution):
    """HalfCauchy(beta): ``|Cauchy(0, beta)|``."""

    rv_op = kr.OPS["halfcauchy"]
    params = ("beta",)
    support = "nonnegative"

    @staticmethod
    def logp(value: Any, beta: Any) -> TensorVariable:
        z = value / beta
        valid = kr.OPS["halfcauchy"].conditions(beta=beta)
        return bound(LOG_2 - LOG_PI - kt.log(beta) - kt.log1p(z * z), value >= 0, *valid)

    @staticmethod
    def logcdf(value: Any, beta: Any) -> TensorVariable:
        # log(2/pi arctan(z)); above z = 1 as log1p(-2/pi arctan(1/z)), which does not round.
        z = value / beta
        lcdf = kt.switch(
            z > 1.0,
            kt.log1p(-2.0 / np.pi * kt.arctan(1.0 / z)),
            kt.log(2.0 / np.pi * kt.arctan(z)),
        )
        return bound(lcdf, value >= 0, *kr.OPS["halfcauchy"].conditions(beta=beta))

    @staticmethod
    def icdf(value: Any, beta: Any) -> TensorVariable:
        x = beta * kt.tan(0.5 * np.pi * value)
        return icdf_bound(x, value, *kr.OPS["halfcauchy"].conditions(beta=beta))

    @classmethod
    def support_point(cls, rv: TensorVariable, beta: Any) -> TensorVariable:
        return broadcast_like(beta, rv)


class Laplace(Distribution):
    """Laplace(mu, b): location ``mu``, scale ``b``."""

    rv_op = kr.OPS["laplace"]
    params = ("mu", "b")

    @staticmethod
    def logp(value: Any, mu: Any, b: Any) -> TensorVariable:
        valid = kr.OPS["laplace"].conditions(b=b)
        return bound(-kt.log(2.0 * b) - kt.abs(value - mu) / b, *valid)

    @staticmethod
    def logcdf(value: Any, mu: Any, b: Any) -> TensorVariable:
        z = (value - mu) / b
        below = -LOG_2 + z
        above = kt.log1p(-0.5 * kt.exp(-z))
        return bound(kt.switch(value < mu, below, above), *kr.OPS["laplace"].conditions(b=b))

    @staticmethod
    def icdf(value: Any, mu: Any, b: Any) -> TensorVariable:
        # Each tail from its own side: log(2q) below the median, -log(2(1 - q)) above.
        tail = kt.log1p(-2.0 * kt.abs(value - 0.5))
        x = mu + b * kt.switch(value < 0.5, tail, -tail)
        return icdf_bound(x, value, *kr.OPS["laplace"].conditions(b=b))


class Logistic(Distribution):
    """Logistic(mu, s): location ``mu``, scale ``s``."""

    rv_op = kr.OPS["logistic"]
    params = ("mu", "s")
    defaults = {"s": 1.0}

    @staticmethod
    def logp(value: Any, mu: Any, s: Any) -> TensorVariable:
        z = (value - mu) / s
        return bound(-z - kt.log(s) - 2.0 * kt.softplus(-z), *kr.OPS["logistic"].conditions(s=s))

    @staticmethod
    def logcdf(value: Any, mu: Any, s: Any) -> TensorVariable:
        return bound(-kt.softplus(-(value - mu) / s), *kr.OPS["logistic"].conditions(s=s))

    @staticmethod
    def icdf(value: Any, mu: Any, s: Any) -> TensorVariable:
        x = mu + s * (kt.log(value) - kt.log1p(-value))
        return icdf_bound(x, value, *kr.OPS["logistic"].conditions(s=s))


class Weibull(Distribution):
    """Weibull(alpha, beta): shape ``alpha``, scale ``beta``."""

    rv_op = kr.OPS["weibull"]
    params = ("alpha", "beta")
    support = "nonnegative"

    @staticmethod
    def logp(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        z = value / beta
        logp = kt.log(alpha) - kt.log(beta) + xlogy(alpha - 1.0, z) - z**alpha
        return bound(logp, value >= 0, *kr.OPS["weibull"].conditions(alpha=alpha, beta=beta))

    @staticmethod
    def logcdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        valid = kr.OPS["weibull"].conditions(alpha=alpha, beta=beta)
        return bound(kt.log1mexp(-((value / beta) ** alpha)), value >= 0, *valid)

    @staticmethod
    def icdf(value: Any, alpha: Any, beta: Any) -> TensorVariable:
        x = beta * (-kt.log1p(-value)) ** (1.0 / alpha)
        return icdf_bound(x, value, *kr.OPS["weibull"].conditions(alpha=alpha, beta=beta))

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, beta: Any) -> TensorVariable:
        return broadcast_like(beta * kt.exp(kt.gammaln(1.0 + 1.0 / alpha)), rv)


def _log_normal_mass(mu: Any, sigma: Any, lower: Any, upper: Any) -> Any:
    """Return ``log(Phi(b) - Phi(a))`` of the standardized bounds, accurate in either tail.

    Either bound may be infinite. Infinite bounds never enter the arithmetic, and every
    branch a switch does not select is computed at finite stand-in bounds ``a < b``: a
    switch's gradient multiplies the other branch's by 0, and 0 * inf would be NaN.
    """
    lo_inf, hi_inf = kt.isinf(lower), kt.isinf(upper)
    a0 = (kt.switch(lo_inf, 0.0, lower) - mu) / sigma
    b0 = (kt.switch(hi_inf, 0.0, upper) - mu) / sigma
    a = kt.switch(lo_inf, kt.switch(hi_inf, -1.0, b0 - 1.0), a0)
    b = kt.switch(hi_inf, kt.switch(lo_inf, 1.0, a0 + 1.0), b0)
    # Phi(b) - Phi(a) = Phi(-a) - Phi(-b): reflect an interval above 0 into the lower
    # tail, where log Phi has all its digits.
    flip = a > 0
    lo_z, hi_z = kt.switch(flip, -b, a), kt.switch(flip, -a, b)
    finite = log_diff_exp(normal_lcdf(hi_z), normal_lcdf(lo_z))
    return kt.switch(
        lo_inf,
        kt.switch(hi_inf, 0.0, normal_lcdf(b)),
        kt.switch(hi_inf, normal_lcdf(-a), finite),
    )


class TruncatedNormal(Distribution):
    """Normal(mu, sigma) (or precision ``tau``) truncated to [lower, upper] (either may be inf)."""

    rv_op = kr.OPS["truncated_normal"]
    params = ("mu", "sigma", "tau", "lower", "upper")
    alternatives = (precision("tau", "sigma"),)
    defaults = {"mu": 0.0, "sigma": 1.0, "lower": -np.inf, "upper": np.inf}
    support = "interval"

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any, lower: Any, upper: Any) -> TensorVariable:
        logp = _normal_logp(value, mu, sigma) - _log_normal_mass(mu, sigma, lower, upper)
        valid = kr.OPS["truncated_normal"].conditions(sigma=sigma)
        return bound(logp, value >= lower, value <= upper, *valid)

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any, lower: Any, upper: Any) -> TensorVariable:
        # CDF = mass(lower, value) / Z, or 1 - mass(value, upper) / Z above the median:
        # each is accurate where it is small.
        log_z = _log_normal_mass(mu, sigma, lower, upper)
        below = _log_normal_mass(mu, sigma, lower, value) - log_z
        above = kt.log1mexp(_log_normal_mass(mu, sigma, value, upper) - log_z)
        inside = kt.switch(below < -LOG_2, below, above)
        lcdf = kt.switch(value <= lower, -np.inf, kt.switch(value >= upper, 0.0, inside))
        return bound(lcdf, *kr.OPS["truncated_normal"].conditions(sigma=sigma))

    @classmethod
    def support_point(
        cls, rv: TensorVariable, mu: Any, sigma: Any, lower: Any, upper: Any
    ) -> TensorVariable:
        mid = kt.switch(
            kt.isinf(lower),
            kt.switch(kt.isinf(upper), mu, upper - 1.0),
            kt.switch(kt.isinf(upper), lower + 1.0, 0.5 * (lower + upper)),
        )
        inside = kt.logical_and(mu > lower, mu < upper)
        return broadcast_like(kt.switch(inside, mu, mid), rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        *_, lower, upper = rv.owner.inputs  # type: ignore[union-attr]
        return _interval_transform(lower, upper)
