"""Basic indexing ops: :class:`Subtensor` (``x[index]``) and :class:`IncSubtensor`.

How an index is stored (``idx_list`` plus index inputs) and the shared shape rules are in
:mod:`kiln_graph._index`; parsing a Python index and ``set_subtensor`` /
``inc_subtensor`` are in :mod:`kiln_graph._getitem`. An index out of bounds raises
:class:`~kiln_graph._errors.KilnIndexError`: when the graph is built if the index and the
length are both known then, else when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _alloc, _elemwise, _index
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable, inplace_copy
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES, TensorType

INT, ARRAY, NEWAXIS, FULL_SLICE = _index.INT, _index.ARRAY, _index.NEWAXIS, _index.FULL_SLICE

# --- basic indexing Ops -----------------------------------------------------------------


class Subtensor(Op):
    """Basic indexing ``x[index]``: integers, slices and new axes (a view of ``x``).

    The inputs are ``x`` then the index's int scalars, in the order of ``idx_list``.
    """

    __props__ = ("idx_list",)
    view_map = {0: [0]}

    def __init__(self, idx_list: Sequence[Any]) -> None:
        self.idx_list = _index.check_idx_list(idx_list, (INT, NEWAXIS), "Subtensor")

    def __str__(self) -> str:
        return f"Subtensor{{{_index.idx_str(self.idx_list)}}}"

    def make_node(self, x: Any, *indices: Any) -> Apply:
        x = as_tensor(x)
        inputs = _index.check_index_inputs(self, x, self.idx_list, indices)
        shape = _index.static_shape(self.idx_list, x, inputs)
        return Apply.create(self, [x, *inputs], [TensorType(x.dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, *values = inputs
        with _index.index_errors(self):
            outputs[0] = np.asarray(x[_index.numpy_index(self.idx_list, values)])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [_index.symbolic_shape(self.idx_list, input_shapes[0], node.inputs[1:])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, *indices = inputs
        (g,) = output_grads
        if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
            return [None] * len(inputs)
        g = _elemwise.cast(g, x.type.dtype)  # type: ignore[attr-defined]
        gx = IncSubtensor(self.idx_list)(_alloc.zeros_like(x), g, *indices)
        return [gx] + [None] * len(indices)


class IncSubtensor(Op):
    """``x`` with ``x[index]`` incremented by ``y`` (or set to ``y``), basic indexing.

    The inputs are ``x``, ``y`` and the index's int scalars. ``y`` broadcasts to the
    region along missing leading dimensions and dimensions of static length 1.
    ``perform`` copies ``x`` unless ``inplace`` (set only by the in-place phase).
    """

    __props__ = ("idx_list", "set_instead_of_inc", "inplace")

    def __init__(
        self, idx_list: Sequence[Any], set_instead_of_inc: bool = False, inplace: bool = False
    ) -> None:
        self.idx_list = _index.check_idx_list(idx_list, (INT, NEWAXIS), "IncSubtensor")
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        kind = "Set" if self.set_instead_of_inc else "Inc"
        return f"{kind}Subtensor{{{_index.idx_str(self.idx_list)}}}" + ("[inplace]" * self.inplace)

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Update ``x`` itself instead of a copy (output 0 takes input 0's buffer)."""
        return [] if self.inplace else [(0, inplace_copy(self))]

    def make_node(self, x: Any, y: Any, *indices: Any) -> Apply:
        x = as_tensor(x)
        y = _index.as_update_value(self, y, x.dtype)
        inputs = _index.check_index_inputs(self, x, self.idx_list, indices)
        _index.check_static_update(self, y, _index.static_shape(self.idx_list, x, inputs))
        return Apply.create(self, [x, y, *inputs], [x.type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, y, *values = inputs
        out = x if self.inplace and _index.writeable(x) else np.array(x, copy=True)
        index = _index.numpy_index(self.idx_list, values)
        with _index.index_errors(self):
            _index.check_update(self, node.inputs[1], y, np.shape(out[index]))
            if self.set_instead_of_inc:
                out[index] = y
            else:
                out[index] += y
        outputs[0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, y, *indices = inputs
        set_zero = IncSubtensor(self.idx_list, True) if self.set_instead_of_inc else None
        return _index.update_grads(
            x, y, output_grads[0], indices, Subtensor(self.idx_list), set_zero
        )


def fold(out: TensorVariable) -> TensorVariable:
    """Keep shape arithmetic static: fold ``shape(x)[i]`` and indexing of int constants."""
    node = out.owner
    assert node is not None and isinstance(node.op, Subtensor)
    idx_list, (x, *indices) = node.op.idx_list, node.inputs
    if not all(isinstance(v, Constant) for v in indices):
        return out
    if isinstance(x, Constant) and x.dtype in INTEGER_DTYPES and x.ndim <= 1:
        values = [v.data for v in indices]  # type: ignore[attr-defined]
        return constant(x.data[_index.numpy_index(idx_list, values)])
    if x.owner is not None and isinstance(x.owner.op, _alloc.Shape) and idx_list == (INT,):
        ndim = x.owner.inputs[0].type.ndim  # type: ignore[attr-defined]
        return _alloc.shape_i(x.owner.inputs[0], int(indices[0].data) % ndim)  # type: ignore[attr-defined]
    return out


def vector_item(x: TensorVariable, i: int) -> TensorVariable:
    """Return ``x[i]`` of a vector for a Python int ``i`` (folded when static)."""
    return fold(Subtensor((INT,))(x, shape_constant(i)))
