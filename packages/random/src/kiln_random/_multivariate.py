"""Multivariate random variables: core draws are vectors, batched like Blockwise."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_random._op import RandomVariable

Generator = np.random.Generator


class DirichletRV(RandomVariable):
    """Dirichlet(alpha): normalized Gamma(alpha_i) draws.

    The Gammas are drawn in log space (``Gamma(a) = Gamma(a + 1) * U**(1/a)`` for
    ``a < 1``), so tiny concentrations give valid simplex points instead of 0/0.
    """

    name, signature, dtype = "dirichlet", "(k)->(k)", "float64"
    params = ("alpha",)

    @staticmethod
    def core_fn(rng: Generator, alpha: Any, out: Any) -> None:
        k = alpha.shape[0]
        top = -np.inf
        for i in range(k):
            a = alpha[i]
            if not a > 0.0:
                raise ValueError("dirichlet: alpha must be > 0")
            if a < 1.0:
                lg = np.log(rng.standard_gamma(a + 1.0)) + np.log(rng.random()) / a
            else:
                lg = np.log(rng.standard_gamma(a))
            out[i] = lg
            top = max(top, lg)
        total = 0.0
        for i in range(k):
            out[i] = np.exp(out[i] - top)
            total += out[i]
        for i in range(k):
            out[i] /= total


class MultinomialRV(RandomVariable):
    """Multinomial(n, p): counts of n draws over categories of probability p / sum(p)."""

    name, signature, dtype = "multinomial", "(),(k)->(k)", "int64"
    params = ("n", "p")
    param_dtypes = ("int64", "float64")
    constraints = (("n >= 0", "n must be >= 0"),)

    @staticmethod
    def core_fn(rng: Generator, n: int, p: Any, out: Any) -> None:
        k = p.shape[0]
        total = 0.0
        for i in range(k):
            if not p[i] >= 0.0:
                raise ValueError("multinomial: p must be >= 0")
            total += p[i]
        if not total > 0.0:
            raise ValueError("multinomial: p must have a positive sum")
        remaining = n
        for i in range(k - 1):
            q = p[i] / total if total > 0.0 else 0.0
            x = rng.binomial(remaining, min(q, 1.0)) if remaining > 0 else 0
            out[i] = x
            remaining -= x
            total -= p[i]
        out[k - 1] = remaining


class MultivariateNormalRV(RandomVariable):
    """MvNormal(mu, cov): mu + L z with L the Cholesky factor of cov, z standard normal."""

    name, signature, dtype = "multivariate_normal", "(n),(n,n)->(n)", "float64"
    params = ("mu", "cov")

    @staticmethod
    def core_fn(rng: Generator, mu: Any, cov: Any, out: Any) -> None:
        n = mu.shape[0]
        chol = np.linalg.cholesky(cov)
        z = np.empty(n)
        for i in range(n):
            z[i] = rng.standard_normal()
        for i in range(n):
            s = mu[i]
            for j in range(i + 1):
                s += chol[i, j] * z[j]
            out[i] = s
