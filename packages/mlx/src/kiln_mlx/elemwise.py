"""Elementwise Ops on MLX: Elemwise (scalar ops, Composite programs) and DimShuffle.

Dtypes follow NumPy's, as on the VM: an op whose output is a float or integer computes
in that dtype (its arguments are cast to it first), a comparison computes in the
arguments' common dtype, and every result is cast to the output dtype. A Composite
evaluates its steps one by one, each cast to the dtype its unfused Elemwise node had.
NumPy values (known when tracing) become MLX arrays of their dtype, never through
MLX's default float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from kiln_graph import Apply, Composite, DimShuffle, Elemwise, ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, upcast
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify

#: Scalar ops whose arguments keep their own dtypes (logical ops, tests, casts).
_UNCAST = (Cast, m.AND, m.OR, m.NOT, m.IsNan, m.IsInf)


def apply_scalar(
    op: ScalarOp, args: Sequence[Any], in_dtypes: Sequence[str], out_dtype: str
) -> Any:
    """Apply the scalar op ``op`` to arrays ``args`` (of ``in_dtypes``) with NumPy's dtypes.

    The arguments are cast to the dtype the op computes in and the result to
    ``out_dtype``.
    """
    fn = mlx_funcify(op)
    if isinstance(op, _UNCAST):
        cast = [as_mx(a) for a in args]
    elif isinstance(op, m.Switch):
        cast = [as_mx(args[0]), *(as_mx(a, out_dtype) for a in args[1:])]
    else:
        target = upcast(*in_dtypes) if out_dtype == "bool" and in_dtypes else out_dtype
        cast = [as_mx(a, target) for a in args]
    return as_mx(fn(*cast), out_dtype)


@mlx_funcify.register(Elemwise)
def mlx_funcify_Elemwise(op: Elemwise, node: Apply) -> MlxImpl:  # noqa: N802
    """Apply the scalar op (or Composite program) with broadcasting."""
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    out_dtypes = [v.type.dtype for v in node.outputs]  # type: ignore[attr-defined]
    scalar_op = op.scalar_op
    if isinstance(scalar_op, Composite):
        program = composite_program(scalar_op, in_dtypes)

        def composite(*args: Any) -> Any:
            results = program(*args)
            return results[0] if len(results) == 1 else tuple(results)

        return composite
    mlx_funcify(scalar_op)  # a missing scalar implementation is an error when linking

    def elemwise(*args: Any) -> Any:
        return apply_scalar(scalar_op, args, in_dtypes, out_dtypes[0])

    return elemwise


def composite_program(op: Composite, in_dtypes: Sequence[str]) -> Any:
    """Return ``f(*args) -> [outputs]`` evaluating ``op``'s steps on arrays of ``in_dtypes``."""
    dtypes = op.slot_dtypes(*in_dtypes)
    nin = op.nin
    steps = [(step, args, mlx_funcify(step)) for step, args in op.steps]

    def program(*inputs: Any) -> list[Any]:
        slots: list[Any] = list(inputs)
        for j, (step, args, _) in enumerate(steps):
            slot_args = [slots[a] for a in args]
            slots.append(apply_scalar(step, slot_args, [dtypes[a] for a in args], dtypes[nin + j]))
        shape = np.broadcast_shapes(*(tuple(np.shape(x)) for x in inputs))
        return [mx.broadcast_to(as_mx(slots[o]), shape) for o in op.outputs]

    return program


@mlx_funcify.register(Composite)
def mlx_funcify_Composite(op: Composite, node: Any = None) -> MlxImpl:  # noqa: N802
    """Run a Composite as a scalar op: its program on the arguments' dtypes."""

    def composite(*args: Any) -> Any:
        from kiln_mlx._dtypes import np_dtype

        program = composite_program(op, [np_dtype(a.dtype).name for a in args])
        results = program(*args)
        return results[0] if len(results) == 1 else tuple(results)

    return composite


@mlx_funcify.register(DimShuffle)
def mlx_funcify_DimShuffle(op: DimShuffle, node: Apply) -> MlxImpl:  # noqa: N802
    """Transpose, drop the length-1 dimensions, insert the new ones."""
    perm = op.transposition + op.drop
    kept = len(op.transposition)

    def dimshuffle(x: Any) -> Any:
        y = as_mx(x)
        if perm != tuple(range(len(perm))):
            y = mx.transpose(y, perm)
        dims = iter(y.shape[:kept])
        shape = tuple(1 if o == "x" else next(dims) for o in op.new_order)
        return mx.reshape(y, shape) if shape != tuple(y.shape) else y

    return dimshuffle
