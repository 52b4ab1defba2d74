"""Incomplete gamma/beta functions, their derivatives, Bessel I0/I1, from exact MLX ops.

The incomplete gamma and beta functions (and their parameter derivatives) and the
modified Bessel functions of order 0 and 1, built from MLX's exact operations.

MLX has none of them. A traced MLX program has no data-dependent loop, so every series
and continued fraction here runs a fixed number of terms (unrolled while tracing), and
``mx.where`` picks the expansion that converges for each element:

- ``P(a, x)`` (:func:`gammainc`), ``Q(a, x)`` (:func:`gammaincc`): for ``x < a + 1`` the
  series ``P = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)...(a+n))``, else Legendre's
  continued fraction ``Q = x^a e^-x / Gamma(a) / (x+1-a - 1(1-a)/(x+3-a - ...))``,
  evaluated backwards; the other one is ``1 -`` it.
- ``I_x(a, b)`` (:func:`betainc`): for ``x < (a + 1) / (a + b + 2)`` the continued fraction
  ``I = x^a (1-x)^b / (a B(a, b)) / (1 + d1/(1 + d2/(1 + ...)))``, else
  ``1 - I_{1-x}(b, a)``.
- The derivatives in ``a`` (and ``b``) differentiate the same expansions term by term
  (forward mode through the series sums and the backward recurrences), as
  ``kiln_graph._incomplete`` does in NumPy: each is the function times a logarithmic
  derivative.
- ``I0``, ``I1`` (and ``exp(-|x|)`` times them): the power series (positive terms) for
  ``|x| < 20``, the asymptotic series ``e^x / sqrt(2 pi x) sum_k ...`` from 20 on.

Range. With the fixed term counts (:data:`GAMMA_TERMS`, :data:`BETA_TERMS`) the
incomplete functions agree with SciPy to about 1e-11 relative (1e-13 for parameters
below 200) up to
:data:`GAMMA_MAX_A` (``a``) and :data:`BETA_MAX_AB` (``a``, ``b``); beyond those the
expansions may not have converged and the result is NaN, never a wrong number. Special
values follow SciPy: NaN where a value is NaN, a parameter is negative or ``x`` is
outside the support; the limits at the ends of the support.
"""

from __future__ import annotations

import math
from typing import Any

import mlx.core as mx

from kiln_graph import scalar as m
from kiln_mlx import _float64_math as f64
from kiln_mlx._dtypes import const

#: Terms of the gamma series and of Legendre's fraction.
GAMMA_TERMS = 160
#: Terms of the continued fraction of the incomplete beta function.
BETA_TERMS = 160
#: The largest shape parameter of ``gammainc`` for which the terms suffice.
GAMMA_MAX_A = 400.0
#: The largest parameters of ``betainc`` for which the terms suffice.
BETA_MAX_AB = 1000.0
_BESSEL_SPLIT = 20.0
_BESSEL_SERIES_TERMS = 55
_BESSEL_ASYMPTOTIC_TERMS = 30
#: The scalar ops whose unrolled expansions ``mx.compile`` cannot afford: it splits their
#: thousands of operations into hundreds of C++ kernels (over ten minutes of g++ for
#: one function with gammainc, betainc and their gradients, over five for i0e and i1
#: with theirs; eagerly each runs in under 0.1 s).
#: A graph with one of them runs eagerly (:class:`kiln_mlx.MlxLinker`).
UNCOMPILABLE: tuple[type, ...] = (
    m.Gammainc,
    m.Gammaincc,
    m.GammaincDa,
    m.GammainccDa,
    m.Betainc,
    m.BetaincDa,
    m.BetaincDb,
    m.I0,
    m.I1,
    m.I0e,
    m.I1e,
)
#: B_2k / 2k: the coefficients of digamma's asymptotic series (in 1 / x**2k).
_PSI_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def _c(value: float, like: Any) -> Any:
    return const(value, like)


def _broadcast(*xs: Any) -> list[Any]:
    return list(mx.broadcast_arrays(*xs))


