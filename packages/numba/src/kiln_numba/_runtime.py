"""Scalar special functions for generated code, compiled once and cached by Numba.

Numba has ``math.erf``, ``math.lgamma`` and NumPy's ufuncs on scalars, but not SciPy's
special functions; these are written here in float64 to match SciPy to a few ulp.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_SQRT_PI = math.sqrt(math.pi)
_LN2 = math.log(2.0)


@njit(cache=True)
def sigmoid(x: float) -> float:
    """Return the logistic function 1 / (1 + exp(-x)), without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True)
def softplus(x: float) -> float:
    """Return log(1 + exp(x)) without overflow (NumPy's logaddexp(0, x))."""
    return np.logaddexp(0.0, x)


@njit(cache=True)
def log1mexp(x: float) -> float:
    """Return log(1 - exp(x)) for x <= 0, accurate on both sides of -log 2."""
    if x < -_LN2:
        return math.log1p(-math.exp(x))
    return math.log(-math.expm1(x))


@njit(cache=True)
def logit(x: float) -> float:
    """Return log(x / (1 - x))."""
    return math.log(x / (1.0 - x))


@njit(cache=True)
def erfcx(x: float) -> float:
    """Return exp(x**2) * erfc(x), accurate for large x (continued fraction)."""
    if x < 25.0:
        if x < -26.0:
            return np.inf
        return math.exp(x * x) * math.erfc(x)
    # Asymptotic expansion: erfcx(x) ~ 1/(x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - ...)
    inv2 = 1.0 / (2.0 * x * x)
    term = 1.0
    total = 1.0
    for k in range(1, 12):
        term *= -(2 * k - 1) * inv2
        total += term
    return total / (x * _SQRT_PI)


@njit(cache=True)
def erfinv(y: float) -> float:
    """Return the inverse error function (Giles' approximation + two Newton steps)."""
    if y <= -1.0:
        return -np.inf if y == -1.0 else np.nan
    if y >= 1.0:
        return np.inf if y == 1.0 else np.nan
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 6.25:
        w -= 3.125
        p = -3.6444120640178196996e-21
        p = -1.685059138182016589e-19 + p * w
        p = 1.2858480715256400167e-18 + p * w
        p = 1.115787767802518096e-17 + p * w
        p = -1.333171662854620906e-16 + p * w
        p = 2.0972767875968561637e-17 + p * w
        p = 6.6376381343583238325e-15 + p * w
        p = -4.0545662729752068639e-14 + p * w
        p = -8.1519341976054721522e-14 + p * w
        p = 2.6335093153082322977e-12 + p * w
        p = -1.2975133253453532498e-11 + p * w
        p = -5.4154120542946279317e-11 + p * w
        p = 1.051212273321532285e-09 + p * w
        p = -4.1126339803469836976e-09 + p * w
        p = -2.9070369957882005086e-08 + p * w
        p = 4.2347877827932403518e-07 + p * w
        p = -1.3654692000834678645e-06 + p * w
        p = -1.3882523362786468719e-05 + p * w
        p = 0.0001867342080340571352 + p * w
        p = -0.00074070253416626697512 + p * w
        p = -0.0060336708714301490533 + p * w
        p = 0.24015818242558961693 + p * w
        p = 1.6536545626831027356 + p * w
    elif w < 16.0:
        w = math.sqrt(w) - 3.25
        p = 2.2137376921775787049e-09
        p = 9.0756561938885390979e-08 + p * w
        p = -2.7517406297064545428e-07 + p * w
        p = 1.8239629214389227755e-08 + p * w
        p = 1.5027403968909827627e-06 + p * w
        p = -4.013867526981545969e-06 + p * w
        p = 2.9234449089955446044e-06 + p * w
        p = 1.2475304481671778723e-05 + p * w
        p = -4.7318229009055733981e-05 + p * w
        p = 6.8284851459573175448e-05 + p * w
        p = 2.4031110387097893999e-05 + p * w
        p = -0.0003550375203628474796 + p * w
        p = 0.00095328937973738049703 + p * w
        p = -0.0016882755560235047313 + p * w
        p = 0.0024914420961078508066 + p * w
        p = -0.0037512085075692412107 + p * w
        p = 0.005370914553590063617 + p * w
        p = 1.0052589676941592334 + p * w
        p = 3.0838856104922207635 + p * w
    else:
        w = math.sqrt(w) - 5.0
        p = -2.7109920616438573243e-11
        p = -2.5556418169965252055e-10 + p * w
        p = 1.5076572693500548083e-09 + p * w
        p = -3.7894654401267369937e-09 + p * w
        p = 7.6157012080783393804e-09 + p * w
        p = -1.4960026627149240478e-08 + p * w
        p = 2.9147953450901080826e-08 + p * w
        p = -6.7711997758452339498e-08 + p * w
        p = 2.2900482228026654717e-07 + p * w
        p = -9.9298272942317002539e-07 + p * w
        p = 4.5260625972231537039e-06 + p * w
        p = -1.9681778105531670567e-05 + p * w
        p = 7.5995277030017761139e-05 + p * w
        p = -0.00021503011930044477347 + p * w
        p = -0.00013871931833623122026 + p * w
        p = 1.0103004648645343977 + p * w
        p = 4.8499064014085844221 + p * w
    x = p * y
    for _ in range(2):  # Newton on erf(x) - y
        err = math.erf(x) - y
        x -= err / (2.0 / _SQRT_PI * math.exp(-x * x))
    return x


@njit(cache=True)
def digamma(x: float) -> float:
    """Return the digamma function (reflection, recurrence, asymptotic series)."""
    if math.isnan(x) or x == -np.inf:
        return np.nan
    if x <= 0.0 and x == math.floor(x):
        return np.nan
    result = 0.0
    if x < 0.0:
        # psi(1 - x) - psi(x) = pi / tan(pi x)
        result -= math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 6.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (
        1.0 / 12
        - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * 691.0 / 32760))))
    )
    return result + math.log(x) - 0.5 / x - series


@njit(cache=True)
def polygamma(n: float, x: float) -> float:
    """Return the n-th derivative of digamma (n = 0 is digamma), by the Hurwitz zeta series."""
    k = int(n)
    if k != n or k < 0:
        return np.nan
    if k == 0:
        return digamma(x)
    if x <= 0.0 and x == math.floor(x):
        return np.nan
    # psi^(k)(x) = (-1)^(k+1) k! sum_{j>=0} 1/(x+j)^(k+1): recurrence to x >= 20, then
    # the Euler-Maclaurin tail.
    total = 0.0
    while x < 20.0:
        total += 1.0 / x ** (k + 1)
        x += 1.0
    s = k + 1.0
    tail = x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** (-s)
    # Bernoulli terms B2/2!, B4/4!, B6/6!, B8/8!
    b = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30)
    fact = (2.0, 24.0, 720.0, 40320.0)
    rising = s
    for j in range(4):
        tail += b[j] / fact[j] * rising * x ** (-s - 2 * j - 1)
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2)
    total += tail
    sign = 1.0 if k % 2 == 1 else -1.0
    return sign * math.gamma(k + 1.0) * total


@njit(cache=True)
def betaln(a: float, b: float) -> float:
    """Return log |B(a, b)|."""
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@njit(cache=True)
def round_half_to_even(x: float) -> float:
    """Return x rounded to the nearest integer, halves to even (NumPy's rule)."""
    return np.round(x)


@njit(cache=True)
def true_mod(a, b):  # type: ignore[no-untyped-def]
    """Return a % b with the sign of b, as NumPy's ``mod``."""
    return np.mod(a, b)
