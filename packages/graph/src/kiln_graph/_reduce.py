"""Reductions over axes: sum, prod, max, min, all, any, and functions built on them.

Also mean / var / std, argmax, logsumexp and cumsum.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from kiln_graph import _alloc, _elemwise, _math, _shape
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import KilnTypeError, KilnValueError
from kiln_graph._node import Apply, Op, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, FLOAT_DTYPES, TensorType


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Turn ``axis`` (None, an int or ints, negatives allowed) into sorted axes >= 0.

    Raises
    ------
    KilnValueError
        If an axis is out of range for ``ndim`` dimensions, or repeated.
    """
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
        """Return the dtype of the result for an input of ``dtype`` (NumPy's rules)."""
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
        dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
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
        g_full = _shape.broadcast_to(_restore_axes(g, self.axis, x.ndim), _alloc.shape_tuple(x))  # type: ignore[attr-defined]
        if self.kind == "sum":
            return [g_full]
        out_full = _restore_axes(out, self.axis, x.ndim)  # type: ignore[attr-defined]
        if self.kind == "prod":
            # d prod / d x_i = prod_{j != i} x_j: prod / x_i where x_i != 0; at a zero
            # entry, the product of the non-zero entries if it is the only zero, else 0.
            is_zero = _math.eq(x, 0)
            nonzero_prod = CAReduce("prod", self.axis)(_math.switch(is_zero, 1, x))
            one_zero = _math.eq(CAReduce("sum", self.axis)(is_zero), 1)
            at_zero = _math.mul(nonzero_prod, _elemwise.cast(one_zero, x.type.dtype))  # type: ignore[attr-defined]
            at_zero_full = _restore_axes(at_zero, self.axis, x.ndim)  # type: ignore[attr-defined]
            safe_x = _math.switch(is_zero, 1, x)
            dx = _math.switch(is_zero, at_zero_full, _math.true_divide(out_full, safe_x))
            return [_math.mul(g_full, dx)]
        # max/min: the gradient is split equally among the entries equal to the extremum
        # (kiln_graph._math's convention at ties).
        mask = _elemwise.cast(_math.eq(x, out_full), x.type.dtype)  # type: ignore[attr-defined]
        ties = _restore_axes(CAReduce("sum", self.axis)(mask), self.axis, x.ndim)  # type: ignore[attr-defined]
        return [_math.mul(g_full, _math.true_divide(mask, ties))]


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
        if kind in ("all", "any"):
            return _elemwise.cast(_math.neq(x, 0), "bool")
        return _elemwise.cast(x, CAReduce(kind, ()).output_dtype(x.dtype))
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


# --- mean, var, std ----------------------------------------------------------------------


def _float_result_dtype(dtype: str, fn: str) -> str:
    """Return the dtype of ``mean`` / ``var``: floats keep theirs, the rest float64."""
    if dtype.startswith("complex"):
        raise KilnTypeError(f"{fn}: complex input (dtype {dtype}) is not supported")
    return dtype if dtype in FLOAT_DTYPES else "float64"


def _count(x: TensorVariable, axes: tuple[int, ...]) -> TensorVariable | int:
    """Count the elements reduced over ``axes``: an int when static, else int64."""
    static = _static_size(tuple(x.type.shape[a] for a in axes))
    if static is not None:
        return static
    dims = [_alloc.shape_i(x, a) for a in axes]
    return dims[0] if len(dims) == 1 else _math.mul(*dims)


def _as_float(n: TensorVariable | int | float, dtype: str) -> TensorVariable:
    if isinstance(n, int | float):
        return constant(np.asarray(n, dtype=dtype))
    return _elemwise.cast(n, dtype)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:
    """Compute the arithmetic mean over ``axis`` (all axes by default).

    Integer and boolean inputs give ``float64``, float inputs keep their dtype
    (NumPy's rule); ``float16`` is accumulated in ``float32``.

    Examples
    --------
    >>> x = kt.matrix("x")  # doctest: +SKIP
    >>> kt.mean(x, axis=1, keepdims=True)  # doctest: +SKIP
    """
    x = as_tensor(x)
    axes = normalize_axes(axis, x.ndim)
    dtype = _float_result_dtype(x.dtype, "mean")
    acc = "float32" if dtype == "float16" else dtype
    total = sum_axes(_elemwise.cast(x, acc), axes, keepdims)
    out = _math.true_divide(total, _as_float(_count(x, axes), acc))
    return _elemwise.cast(out, dtype)


