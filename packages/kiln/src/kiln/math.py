"""``kl.math``: the elementwise and array functions PyMC users call as ``pm.math.X``.

Most names re-export :mod:`kiln_graph.tensor`; the few PyMC spells differently
(``invlogit``, ``sqr``, ``sgn``, ``and_``...) are aliases, and the rest (``probit``,
``logdiffexp``, ``logdet``...) are written here in numerically careful forms.

Examples
--------
>>> import kiln as kl
>>> x = kl.tensor.vector("x")
>>> f = kl.function([x], kl.math.invlogit(x))
>>> f([0.0])
array([0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph import TensorVariable
from kiln_graph import tensor as kt
from kiln_graph.tensor import abs as abs  # noqa: A004
from kiln_graph.tensor import betainc as betainc
from kiln_graph.tensor import broadcast_to as broadcast_to
from kiln_graph.tensor import ceil as ceil
from kiln_graph.tensor import cholesky as cholesky
from kiln_graph.tensor import clip as clip
from kiln_graph.tensor import concatenate as concatenate
from kiln_graph.tensor import constant as constant
from kiln_graph.tensor import cos as cos
from kiln_graph.tensor import cosh as cosh
from kiln_graph.tensor import cumsum as cumsum
from kiln_graph.tensor import det as det
from kiln_graph.tensor import dot as dot
from kiln_graph.tensor import eigh as eigh
from kiln_graph.tensor import eq as eq
from kiln_graph.tensor import erf as erf
from kiln_graph.tensor import erfc as erfc
from kiln_graph.tensor import erfcx as erfcx
from kiln_graph.tensor import erfinv as erfinv
from kiln_graph.tensor import exp as exp
from kiln_graph.tensor import expm1 as expm1
from kiln_graph.tensor import flatten as flatten
from kiln_graph.tensor import floor as floor
from kiln_graph.tensor import full as full
from kiln_graph.tensor import gammainc as gammainc
from kiln_graph.tensor import gammaincc as gammaincc
from kiln_graph.tensor import gammaln as gammaln
from kiln_graph.tensor import ge as ge
from kiln_graph.tensor import gt as gt
from kiln_graph.tensor import kron as kron
from kiln_graph.tensor import le as le
from kiln_graph.tensor import log as log
from kiln_graph.tensor import log1mexp as log1mexp
from kiln_graph.tensor import log1p as log1p
from kiln_graph.tensor import log_softmax as log_softmax
from kiln_graph.tensor import logaddexp as logaddexp
from kiln_graph.tensor import logit as logit
from kiln_graph.tensor import logsumexp as logsumexp
from kiln_graph.tensor import lt as lt
from kiln_graph.tensor import matmul as matmul
from kiln_graph.tensor import max as max  # noqa: A004
from kiln_graph.tensor import maximum as maximum
from kiln_graph.tensor import mean as mean
from kiln_graph.tensor import min as min  # noqa: A004
from kiln_graph.tensor import minimum as minimum
from kiln_graph.tensor import neq as neq
from kiln_graph.tensor import ones as ones
from kiln_graph.tensor import ones_like as ones_like
from kiln_graph.tensor import outer as outer
from kiln_graph.tensor import prod as prod
from kiln_graph.tensor import round as round  # noqa: A004
from kiln_graph.tensor import sigmoid as sigmoid
from kiln_graph.tensor import sin as sin
from kiln_graph.tensor import sinh as sinh
from kiln_graph.tensor import softmax as softmax
from kiln_graph.tensor import softplus as softplus
from kiln_graph.tensor import sqrt as sqrt
from kiln_graph.tensor import stack as stack
from kiln_graph.tensor import sum as sum  # noqa: A004
from kiln_graph.tensor import switch as switch
from kiln_graph.tensor import tan as tan
from kiln_graph.tensor import tanh as tanh
from kiln_graph.tensor import where as where
from kiln_graph.tensor import zeros as zeros
from kiln_graph.tensor import zeros_like as zeros_like
from kiln_model import expand_packed_triangular as expand_packed_triangular

_SQRT2 = float(np.sqrt(2.0))

#: ``invlogit(x) = 1 / (1 + exp(-x))`` (PyMC's name for the sigmoid).
invlogit = sigmoid
#: ``log1pexp(x) = log(1 + exp(x))`` (PyMC's name for softplus).
log1pexp = softplus
#: ``sgn(x)``: the sign of ``x`` (-1, 0 or 1).
sgn = kt.sign
#: ``sqr(x) = x ** 2``.
sqr = kt.square
#: ``matrix_inverse(A)``: the inverse of the square matrix ``A``.
matrix_inverse = kt.inv
#: ``and_(a, b)``: elementwise logical and.
and_ = kt.logical_and
#: ``or_(a, b)``: elementwise logical or.
or_ = kt.logical_or
#: ``invert(a)``: elementwise logical not.
invert = kt.logical_not
#: ``isnan(x)`` / ``isinf(x)``: elementwise tests for NaN and for +-inf.
isnan = kt.isnan
isinf = kt.isinf


def logdiffexp(a: Any, b: Any) -> TensorVariable:
    """Return ``log(exp(a) - exp(b))`` for ``a >= b``, as ``a + log1mexp(b - a)``.

    ``-inf`` where ``a == b``; no overflow for large ``a`` and full accuracy when
    ``b`` is close to ``a``.

    Examples
    --------
    >>> import kiln as kl
    >>> float(kl.function([], kl.math.logdiffexp(1000.0, 999.0))())  # doctest: +ELLIPSIS
    999.54...
    """
    a, b = kt.as_tensor(a), kt.as_tensor(b)
    return a + kt.log1mexp(b - a)


def invprobit(x: Any) -> TensorVariable:
    """Return the standard normal CDF ``Phi(x) = erfc(-x / sqrt(2)) / 2``.

    Through ``erfc``, so the lower tail (``x`` -> -inf) keeps its relative accuracy.

    Examples
    --------
    >>> import kiln as kl
    >>> float(kl.function([], kl.math.invprobit(0.0))())
    0.5
    """
    return 0.5 * kt.erfc(-kt.as_tensor(x) / _SQRT2)


def probit(p: Any) -> TensorVariable:
    """Return the standard normal quantile ``Phi^{-1}(p) = sqrt(2) erfinv(2p - 1)``.

    Absolute accuracy is that of ``2p - 1``: for ``p`` below about 1e-10 the relative
    error of ``p`` grows (kiln has no ``erfcinv``).

    Examples
    --------
    >>> import kiln as kl
    >>> round(float(kl.function([], kl.math.probit(0.975))()), 4)
    1.96
    """
    p = kt.as_tensor(p)
    return _SQRT2 * kt.erfinv(2.0 * p - 1.0)


def logdet(x: Any) -> TensorVariable:
    """Return ``log |det(x)|`` of a square matrix, without forming the determinant.

    PyMC's ``logdet`` is meant for positive-definite matrices, where this is
    ``log det(x)``.
    """
    return kt.slogdet(x)[1]


def cumprod(x: Any, axis: int | None = None) -> TensorVariable:
    """Return the cumulative product of ``x`` along ``axis`` (flattened when None).

    Computed as a product of a masked lower-triangular stack: exact for any sign and
    for zeros, O(n^2) in the length of the axis (meant for short axes).
    """
    x = kt.as_tensor(x)
    if axis is None:
        x = kt.flatten(x)
        axis = 0
    axis = axis % x.ndim
    xm = _move_last(x, axis)
    n = kt.shape(xm)[-1]
    tri = kt.ge(kt.arange(n)[:, None], kt.arange(n)[None, :])  # [i, j]: j <= i
    terms = kt.switch(tri, kt.expand_dims(xm, -2), 1.0)  # [..., i, j]
    out = kt.prod(terms, axis=-1)
    return _move_back(out, axis) if axis != x.ndim - 1 else out


def _move_last(x: TensorVariable, axis: int) -> TensorVariable:
    order = [i for i in range(x.ndim) if i != axis] + [axis]
    return kt.transpose(x, order)


def _move_back(x: TensorVariable, axis: int) -> TensorVariable:
    order = list(range(x.ndim - 1))
    order.insert(axis, x.ndim - 1)
    return kt.transpose(x, order)


def batched_diag(x: Any) -> TensorVariable:
    """Return a stack of diagonal matrices from ``(..., n)`` vectors, or the diagonals.

    A ``(..., n)`` input of ndim 2 becomes ``(..., n, n)`` matrices; a ``(..., n, n)``
    input of ndim 3 gives its ``(..., n)`` diagonals.
    """
    x = kt.as_tensor(x)
    if x.ndim == 2:
        n = x.type.shape[-1]
        eye = kt.eye(n) if n is not None else kt.eye(kt.shape(x)[-1])
        return kt.expand_dims(x, -1) * eye
    if x.ndim == 3:
        n = x.type.shape[-1]
        eye = kt.eye(n) if n is not None else kt.eye(kt.shape(x)[-1])
        return kt.sum(x * eye, axis=-1)
    raise ValueError(f"batched_diag: expected a 2-d or 3-d tensor, got ndim {x.ndim}")
