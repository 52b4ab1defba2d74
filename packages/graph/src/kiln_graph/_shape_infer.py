"""Symbolic shape inference through each Op's ``infer_shape``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kiln_graph import _alloc
from kiln_graph._node import Variable, as_variable_list
from kiln_graph._traversal import toposort
from kiln_graph._types import TensorType


def infer_shape(outputs: Variable | Iterable[Variable], stop_at: Iterable[Variable] = ()) -> Any:
    """Return the shape of each output as a tuple of int64 scalar variables.

    The result is built from the inputs' shapes through each Op's ``infer_shape``, so
    it does not depend on computing the outputs themselves. One variable in, one
    tuple out; a list in, a list out.
    """
    single = isinstance(outputs, Variable)
    outs = as_variable_list(outputs)
    memo: dict[Variable, tuple[Variable, ...] | None] = {}

    def shape_of(v: Variable) -> tuple[Variable, ...] | None:
        if v not in memo:
            memo[v] = _alloc.shape_tuple(v) if isinstance(v.type, TensorType) else None
        return memo[v]

    if all(_static(o) for o in outs):  # constants: no need to walk the graph above
        result = [shape_of(o) for o in outs]
        return result[0] if single else result
    for node in toposort(outs, stop_at=stop_at):
        in_shapes = [shape_of(v) for v in node.inputs]
        try:
            out_shapes = node.op.infer_shape(node, in_shapes)
        except NotImplementedError:
            out_shapes = [
                _alloc.shape_tuple(o) if isinstance(o.type, TensorType) else None
                for o in node.outputs
            ]
        for o, s in zip(node.outputs, out_shapes, strict=True):
            memo[o] = tuple(s) if s is not None else None
    result = [shape_of(o) for o in outs]
    return result[0] if single else result


def _static(v: Variable) -> bool:
    """Whether ``v`` is a tensor whose every dimension's length its type knows."""
    return isinstance(v.type, TensorType) and None not in v.type.shape
