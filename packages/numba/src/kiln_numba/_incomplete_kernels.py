"""The regularized incomplete gamma and beta functions for generated code.

With their derivatives in the parameters, compiled once and cached by Numba: the same
expansions as :mod:`kiln_graph._incomplete` (the VM's NumPy reference), in float64.
Generated modules star-import this module beside :mod:`kiln_numba._runtime`; the tests
check them against SciPy and against the VM.
"""

from __future__ import annotations

import math

import numpy as np

from kiln_numba._cache import kernel_njit
from kiln_numba._runtime import betaln, digamma

__all__ = [
    "betainc",
    "betainc_da",
    "betainc_db",
    "digamma_diff",
    "gammainc",
    "gammainc_da",
    "gammaincc",
    "gammaincc_da",
]

#: Division by zero gives inf / nan, as in NumPy and in the generated code.
_jit = kernel_njit(error_model="numpy")

_INF = math.inf
_NAN = math.nan

# --- regularized incomplete gamma and beta functions and their parameter derivatives ---
# P(a, x) by its series below x = a + 1 and Q(a, x) by Legendre's continued fraction
# above; I_x(a, b) by its continued fraction below x = (a + 1) / (a + b + 2) and by
# I_x(a, b) = 1 - I_{1-x}(b, a) above. The derivatives in the parameters differentiate
# the same expansions term by term, as kiln_graph._incomplete does in NumPy (the VM's
# reference; the special values are the same).

_INC_TOL = 1e-16
_INC_MAX_TERMS = 20000
_INC_TINY = 1e-300
_INC_BIG = 2.0**500
_PSI_ASYMPTOTIC = np.array([1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12])


@_jit
def _gamma_series_sum(a: float, x: float) -> float:
    """Return P(a, x) by its series (0 < x < a + 1)."""
    term = 1.0
    total = 1.0
    for n in range(1, _INC_MAX_TERMS):
        term *= x / (a + n)
        total += term
        if term <= _INC_TOL * total:
            break
    return math.exp(a * math.log(x) - x - math.lgamma(a + 1.0)) * total


@_jit
def _gamma_fraction(a: float, x: float) -> float:
    """Return Q(a, x) by Legendre's continued fraction (modified Lentz; x >= a + 1)."""
    b = x + 1.0 - a
    c = 1.0 / _INC_TINY
    d = 1.0 / b
    h = d
    for i in range(1, _INC_MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _INC_TINY:
            d = _INC_TINY
        c = b + an / c
        if abs(c) < _INC_TINY:
            c = _INC_TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) <= _INC_TOL:
            break
    return math.exp(a * math.log(x) - x - math.lgamma(a)) * h


@_jit
def _gammainc_special(a: float, x: float, lower: bool) -> float:
    """Return P (``lower``) or Q where SciPy gives a special value; -1 elsewhere."""
    if math.isnan(a) or math.isnan(x) or a < 0.0 or x < 0.0:
        return _NAN
    if a == 0.0:
        if x == 0.0:
            return _NAN
        return 1.0 if lower else 0.0
    if a == _INF:
        if x == _INF:
            return _NAN
        return 0.0 if lower else 1.0
    if x == 0.0:
        return 0.0 if lower else 1.0
    if x == _INF:
        return 1.0 if lower else 0.0
    return -1.0


@_jit
def gammainc(a: float, x: float) -> float:
    """Return the regularized lower incomplete gamma function P(a, x) (SciPy's ``gammainc``)."""
    special = _gammainc_special(a, x, True)
    if special != -1.0:
        return special
    if x < a + 1.0:
        return _gamma_series_sum(a, x)
    return 1.0 - _gamma_fraction(a, x)


@_jit
def gammaincc(a: float, x: float) -> float:
    """Return the regularized upper incomplete gamma function Q(a, x) (SciPy's ``gammaincc``)."""
    special = _gammainc_special(a, x, False)
    if special != -1.0:
        return special
    if x < a + 1.0:
        return 1.0 - _gamma_series_sum(a, x)
    return _gamma_fraction(a, x)


@_jit
def _beta_fraction(a: float, b: float, x: float) -> float:
    """Return I_x(a, b) by its continued fraction (modified Lentz; x < (a+1)/(a+b+2))."""
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < _INC_TINY:
        d = _INC_TINY
    d = 1.0 / d
    h = d
    for m in range(1, _INC_MAX_TERMS):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < _INC_TINY:
            d = _INC_TINY
        c = 1.0 + aa / c
        if abs(c) < _INC_TINY:
            c = _INC_TINY
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        if abs(d) < _INC_TINY:
            d = _INC_TINY
        c = 1.0 + aa / c
        if abs(c) < _INC_TINY:
            c = _INC_TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) <= _INC_TOL:
            break
    lp = a * math.log(x) + b * math.log1p(-x) - betaln(a, b)
    return math.exp(lp) * h / a


