"""Loop fusion across nodes: the loops over one vector length become one loop.

The backend-neutral decision; a compiled backend registers it in its fusion phase (tag
``numba``: :mod:`kiln_numba.loop_fusion`; tag ``c``: :mod:`kiln_c.loop_fusion`) with
the limits its compiler needs (:class:`LoopLimits`), and writes each
:class:`FusedLoop` as one loop.

The fusion phase leaves one loop per elementwise group and per reduction; a node whose
result several others use (a model's residual, read by the log-likelihood's sum of
squares and by each parameter's gradient) is written out and read again by each, and
each gradient's scatter-add (``AdvancedIncSubtensor1``) is a loop of its own.
:func:`fuse_loops` (run after the elementwise and reduction fusions) puts *loop nodes*
over the same static length ``n`` into one :class:`FusedLoop` (:func:`_loop_groups`
says which), which a backend writes as one ``for j in range(n)`` whose body computes
every member at ``j``:

- an ``Elemwise`` with a vector result of length ``n``: its value at ``j`` (written
  to an array only when a node outside the loop reads it);
- a gather ``x[idx]`` (``AdvancedSubtensor1`` of a vector ``x``) with ``len(idx) == n``:
  ``x[idx[j]]``, bounds-checked (unless ``idx`` is a constant known to be in bounds);
- a reduction of a vector of length ``n`` (``CAReduce`` or ``FusedReduce`` over axis
  0): folded into an accumulator, its result ready after the loop;
- a scatter ``x[idx] += y`` or ``x[idx] = y`` (``AdvancedIncSubtensor1`` of a vector
  ``x``) with ``len(idx) == n``: ``out[idx[j]] += y_j`` into a copy of ``x``.

A member may use another member's value at ``j`` (an elementwise result or a gather),
never a reduction's or a scatter's result, nor a member's result as the vector a
gather reads or a scatter updates (those are complete only after the loop). The group
is convex: no path leaves it and comes back through a node outside, so the fused node
can run where its members ran. The members keep their order, so a backend that folds
each reduction in member order gets the unfused nodes' results to the bit.

M2 (the hierarchical model's logp and gradient) had six passes over its 919 rows
(the residual with its two gathers, the sum of squares, two products, two scatters);
it has one.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence

import numpy as np

from kiln_graph import (
    AdvancedIncSubtensor1,
    AdvancedSubtensor1,
    Apply,
    Constant,
    DimShuffle,
    Elemwise,
    FusedReduce,
    KilnValueError,
    OpFromGraph,
    TensorType,
    TensorVariable,
    Variable,
    toposort,
)
from kiln_graph.ops import CAReduce, MatMul
from kiln_graph.scalar import Mul

#: The kinds of loop node: a value at ``j`` (elementwise, gather), a fold, a scatter.
MAP, GATHER, REDUCE, SCATTER = "map", "gather", "reduce", "scatter"
#: Kinds whose result is complete only after the loop.
_AFTER_LOOP = (REDUCE, SCATTER)
#: How many of the latest groups over a length an unrelated loop node may join.
_MAX_UNRELATED = 4
#: The inputs of a gather / scatter node that are read as whole vectors, not at ``j``.
_WHOLE = {GATHER: (0,), SCATTER: (0,)}


class FusedLoop(OpFromGraph):
    """Loop nodes over one vector length as one node: its inner graph is their graph.

    ``perform`` runs the inner graph like any :class:`~kiln_graph.OpFromGraph` (the
    reference); a compiled backend writes it as one loop (see the module docstring).
    Built only by :func:`fuse_loops`, after autodiff.
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        super().__init__(inputs, outputs)
        nodes = toposort(list(self.inner_outputs), stop_at=list(self.inner_inputs))
        lengths = {_loop_length(node) for node in nodes}
        if len(lengths) != 1 or None in lengths:
            raise KilnValueError(
                f"FusedLoop: the inner nodes must be loop nodes over one static length, "
                f"got lengths {sorted(map(str, lengths))}"
            )
        self.length: int = lengths.pop()  # type: ignore[assignment]
        self.n_nodes = len(nodes)
        whole = {
            v
            for node in nodes
            for i in _WHOLE.get(loop_kind(node) or "", ())
            for v in node.inputs[i : i + 1]
        }
        #: The positions of the inputs read only at the loop position (never as whole
        #: vectors): the code generator may pass them as scalars or gathered reads.
        self.value_positions = frozenset(
            k for k, v in enumerate(self.inner_inputs) if v not in whole
        )

    def __str__(self) -> str:
        return f"FusedLoop{{n={self.length}, {self.n_nodes} nodes}}"

    __repr__ = __str__


