"""Reverse-mode autodiff: grad, its errors, jacobian and hessian.

Gradients are checked against finite differences and analytic values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import kiln_graph as kg
import kiln_graph.tensor as kt
from kiln_graph import (
    DisconnectedInputError,
    GradientError,
    KilnTypeError,
    KilnValueError,
)
from kiln_graph.testing import evaluate, verify_grad


def _numeric_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6):
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        out[idx] = (f(plus) - f(minus)) / (2 * eps)
    return out


RNG = np.random.default_rng(42)
XV = RNG.uniform(0.5, 1.5, 4)
YV = RNG.uniform(-1.0, 1.0, 4)
MV = RNG.uniform(-1.0, 1.0, (3, 4))

# Composite costs of a vector x, a vector y and a matrix m (all float64).
COMPOSITES = {
    "logistic": lambda x, y, m: kt.sum(kt.softplus(-y * kt.log(x)) + kt.sigmoid(m * x).sum(0)),
    "normal_logp": lambda x, y, m: kt.sum(
        -0.5 * ((y - x) / kt.exp(m.sum(axis=0))) ** 2 - m.sum(axis=0) - 0.5 * np.log(2 * np.pi)
    ),
    "shared_subexpressions": lambda x, y, m: kt.sum(kt.exp(x) * kt.exp(x) + kt.exp(x) * y),
    "broadcast_and_reduce": lambda x, y, m: kt.sum((m - m.max(axis=1, keepdims=True)) ** 2 * x),
    "transpose_and_dimshuffle": lambda x, y, m: kt.max(m.T * y.dimshuffle(0, "x") + x.sum()),
    "where_clip": lambda x, y, m: kt.sum(kt.where(y > 0, kt.clip(x, 0.7, 1.2) * y, x**y)),
    "special": lambda x, y, m: kt.sum(
        kt.gammaln(x) * kt.erf(y) + kt.betaln(x, x + 1) - kt.log1mexp(-x)
    ),
    "division_chain": lambda x, y, m: kt.sum(1 / (1 + x**2) / (2 + kt.tanh(y))),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composite_gradients_match_finite_differences(name: str):
    fn = COMPOSITES[name]
    x, y, m = kt.vector("x", shape=(4,)), kt.vector("y", shape=(4,)), kt.matrix("m")
    cost = fn(x, y, m)
    gx, gy, gm = kg.grad(cost, [x, y, m], disconnected_inputs="ignore")
    givens = {x: XV, y: YV, m: MV}
    got = evaluate([gx, gy, gm], givens)
    for i, (var, value) in enumerate(givens.items()):
        others = dict(givens)

        def f(v, var=var, others=others):
            others[var] = v
            return float(evaluate(cost, others))

        np.testing.assert_allclose(
            got[i], _numeric_grad(f, value), rtol=1e-5, atol=1e-7, err_msg=f"{name}: {var}"
        )
        assert got[i].shape == value.shape and got[i].dtype == value.dtype


def test_verify_grad_on_composites():
    verify_grad(lambda a, b: kt.exp(a) * kt.sin(b) / (1 + a**2), [XV, YV])
    verify_grad(lambda a, b: kt.sum(a.dimshuffle("x", 0) * b.dimshuffle(0, "x"), axis=0), [XV, YV])


def test_analytic_gradients():
    x = kt.vector("x")
    np.testing.assert_allclose(evaluate(kg.grad(kt.sum(x**2), x), {x: XV}), 2 * XV)
    np.testing.assert_allclose(evaluate(kg.grad(kt.sum(x * x), x), {x: XV}), 2 * XV)
    np.testing.assert_allclose(evaluate(kg.grad(kt.sum(kt.log(x)), x), {x: XV}), 1 / XV)
    # A scalar cost w.r.t. itself is one.
    s = kt.scalar("s")
    assert evaluate(kg.grad(s, s), {s: 3.0}) == 1.0


def test_second_derivative_by_nesting():
    x = kt.vector("x")
    g = kg.grad(kt.sum(x**3), x)  # 3 x^2
    g2 = kg.grad(kt.sum(g), x)  # 6 x
    np.testing.assert_allclose(evaluate(g2, {x: XV}), 6 * XV)


def test_list_in_list_out():
    x, y = kt.vector("x"), kt.scalar("y")
    cost = kt.sum(x * y)
    single = kg.grad(cost, x)
    assert isinstance(single, kg.TensorVariable)
    pair = kg.grad(cost, [x, y])
    assert isinstance(pair, list) and len(pair) == 2
    assert pair[0] is single  # interned: the same graph
    gx, gy = evaluate(pair, {x: XV, y: 2.0})
    np.testing.assert_allclose(gx, np.full(4, 2.0))
    np.testing.assert_allclose(gy, XV.sum())
    (only,) = kg.grad(cost, [y])
    assert only is pair[1]


def test_gradient_with_respect_to_an_intermediate():
    x = kt.vector("x")
    e = kt.exp(x)
    np.testing.assert_allclose(evaluate(kg.grad(kt.sum(e**2), e), {x: XV}), 2 * np.exp(XV))


def test_grad_wrt_shared_variable():
    w = kt.shared(np.array([0.5, -1.0, 2.0]), name="w")
    x, t = kt.vector("x"), kt.vector("t")
    cost = kt.sum((x * w - t) ** 2)
    gw = kg.grad(cost, w)
    xv, tv = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 1.0])
    expected = 2 * (xv * w.get_value() - tv) * xv
    np.testing.assert_allclose(evaluate(gw, {x: xv, t: tv}), expected)
    w.set_value(np.zeros(3))
    np.testing.assert_allclose(evaluate(gw, {x: xv, t: tv}), -2 * tv * xv)


def test_float32_gradients_keep_the_dtype():
    x = kt.vector("x", dtype="float32")
    g = kg.grad(kt.sum(kt.exp(x) * 2.0), x)
    assert g.dtype == "float32"
    xv = XV.astype("float32")
    np.testing.assert_allclose(evaluate(g, {x: xv}), 2 * np.exp(xv), rtol=1e-6)


def test_known_grads():
    x = kt.vector("x")
    e = kt.exp(x)
    g = kg.grad(None, x, known_grads={e: kt.constant(np.array([1.0, 2.0, 3.0, 4.0]))})
    np.testing.assert_allclose(evaluate(g, {x: XV}), np.exp(XV) * [1, 2, 3, 4])


def test_disconnected_input():
    x, y = kt.vector("x"), kt.matrix("y")
    cost = kt.sum(x**2)
    with pytest.raises(DisconnectedInputError, match=r"wrt\[1\].*does not depend on y"):
        kg.grad(cost, [x, y])
    gx, gy = kg.grad(cost, [x, y], disconnected_inputs="ignore")
    yv = np.ones((2, 3))
    np.testing.assert_array_equal(evaluate(gy, {x: XV, y: yv}), np.zeros((2, 3)))
    with pytest.warns(UserWarning, match="does not depend on y"):
        kg.grad(cost, y, disconnected_inputs="warn")
    with pytest.raises(KilnValueError, match="disconnected_inputs"):
        kg.grad(cost, y, disconnected_inputs="zero")


def test_non_scalar_cost_error():
    x = kt.vector("x")
    with pytest.raises(GradientError, match=r"scalar cost, got a 1-d tensor.*kt.sum.*jacobian"):
        kg.grad(x**2, x)


def test_integer_cost_and_wrt_errors():
    i = kt.vector("i", dtype="int64")
    x = kt.vector("x")
    with pytest.raises(GradientError, match=r"wrt\[0\].*dtype int64"):
        kg.grad(kt.sum(kt.cast(i, "float64")), i)
    with pytest.raises(GradientError, match="float cost, got dtype int64"):
        kg.grad(kt.sum(i), x)
    with pytest.raises(KilnTypeError, match="wrt"):
        kg.grad(kt.sum(x), [])
    with pytest.raises(KilnTypeError, match=r"wrt\[1\]: expected a tensor variable"):
        kg.grad(kt.sum(x), [x, np.ones(2)])


def test_gradient_through_integer_ops_is_zero():
    x = kt.vector("x")
    cost = kt.sum(kt.floor(x) * x)
    np.testing.assert_allclose(evaluate(kg.grad(cost, x), {x: XV}), np.floor(XV))


def test_jacobian_against_analytic():
    x = kt.vector("x", shape=(3,))
    y = kt.scalar("y")
    f = x**2 * kt.sum(x) * y  # f_i = x_i^2 s y, s = sum(x)
    xv, yv = np.array([0.5, 1.0, 2.0]), 1.5
    s = xv.sum()
    expected = (np.diag(2 * xv * s) + np.outer(xv**2, np.ones(3))) * yv
    jx = kg.jacobian(f, x)
    assert jx.type.shape[0] == 3
    np.testing.assert_allclose(evaluate(jx, {x: xv, y: yv}), expected)
    jx2, jy = kg.jacobian(f, [x, y])
    got_x, got_y = evaluate([jx2, jy], {x: xv, y: yv})
    np.testing.assert_allclose(got_x, expected)
    np.testing.assert_allclose(got_y, xv**2 * s)
    # A scalar expression: the jacobian is the gradient.
    np.testing.assert_allclose(evaluate(kg.jacobian(kt.sum(x**2), x), {x: xv}), 2 * xv)


def test_jacobian_errors():
    v = kt.vector("v")
    with pytest.raises(GradientError, match="known statically"):
        kg.jacobian(v**2, v)
    m = kt.matrix("m", shape=(2, 2))
    with pytest.raises(GradientError, match="vector expression"):
        kg.jacobian(m**2, m)


def test_hessian_against_analytic():
    x = kt.vector("x", shape=(3,))
    cost = kt.sum(x**3) + kt.prod(x)
    xv = np.array([0.5, -1.0, 2.0])
    expected = np.array(
        [
            [6 * xv[0], xv[2], xv[1]],
            [xv[2], 6 * xv[1], xv[0]],
            [xv[1], xv[0], 6 * xv[2]],
        ]
    )
    h = kg.hessian(cost, x)
    np.testing.assert_allclose(evaluate(h, {x: xv}), expected)
    y = kt.vector("y", shape=(2,))
    hx, hy = kg.hessian(kt.sum(x**2) * kt.sum(y**2), [x, y])
    yv = np.array([1.0, 3.0])
    got_x, got_y = evaluate([hx, hy], {x: xv, y: yv})
    np.testing.assert_allclose(got_x, 2 * np.eye(3) * (yv**2).sum())
    np.testing.assert_allclose(got_y, 2 * np.eye(2) * (xv**2).sum())


# --- the subgradient convention at ties (kiln_graph._math) --------------------------------


def _grad_at(build: Callable[[kg.Variable], kg.Variable], value: object) -> np.ndarray:
    x = kt.vector("x") if np.ndim(value) else kt.scalar("x")
    return np.asarray(evaluate(kg.grad(kt.sum(build(x)), x), {x: np.asarray(value, float)}))


def _central(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize(
    ("build", "numpy", "at"),
    [
        (lambda x: kt.maximum(x, 0.0), lambda x: np.maximum(x, 0.0), [0.0, 1.0, -1.0]),
        (lambda x: kt.minimum(x, 0.0), lambda x: np.minimum(x, 0.0), [0.0, 1.0, -1.0]),
        (lambda x: kt.maximum(x, 0.0) + kt.minimum(x, 0.0), lambda x: x, [0.0, 2.0]),
        (lambda x: kt.maximum(x, x), lambda x: x, [0.0, 3.0]),
        (lambda x: kt.abs(x), np.abs, [0.0, -2.0, 2.0]),
        (lambda x: kt.clip(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0), [-1.0, 1.0, 0.0, 5.0]),
        (lambda x: kt.max(x), np.max, [1.0, 1.0, 0.0]),
        (lambda x: kt.max(x), np.max, [2.0, 2.0, 2.0]),
        (lambda x: kt.min(x), np.min, [-1.0, 3.0, -1.0]),
        (lambda x: kt.switch(x > 0, x, 0.0), lambda x: np.where(x > 0, x, 0.0), [1.0, -1.0]),
    ],
    ids=[
        "maximum",
        "minimum",
        "max+min",
        "max(x,x)",
        "abs",
        "clip",
        "max-tie2",
        "max-tie3",
        "min-tie",
        "switch",
    ],
)
def test_ties_split_the_gradient_as_central_differences(build, numpy, at) -> None:
    """Check the gradient at a kink: the mean of the one-sided derivatives.

    A reduction's tie splits it equally, so sums of pieces stay right.
    """
    x = np.asarray(at, float)
    got = _grad_at(build, x)
    elementwise = np.shape(numpy(x)) == x.shape
    if elementwise:
        expected = _central(lambda v: float(np.sum(numpy(v))), x)
    else:  # a tie of k entries: 1/k each, which sums to the directional derivative 1
        ties = x == numpy(x)
        expected = ties / ties.sum()
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_clip_gradient_at_its_bounds_goes_half_to_the_bound() -> None:
    x, lo, hi = kt.scalar("x"), kt.scalar("lo"), kt.scalar("hi")
    gx, glo, ghi = kg.grad(kt.clip(x, lo, hi), [x, lo, hi])
    at_lo = [float(evaluate(g, {x: -1.0, lo: -1.0, hi: 1.0})) for g in (gx, glo, ghi)]
    at_hi = [float(evaluate(g, {x: 1.0, lo: -1.0, hi: 1.0})) for g in (gx, glo, ghi)]
    assert at_lo == [0.5, 0.5, 0.0]
    assert at_hi == [0.5, 0.0, 0.5]
