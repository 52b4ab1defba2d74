"""Ops that build arrays from scalars: evenly spaced values (arange) and eye."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _elemwise, _math
from kiln_graph._basic import as_tensor, shape_constant
from kiln_graph._errors import KilnTypeError, KilnValueError
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable
from kiln_graph._types import FLOAT_DTYPES, INTEGER_DTYPES, TensorType, normalize_dtype


def _scalar_arg(value: Any, argname: str, allowed: frozenset[str]) -> TensorVariable:
    """Return ``value`` as a 0-d tensor of an ``allowed`` dtype, or raise naming it."""
    v = as_tensor(value)
    if v.ndim != 0:
        raise KilnTypeError(f"{argname}: expected a scalar, got a {v.ndim}-d tensor ({v.type})")
    if v.dtype not in allowed:
        kinds = "a real number" if "float64" in allowed else "an integer"
        raise KilnTypeError(f"{argname}: expected {kinds}, got dtype {v.dtype}")
    return v


def _static_value(v: Variable) -> Any:
    """Return the Python value of a 0-d constant, else ``None``."""
    return v.data.item() if isinstance(v, Constant) else None


class ARange(Op):
    """Evenly spaced values in ``[start, stop)`` with ``step``, as ``numpy.arange``.

    The inputs are three real scalars; the length is ``max(ceil((stop - start) / step),
    0)``, known statically when all three are constants.
    """

    __props__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = normalize_dtype(dtype)
        if self.dtype not in FLOAT_DTYPES | INTEGER_DTYPES:
            raise KilnTypeError(f"arange: dtype must be an integer or float dtype, got {dtype}")

    def make_node(self, start: Any, stop: Any, step: Any) -> Apply:
        real = INTEGER_DTYPES | FLOAT_DTYPES
        args = [
            _scalar_arg(v, name, real)
            for v, name in ((start, "start"), (stop, "stop"), (step, "step"))
        ]
        values = [_static_value(a) for a in args]
        if values[2] == 0:
            raise KilnValueError("arange: step must not be zero")
        length = None
        if None not in values:
            start_v, stop_v, step_v = values
            length = max(math.ceil((stop_v - start_v) / step_v), 0)
        return Apply.create(self, args, [TensorType(self.dtype, (length,))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        start, stop, step = (np.asarray(v).item() for v in inputs)
        if step == 0:
            raise KilnValueError("arange: step must not be zero")
        outputs[0] = np.arange(start, stop, step, dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = node.outputs[0].type.shape[0]  # type: ignore[attr-defined]
        if n is not None:
            return [(shape_constant(n),)]
        # NumPy computes the length in double precision: ceil((stop - start) / step).
        start, stop, step = (_elemwise.cast(v, "float64") for v in node.inputs)
        length = _math.ceil(_math.true_divide(_math.sub(stop, start), step))
        return [(_elemwise.cast(_math.maximum(length, 0.0), "int64"),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [None, None, None]


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> TensorVariable:
    """Return evenly spaced values in ``[start, stop)``, as ``numpy.arange``.

    With one argument it is ``stop`` (``start`` is 0). Arguments may be numbers or
    symbolic scalars. Without ``dtype`` the result is ``int64`` for integer arguments
    and ``float64`` when any is a float (NumPy's rule). The length is static when all
    arguments are constants.

    Examples
    --------
    >>> kt.arange(5)  # doctest: +SKIP
    >>> kt.arange(n, dtype="float32")  # n: a symbolic int scalar  # doctest: +SKIP
    """
    if stop is None:
        start, stop = 0, start
    real = INTEGER_DTYPES | FLOAT_DTYPES
    args = [
        _scalar_arg(v, name, real) for v, name in ((start, "start"), (stop, "stop"), (step, "step"))
    ]
    if dtype is None:
        dtype = "float64" if any(a.dtype in FLOAT_DTYPES for a in args) else "int64"
    return ARange(dtype)(*args)


class Eye(Op):
    """A 2-d array with ones on the ``k``-th diagonal and zeros elsewhere.

    The inputs are the int64 scalars ``n`` (rows), ``m`` (columns) and ``k`` (the
    diagonal: 0 the main one, positive above it, negative below).
    """

    __props__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = normalize_dtype(dtype)

    def make_node(self, n: Any, m: Any, k: Any) -> Apply:
        args = [
            _elemwise.cast(_scalar_arg(v, name, INTEGER_DTYPES), "int64")
            for v, name in ((n, "n"), (m, "m"), (k, "k"))
        ]
        shape = []
        for a, name in zip(args[:2], ("n", "m"), strict=True):
            value = _static_value(a)
            if value is not None and value < 0:
                raise KilnValueError(f"eye: {name} must be non-negative, got {value}")
            shape.append(value)
        return Apply.create(self, args, [TensorType(self.dtype, tuple(shape))])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        n, m, k = (int(v) for v in inputs)
        if n < 0 or m < 0:
            raise KilnValueError(f"eye: n and m must be non-negative, got n={n}, m={m}")
        outputs[0] = np.eye(n, m, k, dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(node.inputs[:2])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [None, None, None]


def eye(n: Any, m: Any = None, k: Any = 0, dtype: Any = "float64") -> TensorVariable:
    """Return an ``n`` x ``m`` array with ones on the ``k``-th diagonal, as ``numpy.eye``.

    ``m`` defaults to ``n``. Arguments may be ints or symbolic integer scalars.

    Examples
    --------
    >>> kt.eye(3)  # doctest: +SKIP
    >>> kt.eye(3, 4, k=1, dtype="int32")  # doctest: +SKIP
    """
    return Eye(dtype)(n, n if m is None else m, k)
