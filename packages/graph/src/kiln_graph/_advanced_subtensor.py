"""Advanced (integer-array) indexing: gathers and scatters with NumPy's rules.

:class:`AdvancedSubtensor1` is the common case of hierarchical models, ``mu[group]``:
one integer vector on the first axis (a gather, ``np.take``); its gradient is the
scatter-add :class:`AdvancedIncSubtensor1`. :class:`AdvancedSubtensor` covers every
other mix of integer arrays, integers, slices and new axes: the index arrays broadcast
together, and their dimensions replace the indexed ones where the arrays are adjacent
in the index, else come first. The ``idx_list`` structure is described in
:mod:`kiln_graph._index`; integer scalars are 0-d index arrays here, as in NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _alloc, _elemwise, _index, _math
from kiln_graph._basic import as_tensor, shape_constant
from kiln_graph._errors import KilnIndexError, KilnTypeError, KilnValueError
from kiln_graph._node import Apply, Op, TensorVariable, Variable, inplace_copy
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES, TensorType

ARRAY, NEWAXIS = _index.ARRAY, _index.NEWAXIS


def _check_vector_index(op: Op, x: TensorVariable, idx: Any) -> TensorVariable:
    idx = as_tensor(idx)
    if x.ndim == 0:
        raise KilnIndexError(f"{op}: cannot index the 0-d tensor {x!r}")
    if idx.ndim != 1 or idx.dtype not in INTEGER_DTYPES:
        raise KilnTypeError(f"{op}: the index must be an integer vector, got {idx.type}")
    _index.check_bounds(op, x, 0, idx)
    return idx


class AdvancedSubtensor1(Op):
    """``x[idx]`` for an integer vector ``idx`` on the first axis: a gather."""

    __props__ = ()

    def make_node(self, x: Any, idx: Any) -> Apply:
        x = as_tensor(x)
        idx = _check_vector_index(self, x, idx)
        shape = (idx.type.shape[0], *x.type.shape[1:])
        return Apply.create(self, [x, idx], [TensorType(x.dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, idx = inputs
        with _index.index_errors(self):
            outputs[0] = np.take(x, idx, axis=0)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        x_shape, idx_shape = input_shapes
        return [(idx_shape[0], *x_shape[1:])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, idx = inputs
        if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
            return [None, None]
        g = _elemwise.cast(output_grads[0], x.type.dtype)  # type: ignore[attr-defined]
        return [AdvancedIncSubtensor1()(_alloc.zeros_like(x), g, idx), None]


class AdvancedIncSubtensor1(Op):
    """``x`` with ``x[idx]`` incremented by (or set to) ``y``, ``idx`` an integer vector.

    The inputs are ``x``, ``y``, ``idx``. Repeated indices accumulate (``np.add.at``);
    with ``set_instead_of_inc`` the last write wins. ``perform`` copies ``x`` unless
    ``inplace``.
    """

    __props__ = ("set_instead_of_inc", "inplace")

    def __init__(self, set_instead_of_inc: bool = False, inplace: bool = False) -> None:
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        kind = "Set" if self.set_instead_of_inc else "Inc"
        return f"Advanced{kind}Subtensor1" + ("[inplace]" * self.inplace)

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Update ``x`` itself instead of a copy (output 0 takes input 0's buffer)."""
        return [] if self.inplace else [(0, inplace_copy(self))]

    def make_node(self, x: Any, y: Any, idx: Any) -> Apply:
        x = as_tensor(x)
        y = _index.as_update_value(self, y, x.dtype)
        idx = _check_vector_index(self, x, idx)
        _index.check_static_update(self, y, (idx.type.shape[0], *x.type.shape[1:]))
        return Apply.create(self, [x, y, idx], [x.type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, y, idx = inputs
        out = x if self.inplace and _index.writeable(x) else np.array(x, copy=True)
        _index.check_update(self, node.inputs[1], y, (len(idx), *x.shape[1:]))
        with _index.index_errors(self):
            if self.set_instead_of_inc:
                out[idx] = y
            else:
                np.add.at(out, idx, y)
        outputs[0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, y, idx = inputs
        set_zero = AdvancedIncSubtensor1(True) if self.set_instead_of_inc else None
        return _index.update_grads(x, y, output_grads[0], [idx], AdvancedSubtensor1(), set_zero)


def _arrays(idx_list: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    groups = _index.group(idx_list, values)
    return [g for e, g in zip(idx_list, groups, strict=True) if e == ARRAY]


def static_broadcast(op: Op, arrays: Sequence[TensorVariable]) -> tuple[int | None, ...]:
    ndim = max(a.ndim for a in arrays)
    out: list[int | None] = []
    for d in range(ndim):
        dims = [a.type.shape[d - ndim + a.ndim] for a in arrays if d >= ndim - a.ndim]
        known = {n for n in dims if n is not None and n != 1}
        if len(known) > 1:
            shapes = ", ".join(str(a.type.shape) for a in arrays)
            raise KilnIndexError(
                f"{op}: the index arrays cannot be broadcast together (static shapes {shapes})"
            )
        out.append(known.pop() if known else 1 if all(n == 1 for n in dims) else None)
    return tuple(out)


def _symbolic_broadcast(
    arrays: Sequence[TensorVariable], shapes: Sequence[Sequence[Variable]]
) -> tuple[Variable, ...]:
    ndim = max(a.ndim for a in arrays)
    out: list[Variable] = []
    for d in range(ndim):
        cands = [
            (a.type.shape[d - ndim + a.ndim], s[d - ndim + a.ndim])
            for a, s in zip(arrays, shapes, strict=True)
            if d >= ndim - a.ndim
        ]
        known = [s for n, s in cands if n is not None and n != 1]
        unknown = [s for n, s in cands if n is None]
        if known:
            out.append(known[0])
        elif not unknown:
            out.append(shape_constant(1))
        else:
            dim = unknown[0]  # broadcast at run time: a length 1 takes the other length
            for s in unknown[1:]:
                dim = _math.switch(_math.eq(dim, 1), s, dim)
            out.append(dim)
    return tuple(out)


def _runtime_broadcast(op: Op, arrays: Sequence[np.ndarray]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError as exc:
        shapes = ", ".join(str(np.shape(a)) for a in arrays)
        raise KilnIndexError(
            f"{op}: the index arrays cannot be broadcast together (shapes {shapes})"
        ) from exc


def _check_advanced_idx_list(idx_list: Sequence[Any], owner: str) -> tuple:
    checked = _index.check_idx_list(idx_list, (ARRAY, NEWAXIS), owner)
    if ARRAY not in checked:
        raise KilnValueError(f"{owner}: idx_list needs at least one index array ('a')")
    return checked


class AdvancedSubtensor(Op):
    """``x[index]`` with integer arrays mixed with slices and new axes (NumPy's rules).

    The inputs are ``x`` then, in the order of ``idx_list``, each index array (integer
    scalars are 0-d arrays) and each slice's int scalars.
    """

    __props__ = ("idx_list",)

    def __init__(self, idx_list: Sequence[Any]) -> None:
        self.idx_list = _check_advanced_idx_list(idx_list, "AdvancedSubtensor")

    def __str__(self) -> str:
        return f"AdvancedSubtensor{{{_index.idx_str(self.idx_list)}}}"

    def make_node(self, x: Any, *indices: Any) -> Apply:
        x = as_tensor(x)
        inputs = _index.check_index_inputs(self, x, self.idx_list, indices)
        adv = static_broadcast(self, _arrays(self.idx_list, inputs))
        shape = _index.static_shape(self.idx_list, x, inputs, adv)
        return Apply.create(self, [x, *inputs], [TensorType(x.dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, *values = inputs
        with _index.index_errors(self):
            outputs[0] = np.asarray(x[_index.numpy_index(self.idx_list, values)])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        arrays = _arrays(self.idx_list, node.inputs[1:])
        adv = _symbolic_broadcast(arrays, _arrays(self.idx_list, input_shapes[1:]))
        return [_index.symbolic_shape(self.idx_list, input_shapes[0], node.inputs[1:], adv)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, *indices = inputs
        if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
            return [None] * len(inputs)
        g = _elemwise.cast(output_grads[0], x.type.dtype)  # type: ignore[attr-defined]
        gx = AdvancedIncSubtensor(self.idx_list)(_alloc.zeros_like(x), g, *indices)
        return [gx] + [None] * len(indices)


class AdvancedIncSubtensor(Op):
    """``x`` with ``x[index]`` incremented by (or set to) ``y``, advanced indexing.

    The inputs are ``x``, ``y`` and the index inputs of :class:`AdvancedSubtensor`.
    Repeated indices accumulate (``np.add.at``); with ``set_instead_of_inc`` the last
    write wins. ``perform`` copies ``x`` unless ``inplace``.
    """

    __props__ = ("idx_list", "set_instead_of_inc", "inplace")

    def __init__(
        self, idx_list: Sequence[Any], set_instead_of_inc: bool = False, inplace: bool = False
    ) -> None:
        self.idx_list = _check_advanced_idx_list(idx_list, "AdvancedIncSubtensor")
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        kind = "Set" if self.set_instead_of_inc else "Inc"
        inplace = "[inplace]" * self.inplace
        return f"Advanced{kind}Subtensor{{{_index.idx_str(self.idx_list)}}}{inplace}"

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Update ``x`` itself instead of a copy (output 0 takes input 0's buffer)."""
        return [] if self.inplace else [(0, inplace_copy(self))]

    def make_node(self, x: Any, y: Any, *indices: Any) -> Apply:
        x = as_tensor(x)
        y = _index.as_update_value(self, y, x.dtype)
        inputs = _index.check_index_inputs(self, x, self.idx_list, indices)
        adv = static_broadcast(self, _arrays(self.idx_list, inputs))
        target = _index.static_shape(self.idx_list, x, inputs, adv)
        _index.check_static_update(self, y, target)
        return Apply.create(self, [x, y, *inputs], [x.type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, y, *values = inputs
        out = x if self.inplace and _index.writeable(x) else np.array(x, copy=True)
        index = _index.numpy_index(self.idx_list, values)
        with _index.index_errors(self):
            adv = _runtime_broadcast(self, _arrays(self.idx_list, values))
            target = _index.runtime_shape(self.idx_list, x.shape, values, adv)
            _index.check_update(self, node.inputs[1], y, target)
            if self.set_instead_of_inc:
                out[index] = y
            else:
                # NumPy 2.5's add.at mis-adds a y that lacks leading dims with a 2-d index
                # (garbage values): give it the full target shape.
                np.add.at(out, index, np.broadcast_to(y, target))
        outputs[0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, y, *indices = inputs
        set_zero = AdvancedIncSubtensor(self.idx_list, True) if self.set_instead_of_inc else None
        get = AdvancedSubtensor(self.idx_list)
        return _index.update_grads(x, y, output_grads[0], indices, get, set_zero)


def advanced_getitem(x: TensorVariable, entries: Sequence[tuple[str, Any]]) -> TensorVariable:
    """Build ``x[index]`` from parsed entries that hold at least one index array."""
    entries = [("a", v) if kind == "i" else (kind, v) for kind, v in entries]
    if len(entries) == 1 and entries[0][1].ndim == 1:
        return AdvancedSubtensor1()(x, entries[0][1])
    idx_list, inputs = _index.encode(entries)
    return AdvancedSubtensor(idx_list)(x, *inputs)
