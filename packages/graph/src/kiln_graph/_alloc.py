"""Reading shapes and allocating arrays: Shape, ShapeI and Alloc.

These sit just above Elemwise, below the math, indexing and reshaping families, which
all read shapes or allocate zeros (gradients do both). Symbolic shapes are tuples of
int64 scalar variables: a constant where the static length is known, ``ShapeI(i)(x)``
otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _elemwise
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES, TensorType


class Shape(Op):
    """The shape of a tensor as an int64 vector."""

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        return Apply.create(self, [x], [TensorType("int64", (x.ndim,))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.array(inputs[0].shape, dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(shape_constant(node.inputs[0].type.ndim),)]  # type: ignore[attr-defined]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [None]


class ShapeI(Op):
    """The length of dimension ``i`` as an int64 scalar."""

    __props__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = int(i)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        if not 0 <= self.i < x.ndim:
            raise KilnValueError(f"shape_i: dimension {self.i} out of range for {x.ndim}-d {x!r}")
        return Apply.create(self, [x], [TensorType("int64", ())])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.array(inputs[0].shape[self.i], dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [None]


def shape(x: Any) -> TensorVariable:
    """Return the shape of ``x`` as a symbolic int64 vector (a constant when fully static)."""
    x = as_tensor(x)
    if None not in x.type.shape:
        return constant(np.array(x.type.shape, dtype="int64"))
    return Shape()(x)


def shape_i(x: Any, i: int) -> TensorVariable:
    """Return the length of dimension ``i`` of ``x``: a constant when static."""
    x = as_tensor(x)
    if not isinstance(i, int | np.integer) or not -x.ndim <= i < x.ndim:
        raise KilnValueError(f"shape_i: dimension {i!r} is out of range for a {x.ndim}-d tensor")
    n = x.type.shape[i]
    return shape_constant(n) if n is not None else ShapeI(i % x.ndim)(x)


def shape_tuple(x: Any) -> tuple[TensorVariable, ...]:
    """Return the shape of ``x`` as a tuple of int64 scalar variables."""
    x = as_tensor(x)
    return tuple(shape_i(x, i) for i in range(x.ndim))


def _static_scalar(s: Variable) -> int | None:
    if s.owner is not None and isinstance(s.owner.op, ShapeI):
        return s.owner.inputs[0].type.shape[s.owner.op.i]  # type: ignore[attr-defined]
    return None


class Alloc(Op):
    """Broadcast ``x`` to a shape given as scalars, materialising a new array."""

    def make_node(self, x: Any, *shape: Any) -> Apply:
        x = as_tensor(x)
        dims = [as_tensor(s) for s in shape]
        for d in dims:
            if d.ndim != 0 or d.dtype not in INTEGER_DTYPES:
                raise KilnTypeError(f"alloc: each shape entry must be an integer scalar, got {d}")
        if len(dims) < x.ndim:
            raise KilnValueError(
                f"alloc: cannot broadcast a {x.ndim}-d value to {len(dims)} dimensions"
            )
        static: list[int | None] = []
        for d in dims:
            static.append(int(d.data) if isinstance(d, Constant) else _static_scalar(d))
        offset = len(dims) - x.ndim
        for i, n in enumerate(x.type.shape):
            target = static[offset + i]
            if n is not None and n != 1 and target is not None and n != target:
                raise ShapeMismatchError(
                    f"alloc: cannot broadcast shape {x.type.shape} to {tuple(static)}"
                )
            if target is None and n is not None and n != 1:
                static[offset + i] = n
        dims = [_elemwise.cast(d, "int64") for d in dims]
        return Apply.create(self, [x, *dims], [TensorType(x.dtype, tuple(static))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, *shp = inputs
        target = tuple(int(s) for s in shp)
        xs = node.inputs[0].type.shape  # type: ignore[attr-defined]
        offset = len(target) - x.ndim
        for i, n in enumerate(x.shape):
            if n != target[offset + i] and (n != 1 or xs[i] != 1):
                raise ShapeMismatchError(
                    f"alloc: cannot broadcast an array of shape {x.shape} to {target}"
                    + (" (only static length-1 dimensions broadcast)" if n == 1 else "")
                )
        outputs[0] = np.array(np.broadcast_to(x, target))

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(node.inputs[1:])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x = inputs[0]
        (g,) = output_grads
        gx = (
            None if getattr(x.type, "dtype", None) in DISCRETE_DTYPES else g
        )  # summed to x's shape by grad
        return [gx] + [None] * (len(inputs) - 1)


def alloc(value: Any, *shape: Any) -> TensorVariable:
    """Return an array of ``shape`` filled by broadcasting ``value``."""
    return Alloc()(as_tensor(value), *shape)


def _filled(x: Any, value: int, dtype: Any) -> TensorVariable:
    x = as_tensor(x)
    dtype = dtype or x.dtype
    fill = _elemwise.cast(as_tensor(value, dtype=dtype), dtype)
    return Alloc()(fill, *shape_tuple(x))


def zeros_like(x: Any, dtype: Any = None) -> TensorVariable:
    """Zeros with the shape (and by default the dtype) of ``x``."""
    x = as_tensor(x)
    return _filled(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> TensorVariable:
    """Ones with the shape (and by default the dtype) of ``x``."""
    x = as_tensor(x)
    return _filled(x, 1, dtype)
