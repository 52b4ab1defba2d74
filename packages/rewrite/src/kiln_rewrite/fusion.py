"""The fusion phase: elementwise subgraphs into one Elemwise(Composite), reductions of them.

Two global rewrites, in this order:

- ``elemwise_fusion``: each maximal group of Elemwise nodes whose intermediate results
  are used only inside the group becomes one ``Elemwise(Composite)`` node, so
  ``exp(x) * y + z`` traverses memory once on a compiled backend.
- ``reduce_fusion``: ``CAReduce(Elemwise(f)(xs))`` becomes ``FusedReduce(f)(xs)`` when
  nothing else uses the elementwise result, so ``sum(exp(x))`` is one traversal.

How a group grows: starting from an Elemwise node (the *root*, in reverse
topological order), a producer of one of the group's inputs joins when

- it is a single-output Elemwise, or a DimShuffle that keeps the order of dimensions
  (it only inserts broadcast dimensions or drops length-1 ones: elementwise ops
  commute with it, so its input, broadcast the same way, becomes the Composite's
  input);
- every client of its output is in the group and the output is not a graph output
  (clients are counted over the whole graph), so nothing is computed twice;
- the fused op keeps at most ``max_inputs`` inputs;
- its result has as many elements as the root's (the same non-broadcast dimensions):
  fusing ``exp(v)`` into ``exp(v)[None, :] * m`` would evaluate ``exp`` once per row
  of ``m`` in a one-loop backend instead of once per element of ``v``. Pass
  ``recompute_broadcast=True`` to :func:`fuse_elemwise` to fuse across such
  broadcasting anyway. (A broadcast constant of one element is always inlined.)

Producers are decided in reverse topological order, so when one is considered every
client it has in the group is already there; the group stays convex (only the root's
output leaves it) and each node is visited once: the phase is linear in the graph.
Dtypes are preserved: each Composite step keeps the dtype of the Elemwise node it
replaces.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import numpy as np

from kiln_graph import (
    Apply,
    Constant,
    DimShuffle,
    Elemwise,
    FusedReduce,
    KilnError,
    TensorType,
    Variable,
    toposort,
)
from kiln_graph import tensor as kt
from kiln_graph.ops import CAReduce, ProgramBuilder
from kiln_rewrite._db import register_global

#: Default bound on the number of inputs of one fused op.
MAX_INPUTS = 32

#: A DimShuffle pattern mapping a variable's dimensions to the root's.
Context = tuple[int | str, ...]


class FusionError(KilnError):
    """The fusion rewrite produced a node whose type differs from the one it replaces."""


def _fusable_elemwise(node: Apply) -> bool:
    return (
        isinstance(node.op, Elemwise)
        and len(node.outputs) == 1
        and getattr(node.op.scalar_op, "nout", 1) == 1
    )


def _order_preserving(node: Apply) -> bool:
    """Whether ``node`` is a DimShuffle that only inserts / drops broadcast dimensions."""
    if not isinstance(node.op, DimShuffle):
        return False
    kept = node.op.transposition
    return all(a < b for a, b in itertools.pairwise(kept))


def _n_full_dims(v: Variable) -> int:
    """Count the dimensions of ``v`` that are not statically of length 1."""
    return sum(not b for b in v.type.broadcastable)  # type: ignore[attr-defined]


def _compose(order: Sequence[int | str], ctx: Context) -> Context:
    """Return ``dimshuffle(dimshuffle(u, order), ctx)``'s pattern as one of ``u``."""
    return tuple("x" if o == "x" else order[int(o)] for o in ctx)


def _identity(v: Variable) -> Context:
    return tuple(range(v.type.ndim))  # type: ignore[attr-defined]


def _is_inlined_constant(v: Variable) -> bool:
    return isinstance(v, Constant) and v.data.size == 1


def _clients(outputs: Sequence[Variable], nodes: list[Apply]) -> dict[Variable, set[Apply | None]]:
    """Map each variable to the nodes using it; ``None`` stands for "a graph output"."""
    clients: dict[Variable, set[Apply | None]] = {}
    for node in nodes:
        for v in node.inputs:
            clients.setdefault(v, set()).add(node)
    for v in outputs:
        clients.setdefault(v, set()).add(None)
    return clients


