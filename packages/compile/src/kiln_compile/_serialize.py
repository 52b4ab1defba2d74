"""A compact serialization of graphs, for the Stage-1 cache.

A graph is stored as a table: its nodes in topological order, each as (op, references
to its inputs, output types). A reference is a position in ``inputs`` or an earlier
node's output (non-negative: the slots are the inputs, then every node's outputs in
order) or a constant (negative: ``-1 - k`` is the ``k``-th constant, stored as an
array). Ops and types are stored once each and pickled: Ops are plain immutable
objects (``Props`` drops its cached hash and digest when pickled); an
:class:`~kiln_graph.OpFromGraph` stores its inner graph the same way.

Loading rebuilds every node with ``Apply.create`` on the caller's input variables, so
the result is interned like any graph built by hand, with no re-validation.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, OpFromGraph, TensorVariable, Type, Variable, toposort

#: Bumped whenever the layout below changes.
FORMAT = 1


class GraphNotSerializableError(Exception):
    """The graph holds something the cache cannot store (it is then not cached)."""


class CorruptGraphError(Exception):
    """A stored graph could not be rebuilt (the entry is then discarded)."""


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, OpFromGraph):
            return _load_opfromgraph, (_table(obj.inner_inputs, obj.inner_outputs), type(obj))
        return NotImplemented


def _load_opfromgraph(table: tuple[Any, ...], cls: type[OpFromGraph] = OpFromGraph) -> OpFromGraph:
    input_types: tuple[Type, ...] = table[1]
    inner = [TensorVariable(t) for t in input_types]  # type: ignore[arg-type]
    outs = _rebuild(table, inner)
    return cls(inner, outs)


def _table(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> tuple[Any, ...]:
    """Return the graph as plain data (see the module docstring)."""
    slot: dict[Variable, int] = {v: i for i, v in enumerate(inputs)}
    n_slots = len(inputs)
    consts: list[np.ndarray] = []
    const_ref: dict[Variable, int] = {}
    ops: list[Any] = []
    op_index: dict[Any, int] = {}
    types: list[Type] = []
    type_index: dict[Type, int] = {}

    def ref(v: Variable) -> int:
        found = slot.get(v)
        if found is not None:
            return found
        found = const_ref.get(v)
        if found is not None:
            return found
        if isinstance(v, Constant):
            const_ref[v] = -1 - len(consts)
            consts.append(v.data)
            return const_ref[v]
        raise GraphNotSerializableError(
            f"the graph depends on {v!r} ({v.type}), which is neither an input nor a constant"
        )

    def type_ref(t: Type) -> int:
        found = type_index.get(t)
        if found is None:
            found = type_index[t] = len(types)
            types.append(t)
        return found

    nodes = []
    for node in toposort(outputs, stop_at=inputs):
        op_i = op_index.get(node.op)
        if op_i is None:
            op_i = op_index[node.op] = len(ops)
            ops.append(node.op)
        in_refs = tuple(ref(v) for v in node.inputs)
        out_types = tuple(type_ref(o.type) for o in node.outputs)
        nodes.append((op_i, in_refs, out_types))
        for o in node.outputs:
            slot[o] = n_slots
            n_slots += 1
    out_refs = tuple(ref(o) for o in outputs)
    input_types = tuple(v.type for v in inputs)
    return (FORMAT, input_types, tuple(types), tuple(ops), tuple(consts), tuple(nodes), out_refs)


def _rebuild(table: tuple[Any, ...], inputs: Sequence[Variable]) -> list[Variable]:
    fmt, input_types, types, ops, consts, nodes, out_refs = table
    if fmt != FORMAT:
        raise CorruptGraphError(f"graph format {fmt}, expected {FORMAT}")
    if len(input_types) != len(inputs):
        raise CorruptGraphError(f"{len(input_types)} inputs stored, {len(inputs)} given")
    for i, (t, v) in enumerate(zip(input_types, inputs, strict=True)):
        if t != v.type:
            raise CorruptGraphError(f"input {i}: stored type {t}, given {v.type}")
    const_vars = [Constant.create(a) for a in consts]
    slots: list[Variable] = list(inputs)

    def var(r: int) -> Variable:
        return slots[r] if r >= 0 else const_vars[-1 - r]

    create = Apply.create
    for op_i, in_refs, out_types in nodes:
        node = create(ops[op_i], [var(r) for r in in_refs], [types[t] for t in out_types])
        slots.extend(node.outputs)
    return [var(r) for r in out_refs]


def dumps_graph(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> bytes:
    """Serialize the graph computing ``outputs`` from ``inputs`` to bytes.

    Raises
    ------
    GraphNotSerializableError
        If the graph depends on a root that is neither an input nor a constant, or
        holds an Op that cannot be pickled.
    """
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(_table(inputs, outputs))
    except GraphNotSerializableError:
        raise
    except Exception as exc:  # any object that refuses pickling (lambdas, local classes...)
        raise GraphNotSerializableError(f"{type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()


def loads_graph(payload: bytes, inputs: Sequence[Variable]) -> list[Variable]:
    """Rebuild the outputs stored by :func:`dumps_graph` on ``inputs``.

    ``inputs`` must have the types of the inputs the graph was stored with.

    Raises
    ------
    CorruptGraphError
        If the payload cannot be unpickled or does not describe a graph on ``inputs``.
    """
    try:
        table = pickle.loads(payload)
        return _rebuild(table, inputs)
    except CorruptGraphError:
        raise
    except Exception as exc:  # a damaged payload can fail in any way while unpickling
        raise CorruptGraphError(f"{type(exc).__name__}: {exc}") from exc
