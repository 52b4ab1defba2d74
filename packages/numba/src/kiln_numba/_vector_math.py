"""``exp`` and ``log1p`` in float64 that LLVM can vectorize.

Numba lowers ``np.exp`` and ``np.log1p`` to calls into the C library, one element at a
time: LLVM cannot vectorize a loop that calls them (llvmlite ships no vector math
library). A logistic regression's log-density spends most of its time there (M3: 140 of
180 us). These are written in arithmetic, comparisons and bit casts only, without
branches that depend on the data, so that a loop calling them becomes SIMD code.

- ``exp_f64``: ``x = k ln2 + r`` with ``|r| <= ln2/2`` (``ln2`` in two parts, so that
  ``k ln2`` is exact), ``exp(r)`` by its Taylor series to degree 13 (truncation below
  1e-17 relative), then scaled by ``2**k`` in two factors so that subnormal results
  are right.
- ``log1p_f64``: ``u = 1 + x`` is split as ``m 2**e`` with ``m`` in
  ``[sqrt(2)/2, sqrt(2))``; ``log(m) = 2 atanh(s)``, ``s = f / (2 + f)``, ``f = m - 1``,
  written as ``f - (f**2/2 - s (f**2/2 + R(s**2)))`` with ``R``'s Taylor series to
  degree 11 in ``s**2``, plus ``e ln2`` and the rounding error of ``1 + x`` to first
  order, ``(x - (u - 1)) / u``.

Both are within 1 ulp of the C library over their whole domain, infinities, NaN,
signed zeros and subnormals included (the tests check about a million points of
each).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["exp_f64", "log1p_f64"]

#: Inlined where they are called (Numba's IR inliner), so that LLVM sees the arithmetic
#: in the loop and vectorizes it; a call to a separately compiled function it does not.
_jit = njit(error_model="numpy", inline="always")


@intrinsic
def _bits(typingctx: Any, x: Any) -> Any:
    """Return the int64 with the bits of the float64 ``x``."""
    if x != types.float64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx: Any, i: Any) -> Any:
    """Return the float64 with the bits of the int64 ``i``."""
    if i != types.int64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


_LOG2E = 1.4426950408889634
#: ln 2 in two parts: the high part has 32 trailing zero bits, so ``k * _LN2_HI`` is
#: exact for every ``|k| < 2**11``.
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_EXP_MAX = 709.782712893384  # exp overflows above this
#: exp(r) = sum r**k / k!, k = 13 .. 0 (Horner's order).
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
#: log(1 + f) = f - (f**2/2 - s (f**2/2 + z q(z))) with q(z) = sum 2 z**k / (2k + 3),
#: k = 11 .. 0 (Horner's order), z = s**2.
_ATANH_TAYLOR = tuple(2.0 / (2 * k + 3) for k in range(11, -1, -1))
_INF = np.inf


@_jit
def exp_f64(x: float) -> float:
    """Return ``exp(x)`` (float64), vectorizable; within 1 ulp of the C library."""
    xc = x if x > -746.0 else -746.0
    xc = xc if xc < 710.0 else 710.0
    k = np.floor(xc * _LOG2E + 0.5)
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    p = 0.0
    for c in _EXP_TAYLOR:  # Horner's rule
        p = p * r + c
    ki = np.int64(k)
    k1 = ki >> 1
    scale: float = _from_bits((k1 + 1023) << 52)  # type: ignore[call-arg]
    y = p * scale * _from_bits((ki - k1 + 1023) << 52)  # type: ignore[call-arg]
    y = _INF if x > _EXP_MAX else y
    return x if x != x else y


@_jit
def log1p_f64(x: float) -> float:
    """Return ``log1p(x)`` (float64), vectorizable; within 1 ulp of the C library."""
    u = 1.0 + x
    bits: int = _bits(u)  # type: ignore[call-arg]
    e = ((bits >> 52) & 0x7FF) - 1023
    m = _from_bits((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)  # type: ignore[call-arg]
    big = m > 1.4142135623730951
    m = 0.5 * m if big else m
    e = e + 1 if big else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    q = 0.0
    for c in _ATANH_TAYLOR:
        q = q * z + c
    half_f2 = 0.5 * f * f
    log_m = f - (half_f2 - s * (half_f2 + z * q))
    c = (x - (u - 1.0)) / u
    ef = np.float64(e)
    y = ef * _LN2_HI + (log_m + (ef * _LN2_LO + c))
    y = x if u == 1.0 else y  # |x| < 2**-53: log1p(x) rounds to x (and keeps -0.0)
    y = -_INF if u == 0.0 else y
    y = _INF if u == _INF else y
    y = np.nan if u < 0.0 else y
    return x if x != x else y
