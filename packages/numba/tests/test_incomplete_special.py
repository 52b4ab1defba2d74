"""Numba's incomplete gamma and beta functions and their derivatives, over wide ranges.

Through one compiled kiln function each (the scalar templates and the njit helpers of
``kiln_numba._runtime``), against SciPy for the values and against the VM's NumPy
implementation (``kiln_graph._incomplete``, itself checked against mpmath) for the
derivatives in the parameters: parameters in [1e-3, 1e4], x over the support. The
Numba code forms ``x^a e^-x / Gamma(a)`` from logarithms of size ~a log x, so it keeps
about 1e-10 relative at a = 1e4 (3e-10 allowed; SciPy's Temme expansions keep more).
"""

from __future__ import annotations

import numpy as np
import scipy.special as sp

import kiln
import kiln.tensor as kt
from kiln_graph import _incomplete as inc

RNG = np.random.default_rng(20261203)
N = 2000
NUMBA = kiln.Mode(linker="numba")
#: Below this, values are compared in absolute terms (SciPy's Boost flushes to 0 earlier).
TINY = 1e-250


def _check(got: np.ndarray, want: np.ndarray, rtol: float = 3e-10) -> None:
    scale = np.maximum(np.abs(want), TINY)
    rel = np.abs(got - want) / scale
    assert np.all(rel <= rtol), (np.nanmax(rel), np.nanargmax(rel))


def test_gamma_functions_and_derivative_over_wide_ranges() -> None:

    a = np.exp(RNG.uniform(np.log(1e-3), np.log(1e4), N))
    x = a * np.exp(RNG.normal(0.0, 1.0, N))
    sa, sx = kt.vector("a"), kt.vector("x")
    f = kiln.function(
        [sa, sx],
        [
            kt.gammainc(sa, sx),
            kt.gammaincc(sa, sx),
            kt.gammainc_da(sa, sx),
            kt.gammaincc_da(sa, sx),
        ],
        mode=NUMBA,
    )
    p, q, dp, dq = f(a, x)
    _check(p, sp.gammainc(a, x))
    _check(q, sp.gammaincc(a, x))
    want = inc.gammainc_da(a, x)
    _check(dp, want)
    _check(dq, -want)


def test_beta_function_and_derivatives_over_wide_ranges() -> None:

    a = np.exp(RNG.uniform(np.log(1e-3), np.log(1e4), N))
    b = np.exp(RNG.uniform(np.log(1e-3), np.log(1e4), N))
    x = RNG.uniform(0.0, 1.0, N)
    sa, sb, sx = kt.vector("a"), kt.vector("b"), kt.vector("x")
    f = kiln.function(
        [sa, sb, sx],
        [kt.betainc(sa, sb, sx), kt.betainc_da(sa, sb, sx), kt.betainc_db(sa, sb, sx)],
        mode=NUMBA,
    )
    value, da, db = f(a, b, x)
    _check(value, sp.betainc(a, b, x))
    _check(da, inc.betainc_da(a, b, x))
    _check(db, inc.betainc_db(a, b, x))
