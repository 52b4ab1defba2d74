"""The Numba-only core-shape rewrite: an Op's output core shapes become graph inputs.

Numba allocates a batched op's outputs before it loops over the batch, so it needs
each output's core shape. This rewrite (tag ``numba``, specialize phase: it runs
late, after the shape graph is simplified, and the canonicalize rules of that phase
simplify the new shape expressions) wraps each random variable with core dimensions
in :class:`CoreShape`, whose first input is that core shape, computed from the Op's
``infer_shape``; likewise each Blockwise with an output core dimension that is neither
static nor the length of an input dimension (a vectorized function that makes a new
dimension), which otherwise runs its core function once before the loop to find it.
The main IR stays clean: other backends never see the wrapper. See the backends page
of the docs (``docs/backends.md``) for the alternatives considered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln_graph import Apply, Blockwise, Op, TensorType, Variable, ancestors
from kiln_graph.helpers import as_shape_vector, shape_tuple
from kiln_random import RandomVariable
from kiln_rewrite import register_local


class CoreShape(Op):
    """``op`` with the core shapes of its tensor outputs as extra first inputs (Numba only).

    ``CoreShape(op, n)(*core_shapes, *inputs)`` computes what ``op(*inputs)`` computes;
    ``core_shapes`` are ``n`` int64 vectors, the core dimensions of ``op``'s last ``n``
    outputs (a random variable's draw; each output of a Blockwise).
    """

    __props__ = ("op", "n_shapes")

    def __init__(self, op: Op, n_shapes: int = 1) -> None:
        self.op = op
        self.n_shapes = int(n_shapes)
        n = self.n_shapes
        self.destroy_map = {k: [j + n for j in v] for k, v in op.destroy_map.items()}
        self.view_map = {k: [j + n for j in v] for k, v in op.view_map.items()}

    def __str__(self) -> str:
        return f"CoreShape{{{self.op}}}"

    __repr__ = __str__

    def make_node(self, *inputs: Any) -> Apply:
        """Apply the wrapped op to ``inputs[n:]``, with ``inputs[:n]`` as core shapes."""
        n = self.n_shapes
        inner = self.op.make_node(*inputs[n:])
        vecs = [as_shape_vector(s, argname="core_shape") for s in inputs[:n]]
        return Apply.create(self, [*vecs, *inner.inputs], [o.type for o in inner.outputs])

    def inner_node(self, node: Apply) -> Apply:
        """Return the wrapped node (the op applied to the inputs after the core shapes)."""
        return self.op.make_node(*node.inputs[self.n_shapes :])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        """Run the wrapped op's ``perform`` (the core shapes are not needed in NumPy)."""
        self.op.perform(self.inner_node(node), inputs[self.n_shapes :], outputs)

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        """Return the wrapped op's output shapes."""
        return self.op.infer_shape(self.inner_node(node), input_shapes[self.n_shapes :])

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Return the wrapped op's variants, its inputs shifted past the core shapes."""
        n = self.n_shapes
        inner = self.op.inplace_variants(self.inner_node(node))
        return [(j + n, CoreShape(new, n)) for j, new in inner]


def _core_shapes(node: Apply, first: int, batch: int) -> list[list[Variable]] | None:
    """Return the core shape of each output from ``first`` on, from the Op's infer_shape.

    None when a shape refers to the node's own outputs (infer_shape could not tell).
    """
    in_shapes = [shape_tuple(v) if isinstance(v.type, TensorType) else None for v in node.inputs]
    out_shapes = node.op.infer_shape(node, in_shapes)[first:]
    if any(s is None for s in out_shapes):
        return None
    cores = [list(s[batch:]) for s in out_shapes]  # type: ignore[index]
    if set(node.outputs) & set(ancestors([d for core in cores for d in core])):
        return None
    return cores


@register_local(
    "specialize",
    "numba",
    identity="rv(rng, size, *params) -> CoreShape{rv}(core_shape, rng, size, *params) "
    "for draws with core dimensions (Numba only)",
    tracks=[RandomVariable],
)
def numba_core_shape_rv(node: Apply) -> list[Variable] | None:
    """Give a random variable with core dimensions its draw's core shape as an input."""
    op = node.op
    assert isinstance(op, RandomVariable)
    if op.core_ndim == 0:
        return None
    cores = _core_shapes(node, 1, op.batch_ndim(node))
    if cores is None:
        return None
    return list(CoreShape(op, 1).make_node(*cores, *node.inputs).outputs)


@register_local(
    "specialize",
    "numba",
    identity="blockwise(*xs) -> CoreShape{blockwise}(*core_shapes, *xs) when an output's "
    "core length is neither static nor an input's (Numba only)",
    tracks=[Blockwise],
)
def numba_core_shape_blockwise(node: Apply) -> list[Variable] | None:
    """Give a Blockwise its outputs' core shapes when the inputs' dimensions do not tell."""
    op = node.op
    assert isinstance(op, Blockwise)
    batch = op.batch_ndim(node)
    named = {d for dims in op.inputs_sig for d in dims}
    unknown = any(
        n is None and name not in named
        for o, dims in zip(node.outputs, op.outputs_sig, strict=True)
        for n, name in zip(o.type.shape[batch:], dims, strict=True)  # type: ignore[attr-defined]
    )
    if not unknown:
        return None
    cores = _core_shapes(node, 0, batch)
    if cores is None:
        return None
    return list(CoreShape(op, len(cores)).make_node(*cores, *node.inputs).outputs)


__all__ = ["CoreShape", "numba_core_shape_blockwise", "numba_core_shape_rv"]