@dataclasses.dataclass(frozen=True)
class LoopLimits:
    """The bounds a backend puts on fused loops (its compiler's time grows with them).

    Attributes
    ----------
    max_members
        The most nodes in one fused loop.
    max_inputs
        The most inputs from outside of one fused loop.
    max_loop_nodes
        A graph with more loop nodes than this is left unfused (None: no bound).
    """

    max_members: int = 16
    max_inputs: int = 16
    max_loop_nodes: int | None = None


def _real(v: Variable) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.dtype != "float16" and np.dtype(t.dtype).kind in "biuf"


def vector_length(v: Variable) -> int | None:
    """Return the static length of a 1-d tensor ``v`` (None for other values or unknown lengths)."""
    t = v.type
    if not (isinstance(t, TensorType) and t.ndim == 1):
        return None
    return t.shape[0]


def loop_kind(node: Apply) -> str | None:
    """Return the kind of loop node ``node`` is (see the module docstring), or None."""
    if not all(_real(v) for v in (*node.inputs, *node.outputs)):
        return None
    op = node.op
    if isinstance(op, Elemwise):
        if len(node.outputs) == 1 and getattr(op.scalar_op, "nout", 1) == 1:
            return MAP if node.outputs[0].type.ndim == 1 else None  # type: ignore[attr-defined]
        return None
    if type(op) in (FusedReduce, CAReduce):
        ndim = node.inputs[0].type.ndim  # type: ignore[attr-defined]
        return REDUCE if ndim == 1 and op.axis == (0,) else None  # type: ignore[attr-defined]
    if isinstance(op, AdvancedSubtensor1):
        return GATHER if node.inputs[0].type.ndim == 1 else None  # type: ignore[attr-defined]
    if isinstance(op, AdvancedIncSubtensor1):
        x, y, _ = node.inputs
        ok = x.type.ndim == 1 and y.type.ndim <= 1  # type: ignore[attr-defined]
        return SCATTER if ok else None
    return None


def _loop_length(node: Apply) -> int | None:
    """Return the static length a loop node loops over (None if it is not one, or unknown)."""
    kind = loop_kind(node)
    if kind is None:
        return None
    if kind in (GATHER, SCATTER):
        n = vector_length(node.inputs[-1] if kind == SCATTER else node.inputs[1])
    elif kind == MAP:
        n = vector_length(node.outputs[0])
    else:
        n = max((vector_length(v) or 0 for v in node.inputs), default=0) or None
        if any(v.type.shape[0] is None for v in node.inputs):  # type: ignore[attr-defined]
            return None
    return n if n is not None and n > 1 else None


def _value_inputs(node: Apply, kind: str) -> list[Variable]:
    """Return the inputs ``node`` reads at the loop position (not as whole vectors)."""
    whole = _WHOLE.get(kind, ())
    return [v for i, v in enumerate(node.inputs) if i not in whole]


def _loop_groups(nodes: list[Apply], limits: LoopLimits) -> list[list[Apply]]:
    """Return the groups of loop nodes to fuse (each in topological order, two or more).

    One pass in topological order: a loop node joins the group of a member whose value
    it reads (same length), else of a member that reads one of its value inputs (a
    vector both loop over), else one of the last :data:`_MAX_UNRELATED` groups over its
    length, when it may (:func:`_may_join`) and the group stays within ``limits``
    (nodes and outside inputs); otherwise it starts a group.
    ``deps[node]`` is the set (a bit mask) of groups ``node`` depends on; a node may
    not join a group it depends on through a node outside it, so groups stay convex
    (and a node never joins a group that depends on it: its members come earlier).
    """
    group_of: dict[Apply | None, int] = {}
    kinds: dict[Apply, str] = {}
    lengths: list[int] = []
    members: list[list[Apply]] = []
    inputs: list[set[Variable]] = []  # each group's inputs from outside it
    readers: dict[Variable, list[int]] = {}  # vector -> groups reading it at ``j``
    by_length: dict[int, list[int]] = {}
    deps: dict[Apply, int] = {}
    # gdeps[g]: the groups that group g, as one fused node, depends on (closed under
    # dependency: a group that depends on g also holds what g depends on).
    gdeps: list[int] = []
    for node in nodes:
        mask = 0
        for v in node.inputs:
            p = v.owner
            if p is not None and p in deps:
                mask |= deps[p] | (1 << group_of[p] if p in group_of else 0)
        n = _loop_length(node)
        if n is None:
            deps[node] = mask
            continue
        kind = loop_kind(node)
        assert kind is not None
        kinds[node] = kind
        values = _value_inputs(node, kind)
        shared = [v for v in values if vector_length(v) == n]
        candidates = [group_of[v.owner] for v in values if v.owner in group_of]
        candidates += [g for v in shared for g in readers.get(v, ())]
        candidates += reversed(by_length.get(n, [])[-_MAX_UNRELATED:])
        outside = {v for v in node.inputs if not isinstance(v, Constant) or v.data.size > 1}
        chosen = next(
            (
                g
                for g in candidates
                if lengths[g] == n
                and len(members[g]) < limits.max_members
                and len(inputs[g] | {v for v in outside if group_of.get(v.owner) != g})
                <= limits.max_inputs
                and _may_join(node, kind, g, group_of, kinds, deps, gdeps)
            ),
            None,
        )
        if chosen is None:
            chosen = len(members)
            members.append([])
            inputs.append(set())
            lengths.append(n)
            gdeps.append(0)
            by_length.setdefault(n, []).append(chosen)
        added = _closure(mask, gdeps) & ~(1 << chosen)
        if added & ~gdeps[chosen]:
            gdeps[chosen] |= added
            for k in range(len(gdeps)):
                if gdeps[k] >> chosen & 1:
                    gdeps[k] |= gdeps[chosen]
        group_of[node] = chosen
        members[chosen].append(node)
        inputs[chosen] |= {v for v in outside if group_of.get(v.owner) != chosen}
        for v in shared:
            if chosen not in readers.setdefault(v, []):
                readers[v].append(chosen)
        deps[node] = mask
    return [g for g in members if len(g) > 1]


