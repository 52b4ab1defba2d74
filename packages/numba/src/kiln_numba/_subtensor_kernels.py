"""Run-time pieces of the generated indexing code: checks, errors, gather/scatter loops.

The generated code of :mod:`kiln_numba.subtensor` calls these compiled functions.
Numba checks no bounds, so every index is checked here or in the generated code, and a
bad one raises the VM's error type with the same message.

Exceptions raised from compiled code carry their values as arguments (formatting
strings in nopython code is slow to compile) and format them in ``__str__``. The small
helpers have explicit signatures: Numba would otherwise compile one version per literal
label and axis at the call sites; they compile at first use (:mod:`kiln_numba._dispatch`),
so importing this module compiles nothing. The gathers and scatters of integer-vector indexing
(``mu[idx]`` and its gradient) are cached on disk once per type signature, so graphs
using them compile faster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import types
from numba.extending import overload

from kiln_graph import KilnIndexError, KilnValueError, ShapeMismatchError
from kiln_numba._alloc import copy, empty
from kiln_numba._cache import kernel_njit
from kiln_numba._dispatch import signature_njit

# --- errors raised from compiled code ---------------------------------------------------


class IndexOutOfBoundsError(KilnIndexError):
    """An integer index is out of bounds (raised by compiled code with its values)."""

    def __str__(self) -> str:
        if len(self.args) != 4:
            return super().__str__()
        label, i, axis, n = self.args
        return f"{label}: index {i} is out of bounds for axis {axis} with size {n}"


class IndexBroadcastError(KilnIndexError):
    """Index arrays whose shapes do not broadcast (raised by compiled code)."""

    def __str__(self) -> str:
        if len(self.args) != 3:
            return super().__str__()
        label, a, b = self.args
        return (
            f"{label}: the index arrays cannot be broadcast together (lengths {a} and {b} "
            "in one dimension)"
        )


class ZeroStepError(KilnValueError):
    """A slice's step is zero (raised by compiled code with the Op's name)."""

    def __str__(self) -> str:
        if len(self.args) != 1:
            return super().__str__()
        return f"{self.args[0]}: slice step cannot be zero"


class UpdateShapeError(ShapeMismatchError):
    """``y`` does not fit the indexed region (raised by compiled code with the lengths)."""

    def __str__(self) -> str:
        if len(self.args) != 4:
            return super().__str__()
        label, dim, n, target = self.args
        return (
            f"{label}: y has length {n} in dimension {dim} but the indexed region x[...] "
            f"has length {target} there; kiln broadcasts y only along dimensions whose "
            "static length is 1"
        )


# --- checks -----------------------------------------------------------------------------


@signature_njit("none(int64, int64, int64, unicode_type)", cache=True)
def index_error(i: Any, n: int, axis: int, label: str) -> None:
    """Raise the error of index ``i`` out of bounds for axis ``axis`` of length ``n``."""
    raise IndexOutOfBoundsError(label, i, axis, n)


@signature_njit("int64(int64, int64, int64, unicode_type)", cache=True)
def check_index(i: Any, n: int, axis: int, label: str) -> int:
    """Return the integer index ``i`` into an axis of length ``n``, wrapped (or raise)."""
    if i < -n or i >= n:
        raise IndexOutOfBoundsError(label, i, axis, n)
    return i + n if i < 0 else i


@signature_njit("none(int64, unicode_type)", cache=True)
def check_step(step: int, label: str) -> None:
    """Raise if a slice's step is zero (``label`` names the Op)."""
    if step == 0:
        raise ZeroStepError(label)


@signature_njit("UniTuple(int64, 2)(int64, int64, int64, int64, boolean, boolean)", cache=True)
def slice_span(
    start: int, stop: int, step: int, n: int, has_start: bool, has_stop: bool
) -> tuple[int, int]:
    """Return the first position and the length of ``range(n)[start:stop:step]``.

    ``has_start`` / ``has_stop`` say whether those parts were given (CPython's rules).
    """
    if step > 0:
        lo = (max(start + n, 0) if start < 0 else min(start, n)) if has_start else 0
        hi = (max(stop + n, 0) if stop < 0 else min(stop, n)) if has_stop else n
        length = (hi - lo + step - 1) // step if hi > lo else 0
    else:
        lo = (max(start + n, -1) if start < 0 else min(start, n - 1)) if has_start else n - 1
        hi = (max(stop + n, -1) if stop < 0 else min(stop, n - 1)) if has_stop else -1
        length = (lo - hi - 1) // (-step) + 1 if lo > hi else 0
    return lo, length


