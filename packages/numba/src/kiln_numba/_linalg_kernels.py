"""Compiled linear-algebra kernels that generated code calls (cached by Numba once).

Factorizations and solves go through Numba's LAPACK bindings (``np.linalg.*``), with
the conventions of kiln's reference implementations (SciPy / NumPy) on top: only the
triangle an op reads is read, a 0 x 0 matrix is valid, and a matrix with a NaN or an
infinity gives NaN results instead of Numba's "Array must not contain infs or NaNs"
error. Triangular solves are substitution loops (Numba has no ``solve_triangular``).
Errors raise :class:`numpy.linalg.LinAlgError` (a ``ValueError``), as on the VM.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from kiln_numba._alloc import contiguous, copy, empty, full, zeros
from kiln_numba._cache import kernel_njit

__all__ = [
    "blas_dot",
    "cholesky_kernel",
    "det_kernel",
    "dot_kernel",
    "eigh_kernel",
    "inv_kernel",
    "matmul_loop",
    "slogdet_kernel",
    "solve_kernel",
    "solve_pos_kernel",
    "solve_triangular_kernel",
    "solve_triangular_small_kernel",
    "tri_kernel",
]


def blas_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return ``np.dot(a, b)``, passing BLAS C- or Fortran-ordered arrays without copies."""
    return np.dot(a, b)


def _blas_dot_impl(a_layout: str, b_layout: str):  # type: ignore[no-untyped-def]
    """Return the ``blas_dot`` implementation for the operands' static layouts.

    BLAS reads C and Fortran order directly. An array of unknown layout ('A', such as
    a transpose made by ``np.transpose``) is checked at run time: used as it is when it
    is contiguous in either order, copied to C order otherwise.
    """
    if a_layout in "CF" and b_layout in "CF":
        return lambda a, b: np.dot(a, b)
    if b_layout in "CF":

        def impl_a(a, b):  # type: ignore[no-untyped-def]
            if a.flags.f_contiguous:
                return np.dot(np.asfortranarray(a), b)
            return np.dot(contiguous(a), b)

        return impl_a
    if a_layout in "CF":

        def impl_b(a, b):  # type: ignore[no-untyped-def]
            if b.flags.f_contiguous:
                return np.dot(a, np.asfortranarray(b))
            return np.dot(a, contiguous(b))

        return impl_b

    def impl_ab(a, b):  # type: ignore[no-untyped-def]
        if a.flags.f_contiguous:
            fa = np.asfortranarray(a)
            if b.flags.f_contiguous:
                return np.dot(fa, np.asfortranarray(b))
            return np.dot(fa, contiguous(b))
        ca = contiguous(a)
        if b.flags.f_contiguous:
            return np.dot(ca, np.asfortranarray(b))
        return np.dot(ca, contiguous(b))

    return impl_ab


@overload(blas_dot)
def _blas_dot(a, b):  # type: ignore[no-untyped-def]  # Numba matches the stub's signature
    if isinstance(a, types.Array) and isinstance(b, types.Array):
        return _blas_dot_impl(a.layout, b.layout)
    return None


@kernel_njit
def dot_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return ``a @ b`` for float or complex matrices of one dtype, through BLAS.

    A kernel of its own (rather than ``np.dot`` in generated code) so that Numba
    compiles and caches the BLAS call once per dtype and layout, not once per graph.
    """
    return blas_dot(a, b)


@kernel_njit
def tri_kernel(x: np.ndarray, lower: bool, k: int) -> np.ndarray:
    """Return ``np.tril(x, k)`` (``lower``) or ``np.triu(x, k)`` over the last two axes."""
    m, n = x.shape[-2], x.shape[-1]
    out = empty(x.shape, x.dtype)
    batch = 1
    for d in range(x.ndim - 2):
        batch *= x.shape[d]
    src = contiguous(x).reshape((batch, m, n))
    dst = out.reshape((batch, m, n))
    for b in range(batch):
        for i in range(m):
            for j in range(n):
                if (j - i <= k) if lower else (j - i >= k):
                    dst[b, i, j] = src[b, i, j]
                else:
                    dst[b, i, j] = 0
    return out


@kernel_njit
def matmul_loop(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Accumulate ``a @ b`` into the zeroed ``out`` (dtypes BLAS does not handle)."""
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError("matmul: a's last dimension must equal b's second-to-last")
    n = b.shape[1]
    for i in range(m):
        for p in range(k):
            aip = a[i, p]
            for j in range(n):
                out[i, j] += aip * b[p, j]
    return out


