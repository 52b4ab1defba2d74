"""Data-only serialization of graphs and cache descriptions: reading one runs no code.

kiln's cache entries are data, never pickles (the cache's trust model,
:mod:`kiln_compile._cache`). :func:`dumps_data` writes a value made of ``None``, bools,
ints, floats, complex numbers, strings, bytes, tuples, lists, dicts, sets, slices,
NumPy dtypes, numeric arrays and NumPy scalars; :func:`loads_data` reads it back. The
bytes are a JSON document (every container a list whose first item names its kind)
followed by the raw bytes of the arrays and byte strings it refers to.

A graph (:func:`dumps_graph`) is stored as a table: its nodes in topological order,
each as (op, references to its inputs, output types). A reference is a position in
``inputs`` or an earlier node's output (non-negative: the slots are the inputs, then
every node's outputs in order) or a constant (negative: ``-1 - k`` is the ``k``-th
constant, stored as an array). A constant of at least :data:`REFERENCE_BYTES` that the
caller says the reader will hold too (``known``: the Stage-1 cache passes the constants
of the graph before rewriting, which its key covers) is stored as its digest, not its
bytes: a model's data is then neither written into the entry nor read back from it.
Ops and types are stored once each. An Op is its class's name and its attributes
(data, or other Ops); a type is its class's name and its key; an
:class:`~kiln_graph.OpFromGraph` stores its inner graph the same way.

Reading resolves a class name only among the Op and Type classes this process has
already defined (no module is imported), and builds an Op from its attributes without
calling anything else; a name it does not know makes the entry unusable (a miss).
Loading rebuilds every node with ``Apply.create`` on the caller's input variables, so
the result is interned like any graph built by hand, with no re-validation.
"""

from __future__ import annotations

import functools
import json
import re
import struct
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from kiln_graph import (
    Apply,
    Constant,
    Op,
    OpFromGraph,
    Props,
    TensorVariable,
    Type,
    Variable,
    toposort,
)

#: Bumped whenever the layout below changes.
FORMAT = 3
#: Constants of at least this many bytes that the reader holds are stored by digest.
REFERENCE_BYTES = 1 << 16

_MAGIC = b"KILNDATA"
_HEAD = struct.Struct("<8sIQ")  # magic, format, length of the JSON document
#: Array dtypes stored: booleans, integers, floats, complex numbers (no objects).
_DTYPE = re.compile(r"^[<>|=]?[biufc]\d{1,2}$")


class GraphNotSerializableError(Exception):
    """The graph holds something the cache cannot store (it is then not cached)."""


class CorruptGraphError(Exception):
    """A stored graph could not be rebuilt (the entry is then discarded)."""


class CorruptDataError(CorruptGraphError):
    """Stored data could not be read back (damaged, or of another format)."""


# --- classes a stored value may name --------------------------------------------------------


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_classes: dict[str, type | None] = {}  # None: two classes of this name (ambiguous)


def _refresh_classes() -> None:
    seen: dict[str, type | None] = {}
    stack: list[type] = [Props, Type]
    visited: set[type] = set()
    while stack:
        cls = stack.pop()
        if cls in visited:
            continue
        visited.add(cls)
        name = _class_name(cls)
        seen[name] = None if seen.get(name, cls) is not cls else cls
        stack.extend(cls.__subclasses__())
    _classes.clear()
    _classes.update(seen)


def _lookup(name: str, base: type) -> Any:
    """Return the already defined subclass of ``base`` named ``name`` (module:qualname)."""
    cls = _classes.get(name)
    if cls is None:
        _refresh_classes()
        cls = _classes.get(name)
    if cls is None or not issubclass(cls, base):
        raise CorruptDataError(f"no {base.__name__} class {name!r} is defined here")
    return cls


def _storable_class(cls: type) -> str:
    name = _class_name(cls)
    if "<locals>" in name:
        raise GraphNotSerializableError(f"the class {name} is local to a function")
    if _classes.get(name) is not cls:
        _refresh_classes()
        if _classes.get(name) is not cls:
            raise GraphNotSerializableError(f"the class {name} cannot be found by its name")
    return name


# --- values ---------------------------------------------------------------------------------


