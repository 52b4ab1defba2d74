"""Reductions on torch: CAReduce, FusedReduce, Argmax and CumSum, with NumPy's dtypes.

Sums of integers accumulate in 64 bits (the output dtype); FusedReduce (a reduction of
an elementwise result) computes its elementwise part as Elemwise does. A reduction over
no axis is the identity (torch reads ``dim=()`` as "every axis").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kiln_graph import Apply, FusedReduce
from kiln_graph.ops import Argmax, CAReduce, CumSum
from kiln_torch._convert import DTYPES
from kiln_torch._funcify import TorchImpl, torch_funcify
from kiln_torch.elemwise import _device, scalar_applier


def _prod(x: Any, axis: tuple[int, ...], dtype: Any) -> Any:
    x = x.to(dtype)
    for a in sorted(axis, reverse=True):
        x = torch.prod(x, dim=a)
    return x


def _reducer(kind: str, axis: tuple[int, ...], dtype: str) -> Callable[[Any], Any]:
    tdtype = DTYPES[dtype]
    dims = list(axis)
    if not dims:
        return lambda x: x.to(tdtype)
    if kind == "sum":
        return lambda x: torch.sum(x, dim=dims, dtype=tdtype)
    if kind == "prod":
        return lambda x: _prod(x, axis, tdtype)
    fn = {"max": torch.amax, "min": torch.amin, "all": torch.all, "any": torch.any}[kind]
    if kind in ("all", "any"):
        return lambda x: fn(x.bool(), dim=dims).to(tdtype)
    return lambda x: fn(x, dim=dims).to(tdtype)


@torch_funcify.register(CAReduce)
def torch_funcify_CAReduce(op: CAReduce, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.sum`` / ``prod`` / ``amax`` / ``amin`` / ``all`` / ``any`` over the axes."""
    return _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]


@torch_funcify.register(FusedReduce)
def torch_funcify_FusedReduce(op: FusedReduce, node: Apply) -> TorchImpl:  # noqa: N802
    """Compute the elementwise part as Elemwise does, then reduce it."""
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
    reduce = _reducer(op.kind, op.axis, node.outputs[0].type.dtype)  # type: ignore[attr-defined]
    apply = scalar_applier(op.scalar_op, in_dtypes, pre_dtype)

    def fused_reduce(*args: Any) -> Any:
        shape = torch.broadcast_shapes(*(tuple(a.shape) for a in args))
        pre = apply(args, _device(args))
        return reduce(torch.broadcast_to(pre, shape))

    return fused_reduce


@torch_funcify.register(Argmax)
def torch_funcify_Argmax(op: Argmax, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.argmax`` (of the flattened input when ``axis`` is None), as int64."""
    if op.axis is None:
        return lambda x: torch.argmax(x.reshape(-1)).to(torch.int64)
    return lambda x: torch.argmax(x, dim=op.axis).to(torch.int64)


@torch_funcify.register(CumSum)
def torch_funcify_CumSum(op: CumSum, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.cumsum``; from the end when ``reverse``."""
    tdtype = DTYPES[node.outputs[0].type.dtype]  # type: ignore[attr-defined]

    def cumsum(x: Any) -> Any:
        axis = op.axis
        if axis is None:
            x, axis = x.reshape(-1), 0
        if op.reverse:
            return torch.flip(torch.cumsum(torch.flip(x, [axis]), dim=axis, dtype=tdtype), [axis])
        return torch.cumsum(x, dim=axis, dtype=tdtype)

    return cumsum
