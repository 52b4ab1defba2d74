"""Discrete distributions: log-probabilities written in the draw op's parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import Elemwise, KilnTypeError, TensorVariable
from kiln_graph import tensor as kt
from kiln_graph.scalar import Sigmoid
from kiln_model._distribution import Distribution, broadcast_like, icdf_bound
from kiln_model._incomplete_cdf import log_betainc, log_gammaincc
from kiln_model._math import (
    bound,
    log1m,
    log_gamma_ratio,
    log_of,
    mean_of_dispersion_ratio,
    xlog1m,
    xlogy,
)


def _p_from(cls_name: str, p: Any, logit_p: Any) -> Any:
    if (p is None) == (logit_p is None):
        raise KilnTypeError(f"{cls_name}: give exactly one of p and logit_p")
    return kt.sigmoid(kt.as_tensor(logit_p, dtype="float64")) if p is None else p


def _logit_of(p: Any) -> Any:
    """Return ``z`` when ``p`` is ``sigmoid(z)`` (``logit_p=z``), else ``None``."""
    owner = getattr(p, "owner", None)
    if owner is not None and isinstance(owner.op, Elemwise):
        if isinstance(owner.op.scalar_op, Sigmoid):
            return owner.inputs[0]
    return None


def _round(x: Any) -> TensorVariable:
    return kt.cast(kt.floor(kt.as_tensor(x, dtype="float64") + 0.5), "int64")


class Bernoulli(Distribution):
    """Bernoulli(p) or Bernoulli(logit_p=...): 1 with probability p."""

    rv_op = kr.OPS["bernoulli"]
    params = ("p", "logit_p")
    support = "binary"
    discrete = True

    @classmethod
    def rv_params(cls, p: Any = None, logit_p: Any = None) -> tuple[Any, ...]:
        return (_p_from(cls.__name__, p, logit_p),)

    @staticmethod
    def logp(value: Any, p: Any) -> TensorVariable:
        binary = kt.logical_or(kt.eq(value, 0), kt.eq(value, 1))
        z = _logit_of(p)
        if z is not None:
            # log sigmoid(z) = -softplus(-z) and log(1 - sigmoid(z)) = -softplus(z): one
            # softplus, and one sigmoid in the gradient (p is in [0, 1] by construction).
            return bound(-kt.softplus(kt.switch(kt.eq(value, 1), -z, z)), binary)
        # value log p + (1 - value) log(1 - p): each 0, with a 0 gradient, where unused
        logp = xlogy(value, p) + xlog1m(1 - value, p)
        return bound(logp, binary, *kr.OPS["bernoulli"].conditions(p=p))

    @staticmethod
    def logcdf(value: Any, p: Any) -> TensorVariable:
        lcdf = kt.switch(value < 0, -np.inf, kt.switch(value < 1, log1m(p), 0.0))
        return bound(lcdf, *kr.OPS["bernoulli"].conditions(p=p))

    @staticmethod
    def icdf(value: Any, p: Any) -> TensorVariable:
        k = kt.switch(value <= 1.0 - p, 0.0, 1.0)
        return icdf_bound(k, value, *kr.OPS["bernoulli"].conditions(p=p))

    @classmethod
    def support_point(cls, rv: TensorVariable, p: Any) -> TensorVariable:
        return broadcast_like(kt.cast(p >= 0.5, "int64"), rv)


class Binomial(Distribution):
    """Binomial(n, p) or Binomial(n, logit_p=...)."""

    rv_op = kr.OPS["binomial"]
    params = ("n", "p", "logit_p")
    support = "nonnegative_integer"
    discrete = True
    observed_checks = ((("n",), lambda k, n: k <= n, "observed counts k must be <= n"),)

    @classmethod
    def rv_params(cls, n: Any = None, p: Any = None, logit_p: Any = None) -> tuple[Any, ...]:
        return (n, _p_from(cls.__name__, p, logit_p))

    @staticmethod
    def logp(value: Any, n: Any, p: Any) -> TensorVariable:
        log_choose = kt.gammaln(n + 1.0) - kt.gammaln(value + 1.0) - kt.gammaln(n - value + 1.0)
        z = _logit_of(p)
        if z is not None:
            # k log sigmoid(z) + (n - k) log sigmoid(-z), with one softplus and no
            # cancellation: -n softplus(-|z|) - (n - k) max(z, 0) + k min(z, 0).
            tail = -n * kt.softplus(-kt.abs(z))
            logp = tail - (n - value) * kt.maximum(z, 0.0) + value * kt.minimum(z, 0.0)
            return bound(log_choose + logp, value >= 0, value <= n)
        logp = log_choose + xlogy(value, p) + xlog1m(n - value, p)
        return bound(logp, value >= 0, value <= n, *kr.OPS["binomial"].conditions(p=p))

    @staticmethod
    def logcdf(value: Any, n: Any, p: Any) -> TensorVariable:
        # P(K <= k) = I_{1-p}(n - k, k + 1) for 0 <= k < n, 1 from n on (the branch not
        # selected runs at the stand-in k = 0).
        k = kt.floor(value)
        below = k < n
        k_in = kt.switch(below, kt.maximum(k, 0.0), 0.0)
        lcdf = kt.switch(below, log_betainc(n - k_in, k_in + 1.0, 1.0 - p, p), 0.0)
        return bound(lcdf, value >= 0, *kr.OPS["binomial"].conditions(p=p))

    @classmethod
    def support_point(cls, rv: TensorVariable, n: Any, p: Any) -> TensorVariable:
        return broadcast_like(_round(n * p), rv)


class Poisson(Distribution):
    """Poisson(mu)."""

    rv_op = kr.OPS["poisson"]
    params = ("mu",)
    support = "nonnegative_integer"
    discrete = True

    @staticmethod
    def logp(value: Any, mu: Any) -> TensorVariable:
        logp = xlogy(value, mu) - mu - kt.gammaln(value + 1.0)
        return bound(logp, value >= 0, *kr.OPS["poisson"].conditions(mu=mu))

    @staticmethod
    def logcdf(value: Any, mu: Any) -> TensorVariable:
        # P(K <= k) = Q(floor(k) + 1, mu)
        lcdf = log_gammaincc(kt.maximum(kt.floor(value), 0.0) + 1.0, mu)
        return bound(lcdf, value >= 0, *kr.OPS["poisson"].conditions(mu=mu))

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any) -> TensorVariable:
        return broadcast_like(_round(kt.floor(mu)), rv)


def negative_binomial_log_zero(n: Any, p: Any) -> Any:
    """Return ``n log p``, NegativeBinomial(n, p)'s log-probability of 0.

    Given as ``(mu, alpha)`` (``p = alpha / (mu + alpha)``, :func:`mean_of_dispersion_ratio`),
    it is ``-alpha log1p(mu / alpha)``: ``p`` rounds near 1 at a large ``alpha``, where
    ``n log p`` (about ``-mu``) would lose ``alpha * 1e-16``.
    """
    mu = mean_of_dispersion_ratio(n, p)
    return n * kt.log(p) if mu is None else -n * kt.log1p(mu / n)


class NegativeBinomial(Distribution):
    """NegativeBinomial(mu, alpha) (mean mu, overdispersion alpha), or (n=..., p=...)."""

    rv_op = kr.OPS["negative_binomial"]
    params = ("mu", "alpha", "p", "n")
    param_checks = (
        (("mu",), lambda mu: mu >= 0, "mu must be >= 0"),
        (("alpha",), lambda alpha: alpha > 0, "alpha must be > 0"),
    )
    support = "nonnegative_integer"
    discrete = True

    @classmethod
    def rv_params(
        cls, mu: Any = None, alpha: Any = None, p: Any = None, n: Any = None
    ) -> tuple[Any, ...]:
        if mu is not None and alpha is not None and p is None and n is None:
            alpha_t = kt.as_tensor(alpha, dtype="float64")
            return (alpha_t, alpha_t / (kt.as_tensor(mu) + alpha_t))
        if n is not None and p is not None and mu is None and alpha is None:
            return (n, p)
        raise KilnTypeError(f"{cls.__name__}: give (mu, alpha) or (n=..., p=...)")

    @staticmethod
    def logp(value: Any, n: Any, p: Any) -> TensorVariable:
        # log_gamma_ratio keeps gammaln(value + n) - gammaln(n) exact at a large n.
        mu = mean_of_dispersion_ratio(n, p)
        if mu is None:
            log_q = xlog1m(value, p)
        else:  # value * log(1 - p) from mu, as negative_binomial_log_zero takes log p
            log_q = xlogy(value, mu) - value * kt.log(mu + n)
        log_zero = negative_binomial_log_zero(n, p)
        logp = log_gamma_ratio(n, value) - kt.gammaln(value + 1.0) + log_zero + log_q
        return bound(logp, value >= 0, *kr.OPS["negative_binomial"].conditions(n=n, p=p))

    @staticmethod
    def logcdf(value: Any, n: Any, p: Any) -> TensorVariable:
        # P(K <= k) = I_p(n, floor(k) + 1)
        k = kt.maximum(kt.floor(value), 0.0)
        lcdf = log_betainc(n, k + 1.0, p, 1.0 - p)
        return bound(lcdf, value >= 0, *kr.OPS["negative_binomial"].conditions(n=n, p=p))

    @classmethod
    def support_point(cls, rv: TensorVariable, n: Any, p: Any) -> TensorVariable:
        return broadcast_like(_round(kt.floor(n * (1.0 - p) / p)), rv)


class Geometric(Distribution):
    """Geometric(p): the number of trials up to and including the first success."""

    rv_op = kr.OPS["geometric"]
    params = ("p",)
    support = "positive_integer"
    discrete = True

    @staticmethod
    def logp(value: Any, p: Any) -> TensorVariable:
        valid = kr.OPS["geometric"].conditions(p=p)
        return bound(xlog1m(value - 1.0, p) + kt.log(p), value >= 1, *valid)

    @staticmethod
    def logcdf(value: Any, p: Any) -> TensorVariable:
        return bound(
            kt.log1mexp(value * log1m(p)), value >= 1, *kr.OPS["geometric"].conditions(p=p)
        )

    @staticmethod
    def icdf(value: Any, p: Any) -> TensorVariable:
        # The smallest k >= 1 with 1 - (1 - p)^k >= q; the ratio of logs may round up
        # past an integer, so step back where the CDF of k - 1 already reaches q.
        log_miss = log1m(p)
        k = kt.maximum(kt.ceil(kt.log1p(-value) / log_miss), 1.0)
        reached = -kt.expm1((k - 1.0) * log_miss) >= value
        k = kt.switch(kt.logical_and(k > 1.0, reached), k - 1.0, k)
        return icdf_bound(k, value, *kr.OPS["geometric"].conditions(p=p))

    @classmethod
    def support_point(cls, rv: TensorVariable, p: Any) -> TensorVariable:
        return broadcast_like(_round(1.0 / p), rv)


class Categorical(Distribution):
    """Categorical(p) over the last axis of ``p`` (normalized), or (logit_p=...)."""

    rv_op = kr.OPS["categorical"]
    params = ("p", "logit_p")
    support = "categorical"
    discrete = True
    param_checks = (
        (("p",), lambda p: p >= 0, "p must be >= 0"),
        (("p",), lambda p: np.sum(p, axis=-1) > 0, "p must have a positive sum"),
    )
    observed_checks = (
        (("p",), lambda k, p: k < p.shape[-1], "observed categories must be < len(p)"),
    )

    @classmethod
    def rv_params(cls, p: Any = None, logit_p: Any = None) -> tuple[Any, ...]:
        if (p is None) == (logit_p is None):
            raise KilnTypeError(f"{cls.__name__}: give exactly one of p and logit_p")
        if p is None:
            p = kt.softmax(kt.as_tensor(logit_p, dtype="float64"), axis=-1)
        return (p,)

    @staticmethod
    def logp(value: Any, p: Any) -> TensorVariable:
        p = kt.as_tensor(p)
        k = kt.shape_i(p, -1)
        log_p = log_of(p) - kt.log(kt.sum(p, axis=-1, keepdims=True))
        picked = kt.eq(kt.expand_dims(value, -1), kt.arange(k))
        logp = kt.sum(kt.switch(picked, log_p, 0.0), axis=-1)
        return bound(logp, value >= 0, value < k, kt.all(p >= 0, axis=-1))

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        if not np.all((value >= 0) & (np.mod(value, 1) == 0)):
            raise KilnTypeError(f"{name}: observed categories must be non-negative integers")

    @classmethod
    def support_point(cls, rv: TensorVariable, p: Any) -> TensorVariable:
        return broadcast_like(kt.argmax(p, axis=-1), rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> None:
        return None
