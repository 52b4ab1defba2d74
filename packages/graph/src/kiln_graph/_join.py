"""Joining tensors along an axis (concatenate, stack) and splitting them apart.

:class:`Join` concatenates; :class:`Split` cuts a tensor into pieces of given lengths
along one axis and is the gradient of :class:`Join` (and the other way round).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _alloc, _elemwise, _math, _reduce, _shape
from kiln_graph._basic import as_tensor, shape_constant
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES, TensorType


def _merge_dim(dims: Sequence[int | None], what: str) -> int | None:
    """Return the one static length among ``dims`` (``None`` if all unknown)."""
    known = {d for d in dims if d is not None}
    if len(known) > 1:
        raise ShapeMismatchError(f"{what}: static lengths {list(dims)} differ")
    return known.pop() if known else None


class Join(Op):
    """Concatenate tensors of the same rank along ``axis``.

    All inputs have the output dtype (:func:`concatenate` casts them first); the
    lengths of the other dimensions must agree, checked statically where known and at
    run time otherwise.
    """

    __props__ = ("axis",)

    def __init__(self, axis: int) -> None:
        self.axis = int(axis)

    def make_node(self, *tensors: Any) -> Apply:
        if not tensors:
            raise KilnValueError(f"{self}: expected at least one tensor")
        xs = [as_tensor(t) for t in tensors]
        ndim = xs[0].ndim
        for i, x in enumerate(xs):
            if x.ndim != ndim:
                raise KilnValueError(
                    f"concatenate: tensors[{i}] has {x.ndim} dimension(s) but tensors[0] has "
                    f"{ndim}; all inputs must have the same number of dimensions"
                )
        if not 0 <= self.axis < ndim:
            raise KilnValueError(f"{self}: axis {self.axis} is out of range for {ndim}-d inputs")
        dtype = _elemwise.upcast(*(x.dtype for x in xs))
        xs = [_elemwise.cast(x, dtype) for x in xs]
        shape: list[int | None] = []
        for d in range(ndim):
            dims = [x.type.shape[d] for x in xs]
            if d == self.axis:
                known = [n for n in dims if n is not None]
                shape.append(sum(known) if len(known) == len(dims) else None)
            else:
                try:
                    shape.append(_merge_dim(dims, "concatenate"))
                except ShapeMismatchError:
                    raise ShapeMismatchError(
                        f"concatenate: the inputs' lengths in dimension {d} differ "
                        f"(static shapes {', '.join(str(x.type.shape) for x in xs)}); only "
                        f"the concatenation axis {self.axis} may differ"
                    ) from None
        return Apply.create(self, xs, [TensorType(dtype, tuple(shape))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        first = inputs[0].shape
        for i, x in enumerate(inputs[1:], start=1):
            for d, (n, n0) in enumerate(zip(x.shape, first, strict=True)):
                if d != self.axis and n != n0:
                    raise ShapeMismatchError(
                        f"concatenate: tensors[{i}] has shape {x.shape} and tensors[0] has "
                        f"shape {first}; they differ in dimension {d}, but only the "
                        f"concatenation axis {self.axis} may differ"
                    )
        outputs[0] = np.concatenate(inputs, axis=self.axis)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        out: list[Variable] = []
        for d, n in enumerate(node.outputs[0].type.shape):  # type: ignore[attr-defined]
            if n is not None:
                out.append(shape_constant(n))
            elif d == self.axis:
                dims = [shp[d] for shp in input_shapes]
                out.append(dims[0] if len(dims) == 1 else _math.add(*dims))
            else:
                out.append(input_shapes[0][d])
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (g,) = output_grads
        if _dtype_of(inputs[0]) in DISCRETE_DTYPES:
            return [None] * len(inputs)
        sizes = [_alloc.shape_i(x, self.axis) for x in inputs]
        return list(Split(self.axis, len(inputs)).make_node(g, *sizes).outputs)


def _dtype_of(v: Variable) -> str:
    """Return the dtype of a tensor variable."""
    return v.type.dtype  # type: ignore[attr-defined, no-any-return]


class Split(Op):
    """Cut ``x`` along ``axis`` into ``n`` consecutive pieces of the given lengths.

    The inputs are ``x`` and ``n`` int64 scalars (the lengths), which must add up to
    ``x``'s length along ``axis``. The pieces are views of ``x``.
    """

    __props__ = ("axis", "n")

    def __init__(self, axis: int, n: int) -> None:
        self.axis = int(axis)
        self.n = int(n)
        if self.n < 1:
            raise KilnValueError(f"Split: n must be at least 1, got {n}")
        self.view_map = {i: [0] for i in range(self.n)}

    def make_node(self, x: Any, *sizes: Any) -> Apply:
        x = as_tensor(x)
        if not 0 <= self.axis < x.ndim:
            raise KilnValueError(f"{self}: axis {self.axis} is out of range for a {x.ndim}-d x")
        if len(sizes) != self.n:
            raise KilnValueError(f"{self}: expected {self.n} lengths, got {len(sizes)}")
        lengths = [as_tensor(s) for s in sizes]
        for i, s in enumerate(lengths):
            if s.ndim != 0 or s.dtype not in INTEGER_DTYPES:
                raise KilnTypeError(f"split: sizes[{i}] must be an integer scalar, got {s.type}")
        lengths = [_elemwise.cast(s, "int64") for s in lengths]
        static = [int(s.data) if isinstance(s, Constant) else None for s in lengths]
        if any(n is not None and n < 0 for n in static):
            raise KilnValueError(f"split: sizes must be non-negative, got {static}")
        total = x.type.shape[self.axis]
        if total is not None and None not in static and sum(static) != total:  # type: ignore[arg-type]
            raise ShapeMismatchError(
                f"split: the sizes {static} add up to {sum(static)}, but dimension "  # type: ignore[arg-type]
                f"{self.axis} of x has length {total}"
            )
        types = []
        for n in static:
            shape = list(x.type.shape)
            shape[self.axis] = n
            types.append(TensorType(x.dtype, tuple(shape)))
        return Apply.create(self, [x, *lengths], types)

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, *sizes = inputs
        lengths = [int(s) for s in sizes]
        if any(n < 0 for n in lengths) or sum(lengths) != x.shape[self.axis]:
            raise ShapeMismatchError(
                f"split: cannot cut a length-{x.shape[self.axis]} dimension {self.axis} "
                f"into pieces of lengths {lengths}"
            )
        pieces = np.split(x, np.cumsum(lengths[:-1]), axis=self.axis)
        for i, p in enumerate(pieces):
            outputs[i] = p

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        shp = input_shapes[0]
        return [
            tuple(s if d != self.axis else size for d, s in enumerate(shp))
            for size in node.inputs[1:]
        ]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        nones: list[Variable | None] = [None] * self.n
        if _dtype_of(inputs[0]) in DISCRETE_DTYPES:
            return [None, *nones]
        return [Join(self.axis)(*output_grads), *nones]


def _check_tensor_list(tensors: Any, fn: str) -> list[TensorVariable]:
    if isinstance(tensors, Variable) or not isinstance(tensors, list | tuple):
        raise KilnTypeError(
            f"{fn}: tensors must be a list or tuple of tensors, got {type(tensors).__name__}"
        )
    if not tensors:
        raise KilnValueError(f"{fn}: tensors must not be empty")
    return [as_tensor(t) for t in tensors]


def concatenate(tensors: Sequence[Any], axis: int | None = 0) -> TensorVariable:
    """Join ``tensors`` along an existing ``axis`` (after flattening each if ``None``).

    The result dtype is NumPy's promotion of the inputs' dtypes. The lengths of the
    other dimensions must agree.

    Examples
    --------
    >>> x, y = kt.matrix("x"), kt.matrix("y")  # doctest: +SKIP
    >>> kt.concatenate([x, y], axis=1)  # doctest: +SKIP
    """
    xs = _check_tensor_list(tensors, "concatenate")
    if axis is None:
        xs = [_shape.flatten(x) for x in xs]
        axis = 0
    if any(x.ndim == 0 for x in xs):
        raise KilnValueError(
            "concatenate: 0-d tensors cannot be concatenated; use kt.stack, or axis=None"
        )
    ax = _reduce.normalize_axes(_int_axis(axis, "concatenate"), xs[0].ndim)[0]
    if len(xs) == 1:
        return xs[0]
    return Join(ax)(*xs)


def _int_axis(axis: Any, fn: str) -> int:
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise KilnTypeError(f"{fn}: axis must be an int, got {axis!r}")
    return int(axis)


def stack(tensors: Sequence[Any], axis: int = 0) -> TensorVariable:
    """Join tensors of the same shape along a new ``axis``.

    Examples
    --------
    >>> kt.stack([x, y], axis=-1)  # doctest: +SKIP
    """
    xs = _check_tensor_list(tensors, "stack")
    ndim = xs[0].ndim
    for i, x in enumerate(xs):
        if x.ndim != ndim:
            raise KilnValueError(
                f"stack: tensors[{i}] has {x.ndim} dimension(s) but tensors[0] has {ndim}; "
                "all inputs must have the same shape"
            )
    ax = _reduce.normalize_axes(_int_axis(axis, "stack"), ndim + 1)[0]
    return concatenate([_shape.expand_dims(x, ax) for x in xs], axis=ax)
