"""The regularized incomplete gamma and beta functions and their derivatives.

Values against SciPy; the derivatives in the parameters (``gammainc_da``, ``betainc_da``,
``betainc_db``: NumPy series and continued fractions) against mpmath's high-precision
derivatives over parameters in [1e-3, 1e4] and the whole support; gradients of graphs
against central finite differences, near ``x = 0``, ``x = 1`` and at large parameters.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp

import kiln_graph.tensor as kt
from kiln_graph import GradientError, grad
from kiln_graph import _incomplete as inc
from kiln_graph.testing import evaluate

PARAMS = [1e-3, 0.05, 0.5, 2.5, 10.0, 100.0, 1e3, 1e4]


def _gamma_points() -> list[tuple[float, float]]:
    points = []
    for a in PARAMS:
        for x in (1e-8, 1e-3, 0.3, 2.0, 0.5 * a, a, 1.01 * a, a + 3 * np.sqrt(a) + 1, 3 * a + 10):
            points.append((a, x))
    return points


def _beta_points() -> list[tuple[float, float, float]]:
    points = []
    for a in (1e-3, 0.5, 2.0, 30.0, 1e3, 1e4):
        for b in (1e-3, 0.5, 3.0, 100.0, 1e3, 1e4):
            if a == b == 1e4:  # mpmath takes minutes there (a = b = 1e3 is in the grid)
                continue
            for x in (1e-6, 0.01, 0.3, 0.5, a / (a + b), 0.9, 1 - 1e-6):
                points.append((a, b, x))
    return points


def _rel_err(got: float, want: float) -> float:
    return abs(got - want) / abs(want) if want != 0 else abs(got)


def test_values_match_scipy_on_the_vm():
    """P, Q and I_x evaluated through graphs are SciPy's, in float64 and float32."""
    rng = np.random.default_rng(0)
    a = np.exp(rng.uniform(-5, 8, 50))
    b = np.exp(rng.uniform(-5, 8, 50))
    x = a * np.exp(rng.normal(size=50))
    u = rng.uniform(size=50)
    for dtype in ("float64", "float32"):
        av, bv, xv, uv = (v.astype(dtype) for v in (a, b, x, u))
        sa, sb, sx, su = (kt.vector(n, dtype=dtype) for n in "abxu")
        outs = [kt.gammainc(sa, sx), kt.gammaincc(sa, sx), kt.betainc(sa, sb, su)]
        got = evaluate(outs, {sa: av, sb: bv, sx: xv, su: uv})
        for g, want in zip(
            got, [sp.gammainc(av, xv), sp.gammaincc(av, xv), sp.betainc(av, bv, uv)], strict=True
        ):
            assert g.dtype == want.dtype == np.dtype(dtype)
            np.testing.assert_allclose(g, want, rtol=1e-6 if dtype == "float32" else 1e-14)


def test_integer_parameters_give_float64():
    """An integer shape (Poisson's k + 1) and a float x: float64, as SciPy's loops."""
    k = kt.vector("k", dtype="int64")
    mu = kt.vector("mu")
    out = kt.gammaincc(k + 1, mu)
    assert out.dtype == "float64"
    got = evaluate(out, {k: np.array([0, 3, 40]), mu: np.array([0.5, 2.0, 30.0])})
    np.testing.assert_allclose(got, sp.gammaincc([1, 4, 41], [0.5, 2.0, 30.0]), rtol=1e-14)


def test_gammainc_da_matches_mpmath():
    """d/da P(a, x) to 1e-10 relative over a in [1e-3, 1e4] and x over (0, inf)."""
    mp.mp.dps = 40
    points = _gamma_points()
    a = np.array([p[0] for p in points])
    x = np.array([p[1] for p in points])
    got = inc.gammainc_da(a, x)
    np.testing.assert_array_equal(inc.gammaincc_da(a, x), -got)
    bad = []
    for (ai, xi), g in zip(points, got, strict=True):
        # differentiate the smaller of P and Q (mpmath's digits are relative to the value)
        if mp.gammainc(ai, 0, xi, regularized=True) < 0.5:
            want = float(mp.diff(lambda s, xi=xi: mp.gammainc(s, 0, xi, regularized=True), ai))
        else:
            want = -float(mp.diff(lambda s, xi=xi: mp.gammainc(s, xi, regularized=True), ai))
        if _rel_err(g, want) > 1e-10:
            bad.append((ai, xi, g, want))
    assert not bad, bad


