"""Canonicalize: linear algebra vectorized over a batch becomes one call of the Op itself.

A model's log-density vectorizes its core linear algebra over observations: MvNormal's
``solve_triangular(chol, y_i - mu)`` for each of N rows is a ``Blockwise`` of a
``SolveTriangular`` of a vector, and its gradient holds a ``Blockwise`` of a ``Tril``
of N outer products. A backend runs a Blockwise as a loop of N calls (each with its
allocations), which for a small matrix costs far more than the arithmetic: an LKJ
model of 200 three-dimensional rows spent 80 us per gradient on Numba, 60% of it in
reference counting. These rules give each the Op itself:

- ``Blockwise(Tri)(x)`` is ``Tri(x)``: the triangle is taken over the last two axes of
  an array of any number of leading ones.
- ``Blockwise(Solve | SolveTriangular, b a vector)(a, b)`` with one ``a`` for every
  batch element (no batch dimension, or only broadcastable ones) and one batch
  dimension of ``b`` is one solve with the batch as right-hand sides:
  ``solve(a, b.T).T`` (as PyTensor's ``batched_vector_b_solve_to_matrix_b_solve``).
"""

from __future__ import annotations

from kiln_graph import Apply, Blockwise, DimShuffle, TensorType, Variable
from kiln_graph.ops import Solve, SolveTriangular, Tri
from kiln_rewrite._db import register_local


@register_local(
    "canonicalize",
    "fast_run",
    identity="Blockwise(Tri)(x) -> Tri(x) (the triangle of the last two axes)",
    tracks=[Blockwise],
)
def local_blockwise_of_tri(node: Apply) -> list[Variable] | None:
    """Replace a Blockwise of a triangle by the triangle of the whole array."""
    op = node.op
    if not isinstance(op, Blockwise) or not isinstance(op.core_op, Tri):
        return None
    (x,) = node.inputs
    out = op.core_op(x)
    if out.type != node.outputs[0].type:
        return None
    return [out]


@register_local(
    "canonicalize",
    "fast_run",
    identity="Blockwise(solve, b a vector)(a, b) -> solve(a, b.T).T for an unbatched a",
    tracks=[Blockwise],
)
def local_blockwise_of_vector_solve(node: Apply) -> list[Variable] | None:
    """Replace solves of a batch of vectors against one matrix by one matrix solve."""
    op = node.op
    if not isinstance(op, Blockwise) or not isinstance(op.core_op, Solve | SolveTriangular):
        return None
    core = op.core_op
    if core.b_ndim != 1:
        return None
    a, b = node.inputs
    a_type, b_type, out_type = a.type, b.type, node.outputs[0].type
    if not (
        isinstance(a_type, TensorType)
        and isinstance(b_type, TensorType)
        and isinstance(out_type, TensorType)
    ):
        return None
    if b_type.ndim != 2 or out_type.ndim != 2:
        return None  # one batch dimension of b, and a adds none
    if any(d != 1 for d in a_type.shape[:-2]):
        return None  # a matrix per batch element
    if a_type.ndim > 2:
        a = DimShuffle(a_type.ndim, [a_type.ndim - 2, a_type.ndim - 1])(a)
    matrix = type(core)(**{**{p: getattr(core, p) for p in core.__props__}, "b_ndim": 2})
    solved = matrix(a, DimShuffle(2, [1, 0])(b))
    result = DimShuffle(2, [1, 0])(solved)
    result_type = result.type
    if not isinstance(result_type, TensorType) or result_type.dtype != out_type.dtype:
        return None
    return [result]
