"""Float64 functions that MLX computes at float32 accuracy, or lacks, built from exact ones.

MLX 0.32's ``exp``, ``sin``, ``cos``, ``sigmoid``, ``erf``, ``erfinv``, ``logaddexp``,
``logsumexp`` and ``softmax`` return float64 arrays with float32 accuracy (relative
errors of 1e-7 to 1e-5, measured), and it has no ``lgamma`` or ``digamma``. Its
arithmetic, ``log``, ``log1p``, ``expm1``, ``sqrt``, ``power``, ``tan``, ``tanh``,
``sinh``, ``cosh`` and the inverse trigonometric and hyperbolic functions are exact in
float64 (within an ulp or two of the C library). The functions here are written with
those only, without branches that depend on the data (``mx.where`` picks a result):

- ``exp``: ``x = k ln2 + r`` (``ln2`` in two parts, so ``k ln2`` is exact),
  ``exp(r) = 1 + expm1(r)``, scaled by ``2**k`` in two factors (subnormal results).
- ``sin``, ``cos``: from ``t = tan(x / 2)`` (MLX's ``tan`` does the range reduction):
  ``sin x = 2t / (1 + t**2)``, ``cos x = (1 - t**2) / (1 + t**2)``.
- ``erf``, ``erfc``, ``erfcx``: below 2.5 the series
  ``erf x = 2/sqrt(pi) exp(-x**2) sum 2**n x**(2n+1) / (2n+1)!!`` (positive terms),
  from 2.5 the continued fraction of ``erfc`` (Laplace's), evaluated backwards.
- ``erfinv``: MLX's float32-accurate value refined by three Newton steps on ``erf``.
- ``lgamma``, ``digamma``, ``polygamma``: the argument shifted above 10 by the
  recurrence, then Stirling's (asymptotic) series; reflection below 0.5.

Every function takes and returns arrays of one float dtype; on float32 (or float16)
arrays they use MLX's own functions, which are accurate for those.
"""

from __future__ import annotations

import math
from typing import Any

import mlx.core as mx

from kiln_mlx._dtypes import const

_LOG2E = 1.4426950408889634
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_EXP_MAX = 709.782712893384
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_ONE_OVER_SQRT_PI = 1.0 / math.sqrt(math.pi)
_ERF_SERIES_TERMS = 60
_ERFC_FRACTION_TERMS = 70
_ERF_SPLIT = 2.5
_SHIFT = 10
#: Bernoulli numbers B_2, B_4, ..., B_16.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _wide(x: Any) -> bool:
    return bool(x.dtype == mx.float64)


def _c(value: float, like: Any) -> Any:
    return const(value, like)


def exp(x: Any) -> Any:
    """Return ``exp(x)`` (float64 within an ulp or two)."""
    if not _wide(x):
        return mx.exp(x)
    xc = mx.clip(x, _c(-746.0, x), _c(710.0, x))
    k = mx.floor(xc * _c(_LOG2E, x) + _c(0.5, x))
    r = (xc - k * _c(_LN2_HI, x)) - k * _c(_LN2_LO, x)
    p = _c(1.0, x) + mx.expm1(r)
    k1 = mx.floor(k * _c(0.5, x))
    two = _c(2.0, x)
    y = p * mx.power(two, k1) * mx.power(two, k - k1)
    y = mx.where(x > _c(_EXP_MAX, x), _c(math.inf, x), y)
    return mx.where(mx.isnan(x), x, y)


def sigmoid(x: Any) -> Any:
    """Return ``1 / (1 + exp(-x))`` without overflow."""
    if not _wide(x):
        return mx.sigmoid(x)
    e = exp(-mx.abs(x))
    one = _c(1.0, x)
    return mx.where(x >= _c(0.0, x), one / (one + e), e / (one + e))


def softplus(x: Any) -> Any:
    """Return ``log(1 + exp(x))`` without overflow."""
    return mx.maximum(x, _c(0.0, x)) + mx.log1p(exp(-mx.abs(x)))


def logaddexp(a: Any, b: Any) -> Any:
    """Return ``log(exp(a) + exp(b))`` (``a + log 2`` where ``a == b``, infinities too)."""
    high = mx.maximum(a, b)
    gap = mx.where(a == b, _c(0.0, high), -mx.abs(a - b))
    return high + mx.log1p(exp(gap))


def log1mexp(x: Any) -> Any:
    """Return ``log(1 - exp(x))`` for ``x <= 0`` (Maechler's two branches)."""
    branch = x < _c(-math.log(2.0), x)
    return mx.where(branch, mx.log1p(-exp(x)), mx.log(-mx.expm1(x)))


