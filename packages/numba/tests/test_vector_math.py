"""The vectorizable float64 ``exp`` and ``log1p`` of generated code, against NumPy's.

Generated loops of 128 elements or more (or of lengths known only at run time) compute
``exp`` and ``log1p`` with :mod:`kiln_numba._vector_math`, which LLVM vectorizes, and
sums of them in two passes (values, then additions in order). Checked here: within 1
ulp of NumPy (the C library's, or NumPy's own SIMD code) over each function's whole
domain, zeros, infinities, NaN and tiny arguments exactly; graphs using them against
the Python VM.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_numba._vector_math import exp_f64, log1p_f64


@numba.njit(error_model="numpy")
def _exp(x, out):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        out[i] = exp_f64(x[i])
    return out


@numba.njit(error_model="numpy")
def _log1p(x, out):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        out[i] = log1p_f64(x[i])
    return out


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (0 where both are equal or both NaN)."""
    a, b = got.view(np.int64), want.view(np.int64)
    a = np.where(a < 0, np.int64(-(2**63)) - a, a)
    b = np.where(b < 0, np.int64(-(2**63)) - b, b)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0, np.abs(a - b))


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 5e-324, -5e-324, 1.0, -1.0]


def _points(rng: np.random.Generator, *parts: np.ndarray) -> np.ndarray:
    return np.concatenate([*parts, np.array(SPECIAL)])


def test_exp_is_within_one_ulp_everywhere():
    rng = np.random.default_rng(0)
    x = _points(
        rng,
        rng.uniform(-750.0, 712.0, 200_000),
        rng.normal(0.0, 1.0, 100_000),
        rng.normal(0.0, 1e-8, 20_000),
        np.array([709.782712893384, 709.7827128933841, 709.79, -745.1332191019411, -745.2]),
        np.array([-708.39641853226408, -708.4, -744.44007192138122]),  # subnormal results
    )
    with np.errstate(over="ignore"):
        want = np.exp(x)
    got = _exp(x, np.empty_like(x))
    assert _ulps(got, want).max() <= 1
    special = np.array(SPECIAL[:9])  # zeros, infinities, NaN, tiny: exact
    np.testing.assert_array_equal(_exp(special, np.empty_like(special)), np.exp(special))


def test_log1p_is_within_one_ulp_everywhere():
    rng = np.random.default_rng(1)
    x = _points(
        rng,
        rng.uniform(-1.0, 3.0, 100_000),
        np.expm1(rng.uniform(-40.0, 709.0, 100_000)),  # up to 1e308
        rng.normal(0.0, 1e-9, 20_000),
        -rng.uniform(0.0, 1.0, 50_000),
        rng.uniform(-1.0, -1.0 + 1e-10, 20_000),
        np.array([-1.5, -1e300, 1.7e308, 2.0**-53, -(2.0**-53), 0.4142135623730951]),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log1p(x)
    got = _log1p(x, np.empty_like(x))
    assert _ulps(got, want).max() <= 1
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


NUMBA = kiln.FAST_RUN.with_linker("numba")


@pytest.mark.parametrize("n", [1, 7, 127, 128, 1000])
def test_long_loops_match_the_vm(n):
    """Loops of exp / log1p and sums of them (two passes), short and long, against the VM."""
    rng = np.random.default_rng(n)
    x, m = kt.vector("x"), kt.matrix("m")
    outputs = [
        kt.exp(x),
        kt.log1p(kt.exp(-kt.abs(x))),
        kt.sum(kt.log1p(kt.abs(x)) * 2.0 - x),
        kt.sum(kt.exp(m), axis=1),  # a sum over the last axis, per row
        kt.sum(kt.exp(-m), axis=0),
    ]
    values = [rng.normal(0.0, 3.0, n), rng.normal(0.0, 2.0, (3, n))]
    got = kiln.function([x, m], outputs, mode=NUMBA)(*values)
    want = kiln.function([x, m], outputs, mode=kiln.FAST_RUN.with_linker("vm"))(*values)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def test_a_product_reshaped_to_a_vector_matches_the_vm():
    """``exp(X @ b)``: the product's column is a C-contiguous vector (loops vectorize)."""
    rng = np.random.default_rng(3)
    a, b = kt.matrix("a"), kt.vector("b")
    out = [kt.sum(kt.log1p(kt.exp(kt.dot(a, b)))), kt.exp(kt.dot(a, b))]
    values = [rng.normal(size=(500, 4)), rng.normal(size=4)]
    got = kiln.function([a, b], out, mode=NUMBA)(*values)
    want = kiln.function([a, b], out, mode=kiln.FAST_RUN.with_linker("vm"))(*values)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)