# Small helpers are inlined into the kernels (one library per kernel): each separately
# compiled function a kernel calls is one more library to link into every graph using it.


@kernel_njit(inline="always")
def _all_finite(a: np.ndarray) -> bool:
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if not np.isfinite(a[i, j]):
                return False
    return True


@kernel_njit(inline="always")
def _check_square(a: np.ndarray) -> int:
    n = a.shape[0]
    if a.shape[1] != n:
        raise np.linalg.LinAlgError("expected a square matrix")
    return n


@kernel_njit(inline="always")
def _symmetrized(a: np.ndarray, lower: bool) -> np.ndarray:
    """Return the symmetric matrix whose lower (or upper) triangle is that of ``a``."""
    n = a.shape[0]
    out = empty((n, n), a.dtype)
    for i in range(n):
        for j in range(i + 1):
            v = a[i, j] if lower else a[j, i]
            out[i, j] = v
            out[j, i] = v
    return out


@kernel_njit(inline="always")
def _fill_nan(out: np.ndarray) -> np.ndarray:
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = np.nan
    return out


@kernel_njit(inline="always")
def _c_order(x: np.ndarray, transpose: bool) -> np.ndarray:
    """Return a C-ordered copy of ``x`` (of ``x.T`` with ``transpose``), as plain loops."""
    m, n = (x.shape[1], x.shape[0]) if transpose else (x.shape[0], x.shape[1])
    out = empty((m, n), x.dtype)
    for i in range(m):
        for j in range(n):
            out[i, j] = x[j, i] if transpose else x[i, j]
    return out


@kernel_njit
def cholesky_kernel(a: np.ndarray, lower: bool) -> np.ndarray:
    """Return the lower (``a = L L^T``) or upper (``a = U^T U``) Cholesky factor.

    Reads only that triangle of ``a``; raises ``LinAlgError`` if ``a`` is not positive
    definite. A non-finite entry in the triangle gives a NaN factor.
    """
    _check_square(a)
    s = _symmetrized(a, lower)
    if s.shape[0] == 0:
        return s
    if not _all_finite(s):
        return _fill_nan(s)
    factor = np.linalg.cholesky(s)
    return factor if lower else _c_order(factor, True)


@kernel_njit
def eigh_kernel(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the ascending eigenvalues and the eigenvectors of ``a``'s lower triangle.

    Each eigenvector's first entry of largest magnitude is made positive (kiln's
    convention, :func:`kiln_graph.ops.normalize_eigenvector_signs`); a non-finite entry
    gives NaN outputs.
    """
    n = _check_square(a)
    s = _symmetrized(a, True)
    if n == 0 or not _all_finite(s):
        return full(n, np.nan, a.dtype), _fill_nan(s)
    w, v = np.linalg.eigh(s)
    out = empty((n, n), a.dtype)
    for j in range(n):
        big = 0
        for i in range(1, n):
            if abs(v[i, j]) > abs(v[big, j]):
                big = i
        flip = v[big, j] < 0
        for i in range(n):
            out[i, j] = -v[i, j] if flip else v[i, j]
    return w, out


@kernel_njit(inline="always")
def _divide_row(x: np.ndarray, i: int, d: float) -> None:
    """Divide row ``i`` of ``x`` by the diagonal entry ``d`` (``LinAlgError`` if 0)."""
    if d == 0:
        raise np.linalg.LinAlgError("solve_triangular: singular matrix (a zero on the diagonal)")
    for c in range(x.shape[1]):
        x[i, c] /= d


@kernel_njit(inline="always")
def _substitute(a: np.ndarray, x: np.ndarray, lower: bool, unit_diagonal: bool, trans: int) -> None:
    """Overwrite ``x`` with the solution of ``a y = x`` (``a^T y = x``), ``a`` triangular."""
    n, k = x.shape
    # a^T is lower triangular when a is upper: the effective triangle flips with trans.
    forward = lower != (trans == 1)
    for step in range(n):
        i = step if forward else n - 1 - step
        lo, hi = (0, i) if forward else (i + 1, n)
        for j in range(lo, hi):
            coef = a[j, i] if trans == 1 else a[i, j]
            for c in range(k):
                x[i, c] -= coef * x[j, c]
        if not unit_diagonal:
            _divide_row(x, i, a[i, i])


@kernel_njit(inline="always")
def _triangular_rhs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Check the shapes of ``a x = b``; return a C-ordered copy of ``b`` to solve in place."""
    n = _check_square(a)
    if b.shape[0] != n:
        raise ValueError("solve_triangular: b's first dimension must equal a's size")
    return _c_order(b, False)


