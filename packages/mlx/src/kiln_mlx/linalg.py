"""Linear algebra on MLX: products, Cholesky, solves, inverse, determinants, eigh, triangles.

MLX's factorizations run on the CPU only (``stream=mx.cpu``), where they are exact in
float64. Each Op reads what its NumPy / SciPy reference reads: a Cholesky factor or a
symmetric solve uses only the chosen triangle of ``a``. A matrix that is not positive
definite gives what LAPACK leaves (no error) where SciPy raises ``LinAlgError``.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from kiln_graph import Apply
from kiln_graph.ops import Cholesky, Det, Eigh, Inv, MatMul, SlogDet, Solve, SolveTriangular, Tri
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify

CPU = mx.cpu


def _mT(x: Any) -> Any:  # noqa: N802
    return mx.swapaxes(x, -1, -2)


def _out_dtype(node: Apply, i: int = 0) -> str:
    return node.outputs[i].type.dtype  # type: ignore[attr-defined, no-any-return]


def _symmetric(a: Any, lower: bool) -> Any:
    """Return the symmetric matrix whose ``lower`` (else upper) triangle is ``a``'s."""
    tri = mx.tril(a) if lower else mx.triu(a)
    strict = mx.tril(a, -1) if lower else mx.triu(a, 1)
    return tri + _mT(strict)


def cholesky_lower(a: Any) -> Any:
    """Return the lower Cholesky factor of ``a``, reading only its lower triangle."""
    return mx.linalg.cholesky(_symmetric(a, True), stream=CPU)


def _lu_slogdet(a: Any) -> tuple[Any, Any]:
    """Return (sign, log |det a|) from MLX's LU factorization with partial pivoting."""
    lu, pivots = mx.linalg.lu_factor(a, stream=CPU)
    diag = mx.diagonal(lu, axis1=-2, axis2=-1)
    n = a.shape[-1]
    swaps = mx.sum(pivots != mx.arange(n, dtype=pivots.dtype), axis=-1)
    negatives = mx.sum(diag < 0, axis=-1)
    parity = mx.remainder((swaps + negatives).astype(mx.int64), 2)
    one = mx.array(1.0, dtype=a.dtype)
    sign = mx.where(parity == 0, one, -one)
    sign = mx.where(mx.any(diag == 0, axis=-1), mx.zeros_like(sign), sign)
    return sign, mx.sum(mx.log(mx.abs(diag)), axis=-1)


