"""The specialize phase: powers, negation, dot products and sums of broadcast products.

Each rewrite fires on its pattern and only there, keeps the dtype and broadcasting of
what it replaces, and gives the values of the unrewritten graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import Elemwise, toposort
from kiln_graph._linalg import MatMul
from kiln_graph._math import (
    Add,
    Exp,
    Mul,
    Neg,
    Pow,
    Reciprocal,
    Sigmoid,
    Softplus,
    Sqrt,
    Square,
    Sub,
    Switch,
    TrueDivide,
)
from kiln_graph._reduce import CAReduce
from kiln_graph.testing import evaluate
from kiln_rewrite import Query, db, rewrite, scalar_constant

#: The phases up to specialize: the graphs are inspected before fusion merges nodes.
SPECIALIZE = Query(phases=("merge", "canonicalize", "stabilize", "specialize"))


def _kinds(outputs: list[Any]) -> list[type]:
    """List the ScalarOp class of each Elemwise node, the Op class of the others."""
    nodes = toposort(outputs)
    return [type(n.op.scalar_op) if isinstance(n.op, Elemwise) else type(n.op) for n in nodes]


def _sums(outputs: list[Any]) -> list[Any]:
    return [n for n in toposort(outputs) if isinstance(n.op, CAReduce) and n.op.kind == "sum"]


def _check_values(
    inputs: list[Any], out: Any, new: Any, values: list[np.ndarray], rtol: float = 1e-14
) -> None:
    givens = dict(zip(inputs, values, strict=True))
    expected = evaluate(out, givens)
    actual = evaluate(new, givens)
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol)


# --- powers --------------------------------------------------------------------------------

POWERS: dict[float, tuple[type, ...]] = {
    2: (Square,),
    3: (Square, Mul),
    4: (Square,),
    0.5: (Sqrt,),
    -0.5: (Sqrt, Reciprocal),
    -1: (Reciprocal,),
    -2: (Square, Reciprocal),
    -3: (Square, Mul, Reciprocal),
    -4: (Square, Reciprocal),
}


@pytest.mark.parametrize("p", list(POWERS), ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_small_constant_powers_are_specialized(p: float, dtype: str):
    x = kt.vector("x", dtype=dtype)
    out = x**p
    (new,) = rewrite([x], [out], SPECIALIZE)
    kinds = _kinds([new])
    assert Pow not in kinds
    for k in POWERS[p]:
        assert k in kinds, (p, kinds)
    assert new.type == out.type
    value = np.random.default_rng(0).uniform(0.2, 3.0, 9).astype(dtype)
    _check_values([x], out, new, [value], rtol=1e-14 if dtype == "float64" else 1e-6)


@pytest.mark.parametrize("p", [5, 2.5, -5, 1.5, 0.25])
def test_other_powers_are_left_alone(p: float):
    x = kt.vector("x")
    (new,) = rewrite([x], [x**p], SPECIALIZE)
    assert Pow in _kinds([new])


def test_variable_exponent_is_left_alone():
    x, y = kt.vector("x"), kt.vector("y")
    (new,) = rewrite([x, y], [x**y], SPECIALIZE)
    assert Pow in _kinds([new])


def test_integer_powers_keep_integer_semantics():
    i = kt.vector("i", dtype="int32")
    value = np.array([-3, -1, 0, 2, 7], dtype="int32")
    # integer square and cube stay integer (and wrap like NumPy's power)
    for p in (2, 3, 4):
        out = i**p
        (new,) = rewrite([i], [out], SPECIALIZE)
        assert Pow not in _kinds([new]) and new.type == out.type
        _check_values([i], out, new, [value])
    # NumPy refuses integers to negative powers: the rule leaves them alone
    (new,) = rewrite([i], [i**-1], SPECIALIZE)
    assert Pow in _kinds([new])
    # a float exponent gives a float result: x is cast first
    for p in (0.5, 2.0):
        out = i**p
        (new,) = rewrite([i], [out], SPECIALIZE)
        assert Pow not in _kinds([new]) and new.type == out.type
        _check_values([i], out, new, [np.abs(value)])


def test_power_that_broadcasts_the_base_is_left_alone():
    x = kt.tensor("x", shape=(1,))
    out = x ** kt.constant(np.full(3, 2.0))
    (new,) = rewrite([x], [out], SPECIALIZE)
    assert new.type == out.type
    _check_values([x], out, new, [np.array([1.5])])


# --- x * -1 --------------------------------------------------------------------------------

NEGATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "x * -1": lambda x, y: x * -1,
    "-1 * x": lambda x, y: -1.0 * x,
    "x * y * -1": lambda x, y: kt.mul(x, y, -1),
}


@pytest.mark.parametrize("name", list(NEGATIONS))
def test_times_minus_one_is_negation(name: str):
    x, y = kt.vector("x"), kt.vector("y")
    out = NEGATIONS[name](x, y)
    (new,) = rewrite([x, y], [out], SPECIALIZE)
    kinds = _kinds([new])
    assert Neg in kinds
    assert not any(scalar_constant(i) == -1 for n in toposort([new]) for i in n.inputs)
    rng = np.random.default_rng(1)
    _check_values([x, y], out, new, [rng.normal(size=5), rng.normal(size=5)])


def test_times_minus_one_keeps_dtype_and_is_not_applied_to_other_constants():
    i = kt.vector("i", dtype="int16")
    out = i * -1
    (new,) = rewrite([i], [out], SPECIALIZE)
    assert _kinds([new]) == [Neg] and new.type == out.type
    x = kt.vector("x")
    (new,) = rewrite([x], [x * -2.0], SPECIALIZE)
    assert Neg not in _kinds([new])
    # -1 * -1 * x: the negations cancel
    (new,) = rewrite([x], [kt.mul(-1.0, x, -1.0)], SPECIALIZE)
    assert Neg not in _kinds([new])


# --- sum(x * y) ------------------------------------------------------------------------------


def test_sum_of_vector_product_is_a_dot():
    x, y = kt.vector("x"), kt.vector("y")
    out = kt.sum(x * y)
    (new,) = rewrite([x, y], [out], SPECIALIZE)
    assert MatMul in _kinds([new]) and not _sums([new])
    assert new.type == out.type
    rng = np.random.default_rng(2)
    _check_values([x, y], out, new, [rng.normal(size=6), rng.normal(size=6)], rtol=1e-13)


def test_sum_of_products_that_are_not_vector_dots_stays_a_sum():
    m, n = kt.matrix("m"), kt.matrix("n")
    (new,) = rewrite([m, n], [kt.sum(m * n)], SPECIALIZE)
    assert MatMul not in _kinds([new])
    x, y, z = kt.vector("x"), kt.vector("y"), kt.vector("z")
    (new,) = rewrite([x, y, z], [kt.sum(kt.mul(x, y, z))], SPECIALIZE)
    assert MatMul not in _kinds([new])
    i, j = kt.vector("i", dtype="int32"), kt.vector("j", dtype="int32")
    (new,) = rewrite([i, j], [kt.sum(i * j)], SPECIALIZE)
    assert MatMul not in _kinds([new])
    # a length-1 vector broadcasts: no dot (its factor moves out of the sum instead)
    b = kt.tensor("b", shape=(1,))
    (new,) = rewrite([x, b], [kt.sum(x * b)], SPECIALIZE)
    assert MatMul not in _kinds([new])


# --- sum(x * c) ------------------------------------------------------------------------------

BROADCAST_SUMS: dict[str, Callable[..., Any]] = {
    "sum(x * c)": lambda m, v, c: kt.sum(v * c),
    "sum(2 * x)": lambda m, v, c: kt.sum(2.0 * v),
    "sum(m * c)": lambda m, v, c: kt.sum(m * c),
    "sum(m * c, axis=0)": lambda m, v, c: kt.sum(m * c, axis=0),
    "sum(m * v[None], axis=0)": lambda m, v, c: kt.sum(m * v[None, :], axis=0),
    "sum(m * v[:, None] * c, axis=1)": lambda m, v, c: kt.sum(m * v[:, None] * c, axis=1),
}


@pytest.mark.parametrize("name", list(BROADCAST_SUMS))
def test_broadcast_factor_moves_out_of_the_sum(name: str):
    m, v, c = kt.tensor("m", shape=(3, 4)), kt.tensor("v", shape=(4,)), kt.scalar("c")
    if "[:, None]" in name:
        v = kt.tensor("v", shape=(3,))
    out = BROADCAST_SUMS[name](m, v, c)
    (new,) = rewrite([m, v, c], [out], SPECIALIZE)
    for s in _sums([new]):
        (arg,) = s.inputs
        assert not (
            arg.owner is not None
            and isinstance(arg.owner.op, Elemwise)
            and any(all(i.type.broadcastable[d] for d in s.op.axis) for i in arg.owner.inputs)
        ), "a factor broadcast along the summed axes is still inside the sum"
    assert new.type == out.type
    rng = np.random.default_rng(3)
    values = [rng.normal(size=(3, 4)), rng.normal(size=v.type.shape), np.array(1.7)]
    _check_values([m, v, c], out, new, values, rtol=1e-13)


def test_factor_not_broadcast_along_the_summed_axis_stays_inside():
    m, v = kt.tensor("m", shape=(3, 4)), kt.tensor("v", shape=(4,))
    out = kt.sum(m * v[None, :], axis=1)
    (new,) = rewrite([m, v], [out], SPECIALIZE)
    (s,) = _sums([new])
    assert Mul in [type(s.inputs[0].owner.op.scalar_op)]


def test_every_rewrite_is_tagged_fast_run_and_states_its_identity():
    """Backend-only rewrites (a backend's tag, e.g. kiln_numba's core shapes) excepted."""
    rules = db.in_phase("specialize", Query(include=frozenset({"specialize"})))
    assert len(rules) >= 10
    for r in rules:
        assert "fast_run" in r.tags or "numba" in r.tags, r.name
        assert "->" in r.identity, r.name


# --- division by a broadcast scalar ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_division_by_a_broadcast_scalar_becomes_one_reciprocal(dtype: str):
    x = kt.vector("x", dtype=dtype)
    s = kt.scalar("s", dtype=dtype)
    out = (x - 1) / s
    [new] = rewrite([x, s], [out], SPECIALIZE)
    kinds = _kinds([new])
    assert Reciprocal in kinds and TrueDivide not in kinds
    recip = next(
        n
        for n in toposort([new])
        if isinstance(n.op, Elemwise) and type(n.op.scalar_op) is Reciprocal
    )
    assert recip.outputs[0].type.ndim == 0  # 1 / s on the scalar, before it is broadcast
    values = [np.array([0.5, -2.0, 3.25], dtype=dtype), np.array(1.7, dtype=dtype)]
    _check_values([x, s], out, new, values, rtol=1e-6 if dtype == "float32" else 1e-15)


def test_division_by_a_constant_or_an_array_is_left_alone():
    x = kt.vector("x")
    y = kt.vector("y")
    a, b = kt.scalar("a"), kt.scalar("b")
    for out in (x / 10.0, x / y, a / b):
        [new] = rewrite([x, y, a, b], [out], SPECIALIZE)
        assert TrueDivide in _kinds([new]), out


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("x + c", lambda x, c: x + c),
        ("c + x + y", lambda x, c: c + x + 2.0 * x),
        ("x - c", lambda x, c: x - c),
        ("c - x", lambda x, c: c - x),
        ("-0.5 * x**2 - c - k", lambda x, c: -0.5 * kt.square(x) - c - 0.9),
    ],
)
def test_terms_broadcast_along_the_sum_leave_it_times_n(name: str, build: Callable):
    x = kt.tensor("x", shape=(5, 3))
    c = kt.tensor("c", shape=(1, 3))
    out = kt.sum(build(x, c), axis=0)
    [new] = rewrite([x, c], [out], SPECIALIZE)
    for node in _sums([new]):  # what is left inside every sum varies along the summed axis
        (arg,) = node.inputs
        assert not any(arg.type.broadcastable[d] for d in node.op.axis), name
    rng = np.random.default_rng(3)
    _check_values([x, c], out, new, [rng.normal(size=(5, 3)), rng.normal(size=(1, 3))], 1e-13)


def test_sum_over_an_axis_of_unknown_length_is_left_alone():
    x, c = kt.vector("x"), kt.tensor("c", shape=(1,))
    for out in (kt.sum(x - c), kt.sum(c - x), kt.sum(x + c)):
        [new] = rewrite([x, c], [out], SPECIALIZE)
        [node] = _sums([new])
        assert type(node.inputs[0].owner.op.scalar_op) in (Add, Sub), out


# --- a Normal log-likelihood: one sum of squares ------------------------------------------------


def _normal_loglik(y: Any, mu: Any, sigma: Any) -> Any:
    """Return a Normal log-likelihood as the model layer writes it (checked; z / sigma)."""
    z = (y - mu) * kt.exp(-kt.log(sigma))
    terms = -0.5 * kt.square(z) - kt.log(sigma) - 0.9189385332046727
    return kt.sum(kt.switch(sigma > 0, terms, -np.inf))


def test_normal_loglik_and_its_sigma_gradient_share_one_sum_of_squares():
    y = kt.tensor("y", shape=(50,))
    mu, sigma = kt.tensor("mu", shape=(50,)), kt.scalar("sigma")
    out = _normal_loglik(y, mu, sigma)
    d_sigma = kt.sum(-(kt.square(y - mu) * kt.exp(-2.0 * kt.log(sigma))))
    new = rewrite([y, mu, sigma], [out, d_sigma], SPECIALIZE)
    sums = _sums(new)
    assert len(sums) == 1, sums  # the checks, constants and scales all outside
    (arg,) = sums[0].inputs
    assert type(arg.owner.op.scalar_op) is Square
    rng = np.random.default_rng(5)
    values = [rng.normal(size=50), rng.normal(size=50)]
    for sigma_value in (1.7, 0.0, -1.0):  # a sigma outside the support: -inf, as before
        givens = [*values, np.array(sigma_value)]
        for old, rewritten in zip([out, d_sigma], new, strict=True):
            expected = evaluate(old, dict(zip([y, mu, sigma], givens, strict=True)))
            actual = evaluate(rewritten, dict(zip([y, mu, sigma], givens, strict=True)))
            np.testing.assert_allclose(actual, expected, rtol=1e-13)


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("switch(c, x, k)", lambda x, c, b: kt.switch(c, x, -np.inf)),
        ("switch(c, k, x)", lambda x, c, b: kt.switch(c, 2.5, x)),
        ("switch(c, x, 2 * x)", lambda x, c, b: kt.switch(c, x, 2.0 * x)),
        ("switch(c[None], x, b[None])", lambda x, c, b: kt.switch(c, x, b)),
    ],
)
def test_a_condition_constant_along_the_sum_leaves_it(name: str, build: Callable):
    x = kt.tensor("x", shape=(4, 3))
    c = kt.tensor("c", shape=(1, 3), dtype="bool")
    b = kt.tensor("b", shape=(1, 3))
    out = kt.sum(build(x, c, b), axis=0)
    [new] = rewrite([x, c, b], [out], SPECIALIZE)
    for node in _sums([new]):
        (arg,) = node.inputs
        assert not (arg.owner is not None and isinstance(arg.owner.op, Elemwise)
                    and isinstance(arg.owner.op.scalar_op, Switch)), name  # fmt: skip
    rng = np.random.default_rng(7)
    xv, bv = rng.normal(size=(4, 3)), rng.normal(size=(1, 3))
    for cv in (np.array([[True, False, True]]), np.array([[False, False, False]])):
        givens = dict(zip([x, c, b], [xv, cv, bv], strict=True))
        np.testing.assert_allclose(evaluate(new, givens), evaluate(out, givens), rtol=1e-14)


def test_a_condition_that_varies_along_the_sum_or_an_unknown_length_stays_inside():
    x, c = kt.tensor("x", shape=(4,)), kt.tensor("c", shape=(4,), dtype="bool")
    v, s = kt.vector("v"), kt.scalar("s", dtype="bool")
    for out in (kt.sum(kt.switch(c, x, 0.0)), kt.sum(kt.switch(s, v, -np.inf))):
        [new] = rewrite([x, c, v, s], [out], SPECIALIZE)
        [node] = _sums([new])
        assert type(node.inputs[0].owner.op.scalar_op) is Switch, out


def test_sum_of_a_negation_is_the_negated_sum_to_the_bit():
    x = kt.tensor("x", shape=(3, 5))
    out = kt.sum(-kt.exp(x), axis=1)
    [new] = rewrite([x], [out], SPECIALIZE)
    assert new.owner is not None and type(new.owner.op.scalar_op) is Neg
    value = np.random.default_rng(2).normal(size=(3, 5))
    np.testing.assert_array_equal(evaluate(new, {x: value}), evaluate(out, {x: value}))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_square_of_a_broadcast_factor_leaves_the_sum(dtype: str):
    x = kt.tensor("x", shape=(6, 2), dtype=dtype)
    c = kt.tensor("c", shape=(1, 2), dtype=dtype)
    s = kt.scalar("s", dtype=dtype)
    out = kt.sum(kt.square(x * c * s), axis=0)
    [new] = rewrite([x, c, s], [out], SPECIALIZE)
    [node] = _sums([new])
    (arg,) = node.inputs
    assert type(arg.owner.op.scalar_op) is Square and arg.owner.inputs[0] is x
    rng = np.random.default_rng(4)
    values = [rng.normal(size=(6, 2)).astype(dtype), rng.normal(size=(1, 2)).astype(dtype),
              np.array(-1.3, dtype=dtype)]  # fmt: skip
    _check_values([x, c, s], out, new, values, rtol=1e-5 if dtype == "float32" else 1e-14)


# --- softplus and sigmoid of one variable ------------------------------------------------------

EDGES = [-800.0, -40.0, -1.0, -0.0, 0.0, 1e-300, 0.5, 2.0, 40.0, 800.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softplus_and_sigmoid_of_one_variable_share_one_exp(dtype: str):
    from scipy import special

    x, y = kt.vector("x", dtype=dtype), kt.vector("y", dtype=dtype)
    outs = [kt.sum(y * x - kt.softplus(x)), kt.softplus(x), y - kt.sigmoid(x)]
    new = rewrite([x, y], outs, SPECIALIZE)
    kinds = _kinds(new)
    assert kinds.count(Exp) == 1 and Softplus not in kinds and Sigmoid not in kinds
    xs = np.array(EDGES, dtype=dtype)
    ys = np.linspace(0.0, 1.0, xs.size).astype(dtype)
    got = [evaluate(v, {x: xs, y: ys}) for v in new]
    assert [g.dtype for g in got] == [np.dtype(dtype)] * 3
    with np.errstate(invalid="ignore", over="ignore"):
        softplus = np.logaddexp(np.zeros_like(xs), xs)
        expected = [np.sum(ys * xs - softplus), softplus, ys - special.expit(xs)]
    rtol = 1e-6 if dtype == "float32" else 1e-15
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=0)


def test_softplus_or_sigmoid_alone_is_left_alone():
    x, z = kt.vector("x"), kt.vector("z")
    for outs in ([kt.softplus(x)], [kt.sigmoid(x)], [kt.softplus(x), kt.sigmoid(z)]):
        new = rewrite([x, z], outs, SPECIALIZE)
        assert Exp not in _kinds(new), outs
