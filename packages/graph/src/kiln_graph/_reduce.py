"""Reductions over axes: sum, prod, max, min, all, any (and functions built on them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kiln_graph import _elemwise, _math, _shape
from kiln_graph._basic import as_tensor
from kiln_graph._errors import KilnTypeError, KilnValueError
from kiln_graph._node import Apply, Op, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, TensorType


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Turn ``axis`` (None, an int or a sequence of ints, negatives allowed) into sorted
    non-negative axes, with a clear error for an axis out of range or repeated."""
    if axis is None:
        return tuple(range(ndim))
    raw = (axis,) if isinstance(axis, int | np.integer) else axis
    try:
        items = tuple(raw)
    except TypeError as exc:
        raise KilnTypeError(f"axis: expected None, an int or ints, got {axis!r}") from exc
    out = []
    for a in items:
        if not isinstance(a, int | np.integer) or isinstance(a, bool):
            raise KilnTypeError(f"axis: expected ints, got {a!r}")
        if not -ndim <= a < ndim:
            raise KilnValueError(f"axis: {a} is out of range for a {ndim}-d tensor")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise KilnValueError(f"axis: repeated axis in {axis!r}")
    return tuple(sorted(out))


class CAReduce(Op):
    """Reduce ``axis`` with a commutative, associative operation (``kind``)."""

    __props__ = ("kind", "axis")
    _numpy: ClassVar[dict[str, Any]] = {
        "sum": np.sum,
        "prod": np.prod,
        "max": np.max,
        "min": np.min,
        "all": np.all,
        "any": np.any,
    }

    def __init__(self, kind: str, axis: tuple[int, ...]) -> None:
        if kind not in self._numpy:
            raise KilnValueError(f"kind: expected one of {sorted(self._numpy)}, got {kind!r}")
        self.kind = kind
        self.axis = tuple(axis)

    def __str__(self) -> str:
        return f"{self.kind.capitalize()}{{axis={self.axis}}}"

    def output_dtype(self, dtype: str) -> str:
        """The dtype of the result for an input of ``dtype`` (NumPy's rules)."""
        if self.kind in ("all", "any"):
            return "bool"
        if self.kind in ("sum", "prod"):
            if dtype == "bool" or dtype.startswith("int"):
                return "int64" if np.dtype(dtype).itemsize <= 8 else dtype
            if dtype.startswith("uint"):
                return "uint64"
        return dtype

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        for a in self.axis:
            if not 0 <= a < x.ndim:
                raise KilnValueError(f"{self}: axis {a} is out of range for a {x.ndim}-d tensor")
        shape = tuple(n for d, n in enumerate(x.type.shape) if d not in self.axis)
        if self.kind in ("max", "min"):
            for a in self.axis:
                if x.type.shape[a] == 0:
                    raise KilnValueError(f"{self}: cannot reduce a zero-length axis {a}")
        return Apply.create(self, [x], [TensorType(self.output_dtype(x.dtype), shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        (x,) = inputs
        dtype = node.outputs[0].type.dtype
        if self.kind in ("sum", "prod"):
            res = self._numpy[self.kind](x, axis=self.axis, dtype=dtype)
        else:
            res = self._numpy[self.kind](x, axis=self.axis)
        outputs[0] = np.asarray(res, dtype=dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        return [tuple(s for d, s in enumerate(shp) if d not in self.axis)]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        (x,) = inputs
        (out,) = outputs
        (g,) = output_grads
        if x.type.dtype in DISCRETE_DTYPES or self.kind in ("all", "any"):  # type: ignore[attr-defined]
            return [None]
        g_full = _shape.broadcast_to(_restore_axes(g, self.axis, x.ndim), _shape.shape_tuple(x))  # type: ignore[attr-defined]
        if self.kind == "sum":
            return [g_full]
        out_full = _restore_axes(out, self.axis, x.ndim)  # type: ignore[attr-defined]
        if self.kind == "prod":
            # d prod / d x_i = prod / x_i  (exact for non-zero entries)
            return [_math.mul(g_full, _math.true_divide(out_full, x))]
        # max/min: the gradient flows to every entry equal to the extremum.
        mask = _elemwise.cast(_math.eq(x, out_full), x.type.dtype)  # type: ignore[attr-defined]
        return [_math.mul(g_full, mask)]


def _restore_axes(v: Any, axis: tuple[int, ...], ndim: int) -> TensorVariable:
    """Insert length-1 dimensions at the reduced ``axis`` positions."""
    src = iter(range(ndim - len(axis)))
    return _elemwise.dimshuffle(v, ["x" if d in axis else next(src) for d in range(ndim)])


def sum_axes(x: Any, axis: tuple[int, ...], keepdims: bool) -> TensorVariable:
    """Sum over the normalized ``axis``, keeping reduced dimensions if ``keepdims``."""
    return _reduce("sum", x, axis, keepdims)


def _reduce(kind: str, x: Any, axis: Any, keepdims: bool) -> TensorVariable:
    x = as_tensor(x)
    axes = normalize_axes(axis, x.ndim)
    if not axes:
        out = x
        if kind in ("all", "any"):
            out = _elemwise.cast(_math.neq(x, 0), "bool")
        return out
    out = CAReduce(kind, axes)(x)
    if keepdims:
        out = _restore_axes(out, axes, x.ndim)
    return out


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:  # noqa: A001
    """Sum of elements over ``axis`` (all axes by default).

    Examples
    --------
    >>> sum(x, axis=0)  # doctest: +SKIP
    """
    return _reduce("sum", x, axis, keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:
    """Product of elements over ``axis``."""
    return _reduce("prod", x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:  # noqa: A001
    """Maximum over ``axis``."""
    return _reduce("max", x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:  # noqa: A001
    """Minimum over ``axis``."""
    return _reduce("min", x, axis, keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:  # noqa: A001
    """Whether all elements over ``axis`` are true."""
    return _reduce("all", x, axis, keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:  # noqa: A001
    """Whether any element over ``axis`` is true."""
    return _reduce("any", x, axis, keepdims)