def digamma_diff(x: Any, h: Any) -> Any:
    """Return ``digamma(x + h) - digamma(x)`` for ``x > 0``, ``x + h > 0``, without cancellation.

    ``x`` is shifted above 10 by ``psi(y + 1) = psi(y) + 1/y``, then the asymptotic
    series are subtracted term by term.
    """
    out = mx.zeros_like(x)
    one, ten = _c(1.0, x), _c(10.0, x)
    for _ in range(10):
        low = x < ten
        out = out + mx.where(low, h / (x * (x + h)), _c(0.0, x))
        x = mx.where(low, x + one, x)
    log_ratio = mx.log1p(h / x)
    out = out + log_ratio + h / (_c(2.0, x) * x * (x + h))
    inv2 = one / (x * x)
    power = mx.ones_like(x)
    for k, c in enumerate(_PSI_ASYMPTOTIC, start=1):
        power = power * inv2
        out = out - _c(c, x) * power * mx.expm1(_c(-2.0 * k, x) * log_ratio)
    return out


# --- incomplete gamma -------------------------------------------------------------------


def _gamma_series(a: Any, x: Any, derivative: bool) -> tuple[Any, Any]:
    """Return ``sum_n c_n`` and ``sum_n c_n h_n`` (``h_n = sum_{k<=n} 1/(a+k)``)."""
    one = _c(1.0, a)
    c, s, t, h = one, one, _c(0.0, a), _c(0.0, a)
    for n in range(1, GAMMA_TERMS + 1):
        ap = a + _c(float(n), a)
        c = c * (x / ap)
        s = s + c
        if derivative:
            h = h + one / ap
            t = t + c * h
    return s, t


def _gamma_fraction(a: Any, x: Any, derivative: bool) -> tuple[Any, Any]:
    """Return Legendre's fraction ``K`` of ``Q`` and ``dK/da`` (backward recurrence)."""
    t = x + _c(2.0 * GAMMA_TERMS + 1.0, x) - a
    dt = _c(-1.0, a)
    for n in range(GAMMA_TERMS, 0, -1):
        fn = _c(float(n), a)
        an = fn * (a - fn)
        b_prev = x + _c(2.0 * n - 1.0, x) - a
        if derivative:
            dt = _c(-1.0, a) + fn / t - an * dt / (t * t)
        t = b_prev + an / t
    return t, dt


def _gamma_parts(a: Any, x: Any, derivative: bool) -> dict[str, Any]:
    """Return P or Q (where each converges) and their logarithmic derivatives in ``a``."""
    a, x = _broadcast(a, x)
    one = _c(1.0, a)
    ok = (a > _c(0.0, a)) & (a <= _c(GAMMA_MAX_A, a)) & (x > _c(0.0, x)) & (x < _c(math.inf, x))
    series = x < a + one
    sa = mx.where(ok, a, one)
    xs = mx.where(ok & series, x, _c(0.5, x))  # the series' x: below a + 1
    xf = mx.where(ok & ~series, mx.maximum(x, sa + one), sa + one)
    s, t = _gamma_series(sa, xs, derivative)
    p = f64.exp(sa * mx.log(xs) - xs - f64.lgamma(sa + one)) * s
    k, dk = _gamma_fraction(sa, xf, derivative)
    q = f64.exp(sa * mx.log(xf) - xf - f64.lgamma(sa)) / k
    parts = {"ok": ok, "series": series, "a": a, "x": x, "p": p, "q": q}
    if derivative:
        parts["dlog_p"] = mx.log(xs) - f64.digamma(sa + one) - t / s
        parts["dlog_q"] = mx.log(xf) - f64.digamma(sa) - dk / k
    return parts


def _gamma_edges(value: Any, a: Any, x: Any, at_zero: float, at_inf: float) -> Any:
    """Apply SciPy's special values of P (``at_zero``, ``at_inf``) or Q to ``value``."""
    zero, nan = _c(0.0, a), _c(math.nan, a)
    bad = mx.isnan(a) | mx.isnan(x) | (a < zero) | (x < zero)
    value = mx.where(x == zero, _c(at_zero, a), value)
    value = mx.where(x == _c(math.inf, x), _c(at_inf, a), value)
    value = mx.where((a == zero) & (x > zero), _c(at_inf, a), value)
    value = mx.where(a > _c(GAMMA_MAX_A, a), nan, value)
    return mx.where(bad, nan, value)


def gammainc(a: Any, x: Any) -> Any:
    """Return the regularized lower incomplete gamma function ``P(a, x)``."""
    g = _gamma_parts(a, x, derivative=False)
    value = mx.where(g["series"], g["p"], _c(1.0, g["a"]) - g["q"])
    return _gamma_edges(value, g["a"], g["x"], 0.0, 1.0)