@_jit
def betainc(a: float, b: float, x: float) -> float:
    """Return the regularized incomplete beta function I_x(a, b) (SciPy's ``betainc``)."""
    if math.isnan(a) or math.isnan(b) or math.isnan(x):
        return _NAN
    if a < 0.0 or b < 0.0 or x < 0.0 or x > 1.0:
        return _NAN
    if (a == 0.0 and b == 0.0) or (a == _INF and b == _INF):
        return _NAN
    if a == 0.0 or b == _INF:
        return 0.0 if x == 0.0 else 1.0
    if b == 0.0 or a == _INF:
        return 1.0 if x == 1.0 else 0.0
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if x * (a + b + 2.0) < a + 1.0:
        return _beta_fraction(a, b, x)
    return 1.0 - _beta_fraction(b, a, 1.0 - x)


@_jit
def digamma_diff(x: float, h: float) -> float:
    """Return digamma(x + h) - digamma(x) without cancellation (``kiln_graph._incomplete``'s)."""
    out = 0.0
    for _ in range(10):
        if x >= 10.0:
            break
        out += h / (x * (x + h))
        x += 1.0
    log_ratio = math.log1p(h / x)
    out += log_ratio + h / (2.0 * x * (x + h))
    inv2 = 1.0 / (x * x)
    power = 1.0
    for k in range(7):
        power *= inv2
        out -= _PSI_ASYMPTOTIC[k] * power * math.expm1(-2.0 * (k + 1) * log_ratio)
    return out


@_jit
def _gamma_series_dlog(a: float, x: float) -> float:
    """Return (d/da P) / P from the series of P (0 < x < a + 1)."""
    c = 1.0
    s = 1.0
    t = 0.0
    h = 0.0
    for n in range(1, _INC_MAX_TERMS):
        h += 1.0 / (a + n)
        c *= x / (a + n)
        s += c
        t += c * h
        if c <= _INC_TOL * s and c * h <= _INC_TOL * t:
            break
    return math.log(x) - digamma(a + 1.0) - t / s


@_jit
def _gamma_fraction_dlog(a: float, x: float) -> float:
    """Return (d/da Q) / Q from the forward recurrence of Legendre's fraction (x >= a + 1)."""
    a_prev, a_cur = 1.0, x + 1.0 - a
    b_prev, b_cur = 0.0, 1.0
    da_prev, da_cur = 0.0, -1.0
    db_prev, db_cur = 0.0, 0.0
    value_last = _INF
    last = _INF
    dlog = _NAN
    for n in range(1, _INC_MAX_TERMS + 1):
        bn = x + (2 * n + 1) - a
        an = n * (a - n)
        dbn = -1.0
        dan = float(n)
        a_new = bn * a_cur + an * a_prev
        b_new = bn * b_cur + an * b_prev
        da_new = dbn * a_cur + bn * da_cur + dan * a_prev + an * da_prev
        db_new = dbn * b_cur + bn * db_cur + dan * b_prev + an * db_prev
        a_prev, a_cur, b_prev, b_cur = a_cur, a_new, b_cur, b_new
        da_prev, da_cur, db_prev, db_cur = da_cur, da_new, db_cur, db_new
        scale = max(abs(a_cur), abs(b_cur))
        if scale > _INC_BIG:
            s = 1.0 / scale
            a_prev *= s
            a_cur *= s
            b_prev *= s
            b_cur *= s
            da_prev *= s
            da_cur *= s
            db_prev *= s
            db_cur *= s
        value = a_cur / b_cur
        dlog = da_cur / a_cur - db_cur / b_cur
        if not math.isfinite(value):
            break
        if abs(value - value_last) <= _INC_TOL * abs(value) and abs(dlog - last) <= _INC_TOL * abs(
            dlog
        ):
            break
        value_last = value
        last = dlog
    return math.log(x) - digamma(a) - dlog


@_jit
def gammainc_da(a: float, x: float) -> float:
    """Return d/da P(a, x) (``kiln_graph._incomplete.gammainc_da``)."""
    if not (0.0 < a < _INF) or math.isnan(x) or x < 0.0:
        return _NAN
    if x == 0.0 or x == _INF:
        return 0.0
    if x < a + 1.0:
        return _gamma_series_sum(a, x) * _gamma_series_dlog(a, x)
    return -_gamma_fraction(a, x) * _gamma_fraction_dlog(a, x)