@signature_njit("int64(int64, int64, unicode_type)", cache=True)
def broadcast_length(b: int, n: int, label: str) -> int:
    """Return the broadcast of lengths ``b`` and ``n`` of index arrays (or raise)."""
    if n == 1 or n == b:
        return b
    if b != 1:
        raise IndexBroadcastError(label, b, n)
    return n


@signature_njit("none(int64, int64, int64, unicode_type)", cache=True)
def check_update_length(n: int, target: int, dim: int, label: str) -> None:
    """Raise if dimension ``dim`` of y (length ``n``) does not match the region's."""
    if n != target:
        raise UpdateShapeError(label, dim, n, target)


def writable(x: np.ndarray) -> np.ndarray:
    """Return ``x`` if it may be written into, else a copy (an in-place op's buffer)."""
    return x if x.flags.writeable else copy(x)


def _copy(x: Any) -> Any:
    return copy(x)


def _same(x: Any) -> Any:
    return x


@overload(writable)
def _writable_numba(x: Any) -> Callable[[Any], Any]:
    # A read-only array type (a broadcast view, a read-only input) is copied.
    return _copy if isinstance(x, types.Array) and not x.mutable else _same


# --- integer-vector gathers and scatters along the first axis ----------------------------

_TAKE = "AdvancedSubtensor1"


@kernel_njit
def take_1d(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Return ``x[idx]`` for a vector ``x`` (checked, negative indices wrap)."""
    n = x.shape[0]
    out = empty(idx.shape[0], x.dtype)
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, _TAKE)
        out[k] = x[i + n if i < 0 else i]
    return out


@kernel_njit
def take_2d(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Return the rows ``x[idx]`` of a matrix ``x``."""
    n, m = x.shape
    out = empty((idx.shape[0], m), x.dtype)
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, _TAKE)
        if i < 0:
            i += n
        for j in range(m):
            out[k, j] = x[i, j]
    return out


@kernel_njit
def take_nd(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Return ``x[idx]`` along the first axis of an array of any number of dimensions."""
    n = x.shape[0]
    out = empty((idx.shape[0],) + x.shape[1:], x.dtype)
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, _TAKE)
        out[k] = x[i + n if i < 0 else i]
    return out


@kernel_njit
def scatter_1d(out: np.ndarray, y: np.ndarray, idx: np.ndarray, set_: bool, label: str) -> None:
    """Set ``out[idx] = y`` or add ``y`` at ``idx`` (repeats accumulate), ``out`` a vector.

    ``y`` has the region's shape (broadcast views are fine).
    """
    n = out.shape[0]
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, label)
        if i < 0:
            i += n
        if set_:
            out[i] = y[k]
        else:
            out[i] += y[k]


@kernel_njit
def scatter_2d(out: np.ndarray, y: np.ndarray, idx: np.ndarray, set_: bool, label: str) -> None:
    """Set or add the rows of ``y`` at rows ``idx`` of the matrix ``out``."""
    n, m = out.shape
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, label)
        if i < 0:
            i += n
        if set_:
            for j in range(m):
                out[i, j] = y[k, j]
        else:
            for j in range(m):
                out[i, j] += y[k, j]


@kernel_njit
def scatter_nd(out: np.ndarray, y: np.ndarray, idx: np.ndarray, set_: bool, label: str) -> None:
    """Set or add ``y[k]`` at ``out[idx[k]]`` for arrays of any number of dimensions."""
    n = out.shape[0]
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < -n or i >= n:
            index_error(i, n, 0, label)
        if i < 0:
            i += n
        if set_:
            out[i] = y[k]
        else:
            out[i] += y[k]