def sin(x: Any) -> Any:
    """Return ``sin(x)`` from ``tan(x / 2)``."""
    if not _wide(x):
        return mx.sin(x)
    t = mx.tan(x * _c(0.5, x))
    one = _c(1.0, x)
    huge = mx.abs(t) > _c(1e100, x)
    safe = mx.where(huge, one, t)
    return mx.where(huge, _c(2.0, x) / t, _c(2.0, x) * safe / (one + safe * safe))


def cos(x: Any) -> Any:
    """Return ``cos(x)`` from ``tan(x / 2)``."""
    if not _wide(x):
        return mx.cos(x)
    t = mx.tan(x * _c(0.5, x))
    one = _c(1.0, x)
    huge = mx.abs(t) > _c(1e100, x)
    t2 = mx.where(huge, one, t) * mx.where(huge, one, t)
    return mx.where(huge, -one, (one - t2) / (one + t2))


def _erf_series(x: Any) -> Any:
    """Return ``erf(x)`` for ``|x| <= 2.5`` (positive-term series)."""
    x2 = x * x
    term = x
    total = x
    for n in range(1, _ERF_SERIES_TERMS):
        term = term * (_c(2.0, x) * x2) / _c(2.0 * n + 1.0, x)
        total = total + term
    return _c(_TWO_OVER_SQRT_PI, x) * exp(-x2) * total


def _erfcx_fraction(x: Any) -> Any:
    """Return ``exp(x**2) erfc(x)`` for ``x >= 2.5`` (continued fraction, backwards)."""
    tail = x
    for n in range(_ERFC_FRACTION_TERMS, 0, -1):
        tail = x + _c(n / 2.0, x) / tail
    return _c(_ONE_OVER_SQRT_PI, x) / tail


def erf(x: Any) -> Any:
    """Return the error function."""
    if not _wide(x):
        return mx.erf(x)
    a = mx.abs(x)
    split = _c(_ERF_SPLIT, x)
    inner = _erf_series(mx.minimum(a, split))
    far = mx.maximum(a, split)
    outer = _c(1.0, x) - _erfcx_fraction(far) * exp(-far * far)
    value = mx.where(a < split, inner, outer)
    return mx.where(mx.isnan(x), x, mx.where(x < _c(0.0, x), -value, value))


def erfc(x: Any) -> Any:
    """Return ``1 - erf(x)`` (accurate in the right tail)."""
    if not _wide(x):
        return mx.erfc(x) if hasattr(mx, "erfc") else _c(1.0, x) - mx.erf(x)
    a = mx.abs(x)
    split = _c(_ERF_SPLIT, x)
    far = mx.maximum(a, split)
    tail = _erfcx_fraction(far) * exp(-far * far)
    inner = _c(1.0, x) - _erf_series(mx.minimum(a, split))
    right = mx.where(a < split, inner, tail)  # erfc(|x|)
    value = mx.where(x < _c(0.0, x), _c(2.0, x) - right, right)
    return mx.where(mx.isnan(x), x, value)


def erfcx(x: Any) -> Any:
    """Return ``exp(x**2) erfc(x)`` (no overflow for large ``x``)."""
    split = _c(_ERF_SPLIT, x)
    far = _erfcx_fraction(mx.maximum(x, split))
    near = exp(x * x) * erfc(mx.minimum(x, split))
    return mx.where(x >= split, far, near)


def erfinv(p: Any) -> Any:
    """Return the inverse error function (Newton steps on :func:`erf`)."""
    y = mx.erfinv(p)
    if not _wide(p):
        return y
    inside = mx.abs(p) < _c(1.0, p)
    z = mx.where(inside, y, _c(0.0, p))
    for _ in range(3):
        z = z - (erf(z) - p) / (_c(_TWO_OVER_SQRT_PI, p) * exp(-z * z))
    return mx.where(inside, z, y)


def _shift(x: Any) -> tuple[Any, Any, Any]:
    """Return ``z = x + _SHIFT``, ``prod(x + k)`` and ``sum(1 / (x + k))``, k < _SHIFT."""
    prod = x
    recip = _c(1.0, x) / x
    for k in range(1, _SHIFT):
        xk = x + _c(float(k), x)
        prod = prod * xk
        recip = recip + _c(1.0, x) / xk
    return x + _c(float(_SHIFT), x), prod, recip