def _closure(mask: int, gdeps: list[int]) -> int:
    """Return ``mask`` (a set of groups) with every group those groups depend on."""
    out, rest = mask, mask
    while rest:
        low = rest & -rest
        out |= gdeps[low.bit_length() - 1]
        rest ^= low
    return out


def _may_join(
    node: Apply,
    kind: str,
    g: int,
    group_of: dict[Apply | None, int],
    kinds: dict[Apply, str],
    deps: dict[Apply, int],
    gdeps: list[int],
) -> bool:
    """Whether ``node`` may join group ``g`` (see the module docstring).

    Not when it reads, from outside ``g``, a value that depends on ``g``: through the
    nodes (``deps``) or through the groups those belong to (``gdeps``: a fused group
    reads all its members' inputs at once).
    """
    whole = _WHOLE.get(kind, ())
    for i, v in enumerate(node.inputs):
        p = v.owner
        if p is None or p not in deps:
            continue
        k = group_of.get(p)
        if k == g:
            if i in whole or kinds[p] in _AFTER_LOOP:
                return False
            continue
        reach = deps[p] | (1 << k if k is not None else 0)
        if _closure(reach, gdeps) >> g & 1:
            return False
    return True


def _fused_node(
    group: set[Apply], order: list[Apply], leaving: set[Variable]
) -> tuple[Apply, list[Variable]]:
    """Return the FusedLoop node of ``group`` and the members' results it computes.

    Those are the results in ``leaving`` (read outside the group), in member order.
    One-element constants that the members read only as values stay in the inner graph
    (the loop writes them as literals); other outside values become inputs.
    """
    members = [n for n in order if n in group]
    produced = {o for n in members for o in n.outputs}
    whole = {node.inputs[i] for node in members for i in _WHOLE.get(loop_kind(node) or "", ())}
    outer_inputs: list[Variable] = []
    inner: dict[Variable, Variable] = {}
    for node in members:
        for v in node.inputs:
            if v in produced or v in inner:
                continue
            if isinstance(v, Constant) and v.data.size == 1 and v not in whole:
                inner[v] = v
                continue
            inner[v] = TensorVariable(v.type)  # type: ignore[arg-type]
            outer_inputs.append(v)
    memo: dict[Variable, Variable] = dict(inner)
    results: list[Variable] = []
    for node in members:
        new = node.op.make_node(*[memo[v] for v in node.inputs])
        memo.update(zip(node.outputs, new.outputs, strict=True))
        results += [o for o in node.outputs if o in leaving]
    op = FusedLoop([inner[v] for v in outer_inputs], [memo[o] for o in results])
    return op.make_node(*outer_inputs), results


