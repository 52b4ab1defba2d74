"""Elementwise Ops on torch: Elemwise (scalar ops, Composite programs) and DimShuffle.

Dtypes follow NumPy's, as on the VM, not torch's promotion rules: an op whose output
is a float or integer computes in that dtype (its arguments are cast to it first:
``exp`` of int16 runs in float32, ``uint8 / uint8`` in float64), a comparison computes
in the arguments' common dtype, and every result is cast to the output dtype. A
Composite evaluates its steps one by one, each cast to the dtype its unfused Elemwise
node had. Broadcasting is torch's, which agrees with kiln's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from kiln_graph import Apply, Composite, DimShuffle, Elemwise, ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, upcast
from kiln_torch._convert import DTYPES
from kiln_torch._funcify import TorchImpl, torch_funcify

#: Scalar ops whose arguments keep their own dtypes (logical ops, tests, casts).
_UNCAST = (Cast, m.AND, m.OR, m.NOT, m.IsNan, m.IsInf)


def _device(args: Sequence[Any]) -> Any:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def as_tensor(x: Any, dtype: str, device: Any) -> torch.Tensor:
    """Return ``x`` as a tensor of ``dtype`` (``x`` a tensor, or a NumPy value) on ``device``."""
    tdtype = DTYPES[dtype]
    if isinstance(x, torch.Tensor):
        return x if x.dtype == tdtype else x.to(tdtype)
    return torch.as_tensor(np.asarray(x, dtype=dtype), device=device)


def scalar_applier(
    op: ScalarOp, in_dtypes: Sequence[str], out_dtype: str
) -> Callable[[Sequence[Any], Any], Any]:
    """Return ``apply(args, device)`` applying the scalar op ``op`` with NumPy's dtypes.

    ``args`` are tensors (or NumPy values) of ``in_dtypes``; they are cast to the dtype
    the op computes in and the result to ``out_dtype``. Everything that depends only on
    the op and the dtypes (the torch function, the dtype it computes in, a Composite's
    steps) is decided here, once: the returned function holds only tensor code, which
    ``torch.compile`` traces without a graph break.
    """
    if isinstance(op, _UNCAST):
        arg_dtypes = list(in_dtypes)
    elif isinstance(op, m.Switch):
        arg_dtypes = [in_dtypes[0], *([out_dtype] * (len(in_dtypes) - 1))]
    else:
        target = upcast(*in_dtypes) if out_dtype == "bool" and in_dtypes else out_dtype
        arg_dtypes = [target] * len(in_dtypes)
    if isinstance(op, Composite):
        program = composite_program(op, arg_dtypes)

        def fn(*args: Any) -> Any:
            results = program(*args)
            return results[0] if len(results) == 1 else tuple(results)

    else:
        fn = torch_funcify(op)

    def apply(args: Sequence[Any], device: Any) -> Any:
        cast = [as_tensor(a, d, device) for a, d in zip(args, arg_dtypes, strict=True)]
        return as_tensor(fn(*cast), out_dtype, device)

    return apply


def apply_scalar(
    op: ScalarOp, args: Sequence[Any], in_dtypes: Sequence[str], out_dtype: str
) -> Any:
    """Apply the scalar op ``op`` to tensors ``args`` (of ``in_dtypes``) with NumPy's dtypes.

    The arguments are cast to the dtype the op computes in and the result to
    ``out_dtype``. For code run many times, :func:`scalar_applier` decides all this once.
    """
    return scalar_applier(op, in_dtypes, out_dtype)(args, _device(args))


@torch_funcify.register(Elemwise)
def torch_funcify_Elemwise(op: Elemwise, node: Apply) -> TorchImpl:  # noqa: N802
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
    fn = torch_funcify(scalar_op)  # a missing scalar implementation is an error when linking
    out_dtype = out_dtypes[0]
    if not isinstance(scalar_op, (*_UNCAST, m.Switch)) and out_dtype != "bool":
        # The common case, kept short: cast the arguments to the output dtype, apply.
        tdtype = DTYPES[out_dtype]

        def elemwise_same(*args: Any) -> Any:
            cast = [a if a.dtype == tdtype else a.to(tdtype) for a in args]
            out = fn(*cast)
            return out if out.dtype == tdtype else out.to(tdtype)

        return elemwise_same

    if isinstance(scalar_op, m.Switch):
        tdtype = DTYPES[out_dtype]

        def switch(c: Any, a: Any, b: Any) -> Any:
            return torch.where(c if c.dtype == torch.bool else c.bool(), a.to(tdtype), b.to(tdtype))

        return switch

    apply = scalar_applier(scalar_op, in_dtypes, out_dtype)

    def elemwise(*args: Any) -> Any:
        return apply(args, _device(args))

    return elemwise


def composite_program(op: Composite, in_dtypes: Sequence[str]) -> Any:
    """Return ``f(*args) -> [outputs]`` evaluating ``op``'s steps on tensors of ``in_dtypes``.

    Each step is cast to its slot's dtype; each output is broadcast to the inputs'
    broadcast shape (an output may not use every input).
    """
    dtypes = op.slot_dtypes(*in_dtypes)
    nin = op.nin
    # Each step: (its argument slots, its applier), or (None, the constant's value).
    steps: list[tuple[Any, Any]] = []
    for j, (step, args) in enumerate(op.steps):
        if not args:  # a ScalarConstant
            steps.append((None, np.asarray(step.value, dtype=dtypes[nin + j])))  # type: ignore[attr-defined]
        else:
            applier = scalar_applier(step, [dtypes[a] for a in args], dtypes[nin + j])
            steps.append((args, applier))

    def program(*inputs: Any) -> list[Any]:
        slots: list[Any] = list(inputs)
        device = _device(inputs)
        for args, what in steps:
            if args is None:
                slots.append(torch.as_tensor(what, device=device))
            else:
                slots.append(what([slots[a] for a in args], device))
        shape = torch.broadcast_shapes(*(tuple(x.shape) for x in inputs))
        return [torch.broadcast_to(slots[o], shape) for o in op.outputs]

    return program


@torch_funcify.register(Composite)
def torch_funcify_Composite(op: Composite, node: Any = None) -> TorchImpl:  # noqa: N802
    """Run a Composite as a scalar op: its program on the arguments' dtypes."""

    def composite(*args: Any) -> Any:
        names = [str(a.dtype).removeprefix("torch.") for a in args]
        program = composite_program(op, names)
        results = program(*args)
        return results[0] if len(results) == 1 else tuple(results)

    return composite


@torch_funcify.register(DimShuffle)
def torch_funcify_DimShuffle(op: DimShuffle, node: Apply) -> TorchImpl:  # noqa: N802
    """Transpose, drop the length-1 dimensions, insert the new ones."""
    perm = tuple(op.transposition) + tuple(op.drop)
    kept = len(op.transposition)
    identity = perm == tuple(range(len(perm)))

    def dimshuffle(x: Any) -> Any:
        y = x if identity else x.permute(perm)
        dims = iter(y.shape[:kept])
        shape = tuple(1 if o == "x" else next(dims) for o in op.new_order)
        return y.reshape(shape) if shape != tuple(y.shape) else y

    return dimshuffle
