"""Continuous univariate random variables.

Each declares its parameters and constraints, ``rng_fn`` (NumPy, vectorized: the VM)
and ``core_fn`` (one draw, Numba-compilable). The two consume the stream in the same
order, element by element in C order, so a seed gives the same draws on both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kiln_random._op import RandomVariable

Generator = np.random.Generator


class NormalRV(RandomVariable):
    """Normal(mu, sigma)."""

    name, signature, dtype = "normal", "(),()->()", "float64"
    params = ("mu", "sigma")
    constraints = (("sigma > 0", "sigma must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float, sigma: float) -> float:
        return rng.normal(mu, sigma)

    def rng_fn(self, rng: Generator, size: Any, mu: Any, sigma: Any) -> Any:
        return rng.normal(mu, sigma, size)


class HalfNormalRV(RandomVariable):
    """HalfNormal(sigma): ``|Normal(0, sigma)|``."""

    name, signature, dtype = "halfnormal", "()->()", "float64"
    params = ("sigma",)
    constraints = (("sigma > 0", "sigma must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, sigma: float) -> float:
        return abs(rng.normal(0.0, sigma))

    def rng_fn(self, rng: Generator, size: Any, sigma: Any) -> Any:
        return np.abs(rng.normal(0.0, sigma, size))


class LogNormalRV(RandomVariable):
    """LogNormal(mu, sigma): exp(Normal(mu, sigma))."""

    name, signature, dtype = "lognormal", "(),()->()", "float64"
    params = ("mu", "sigma")
    constraints = (("sigma > 0", "sigma must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float, sigma: float) -> float:
        return rng.lognormal(mu, sigma)

    def rng_fn(self, rng: Generator, size: Any, mu: Any, sigma: Any) -> Any:
        return rng.lognormal(mu, sigma, size)


class UniformRV(RandomVariable):
    """Uniform(lower, upper) on [lower, upper)."""

    name, signature, dtype = "uniform", "(),()->()", "float64"
    params = ("lower", "upper")
    constraints = (("lower <= upper", "lower must be <= upper"),)

    @staticmethod
    def core_fn(rng: Generator, lower: float, upper: float) -> float:
        return rng.uniform(lower, upper)

    def rng_fn(self, rng: Generator, size: Any, lower: Any, upper: Any) -> Any:
        return rng.uniform(lower, upper, size)


class ExponentialRV(RandomVariable):
    """Exponential with mean ``scale`` (NumPy's parametrization; rate = 1 / scale)."""

    name, signature, dtype = "exponential", "()->()", "float64"
    params = ("scale",)
    constraints = (("scale > 0", "scale must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, scale: float) -> float:
        return rng.exponential(scale)

    def rng_fn(self, rng: Generator, size: Any, scale: Any) -> Any:
        return rng.exponential(scale, size)


class GammaRV(RandomVariable):
    """Gamma(shape, scale) (NumPy's parametrization; rate = 1 / scale)."""

    name, signature, dtype = "gamma", "(),()->()", "float64"
    params = ("shape", "scale")
    constraints = (
        ("shape > 0", "shape must be > 0"),
        ("scale > 0", "scale must be > 0"),
    )

    @staticmethod
    def core_fn(rng: Generator, shape: float, scale: float) -> float:
        return rng.gamma(shape, scale)

    def rng_fn(self, rng: Generator, size: Any, shape: Any, scale: Any) -> Any:
        return rng.gamma(shape, scale, size)


class BetaRV(RandomVariable):
    """Beta(alpha, beta)."""

    name, signature, dtype = "beta", "(),()->()", "float64"
    params = ("alpha", "beta")
    constraints = (("alpha > 0", "alpha must be > 0"), ("beta > 0", "beta must be > 0"))

    @staticmethod
    def core_fn(rng: Generator, alpha: float, beta: float) -> float:
        return rng.beta(alpha, beta)

    def rng_fn(self, rng: Generator, size: Any, alpha: Any, beta: Any) -> Any:
        return rng.beta(alpha, beta, size)


class InverseGammaRV(RandomVariable):
    """InverseGamma(alpha, beta): 1 / Gamma(alpha, scale=1 / beta)."""

    name, signature, dtype = "invgamma", "(),()->()", "float64"
    params = ("alpha", "beta")
    constraints = (("alpha > 0", "alpha must be > 0"), ("beta > 0", "beta must be > 0"))

    @staticmethod
    def core_fn(rng: Generator, alpha: float, beta: float) -> float:
        return 1.0 / rng.gamma(alpha, 1.0 / beta)

    def rng_fn(self, rng: Generator, size: Any, alpha: Any, beta: Any) -> Any:
        return 1.0 / rng.gamma(alpha, 1.0 / beta, size)


class StudentTRV(RandomVariable):
    """StudentT(nu, mu, sigma): mu + sigma * t(nu)."""

    name, signature, dtype = "studentt", "(),(),()->()", "float64"
    params = ("nu", "mu", "sigma")
    constraints = (("nu > 0", "nu must be > 0"), ("sigma > 0", "sigma must be > 0"))

    @staticmethod
    def core_fn(rng: Generator, nu: float, mu: float, sigma: float) -> float:
        return mu + sigma * rng.standard_t(nu)

    def rng_fn(self, rng: Generator, size: Any, nu: Any, mu: Any, sigma: Any) -> Any:
        return mu + sigma * rng.standard_t(nu, size)


class HalfStudentTRV(RandomVariable):
    """HalfStudentT(nu, sigma): ``|sigma * t(nu)|``."""

    name, signature, dtype = "halfstudentt", "(),()->()", "float64"
    params = ("nu", "sigma")
    constraints = (("nu > 0", "nu must be > 0"), ("sigma > 0", "sigma must be > 0"))

    @staticmethod
    def core_fn(rng: Generator, nu: float, sigma: float) -> float:
        return abs(sigma * rng.standard_t(nu))

    def rng_fn(self, rng: Generator, size: Any, nu: Any, sigma: Any) -> Any:
        return np.abs(sigma * rng.standard_t(nu, size))


class CauchyRV(RandomVariable):
    """Cauchy(alpha, beta): location alpha, scale beta."""

    name, signature, dtype = "cauchy", "(),()->()", "float64"
    params = ("alpha", "beta")
    constraints = (("beta > 0", "beta must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, alpha: float, beta: float) -> float:
        return alpha + beta * rng.standard_cauchy()

    def rng_fn(self, rng: Generator, size: Any, alpha: Any, beta: Any) -> Any:
        return alpha + beta * rng.standard_cauchy(size)


class HalfCauchyRV(RandomVariable):
    """HalfCauchy(beta): ``|Cauchy(0, beta)|``."""

    name, signature, dtype = "halfcauchy", "()->()", "float64"
    params = ("beta",)
    constraints = (("beta > 0", "beta must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, beta: float) -> float:
        return abs(beta * rng.standard_cauchy())

    def rng_fn(self, rng: Generator, size: Any, beta: Any) -> Any:
        return np.abs(beta * rng.standard_cauchy(size))


class LaplaceRV(RandomVariable):
    """Laplace(mu, b): location mu, scale b."""

    name, signature, dtype = "laplace", "(),()->()", "float64"
    params = ("mu", "b")
    constraints = (("b > 0", "b must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float, b: float) -> float:
        return rng.laplace(mu, b)

    def rng_fn(self, rng: Generator, size: Any, mu: Any, b: Any) -> Any:
        return rng.laplace(mu, b, size)


class LogisticRV(RandomVariable):
    """Logistic(mu, s): location mu, scale s."""

    name, signature, dtype = "logistic", "(),()->()", "float64"
    params = ("mu", "s")
    constraints = (("s > 0", "s must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float, s: float) -> float:
        return rng.logistic(mu, s)

    def rng_fn(self, rng: Generator, size: Any, mu: Any, s: Any) -> Any:
        return rng.logistic(mu, s, size)


class WeibullRV(RandomVariable):
    """Weibull(alpha, beta): shape alpha, scale beta."""

    name, signature, dtype = "weibull", "(),()->()", "float64"
    params = ("alpha", "beta")
    constraints = (("alpha > 0", "alpha must be > 0"), ("beta > 0", "beta must be > 0"))

    @staticmethod
    def core_fn(rng: Generator, alpha: float, beta: float) -> float:
        return beta * rng.weibull(alpha)

    def rng_fn(self, rng: Generator, size: Any, alpha: Any, beta: Any) -> Any:
        return beta * rng.weibull(alpha, size)


_SQRT_2PI = math.sqrt(2.0 * math.pi)


class TruncatedNormalRV(RandomVariable):
    """Normal(mu, sigma) truncated to [lower, upper] (bounds may be infinite).

    Exact rejection samplers (Robert, 1995), chosen by where the standardized interval
    [a, b] lies: normal draws when it is wide and holds 0, uniform proposals when it
    is narrow, and translated-exponential proposals in a tail. Intervals entirely
    below 0 are mirrored into the upper tail. Accurate arbitrarily far in the tails.
    """

    name, signature, dtype = "truncated_normal", "(),(),(),()->()", "float64"
    params = ("mu", "sigma", "lower", "upper")
    constraints = (("sigma > 0", "sigma must be > 0"), ("lower < upper", "lower must be < upper"))

    @staticmethod
    def core_fn(rng: Generator, mu: float, sigma: float, lower: float, upper: float) -> float:
        a = (lower - mu) / sigma
        b = (upper - mu) / sigma
        flip = b <= 0.0
        if flip:
            a, b = -b, -a
        if a <= 0.0:  # the interval holds 0
            if b - a >= _SQRT_2PI:
                while True:
                    z = rng.standard_normal()
                    if a <= z <= b:
                        break
            else:
                while True:
                    z = a + (b - a) * rng.random()
                    if rng.random() <= math.exp(-0.5 * z * z):
                        break
        elif (b - a) * (a + b) < 2.0:  # a narrow interval in the upper tail
            while True:
                z = a + (b - a) * rng.random()
                if rng.random() <= math.exp(0.5 * (a * a - z * z)):
                    break
        else:  # the upper tail: exponential proposals of the optimal rate
            alpha = 0.5 * (a + math.sqrt(a * a + 4.0))
            while True:
                z = a + rng.standard_exponential() / alpha
                if z <= b and rng.random() <= math.exp(-0.5 * (z - alpha) * (z - alpha)):
                    break
        if flip:
            z = -z
        return mu + sigma * z


class VonMisesRV(RandomVariable):
    """VonMises(mu, kappa) on [-pi, pi]: Best and Fisher's (1979) rejection sampler.

    The wrapped-Cauchy envelope accepts at least 65% of proposals for every ``kappa``;
    above ``kappa = 1e6`` the draw is a normal of variance ``1 / kappa`` (exact to
    double precision there). The draw is ``mu`` plus the angle, wrapped into [-pi, pi].
    """

    name, signature, dtype = "vonmises", "(),()->()", "float64"
    params = ("mu", "kappa")
    constraints = (("kappa > 0", "kappa must be > 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float, kappa: float) -> float:
        if kappa > 1e6:
            theta = rng.standard_normal() / math.sqrt(kappa)
        else:
            # r = (1 + rho^2) / (2 rho) of the envelope, as 1 / (2 kappa) + sqrt(1 + ...)
            # with no cancellation for small or large kappa.
            s = 0.5 / kappa
            r = s + math.sqrt(1.0 + s * s)
            while True:
                z = math.cos(math.pi * rng.random())
                w = (1.0 + r * z) / (r + z)
                c = kappa * (r - w)
                u = rng.random()
                if c * (2.0 - c) > u or math.log(c / u) + 1.0 >= c:
                    break
            theta = math.acos(min(max(w, -1.0), 1.0))
            if rng.random() < 0.5:
                theta = -theta
        x = mu + theta
        return x - 2.0 * math.pi * math.floor((x + math.pi) / (2.0 * math.pi))