def var(x: Any, axis: Any = None, ddof: int | float = 0, keepdims: bool = False) -> TensorVariable:
    """Compute the variance over ``axis``: ``sum((x - mean(x))**2) / (N - ddof)``.

    ``ddof`` ("delta degrees of freedom") is 0 for the population variance and 1 for
    the unbiased sample variance. Dtypes follow :func:`mean`.

    Examples
    --------
    >>> kt.var(x, axis=0, ddof=1)  # doctest: +SKIP
    """
    x = as_tensor(x)
    axes = normalize_axes(axis, x.ndim)
    if not isinstance(ddof, int | float | np.integer | np.floating) or isinstance(ddof, bool):
        raise KilnTypeError(f"ddof: expected an int or a float, got {ddof!r}")
    dtype = _float_result_dtype(x.dtype, "var")
    acc = "float32" if dtype == "float16" else dtype
    xf = _elemwise.cast(x, acc)
    centered = _math.sub(xf, mean(xf, axes, keepdims=True))
    sq = sum_axes(_math.mul(centered, centered), axes, keepdims)
    n = _count(x, axes)
    # NumPy divides by max(N - ddof, 0): inf or nan when there are too few elements.
    if isinstance(n, int):
        denom = _as_float(builtins.max(n - float(ddof), 0.0), acc)
    else:
        denom = _math.maximum(_math.sub(_as_float(n, acc), float(ddof)), 0.0)
    return _elemwise.cast(_math.true_divide(sq, denom), dtype)


def std(x: Any, axis: Any = None, ddof: int | float = 0, keepdims: bool = False) -> TensorVariable:
    """Compute the standard deviation over ``axis``: ``sqrt(var(x, axis, ddof))``.

    Examples
    --------
    >>> kt.std(x, axis=-1)  # doctest: +SKIP
    """
    return _math.sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims))


# --- argmax ------------------------------------------------------------------------------


