"""Vector forms of many alike scalar expressions: what scalars written in a loop compute.

A model of scalars in a loop (``xs = [kl.Normal(f"x{i}", 0, s) for i in range(n)]``,
then ``sum(x * c for x, c in zip(xs, cs))``) is a graph of ``n`` alike scalar
subgraphs, and compiled code grows by several statements per scalar. Its log-density
terms are already grouped (:mod:`kiln_model._logprob`); this module turns the
expressions the user wrote into vector ones, before the gradient is taken (so that
the gradient is a vector expression too):

- :func:`pack` turns the scalars ``[e_0, ..., e_{n-1}]`` into one vector expression,
  top-down: items ``v[a], v[a + s], ...`` of one vector are a slice of it, constants a
  constant vector, one variable repeated stays a scalar (it broadcasts), and results of
  one elementwise op are that op over the packed inputs;
- :func:`vectorize_sums` replaces each sum of many scalar terms (a chain of ``+``) by
  ``sum(pack(terms))`` for the terms of one kind, when at least :data:`GROUP_MIN` of
  them pack.

Elementwise arithmetic is the same per element; a sum adds the same terms, in the
same order on Numba (a loop), pairwise on the VM (NumPy's ``sum``): the last digits
of a log-density may change, never more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from kiln_graph import (
    Apply,
    Constant,
    DimShuffle,
    Elemwise,
    Subtensor,
    TensorVariable,
    Variable,
    graph_replace,
    toposort,
)
from kiln_graph import tensor as kt
from kiln_graph.index import INT
from kiln_graph.ops import MakeVector
from kiln_graph.scalar import Add

#: The fewest alike scalars that become one vector expression (or one vector term).
#: Below it scalar code compiles as fast, and the arithmetic keeps its order.
GROUP_MIN = 8

#: ``:`` in an index list.
_FULL_SLICE = (None, None, None)

#: How deep :func:`pack` follows alike elementwise ops before it stacks what it has.
MAX_DEPTH = 24


def item_of(x: Variable) -> tuple[TensorVariable, int] | None:
    """Return ``(v, k)`` when ``x`` is ``v[k]`` of a vector ``v`` at a constant ``k``."""
    owner = x.owner
    if owner is None or not isinstance(owner.op, Subtensor) or len(owner.inputs) != 2:
        return None
    base, index = owner.inputs
    if getattr(base, "ndim", None) != 1 or not isinstance(index, Constant):
        return None
    return base, int(index.data)  # type: ignore[return-value, attr-defined]


def item(v: TensorVariable, k: int) -> TensorVariable:
    """Return ``v[k]`` of a vector ``v`` (as indexing does, at a fraction of its cost)."""
    index = _INDICES.get(k)
    if index is None:
        index = _INDICES.setdefault(k, kt.constant(np.int64(k)))
    return Subtensor((INT,))(v, index)  # type: ignore[return-value]


#: The int64 constants :func:`item` indexes with, made once.
_INDICES: dict[int, Variable] = {}


def _axis_item(x: Variable) -> tuple[TensorVariable, int, int] | None:
    """Return ``(v, axis, k)`` when ``x`` is ``v[:, ..., :, k]`` (``k`` constant at ``axis``)."""
    owner = x.owner
    if owner is None or not isinstance(owner.op, Subtensor) or len(owner.inputs) != 2:
        return None
    base, index = owner.inputs
    idx = owner.op.idx_list
    if not isinstance(index, Constant) or sum(e == INT for e in idx) != 1:
        return None
    if any(e != INT and e != _FULL_SLICE for e in idx):
        return None
    return base, idx.index(INT), int(index.data)  # type: ignore[return-value, attr-defined]


def _as_slice(xs: Sequence[Variable]) -> TensorVariable | None:
    """Return ``xs`` stacked along a new first axis: a slice of ``v``, that axis first.

    When ``xs`` are ``v[..., a], v[..., a + s], ...`` (one axis of one ``v``, s > 0).
    """
    items = [_axis_item(x) for x in xs]
    if any(i is None for i in items):
        return None
    base, axis, _ = items[0]  # type: ignore[misc]
    ks = np.array([i[2] for i in items])  # type: ignore[index]
    if any(i[0] is not base or i[1] != axis for i in items) or np.any(ks < 0):  # type: ignore[index]
        return None
    step = int(ks[1] - ks[0]) if len(ks) > 1 else 1
    if step <= 0 or np.any(np.diff(ks) != step):
        return None
    start, stop = int(ks[0]), int(ks[-1]) + 1
    if not (start == 0 and step == 1 and base.type.shape[axis] == len(xs)):
        base = base[(slice(None),) * axis + (slice(start, stop, step),)]
    if axis == 0:
        return base
    return kt.dimshuffle(base, (axis, *(d for d in range(base.ndim) if d != axis)))


def pack(xs: Sequence[Variable], depth: int = 0) -> TensorVariable | None:
    """Return one expression of the like-shaped ``xs``: ``v`` with ``v[k] == xs[k]``.

    The same rank as ``xs`` (not one more) when all ``xs`` are one variable or equal
    constants: it broadcasts where it is used. None when ``xs`` have no common form
    (the caller stacks them).
    """
    first = xs[0]
    if all(x is first for x in xs):
        return first  # type: ignore[return-value]
    if any(x.dtype != first.dtype for x in xs):  # type: ignore[attr-defined]
        return None  # one dtype, so that stacking converts nothing
    if all(isinstance(x, Constant) for x in xs):
        if not _same_shapes(xs):
            return None
        data = np.stack([np.asarray(x.data) for x in xs]).astype(first.dtype)  # type: ignore[attr-defined]
        return kt.constant(data[0] if np.all(data == data[0]) else data)
    sliced = _as_slice(xs)
    if sliced is not None:
        return sliced
    node = first.owner
    if node is None or not isinstance(node.op, Elemwise | DimShuffle) or depth >= MAX_DEPTH:
        return None
    owners = [x.owner for x in xs]
    if not all(
        o is not None and o.op == node.op and len(o.inputs) == len(node.inputs) for o in owners
    ):
        return None
    inputs = []
    for j in range(len(node.inputs)):
        column = [o.inputs[j] for o in owners]  # type: ignore[union-attr]
        packed = pack(column, depth + 1)
        if packed is None:
            if not _same_shapes(column) or any(c.dtype != column[0].dtype for c in column):  # type: ignore[attr-defined, union-attr]
                return None  # shapes that may differ at run time cannot be stacked
            packed = _make_vector(column) if column[0].ndim == 0 else kt.stack(column)  # type: ignore[attr-defined, union-attr]
        inputs.append(packed)
    if isinstance(node.op, DimShuffle):
        (x,) = inputs
        if x.ndim == node.op.input_ndim:
            return None  # the same input every time, yet distinct nodes: left as they are
        order = (0, *(o if o == "x" else int(o) + 1 for o in node.op.new_order))
        return kt.dimshuffle(x, order)
    out = node.op(*inputs)
    return out if isinstance(out, TensorVariable) else None


def _same_shapes(xs: Sequence[Variable]) -> bool:
    """Whether the ``xs`` have one static shape, known in full."""
    shape = xs[0].type.shape  # type: ignore[attr-defined]
    return None not in shape and all(x.type.shape == shape for x in xs)  # type: ignore[attr-defined]


def take(v: TensorVariable, ks: Sequence[int]) -> TensorVariable:
    """Return ``v[ks]`` of a vector ``v``: a slice when ``ks`` are evenly spaced."""
    at = np.asarray(ks, dtype="int64")
    step = int(at[1] - at[0]) if len(at) > 1 else 1
    if step > 0 and np.all(np.diff(at) == step):
        return v[int(at[0]) : int(at[-1]) + 1 : step]
    return v[kt.constant(at)]


def _make_vector(xs: Sequence[Variable]) -> TensorVariable:
    dtype = str(np.result_type(*(np.dtype(x.dtype) for x in xs)))  # type: ignore[attr-defined]
    return MakeVector(dtype)(*xs)  # type: ignore[return-value]


def stack(xs: Sequence[Variable]) -> TensorVariable:
    """Return the scalars ``xs`` as a vector, or as one scalar when they are all equal.

    :func:`pack`'s form where it has one, else a ``MakeVector``.
    """
    packed = pack(xs)
    return _make_vector(xs) if packed is None else packed


def _is_float_add(v: Variable) -> bool:
    owner = v.owner
    return (
        owner is not None
        and isinstance(owner.op, Elemwise)
        and isinstance(owner.op.scalar_op, Add)
        and str(v.dtype) in ("float64", "float32")  # type: ignore[attr-defined]
    )


def _terms(root: Variable, uses: Counter[Variable]) -> list[Variable]:
    """Return the terms of the chain of ``+`` ending at ``root``, left to right.

    An inner sum used elsewhere too is a term (it is computed anyway).
    """
    terms: list[Variable] = []
    todo = [root]
    while todo:
        v = todo.pop()
        if v is root or (_is_float_add(v) and uses[v] == 1):
            todo.extend(reversed(v.owner.inputs))  # type: ignore[union-attr]
        else:
            terms.append(v)
    return terms


def kind(v: Variable, depth: int = 0) -> object:
    """Return what terms must share to be packed together: their form, a few levels deep.

    Items of one axis of one variable, constants of one dtype and shape, one variable,
    or one elementwise op (or dimension shuffle) over inputs of one kind each.
    """
    item = _axis_item(v)
    if item is not None:
        return ("item", item[0], item[1])
    shape = v.type.shape  # type: ignore[attr-defined]
    if isinstance(v, Constant):
        return ("constant", str(v.dtype), shape)  # type: ignore[attr-defined]
    if v.owner is not None and isinstance(v.owner.op, Elemwise | DimShuffle):
        if depth < _KIND_DEPTH:
            return ("op", v.owner.op, shape, tuple(kind(i, depth + 1) for i in v.owner.inputs))
    return ("variable", v)


#: How deep :func:`kind` compares the forms of terms.
_KIND_DEPTH = 3


def _vector_sum(root: Variable, terms: list[Variable]) -> Variable | None:
    """Return ``root`` (the sum of ``terms``) with the terms of each kind summed as a vector."""
    kinds: dict[object, list[Variable]] = {}
    for t in terms:
        kinds.setdefault(kind(t), []).append(t)
    parts: list[Variable] = []
    packed_any = False
    for members in kinds.values():
        vec = pack(members) if len(members) >= GROUP_MIN else None
        if vec is None or vec.ndim != members[0].ndim + 1:  # type: ignore[attr-defined]
            parts.extend(members)
        else:
            parts.append(kt.sum(vec, axis=0))
            packed_any = True
    if not packed_any:
        return None
    total = parts[0]
    for p in parts[1:]:
        total = total + p  # type: ignore[operator]
    total = kt.as_tensor(total)
    if total.type.shape != root.type.shape:  # type: ignore[attr-defined]
        return None
    return total if total.dtype == root.dtype else kt.cast(total, root.dtype)  # type: ignore[attr-defined]


def vectorize_sums(outputs: Sequence[Variable]) -> list[Variable]:
    """Return ``outputs`` with each sum of many alike scalar terms computed as a vector sum.

    Examples
    --------
    >>> total = sum(x[i] * c[i] for i in range(100))  # doctest: +SKIP
    >>> vectorize_sums([total])  # [sum(x[0:100] * c)]  # doctest: +SKIP
    """
    outs = list(outputs)
    nodes = toposort(outs)
    uses: Counter[Variable] = Counter(outs)
    for node in nodes:
        uses.update(node.inputs)
    user: dict[Variable, Apply] = {}
    for node in nodes:
        for i in node.inputs:
            user[i] = node
    replace: dict[Variable, Variable] = {}
    for node in nodes:
        v = node.outputs[0]
        if not _is_float_add(v):
            continue
        if uses[v] == 1 and v in user and _is_float_add(user[v].outputs[0]):
            continue  # inside a longer chain: its root collects its terms
        terms = _terms(v, uses)
        if len(terms) < GROUP_MIN:
            continue
        if replace:  # sums inside the terms were replaced before (topological order)
            terms = graph_replace(terms, replace, strict=False)  # type: ignore[assignment]
        new = _vector_sum(v, terms)
        if new is not None:
            replace[v] = new
    if not replace:
        return outs
    return graph_replace(outs, replace, strict=False)  # type: ignore[return-value]
