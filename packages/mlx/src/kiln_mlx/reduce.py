"""Reductions on MLX: CAReduce, FusedReduce, Argmax and CumSum, with NumPy's dtypes.

MLX's reductions take no accumulator dtype: the input is cast to the output dtype
first (sums of integers accumulate in 64 bits, as NumPy's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx

from kiln_graph import Apply, FusedReduce
from kiln_graph.ops import Argmax, CAReduce, CumSum
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify
from kiln_mlx.elemwise import apply_scalar

_REDUCERS: dict[str, Callable[..., Any]] = {
    "sum": mx.sum,
    "prod": mx.prod,
    "max": mx.max,
    "min": mx.min,
    "all": mx.all,
    "any": mx.any,
}


def _reducer(kind: str, axis: tuple[int, ...], dtype: str) -> Any:
    fn = _REDUCERS[kind]
    axes = list(axis)
    if kind in ("sum", "prod"):
        return lambda x: fn(as_mx(x, dtype), axis=axes)
    return lambda x: as_mx(fn(as_mx(x), axis=axes), dtype)


@mlx_funcify.register(CAReduce)
def mlx_funcify_CAReduce(op: CAReduce, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.sum`` / ``prod`` / ``max`` / ``min`` / ``all`` / ``any`` over the axes."""
    return _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]


@mlx_funcify.register(FusedReduce)
def mlx_funcify_FusedReduce(op: FusedReduce, node: Apply) -> MlxImpl:  # noqa: N802
    """Compute the elementwise part as Elemwise does, then reduce it."""
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
    reduce = _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]
    mlx_funcify(op.scalar_op)

    def fused_reduce(*args: Any) -> Any:
        shape = mx.broadcast_shapes(*(tuple(as_mx(a).shape) for a in args))
        pre = mx.broadcast_to(apply_scalar(op.scalar_op, args, in_dtypes, pre_dtype), shape)
        return reduce(pre)

    return fused_reduce


@mlx_funcify.register(Argmax)
def mlx_funcify_Argmax(op: Argmax, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.argmax`` (of the flattened input when ``axis`` is None), as int64."""
    return lambda x: mx.argmax(as_mx(x), axis=op.axis).astype(mx.int64)


@mlx_funcify.register(CumSum)
def mlx_funcify_CumSum(op: CumSum, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.cumsum``; from the end when ``reverse``."""
    dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]

    def cumsum(x: Any) -> Any:
        x = as_mx(x, dtype)
        axis = op.axis
        if axis is None:
            x, axis = mx.reshape(x, (-1,)), 0
        return mx.cumsum(x, axis=axis, reverse=op.reverse)

    return cumsum