def gammaincc(a: Any, x: Any) -> Any:
    """Return the regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    g = _gamma_parts(a, x, derivative=False)
    value = mx.where(g["series"], _c(1.0, g["a"]) - g["p"], g["q"])
    return _gamma_edges(value, g["a"], g["x"], 1.0, 0.0)


def gammainc_da(a: Any, x: Any) -> Any:
    """Return ``d/da P(a, x)`` (0 at ``x = 0`` and ``x = inf``; NaN for ``a`` not positive)."""
    g = _gamma_parts(a, x, derivative=True)
    a, x = g["a"], g["x"]
    zero, nan = _c(0.0, a), _c(math.nan, a)
    value = mx.where(g["series"], g["p"] * g["dlog_p"], -g["q"] * g["dlog_q"])
    value = mx.where((x == zero) | (x == _c(math.inf, x)), zero, value)
    good = (a > zero) & (a <= _c(GAMMA_MAX_A, a)) & (x >= zero)
    return mx.where(good, value, nan)


def gammaincc_da(a: Any, x: Any) -> Any:
    """Return ``d/da Q(a, x) = -d/da P(a, x)``."""
    return -gammainc_da(a, x)


# --- incomplete beta --------------------------------------------------------------------


def _beta_fraction(a: Any, b: Any, x: Any, derivative: bool) -> tuple[Any, Any, Any]:
    """Return the fraction ``F = 1 + d1/(1 + d2/(...))`` of ``I_x(a, b)`` and dF/da, dF/db."""
    one = _c(1.0, a)
    t, ta, tb = one, _c(0.0, a), _c(0.0, a)
    for n in range(BETA_TERMS, 0, -1):
        m = n // 2
        fm = _c(float(m), a)
        if n % 2:  # d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1))
            den = (a + _c(2.0 * m, a)) * (a + _c(2.0 * m + 1.0, a))
            d = -(a + fm) * (a + b + fm) * x / den
            if derivative:
                d_a = (
                    -(_c(2.0, a) * a + b + _c(2.0 * m, a)) * x / den
                    - d * (_c(2.0, a) * a + _c(4.0 * m + 1.0, a)) / den
                )
                d_b = -(a + fm) * x / den
        else:  # d_{2m} = m (b-m) x / ((a+2m-1)(a+2m))
            den = (a + _c(2.0 * m - 1.0, a)) * (a + _c(2.0 * m, a))
            d = fm * (b - fm) * x / den
            if derivative:
                d_a = -d * (_c(2.0, a) * a + _c(4.0 * m - 1.0, a)) / den
                d_b = fm * x / den
        if derivative:
            t2 = t * t
            ta = d_a / t - d * ta / t2
            tb = d_b / t - d * tb / t2
        t = one + d / t
    return t, ta, tb


def _beta_parts(a: Any, b: Any, x: Any, derivative: bool) -> dict[str, Any]:
    """Return ``I`` on the side where its fraction converges, and its derivatives there."""
    a, b, x = _broadcast(a, b, x)
    zero, one, half = _c(0.0, a), _c(1.0, a), _c(0.5, a)
    limit = _c(BETA_MAX_AB, a)
    params = (a > zero) & (b > zero) & (a <= limit) & (b <= limit)
    inside = params & (x > zero) & (x < one)
    lower = x * (a + b + _c(2.0, a)) < a + one
    p = mx.where(inside, mx.where(lower, a, b), one)
    q = mx.where(inside, mx.where(lower, b, a), one)
    y = mx.where(inside, mx.where(lower, x, one - x), half)
    f, fp, fq = _beta_fraction(p, q, y, derivative)
    value = f64.exp(p * mx.log(y) + q * mx.log1p(-y) - mx.log(p) - f64.betaln(p, q)) / f
    parts = {"a": a, "b": b, "x": x, "inside": inside, "lower": lower, "value": value}
    parts["params"] = params
    if derivative:
        parts["dlog_p"] = mx.log(y) + digamma_diff(p + one, q - one) - fp / f
        parts["dlog_q"] = mx.log1p(-y) + digamma_diff(q, p) - fq / f
    return parts


def _beta_special(value: Any, g: dict[str, Any], at_zero: float, at_one: float) -> Any:
    a, x = g["a"], g["x"]
    zero, one, nan = _c(0.0, a), _c(1.0, a), _c(math.nan, a)
    value = mx.where(g["params"] & (x == zero), _c(at_zero, a), value)
    value = mx.where(g["params"] & (x == one), _c(at_one, a), value)
    return mx.where(g["inside"] | (g["params"] & ((x == zero) | (x == one))), value, nan)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """Return the regularized incomplete beta function ``I_x(a, b)``.

    NaN where ``a`` or ``b`` is not positive or above :data:`BETA_MAX_AB`, or ``x`` is
    outside ``[0, 1]``.
    """
    g = _beta_parts(a, b, x, derivative=False)
    a, b, x = g["a"], g["b"], g["x"]
    zero, one = _c(0.0, a), _c(1.0, a)
    value = mx.where(g["lower"], g["value"], one - g["value"])
    value = _beta_special(value, g, 0.0, 1.0)
    # One parameter 0 (as SciPy): all the mass at 1 (b = 0) or at 0 (a = 0).
    support = (x >= zero) & (x <= one)
    at_one = (b == zero) & (a > zero) & (a <= _c(BETA_MAX_AB, a)) & support
    at_zero = (a == zero) & (b > zero) & (b <= _c(BETA_MAX_AB, a)) & support
    value = mx.where(at_one, mx.where(x == one, one, zero), value)
    return mx.where(at_zero, mx.where(x == zero, zero, one), value)


def betainc_dab(a: Any, b: Any, x: Any) -> tuple[Any, Any]:
    """Return ``(d/da, d/db)`` of ``I_x(a, b)`` (0 at ``x = 0`` and ``x = 1``)."""
    g = _beta_parts(a, b, x, derivative=True)
    lower, v = g["lower"], g["value"]
    sign = mx.where(lower, _c(1.0, v), _c(-1.0, v))
    da = sign * v * mx.where(lower, g["dlog_p"], g["dlog_q"])
    db = sign * v * mx.where(lower, g["dlog_q"], g["dlog_p"])
    return _beta_special(da, g, 0.0, 0.0), _beta_special(db, g, 0.0, 0.0)


def betainc_da(a: Any, b: Any, x: Any) -> Any:
    """Return ``d/da I_x(a, b)``."""
    return betainc_dab(a, b, x)[0]


def betainc_db(a: Any, b: Any, x: Any) -> Any:
    """Return ``d/db I_x(a, b)``."""
    return betainc_dab(a, b, x)[1]


# --- modified Bessel functions ----------------------------------------------------------


def _bessel_series(x: Any, order: int) -> Any:
    """Return ``I_order(x)`` for ``|x| <= 20`` (power series, positive terms in x**2)."""
    y = x * x * _c(0.25, x)
    term = _c(1.0, x) if order == 0 else x * _c(0.5, x)
    total = term
    for k in range(1, _BESSEL_SERIES_TERMS):
        term = term * y / _c(float(k * (k + order)), x)
        total = total + term
    return total


def _bessel_asymptotic(z: Any, order: int) -> Any:
    """Return ``exp(-z) I_order(z)`` for ``z >= 20`` (Hankel's asymptotic series)."""
    mu = 4.0 * order * order
    term = _c(1.0, z)
    total = term
    eight_z = _c(8.0, z) * z
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        term = term * _c(-(mu - (2 * k - 1) ** 2) / k, z) / eight_z
        total = total + term
    return total / mx.sqrt(_c(2.0 * math.pi, z) * z)


def _bessel(x: Any, order: int, scaled: bool) -> Any:
    ax = mx.abs(x)
    split = _c(_BESSEL_SPLIT, x)
    near_x = mx.where(ax < split, x, _c(0.0, x))
    near = _bessel_series(near_x, order)
    far_z = mx.maximum(ax, split)
    far = _bessel_asymptotic(far_z, order)  # exp(-|x|) I(|x|)
    if order == 1:
        far = mx.where(x < _c(0.0, x), -far, far)
    if scaled:
        value = mx.where(ax < split, near * f64.exp(-ax), far)
    else:
        value = mx.where(ax < split, near, far * f64.exp(far_z))
    return mx.where(mx.isnan(x), x, value)


def i0(x: Any) -> Any:
    """Return the modified Bessel function of the first kind of order 0."""
    return _bessel(x, 0, scaled=False)


def i1(x: Any) -> Any:
    """Return the modified Bessel function of the first kind of order 1."""
    return _bessel(x, 1, scaled=False)


def i0e(x: Any) -> Any:
    """Return ``exp(-|x|) I0(x)``."""
    return _bessel(x, 0, scaled=True)


def i1e(x: Any) -> Any:
    """Return ``exp(-|x|) I1(x)``."""
    return _bessel(x, 1, scaled=True)
