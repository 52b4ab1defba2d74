"""The one place kiln_c relies on NumPy's array layout: reading arrays in C, unconverted.

``kiln_call`` (see :mod:`kiln_c._codegen`) takes the inputs as the Python objects
themselves and reads each array's data pointer, dimensions, strides, dtype object and
flags from NumPy's array struct (``PyArrayObject_fields`` in ``numpy/ndarraytypes.h``,
the same in NumPy 1.x and 2.x; checked with NumPy :data:`CHECKED`), which saves the
Python work of describing each input (several microseconds a call). Before a library's
``kiln_call`` is used, :func:`layout_holds` reads a probe array both ways; where the
layout differs (another NumPy, a free-threaded or debug CPython), the thunk describes
its inputs from Python instead.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

import numpy as np

#: The NumPy versions whose array struct was checked.
CHECKED = (">=1.26", "<3")


@functools.cache
def _probe_array() -> np.ndarray:
    return np.arange(6, dtype=np.float64).reshape(3, 2)[::-1]


def layout_holds(lib: Any) -> bool:
    """Whether ``lib``'s ``kiln_probe`` reads NumPy arrays as NumPy reports them."""
    if sys.maxsize < 2**32 or getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return False
    probe = lib.kiln_probe
    probe.argtypes = (ctypes.py_object, ctypes.c_int64)
    probe.restype = ctypes.c_int64
    a = _probe_array()
    expected = [
        a.__array_interface__["data"][0],
        a.ndim,
        a.shape[0],
        a.strides[0],
        id(a.dtype),
        id(np.ndarray),
    ]
    try:
        return [probe(a, k) for k in range(len(expected))] == expected and bool(
            probe(a, 6) & 0x0100
        )
    except Exception:  # noqa: BLE001  # any failure means: do not rely on the layout
        return False
