"""Special functions in Numba-compiled graphs against SciPy (and mpmath), over wide ranges.

All of them go through one compiled kiln function (the scalar templates and the njit
helpers of ``kiln_numba._runtime``). Agreement is to 1e-12 relative, with an absolute
allowance only where the function itself is ill-conditioned (near a zero reached by
cancellation of larger terms), where SciPy's own result is no more accurate than that.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import kiln
import kiln.tensor as kt
from kiln_numba._runtime import erfcx, erfinv

RNG = np.random.default_rng(20241130)
RTOL = 1e-12


def _grid(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
X_WIDE = _grid(np.linspace(-700, 700, 4001), RNG.normal(0, 10, 2000), SPECIAL)
X_ERFCX = _grid(
    np.linspace(-26.6, 30, 6001),
    np.logspace(-300, 300, 601),
    -np.logspace(-300, np.log10(26.6), 301),
    [-26.7, -27.0, 9.99, 10.0, 10.01, 1e9, 1e10],
    SPECIAL,
)
Y_ERFINV = _grid(
    np.linspace(-1, 1, 4001),
    1 - np.logspace(-16, -1, 301),
    -1 + np.logspace(-16, -1, 301),
    np.logspace(-300, -1, 301),
    [np.nextafter(1, 0), np.nextafter(-1, 0), 1.5, -2.0],
    SPECIAL,
)
X_DIGAMMA = _grid(
    np.linspace(-50, 50, 10007),
    np.logspace(-300, 300, 601),
    -np.logspace(-3, 2, 501),
    -0.504083008264455409 + np.linspace(-0.31, 0.31, 201),
    1.4616321449683623 + np.linspace(-1e-3, 1e-3, 201),
    [-1.0, -2.0, 1.0, 2.0, 10.0, 11.0, -1e300],
    SPECIAL,
)
N_POLYGAMMA = RNG.integers(0, 6, 4000).astype(np.float64)
X_POLYGAMMA = _grid(np.linspace(-7.2, 40, 3000), np.logspace(-2, 4, 1000))
X_POLYGAMMA[X_POLYGAMMA == np.round(X_POLYGAMMA)] += 0.25
X_LOGIT = _grid(
    np.linspace(0, 1, 20001),
    1 - np.logspace(-16, -1, 301),
    np.logspace(-300, -1, 301),
    [1.5, -0.5, np.nan],
)
A_BETA = _grid(
    10 ** RNG.uniform(-5, 12, 3000),
    -(10 ** RNG.uniform(-3, 2, 500)) - 0.25,
    [0, -1, -2, 1, np.inf, np.nan],
)
B_BETA = _grid(10 ** RNG.uniform(-5, 12, 3000), 10 ** RNG.uniform(-3, 2, 500), [3, 2, -1, 1, 2, 1])
X_GAMMALN = _grid(np.linspace(-50.25, 200.25, 10001), np.logspace(-300, 300, 601), SPECIAL)
X_ERF = _grid(np.linspace(-30, 30, 6001), np.logspace(-300, 2, 301), SPECIAL)
X_LOG1MEXP = _grid(-np.logspace(-30, 3, 400), [0.0, -np.inf, -math.log(2)])


@pytest.fixture(scope="module")
def computed() -> dict[str, np.ndarray]:
    """Every special function on its grid, through one Numba-compiled kiln function."""
    names = [
        "sigmoid", "softplus", "logit", "erfcx", "erfinv", "digamma", "polygamma",
        "betaln", "gammaln", "erf", "erfc", "log1mexp",
    ]  # fmt: skip
    x = {k: kt.vector(k) for k in ["wide", "erfcx", "erfinv", "digamma", "pn", "px", "logit"]}
    x.update({k: kt.vector(k) for k in ["a", "b", "gammaln", "erf", "log1mexp"]})
    outs = [
        kt.sigmoid(x["wide"]),
        kt.softplus(x["wide"]),
        kt.logit(x["logit"]),
        kt.erfcx(x["erfcx"]),
        kt.erfinv(x["erfinv"]),
        kt.digamma(x["digamma"]),
        kt.polygamma(x["pn"], x["px"]),
        kt.betaln(x["a"], x["b"]),
        kt.gammaln(x["gammaln"]),
        kt.erf(x["erf"]),
        kt.erfc(x["erf"]),
        kt.log1mexp(x["log1mexp"]),
    ]
    values = [X_WIDE, X_ERFCX, Y_ERFINV, X_DIGAMMA, N_POLYGAMMA, X_POLYGAMMA, X_LOGIT]
    values += [A_BETA, B_BETA, X_GAMMALN, X_ERF, X_LOG1MEXP]
    f = kiln.function(list(x.values()), outs, mode=kiln.Mode(rewrites=None, linker="numba"))
    return dict(zip(names, f(*values), strict=True))


def _check(got: np.ndarray, want: np.ndarray, atol: np.ndarray | float = 0.0) -> None:
    """Assert ``|got - want| <= atol + RTOL |want|`` (equal infinities, NaN where NaN)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        close = np.abs(got - want) <= atol + RTOL * np.abs(want)
    bad = np.flatnonzero(~(same | close))
    assert bad.size == 0, (
        f"{bad.size} of {got.size} differ, e.g. at {bad[:5]}: got {got[bad[:5]]}, "
        f"want {want[bad[:5]]}"
    )