class _Writer:
    """Turns a value into JSON-ready lists, keeping arrays' and bytes' raw bytes aside."""

    def __init__(self, graphs: bool, known: Collection[Constant] = ()) -> None:
        self.blobs: list[bytes | memoryview] = []
        self.size = 0
        self.graphs = graphs
        self.known = {c for c in known if c.data.nbytes >= REFERENCE_BYTES}

    def blob(self, data: bytes | memoryview) -> list[int]:
        ref = [self.size, len(data)]  # (a memoryview here is 1-d, of bytes)
        self.blobs.append(data)
        self.size += len(data)
        return ref

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, bool | str):
            return v
        if isinstance(v, int):
            return v if -(2**53) < v < 2**53 else ["i", str(v)]
        if isinstance(v, float):
            return v if np.isfinite(v) else ["x", v.hex()]
        if isinstance(v, tuple):
            return ["t", *(self.value(x) for x in v)]
        if isinstance(v, list):
            return ["l", *(self.value(x) for x in v)]
        if isinstance(v, dict):
            return ["d", *([self.value(k), self.value(x)] for k, x in v.items())]
        if isinstance(v, frozenset | set):
            kind = "f" if isinstance(v, frozenset) else "s"
            return [kind, *(self.value(x) for x in sorted(v, key=repr))]
        if isinstance(v, complex):
            return ["c", v.real.hex(), v.imag.hex()]
        if isinstance(v, bytes):
            return ["y", *self.blob(v)]
        if isinstance(v, slice):
            return ["sl", self.value(v.start), self.value(v.stop), self.value(v.step)]
        if isinstance(v, np.dtype):
            return ["dt", self.dtype(v)]
        if isinstance(v, np.ndarray):
            dtype = self.dtype(v.dtype)  # (first: an object array has no bytes to view)
            flat = np.ascontiguousarray(v).reshape(-1)
            data = memoryview(flat.view(np.uint8)) if flat.size else b""  # (no copy)
            return ["a", dtype, list(v.shape), *self.blob(data)]
        if isinstance(v, np.generic):
            return ["n", self.dtype(v.dtype), *self.blob(np.asarray(v).tobytes())]
        if self.graphs:
            return self.graph_object(v)
        raise GraphNotSerializableError(f"cannot store a {type(v).__qualname__} ({v!r})")

    def dtype(self, dtype: np.dtype) -> str:
        if dtype.names is not None or not _DTYPE.match(dtype.str):
            raise GraphNotSerializableError(f"cannot store the dtype {dtype}")
        return dtype.str

    def graph_object(self, v: Any) -> Any:
        if isinstance(v, OpFromGraph):
            return ["G", _storable_class(type(v)), self.table(v.inner_inputs, v.inner_outputs)]
        if isinstance(v, Type):
            cls = type(v)
            key = v.key()
            if cls(*key) != v:
                raise GraphNotSerializableError(f"the type {v!r} is not rebuilt from its key")
            return ["T", _storable_class(cls), self.value(key)]
        if isinstance(v, Props):
            state = v.__getstate__()
            if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
                raise GraphNotSerializableError(f"the op {v!r} has no attribute dictionary")
            items = [[k, self.value(x)] for k, x in state.items()]
            return ["P", _storable_class(type(v)), *items]
        raise GraphNotSerializableError(f"cannot store a {type(v).__qualname__} ({v!r})")

    def table(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> dict[str, Any]:
        """Return the graph as data (see the module docstring)."""
        slot: dict[Variable, int] = {v: i for i, v in enumerate(inputs)}
        n_slots = len(inputs)
        consts: list[Any] = []
        const_ref: dict[Variable, int] = {}
        ops: list[Any] = []
        op_index: dict[Any, int] = {}
        types: list[Any] = []
        type_index: dict[Type, int] = {}

        def ref(v: Variable) -> int:
            found = slot.get(v)
            if found is None:
                found = const_ref.get(v)
            if found is not None:
                return found
            if isinstance(v, Constant):
                const_ref[v] = -1 - len(consts)
                if v in self.known:
                    consts.append(["k", v.digest])
                else:
                    consts.append(self.value(np.asarray(v.data)))
                return const_ref[v]
            raise GraphNotSerializableError(
                f"the graph depends on {v!r} ({v.type}), which is neither an input nor a constant"
            )

        def type_ref(t: Type) -> int:
            found = type_index.get(t)
            if found is None:
                found = type_index[t] = len(types)
                types.append(self.value(t))
            return found

        nodes = []
        for node in toposort(outputs, stop_at=inputs):
            op_i = op_index.get(node.op)
            if op_i is None:
                op_i = op_index[node.op] = len(ops)
                ops.append(self.value(node.op))
            in_refs = [ref(v) for v in node.inputs]
            out_types = [type_ref(o.type) for o in node.outputs]
            nodes.append([op_i, in_refs, out_types])
            for o in node.outputs:
                slot[o] = n_slots
                n_slots += 1
        return {
            "inputs": [self.value(v.type) for v in inputs],
            "types": types,
            "ops": ops,
            "consts": consts,
            "nodes": nodes,
            "outputs": [ref(o) for o in outputs],
        }

    def finish(self, document: Any) -> list[bytes | memoryview]:
        """Return the stored form's parts, in order (the constants' bytes as views)."""
        text = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
        return [_HEAD.pack(_MAGIC, FORMAT, len(text)), text, *self.blobs]


class _Reader:
    """The inverse of :class:`_Writer`: builds values from the lists, reading no code."""

    def __init__(self, blobs: memoryview, graphs: bool, known: Collection[Constant] = ()) -> None:
        self.blobs = blobs
        self.graphs = graphs
        self.known = {c.digest: c for c in known if c.data.nbytes >= REFERENCE_BYTES}
        # Equal ops and types read in one graph become one object (as a pickle's memo
        # makes them): interning their nodes then compares by identity.
        self.shared: dict[Any, Any] = {}

    def blob(self, start: Any, length: Any) -> bytes:
        return bytes(self.view(start, length))

    def view(self, start: Any, length: Any) -> memoryview:
        """Return the stored bytes at ``start``, without a copy (an array copies them once)."""
        if not (isinstance(start, int) and isinstance(length, int)) or start < 0 or length < 0:
            raise CorruptDataError("a byte reference is not a pair of offsets")
        if start + length > len(self.blobs):
            raise CorruptDataError("a byte reference points past the end")
        return self.blobs[start : start + length]

    def dtype(self, s: Any) -> np.dtype:
        if not isinstance(s, str) or not _DTYPE.match(s):
            raise CorruptDataError(f"not a stored dtype: {s!r}")
        return np.dtype(s)

    def value(self, v: Any) -> Any:
        if v.__class__ is not list:
            if v is None or isinstance(v, bool | int | float | str):
                return v
            raise CorruptDataError(f"unexpected {type(v).__name__} in stored data")
        if not v or not isinstance(v[0], str):
            raise CorruptDataError("a stored list names no kind")
        kind, rest = v[0], v[1:]
        if kind == "t":
            return tuple([self.value(x) if x.__class__ is list else self.scalar(x) for x in rest])
        if kind == "l":
            return [self.value(x) for x in rest]
        if kind == "d":
            return {self.value(k): self.value(x) for k, x in rest}
        if kind == "f":
            return frozenset(self.value(x) for x in rest)
        if kind == "s":
            return {self.value(x) for x in rest}
        if kind == "i":
            return int(rest[0])
        if kind == "x":
            return float.fromhex(rest[0])
        if kind == "c":
            return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
        if kind == "y":
            return self.blob(*rest)
        if kind == "sl":
            return slice(*(self.value(x) for x in rest))
        if kind == "dt":
            return self.dtype(rest[0])
        if kind == "a":
            return self.array_view(rest).copy()
        if kind == "n":
            dtype = self.dtype(rest[0])
            return np.frombuffer(self.view(*rest[1:]), dtype=dtype)[0]
        if self.graphs:
            return self.graph_object(kind, rest)
        raise CorruptDataError(f"unknown kind {kind!r} in stored data")

    def array_view(self, rest: list[Any]) -> np.ndarray:
        """Return the stored array ``["a", *rest]`` as a read-only view of the stored bytes."""
        dtype, shape = self.dtype(rest[0]), rest[1]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise CorruptDataError(f"not an array shape: {shape!r}")
        return np.frombuffer(self.view(*rest[2:]), dtype=dtype).reshape(tuple(shape))

    def constant(self, v: Any) -> Constant:
        """Return the graph constant stored as ``v``, an array read from the stored bytes.

        Without a copy of its own: the constant that holds these bytes is found (the
        model's, when its graph was just built) or makes the one copy it keeps.
        """
        if v.__class__ is list and v and v[0] == "a":
            return Constant.create(self.array_view(v[1:]), immutable=True)
        if v.__class__ is list and len(v) == 2 and v[0] == "k":
            found = self.known.get(v[1]) if isinstance(v[1], str) else None
            if found is None:
                raise CorruptGraphError(f"the graph refers to a constant not given: {v[1]!r}")
            return found
        return Constant.create(self.value(v))

    @staticmethod
    def scalar(x: Any) -> Any:
        if x is None or isinstance(x, bool | int | float | str):
            return x
        raise CorruptDataError(f"unexpected {type(x).__name__} in stored data")

    def graph_object(self, kind: str, rest: list[Any]) -> Any:
        if kind == "T":
            return _type(_lookup(rest[0], Type), self.value(rest[1]))
        if kind == "P":
            cls = _lookup(rest[0], Props)
            op = object.__new__(cls)  # as unpickling does: attributes set, no __init__
            op.__dict__.update({str(k): self.value(x) for k, x in rest[1:]})
            return self.shared.setdefault(op, op)
        if kind == "G":
            cls = _lookup(rest[0], OpFromGraph)
            table = rest[1]
            inner = [TensorVariable(self.value(t)) for t in table["inputs"]]
            return cls(inner, self.graph(table, inner))
        raise CorruptDataError(f"unknown kind {kind!r} in a stored graph")

    def graph(self, table: dict[str, Any], inputs: Sequence[Variable]) -> list[Variable]:
        input_types = [self.value(t) for t in table["inputs"]]
        if len(input_types) != len(inputs):
            raise CorruptGraphError(f"{len(input_types)} inputs stored, {len(inputs)} given")
        for i, (t, v) in enumerate(zip(input_types, inputs, strict=True)):
            if t != v.type:
                raise CorruptGraphError(f"input {i}: stored type {t}, given {v.type}")
        types = [self.value(t) for t in table["types"]]
        ops = [self.value(o) for o in table["ops"]]
        for op in ops:
            if not isinstance(op, Op):
                raise CorruptGraphError(f"{op!r} is not an Op")
        const_vars = [self.constant(a) for a in table["consts"]]
        slots: list[Variable] = list(inputs)

        def var(r: int) -> Variable:
            return slots[r] if r >= 0 else const_vars[-1 - r]

        create = Apply.create
        for op_i, in_refs, out_types in table["nodes"]:
            node = create(ops[op_i], [var(r) for r in in_refs], [types[t] for t in out_types])
            slots.extend(node.outputs)
        return [var(r) for r in table["outputs"]]


@functools.lru_cache(maxsize=4096)
def _type(cls: type, key: tuple[Any, ...]) -> Any:
    """Return the type ``cls(*key)`` (types are values: one object per key is enough)."""
    return cls(*key)


def _split(payload: bytes) -> tuple[Any, memoryview]:
    if len(payload) < _HEAD.size:
        raise CorruptDataError("too short")
    magic, fmt, length = _HEAD.unpack_from(payload)
    if magic != _MAGIC:
        raise CorruptDataError("not kiln data")
    if fmt != FORMAT:
        raise CorruptDataError(f"data format {fmt}, expected {FORMAT}")
    end = _HEAD.size + length
    if end > len(payload):
        raise CorruptDataError("truncated")
    document = json.loads(payload[_HEAD.size : end])
    return document, memoryview(payload)[end:]


def dumps_data(value: Any) -> bytes:
    """Return ``value`` (plain data, dtypes, numeric arrays) as bytes :func:`loads_data` reads.

    Raises
    ------
    GraphNotSerializableError
        If ``value`` holds anything else (an object, a function, an object array).
    """
    writer = _Writer(graphs=False)
    return b"".join(writer.finish(writer.value(value)))


def loads_data(payload: bytes) -> Any:
    """Return the value stored by :func:`dumps_data`; reading it runs no code.

    Raises
    ------
    CorruptDataError
        If ``payload`` is damaged or was not written by :func:`dumps_data`.
    """
    try:
        document, blobs = _split(payload)
        return _Reader(blobs, graphs=False).value(document)
    except CorruptDataError:
        raise
    except Exception as exc:  # damaged data can fail in any way while being read
        raise CorruptDataError(f"{type(exc).__name__}: {exc}") from exc


def dumps_graph(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> bytes:
    """Serialize the graph computing ``outputs`` from ``inputs`` to bytes (data only).

    Raises
    ------
    GraphNotSerializableError
        If the graph depends on a root that is neither an input nor a constant, or
        holds an Op whose attributes are not data (a function, a local class...).
    """
    return b"".join(dumps_graph_parts(inputs, outputs))


def dumps_graph_parts(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    known: Collection[Constant] = (),
) -> list[bytes | memoryview]:
    """Return :func:`dumps_graph`'s bytes as parts: the constants' bytes are views of them.

    What a cache writes part by part, holding no joined copy of a model's data. The
    constants of ``known`` of at least :data:`REFERENCE_BYTES` are stored by digest:
    :func:`loads_graph` must then be given them.
    """
    writer = _Writer(graphs=True, known=known)
    try:
        document = writer.table(inputs, outputs)
    except GraphNotSerializableError:
        raise
    except (RecursionError, TypeError, ValueError) as exc:
        raise GraphNotSerializableError(f"{type(exc).__name__}: {exc}") from exc
    return writer.finish(document)


def loads_graph(
    payload: bytes, inputs: Sequence[Variable], known: Collection[Constant] = ()
) -> list[Variable]:
    """Rebuild the outputs stored by :func:`dumps_graph` on ``inputs``; runs no stored code.

    ``inputs`` must have the types of the inputs the graph was stored with; ``known``
    holds the constants that :func:`dumps_graph_parts` stored by digest.

    Raises
    ------
    CorruptGraphError
        If the payload is damaged, names a class this process does not define, or does
        not describe a graph on ``inputs``.
    """
    try:
        document, blobs = _split(payload)
        if not isinstance(document, dict):
            raise CorruptGraphError("not a stored graph")
        return _Reader(blobs, graphs=True, known=known).graph(document, inputs)
    except CorruptGraphError:
        raise
    except Exception as exc:  # damaged data can fail in any way while being rebuilt
        raise CorruptGraphError(f"{type(exc).__name__}: {exc}") from exc