@_jit
def gammaincc_da(a: float, x: float) -> float:
    """Return d/da Q(a, x) = -d/da P(a, x)."""
    return -gammainc_da(a, x)


@_jit
def _beta_fraction_dlog(a: float, b: float, x: float) -> tuple[float, float]:
    """Return (d/da I, d/db I) / I from the fraction's forward recurrence (x < (a+1)/(a+b+2))."""
    a_prev, a_cur = 1.0, 1.0
    b_prev, b_cur = 0.0, 1.0
    daa_prev, daa_cur, dab_prev, dab_cur = 0.0, 0.0, 0.0, 0.0  # dA/da, dA/db
    dba_prev, dba_cur, dbb_prev, dbb_cur = 0.0, 0.0, 0.0, 0.0  # dB/da, dB/db
    value_last = _INF
    last_a = _INF
    last_b = _INF
    dlog_a = _NAN
    dlog_b = _NAN
    for n in range(1, _INC_MAX_TERMS + 1):
        m = n // 2
        if n % 2:
            den = (a + 2 * m) * (a + 2 * m + 1)
            d = -(a + m) * (a + b + m) * x / den
            d_a = -(2 * a + b + 2 * m) * x / den - d * (2 * a + 4 * m + 1) / den
            d_b = -(a + m) * x / den
        else:
            den = (a + 2 * m - 1) * (a + 2 * m)
            d = m * (b - m) * x / den
            d_a = -d * (2 * a + 4 * m - 1) / den
            d_b = m * x / den
        a_new = a_cur + d * a_prev
        b_new = b_cur + d * b_prev
        daa_new = daa_cur + d_a * a_prev + d * daa_prev
        dab_new = dab_cur + d_b * a_prev + d * dab_prev
        dba_new = dba_cur + d_a * b_prev + d * dba_prev
        dbb_new = dbb_cur + d_b * b_prev + d * dbb_prev
        a_prev, a_cur, b_prev, b_cur = a_cur, a_new, b_cur, b_new
        daa_prev, daa_cur, dab_prev, dab_cur = daa_cur, daa_new, dab_cur, dab_new
        dba_prev, dba_cur, dbb_prev, dbb_cur = dba_cur, dba_new, dbb_cur, dbb_new
        scale = max(abs(a_cur), abs(b_cur))
        if scale > _INC_BIG:
            s = 1.0 / scale
            a_prev *= s
            a_cur *= s
            b_prev *= s
            b_cur *= s
            daa_prev *= s
            daa_cur *= s
            dab_prev *= s
            dab_cur *= s
            dba_prev *= s
            dba_cur *= s
            dbb_prev *= s
            dbb_cur *= s
        value = a_cur / b_cur
        dlog_a = daa_cur / a_cur - dba_cur / b_cur
        dlog_b = dab_cur / a_cur - dbb_cur / b_cur
        if not math.isfinite(value):
            break
        if (
            abs(value - value_last) <= _INC_TOL * abs(value)
            and abs(dlog_a - last_a) <= _INC_TOL * abs(dlog_a)
            and abs(dlog_b - last_b) <= _INC_TOL * abs(dlog_b)
        ):
            break
        value_last = value
        last_a = dlog_a
        last_b = dlog_b
    return (
        math.log(x) + digamma_diff(a + 1.0, b - 1.0) - dlog_a,
        math.log1p(-x) + digamma_diff(b, a) - dlog_b,
    )


@_jit
def _betainc_dab(a: float, b: float, x: float) -> tuple[float, float]:
    """Return (d/da, d/db) I_x(a, b) (``kiln_graph._incomplete.betainc_dab``)."""
    if not (0.0 < a < _INF and 0.0 < b < _INF) or math.isnan(x) or x < 0.0 or x > 1.0:
        return _NAN, _NAN
    if x == 0.0 or x == 1.0:
        return 0.0, 0.0
    if x * (a + b + 2.0) < a + 1.0:
        value = _beta_fraction(a, b, x)
        la, lb = _beta_fraction_dlog(a, b, x)
        return value * la, value * lb
    y = 1.0 - x
    value = _beta_fraction(b, a, y)
    lb, la = _beta_fraction_dlog(b, a, y)
    return -value * la, -value * lb


@_jit
def betainc_da(a: float, b: float, x: float) -> float:
    """Return d/da I_x(a, b)."""
    return _betainc_dab(a, b, x)[0]


@_jit
def betainc_db(a: float, b: float, x: float) -> float:
    """Return d/db I_x(a, b)."""
    return _betainc_dab(a, b, x)[1]