def _betainc_ref(a: float, b: float, x: float) -> tuple[float, float]:
    """Return mpmath's (d/da, d/db) I_x(a, b), differentiating the smaller of I and 1 - I."""

    def ibeta(p: object, q: object, y: object) -> object:
        return mp.betainc(p, q, 0, y, regularized=True)

    a_, b_, x_ = mp.mpf(a), mp.mpf(b), mp.mpf(x)
    if ibeta(a_, b_, x_) < 0.5:
        return (
            float(mp.diff(lambda s: ibeta(s, b_, x_), a_)),
            float(mp.diff(lambda s: ibeta(a_, s, x_), b_)),
        )
    y = 1 - x_  # exact: x is a double
    return (
        -float(mp.diff(lambda s: ibeta(b_, s, y), a_)),
        -float(mp.diff(lambda s: ibeta(s, a_, y), b_)),
    )


def test_betainc_derivatives_match_mpmath():
    """(d/da, d/db) I_x(a, b) to 1e-10 relative over a, b in [1e-3, 1e4] and x in (0, 1)."""
    mp.mp.dps = 40
    points = _beta_points()
    a, b, x = (np.array(v) for v in zip(*points, strict=True))
    da, db = inc.betainc_da(a, b, x), inc.betainc_db(a, b, x)
    bad = []
    for p, ga, gb in zip(points, da, db, strict=True):
        wa, wb = _betainc_ref(*p)
        for g, w in ((ga, wa), (gb, wb)):
            if abs(w) > 1e-290 and _rel_err(g, w) > 1e-10:
                bad.append((p, g, w))
    assert not bad, bad


def test_digamma_diff_keeps_its_digits():
    mp.mp.dps = 40
    for x, h in [(1e-3, 1e4), (1e4, 1e-3), (0.5, 1e-3), (5.0, -0.5), (1.001, -0.999), (30.0, 2.0)]:
        want = float(mp.digamma(mp.mpf(x) + mp.mpf(h)) - mp.digamma(mp.mpf(x)))
        assert _rel_err(float(inc.digamma_diff(x, h)), want) < 1e-13


def test_special_values():
    """NaN outside the domain, 0 at the ends of the support, as documented."""
    a = np.array([-1.0, 0.0, np.inf, np.nan, 2.0, 2.0, 2.0, 2.0])
    x = np.array([1.0, 1.0, 1.0, 1.0, -1.0, 0.0, np.inf, np.nan])
    np.testing.assert_array_equal(
        inc.gammainc_da(a, x), [np.nan, np.nan, np.nan, np.nan, np.nan, 0.0, 0.0, np.nan]
    )
    b = np.full(8, 3.0)
    u = np.array([0.5, 0.5, 0.5, 0.5, -0.1, 0.0, 1.0, 1.5])
    expected = [np.nan, np.nan, np.nan, np.nan, np.nan, 0.0, 0.0, np.nan]
    np.testing.assert_array_equal(inc.betainc_da(a, b, u), expected)
    np.testing.assert_array_equal(inc.betainc_db(b, a, u), expected)


def _finite_difference(
    f, values: list[np.ndarray], i: int, scale: np.ndarray, rel: float = 1e-6
) -> np.ndarray:
    """Central differences in input ``i`` of the elementwise ``f``, steps ``rel * scale``."""
    out = np.zeros_like(values[i])
    for k in range(values[i].size):
        h = rel * scale.flat[k]
        up = [v.copy() for v in values]
        down = [v.copy() for v in values]
        up[i].flat[k] += h
        down[i].flat[k] -= h
        out.flat[k] = (f(*up).flat[k] - f(*down).flat[k]) / (2 * h)
    return out