def test_sigmoid_softplus(computed):
    """Expit and log(1 + exp(x)) on [-700, 700] and the special values."""
    with np.errstate(invalid="ignore"):
        _check(computed["sigmoid"], sp.expit(X_WIDE))
        _check(computed["softplus"], np.logaddexp(0, X_WIDE))


def test_logit(computed):
    """Logit on [0, 1] (accurate near 1/2, as SciPy), NaN outside."""
    with np.errstate(all="ignore"):
        _check(computed["logit"], sp.logit(X_LOGIT))


def test_erfcx(computed):
    """exp(x^2) erfc(x): both tails, the switch to the asymptotic series, overflow."""
    _check(computed["erfcx"], sp.erfcx(X_ERFCX))


def test_erfinv(computed):
    """Erfinv up to 1 - 2^-53, tiny arguments, +-1, NaN outside [-1, 1]."""
    _check(computed["erfinv"], sp.erfinv(Y_ERFINV))


def test_digamma(computed):
    """digamma: both roots, poles (NaN, +-inf at zero), the reflection for x < 0."""
    want = sp.digamma(X_DIGAMMA)
    # Below 0, psi(x) = psi(1 - x) - pi cot(pi x): near a root the terms cancel, and
    # neither result is more accurate than ~1e-15 of them.
    with np.errstate(all="ignore"):
        scale = np.where(
            X_DIGAMMA < 0,
            np.abs(np.pi / np.tan(np.pi * X_DIGAMMA)) + np.abs(sp.digamma(1 - X_DIGAMMA)),
            0,
        )
    _check(computed["digamma"], want, atol=np.nan_to_num(1e-14 * scale))


def test_polygamma(computed):
    """Polygamma of orders 0-5, positive and negative non-integer x."""
    with np.errstate(all="ignore"):
        want = sp.polygamma(N_POLYGAMMA, X_POLYGAMMA)
    # For x < 0 the Hurwitz series has terms of both signs: allow their rounding.
    scale = np.where(X_POLYGAMMA < 0, np.abs(want) * 1e3, 0.0)
    _check(computed["polygamma"], want, atol=1e-15 * scale)


def test_betaln(computed):
    """log|B(a, b)| from 1e-5 to 1e12, the asymptotic branch, non-positive integers."""
    want = sp.betaln(A_BETA, B_BETA)
    # lgamma(a) + lgamma(b) - lgamma(a + b) loses their magnitude's rounding (in SciPy too).
    with np.errstate(all="ignore"):
        terms = (
            np.abs(sp.gammaln(A_BETA))
            + np.abs(sp.gammaln(B_BETA))
            + np.abs(sp.gammaln(A_BETA + B_BETA))
        )
    _check(computed["betaln"], want, atol=np.nan_to_num(1e-15 * terms, posinf=0.0))


def test_gammaln_erf_erfc(computed):
    """log|Gamma|, erf and erfc (glibc's, through Numba) against SciPy's."""
    _check(computed["gammaln"], sp.gammaln(X_GAMMALN), atol=1e-13)
    _check(computed["erf"], sp.erf(X_ERF))
    # Beyond x = 26.55 erfc is subnormal: glibc gives it, SciPy flushes it to 0.
    _check(computed["erfc"], sp.erfc(X_ERF), atol=1e-300)


def test_log1mexp_against_mpmath(computed):
    """log(1 - exp(x)) for x <= 0, on both sides of -log 2, against mpmath."""
    with mpmath.workdps(500):  # 1 - exp(-1000) needs ~450 digits
        want = np.array(
            [float(mpmath.log(1 - mpmath.exp(mpmath.mpf(v)))) if v < 0 else 0.0 for v in X_LOG1MEXP]
        )
    want[X_LOG1MEXP == -np.inf] = 0.0
    want[X_LOG1MEXP == 0] = -np.inf
    _check(computed["log1mexp"], want)


def test_erfcx_erfinv_against_mpmath():
    """Spot checks where SciPy is not the reference: erfcx below 0, erfinv near 1."""
    with mpmath.workdps(40):
        for x in [-26.07, -20.5, -5.3, -0.01, 3.7, 9.999, 10.001, 12.5, 1e5]:
            want = mpmath.exp(mpmath.mpf(x) ** 2) * mpmath.erfc(mpmath.mpf(x))
            assert abs(erfcx(x) - want) <= 2e-16 * abs(want), x
        for y in [1 - 2.0**-53, 1 - 1e-15, 0.999999999, 0.3, 1e-200]:
            want = mpmath.erfinv(mpmath.mpf(y))
            assert abs(erfinv(y) - want) <= 4e-16 * abs(want), y
