"""The native log-density ABI on the C backend: the generated library's own entry points.

A graph whose one explicit input is the flat float64 point ``x`` (of static length)
and whose every Op has C code gets two more exported functions in its library:
``kiln_native_logp`` (for a ``[logp, grad]`` graph) and ``kiln_native_expand``, the
functions of :mod:`kiln_compile`'s native ABI. Their ``user_data`` is a
``kiln_native_data`` struct (``kiln_runtime.h``) holding the argument descriptors of
each function: the point's slot, the shared values (described again by ``refresh``)
and the constants. Each call copies the descriptors to its own stack and runs the
graph with its own context, so the functions are re-entrant and need no GIL.

Return codes: 0 ok; the generated code's errors negated (an index out of bounds -1,
shapes that do not match -2, an invalid value -3, out of memory -4); a point of the
wrong length -6; an expand output longer than ``n_out`` -7. All are fatal: the C code
has no error a sampler could recover from (a non-finite log-density is a value).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from kiln_c._codegen import NATIVE_OUTPUT_TOO_LONG, NATIVE_WRONG_LENGTH, native_point
from kiln_c._runtime import KilnArray, describe
from kiln_c._thunk import CThunk
from kiln_c.linalg import blas_pointers
from kiln_compile import NativeModel, NativeUnavailable

CODES = {
    0: "ok",
    -1: "an index out of bounds in the model's C code",
    -2: "shapes that do not match in the model's C code",
    -3: "an invalid value in the model's C code",
    -4: "out of memory",
    NATIVE_WRONG_LENGTH: "a point of the wrong length",
    NATIVE_OUTPUT_TOO_LONG: "the expand output is longer than n_out (the data changed shape)",
}


class _NativeData(ctypes.Structure):
    """``kiln_native_data`` of ``kiln_runtime.h``."""

    _fields_ = [
        ("logp_args", ctypes.c_void_p),
        ("logp_nargs", ctypes.c_int64),
        ("expand_args", ctypes.c_void_p),
        ("expand_nargs", ctypes.c_int64),
        ("blas", ctypes.c_void_p),
    ]


class _Arguments:
    """One function's argument descriptors, and the shared values they point at.

    The shared variables are the Function's (``function.fgraph``): a thunk serves every
    Function of the same structure, each with its own shared variables.
    """

    def __init__(self, function: Any, thunk: CThunk, n: int) -> None:
        self.thunk = thunk
        count = len(thunk.generated.dtypes)
        self.args = (KilnArray * count)()
        ctypes.memmove(self.args, thunk._args, ctypes.sizeof(KilnArray) * count)
        x = self.args[0]
        x.ndim, x.buf = 1, None
        x.shape[0], x.strides[0] = n, 8
        fgraph = function.fgraph
        self.shared = list(enumerate(fgraph.inputs))[fgraph.n_explicit :]
        self.values: list[np.ndarray] = []
        self.refresh()

    def refresh(self) -> None:
        values = []
        for i, variable in self.shared:
            dtype = np.dtype(variable.type.dtype)
            value = np.require(variable.get_value(borrow=True), dtype=dtype, requirements="A")
            describe(self.args[i], value)
            values.append(value)
        self.values = values


def _thunk(function: Any, what: str) -> CThunk:
    thunk = getattr(function, "thunk", None)
    if not isinstance(thunk, CThunk):
        raise NativeUnavailable(f"the {what} was not compiled by the C backend")
    if thunk.upgrade is not None:  # a sampler keeps the pointers: take the optimised build's
        thunk.upgrade.wait()
    if thunk.generated.fallbacks:
        names = sorted({type(n.op).__name__ for n in thunk.generated.fallbacks.values()})
        raise NativeUnavailable(
            f"the {what} runs {', '.join(names)} through Python (no C code): the native "
            "ABI needs every Op in C"
        )
    return thunk


def native_model(logp_function: Any, expand_function: Any = None) -> NativeModel:
    """Return the C-compiled ``logp_function`` (and ``expand_function``) as the native ABI.

    Raises
    ------
    NativeUnavailable
        If a function was not compiled by the C backend, runs an Op through Python, or
        does not take one float64 vector of static length (the message says which).
    """
    thunk = _thunk(logp_function, "log-density")
    n = native_point(thunk.fgraph)
    logp = getattr(thunk.library, "kiln_native_logp", None)
    if n is None or logp is None:
        raise NativeUnavailable(
            "the log-density must map one float64 vector of static length to "
            "[logp (float64 scalar), grad (float64 vector)] for the native ABI"
        )
    logp_args = _Arguments(logp_function, thunk, n)
    expand_cptr = None
    n_out = None
    expand_args = None
    keep: list[Any] = [thunk, logp_args]
    if expand_function is not None:
        expand = _thunk(expand_function, "expand function")
        if native_point(expand.fgraph) != n:
            raise NativeUnavailable(f"the expand function must take the same point (length {n})")
        expand_args = _Arguments(expand_function, expand, n)
        expand_cptr = ctypes.cast(expand.library.kiln_native_expand, ctypes.c_void_p).value
        n_out = int(sum(np.size(v) for v in expand_function(np.zeros(n))))
        keep += [expand, expand_args]
    blas = thunk._blas if expand_args is None else blas_pointers()
    data = _NativeData(
        ctypes.addressof(logp_args.args),
        len(logp_args.args),
        ctypes.addressof(expand_args.args) if expand_args is not None else None,
        len(expand_args.args) if expand_args is not None else 0,
        ctypes.addressof(blas) if blas is not None else None,
    )
    keep += [data, blas]

    def refresh() -> None:
        logp_args.refresh()
        if expand_args is not None:
            expand_args.refresh()

    return NativeModel(
        logp_cptr=int(ctypes.cast(logp, ctypes.c_void_p).value or 0),
        expand_cptr=expand_cptr,
        user_data_ptr=ctypes.addressof(data),
        n=n,
        n_out=n_out,
        keep_alive=tuple(keep),
        refresh=refresh,
        linker="c",
        codes=dict(CODES),
    )