class _Group:
    """One fused group: its root, its member nodes and its leaves (with contexts)."""

    def __init__(self, root: Apply) -> None:
        self.root = root
        self.members: set[Apply] = {root}
        self.contexts: dict[Variable, set[Context]] = {}
        self.leaves: set[tuple[Variable, Context]] = set()
        self.n_elemwise = 1

    def add_inputs(self, node: Apply, ctxs: set[Context]) -> list[Variable]:
        """Record ``node``'s inputs (seen through ``ctxs``) as leaves; return new ones."""
        new: list[Variable] = []
        order = node.op.new_order if isinstance(node.op, DimShuffle) else None
        for u in node.inputs:
            u_ctxs = ctxs if order is None else {_compose(order, c) for c in ctxs}
            known = self.contexts.setdefault(u, set())
            if not known:
                new.append(u)
            known |= u_ctxs
            if not _is_inlined_constant(u):
                self.leaves |= {(u, c) for c in u_ctxs}
        return new

    def n_inputs_if_absorbed(self, v: Variable) -> int:
        """Count the inputs the group would have with ``v``'s producer in it."""
        node = v.owner
        assert node is not None
        ctxs = self.contexts[v]
        order = node.op.new_order if isinstance(node.op, DimShuffle) else None
        added = set()
        for u in node.inputs:
            if _is_inlined_constant(u):
                continue
            for c in ctxs:
                added.add((u, c if order is None else _compose(order, c)))
        return len((self.leaves - {(v, c) for c in ctxs}) | added)


def _grow(
    root: Apply,
    index: dict[Apply, int],
    clients: dict[Variable, set[Apply | None]],
    max_inputs: int,
    recompute_broadcast: bool,
) -> _Group:
    group = _Group(root)
    root_ctx = _identity(root.outputs[0])
    full = _n_full_dims(root.outputs[0])
    heap: list[tuple[int, int, Variable]] = []
    tie = itertools.count()

    def push(vs: list[Variable]) -> None:
        for u in vs:
            if u.owner is not None:
                heapq.heappush(heap, (-index[u.owner], next(tie), u))

    push(group.add_inputs(root, {root_ctx}))
    while heap:
        _, _, v = heapq.heappop(heap)
        producer = v.owner
        assert producer is not None
        is_elemwise = _fusable_elemwise(producer)
        if not (is_elemwise or _order_preserving(producer)):
            continue
        if not clients[v] <= group.members:  # ``None`` (a graph output) is never a member
            continue
        broadcast_constant = not is_elemwise and _is_inlined_constant(producer.inputs[0])
        if not (recompute_broadcast or broadcast_constant) and _n_full_dims(v) != full:
            continue
        if group.n_inputs_if_absorbed(v) > max_inputs:
            continue
        group.members.add(producer)
        group.n_elemwise += is_elemwise
        group.leaves -= {(v, c) for c in group.contexts[v]}
        push(group.add_inputs(producer, group.contexts[v]))
    return group


def _build(group: _Group, memo: dict[Variable, Variable]) -> Variable | None:
    """Return the fused root output, or ``None`` when the group has no non-constant input."""
    builder = ProgramBuilder()
    slots: dict[tuple[Variable, Context], int] = {}
    root_out = group.root.outputs[0]
    stack: list[tuple[Variable, Context]] = [(root_out, _identity(root_out))]
    while stack:
        key = stack[-1]
        if key in slots:
            stack.pop()
            continue
        v, ctx = key
        node = v.owner
        if node is None or node not in group.members:
            stack.pop()
            if _is_inlined_constant(v):
                slots[key] = builder.constant(v.data)  # type: ignore[attr-defined]
            else:
                slots[key] = builder.input(kt.dimshuffle(memo.get(v, v), ctx))
            continue
        if isinstance(node.op, DimShuffle):
            arg_keys = [(node.inputs[0], _compose(node.op.new_order, ctx))]
        else:
            arg_keys = [(u, ctx) for u in node.inputs]
        pending = [k for k in arg_keys if k not in slots]
        if pending:
            stack.extend(reversed(pending))
            continue
        stack.pop()
        if isinstance(node.op, Elemwise):
            slots[key] = builder.apply(node.op.scalar_op, [slots[k] for k in arg_keys])
        else:  # a DimShuffle: the same scalar
            slots[key] = slots[arg_keys[0]]
    if builder.n_inputs == 0:
        return None
    op = builder.build([slots[(root_out, _identity(root_out))]])
    out = Elemwise(op)(*builder.input_keys)
    old_t, new_t = root_out.type, out.type
    assert isinstance(old_t, TensorType) and isinstance(new_t, TensorType)
    if old_t.dtype != new_t.dtype or old_t.broadcastable != new_t.broadcastable:
        raise FusionError(f"fusing {root_out!r} into {op} changed its type from {old_t} to {new_t}")
    return out


