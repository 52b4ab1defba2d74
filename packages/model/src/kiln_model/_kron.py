"""Products and solves with a Kronecker product of matrices, never formed.

``kron(A_1, ..., A_k) @ b`` costs ``N * sum(n_i)`` multiply-adds (``N = prod(n_i)``)
instead of ``N**2``: ``b`` is viewed as an ``n_1 x ... x n_k`` array and each factor
acts on one axis. Used by ``KroneckerNormal``'s density and by the Kronecker GPs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph import TensorVariable
from kiln_graph import tensor as kt

__all__ = ["cartesian", "kron_diag", "kron_dot", "kron_solve_lower"]


def cartesian(*arrays: Any) -> np.ndarray:
    """Return the Cartesian product of the rows of ``arrays`` (the last varies fastest)."""
    mats = [np.asarray(a, dtype="float64").reshape(len(a), -1) for a in arrays]
    idx = np.indices([len(m) for m in mats]).reshape(len(mats), -1)
    return np.hstack([m[i] for m, i in zip(mats, idx, strict=True)])


def _kron_apply(factors: list[TensorVariable], b: TensorVariable, apply: Any) -> TensorVariable:
    """Return ``kron(*factors)``'s ``apply`` (a product or a solve) on ``b``, factor by factor.

    ``b`` (``(N,)`` or ``(N, m)``, rows in the Cartesian order of :func:`cartesian`) is
    viewed as ``(n_1, ..., n_k, m)``; each factor acts on the leading axis, which then
    moves last, so after ``k`` factors the axes are ``(m, n_1, ..., n_k)``.
    """
    matrix = b.ndim == 2
    y = b if matrix else b[:, None]
    m = _length(y, 1)
    for f in factors:
        y = kt.reshape(y, (_length(f, 0), -1))
        y = apply(f, y).T
    y = kt.reshape(y, (m, -1)).T
    return y if matrix else y[:, 0]


def _length(x: TensorVariable, axis: int) -> Any:
    """Return ``x``'s length along ``axis``: its static int where known, else symbolic.

    A reshape to static lengths keeps the graph free of shape arithmetic, which the
    draws' batched graphs (and JAX's tracing of them) need.
    """
    n = x.type.shape[axis]
    return int(n) if n is not None else x.shape[axis]


def kron_dot(factors: list[TensorVariable], b: TensorVariable) -> TensorVariable:
    """Return ``kron(*factors) @ b`` without forming the Kronecker product."""
    return _kron_apply(factors, b, kt.dot)


def kron_solve_lower(factors: list[TensorVariable], b: TensorVariable) -> TensorVariable:
    """Return ``kron(*factors)^-1 @ b`` for lower-triangular factors."""
    return _kron_apply(factors, b, lambda f, y: kt.solve_triangular(f, y, lower=True))


def kron_diag(*diags: Any) -> TensorVariable:
    """Return the diagonal of ``kron(diag(d_1), diag(d_2), ...)`` (the last varies fastest)."""
    out = kt.as_tensor(diags[0])
    for d in diags[1:]:
        out = kt.reshape(out[:, None] * kt.as_tensor(d)[None, :], (-1,))
    return out