def fuse_loops(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    limits: LoopLimits = LoopLimits(),  # noqa: B008 (frozen)
) -> list[Variable]:
    """Return ``outputs`` with each group of loop nodes over one length as a FusedLoop.

    The groups are those of the module docstring, within ``limits``; a graph with more
    than ``limits.max_loop_nodes`` loop nodes is returned as it is.
    """
    outs = list(outputs)
    nodes = toposort(outs, stop_at=list(inputs))
    clients: dict[Variable, list[Apply]] = {}
    for node in nodes:
        for v in node.inputs:
            clients.setdefault(v, []).append(node)
    n_loops = sum(_loop_length(node) is not None for node in nodes)
    if limits.max_loop_nodes is not None and n_loops > limits.max_loop_nodes:
        return outs
    unit: dict[Apply, int] = {}
    fused: list[tuple[Apply, list[Variable]]] = []
    graph_outputs = set(outs)
    for members in _loop_groups(nodes, limits):
        group = set(members)
        leaving = {
            o
            for m in members
            for o in m.outputs
            if o in graph_outputs or any(c not in group for c in clients.get(o, []))
        }
        node, results = _fused_node(group, nodes, leaving)
        for m in members:
            unit[m] = len(fused)
        fused.append((node, results))
    if not fused:
        return outs
    memo: dict[Variable, Variable] = {}
    done: set[int] = set()
    for node in _contracted_order(nodes, unit):
        k = unit.get(node)
        if k is None:
            new_inputs = [memo.get(v, v) for v in node.inputs]
            if any(a is not b for a, b in zip(new_inputs, node.inputs, strict=True)):
                memo.update(zip(node.outputs, node.op.make_node(*new_inputs).outputs, strict=True))
            continue
        if k in done:
            continue
        done.add(k)
        fnode, leaving_outs = fused[k]
        new = fnode.op.make_node(*[memo.get(v, v) for v in fnode.inputs])
        memo.update(zip(leaving_outs, new.outputs, strict=True))
    return [memo.get(v, v) for v in outs]


def _contracted_order(nodes: list[Apply], unit: dict[Apply, int]) -> list[Apply]:
    """Return ``nodes`` in an order where each fused group's members are consecutive.

    A topological order of the graph with each group contracted to one node (it is a
    DAG: the groups are convex), as close to the original order as it allows.
    """
    index = {node: i for i, node in enumerate(nodes)}
    key = {node: ("g", unit[node]) if node in unit else ("n", index[node]) for node in nodes}
    members: dict[tuple[str, int], list[Apply]] = {}
    for node in nodes:
        members.setdefault(key[node], []).append(node)
    deps: dict[tuple[str, int], set[tuple[str, int]]] = {k: set() for k in members}
    users: dict[tuple[str, int], set[tuple[str, int]]] = {k: set() for k in members}
    for node in nodes:
        for v in node.inputs:
            p = v.owner
            if p in key and key[p] != key[node]:
                deps[key[node]].add(key[p])
                users[key[p]].add(key[node])
    first = {k: index[ms[0]] for k, ms in members.items()}
    ready = [(first[k], k) for k, d in deps.items() if not d]
    heapq.heapify(ready)
    order: list[Apply] = []
    while ready:
        _, k = heapq.heappop(ready)
        order.extend(members[k])
        for u in users[k]:
            deps[u].discard(k)
            if not deps[u]:
                heapq.heappush(ready, (first[u], u))
    assert len(order) == len(nodes), "loop fusion: a fused group is not convex"
    return order


def _small_dot_operands(node: Apply, max_size: int) -> tuple[Variable, Variable] | None:
    """Return ``(x, y)`` when ``node`` is ``dot(x, y)`` of two float64 vectors, else None.

    ``node`` is the DimShuffle to a scalar of ``matmul(x[None, :], y[:, None])``; ``x``
    and ``y`` have one static length of at most ``max_size``. A backend that writes
    such a product as a loop may rewrite it as ``FusedReduce("sum", (0,), Mul())(x, y)``,
    a reduction that loop fusion can join.
    """
    op = node.op
    if not isinstance(op, DimShuffle):
        return None
    prod = node.inputs[0].owner
    if op.new_order != () or prod is None or not isinstance(prod.op, MatMul):
        return None
    row, col = prod.inputs
    if not (
        row.owner is not None
        and col.owner is not None
        and isinstance(row.owner.op, DimShuffle)
        and isinstance(col.owner.op, DimShuffle)
        and row.owner.op.new_order == ("x", 0)
        and col.owner.op.new_order == (0, "x")
    ):
        return None
    x, y = row.owner.inputs[0], col.owner.inputs[0]
    n = vector_length(x)
    if (
        n is None
        or vector_length(y) != n
        or n > max_size
        or {x.type.dtype, y.type.dtype, node.outputs[0].type.dtype} != {"float64"}  # type: ignore[attr-defined]
    ):
        return None
    return x, y


def small_dot_to_sum(node: Apply, max_size: int) -> list[Variable] | None:
    """Return ``[sum(x * y)]`` (one FusedReduce) for a small dot (see ``_small_dot_operands``)."""
    operands = _small_dot_operands(node, max_size)
    if operands is None:
        return None
    return [FusedReduce("sum", (0,), Mul())(*operands)]


__all__ = [
    "GATHER", "MAP", "REDUCE", "SCATTER", "FusedLoop", "LoopLimits", "fuse_loops", "loop_kind",
    "small_dot_to_sum", "vector_length",
]  # fmt: skip
