"""Linear algebra on JAX: products, Cholesky, solves, inverse, determinants, eigh, triangles.

Each Op reads what its NumPy / SciPy reference reads: a Cholesky factor or a
symmetric solve uses only the chosen triangle of ``a``. XLA reports no failure: a
matrix that is not positive definite gives NaN where SciPy raises ``LinAlgError``.
"""

from __future__ import annotations

from typing import Any

import jax.lax.linalg as lax_linalg
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from kiln_graph import Apply
from kiln_graph.ops import Cholesky, Det, Eigh, Inv, MatMul, SlogDet, Solve, SolveTriangular, Tri
from kiln_jax._funcify import JaxImpl, jax_funcify


def _mT(x: Any) -> Any:  # noqa: N802
    return jnp.swapaxes(x, -1, -2)


def _out_dtype(node: Apply, i: int = 0) -> str:
    return node.outputs[i].type.dtype  # type: ignore[attr-defined, no-any-return]


def cholesky_lower(a: Any) -> Any:
    """Return the lower Cholesky factor of ``a``, reading only its lower triangle."""
    return jnp.tril(lax_linalg.cholesky(a, symmetrize_input=False))


def _symmetric(a: Any, lower: bool) -> Any:
    """Return the symmetric matrix whose ``lower`` (else upper) triangle is ``a``'s."""
    tri = jnp.tril(a) if lower else jnp.triu(a)
    strict = jnp.tril(a, -1) if lower else jnp.triu(a, 1)
    return tri + _mT(strict)


@jax_funcify.register(Tri)
def jax_funcify_Tri(op: Tri, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.tril`` / ``jnp.triu`` from diagonal ``k``."""
    if op.lower:
        return lambda x: jnp.tril(x, op.k)
    return lambda x: jnp.triu(x, op.k)


@jax_funcify.register(MatMul)
def jax_funcify_MatMul(op: MatMul, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.matmul`` in the output dtype."""
    dtype = _out_dtype(node)
    return lambda a, b: jnp.matmul(a.astype(dtype), b.astype(dtype))


@jax_funcify.register(Cholesky)
def jax_funcify_Cholesky(op: Cholesky, node: Apply) -> JaxImpl:  # noqa: N802
    """Factor the lower triangle (lower factor) or the upper one (upper factor)."""
    dtype = _out_dtype(node)
    if op.lower:
        return lambda a: cholesky_lower(a.astype(dtype))
    return lambda a: _mT(cholesky_lower(_mT(a.astype(dtype))))


@jax_funcify.register(Eigh)
def jax_funcify_Eigh(op: Eigh, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.linalg.eigh`` of the lower triangle, with kiln's eigenvector signs.

    Each eigenvector's first entry of largest magnitude is positive; a matrix with a
    non-finite entry gives NaN outputs (it is replaced by the identity for the call), as
    on the VM.
    """
    dtype = _out_dtype(node)

    def eigh(a: Any) -> tuple[Any, Any]:
        a = jnp.tril(a.astype(dtype))
        finite = jnp.all(jnp.isfinite(a))
        a = jnp.where(finite, a, jnp.eye(a.shape[-1], dtype=dtype))
        w, v = jnp.linalg.eigh(a, UPLO="L", symmetrize_input=False)
        rows = jnp.argmax(jnp.abs(v), axis=-2)[..., None, :]
        v = jnp.where(jnp.take_along_axis(v, rows, axis=-2) < 0, -v, v)
        return jnp.where(finite, w, jnp.nan), jnp.where(finite, v, jnp.nan)

    return eigh


@jax_funcify.register(Solve)
def jax_funcify_Solve(op: Solve, node: Apply) -> JaxImpl:  # noqa: N802
    """LU solve (``gen``), or of the symmetric matrix of one triangle (``sym``, ``pos``)."""
    dtype = _out_dtype(node)

    def solve(a: Any, b: Any) -> Any:
        a, b = a.astype(dtype), b.astype(dtype)
        if op.assume_a == "gen":
            return jnp.linalg.solve(a, b)
        sym = _symmetric(a, op.lower)
        if op.assume_a == "pos":
            return jsl.cho_solve((cholesky_lower(sym), True), b)
        return jnp.linalg.solve(sym, b)

    return solve


@jax_funcify.register(SolveTriangular)
def jax_funcify_SolveTriangular(op: SolveTriangular, node: Apply) -> JaxImpl:  # noqa: N802
    """``jax.scipy.linalg.solve_triangular`` (SciPy's arguments)."""
    dtype = _out_dtype(node)

    def solve_triangular(a: Any, b: Any) -> Any:
        return jsl.solve_triangular(
            a.astype(dtype),
            b.astype(dtype),
            trans=op.trans,
            lower=op.lower,
            unit_diagonal=op.unit_diagonal,
        )

    return solve_triangular


@jax_funcify.register(Inv)
def jax_funcify_Inv(op: Inv, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.linalg.inv``."""
    dtype = _out_dtype(node)
    return lambda a: jnp.linalg.inv(a.astype(dtype))


@jax_funcify.register(Det)
def jax_funcify_Det(op: Det, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.linalg.det``."""
    dtype = _out_dtype(node)
    return lambda a: jnp.linalg.det(a.astype(dtype))


@jax_funcify.register(SlogDet)
def jax_funcify_SlogDet(op: SlogDet, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.linalg.slogdet``: the sign and the log of the absolute determinant."""
    dtype = _out_dtype(node)

    def slogdet(a: Any) -> tuple[Any, Any]:
        sign, logabs = jnp.linalg.slogdet(a.astype(dtype))
        return sign, logabs

    return slogdet
