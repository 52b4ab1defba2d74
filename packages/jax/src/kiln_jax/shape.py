"""Shape Ops on JAX: shapes, shape vectors, reshape, alloc, join/split, ranges.

Shapes are static while JAX traces, so ``Shape`` and ``ShapeI`` give NumPy values and
the arithmetic on them is done in NumPy at trace time (:mod:`kiln_jax._graph`). The
inputs that decide a shape (a reshape's target, an alloc's lengths, split sizes, a
range's bounds) are declared static: they must be known when tracing.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from kiln_graph import Apply, ShapeMismatchError
from kiln_graph.ops import Alloc, ARange, Eye, Join, MakeVector, Reshape, Shape, ShapeI, Split
from kiln_jax._funcify import JaxImpl, jax_funcify, shape_only, static_inputs


def ints(values: Any) -> tuple[int, ...]:
    """Return the NumPy (trace-time) integer ``values`` as a tuple of Python ints."""
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


@jax_funcify.register(Shape)
def jax_funcify_Shape(op: Shape, node: Apply) -> JaxImpl:  # noqa: N802
    """Return the (static) shape as an int64 NumPy vector."""
    return shape_only(lambda x: np.array(np.shape(x), dtype="int64"))


@jax_funcify.register(ShapeI)
def jax_funcify_ShapeI(op: ShapeI, node: Apply) -> JaxImpl:  # noqa: N802
    """One (static) length as an int64 NumPy scalar."""
    return shape_only(lambda x: np.array(np.shape(x)[op.i], dtype="int64"))


@jax_funcify.register(MakeVector)
def jax_funcify_MakeVector(op: MakeVector, node: Apply) -> JaxImpl:  # noqa: N802
    """Stack the scalars into a vector of the op's dtype."""
    return lambda *xs: jnp.stack([jnp.asarray(x, dtype=op.dtype) for x in xs])


@jax_funcify.register(Reshape)
def jax_funcify_Reshape(op: Reshape, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.reshape`` to the (trace-time) shape vector."""
    return static_inputs(lambda x, shape: jnp.reshape(x, ints(shape)), 1)


@jax_funcify.register(Alloc)
def jax_funcify_Alloc(op: Alloc, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.broadcast_to`` the (trace-time) lengths."""

    def alloc(x: Any, *shape: Any) -> Any:
        return jnp.broadcast_to(x, tuple(int(s) for s in shape))

    return static_inputs(alloc, *range(1, len(node.inputs)))


@jax_funcify.register(Join)
def jax_funcify_Join(op: Join, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.concatenate`` along the axis."""
    return lambda *xs: jnp.concatenate(xs, axis=op.axis)


@jax_funcify.register(Split)
def jax_funcify_Split(op: Split, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.split`` at the (trace-time) cumulative sizes."""

    def split(x: Any, *sizes: Any) -> Any:
        lengths = [int(s) for s in sizes]
        if any(n < 0 for n in lengths) or sum(lengths) != x.shape[op.axis]:
            raise ShapeMismatchError(
                f"split: cannot cut a length-{x.shape[op.axis]} dimension {op.axis} "
                f"into pieces of lengths {lengths}"
            )
        return tuple(jnp.split(x, np.cumsum(lengths[:-1]).tolist(), axis=op.axis))

    return static_inputs(split, *range(1, len(node.inputs)))


@jax_funcify.register(ARange)
def jax_funcify_ARange(op: ARange, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.arange`` of the (trace-time) bounds."""

    def arange(start: Any, stop: Any, step: Any) -> Any:
        s0, s1, s2 = (np.asarray(v).item() for v in (start, stop, step))
        return jnp.asarray(np.arange(s0, s1, s2, dtype=op.dtype))

    return static_inputs(arange, 0, 1, 2)


@jax_funcify.register(Eye)
def jax_funcify_Eye(op: Eye, node: Apply) -> JaxImpl:  # noqa: N802
    """Ones where ``column - row == k``: ``n`` and ``m`` at trace time, ``k`` may be traced."""

    def eye(n: Any, m: Any, k: Any) -> Any:
        rows = jnp.arange(int(n))[:, None]
        cols = jnp.arange(int(m))[None, :]
        return (cols - rows == jnp.asarray(k)).astype(op.dtype)

    return static_inputs(eye, 0, 1)
