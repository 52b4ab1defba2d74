"""Loop fusion across nodes (Numba only): the loops over one vector length become one loop.

The fusion phase leaves one loop per elementwise group and per reduction; a node whose
result several others use (a model's residual, read by the log-likelihood's sum of
squares and by each parameter's gradient) is written out and read again by each, and
each gradient's scatter-add (``AdvancedIncSubtensor1``) is a loop of its own. This
rewrite (tag ``numba``, fusion phase, after the elementwise and reduction fusions)
puts *loop nodes* over the same static length ``n`` into one :class:`FusedLoop`
(:func:`_loop_groups` says which), which the Numba backend writes as one
``for j in range(n)`` whose body computes every member at ``j``:

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
can run where its members ran. The members keep their order, so the results equal the
unfused nodes' to the bit on Numba (one loop, the same additions in the same order).
Where the loop calls vectorizable math and neither gathers nor scatters, the
reductions fold their values in a second loop, so that the first one stays SIMD code.

M2 (the hierarchical model's logp and gradient) had six passes over its 919 rows
(the residual with its two gathers, the sum of squares, two products, two scatters);
it has one.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from kiln_graph import (
    AdvancedIncSubtensor1,
    AdvancedSubtensor1,
    Apply,
    Composite,
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
from kiln_numba._funcify import CodeContext, literal, np_dtype, numba_funcify
from kiln_numba._outline import MAX_INLINED_LOOPS, MAX_INLINED_PARAMS, outline
from kiln_numba.elemwise import LONG_LOOP
from kiln_numba.linalg import SMALL_MATMUL
from kiln_numba.reduce import calls_vector_math, combine, identity, value_cast
from kiln_numba.scalar import composite_statements, scalar_expr
from kiln_rewrite import register_global, register_local

#: The kinds of loop node: a value at ``j`` (elementwise, gather), a fold, a scatter.
MAP, GATHER, REDUCE, SCATTER = "map", "gather", "reduce", "scatter"
#: Kinds whose result is complete only after the loop.
_AFTER_LOOP = (REDUCE, SCATTER)
#: How many of the latest groups over a length an unrelated loop node may join.
_MAX_UNRELATED = 4
#: The most nodes in one fused loop: Numba compiles a function in time that grows
#: faster than its length (M4's twenty groups in one 80-node loop took 2 s longer).
_MAX_MEMBERS = 16
#: The inputs of a gather / scatter node that are read as whole vectors, not at ``j``.
_WHOLE = {GATHER: (0,), SCATTER: (0,)}


class FusedLoop(OpFromGraph):
    """Loop nodes over one vector length as one node: its inner graph is their graph.

    ``perform`` runs the inner graph like any :class:`~kiln_graph.OpFromGraph` (the
    reference); the Numba backend writes it as one loop (see the module docstring).
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


def _real(v: Variable) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.dtype != "float16" and np.dtype(t.dtype).kind in "biuf"


def _vector_length(v: Variable) -> int | None:
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
        n = _vector_length(node.inputs[-1] if kind == SCATTER else node.inputs[1])
    elif kind == MAP:
        n = _vector_length(node.outputs[0])
    else:
        n = max((_vector_length(v) or 0 for v in node.inputs), default=0) or None
        if any(v.type.shape[0] is None for v in node.inputs):  # type: ignore[attr-defined]
            return None
    return n if n is not None and n > 1 else None


def _value_inputs(node: Apply, kind: str) -> list[Variable]:
    """Return the inputs ``node`` reads at the loop position (not as whole vectors)."""
    whole = _WHOLE.get(kind, ())
    return [v for i, v in enumerate(node.inputs) if i not in whole]