GAMMA_GRAD_POINTS = {
    "interior": ([0.7, 3.0, 12.0], [0.4, 5.0, 9.0]),
    "near_zero": ([0.5, 2.0, 30.0], [1e-5, 1e-4, 1.0]),
    "large_a": ([500.0, 2000.0, 800.0], [480.0, 2050.0, 900.0]),
}


@pytest.mark.parametrize("where", list(GAMMA_GRAD_POINTS))
@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_gamma_gradients_match_finite_differences(name: str, where: str):
    a_v, x_v = (np.array(v) for v in GAMMA_GRAD_POINTS[where])
    a, x = kt.vector("a"), kt.vector("x")
    fn, ref = getattr(kt, name), getattr(sp, name)
    cost = kt.sum(kt.log(fn(a, x)))
    got = evaluate(grad(cost, [a, x]), {a: a_v, x: x_v})

    def f(av, xv):
        if name == "gammaincc":  # log Q = log1p(-P) keeps its digits where P is small
            p = sp.gammainc(av, xv)
            return np.where(p < 0.5, np.log1p(-p), np.log(sp.gammaincc(av, xv)))
        return np.log(ref(av, xv))

    for i, v in enumerate([a_v, x_v]):
        want = _finite_difference(f, [a_v, x_v], i, v)
        np.testing.assert_allclose(got[i], want, rtol=2e-6, atol=1e-9)


BETA_GRAD_POINTS = {
    "interior": ([0.7, 3.0, 12.0], [2.0, 0.6, 9.0], [0.3, 0.8, 0.5]),
    "near_zero": ([0.5, 2.0, 3.0], [2.0, 5.0, 0.5], [1e-5, 1e-4, 1e-3]),
    "near_one": ([0.5, 2.0, 3.0], [2.0, 5.0, 0.5], [1 - 1e-5, 1 - 1e-4, 1 - 1e-3]),
    "large": ([500.0, 2000.0, 40.0], [300.0, 2100.0, 900.0], [0.6, 0.49, 0.05]),
}


@pytest.mark.parametrize("where", list(BETA_GRAD_POINTS))
def test_betainc_gradients_match_finite_differences(where: str):
    a_v, b_v, x_v = (np.array(v) for v in BETA_GRAD_POINTS[where])
    a, b, x = kt.vector("a"), kt.vector("b"), kt.vector("x")
    out = kt.betainc(a, b, x)
    # log I and log(1 - I): each keeps its digits in one tail
    cost = kt.sum(kt.log(out)) + kt.sum(kt.log(kt.betainc(b, a, 1 - x)))
    got = evaluate(grad(cost, [a, b, x]), {a: a_v, b: b_v, x: x_v})

    def f(av, bv, xv):
        return np.log(sp.betainc(av, bv, xv)) + np.log(sp.betainc(bv, av, 1 - xv))

    for i, scale in enumerate([a_v, b_v, np.minimum(x_v, 1 - x_v)]):
        want = _finite_difference(f, [a_v, b_v, x_v], i, scale)
        np.testing.assert_allclose(got[i], want, rtol=2e-6, atol=1e-9)


def test_second_derivative_in_x_and_clear_error_in_a():
    """d2/dx da at a constant a works (closed form); in a variable a, a clear GradientError."""
    av, xv = 2.5, 1.7
    x = kt.scalar("x")
    d2 = grad(kt.gammainc_da(kt.constant(av), x), x)
    got = evaluate(d2, {x: np.array(xv)})
    h = 1e-6
    want = (inc.gammainc_da(av, xv + h) - inc.gammainc_da(av, xv - h)) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-7)
    a = kt.scalar("a")
    da = grad(kt.gammainc(a, x), a)
    with pytest.raises(GradientError, match="second derivative in a parameter"):
        grad(da, a)
    b = kt.scalar("b")
    with pytest.raises(GradientError, match="second derivative in a parameter"):
        grad(grad(kt.betainc(a, b, x), b), a)
