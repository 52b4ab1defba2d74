"""kiln's dtypes as MLX dtypes, and NumPy values as MLX arrays of an explicit dtype.

MLX turns a float64 NumPy array given without a dtype into float32, and Python floats
are float32: every array kiln_mlx makes names its dtype (:func:`as_mx`,
:func:`full`). In float32 mode (:class:`~kiln_mlx.MlxFloat32Linker`) the graph's
float64 values are computed as float32 (what Metal supports): :func:`mx_dtype` maps
``float64`` to ``float32`` while such a graph is traced (:func:`float32_mode`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import numpy as np

_DTYPES: dict[str, Any] = {
    "bool": mx.bool_,
    "int8": mx.int8,
    "int16": mx.int16,
    "int32": mx.int32,
    "int64": mx.int64,
    "uint8": mx.uint8,
    "uint16": mx.uint16,
    "uint32": mx.uint32,
    "uint64": mx.uint64,
    "float16": mx.float16,
    "float32": mx.float32,
    "float64": mx.float64,
    "complex64": mx.complex64,
}

_FLOAT32 = contextvars.ContextVar("kiln_mlx_float32", default=False)


@contextlib.contextmanager
def float32_mode(enabled: bool) -> Iterator[None]:
    """Within the context, :func:`mx_dtype` maps float64 to float32 when ``enabled``."""
    token = _FLOAT32.set(enabled)
    try:
        yield
    finally:
        _FLOAT32.reset(token)


def mx_dtype(dtype: Any) -> Any:
    """Return the MLX dtype computing kiln's ``dtype`` (a name or NumPy dtype).

    Raises
    ------
    NoMlxImplementation
        For a dtype MLX has no arrays of (complex128, strings...).
    """
    name = np.dtype(dtype).name
    if name == "float64" and _FLOAT32.get():
        return mx.float32
    found = _DTYPES.get(name)
    if found is None:
        from kiln_mlx._funcify import no_implementation

        raise no_implementation(f"arrays of dtype {name}", "MLX has no such dtype")
    return found


def np_dtype(dtype: Any) -> np.dtype:
    """Return the NumPy dtype of the MLX dtype ``dtype``."""
    for name, candidate in _DTYPES.items():
        if candidate == dtype:
            return np.dtype(name)
    raise TypeError(f"no NumPy dtype for the MLX dtype {dtype}")


def is_mx(x: Any) -> bool:
    """Whether ``x`` is an MLX array (not a NumPy value known when tracing)."""
    return isinstance(x, mx.array)


def as_mx(x: Any, dtype: Any = None) -> Any:
    """Return ``x`` as an MLX array of kiln dtype ``dtype`` (default: ``x``'s own)."""
    if isinstance(x, mx.array):
        if dtype is None:
            return x
        target = mx_dtype(dtype)
        return x if x.dtype == target else x.astype(target)
    arr = np.asarray(x)
    return mx.array(arr, dtype=mx_dtype(arr.dtype if dtype is None else dtype))


def full(shape: Any, value: float, like: Any) -> Any:
    """Return an array of ``shape`` filled with ``value`` in the dtype of array ``like``."""
    return mx.full(shape, mx.array(value, dtype=like.dtype), dtype=like.dtype)


def const(value: float, like: Any) -> Any:
    """Return the 0-d array ``value`` in the dtype of array ``like``."""
    return mx.array(value, dtype=like.dtype)
