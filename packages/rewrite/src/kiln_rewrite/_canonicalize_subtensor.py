"""Canonicalize: sums of increments become one chain of increments (gradient assembly).

The gradient of a function of several slices of one vector, ``f(x[0], x[1:3], x[3])``,
is a sum of increments of zeros, ``inc(0, g0, 0) + inc(0, g1, 1:3) + inc(0, g3, 3)``:
one full-size array per slice, then a pass adding them. Written as a chain,
``inc(inc(inc(0 + 0 + 0, g0, 0), g1, 1:3), g3, 3)``, the bases add up (constant zeros
fold) and each increment can later write into the one buffer in place.
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_graph import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    Elemwise,
    IncSubtensor,
    Variable,
    toposort,
)
from kiln_graph import tensor as kt
from kiln_graph.scalar import Add
from kiln_rewrite._db import register_global

_INCREMENTS = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)


def _movable(v: Variable, out: Variable, uses: dict[Variable, int]) -> bool:
    """Whether ``v`` is an increment (not a set) of ``out``'s type used only once."""
    node = v.owner
    return (
        node is not None
        and isinstance(node.op, _INCREMENTS)
        and not node.op.set_instead_of_inc
        and v.type == out.type
        and uses.get(v, 0) == 1
    )


@register_global(
    "canonicalize",
    "fast_run",
    identity="a + inc(b, y, i) + inc(c, z, j) -> inc(inc(a + b + c, y, i), z, j) when each "
    "increment has the sum's type and no other client",
)
def serialize_increments(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Turn sums with increment terms into chains of increments (see the module)."""
    outs = list(outputs)
    nodes = toposort(outs)
    uses: dict[Variable, int] = {}
    for node in nodes:
        for v in node.inputs:
            uses[v] = uses.get(v, 0) + 1
    for v in outs:
        uses[v] = uses.get(v, 0) + 1
    memo: dict[Variable, Variable] = {}

    def new(v: Variable) -> Variable:
        return memo.get(v, v)

    changed = False
    for node in nodes:
        out = node.outputs[0]
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Add):
            moved = [v for v in node.inputs if _movable(v, out, uses)]
            if moved:
                rest = [new(v) for v in node.inputs if v not in moved]
                bases = [new(v.owner.inputs[0]) for v in moved]  # type: ignore[union-attr]
                terms: Sequence[Variable] = [*rest, *bases]
                tip: Variable = kt.add(*terms) if len(terms) > 1 else terms[0]
                for v in moved:
                    inc = v.owner
                    assert inc is not None
                    tip = inc.op.make_node(tip, *(new(u) for u in inc.inputs[1:])).outputs[0]
                if tip.type == out.type:
                    memo[out] = tip
                    changed = True
                    continue
        inputs_now = [new(v) for v in node.inputs]
        if any(a is not b for a, b in zip(inputs_now, node.inputs, strict=True)):
            memo.update(zip(node.outputs, node.op.make_node(*inputs_now).outputs, strict=True))
    return [new(v) for v in outs] if changed else outs
