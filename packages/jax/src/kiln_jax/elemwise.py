"""Elementwise Ops on JAX: Elemwise (scalar ops, Composite programs) and DimShuffle.

Dtypes follow NumPy's, as on the VM: an op whose output is a float or integer computes
in that dtype (its arguments are cast to it first: ``exp`` of int16 runs in float32,
``uint8 / uint8`` in float64), a comparison computes in the arguments' common dtype,
and every result is cast to the output dtype. A Composite evaluates its steps one by
one, each cast to the dtype its unfused Elemwise node had. Broadcasting is
``jax.numpy``'s, which agrees with kiln's (kiln only broadcasts static length-1 dims).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from kiln_graph import Apply, Composite, DimShuffle, Elemwise, ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, upcast
from kiln_jax._funcify import JaxImpl, jax_funcify

#: Scalar ops whose arguments keep their own dtypes (logical ops, tests, casts).
_UNCAST = (Cast, m.AND, m.OR, m.NOT, m.IsNan, m.IsInf)


def _as(x: Any, dtype: str) -> Any:
    """Return ``x`` as ``dtype`` (a JAX array, or a NumPy one when ``x`` is NumPy)."""
    if getattr(x, "dtype", None) == np.dtype(dtype):
        return x
    return jnp.asarray(x).astype(dtype)


def apply_scalar(
    op: ScalarOp, args: Sequence[Any], in_dtypes: Sequence[str], out_dtype: str
) -> Any:
    """Apply the scalar op ``op`` to arrays ``args`` (of ``in_dtypes``) with NumPy's dtypes.

    The arguments are cast to the dtype the op computes in and the result to
    ``out_dtype``.
    """
    fn = jax_funcify(op)
    if isinstance(op, _UNCAST):
        cast = list(args)
    elif isinstance(op, m.Switch):
        cast = [args[0], *(_as(a, out_dtype) for a in args[1:])]
    else:
        target = upcast(*in_dtypes) if out_dtype == "bool" and in_dtypes else out_dtype
        cast = [_as(a, target) for a in args]
    return _as(fn(*cast), out_dtype)


@jax_funcify.register(Elemwise)
def jax_funcify_Elemwise(op: Elemwise, node: Apply) -> JaxImpl:  # noqa: N802
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
    jax_funcify(scalar_op)  # a missing scalar implementation is an error when linking

    def elemwise(*args: Any) -> Any:
        return apply_scalar(scalar_op, args, in_dtypes, out_dtypes[0])

    return elemwise


def composite_program(op: Composite, in_dtypes: Sequence[str]) -> Any:
    """Return ``f(*args) -> [outputs]`` evaluating ``op``'s steps on arrays of ``in_dtypes``.

    Each step is cast to its slot's dtype; each output is broadcast to the inputs'
    broadcast shape (an output may not use every input).
    """
    dtypes = op.slot_dtypes(*in_dtypes)
    nin = op.nin
    steps = [(step, args, jax_funcify(step)) for step, args in op.steps]

    def program(*inputs: Any) -> list[Any]:
        slots: list[Any] = list(inputs)
        for j, (step, args, _) in enumerate(steps):
            slot_args = [slots[a] for a in args]
            slots.append(apply_scalar(step, slot_args, [dtypes[a] for a in args], dtypes[nin + j]))
        shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
        return [jnp.broadcast_to(slots[o], shape) for o in op.outputs]

    return program


@jax_funcify.register(Composite)
def jax_funcify_Composite(op: Composite, node: Any = None) -> JaxImpl:  # noqa: N802
    """Run a Composite as a scalar op: its program on the arguments' dtypes."""

    def composite(*args: Any) -> Any:
        program = composite_program(op, [np.dtype(a.dtype).name for a in args])
        results = program(*args)
        return results[0] if len(results) == 1 else tuple(results)

    return composite


@jax_funcify.register(DimShuffle)
def jax_funcify_DimShuffle(op: DimShuffle, node: Apply) -> JaxImpl:  # noqa: N802
    """Transpose, drop the length-1 dimensions, insert the new ones."""
    perm = op.transposition + op.drop
    kept = len(op.transposition)

    def dimshuffle(x: Any) -> Any:
        y = jnp.transpose(x, perm) if perm != tuple(range(len(perm))) else jnp.asarray(x)
        dims = iter(y.shape[:kept])
        shape = tuple(1 if o == "x" else next(dims) for o in op.new_order)
        return jnp.reshape(y, shape) if shape != y.shape else y

    return dimshuffle
