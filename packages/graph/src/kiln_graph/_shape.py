"""Shape Ops: building shape vectors, reshape, broadcast_to, and shape-changing views.

Reading shapes (Shape, ShapeI) and Alloc sit below, in :mod:`kiln_graph._alloc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _elemwise, _math, _subtensor
from kiln_graph._alloc import (
    Alloc,
    Shape,
    _static_scalar,
    shape,
    shape_tuple,
)
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES, TensorType


class MakeVector(Op):
    """Stack scalars into a vector of ``dtype``."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str = "int64") -> None:
        self.dtype = dtype

    def make_node(self, *scalars: Any) -> Apply:
        xs = [as_tensor(s) for s in scalars]
        for s in xs:
            if s.ndim != 0:
                raise KilnTypeError(f"{self}: expected scalars, got a {s.ndim}-d {s!r}")
        xs = [_elemwise.cast(s, self.dtype) for s in xs]
        return Apply.create(self, xs, [TensorType(self.dtype, (len(xs),))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.array(inputs, dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(shape_constant(len(node.inputs)),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        if self.dtype in DISCRETE_DTYPES:
            return [None] * len(inputs)
        (g,) = output_grads
        return [_subtensor.vector_item(g, i) for i in range(len(inputs))]  # type: ignore[arg-type]


def as_shape_vector(shape: Any, argname: str = "shape") -> TensorVariable:
    """Convert ints, scalar variables or an int vector variable to an int64 shape vector."""
    if isinstance(shape, Variable):
        shape_var = as_tensor(shape)
        if shape_var.ndim == 0:
            shape = (shape_var,)
        else:
            if shape_var.ndim != 1 or shape_var.dtype not in INTEGER_DTYPES:
                raise KilnTypeError(f"{argname}: expected an integer vector, got {shape_var.type}")
            return _elemwise.cast(shape_var, "int64")
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        items = tuple(shape)
    except TypeError as exc:
        raise KilnTypeError(f"{argname}: expected a sequence of ints, got {shape!r}") from exc
    if all(isinstance(s, int | np.integer) for s in items):
        return constant(np.array(items, dtype="int64").reshape(len(items)))
    scalars = []
    for s in items:
        v = as_tensor(s)
        if v.ndim != 0 or v.dtype not in INTEGER_DTYPES:
            raise KilnTypeError(f"{argname}: each entry must be an integer scalar, got {v.type}")
        scalars.append(v)
    return MakeVector("int64")(*scalars)


def static_entries(shape_vec: TensorVariable) -> list[int | None]:
    """Return the static value of each entry of an int64 shape vector (``None`` if unknown)."""
    n = shape_vec.type.shape[0]
    assert n is not None
    if isinstance(shape_vec, Constant):
        return [int(v) for v in shape_vec.data]
    owner = shape_vec.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return [int(s.data) if isinstance(s, Constant) else _static_scalar(s) for s in owner.inputs]
    if owner is not None and isinstance(owner.op, Shape):
        return list(owner.inputs[0].type.shape)  # type: ignore[attr-defined]
    return [None] * n


class Reshape(Op):
    """Reshape to a shape vector (one entry may be ``-1``)."""

    __props__ = ("ndim",)
    view_map = {0: [0]}  # np.reshape returns a view when it can

    def __init__(self, ndim: int) -> None:
        self.ndim = int(ndim)

    def make_node(self, x: Any, shp: Any) -> Apply:
        x = as_tensor(x)
        shp = as_shape_vector(shp)
        if shp.type.shape[0] != self.ndim:
            raise KilnValueError(f"{self}: the shape vector must have length {self.ndim}")
        entries = static_entries(shp)
        if sum(1 for e in entries if e == -1) > 1:
            raise KilnValueError("reshape: at most one dimension can be -1")
        out: list[int | None] = [e if e is None or e >= 0 else None for e in entries]
        size = _static_size(x.type.shape)
        rest = _static_size(tuple(e for e in entries if e != -1))  # None: an entry is unknown
        if -1 in entries and size is not None and rest is not None:
            if rest == 0 or size % rest:
                raise ShapeMismatchError(
                    f"reshape: cannot reshape {x.type.shape} into {tuple(entries)}"
                )
            out[entries.index(-1)] = size // rest
        if None not in out and size is not None and _static_size(tuple(out)) != size:
            raise ShapeMismatchError(f"reshape: cannot reshape {x.type.shape} into {tuple(out)}")
        return Apply.create(self, [x, shp], [TensorType(x.dtype, tuple(out))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, shp = inputs
        try:
            outputs[0] = np.reshape(x, tuple(shp))
        except ValueError as exc:
            raise ShapeMismatchError(f"reshape: {exc}") from exc

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        out = node.outputs[0]
        entries = _entry_scalars(node.inputs[1])
        if entries is None:  # a shape vector of unknown entries: read the output's shape
            return [shape_tuple(out)]
        # A -1 entry stands for size(x) // prod(the other entries).
        known = [_math.switch(_math.eq(e, -1), 1, e) for e in entries]
        missing = _math.floor_divide(_product(input_shapes[0]), _product(known))
        dims: list[Variable] = []
        for n, e in zip(out.type.shape, entries, strict=True):  # type: ignore[attr-defined]
            if n is not None:
                dims.append(shape_constant(n))
            elif isinstance(e, Constant):
                dims.append(missing if int(e.data) == -1 else e)
            else:
                dims.append(_math.switch(_math.eq(e, -1), missing, e))
        return [tuple(dims)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, _ = inputs
        (g,) = output_grads
        return [reshape(g, shape(x)), None]


def _entry_scalars(shape_vec: Variable) -> list[Variable] | None:
    """Return the int64 scalar entries of a shape vector, or ``None`` if not readable."""
    if isinstance(shape_vec, Constant):
        return [shape_constant(int(v)) for v in shape_vec.data]
    owner = shape_vec.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return list(owner.inputs)
    if owner is not None and isinstance(owner.op, Shape):
        return list(shape_tuple(owner.inputs[0]))
    return None


def _product(dims: Sequence[Variable]) -> Variable:
    if not dims:
        return shape_constant(1)
    return dims[0] if len(dims) == 1 else _math.mul(*dims)


def _static_size(shape: tuple[int | None, ...]) -> int | None:
    known = [n for n in shape if n is not None]
    if len(known) < len(shape):
        return None
    return int(np.prod(known, dtype="int64"))


def reshape(x: Any, newshape: Any) -> TensorVariable:
    """Return ``x`` with shape ``newshape`` (ints, scalar variables or a vector variable).

    Examples
    --------
    >>> reshape(x, (2, -1))  # doctest: +SKIP
    """
    x = as_tensor(x)
    shp = as_shape_vector(newshape, "newshape")
    n = shp.type.shape[0]
    if n is None:
        raise KilnValueError("reshape: the length of newshape must be known statically")
    if isinstance(shp, Constant) and tuple(shp.data) == x.type.shape:
        return x
    return Reshape(n)(x, shp)


def flatten(x: Any) -> TensorVariable:
    """Return ``x`` as a vector (C order)."""
    return reshape(x, (-1,))


def _as_scalars(shape: Any) -> list[Any]:
    if isinstance(shape, Variable) and as_tensor(shape).ndim == 1:
        vec = as_tensor(shape)
        n = vec.type.shape[0]
        if n is None:
            raise KilnValueError("shape: the length of a shape vector must be known statically")
        entries = static_entries(vec)
        return [
            e if e is not None else _subtensor.vector_item(vec, i) for i, e in enumerate(entries)
        ]
    if isinstance(shape, int | np.integer | Variable):
        return [shape]
    return list(shape)


def broadcast_to(x: Any, shape: Any) -> TensorVariable:
    """Broadcast ``x`` to ``shape`` (ints, scalar variables or a shape vector)."""
    x = as_tensor(x)
    dims = _as_scalars(shape)
    if all(isinstance(d, int | np.integer) for d in dims) and tuple(dims) == x.type.shape:
        return x
    return Alloc()(x, *dims)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> TensorVariable:
    """Return an array of ``shape`` filled with ``fill_value``."""
    value = as_tensor(fill_value, dtype=dtype)
    if dtype is not None:
        value = _elemwise.cast(value, dtype)
    return Alloc()(value, *_as_scalars(shape))


def zeros(shape: Any, dtype: Any = "float64") -> TensorVariable:
    """Return an array of zeros."""
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = "float64") -> TensorVariable:
    """Return an array of ones."""
    return full(shape, 1, dtype)


def transpose(x: Any, axes: Sequence[int] | None = None) -> TensorVariable:
    """Permute the dimensions (reverse them by default)."""
    x = as_tensor(x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(_normalize_axis(a, x.ndim, "axes") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise KilnValueError(f"transpose: axes {axes} is not a permutation of {x.ndim} dims")
    return _elemwise.dimshuffle(x, axes)


def _normalize_axis(axis: Any, ndim: int, argname: str = "axis") -> int:
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise KilnTypeError(f"{argname}: expected an int, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise KilnValueError(f"{argname}: {axis} is out of range for a {ndim}-d tensor")
    return int(axis) % max(ndim, 1)


def expand_dims(x: Any, axis: int | Sequence[int]) -> TensorVariable:
    """Insert new dimensions of length 1 at ``axis``."""
    x = as_tensor(x)
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out_ndim = x.ndim + len(axes)
    norm = sorted(_normalize_axis(a, out_ndim) for a in axes)
    if len(set(norm)) != len(norm):
        raise KilnValueError(f"expand_dims: repeated axis in {axis!r}")
    pattern: list[int | str] = []
    src = iter(range(x.ndim))
    for d in range(out_ndim):
        pattern.append("x" if d in norm else next(src))
    return _elemwise.dimshuffle(x, pattern)


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> TensorVariable:
    """Remove dimensions of static length 1 (all of them, or those in ``axis``)."""
    x = as_tensor(x)
    if axis is None:
        axes = [d for d, n in enumerate(x.type.shape) if n == 1]
    else:
        raw = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
        axes = [_normalize_axis(a, x.ndim) for a in raw]
        for a in axes:
            if x.type.shape[a] != 1:
                raise KilnValueError(
                    f"squeeze: dimension {a} of {x!r} has static length {x.type.shape[a]}, not 1"
                )
    return _elemwise.dimshuffle(x, [d for d in range(x.ndim) if d not in axes])
