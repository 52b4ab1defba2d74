"""The stabilize phase: where each rewrite fires, values it keeps, accuracy it gains.

Each rewrite fires on its pattern and only there, keeps the values where the original
is accurate, and is accurate (against mpmath) where the original is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp

import kiln
import kiln_graph.tensor as kt
from kiln_graph import Elemwise, toposort
from kiln_graph._math import (
    Abs,
    Erfc,
    Erfcx,
    Exp,
    Expm1,
    Log,
    Log1mexp,
    Log1p,
    Logaddexp,
    Neg,
    Sigmoid,
    Softplus,
    Sqrt,
    Sub,
    TrueDivide,
)
from kiln_graph._reduce import CAReduce
from kiln_graph.testing import evaluate
from kiln_rewrite import Query, db, rewrite, rewrite_graph, stable_grad

#: The phases up to stabilize: the graphs are inspected before fusion merges nodes.
STABILIZE = Query(phases=("merge", "canonicalize", "stabilize"))
NO_REWRITES = kiln.Mode(rewrites=None, linker="vm")


def _kinds(outputs: list[Any]) -> list[type]:
    """List the ScalarOp class of each Elemwise node, the Op class of the others."""
    return [
        type(n.op.scalar_op) if isinstance(n.op, Elemwise) else type(n.op)
        for n in toposort(outputs)
    ]


def _has_max(outputs: list[Any]) -> bool:
    return any(isinstance(n.op, CAReduce) and n.op.kind == "max" for n in toposort(outputs))


@dataclass(frozen=True)
class Case:
    """One rewrite: an expression of x (and y), what its rewritten graph must hold."""

    name: str
    build: Callable[..., Any]
    present: tuple[type, ...]
    absent: tuple[type, ...]
    #: Where the original is accurate: inputs are drawn uniformly from these ranges.
    x_range: tuple[float, float] = (-3.0, 3.0)
    y_range: tuple[float, float] = (-3.0, 3.0)
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return self.name


CASES = [
    Case("log1p", lambda x, y: kt.log(1 + x), (Log1p,), (Log,), (-0.5, 3.0)),
    Case("log1p_nary", lambda x, y: kt.log(x + 1 + y), (Log1p,), (Log,), (0.0, 2.0), (0.0, 2.0)),
    Case("expm1", lambda x, y: kt.exp(x) - 1, (Expm1,), (Exp,)),
    Case("one_minus_exp", lambda x, y: 1 - kt.exp(x), (Expm1,), (Exp,)),
    Case("log1mexp", lambda x, y: kt.log(1 - kt.exp(x)), (Log1mexp,), (Log, Exp), (-3.0, -0.05)),
    Case("log1p_neg_exp", lambda x, y: kt.log1p(-kt.exp(x)), (Log1mexp,), (Log1p,), (-3.0, -0.05)),
    Case("log_sigmoid", lambda x, y: kt.log(kt.sigmoid(x)), (Softplus,), (Log, Sigmoid)),
    Case("log_1m_sigmoid", lambda x, y: kt.log(1 - kt.sigmoid(x)), (Softplus,), (Log, Sigmoid)),
    Case("one_minus_sigmoid", lambda x, y: 1 - kt.sigmoid(x), (Sigmoid,), (Sub,)),
    Case("softplus", lambda x, y: kt.log(1 + kt.exp(x)), (Softplus,), (Log, Exp)),
    Case("log1p_exp", lambda x, y: kt.log1p(kt.exp(x)), (Softplus,), (Log1p, Exp)),
    Case("logaddexp", lambda x, y: kt.log(kt.exp(x) + kt.exp(y)), (Logaddexp,), (Log, Exp)),
    Case("sqrt_pow2", lambda x, y: kt.sqrt(x**2), (Abs,), (Sqrt,)),
    Case("sqrt_square", lambda x, y: kt.sqrt(kt.square(x)), (Abs,), (Sqrt,)),
    Case("log_erfc", lambda x, y: kt.log(kt.erfc(x)), (Erfcx, Erfc), (), (-4.0, 8.0)),
    Case("logsumexp", lambda x, y: kt.log(kt.sum(kt.exp(x))), (), (), extra={"max": True}),
    Case(
        "logsumexp_keepdims",
        lambda x, y: kt.log(kt.sum(kt.exp(x), axis=0, keepdims=True)),
        (),
        (),
        extra={"max": True},
    ),
    Case("log_softmax", lambda x, y: kt.log(kt.softmax(x)), (), (TrueDivide,), (-30.0, 30.0)),
    # the products the gradients of softplus, logsumexp and log(erfc) hold
    Case(
        "grad_softplus",
        lambda x, y: kt.exp(x) * (y / (1 + kt.exp(x))),
        (Sigmoid,),
        (Exp, TrueDivide),
    ),
    Case(
        "grad_logsumexp",
        lambda x, y: kt.exp(x) * (kt.sum(y) / kt.sum(kt.exp(x))),
        (),
        (TrueDivide,),
        extra={"max": True},
    ),
    Case(
        "grad_log_erfc",
        lambda x, y: -2.0 * kt.exp(-kt.square(x)) * (y / kt.erfc(x)),
        (Erfcx,),
        (Erfc, Exp),
        (-4.0, 8.0),
    ),
]


def _draw(case: Case, n: int = 7, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(*case.x_range, n), rng.uniform(*case.y_range, n)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_rewrite_fires_and_keeps_values(case: Case):
    x, y = kt.vector("x"), kt.vector("y")
    out = case.build(x, y)
    (new,) = rewrite([x, y], [out], STABILIZE)
    kinds = _kinds([new])
    for k in case.present:
        assert k in kinds, f"{case.name}: expected {k.__name__} in {kinds}"
    for k in case.absent:
        assert k not in kinds, f"{case.name}: {k.__name__} should be rewritten away: {kinds}"
    if case.extra.get("max"):
        assert _has_max([new]), "logsumexp should subtract the maximum"
    assert new.type == out.type
    xv, yv = _draw(case)
    givens = {x: xv, y: yv}
    np.testing.assert_allclose(evaluate(new, givens), evaluate(out, givens), rtol=1e-12)


def _matrix_lse(axis: Any, keepdims: bool) -> None:
    m = kt.matrix("m")
    out = kt.log(kt.sum(kt.exp(m), axis=axis, keepdims=keepdims))
    (new,) = rewrite([m], [out], STABILIZE)
    assert _has_max([new]) and new.type == out.type
    value = np.random.default_rng(1).normal(size=(3, 4)) * 300
    expected = sp.logsumexp(value, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(evaluate(new, {m: value}), expected, rtol=1e-13)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_any_axis_against_scipy(axis: Any, keepdims: bool):
    _matrix_lse(axis, keepdims)


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_log_softmax_graph_equals_log_softmax(axis: Any):
    m = kt.matrix("m")
    (a,) = rewrite([m], [kt.log(kt.softmax(m, axis=axis))], STABILIZE)
    (b,) = rewrite([m], [kt.log_softmax(m, axis=axis)], STABILIZE)
    assert a is b
    value = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    expected = sp.log_softmax(value, axis=axis)
    np.testing.assert_allclose(evaluate(a, {m: value}), expected, rtol=1e-13)


def test_hand_written_log_softmax_is_stabilized():
    x = kt.vector("x")
    e = kt.exp(x)
    (new,) = rewrite([x], [kt.log(e / kt.sum(e, keepdims=True))], STABILIZE)
    assert _has_max([new]) and TrueDivide not in _kinds([new])
    value = np.array([1000.0, 0.0])
    np.testing.assert_allclose(evaluate(new, {x: value}), sp.log_softmax(value), rtol=1e-13)


NOT_REWRITTEN = {
    "log(2 + x)": (lambda x, y: kt.log(2 + x), Log1p),
    "log(x + y)": (lambda x, y: kt.log(x + y), Log1p),
    "exp(x) - 2": (lambda x, y: kt.exp(x) - 2, Expm1),
    "exp(x) - y": (lambda x, y: kt.exp(x) - y, Expm1),
    "log(2 - exp(x))": (lambda x, y: kt.log(2 - kt.exp(x)), Log1mexp),
    "log(2 + exp(x))": (lambda x, y: kt.log(2 + kt.exp(x)), Softplus),
    "log(2 * sigmoid(x))": (lambda x, y: kt.log(2 * kt.sigmoid(x)), Softplus),
    "log(exp(x) + y)": (lambda x, y: kt.log(kt.exp(x) + y), Logaddexp),
    "log(exp(x) * exp(y))": (lambda x, y: kt.log(kt.exp(x) * kt.exp(y)), Logaddexp),
    "sqrt(x ** 3)": (lambda x, y: kt.sqrt(x**3), Abs),
    "sqrt(x ** 2 + 1)": (lambda x, y: kt.sqrt(x**2 + 1), Abs),
    "log(erfc(minimum(x, 1)))": (lambda x, y: kt.log(kt.erfc(kt.minimum(x, 1.0))), Erfcx),
    "log(erf(x))": (lambda x, y: kt.log(kt.erf(x)), Erfcx),
}


@pytest.mark.parametrize("name", list(NOT_REWRITTEN))
def test_rewrite_does_not_fire_elsewhere(name: str):
    build, kind = NOT_REWRITTEN[name]
    x, y = kt.vector("x"), kt.vector("y")
    (new,) = rewrite([x, y], [build(x, y)], STABILIZE)
    assert kind not in _kinds([new])


@pytest.mark.parametrize(
    ("name", "build", "kind"),
    [
        ("local_log_one_minus_exp", lambda x: kt.log(1 - kt.exp(x)), Log1mexp),
        ("local_log_one_minus_sigmoid", lambda x: kt.log(1 - kt.sigmoid(x)), Softplus),
    ],
)
def test_direct_rules_shadowed_by_inner_ones(name: str, build: Callable[..., Any], kind: type):
    # In the pipeline the inner 1 - exp(x) / 1 - sigmoid(x) is rewritten first; alone,
    # the direct rule gives the same result.
    x = kt.vector("x")
    out = build(x)
    (new,) = rewrite_graph([out], [db[name]])
    assert kind in _kinds([new]) and Log not in _kinds([new])
    value = np.linspace(-3.0, -0.1, 7)
    np.testing.assert_allclose(evaluate(new, {x: value}), evaluate(out, {x: value}), rtol=1e-13)


def test_exp_times_quotient_needs_aligned_factors():
    m = kt.matrix("m", shape=(3, 3))
    out = kt.exp(m) * kt.transpose(1 / (1 + kt.exp(m)))
    (new,) = rewrite([m], [out], STABILIZE)
    assert Sigmoid not in _kinds([new])
    value = np.random.default_rng(2).normal(size=(3, 3))
    np.testing.assert_allclose(evaluate(new, {m: value}), evaluate(out, {m: value}), rtol=1e-14)


def test_exp_times_broadcast_quotient():
    m = kt.matrix("m")
    s = kt.sum(kt.exp(m), axis=1)
    out = kt.exp(m) * kt.broadcast_to((1 / s)[:, None], kt.shape(m))
    (new,) = rewrite([m], [out], STABILIZE)
    assert _has_max([new]) and new.type == out.type
    value = np.array([[1000.0, 1000.0], [0.0, 1.0]])
    np.testing.assert_allclose(evaluate(new, {m: value}), sp.softmax(value, axis=1), rtol=1e-12)


def test_log_of_other_reductions_is_left_alone():
    x, y = kt.vector("x"), kt.vector("y")
    for out in (kt.log(kt.sum(x)), kt.log(kt.prod(kt.exp(x))), kt.log(kt.sum(kt.exp(x) + 1))):
        (new,) = rewrite([x], [out], STABILIZE)
        assert not _has_max([new])
    # a quotient that is not a softmax (another exp in the sum) keeps its division
    (new,) = rewrite([x, y], [kt.log(kt.exp(x) / kt.sum(kt.exp(y)))], STABILIZE)
    assert TrueDivide in _kinds([new])


def test_logsumexp_is_not_rewritten_again():
    x = kt.vector("x")
    lse = kt.logsumexp(x)
    (new,) = rewrite([x], [lse], STABILIZE)
    (canonical,) = rewrite([x], [lse], Query(phases=("merge", "canonicalize")))
    assert new is canonical
    (once,) = rewrite([x], [kt.log(kt.sum(kt.exp(x)))], STABILIZE)
    assert sum(isinstance(n.op, CAReduce) and n.op.kind == "max" for n in toposort([once])) == 1


def test_rules_compose_bottom_up():
    x = kt.vector("x")
    # 1 - sigmoid(x) -> sigmoid(-x), then log(sigmoid(-x)) -> -softplus(x) (no -(-x))
    (new,) = rewrite([x], [kt.log(1 - kt.sigmoid(x))], STABILIZE)
    assert _kinds([new]) == [Softplus, Neg]


def test_dtypes_are_kept():
    for dtype in ("float32", "int8", "bool"):
        x = kt.vector("x", dtype=dtype)
        for out in (kt.log(kt.sigmoid(x)), kt.log(1 + kt.exp(x)), 1 - kt.sigmoid(x)):
            (new,) = rewrite([x], [out], STABILIZE)
            assert new.type == out.type, (dtype, out)
            assert Softplus in _kinds([new]) or Sigmoid in _kinds([new])


def test_every_rewrite_is_tagged_fast_run_and_states_its_identity():
    """Every stabilize rewrite runs in FAST_RUN, or (``before_grad``) before a gradient."""
    rules = db.in_phase("stabilize", Query(include=frozenset({"stabilize"})))
    assert len(rules) >= 15
    for r in rules:
        assert "fast_run" in r.tags or "before_grad" in r.tags, r.name
        assert "->" in r.identity, r.name
    before_grad = [r.name for r in rules if "fast_run" not in r.tags]
    assert before_grad == ["local_div_exp"]


# --- stability against mpmath --------------------------------------------------------------


@dataclass(frozen=True)
class Stable:
    """An unstable expression at a point, its mpmath value and gradient."""

    name: str
    build: Callable[[Any], Any]
    point: list[float]
    value: Callable[[list[Any]], Any]
    grad: Callable[[list[Any]], list[Any]]

    def __repr__(self) -> str:
        return self.name


STABLE = [
    Stable(
        "log(1 + x)",
        lambda x: kt.log(1 + x),
        [1e-20],
        lambda v: mp.log(1 + v[0]),
        lambda v: [1 / (1 + v[0])],
    ),
    Stable(
        "log(sum(exp(x)))",
        lambda x: kt.log(kt.sum(kt.exp(x))),
        [1000.0, 1000.0],
        lambda v: mp.log(mp.exp(v[0]) + mp.exp(v[1])),
        lambda v: [mp.exp(a) / (mp.exp(v[0]) + mp.exp(v[1])) for a in v],
    ),
    Stable(
        "log(sigmoid(x))",
        lambda x: kt.log(kt.sigmoid(x)),
        [-800.0],
        lambda v: -mp.log(1 + mp.exp(-v[0])),
        lambda v: [1 / (1 + mp.exp(v[0]))],
    ),
    Stable(
        "log(1 + exp(x))",
        lambda x: kt.log(1 + kt.exp(x)),
        [800.0],
        lambda v: mp.log(1 + mp.exp(v[0])),
        lambda v: [1 / (1 + mp.exp(-v[0]))],
    ),
    Stable(
        "log(1 - exp(x))",
        lambda x: kt.log(1 - kt.exp(x)),
        [-1e-20],
        lambda v: mp.log(1 - mp.exp(v[0])),
        lambda v: [-mp.exp(v[0]) / (1 - mp.exp(v[0]))],
    ),
    Stable(
        "log(erfc(x))",
        lambda x: kt.log(kt.erfc(x)),
        [30.0],
        lambda v: mp.log(mp.erfc(v[0])),
        lambda v: [-2 / mp.sqrt(mp.pi) * mp.exp(-(v[0] ** 2)) / mp.erfc(v[0])],
    ),
]


def _compile(case: Stable, mode: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    x = kt.vector("x")
    y = kt.sum(case.build(x))
    f = kiln.function([x], y, mode=mode)
    g = kiln.function([x], kiln.grad(y, x), mode=mode)
    return f, g


def _relerr(actual: Any, exact: Any) -> float:
    return float(abs((mp.mpf(float(actual)) - exact) / exact))


@pytest.mark.parametrize("case", STABLE, ids=repr)
def test_stabilized_value_and_gradient_match_mpmath(case: Stable):
    f, g = _compile(case, "FAST_RUN")
    point = np.array(case.point)
    value = f(point)
    grad = g(point)
    assert np.isfinite(value)
    assert np.all(np.isfinite(grad))
    with mp.workdps(60):
        exact_point = [mp.mpf(v) for v in case.point]
        assert _relerr(value, case.value(exact_point)) < 1e-12
        for actual, exact in zip(grad, case.grad(exact_point), strict=True):
            assert _relerr(actual, exact) < 1e-12


@pytest.mark.parametrize(
    "mode",
    [NO_REWRITES, kiln.FAST_RUN.excluding("stabilize")],
    ids=["no-rewrites", "fast_run-without-stabilize"],
)
@pytest.mark.parametrize("case", STABLE, ids=repr)
def test_unstabilized_value_is_wrong(case: Stable, mode: Any):
    f, _ = _compile(case, mode)
    value = f(np.array(case.point))
    with mp.workdps(60):
        exact = case.value([mp.mpf(v) for v in case.point])
        assert not np.isfinite(value) or _relerr(value, exact) > 1e-3


def test_bounds_of_a_sigmoid_become_a_nan_check():
    """``sigmoid(x) >= 0`` and ``<= 1`` hold for every x but NaN: no exp is computed."""
    x = kt.vector("x")
    checks = kt.logical_and(kt.sigmoid(x) >= 0, kt.sigmoid(x) <= 1)
    f = kiln.function([x], checks, mode=kiln.Mode(linker="vm"))
    values = np.array([0.0, np.nan, 50.0, -800.0, np.inf])
    np.testing.assert_array_equal(f(values), ~np.isnan(values))
    printed = kiln.format_graph(f.outputs)
    assert "sigmoid" not in printed and "exp" not in printed, printed


# --- gradients of the stabilized graph (kiln_rewrite.stable_grad) ---------------------------


@pytest.mark.parametrize(
    ("build", "at", "expected"),
    [
        # d/dz [-(0.5 / exp(z))**2 / 2 - z]: 0.25 exp(-2z) - 1, -1 where exp(z) overflows
        (lambda z: -0.5 * kt.square(0.5 / kt.exp(z)) - kt.log(kt.exp(z)), 710.0, -1.0),
        (lambda z: -0.5 * kt.square(0.5 * kt.reciprocal(kt.exp(z))) - z, 800.0, -1.0),
        # a log-transformed Gamma(2, 1): 2 z - exp(z), gradient 2 where exp(z) underflows
        (lambda z: kt.log(kt.exp(z)) - kt.exp(z) + z, -710.0, 2.0),
        # a logit-transformed Beta(0.5, 0.5): -0.5 softplus(-z) - 0.5 softplus(z)
        (lambda z: 0.5 * kt.log(kt.sigmoid(z)) + 0.5 * kt.log1p(-kt.sigmoid(z)), 40.0, -0.5),
        (lambda z: kt.log1p(-kt.sigmoid(z)), -1e300, 0.0),
    ],
    ids=["div-exp", "reciprocal-exp", "log-exp", "log1p-neg-sigmoid", "huge"],
)
def test_stable_grad_is_finite_where_the_stable_value_is(build, at, expected) -> None:
    """Check the gradient of the stabilized graph where the graph as written overflows.

    ``kiln.grad`` of the graph as written is NaN or inf at these points; the gradient of
    the stabilized graph has the exact value, and the value is finite.
    """
    z = kt.scalar("z")
    cost, g = stable_grad(build(z), z)
    with np.errstate(all="ignore"):
        value, grad = (float(evaluate(v, {z: at})) for v in (cost, g))
        naive = float(evaluate(kiln.grad(build(z), z), {z: at}))
    assert np.isfinite(value)
    assert grad == pytest.approx(expected, abs=1e-12)
    if at in (710.0, 800.0, -710.0):
        assert not np.isfinite(naive)  # what the unstabilized gradient gives


def test_the_cholesky_factor_of_a_cholesky_factors_gram_matrix_is_that_factor():
    """MvNormal(chol=L) holds L @ L.T; its density's Cholesky of it is L itself.

    One factorization instead of two, in the value and in its gradient (whose Cholesky
    rule is taken once); the value and the gradient are unchanged.
    """
    from kiln_graph.ops import Cholesky

    p = kt.matrix("p")
    k = kt.dot(p, p.T) + 3.0 * kt.eye(3)
    chol = kt.cholesky(k)
    again = kt.cholesky(kt.matmul(chol, chol.T))
    upper = kt.cholesky(kt.matmul(chol, chol.T), lower=False)
    cost = kt.sum(kt.log(again * 2.0 + 5.0)) + kt.sum(upper)
    stable, g = stable_grad(cost, p)
    count = sum(isinstance(n.op, Cholesky) for n in toposort([stable, g]))
    assert count == 1
    value = np.random.default_rng(2).normal(size=(3, 3))
    f = kiln.function([p], [cost, kt.grad(cost, p)], mode=kiln.Mode(rewrites=None))
    g_f = kiln.function([p], [stable, g], mode=kiln.Mode(rewrites=None))
    want, got = f(value), g_f(value)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-12)