def _stirling(z: Any) -> Any:
    """Return ``lgamma(z)`` for ``z >= 10`` (Stirling's series)."""
    inv = _c(1.0, z) / z
    inv2 = inv * inv
    series = _c(0.0, z)
    for k in range(len(_BERNOULLI) - 1, -1, -1):
        b = _BERNOULLI[k]
        series = series * inv2 + _c(b / ((2 * k + 2) * (2 * k + 1)), z)
    half_log_2pi = _c(0.5 * math.log(2.0 * math.pi), z)
    return (z - _c(0.5, z)) * mx.log(z) - z + half_log_2pi + series * inv


def _sinpi(x: Any) -> Any:
    """Return ``sin(pi x)``, reduced to ``|x| <= 1`` first (exact zeros at integers)."""
    r = x - _c(2.0, x) * mx.round(x * _c(0.5, x))
    s = sin(_c(math.pi, x) * r)
    return mx.where(r == mx.round(r), _c(0.0, x), s)


def lgamma(x: Any) -> Any:
    """Return ``log |Gamma(x)|`` (``inf`` at the poles)."""
    pos = mx.maximum(x, _c(0.5, x))
    z, prod, _ = _shift(pos)
    shifted = _stirling(z) - mx.log(prod)
    big = pos > _c(1e15, x)
    positive = mx.where(big, _stirling(mx.where(big, pos, z)), shifted)
    # Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x), for x < 0.5.
    refl = 1.0 - mx.minimum(x, _c(0.5, x))
    z2, prod2, _ = _shift(refl)
    big2 = refl > _c(1e15, x)
    lg_refl = mx.where(big2, _stirling(mx.where(big2, refl, z2)), _stirling(z2) - mx.log(prod2))
    s = mx.abs(_sinpi(x))
    negative = mx.log(_c(math.pi, x)) - mx.log(s) - lg_refl
    negative = mx.where(s == _c(0.0, x), _c(math.inf, x), negative)
    return mx.where(x >= _c(0.5, x), positive, negative)


def _psi_asymptotic(z: Any) -> Any:
    inv2 = _c(1.0, z) / (z * z)
    series = _c(0.0, z)
    for k in range(len(_BERNOULLI) - 1, -1, -1):
        series = series * inv2 + _c(_BERNOULLI[k] / (2 * k + 2), z)
    return mx.log(z) - _c(0.5, z) / z - series * inv2


def digamma(x: Any) -> Any:
    """Return the digamma function (``nan`` at the poles)."""
    pos = mx.maximum(x, _c(0.5, x))
    z, _, recip = _shift(pos)
    positive = _psi_asymptotic(z) - recip
    refl = 1.0 - mx.minimum(x, _c(0.5, x))
    z2, _, recip2 = _shift(refl)
    t = mx.tan(_c(math.pi, x) * (x - mx.round(x)))
    negative = _psi_asymptotic(z2) - recip2 - _c(math.pi, x) / t
    negative = mx.where(x == mx.round(x), _c(math.nan, x), negative)
    return mx.where(x >= _c(0.5, x), positive, negative)


def polygamma(n: Any, x: Any) -> Any:
    """Return the ``n``-th derivative of digamma for ``x > 0`` and integers ``n >= 0``.

    For ``n >= 1``: the recurrence shifts ``x`` above 10, then
    ``(-1)**(n+1) [(n-1)!/z**n + n!/(2 z**(n+1)) + sum B_2k (2k+n-1)!/((2k)! z**(2k+n))]``.
    ``nan`` where ``n`` is not a non-negative integer or ``x <= 0``.
    """
    one = _c(1.0, x)
    m = mx.maximum(n, one)
    sign = mx.where(mx.remainder(m, _c(2.0, x)) == one, one, -one)  # (-1)**(n+1)
    fact_m = exp(lgamma(m + one))  # n!
    total = _c(0.0, x)
    for k in range(_SHIFT):
        total = total + mx.power(x + _c(float(k), x), -(m + one))
    z = x + _c(float(_SHIFT), x)
    tail = exp(lgamma(m)) / mx.power(z, m) + fact_m / (_c(2.0, x) * mx.power(z, m + one))
    for k, b in enumerate(_BERNOULLI, start=1):
        ratio = exp(lgamma(_c(2.0 * k, x) + m) - _c(math.lgamma(2 * k + 1), x))
        tail = tail + _c(b, x) * ratio / mx.power(z, _c(2.0 * k, x) + m)
    higher = sign * (fact_m * total + tail)
    value = mx.where(n == _c(0.0, x), digamma(x), higher)
    ok = (n >= _c(0.0, x)) & (n == mx.round(n)) & (x > _c(0.0, x))
    return mx.where(ok, value, _c(math.nan, x))


def betaln(a: Any, b: Any) -> Any:
    """Return ``log |B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b)``."""
    return lgamma(a) + lgamma(b) - lgamma(a + b)
