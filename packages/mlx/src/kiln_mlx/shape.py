"""Shape Ops on MLX: shapes, shape vectors, reshape, alloc, join/split, ranges.

Shapes are known while MLX traces, so ``Shape`` and ``ShapeI`` give NumPy values and
the arithmetic on them is done in NumPy at trace time (:mod:`kiln_mlx._graph`). The
inputs that decide a shape (a reshape's target, an alloc's lengths, split sizes, a
range's bounds) are declared static: they must be known when tracing.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from kiln_graph import Apply, ShapeMismatchError
from kiln_graph.ops import Alloc, ARange, Eye, Join, MakeVector, Reshape, Shape, ShapeI, Split
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify, shape_only, static_inputs


def ints(values: Any) -> tuple[int, ...]:
    """Return the NumPy (trace-time) integer ``values`` as a tuple of Python ints."""
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


@mlx_funcify.register(Shape)
def mlx_funcify_Shape(op: Shape, node: Apply) -> MlxImpl:  # noqa: N802
    """Return the shape as an int64 NumPy vector."""
    return shape_only(lambda x: np.array(tuple(x.shape), dtype="int64"))


@mlx_funcify.register(ShapeI)
def mlx_funcify_ShapeI(op: ShapeI, node: Apply) -> MlxImpl:  # noqa: N802
    """One length as an int64 NumPy scalar."""
    return shape_only(lambda x: np.array(tuple(x.shape)[op.i], dtype="int64"))


@mlx_funcify.register(MakeVector)
def mlx_funcify_MakeVector(op: MakeVector, node: Apply) -> MlxImpl:  # noqa: N802
    """Stack the scalars into a vector of the op's dtype."""
    return lambda *xs: mx.stack([as_mx(x, op.dtype) for x in xs])


@mlx_funcify.register(Reshape)
def mlx_funcify_Reshape(op: Reshape, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.reshape`` to the (trace-time) shape vector."""
    return static_inputs(lambda x, shape: mx.reshape(as_mx(x), ints(shape)), 1)


@mlx_funcify.register(Alloc)
def mlx_funcify_Alloc(op: Alloc, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.broadcast_to`` the (trace-time) lengths."""

    def alloc(x: Any, *shape: Any) -> Any:
        return mx.broadcast_to(as_mx(x), tuple(int(s) for s in shape))

    return static_inputs(alloc, *range(1, len(node.inputs)))


@mlx_funcify.register(Join)
def mlx_funcify_Join(op: Join, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.concatenate`` along the axis."""
    dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    return lambda *xs: mx.concatenate([as_mx(x, dtype) for x in xs], axis=op.axis)


@mlx_funcify.register(Split)
def mlx_funcify_Split(op: Split, node: Apply) -> MlxImpl:  # noqa: N802
    """``mx.split`` at the (trace-time) cumulative sizes."""

    def split(x: Any, *sizes: Any) -> Any:
        x = as_mx(x)
        lengths = [int(s) for s in sizes]
        if any(n < 0 for n in lengths) or sum(lengths) != x.shape[op.axis]:
            raise ShapeMismatchError(
                f"split: cannot cut a length-{x.shape[op.axis]} dimension {op.axis} "
                f"into pieces of lengths {lengths}"
            )
        return tuple(mx.split(x, np.cumsum(lengths[:-1]).tolist(), axis=op.axis))

    return static_inputs(split, *range(1, len(node.inputs)))


@mlx_funcify.register(ARange)
def mlx_funcify_ARange(op: ARange, node: Apply) -> MlxImpl:  # noqa: N802
    """NumPy's ``arange`` of the (trace-time) bounds, as an MLX array."""

    def arange(start: Any, stop: Any, step: Any) -> Any:
        s0, s1, s2 = (np.asarray(v).item() for v in (start, stop, step))
        return as_mx(np.arange(s0, s1, s2, dtype=op.dtype))

    return static_inputs(arange, 0, 1, 2)


@mlx_funcify.register(Eye)
def mlx_funcify_Eye(op: Eye, node: Apply) -> MlxImpl:  # noqa: N802
    """Ones where ``column - row == k``: ``n`` and ``m`` at trace time, ``k`` may be traced."""

    def eye(n: Any, m: Any, k: Any) -> Any:
        rows = mx.arange(int(n), dtype=mx.int64)[:, None]
        cols = mx.arange(int(m), dtype=mx.int64)[None, :]
        return as_mx((cols - rows) == as_mx(k, "int64"), op.dtype)

    return static_inputs(eye, 0, 1)
