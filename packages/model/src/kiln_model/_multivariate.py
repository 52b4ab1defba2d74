"""Multivariate distributions: one density per vector draw (core dimensions summed)."""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._distribution import Distribution, broadcast_like
from kiln_model._math import LOG_2PI, bound, log_of, xlogy


class Dirichlet(Distribution):
    """Dirichlet(a): a point of the simplex."""

    rv_op = kr.OPS["dirichlet"]
    params = ("a",)
    support = "simplex"
    param_checks = ((("a",), lambda a: a > 0, "a must be > 0"),)

    @staticmethod
    def logp(value: Any, a: Any) -> TensorVariable:
        logp = (
            kt.sum(xlogy(a - 1.0, value), axis=-1)  # finite on a face where a = 1
            + kt.gammaln(kt.sum(a, axis=-1))
            - kt.sum(kt.gammaln(a), axis=-1)
        )
        on_simplex = kt.logical_and(
            kt.all(value >= 0, axis=-1), kt.abs(kt.sum(value, axis=-1) - 1.0) < 1e-9
        )
        return bound(logp, on_simplex, kt.all(a > 0, axis=-1))

    @classmethod
    def support_point(cls, rv: TensorVariable, a: Any) -> TensorVariable:
        a = kt.as_tensor(a)
        return broadcast_like(a / kt.sum(a, axis=-1, keepdims=True), rv)


class Multinomial(Distribution):
    """Multinomial(n, p): counts of n draws over categories of probabilities p."""

    rv_op = kr.OPS["multinomial"]
    params = ("n", "p")
    support = "counts"
    discrete = True
    param_checks = ((("p",), lambda p: p >= 0, "p must be >= 0"),)
    observed_checks = (
        (
            ("n",),
            lambda counts, n: np.expand_dims(np.sum(counts, axis=-1) == n, -1),
            "observed counts must sum to n along the last axis",
        ),
    )

    @staticmethod
    def logp(value: Any, n: Any, p: Any) -> TensorVariable:
        p = kt.as_tensor(p)
        # Normalized in log space, so that a softmax's log is the stable log_softmax.
        log_p = log_of(p) - kt.log(kt.sum(p, axis=-1, keepdims=True))
        terms = kt.switch(kt.eq(value, 0), 0.0, value * log_p)
        logp = (
            kt.gammaln(n + 1.0) - kt.sum(kt.gammaln(value + 1.0), axis=-1) + kt.sum(terms, axis=-1)
        )
        valid = kt.logical_and(kt.all(value >= 0, axis=-1), kt.eq(kt.sum(value, axis=-1), n))
        return bound(logp, valid, kt.all(p >= 0, axis=-1))

    @classmethod
    def support_point(cls, rv: TensorVariable, n: Any, p: Any) -> TensorVariable:
        p = kt.as_tensor(p)
        p = p / kt.sum(p, axis=-1, keepdims=True)
        counts = kt.cast(kt.floor(kt.expand_dims(n, -1) * p), "int64")
        # Put what the floors left on the most likely category, so the counts sum to n.
        rest = n - kt.sum(counts, axis=-1)
        top = kt.eq(kt.arange(kt.shape_i(p, -1)), kt.expand_dims(kt.argmax(p, axis=-1), -1))
        return broadcast_like(counts + kt.cast(top, "int64") * kt.expand_dims(rest, -1), rv)


def _is_positive_definite(cov: np.ndarray) -> bool:
    if not np.allclose(cov, np.swapaxes(cov, -1, -2)):
        return False
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return False
    return True


def _mvnormal_core_logp(x: Any, mu: Any, cov: Any) -> Any:
    chol = kt.cholesky(cov)
    z = kt.solve_triangular(chol, x - mu, lower=True)
    n = kt.cast(kt.shape_i(x, 0), "float64")
    return -0.5 * n * LOG_2PI - kt.sum(kt.log(kt.abs(_diagonal(chol)))) - 0.5 * kt.sum(z * z)


def _diagonal(m: Any) -> Any:
    m = kt.as_tensor(m)
    eye = kt.eye(kt.shape_i(m, 0))
    return kt.sum(m * eye, axis=-1)


_batched_mvnormal_logp = kt.vectorize(_mvnormal_core_logp, "(n),(n),(n,n)->()")


class MvNormal(Distribution):
    """MvNormal(mu, cov) or MvNormal(mu, chol=L): multivariate normal vectors."""

    rv_op = kr.OPS["multivariate_normal"]
    params = ("mu", "cov", "chol")
    param_checks = ((("cov",), _is_positive_definite, "cov must be symmetric positive definite"),)

    @classmethod
    def rv_params(cls, mu: Any = None, cov: Any = None, chol: Any = None) -> tuple[Any, ...]:
        if (cov is None) == (chol is None):
            raise KilnTypeError(f"{cls.__name__}: give exactly one of cov and chol")
        if cov is None:
            chol_t = kt.as_tensor(chol, dtype="float64")
            cov = kt.matmul(
                chol_t,
                kt.transpose(
                    chol_t, tuple(range(chol_t.ndim - 2)) + (chol_t.ndim - 1, chol_t.ndim - 2)
                ),
            )
        return (mu, cov)

    @staticmethod
    def logp(value: Any, mu: Any, cov: Any) -> TensorVariable:
        value, mu, cov = kt.as_tensor(value), kt.as_tensor(mu), kt.as_tensor(cov)
        if value.ndim == 1 and mu.ndim == 1 and cov.ndim == 2:
            return _mvnormal_core_logp(value, mu, cov)
        return _batched_mvnormal_logp(value, mu, cov)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, cov: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


__all__ = ["Dirichlet", "MvNormal", "Multinomial", "np"]
