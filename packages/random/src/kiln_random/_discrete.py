"""Discrete random variables (int64 draws)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_random._op import RandomVariable

Generator = np.random.Generator


class BernoulliRV(RandomVariable):
    """Bernoulli(p): 1 with probability p, else 0."""

    name, signature, dtype = "bernoulli", "()->()", "int64"
    params = ("p",)
    constraints = (("(p >= 0) & (p <= 1)", "p must be in [0, 1]"),)

    @staticmethod
    def core_fn(rng: Generator, p: float) -> int:
        return rng.binomial(1, p)

    def rng_fn(self, rng: Generator, size: Any, p: Any) -> Any:
        return rng.binomial(1, p, size)


class BinomialRV(RandomVariable):
    """Binomial(n, p): successes in n trials of probability p."""

    name, signature, dtype = "binomial", "(),()->()", "int64"
    params = ("n", "p")
    param_dtypes = ("int64", "float64")
    constraints = (("n >= 0", "n must be >= 0"), ("(p >= 0) & (p <= 1)", "p must be in [0, 1]"))

    @staticmethod
    def core_fn(rng: Generator, n: int, p: float) -> int:
        return rng.binomial(n, p)

    def rng_fn(self, rng: Generator, size: Any, n: Any, p: Any) -> Any:
        return rng.binomial(n, p, size)


class PoissonRV(RandomVariable):
    """Poisson(mu)."""

    name, signature, dtype = "poisson", "()->()", "int64"
    params = ("mu",)
    constraints = (("mu >= 0", "mu must be >= 0"),)

    @staticmethod
    def core_fn(rng: Generator, mu: float) -> int:
        return rng.poisson(mu)

    def rng_fn(self, rng: Generator, size: Any, mu: Any) -> Any:
        return rng.poisson(mu, size)


class NegativeBinomialRV(RandomVariable):
    """NegativeBinomial(n, p) in NumPy's parametrization: failures before n successes.

    The mean is ``n (1 - p) / p``; PyMC's (mu, alpha) is ``n = alpha, p = alpha / (mu + alpha)``.
    """

    name, signature, dtype = "negative_binomial", "(),()->()", "int64"
    params = ("n", "p")
    constraints = (("n > 0", "n must be > 0"), ("(p > 0) & (p <= 1)", "p must be in (0, 1]"))

    @staticmethod
    def core_fn(rng: Generator, n: float, p: float) -> int:
        return rng.negative_binomial(n, p)

    def rng_fn(self, rng: Generator, size: Any, n: Any, p: Any) -> Any:
        return rng.negative_binomial(n, p, size)


class GeometricRV(RandomVariable):
    """Geometric(p): the number of trials up to and including the first success (>= 1)."""

    name, signature, dtype = "geometric", "()->()", "int64"
    params = ("p",)
    constraints = (("(p > 0) & (p <= 1)", "p must be in (0, 1]"),)

    @staticmethod
    def core_fn(rng: Generator, p: float) -> int:
        return rng.geometric(p)

    def rng_fn(self, rng: Generator, size: Any, p: Any) -> Any:
        return rng.geometric(p, size)


class CategoricalRV(RandomVariable):
    """Categorical(p): index k with probability p[k] / sum(p) (p need not be normalized)."""

    name, signature, dtype = "categorical", "(k)->()", "int64"
    params = ("p",)

    @staticmethod
    def core_fn(rng: Generator, p: Any) -> int:
        k = p.shape[0]
        total = 0.0
        for i in range(k):
            if not p[i] >= 0.0:
                raise ValueError("categorical: p must be >= 0")
            total += p[i]
        if not total > 0.0:
            raise ValueError("categorical: p must have a positive sum")
        u = rng.random() * total
        acc = 0.0
        for i in range(k - 1):
            acc += p[i]
            if u < acc:
                return i
        return k - 1


class HyperGeometricRV(RandomVariable):
    """HyperGeometric(N, k, n): successes in ``n`` draws without replacement.

    ``N`` items of which ``k`` are successes; drawn one at a time from the urn
    (``n`` uniforms per draw).
    """

    name, signature, dtype = "hypergeometric", "(),(),()->()", "int64"
    params = ("N", "k", "n")
    param_dtypes = ("int64", "int64", "int64")
    constraints = (
        ("N >= 0", "N must be >= 0"),
        ("(k >= 0) & (k <= N)", "k must be in [0, N]"),
        ("(n >= 0) & (n <= N)", "n must be in [0, N]"),
    )

    @staticmethod
    def core_fn(rng: Generator, N: int, k: int, n: int) -> int:  # noqa: N803 (PyMC's name)
        good = k
        total = N
        drawn = 0
        for _ in range(n):
            if rng.random() * total < good:
                drawn += 1
                good -= 1
            total -= 1
        return drawn
