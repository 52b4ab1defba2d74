"""The one place kiln_c relies on NumPy's wheel layout: the OpenBLAS NumPy itself loaded.

NumPy's wheels (PyPI, Linux and macOS) bundle OpenBLAS built for 64-bit integers
(ILP64) with its symbols renamed ``scipy_<routine>_64_``, in ``numpy.libs/
libscipy_openblas64_-<hash>.so`` (``numpy/.dylibs`` on macOS): a private file of the
wheel, loaded by every NumPy process already. Taking BLAS and LAPACK from it costs
half a millisecond, where SciPy's ``cython_blas`` costs SciPy's ``__init__`` (about
10 ms of a warm C link). :func:`numpy_blas_pointers` returns the routines' addresses,
or None where the file or one of the symbols is missing (another NumPy build: conda's,
a source build, Windows), and the caller takes SciPy's LP64 routines instead.

Checked with NumPy :data:`CHECKED` (scipy-openblas64 0.3.x).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from collections.abc import Sequence

import numpy as np

#: The NumPy versions whose bundled OpenBLAS was checked.
CHECKED = (">=2.5", "<2.6")
_PATTERNS = ("numpy.libs/libscipy_openblas64_*.so", "numpy/.dylibs/libscipy_openblas64_*.dylib")


@functools.cache
def _library() -> ctypes.CDLL | None:
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    for pattern in _PATTERNS:
        for path in sorted(glob.glob(os.path.join(site, pattern))):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


def numpy_blas_pointers(names: Sequence[str]) -> list[int] | None:
    """Return the addresses of the routines ``names`` (``"dgemm"``...) in NumPy's OpenBLAS.

    They take 64-bit integers (ILP64). None where NumPy bundles no such library or it
    lacks one of the routines.
    """
    lib = _library()
    if lib is None:
        return None
    pointers = []
    for name in names:
        try:
            pointers.append(ctypes.cast(getattr(lib, f"scipy_{name}_64_"), ctypes.c_void_p).value)
        except AttributeError:
            return None
    return pointers if all(pointers) else None  # type: ignore[return-value]
