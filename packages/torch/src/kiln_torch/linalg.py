"""Linear algebra on torch: products, Cholesky, solves, inverse, determinants, eigh, triangles.

Each Op reads what its NumPy / SciPy reference reads: a Cholesky factor or a symmetric
solve uses only the chosen triangle of ``a``. A matrix that is not positive definite
(Cholesky) or singular (inverse, general solve) raises NumPy's ``LinAlgError``, as on
the VM and Numba. Every function here takes batched arguments (leading batch
dimensions), so :mod:`kiln_torch.blockwise` calls them on whole batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from kiln_graph import Apply
from kiln_graph.ops import Cholesky, Det, Eigh, Inv, MatMul, SlogDet, Solve, SolveTriangular, Tri
from kiln_torch._convert import DTYPES
from kiln_torch._funcify import TorchImpl, torch_funcify


def batched(fn: TorchImpl) -> TorchImpl:
    """Declare that ``fn`` takes leading batch dimensions (Blockwise calls it on batches)."""
    fn.batched = True  # type: ignore[attr-defined]
    return fn


def _dtype(node: Apply, i: int = 0) -> torch.dtype:
    return DTYPES[node.outputs[i].type.dtype]  # type: ignore[attr-defined]


def _numpy_error(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``fn`` raising NumPy's ``LinAlgError`` where torch raises its own."""

    def wrapped(*args: Any) -> Any:
        try:
            return fn(*args)
        except torch.linalg.LinAlgError as exc:
            raise np.linalg.LinAlgError(str(exc)) from exc

    return wrapped


def cholesky_lower(a: Any) -> Any:
    """Return the lower Cholesky factor of ``a``, reading only its lower triangle."""
    return torch.linalg.cholesky(torch.tril(a) + torch.tril(a, -1).mT)


def _symmetric(a: Any, lower: bool) -> Any:
    """Return the symmetric matrix whose ``lower`` (else upper) triangle is ``a``'s."""
    if lower:
        return torch.tril(a) + torch.tril(a, -1).mT
    return torch.triu(a) + torch.triu(a, 1).mT


@torch_funcify.register(Tri)
def torch_funcify_Tri(op: Tri, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.tril`` / ``torch.triu`` from diagonal ``k``."""
    if op.lower:
        return batched(lambda x: torch.tril(x, op.k))
    return batched(lambda x: torch.triu(x, op.k))


@torch_funcify.register(MatMul)
def torch_funcify_MatMul(op: MatMul, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.matmul`` in the output dtype."""
    dtype = _dtype(node)
    return batched(lambda a, b: torch.matmul(a.to(dtype), b.to(dtype)))


@torch_funcify.register(Cholesky)
def torch_funcify_Cholesky(op: Cholesky, node: Apply) -> TorchImpl:  # noqa: N802
    """Factor the lower triangle (lower factor) or the upper one (upper factor)."""
    dtype = _dtype(node)
    if op.lower:
        return batched(_numpy_error(lambda a: cholesky_lower(a.to(dtype))))
    return batched(_numpy_error(lambda a: cholesky_lower(a.to(dtype).mT).mT))


@torch_funcify.register(Eigh)
def torch_funcify_Eigh(op: Eigh, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.linalg.eigh`` of the lower triangle, with kiln's eigenvector signs.

    Each eigenvector's first entry of largest magnitude is positive; a matrix with a
    non-finite entry gives NaN outputs (it is replaced by the identity for the call, so
    LAPACK never sees it), as on the VM.
    """
    dtype = _dtype(node)

    def eigh(a: Any) -> tuple[Any, Any]:
        a = torch.tril(a.to(dtype))
        finite = torch.isfinite(a).all(dim=-1).all(dim=-1)[..., None]
        eye = torch.eye(a.shape[-1], dtype=dtype, device=a.device)
        w, v = torch.linalg.eigh(torch.where(finite[..., None], a, eye), UPLO="L")
        rows = torch.argmax(torch.abs(v), dim=-2, keepdim=True)
        v = torch.where(torch.take_along_dim(v, rows, dim=-2) < 0, -v, v)
        nan = torch.tensor(float("nan"), dtype=dtype, device=a.device)
        return torch.where(finite, w, nan), torch.where(finite[..., None], v, nan)

    return batched(eigh)


def _as_matrix(b_ndim: int) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    if b_ndim == 1:
        return (lambda b: b.unsqueeze(-1)), (lambda x: x.squeeze(-1))
    return (lambda b: b), (lambda x: x)


@torch_funcify.register(Solve)
def torch_funcify_Solve(op: Solve, node: Apply) -> TorchImpl:  # noqa: N802
    """LU solve (``gen``), or of the symmetric matrix of one triangle (``sym``, ``pos``)."""
    dtype = _dtype(node)
    to_matrix, back = _as_matrix(op.b_ndim)

    def solve(a: Any, b: Any) -> Any:
        a, b = a.to(dtype), to_matrix(b.to(dtype))
        shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = torch.broadcast_to(a, (*shape, *a.shape[-2:]))
        b = torch.broadcast_to(b, (*shape, *b.shape[-2:]))
        if op.assume_a == "gen":
            return back(torch.linalg.solve(a, b))
        sym = _symmetric(a, op.lower)
        if op.assume_a == "pos":
            return back(torch.cholesky_solve(b, torch.linalg.cholesky(sym)))
        return back(torch.linalg.solve(sym, b))

    return batched(_numpy_error(solve))


@torch_funcify.register(SolveTriangular)
def torch_funcify_SolveTriangular(op: SolveTriangular, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.linalg.solve_triangular`` (``trans``: of the transposed triangle)."""
    dtype = _dtype(node)
    to_matrix, back = _as_matrix(op.b_ndim)
    upper = not op.lower

    def solve_triangular(a: Any, b: Any) -> Any:
        a, b = a.to(dtype), to_matrix(b.to(dtype))
        tri = torch.tril(a) if op.lower else torch.triu(a)
        if op.trans:
            tri = tri.mT
        shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        tri = torch.broadcast_to(tri, (*shape, *tri.shape[-2:]))
        b = torch.broadcast_to(b, (*shape, *b.shape[-2:]))
        x = torch.linalg.solve_triangular(
            tri, b, upper=upper != bool(op.trans), unitriangular=op.unit_diagonal
        )
        return back(x)

    return batched(solve_triangular)


@torch_funcify.register(Inv)
def torch_funcify_Inv(op: Inv, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.linalg.inv``."""
    dtype = _dtype(node)
    return batched(_numpy_error(lambda a: torch.linalg.inv(a.to(dtype))))


@torch_funcify.register(Det)
def torch_funcify_Det(op: Det, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.linalg.det``."""
    dtype = _dtype(node)
    return batched(lambda a: torch.linalg.det(a.to(dtype)))


@torch_funcify.register(SlogDet)
def torch_funcify_SlogDet(op: SlogDet, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.linalg.slogdet``: the sign and the log of the absolute determinant."""
    dtype = _dtype(node)

    def slogdet(a: Any) -> tuple[Any, Any]:
        sign, logabs = torch.linalg.slogdet(a.to(dtype))
        return sign, logabs

    return batched(slogdet)