@kernel_njit
def solve_triangular_kernel(
    a: np.ndarray,
    b: np.ndarray,
    lower: bool,
    unit_diagonal: bool,
    trans: int,
    blocked_from: int,
    blocked_rhs: int,
) -> np.ndarray:
    """Solve ``a x = b`` (``trans=1``: ``a^T x = b``) by substitution, ``b`` a matrix.

    Reads only the ``lower`` (or upper) triangle of ``a`` (not its diagonal with
    ``unit_diagonal``); raises ``LinAlgError`` on a zero diagonal entry. Systems of
    order at least ``blocked_from`` with at least ``blocked_rhs`` right-hand sides go by
    blocks (:func:`_blocked_substitute`; the generated code passes
    :data:`kiln_numba.linalg.TRIANGULAR_BLOCKED_FROM` and ``_RHS``).
    """
    x = _triangular_rhs(a, b)
    if x.shape[0] >= blocked_from and x.shape[1] >= blocked_rhs:
        _blocked_substitute(a, x, lower, unit_diagonal, trans)
    else:
        _substitute(a, x, lower, unit_diagonal, trans)
    return x


@kernel_njit
def solve_triangular_small_kernel(
    a: np.ndarray, b: np.ndarray, lower: bool, unit_diagonal: bool, trans: int
) -> np.ndarray:
    """:func:`solve_triangular_kernel` without its blocked path (substitution only).

    For systems whose static shapes rule the blocked path out (order below
    :data:`~kiln_numba.linalg.TRIANGULAR_BLOCKED_FROM` or fewer right-hand sides than
    :data:`~kiln_numba.linalg.TRIANGULAR_BLOCKED_RHS`, as in a model's Cholesky-factored
    covariance): the same numbers, about half the compile of the kernel on a cold cache.
    """
    x = _triangular_rhs(a, b)
    _substitute(a, x, lower, unit_diagonal, trans)
    return x


_BLOCK = 32


@kernel_njit
def _blocked_substitute(
    a: np.ndarray, x: np.ndarray, lower: bool, unit_diagonal: bool, trans: int
) -> None:
    """:func:`_substitute` by blocks of rows: each block's update is one BLAS product.

    The effective triangle is copied as a lower-triangular ``t`` in the order of the
    substitution (reversed for a backward one), so that the update of block rows
    ``s:e`` by the rows solved before is ``x[s:e] -= t[s:e, :s] @ x[:s]`` (about
    ``n**2 k / 2`` multiply-adds in BLAS, as LAPACK's ``trsm``), and only the diagonal
    blocks are substitution loops. Rows are updated and copied by loops: a slice
    assignment from an array (``y[s:e] -= ...``) makes Numba compile the formatting of
    its shape-mismatch message, about 2 s of every cold compile that reaches this kernel.
    """
    n, k = x.shape
    forward = lower != (trans == 1)
    t = zeros((n, n), x.dtype)
    for i in range(n):
        src_i = i if forward else n - 1 - i
        for j in range(i + 1):
            src_j = j if forward else n - 1 - j
            t[i, j] = a[src_j, src_i] if trans == 1 else a[src_i, src_j]
    y = x if forward else copy(x[::-1])
    for s in range(0, n, _BLOCK):
        e = min(s + _BLOCK, n)
        if s > 0:
            update = np.dot(contiguous(t[s:e, :s]), y[:s])
            for i in range(e - s):
                for c in range(k):
                    y[s + i, c] -= update[i, c]
        for i in range(s, e):
            for j in range(s, i):
                coef = t[i, j]
                for c in range(k):
                    y[i, c] -= coef * y[j, c]
            if not unit_diagonal:
                _divide_row(y, i, t[i, i])
    if not forward:
        for i in range(n):
            for c in range(k):
                x[i, c] = y[n - 1 - i, c]