def fuse_elemwise(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    max_inputs: int = MAX_INPUTS,
    recompute_broadcast: bool = False,
) -> list[Variable]:
    """Return ``outputs`` with maximal groups of Elemwise nodes fused into Composites.

    See the module docstring for when a producer joins a group. ``inputs`` are the
    function's inputs (unused: every root of the graph is an input or a constant).

    Examples
    --------
    >>> [out] = fuse_elemwise([x, y, z], [kt.exp(x) * y + z])  # doctest: +SKIP
    >>> out.owner.op  # Elemwise(Composite{exp(i0) * i1 + i2})  # doctest: +SKIP
    """
    outs = list(outputs)
    nodes = toposort(outs)
    index = {node: i for i, node in enumerate(nodes)}
    clients = _clients(outs, nodes)
    groups: dict[Apply, _Group] = {}
    absorbed: set[Apply] = set()
    for node in reversed(nodes):
        if node in absorbed or not _fusable_elemwise(node):
            continue
        group = _grow(node, index, clients, max_inputs, recompute_broadcast)
        if group.n_elemwise >= 2:
            groups[node] = group
            absorbed |= group.members - {node}
    if not groups:
        return outs
    memo: dict[Variable, Variable] = {}
    for node in nodes:
        if node in absorbed:
            continue
        found = groups.get(node)
        fused = _build(found, memo) if found is not None else None
        if fused is not None:
            memo[node.outputs[0]] = fused
            continue
        if found is not None:  # only constants: rebuild the members as they were
            for member in sorted(found.members - {node}, key=index.__getitem__):
                _rebuild(member, memo)
        _rebuild(node, memo)
    return [memo.get(v, v) for v in outs]


def _rebuild(node: Apply, memo: dict[Variable, Variable]) -> None:
    new_inputs = [memo.get(v, v) for v in node.inputs]
    if any(a is not b for a, b in zip(new_inputs, node.inputs, strict=True)):
        new_node = node.op.make_node(*new_inputs)
        memo.update(zip(node.outputs, new_node.outputs, strict=True))


def fuse_reductions(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Variable]:
    """Return ``outputs`` with ``CAReduce(Elemwise(f)(xs))`` turned into ``FusedReduce``.

    Applies where nothing else uses the elementwise result and it is real (bool,
    integer or float).
    """
    outs = list(outputs)
    nodes = toposort(outs)
    clients = _clients(outs, nodes)
    memo: dict[Variable, Variable] = {}
    for node in nodes:
        if type(node.op) is CAReduce:
            (v,) = node.inputs
            pre = v.owner
            if (
                pre is not None
                and _fusable_elemwise(pre)
                and clients[v] == {node}
                and np.dtype(v.type.dtype).kind in "biuf"  # type: ignore[attr-defined]
            ):
                new_pre = memo.get(v, v).owner
                assert new_pre is not None
                op = FusedReduce(node.op.kind, node.op.axis, new_pre.op.scalar_op)  # type: ignore[attr-defined]
                memo[node.outputs[0]] = op(*new_pre.inputs)
                continue
        _rebuild(node, memo)
    return [memo.get(v, v) for v in outs]


@register_global(
    "fusion",
    "fast_run",
    identity="f(g(x), y) -> Elemwise(Composite{f(g(i0), i1)})(x, y) for elementwise f, g "
    "when g(x) has no other client",
)
def elemwise_fusion(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Fuse groups of Elemwise nodes into Elemwise(Composite) nodes (see the module)."""
    return fuse_elemwise(inputs, outputs)


@register_global(
    "fusion",
    "fast_run",
    identity="reduce(f(xs), axis) -> FusedReduce(reduce, axis, f)(xs) when f(xs) has no "
    "other client",
)
def reduce_fusion(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Fuse reductions with the elementwise expression they reduce (see the module)."""
    return fuse_reductions(inputs, outputs)
