"""The raw callable: ``f.thunk.jit_fn(*inputs, *f.thunk.constants)``, usable from njit code."""

from __future__ import annotations

import numpy as np
from numba import njit

import kiln
import kiln.tensor as kt

NUMBA = kiln.Mode(linker="numba")


def _function() -> kiln.Function:
    x = kt.vector("x")
    w = kt.constant(np.array([0.5, -1.0, 2.0]))
    # A logp-like scalar and its gradient; ``w`` is an array constant (a parameter).
    logp = -kt.sum((x - w) ** 2) / 2 + kt.sum(kt.log1p(kt.exp(-x)))
    return kiln.function([x], [logp, kt.grad(logp, x)], mode=NUMBA, trust_input=True)


def _reference(x: np.ndarray) -> tuple[float, np.ndarray]:
    w = np.array([0.5, -1.0, 2.0])
    logp = -np.sum((x - w) ** 2) / 2 + np.sum(np.log1p(np.exp(-x)))
    return logp, -(x - w) - 1 / (1 + np.exp(x))


def test_raw_callable_matches_the_function():
    """Called from Python, the dispatcher returns the Function's outputs as a tuple."""
    f = _function()
    assert len(f.thunk.constants) >= 1
    x = np.array([0.1, 0.2, -0.3])
    raw = f.thunk.jit_fn(x, *f.thunk.constants)
    assert isinstance(raw, tuple) and len(raw) == 2
    for got, want in zip(raw, f(x), strict=True):
        np.testing.assert_array_equal(got, want)


def test_raw_callable_from_an_njit_loop():
    """A gradient-ascent loop in njit code calls kiln's function on its own arrays."""
    f = _function()
    fn, constants = f.thunk.jit_fn, f.thunk.constants

    @njit
    def ascend(x0: np.ndarray, steps: int, lr: float, consts: tuple) -> tuple[np.ndarray, float]:
        x = x0.copy()
        logp = 0.0
        for _ in range(steps):
            logp_arr, grad = fn(x, *consts)
            logp = logp_arr[()]
            x = x + lr * grad
        return x, logp

    x0 = np.array([0.1, 0.2, -0.3])
    x, logp = ascend(x0, 50, 0.1, constants)
    # The same loop in Python on the reference formulas.
    xr = x0.copy()
    for _ in range(50):
        lp, g = _reference(xr)
        xr = xr + 0.1 * g
    np.testing.assert_allclose(x, xr, rtol=1e-12)
    np.testing.assert_allclose(logp, lp, rtol=1e-12)


def test_trusted_call_is_the_thunk_call():
    """With trust_input and nothing shared, a call goes straight to the thunk."""
    f = _function()
    x = np.array([0.1, 0.2, -0.3])
    logp, grad = f(x)
    want_logp, want_grad = _reference(x)
    np.testing.assert_allclose(logp, want_logp, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    assert f._direct
