"""Packed triangular matrices: ``n (n + 1) / 2`` entries of a triangle, row by row.

PyMC's ``LKJCholeskyCov`` value is the lower triangle of a Cholesky factor packed this
way and ``LKJCorr``'s the strict upper triangle of a correlation matrix; these helpers
move between the packed vectors and the matrices, with batch dimensions in front.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph import KilnValueError, TensorVariable
from kiln_graph import tensor as kt


def check_size(what: str, n: Any, least: int = 1) -> int:
    """Return ``n`` as an int, or raise unless it is an integer ``>= least``."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < least:
        raise KilnValueError(f"{what}: n must be an integer >= {least}, got {n!r}")
    return int(n)


def diagonal_positions(n: int) -> np.ndarray:
    """Return where the diagonal entries sit in a packed lower triangle of order ``n``."""
    return np.cumsum(np.arange(1, n + 1)) - 1


def expand_packed_triangular(
    n: int, packed: Any, lower: bool = True, diagonal_only: bool = False
) -> TensorVariable:
    """Return the ``n x n`` triangular matrices whose non-zero entries are ``packed``.

    Parameters
    ----------
    n : int
        The order of the matrices.
    packed : tensor of shape ``(..., n (n + 1) / 2)``
        The entries of the lower (``lower=True``) or upper triangle, row by row; leading
        dimensions are batch dimensions.
    lower : bool
        Whether ``packed`` holds the lower triangle.
    diagonal_only : bool
        Return only the diagonal entries, shape ``(..., n)``.

    Returns
    -------
    TensorVariable
        The ``(..., n, n)`` triangular matrices, or their ``(..., n)`` diagonals.

    Examples
    --------
    >>> import kiln as kl
    >>> kl.function([], kl.math.expand_packed_triangular(2, [1.0, 2.0, 3.0]))()
    array([[1., 0.],
           [2., 3.]])
    """
    n = check_size("expand_packed_triangular", n)
    packed = kt.as_tensor(packed)
    if packed.ndim < 1:
        raise KilnValueError(
            "expand_packed_triangular: packed must have at least one dimension, got ndim 0"
        )
    size = n * (n + 1) // 2
    if packed.type.shape[-1] is not None and packed.type.shape[-1] != size:
        raise KilnValueError(
            f"expand_packed_triangular: packed must have {size} entries on its last axis for "
            f"n={n}, got {packed.type.shape[-1]}"
        )
    rows, cols = np.tril_indices(n) if lower else np.triu_indices(n)
    if diagonal_only:
        return packed[..., kt.constant(np.flatnonzero(rows == cols))]
    index = np.full((n, n), size, dtype=np.int64)
    index[rows, cols] = np.arange(size)
    padded = kt.concatenate([packed, kt.zeros_like(packed[..., :1])], axis=-1)
    return padded[..., kt.constant(index)]


def pack_tril(matrix: Any, n: int, k: int = 0) -> TensorVariable:
    """Return the entries of the ``(..., n, n)`` matrices on and below diagonal ``k``, packed."""
    rows, cols = np.tril_indices(n, k)
    return kt.as_tensor(matrix)[..., kt.constant(rows), kt.constant(cols)]


def pack_triu(matrix: Any, n: int, k: int = 0) -> TensorVariable:
    """Return the entries of the ``(..., n, n)`` matrices on and above diagonal ``k``, packed."""
    rows, cols = np.triu_indices(n, k)
    return kt.as_tensor(matrix)[..., kt.constant(rows), kt.constant(cols)]


def symmetric_from_triu(packed: Any, n: int, diagonal: float = 1.0) -> TensorVariable:
    """Return the symmetric ``(..., n, n)`` matrices of strict-upper entries ``packed``.

    The diagonal is ``diagonal`` (1: a correlation matrix).
    """
    packed = kt.as_tensor(packed)
    rows, cols = np.triu_indices(n, 1)
    size = len(rows)
    index = np.full((n, n), size, dtype=np.int64)
    index[rows, cols] = np.arange(size)
    index[cols, rows] = np.arange(size)
    fill = kt.zeros_like(packed[..., :1]) + diagonal
    return kt.concatenate([packed, fill], axis=-1)[..., kt.constant(index)]


def row_norms(matrix: Any) -> TensorVariable:
    """Return the Euclidean norm of each row of the ``(..., n, n)`` matrices."""
    matrix = kt.as_tensor(matrix)
    return kt.sqrt(kt.sum(matrix * matrix, axis=-1))


def diagonal(matrix: Any, n: int) -> TensorVariable:
    """Return the ``(..., n)`` diagonals of the ``(..., n, n)`` matrices."""
    idx = kt.constant(np.arange(n))
    return kt.as_tensor(matrix)[..., idx, idx]


def log_cosh(x: Any) -> TensorVariable:
    """Return ``log(cosh(x))`` without overflow (``-2 log cosh(y) = log(1 - tanh(y)^2)``)."""
    a = kt.abs(x)
    return a + kt.log1p(kt.exp(-2.0 * a)) - float(np.log(2.0))


def corr_cholesky(z: Any, log1mz2: Any, n: int) -> TensorVariable:
    """Return the Cholesky factors of correlation matrices from canonical partial correlations.

    ``z`` holds, strictly below the diagonal of ``(..., n, n)`` matrices, the partial
    correlation of row ``j`` with column ``i`` given the columns before ``i`` (a C-vine);
    ``log1mz2`` holds ``log(1 - z^2)`` there (computed where the caller keeps its digits).
    Entries on and above the diagonal are ignored. Row ``j`` of the factor is
    ``W[j, i] = z[j, i] prod_{k<i} sqrt(1 - z[j, k]^2)`` and its diagonal the whole product,
    so each row has unit norm.
    """
    strict = kt.constant(np.tril(np.ones((n, n), dtype=bool), -1))
    on_diag = kt.constant(np.eye(n, dtype=bool))
    half = kt.switch(strict, 0.5 * kt.as_tensor(log1mz2), 0.0)
    before = kt.exp(kt.cumsum(half, axis=-1) - half)  # the product over k < i
    return kt.switch(strict, z * before, kt.switch(on_diag, before, 0.0))