class Argmax(Op):
    """Index of the maximum along ``axis`` (``None``: of the flattened input), as int64.

    Ties give the first index, as in NumPy; a NaN counts as the maximum.
    """

    __props__ = ("axis",)

    def __init__(self, axis: int | None) -> None:
        self.axis = None if axis is None else int(axis)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        if x.dtype.startswith("complex"):
            raise KilnTypeError(f"{self}: complex input (dtype {x.dtype}) is not supported")
        if self.axis is None:
            shape: tuple[int | None, ...] = ()
            if 0 in x.type.shape:
                raise KilnValueError(f"{self}: cannot take the argmax of an empty tensor")
        else:
            if not 0 <= self.axis < x.ndim:
                raise KilnValueError(
                    f"{self}: axis {self.axis} is out of range for a {x.ndim}-d tensor"
                )
            if x.type.shape[self.axis] == 0:
                raise KilnValueError(f"{self}: cannot reduce a zero-length axis {self.axis}")
            shape = tuple(n for d, n in enumerate(x.type.shape) if d != self.axis)
        return Apply.create(self, [x], [TensorType("int64", shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        (x,) = inputs
        if x.size == 0 or (self.axis is not None and x.shape[self.axis] == 0):
            raise KilnValueError(
                f"{self}: cannot take the argmax of an empty axis (shape {x.shape})"
            )
        outputs[0] = np.asarray(np.argmax(x, axis=self.axis), dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        if self.axis is None:
            return [()]
        return [tuple(s for d, s in enumerate(shp) if d != self.axis)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [None]


def _single_axis(axis: Any, ndim: int, fn: str) -> int | None:
    """Normalize an ``axis`` that must be ``None`` or one int."""
    if axis is None:
        return None
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise KilnTypeError(f"{fn}: axis must be None or an int, got {axis!r}")
    return normalize_axes(axis, ndim)[0]


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> TensorVariable:
    """Return the index of the maximum along ``axis`` (of the flattened input when ``None``).

    The result is int64 and has no gradient.

    Examples
    --------
    >>> kt.argmax(x, axis=1)  # doctest: +SKIP
    """
    x = as_tensor(x)
    ax = _single_axis(axis, x.ndim, "argmax")
    out = Argmax(ax)(x)
    if keepdims:
        out = _restore_axes(out, tuple(range(x.ndim)) if ax is None else (ax,), x.ndim)
    return out


# --- logsumexp ---------------------------------------------------------------------------


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> TensorVariable:
    """Compute ``log(sum(exp(x)))`` over ``axis`` without overflow.

    The maximum is subtracted before exponentiating; an infinite maximum (all ``-inf``
    entries, or a ``+inf`` entry) is replaced by 0 so the result is ``-inf`` / ``+inf``
    rather than NaN, as in ``scipy.special.logsumexp``. Integer and boolean inputs give
    ``float64``.

    Examples
    --------
    >>> kt.logsumexp(x, axis=-1)  # doctest: +SKIP
    """
    x = as_tensor(x)
    axes = normalize_axes(axis, x.ndim)
    if x.dtype.startswith("complex"):
        raise KilnTypeError(f"logsumexp: complex input (dtype {x.dtype}) is not supported")
    if x.dtype not in FLOAT_DTYPES:
        x = _elemwise.cast(x, "float64")
    if not axes:
        return x
    # logsumexp(x) = log(sum(exp(x - m))) + m  with m = max(x) (0 where m is infinite)
    m = _reduce("max", x, axes, keepdims=True)
    m = _math.switch(_math.isinf(m), 0, m)
    total = sum_axes(_math.exp(_math.sub(x, m)), axes, keepdims)
    if not keepdims:
        m = _elemwise.dimshuffle(m, [d for d in range(x.ndim) if d not in axes])
    return _math.add(_math.log(total), m)


# --- cumsum ------------------------------------------------------------------------------


class CumSum(Op):
    """Cumulative sum along ``axis`` (``None``: of the flattened input).

    With ``reverse=True`` the sum runs from the end: ``out[i] = sum(x[i:])``; this is the
    gradient of the forward cumulative sum (and the other way round). Dtypes follow
    NumPy's ``cumsum`` (integers and bools accumulate in 64 bits).
    """

    __props__ = ("axis", "reverse")

    def __init__(self, axis: int | None, reverse: bool = False) -> None:
        self.axis = None if axis is None else int(axis)
        self.reverse = bool(reverse)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        dtype = CAReduce("sum", ()).output_dtype(x.dtype)
        if self.axis is None:
            shape: tuple[int | None, ...] = (_static_size(x.type.shape),)
        else:
            if not 0 <= self.axis < x.ndim:
                raise KilnValueError(
                    f"{self}: axis {self.axis} is out of range for a {x.ndim}-d tensor"
                )
            shape = x.type.shape
        return Apply.create(self, [x], [TensorType(dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        (x,) = inputs
        dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
        axis = self.axis
        if axis is None:
            x, axis = np.ravel(x), 0
        if self.reverse:
            out = np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=dtype), axis)
        else:
            out = np.cumsum(x, axis=axis, dtype=dtype)
        outputs[0] = np.ascontiguousarray(out)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        if self.axis is not None:
            return [tuple(shp)]
        if not shp:
            return [(shape_constant(1),)]
        return [(shp[0] if len(shp) == 1 else _math.mul(*shp),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (x,) = inputs
        (g,) = output_grads
        if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
            return [None]
        # d/dx_j sum_i g_i cumsum(x)_i = sum_{i >= j} g_i: a cumulative sum from the end.
        axis = 0 if self.axis is None else self.axis
        gx = CumSum(axis, not self.reverse)(g)
        if self.axis is None:
            gx = _shape.reshape(gx, _alloc.shape_tuple(x))
        return [_elemwise.cast(gx, x.type.dtype)]  # type: ignore[attr-defined]


def _static_size(shape: tuple[int | None, ...]) -> int | None:
    known = [n for n in shape if n is not None]
    return math.prod(known) if len(known) == len(shape) else None


def cumsum(x: Any, axis: int | None = None) -> TensorVariable:
    """Compute the cumulative sum along ``axis`` (of the flattened input when ``None``).

    Examples
    --------
    >>> kt.cumsum(x, axis=0)  # doctest: +SKIP
    """
    x = as_tensor(x)
    if x.ndim == 0 and axis in (0, -1):
        axis = None  # NumPy treats a 0-d input as a length-1 vector
    return CumSum(_single_axis(axis, x.ndim, "cumsum"))(x)


def unbroadcast_to(g: Variable, x: Variable) -> Variable:
    """Sum ``g`` over the dimensions that ``x`` was broadcast along; cast to x's dtype."""
    from_tensor = as_tensor(g)
    xt = x.type
    assert isinstance(xt, TensorType)
    if from_tensor.ndim > xt.ndim:
        from_tensor = sum_axes(from_tensor, tuple(range(from_tensor.ndim - xt.ndim)), False)
    axes = tuple(
        d for d in range(xt.ndim) if xt.broadcastable[d] and not from_tensor.type.broadcastable[d]
    )
    if axes:
        from_tensor = sum_axes(from_tensor, axes, True)
    if builtins.any(
        gb and not xb
        for gb, xb in zip(from_tensor.type.broadcastable, xt.broadcastable, strict=True)
    ):
        from_tensor = _shape.broadcast_to(from_tensor, _alloc.shape_tuple(x))
    if from_tensor.dtype != xt.dtype:
        from_tensor = _elemwise.cast(from_tensor, xt.dtype)
    return from_tensor
