"""Creating tensor variables: inputs, constants and shared variables."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph._errors import KilnTypeError
from kiln_graph._node import (
    Constant,
    SharedVariable,
    TensorSharedVariable,
    TensorVariable,
    Variable,
)
from kiln_graph._types import RandomGeneratorType, TensorType

DEFAULT_FLOAT = "float64"


def tensor(
    name: str | None = None, *, dtype: Any = DEFAULT_FLOAT, shape: tuple[int | None, ...] = ()
) -> TensorVariable:
    """Return a new symbolic input with ``dtype`` and static ``shape``.

    Examples
    --------
    >>> x = tensor("x", dtype="float32", shape=(None, 3))
    """
    if name is not None and not isinstance(name, str):
        raise KilnTypeError(f"name: expected a str or None, got {type(name).__name__}")
    return TensorVariable(TensorType(dtype, shape), name=name)


def scalar(name: str | None = None, dtype: Any = DEFAULT_FLOAT) -> TensorVariable:
    """Return a new 0-d symbolic input."""
    return tensor(name, dtype=dtype, shape=())


def vector(
    name: str | None = None, dtype: Any = DEFAULT_FLOAT, shape: tuple[int | None] = (None,)
) -> TensorVariable:
    """Return a new 1-d symbolic input."""
    return tensor(name, dtype=dtype, shape=shape)


def matrix(
    name: str | None = None,
    dtype: Any = DEFAULT_FLOAT,
    shape: tuple[int | None, int | None] = (None, None),
) -> TensorVariable:
    """Return a new 2-d symbolic input."""
    return tensor(name, dtype=dtype, shape=shape)


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Constant:
    """Return the interned constant holding ``value``.

    Equal values (same dtype, shape and bytes) give the same constant node.
    """
    if isinstance(value, Variable):
        raise KilnTypeError(f"constant: expected a value, got the symbolic variable {value!r}")
    try:
        const = Constant.create(value, dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise KilnTypeError(f"constant: cannot convert {value!r} to an array: {exc}") from exc
    if name is not None and const.name is None:
        const.name = name
    return const


def as_tensor(x: Any, dtype: Any = None, name: str | None = None) -> TensorVariable:
    """Return ``x`` as a tensor variable: variables pass through, values become constants.

    ``dtype`` only applies to values; pass a variable through :func:`cast` to change its
    dtype.
    """
    if isinstance(x, TensorVariable):
        return x
    if isinstance(x, Variable):
        raise KilnTypeError(f"expected a tensor, got a variable of type {x.type}")
    if isinstance(x, list | tuple) and any(isinstance(v, Variable) for v in x):
        raise KilnTypeError(
            "a list that mixes symbolic variables and values cannot become one constant; "
            "use kt.stack(...)"
        )
    return constant(x, dtype=dtype, name=name)


def shared(
    value: Any, name: str | None = None, shape: tuple[int | None, ...] | None = None
) -> SharedVariable:
    """Return a shared variable holding ``value`` (an array or a NumPy ``Generator``).

    A shared variable is an implicit input of every compiled function that uses it;
    its value persists across calls and changes through ``updates`` or
    :meth:`~kiln_graph.SharedVariable.set_value`. Its static shape is unknown in every
    dimension unless ``shape`` is given, so later values may have other lengths.
    """
    if isinstance(value, np.random.Generator):
        return SharedVariable(RandomGeneratorType(), value, name=name)
    if isinstance(value, Variable):
        raise KilnTypeError(f"shared: expected a value, got the symbolic variable {value!r}")
    arr = np.array(value, copy=True)
    if arr.dtype.kind not in "biufc":
        raise KilnTypeError(f"shared: expected a numeric array, got dtype {arr.dtype}")
    static = (None,) * arr.ndim if shape is None else tuple(shape)
    return TensorSharedVariable(TensorType(arr.dtype, static), arr, name=name)


def shape_constant(n: int) -> Constant:
    """Return ``n`` as an int64 scalar constant, the element type of symbolic shapes."""
    return constant(np.int64(n))
