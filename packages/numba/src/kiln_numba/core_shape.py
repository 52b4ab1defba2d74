"""The Numba-only core-shape rewrite: an Op's output core shapes become graph inputs.

Numba allocates a batched op's outputs before it loops over the batch, so it needs
each output's core shape. This rewrite (tag ``numba``, specialize phase: it runs
late, after the shape graph is simplified, and the canonicalize rules of that phase
simplify the new shape expressions) wraps each random variable with core dimensions
in :class:`CoreShape`, whose first input is that core shape, computed from the Op's
``infer_shape``. The main IR stays clean: other backends never see the wrapper.
See the backends page of the docs for the alternatives considered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln_graph import Apply, Op, TensorType, Variable, ancestors
from kiln_graph._shape import as_shape_vector, shape_tuple
from kiln_random import RandomVariable
from kiln_rewrite import register_local
from kiln_rewrite.inplace import VARIANTS, inplace_variants


class CoreShape(Op):
    """``op`` with the core shape of its draw as an extra first input (Numba only).

    ``CoreShape(op)(core_shape, *inputs)`` computes what ``op(*inputs)`` computes;
    ``core_shape`` is an int64 vector, the core dimensions of output ``op``'s tensor
    output.
    """

    __props__ = ("op",)

    def __init__(self, op: RandomVariable) -> None:
        self.op = op
        self.destroy_map = {k: [j + 1 for j in v] for k, v in op.destroy_map.items()}
        self.view_map = {k: [j + 1 for j in v] for k, v in op.view_map.items()}

    def __str__(self) -> str:
        return f"CoreShape{{{self.op}}}"

    __repr__ = __str__

    def make_node(self, core_shape: Any, *inputs: Any) -> Apply:
        inner = self.op.make_node(*inputs)
        vec = as_shape_vector(core_shape, argname="core_shape")
        return Apply.create(self, [vec, *inner.inputs], [o.type for o in inner.outputs])

    def inner_node(self, node: Apply) -> Apply:
        """Return the wrapped node (the op applied to the inputs after the core shape)."""
        return self.op.make_node(*node.inputs[1:])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        self.op.perform(self.inner_node(node), inputs[1:], outputs)

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        return self.op.infer_shape(self.inner_node(node), input_shapes[1:])


def _core_shape_variants(node: Apply) -> list[tuple[int, Op]]:
    """In-place CoreShape: the wrapped op's variants, its inputs shifted by one."""
    op = node.op
    assert isinstance(op, CoreShape)
    return [(j + 1, CoreShape(new)) for j, new in inplace_variants(op.inner_node(node))]  # type: ignore[arg-type]


VARIANTS[CoreShape] = _core_shape_variants


@register_local(
    "specialize",
    "numba",
    identity="rv(rng, size, *params) -> CoreShape{rv}(core_shape, rng, size, *params) "
    "for draws with core dimensions (Numba only)",
    tracks=[RandomVariable],
)
def numba_core_shape(node: Apply) -> list[Variable] | None:
    """Give a random variable with core dimensions its core shape as an input."""
    op = node.op
    assert isinstance(op, RandomVariable)
    if op.core_ndim == 0:
        return None
    in_shapes = [shape_tuple(v) if isinstance(v.type, TensorType) else None for v in node.inputs]
    out_shape = op.infer_shape(node, in_shapes)[1]
    assert out_shape is not None
    core = list(out_shape[op.batch_ndim(node) :])
    if set(node.outputs) & set(ancestors(core)):
        return None
    return list(CoreShape(op).make_node(core, *node.inputs).outputs)


__all__ = ["CoreShape", "numba_core_shape"]
