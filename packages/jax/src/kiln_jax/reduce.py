"""Reductions on JAX: CAReduce, FusedReduce, Argmax and CumSum, with NumPy's dtypes.

Sums of integers accumulate in 64 bits; FusedReduce (a reduction of an elementwise
result) computes its elementwise part as Elemwise does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from kiln_graph import Apply, FusedReduce
from kiln_graph.ops import Argmax, CAReduce, CumSum
from kiln_jax._funcify import JaxImpl, jax_funcify
from kiln_jax.elemwise import apply_scalar

_REDUCERS: dict[str, Callable[..., Any]] = {
    "sum": jnp.sum,
    "prod": jnp.prod,
    "max": jnp.max,
    "min": jnp.min,
    "all": jnp.all,
    "any": jnp.any,
}


def _reducer(kind: str, axis: tuple[int, ...], dtype: str) -> Any:
    fn = _REDUCERS[kind]
    if kind in ("sum", "prod"):
        return lambda x: fn(x, axis=axis, dtype=dtype)
    return lambda x: fn(x, axis=axis).astype(dtype)


@jax_funcify.register(CAReduce)
def jax_funcify_CAReduce(op: CAReduce, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.sum`` / ``prod`` / ``max`` / ``min`` / ``all`` / ``any`` over the axes."""
    return _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]


@jax_funcify.register(FusedReduce)
def jax_funcify_FusedReduce(op: FusedReduce, node: Apply) -> JaxImpl:  # noqa: N802
    """Compute the elementwise part as Elemwise does, then reduce it (XLA fuses them)."""
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
    reduce = _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]
    jax_funcify(op.scalar_op)

    def fused_reduce(*args: Any) -> Any:
        shape = jnp.broadcast_shapes(*(jnp.shape(a) for a in args))
        pre = jnp.broadcast_to(apply_scalar(op.scalar_op, args, in_dtypes, pre_dtype), shape)
        return reduce(pre)

    return fused_reduce


@jax_funcify.register(Argmax)
def jax_funcify_Argmax(op: Argmax, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.argmax`` (of the flattened input when ``axis`` is None), as int64."""
    return lambda x: jnp.argmax(x, axis=op.axis).astype("int64")


@jax_funcify.register(CumSum)
def jax_funcify_CumSum(op: CumSum, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.cumsum``; from the end when ``reverse``."""
    dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]

    def cumsum(x: Any) -> Any:
        axis = op.axis
        if axis is None:
            x, axis = jnp.ravel(x), 0
        if op.reverse:
            return jnp.flip(jnp.cumsum(jnp.flip(x, axis), axis=axis, dtype=dtype), axis)
        return jnp.cumsum(x, axis=axis, dtype=dtype)

    return cumsum
