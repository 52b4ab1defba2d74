"""The in-place phase: ops overwrite intermediate buffers that nothing reads afterwards.

It works on the linearized program: the nodes in ``schedule(outputs, stop_at=inputs)``
order (:func:`kiln_graph.schedule`), which is the order the VM
(:class:`kiln_graph.Program`) and every linker run them in. A liveness analysis over
that order, with alias sets, decides where an op may write its output into one of its
input's buffers:

- every value lives in one or more *buffers*. A root (graph input, shared variable,
  constant) has its own; an op output has a new one, unless the op declares it a view
  of some inputs (``Op.view_map``: it shares their buffers) or writes it into some
  inputs (``Op.destroy_map``: it takes their buffers);
- an op may overwrite input ``j`` (become its in-place variant) only if (a) no later
  step reads any value held in ``j``'s buffers, (b) those buffers belong to no root and
  hold no graph output, (c) no other input of the same op shares them, and (d) the
  input has the output's dtype and shape (checked by the variant's builder).

The result is a new graph whose in-place nodes are new Ops (different props). Replacing
an Op keeps each node's inputs and output types, so the new graph's ``schedule`` is
the old one node by node, and every in-place op still runs after every other reader of
the buffer it overwrites; :func:`apply_inplace` checks this, and :func:`check_inplace` checks any
graph. A linker must therefore run nodes in ``schedule`` order (or respect the same
dependencies) when the graph has in-place nodes; a backend without in-place semantics
(JAX) can exclude the ``inplace`` tag.
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_graph import Apply, KilnError, Op, Variable, schedule
from kiln_rewrite._db import register_global

#: A buffer is named by the variable that first held it (a root or a fresh op output).
Buffers = frozenset[Variable]


class InplaceError(KilnError):
    """A graph's in-place op overwrites a buffer whose value is still needed."""


def inplace_variants(node: Apply) -> list[tuple[int, Op]]:
    """Return the in-place variants of ``node``: its Op's ``inplace_variants(node)``.

    Each Op declares its own (:meth:`kiln_graph.Op.inplace_variants`): Elemwise, the
    (Advanced)IncSubtensor ops, RandomVariable, and backend-only wrappers.
    """
    return node.op.inplace_variants(node)


# --- liveness over the linear program ------------------------------------------------------


class _Liveness:
    """Buffers of the values of a linear program, filled in step by step.

    ``last_use[b]`` is the last step reading a value held (so far) in buffer ``b``;
    ``pinned`` holds the buffers never to overwrite (roots', and those holding a graph
    output).
    """

    def __init__(self, order: Sequence[Apply], outputs: Sequence[Variable]) -> None:
        self.last_read: dict[Variable, int] = {}
        for step, node in enumerate(order):
            for v in node.inputs:
                self.last_read[v] = step
        self.outputs = set(outputs)
        self.buffers: dict[Variable, Buffers] = {}
        self.last_use: dict[Variable, int] = {}
        self.pinned: set[Variable] = set()

    def of(self, v: Variable) -> Buffers:
        """Return the buffers holding ``v`` (a variable the program does not compute is a root)."""
        found = self.buffers.get(v)
        if found is None:
            found = frozenset((v,))
            self.pinned.add(v)
            self.hold(v, found)
        return found

    def hold(self, v: Variable, buffers: Buffers) -> None:
        """Record that ``v`` lives in ``buffers``."""
        self.buffers[v] = buffers
        last = self.last_read.get(v, -1)
        for b in buffers:
            if self.last_use.get(b, -1) < last:
                self.last_use[b] = last
            if v in self.outputs:
                self.pinned.add(b)

    def why_not(self, step: int, node: Apply, j: int, ins: Sequence[Buffers]) -> str | None:
        """Why ``node`` (at ``step``) may not overwrite its input ``j``; ``None``: it may."""
        target = ins[j]
        for b in target:
            if b in self.pinned:
                what = "a graph output" if b.owner is not None else "a root"
                return f"its buffer holds {what} ({b!r})"
            if self.last_use.get(b, -1) > step:
                return f"a value in its buffer ({b!r}) is read at step {self.last_use[b]}"
        for i, buffers in enumerate(ins):
            if i != j and not target.isdisjoint(buffers):
                return f"input {i} shares its buffer"
        return None

    def step(self, node: Apply, op: Op, ins: Sequence[Buffers]) -> None:
        """Record the buffers of ``node``'s outputs when it runs as ``op``."""
        for k, o in enumerate(node.outputs):
            shared = [ins[i] for i in (*op.destroy_map.get(k, ()), *op.view_map.get(k, ()))]
            self.hold(o, frozenset().union(*shared) if shared else frozenset((o,)))


