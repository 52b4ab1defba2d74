"""A model's native log-density (the C ABI of ``kiln_compile.NativeModel``), called from Python.

The compiled kernels (C, Numba) call ``logp_cptr`` themselves; the few Python calls
around them (the initial point, the step-size search, the Python pieces of a chain
while Numba's kernel compiles) go through :class:`NativeLogp`, a ``ctypes`` call of the
same function: the same machine code, so the same numbers.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from kiln_samplers._protocol import NativePointers

#: ``int logp(size_t n, const double* x, double* grad, double* logp, const void* user_data)``
LOGP_C = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
    ctypes.c_void_p,
)  # fmt: skip


def fatal_error(native: NativePointers, code: int) -> RuntimeError:
    """Return the error for a fatal (negative) return code of the model's native function."""
    describe = getattr(native, "describe", None)
    what = describe(code) if describe is not None else f"code {code}"
    return RuntimeError(f"the model's native log-density failed: {what}")


_F64 = np.dtype(np.float64)


def _check_contiguous(x: np.ndarray, grad: np.ndarray) -> None:
    """Raise unless ``x`` and ``grad`` are C-contiguous float64 (the ABI reads raw memory)."""
    if x.flags.c_contiguous and grad.flags.c_contiguous and x.dtype is _F64 is grad.dtype:
        return  # the common case, on the Python kernels' per-step path: one test
    for name, a in (("x", x), ("grad", grad)):
        if not (a.flags.c_contiguous and a.dtype == np.float64):
            raise ValueError(
                f"the native log-density's {name}: expected a C-contiguous float64 array, "
                f"got {a.dtype} with strides {a.strides}"
            )


class NativeLogp:
    """``logp = fn(x, grad, user_data)`` over a model's native ``logp_cptr``.

    ``user_data`` is the address the model gave (``native.user_data_ptr``). A point
    the model rejects (a positive code) gives -inf; a fatal code gives -inf too and is
    kept in :attr:`fatal` (the first one), which the caller turns into an error with
    :meth:`check` (an exception raised here would be taken for a rejected point).
    """

    def __init__(self, native: NativePointers) -> None:
        self.native = native
        self.user_data: int = int(native.user_data_ptr)
        self.fatal = 0
        self._call = LOGP_C(native.logp_cptr)

    def status(self, x: np.ndarray, grad: np.ndarray) -> tuple[int, float]:
        """Call the function at ``x`` (gradient into ``grad``); return its code and logp."""
        _check_contiguous(x, grad)
        out = ctypes.c_double(0.0)
        code = self._call(
            x.shape[0], x.ctypes.data, grad.ctypes.data, ctypes.addressof(out), self.user_data
        )
        return int(code), out.value

    def __call__(self, x: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
        """Return the log-density at ``x`` (gradient into ``grad``); -inf if rejected."""
        _check_contiguous(x, grad)
        out = ctypes.c_double(0.0)
        code = self._call(
            x.shape[0], x.ctypes.data, grad.ctypes.data, ctypes.addressof(out), user_data
        )
        if code == 0:
            return out.value
        if code < 0 and self.fatal == 0:
            self.fatal = int(code)
        return -np.inf

    def check(self) -> None:
        """Raise the error of the first fatal code the function returned, if any."""
        if self.fatal:
            raise fatal_error(self.native, self.fatal)
