"""The Python side of the runtime: ``kiln_array`` as ctypes, and NumPy arrays in and out.

Inputs are described in place (pointer, shape, strides of the NumPy array; no copy).
An output the generated code allocated becomes a NumPy array over that memory (no
copy), which releases it when the array dies; an output in memory the caller owns (an
input, a constant, or a view of one) is copied, so results never alias arguments.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from kiln_c._funcify import DTYPES, OBJECT
from kiln_graph import KilnValueError

#: The most dimensions a value of a C-compiled graph has (``KILN_MAXDIM``): descriptors
#: are copied at every view and call, so they are kept small.
MAXDIM = 8
_DTYPES = [np.dtype(name) for name in DTYPES]


class KilnArray(ctypes.Structure):
    """``kiln_array`` of ``kiln_runtime.h``."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("buf", ctypes.c_void_p),
        ("dtype", ctypes.c_int64),
        ("ndim", ctypes.c_int64),
        ("shape", ctypes.c_int64 * MAXDIM),
        ("strides", ctypes.c_int64 * MAXDIM),
    ]


CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int64, ctypes.POINTER(KilnArray), ctypes.POINTER(KilnArray)
)


class KilnContext(ctypes.Structure):
    """``kiln_ctx`` of ``kiln_runtime.h``."""

    _fields_ = [
        ("fallback", CALLBACK),
        ("node", ctypes.c_int64),
        ("code", ctypes.c_int64),
        ("message", ctypes.c_char * 512),
        ("blas", ctypes.c_void_p),
        ("arena", ctypes.c_void_p),
        ("arena_size", ctypes.c_int64),
        ("arena_used", ctypes.c_int64),
    ]


def describe(desc: KilnArray, value: np.ndarray) -> None:
    """Point ``desc`` at ``value``'s memory (the caller keeps ``value`` alive)."""
    ndim = value.ndim
    if ndim > MAXDIM:
        raise KilnValueError(
            f"the C backend handles arrays of at most {MAXDIM} dimensions, got {ndim}"
        )
    desc.data = value.__array_interface__["data"][0]
    desc.ndim = ndim
    if ndim:
        desc.shape[:ndim] = value.shape
        desc.strides[:ndim] = value.strides


def _extent(desc: KilnArray, itemsize: int) -> tuple[int, int]:
    """Return the byte offsets (low, high) that the array ``desc`` spans from its data."""
    low, high = 0, itemsize
    for d in range(desc.ndim):
        n, s = desc.shape[d], desc.strides[d]
        if n == 0:
            return 0, 0
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    return low, high


def as_numpy(desc: KilnArray, writeable: bool = True) -> np.ndarray:
    """Return a NumPy array over the memory ``desc`` describes (no copy, no ownership)."""
    dtype = _DTYPES[desc.dtype]
    ndim = desc.ndim
    shape = tuple(desc.shape[:ndim])
    low, high = _extent(desc, dtype.itemsize)
    if high - low <= 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * (high - low)).from_address(desc.data + low)
    out = np.ndarray(shape, dtype, buffer=raw, offset=-low, strides=tuple(desc.strides[:ndim]))
    if not writeable:
        out.flags.writeable = False
    return out


def take_output(desc: KilnArray, release: Any) -> np.ndarray:
    """Return the output ``desc`` as a NumPy array: its buffer handed over, or a copy."""
    view = as_numpy(desc)
    if desc.buf is None:  # the caller's memory (an input or constant): copy it
        return np.array(view, copy=True)
    owner = view.base
    if owner is None:  # an empty array: nothing to keep
        release(desc.buf)
        return view
    weakref.finalize(owner, release, desc.buf)
    return view


def is_object(desc: KilnArray) -> bool:
    """Whether ``desc`` holds a Python object (a handle into the call's object table)."""
    return bool(desc.dtype == OBJECT)