def plan_inplace(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> dict[Apply, Op]:
    """Return the nodes of the program that can run in place, with their in-place Op.

    Greedy in program order: a node takes the first of its variants (:func:`inplace_variants`)
    whose overwritten input is dead after it, given the choices made before it.
    """
    return _plan(schedule(outputs, stop_at=inputs), inputs, outputs)


def _plan(
    order: Sequence[Apply], inputs: Sequence[Variable], outputs: Sequence[Variable]
) -> dict[Apply, Op]:
    live = _Liveness(order, outputs)
    for v in inputs:
        live.of(v)
    chosen: dict[Apply, Op] = {}
    for step, node in enumerate(order):
        ins = [live.of(v) for v in node.inputs]
        op = node.op
        if not op.destroy_map:
            for j, new_op in inplace_variants(node):
                if live.why_not(step, node, j, ins) is None:
                    chosen[node] = op = new_op
                    break
        live.step(node, op, ins)
    return chosen


def check_inplace(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
    """Raise :class:`InplaceError` if an op overwrites a buffer whose value is still needed.

    Runs the liveness analysis of the program ``schedule(outputs, stop_at=inputs)``
    with each node's own ``destroy_map``.
    """
    order = schedule(outputs, stop_at=inputs)
    live = _Liveness(order, outputs)
    for v in inputs:
        live.of(v)
    for step, node in enumerate(order):
        ins = [live.of(v) for v in node.inputs]
        for k, destroyed in node.op.destroy_map.items():
            for j in destroyed:
                reason = live.why_not(step, node, j, ins)
                if reason is not None:
                    raise InplaceError(
                        f"step {step}: {node.op} overwrites input {j} ({node.inputs[j]!r}) "
                        f"with output {k}, but {reason}"
                    )
        live.step(node, node.op, ins)


def apply_inplace(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Variable]:
    """Return ``outputs`` with the nodes :func:`plan_inplace` picks made in-place.

    The new graph runs in the same order as the old one (node by node); if interning
    merged nodes so that the order would differ, the graph is returned unchanged.
    """
    outs = list(outputs)
    order = schedule(outs, stop_at=inputs)
    chosen = _plan(order, inputs, outs)
    if not chosen:
        return outs
    memo: dict[Variable, Variable] = {}
    expected: list[Apply] = []
    for node in order:
        new_inputs = [memo.get(v, v) for v in node.inputs]
        op = chosen.get(node, node.op)
        if op is node.op and all(a is b for a, b in zip(new_inputs, node.inputs, strict=True)):
            expected.append(node)
            continue
        # Same inputs' types, so the same output types: no need to re-run make_node.
        new_node = Apply.create(op, new_inputs, [o.type for o in node.outputs])
        memo.update(zip(node.outputs, new_node.outputs, strict=True))
        expected.append(new_node)
    new_outs = [memo.get(v, v) for v in outs]
    if schedule(new_outs, stop_at=inputs) != expected:
        return outs
    return new_outs


@register_global(
    "inplace",
    "fast_run",
    identity="op(..., x, ...) -> op{inplace}(..., x, ...) when x's buffer is dead after op "
    "and holds no input, shared value, constant or output",
)
def inplace_buffers(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Variable]:
    """Let ops overwrite intermediate buffers nothing reads later (see module docs)."""
    return apply_inplace(inputs, outputs)


__all__ = [
    "InplaceError",
    "apply_inplace",
    "check_inplace",
    "inplace_buffers",
    "inplace_variants",
    "plan_inplace",
]