def _loop_groups(nodes: list[Apply]) -> list[list[Apply]]:
    """Return the groups of loop nodes to fuse (each in topological order, two or more).

    One pass in topological order: a loop node joins the group of a member whose value
    it reads (same length), else of a member that reads one of its value inputs (a
    vector both loop over), else one of the last :data:`_MAX_UNRELATED` groups over its
    length, when it may (:func:`_may_join`) and the group stays small (at most
    :data:`_MAX_MEMBERS` nodes and :data:`~kiln_numba._outline.MAX_INLINED_PARAMS`
    inputs, so that its function is inlined); otherwise it starts a group.
    ``deps[node]`` is the set (a bit mask) of groups ``node`` depends on; a node may
    not join a group it depends on through a node outside it, so groups stay convex
    (and a node never joins a group that depends on it: its members come earlier).
    """
    group_of: dict[Apply, int] = {}
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
        shared = [v for v in values if _vector_length(v) == n]
        candidates = [group_of[v.owner] for v in values if v.owner in group_of]
        candidates += [g for v in shared for g in readers.get(v, ())]
        candidates += reversed(by_length.get(n, [])[-_MAX_UNRELATED:])
        outside = {v for v in node.inputs if not isinstance(v, Constant) or v.data.size > 1}
        chosen = next(
            (
                g
                for g in candidates
                if lengths[g] == n
                and len(members[g]) < _MAX_MEMBERS
                and len(inputs[g] | {v for v in outside if group_of.get(v.owner) != g})
                <= MAX_INLINED_PARAMS
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
    group_of: dict[Apply, int],
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


def fuse_loops(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Variable]:
    """Return ``outputs`` with each group of loop nodes over one length as a FusedLoop.

    A graph with more than :data:`~kiln_numba._outline.MAX_INLINED_LOOPS` loop nodes is
    returned as it is (see the comment in the code).
    """
    outs = list(outputs)
    nodes = toposort(outs, stop_at=list(inputs))
    clients: dict[Variable, list[Apply]] = {}
    for node in nodes:
        for v in node.inputs:
            clients.setdefault(v, []).append(node)
    if sum(_loop_length(node) is not None for node in nodes) > MAX_INLINED_LOOPS:
        # A large graph's loops are functions of their own, one per distinct code,
        # which its repeated groups share (M4: 20 groups); fused, each loop's code
        # differs, and compiling them took M4 from 11 s to 13-17 s.
        return outs
    unit: dict[Apply, int] = {}
    fused: list[tuple[Apply, list[Variable]]] = []
    graph_outputs = set(outs)
    for members in _loop_groups(nodes):
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


@register_local(
    "fusion",
    "numba",
    identity="dot(x, y) -> sum(x * y) for float64 vectors of a small static length, a "
    "reduction that loop fusion can join (Numba only)",
    tracks=[DimShuffle],
)
def numba_small_dot_to_sum(node: Apply) -> list[Variable] | None:
    """Rewrite a small vector dot product (``matmul`` of a row and a column) as a sum.

    Numba writes such a product as loops anyway (:data:`kiln_numba.linalg.SMALL_MATMUL`),
    in the same order as the reduction, so the result is the same to the bit.
    """
    op = node.op
    assert isinstance(op, DimShuffle)
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
    n = _vector_length(x)
    if (
        n is None
        or _vector_length(y) != n
        or n > SMALL_MATMUL
        or {x.type.dtype, y.type.dtype, node.outputs[0].type.dtype} != {"float64"}  # type: ignore[attr-defined]
    ):
        return None
    return [FusedReduce("sum", (0,), Mul())(x, y)]


@register_global(
    "fusion",
    "numba",
    identity="loops over one vector length (elementwise, gathers, reductions, scatter-adds) "
    "-> FusedLoop, one loop (Numba only)",
)
def numba_loop_fusion(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Fuse groups of loop nodes over one length into FusedLoops (see the module)."""
    return fuse_loops(inputs, outputs)


# --- code generation ----------------------------------------------------------------------


@numba_funcify.register(FusedLoop)
def numba_funcify_FusedLoop(op: FusedLoop, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write the inner graph as one loop over ``op.length`` (a function of its own)."""
    outline(ctx, lambda sub: _write_loop(op, sub))


def _write_loop(op: FusedLoop, ctx: CodeContext) -> None:
    n = op.length
    inner_inputs = list(op.inner_inputs)
    outputs = dict(zip(op.inner_outputs, ctx.outputs, strict=True))
    vector_math = n >= LONG_LOOP
    j = ctx.fresh("j")
    lines = _Lines()
    before, body = lines.before, lines.body
    folds: list[_Fold] = []
    indexed = False  # whether the loop gathers or scatters (it is then not SIMD code)
    arrays: dict[Variable, str] = dict(zip(inner_inputs, ctx.inputs, strict=True))
    values: dict[Variable, str] = {}
    for k, v in enumerate(inner_inputs):
        if k in ctx.scalars:
            values[v] = ctx.inputs[k]

    def value(v: Variable) -> str:
        """Return the value of ``v`` at the loop position (read into a local once)."""
        nonlocal indexed
        found = values.get(v)
        if found is not None:
            return found
        if isinstance(v, Constant):
            return literal(v.data.reshape(-1)[0], v.data.dtype.name)
        k = inner_inputs.index(v)  # type: ignore[arg-type]
        name = ctx.fresh("a")
        t = v.type
        assert isinstance(t, TensorType)
        if k in ctx.gathers:
            indexed = True
            x = ctx.inputs[k]
            size = f"{x}.shape[0]"
            g, checks = _checked_index(ctx, f"{ctx.gathers[k]}[{j}]", size, "AdvancedSubtensor1")
            body.extend([*checks, f"{name} = {x}[{g}]"])
        elif t.ndim == 0:
            before.append(f"{name} = {arrays[v]}[()]")
        elif t.broadcastable == (True,):
            before.append(f"{name} = {arrays[v]}[0]")
        else:
            if t.shape[0] is None:  # Numba checks no bounds: check the length once
                message = (
                    f"{op}: an input has a different length than the loop's {n}; kiln "
                    "broadcasts only dimensions whose static length is 1"
                )
                before.append(f"if {arrays[v]}.shape[0] != {n}:")
                before.append(f"    raise ShapeMismatchError({message!r})")
            body.append(f"{name} = {arrays[v]}[{j}]")
        values[v] = name
        return name

    checked_indices: dict[tuple[str, str], str] = {}

    def checked(idx_var: Variable, size: str, label: str) -> str:
        """Return the index ``idx_var`` checked as one into ``size`` elements (once per pair).

        Constant indices known to be in bounds (and not negative) need no check.
        """
        idx = value(idx_var)
        if size.isdigit() and idx_var in inner_inputs:
            outer = ctx.node.inputs[inner_inputs.index(idx_var)]  # type: ignore[arg-type]
            if _constant_in_bounds(outer, int(size)):
                return idx
        found = checked_indices.get((idx, size))
        if found is None:
            found, checks = _checked_index(ctx, idx, size, label)
            body.extend(checks)
            checked_indices[(idx, size)] = found
        return found

    for inner in toposort(list(op.inner_outputs), stop_at=inner_inputs):
        kind = loop_kind(inner)
        (out,) = inner.outputs
        out_t = out.type
        assert isinstance(out_t, TensorType)
        if kind == MAP:
            values[out] = _map_value(
                inner, [value(v) for v in inner.inputs], body, ctx, vector_math
            )
            if out in outputs:
                before.append(f"{outputs[out]} = np.empty(({n}, ), dtype={np_dtype(out_t.dtype)})")
                body.append(f"{outputs[out]}[{j}] = {values[out]}")
        elif kind == GATHER:
            indexed = True
            x, idx = inner.inputs
            name = ctx.fresh("a")
            g = checked(idx, _length(arrays[x], x), str(inner.op))
            body.append(f"{name} = {arrays[x]}[{g}]")
            values[out] = name
            if out in outputs:
                before.append(f"{outputs[out]} = np.empty(({n}, ), dtype={np_dtype(out_t.dtype)})")
                body.append(f"{outputs[out]}[{j}] = {name}")
        elif kind == REDUCE:
            args = [value(v) for v in inner.inputs]
            folds.append(_fold(inner, args, outputs[out], lines, ctx, vector_math))
        else:
            indexed = True
            x, y, idx = inner.inputs
            target = outputs[out] if out in outputs else ctx.fresh("t")
            before.append(f"{target} = np.copy({arrays[x]})")
            set_ = inner.op.set_instead_of_inc  # type: ignore[attr-defined]
            g = checked(idx, _length(target, x), str(inner.op))
            body.append(f"{target}[{g}] {'=' if set_ else '+='} {value(y)}")
    two_pass = bool(folds) and not indexed and calls_vector_math(body)
    ctx.emit("\n".join(_place_folds(lines, folds, n, j, two_pass, ctx)))


def _index_error(ctx: CodeContext) -> str:
    module = "kiln_numba._subtensor_kernels"
    return ctx.helper(
        f"{module}.index_error", lambda alias: f"from {module} import index_error as {alias}"
    )


def _length(name: str, v: Variable) -> str:
    """Return the length of the vector ``v`` (named ``name``): a literal when static.

    Equal literal bounds let LLVM merge the checks of one index against several vectors.
    """
    n = _vector_length(v)
    return str(n) if n is not None else f"{name}.shape[0]"


def _constant_in_bounds(v: Variable, size: int) -> bool:
    """Whether ``v`` is a constant of integer indices in ``[0, size)``."""
    if not isinstance(v, Constant) or v.data.dtype.kind not in "iu" or v.data.size == 0:
        return False
    return bool(v.data.min() >= 0 and v.data.max() < size)


def _checked_index(ctx: CodeContext, idx: str, size: str, label: str) -> tuple[str, list[str]]:
    """Return the name of ``idx`` as an index into ``size`` elements, and its statements.

    Negative indices wrap; out of bounds raises the VM's error.
    """
    k = ctx.fresh("g")
    index_error = _index_error(ctx)
    return k, [
        f"{k} = np.int64({idx})",
        f"if {k} < -{size} or {k} >= {size}:",
        f"    {index_error}({k}, {size}, 0, {label!r})",
        f"if {k} < 0:",
        f"    {k} += {size}",
    ]


def _scalar_program(
    op: object,
    args: list[str],
    in_dtypes: list[str],
    out_dtype: str,
    body: list[str],
    ctx: CodeContext,
    vector_math: bool,
) -> str:
    """Append the statements of ``op`` (a ScalarOp or Composite) on ``args``; return its value."""
    if isinstance(op, Composite):
        steps, results = composite_statements(op, args, in_dtypes, ctx.fresh, vector_math)
        body.extend(steps)
        return results[0]
    name = ctx.fresh("e")
    body.append(f"{name} = {scalar_expr(op, args, out_dtype, in_dtypes, vector_math)}")  # type: ignore[arg-type]
    return name


def _map_value(
    node: Apply, args: list[str], body: list[str], ctx: CodeContext, vector_math: bool
) -> str:
    op = node.op
    assert isinstance(op, Elemwise)
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    out_dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    return _scalar_program(op.scalar_op, args, in_dtypes, out_dtype, body, ctx, vector_math)


class _Lines:
    """The statements of a fused loop: before it, in its body, after it."""

    def __init__(self) -> None:
        self.before: list[str] = []
        self.body: list[str] = []
        self.after: list[str] = []


class _Fold:
    """A reduction member's accumulator and the value it folds at the loop position."""

    def __init__(self, ctx: CodeContext, kind: str, pre_dtype: str, acc_dtype: str) -> None:
        self.kind, self.acc_dtype = kind, acc_dtype
        self.is_float = np.dtype(pre_dtype).kind == "f"
        self.acc, self.elem, self.buf = ctx.fresh("acc"), ctx.fresh("x"), ctx.fresh("buf")
        self.marker = f"<fold {self.acc}>"


def _fold(
    node: Apply,
    args: list[str],
    result: str,
    lines: _Lines,
    ctx: CodeContext,
    vector_math: bool,
) -> _Fold:
    """Write a reduction member: its accumulator, the value it folds, its result after.

    The body gets a marker where the value is folded (see :func:`_place_folds`).
    """
    op = node.op
    out_dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    if isinstance(op, FusedReduce):
        pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
        v = _scalar_program(op.scalar_op, args, in_dtypes, pre_dtype, lines.body, ctx, vector_math)
    else:
        pre_dtype, v = in_dtypes[0], args[0]
    kind = op.kind  # type: ignore[attr-defined]
    acc_dtype = "float64" if kind == "sum" and out_dtype == "float32" else out_dtype
    fold = _Fold(ctx, kind, pre_dtype, acc_dtype)
    lines.before.append(f"{fold.acc} = {identity(kind, acc_dtype)}")
    lines.body.append(f"{fold.elem} = {value_cast(v, pre_dtype, acc_dtype, kind)}")
    lines.body.append(fold.marker)
    lines.after.append(f"{result} = np.empty((), dtype={np_dtype(out_dtype)})")
    lines.after.append(f"{result}[()] = {value_cast(fold.acc, acc_dtype, out_dtype, kind)}")
    return fold


def _place_folds(
    lines: _Lines, folds: list[_Fold], n: int, j: str, two_pass: bool, ctx: CodeContext
) -> list[str]:
    """Return the loop's statements, each fold in the loop or in a second loop.

    With ``two_pass``, the loop stores the folded values in buffers and a second loop
    folds them in the same order (the results are the same to the bit): a loop that
    folds into a scalar accumulator does not become SIMD code, a loop that only
    computes and stores values does (see :func:`kiln_numba.reduce._two_pass_sum`).
    """
    by_marker = {f.marker: f for f in folds}
    body: list[str] = []
    for line in lines.body:
        fold = by_marker.get(line)
        if fold is None:
            body.append(line)
        elif two_pass:
            body.append(f"{fold.buf}[{j}] = {fold.elem}")
        else:
            body.extend(combine(fold.kind, fold.acc, fold.elem, fold.is_float))
    before = list(lines.before)
    second: list[str] = []
    if two_pass:
        k = ctx.fresh("k")
        second.append(f"for {k} in range({n}):")
        for fold in folds:
            before.append(f"{fold.buf} = np.empty({n}, dtype={np_dtype(fold.acc_dtype)})")
            value = f"{fold.buf}[{k}]"
            second += ["    " + s for s in combine(fold.kind, fold.acc, value, fold.is_float)]
    return [*before, f"for {j} in range({n}):", *("    " + s for s in body), *second, *lines.after]


__all__ = ["FusedLoop", "fuse_loops", "loop_kind", "numba_loop_fusion"]