@mlx_funcify.register(Tri)
def mlx_funcify_Tri(op: Tri, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.tril`` / ``mx.triu`` from diagonal ``k``."""
    if op.lower:
        return lambda x: mx.tril(as_mx(x), op.k)
    return lambda x: mx.triu(as_mx(x), op.k)


@mlx_funcify.register(MatMul)
def mlx_funcify_MatMul(op: MatMul, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.matmul`` in the output dtype (on the CPU for float64, which is all MLX has)."""
    dtype = _out_dtype(node)

    def matmul(a: Any, b: Any) -> Any:
        a, b = as_mx(a, dtype), as_mx(b, dtype)
        stream = CPU if a.dtype == mx.float64 else None
        if a.ndim == 1 or b.ndim == 1:  # NumPy's vector rules
            return mx.matmul(a, b, stream=stream) if a.ndim and b.ndim else a * b
        return mx.matmul(a, b, stream=stream)

    return matmul


@mlx_funcify.register(Cholesky)
def mlx_funcify_Cholesky(op: Cholesky, node: Apply) -> MlxImpl:  # noqa: N802
    """Factor the lower triangle (lower factor) or the upper one (upper factor)."""
    dtype = _out_dtype(node)
    if op.lower:
        return lambda a: cholesky_lower(as_mx(a, dtype))
    return lambda a: _mT(cholesky_lower(_mT(as_mx(a, dtype))))


@mlx_funcify.register(Eigh)
def mlx_funcify_Eigh(op: Eigh, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.linalg.eigh`` of the lower triangle (CPU), with kiln's eigenvector signs.

    Each eigenvector's first entry of largest magnitude is positive; a matrix with a
    non-finite entry gives NaN outputs (it is replaced by the identity for the call), as
    on the VM.
    """
    dtype = _out_dtype(node)

    def eigh(a: Any) -> tuple[Any, Any]:
        a = mx.tril(as_mx(a, dtype))
        finite = mx.all(mx.isfinite(a), axis=(-2, -1), keepdims=True)
        a = mx.where(finite, a, mx.eye(a.shape[-1], dtype=a.dtype))
        w, v = mx.linalg.eigh(a, UPLO="L", stream=CPU)
        rows = mx.expand_dims(mx.argmax(mx.abs(v), axis=-2), -2)
        v = mx.where(mx.take_along_axis(v, rows, axis=-2) < 0, -v, v)
        nan = mx.array(float("nan"), dtype=a.dtype)
        return mx.where(mx.squeeze(finite, -1), w, nan), mx.where(finite, v, nan)

    return eigh


@mlx_funcify.register(Solve)
def mlx_funcify_Solve(op: Solve, node: Apply) -> MlxImpl:  # noqa: N802
    """LU solve (``gen``), or of the symmetric matrix of one triangle (``sym``, ``pos``)."""
    dtype = _out_dtype(node)

    def solve(a: Any, b: Any) -> Any:
        a, b = as_mx(a, dtype), as_mx(b, dtype)
        if op.assume_a == "gen":
            return mx.linalg.solve(a, b, stream=CPU)
        sym = _symmetric(a, op.lower)
        if op.assume_a == "pos":
            chol = mx.linalg.cholesky(sym, stream=CPU)
            vec = b.ndim == a.ndim - 1
            rhs = b[..., None] if vec else b
            y = mx.linalg.solve_triangular(chol, rhs, upper=False, stream=CPU)
            x = mx.linalg.solve_triangular(_mT(chol), y, upper=True, stream=CPU)
            return x[..., 0] if vec else x
        return mx.linalg.solve(sym, b, stream=CPU)

    return solve


@mlx_funcify.register(SolveTriangular)
def mlx_funcify_SolveTriangular(op: SolveTriangular, node: Apply) -> MlxImpl:  # noqa: N802
    """SciPy's ``solve_triangular`` (``trans``, ``lower``, ``unit_diagonal``)."""
    dtype = _out_dtype(node)
    trans = {0: 0, "N": 0, 1: 1, "T": 1, 2: 1, "C": 1}[op.trans]

    def solve_triangular(a: Any, b: Any) -> Any:
        a, b = as_mx(a, dtype), as_mx(b, dtype)
        lower = op.lower
        a = mx.tril(a) if lower else mx.triu(a)
        if op.unit_diagonal:
            n = a.shape[-1]
            eye = mx.eye(n, dtype=a.dtype)
            a = a * (1 - eye) + eye
        if trans:
            a, lower = _mT(a), not lower
        vec = b.ndim == 1
        rhs = b[:, None] if vec else b
        x = mx.linalg.solve_triangular(a, rhs, upper=not lower, stream=CPU)
        return x[:, 0] if vec else x

    return solve_triangular


@mlx_funcify.register(Inv)
def mlx_funcify_Inv(op: Inv, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.linalg.inv``."""
    dtype = _out_dtype(node)
    return lambda a: mx.linalg.inv(as_mx(a, dtype), stream=CPU)


@mlx_funcify.register(Det)
def mlx_funcify_Det(op: Det, node: Apply) -> MlxImpl:  # noqa: N802
    """Return the product of LU's diagonal with the pivots' sign."""
    dtype = _out_dtype(node)

    def det(a: Any) -> Any:
        a = as_mx(a, dtype)
        lu, pivots = mx.linalg.lu_factor(a, stream=CPU)
        n = a.shape[-1]
        swaps = mx.sum(pivots != mx.arange(n, dtype=pivots.dtype), axis=-1)
        one = mx.array(1.0, dtype=a.dtype)
        sign = mx.where(mx.remainder(swaps.astype(mx.int64), 2) == 0, one, -one)
        return sign * mx.prod(mx.diagonal(lu, axis1=-2, axis2=-1), axis=-1)

    return det


@mlx_funcify.register(SlogDet)
def mlx_funcify_SlogDet(op: SlogDet, node: Apply) -> MlxImpl:  # noqa: N802
    """Return the sign and the log of the absolute determinant, from LU."""
    dtype = _out_dtype(node)
    return lambda a: _lu_slogdet(as_mx(a, dtype))