@kernel_njit(inline="always")
def _solve_checks(a: np.ndarray, b: np.ndarray) -> bool:
    """Check the shapes of ``a x = b``; return whether there is anything to solve."""
    n = _check_square(a)
    if b.shape[0] != n:
        raise ValueError("solve: b's first dimension must equal a's size")
    return n > 0 and b.shape[1] > 0


@kernel_njit
def solve_kernel(a: np.ndarray, b: np.ndarray, symmetric: bool, lower: bool) -> np.ndarray:
    """Solve ``a x = b`` (``b`` a matrix) by LU with partial pivoting (LAPACK ``gesv``).

    With ``symmetric``, ``a`` is read from one triangle (``lower``). Raises
    ``LinAlgError`` for a singular ``a``; a non-finite entry gives NaN results.
    """
    if not _solve_checks(a, b):
        return zeros(b.shape, a.dtype)
    s = _symmetrized(a, lower) if symmetric else _c_order(a, False)
    if not (_all_finite(s) and _all_finite(b)):
        return _fill_nan(empty(b.shape, a.dtype))
    return _c_order(np.linalg.solve(s, _c_order(b, False)), False)


@kernel_njit
def solve_pos_kernel(a: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solve ``a x = b`` for a symmetric positive-definite ``a`` (Cholesky, two substitutions).

    Reads one triangle of ``a`` (``lower``); raises ``LinAlgError`` if ``a`` is not
    positive definite; a non-finite entry gives NaN results.
    """
    if not _solve_checks(a, b):
        return zeros(b.shape, a.dtype)
    s = _symmetrized(a, lower)
    if not (_all_finite(s) and _all_finite(b)):
        return _fill_nan(empty(b.shape, a.dtype))
    factor = np.linalg.cholesky(s)
    x = _c_order(b, False)
    _substitute(factor, x, True, False, 0)
    _substitute(factor, x, True, False, 1)
    return x


@kernel_njit
def inv_kernel(a: np.ndarray) -> np.ndarray:
    """Return the inverse of ``a``; ``LinAlgError`` if singular, NaNs if not finite."""
    n = _check_square(a)
    if n == 0:
        return empty((0, 0), a.dtype)
    if not _all_finite(a):
        return _fill_nan(empty((n, n), a.dtype))
    return _c_order(np.linalg.inv(_c_order(a, False)), False)


@kernel_njit
def det_kernel(a: np.ndarray) -> float:
    """Return the determinant of ``a`` (1 for 0 x 0, NaN if not finite)."""
    n = _check_square(a)
    if n == 0:
        return 1.0
    if not _all_finite(a):
        return np.nan
    return np.linalg.det(_c_order(a, False))


@kernel_njit
def slogdet_kernel(a: np.ndarray) -> tuple[float, float]:
    """Return the sign and log absolute determinant of ``a`` (NaNs if not finite)."""
    n = _check_square(a)
    if n == 0:
        return 1.0, 0.0
    if not _all_finite(a):
        return np.nan, np.nan
    sign, logabsdet = np.linalg.slogdet(_c_order(a, False))
    return sign, logabsdet
