import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    DisconnectedInputError,
    KilnTypeError,
    KilnValueError,
    OpFromGraph,
    ShapeMismatchError,
    ancestors,
    grad,
    infer_shape,
)
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

RNG = np.random.default_rng(7)


def build(name_x="x", name_y="y", shape=(None,)):
    x = kt.tensor(name_x, shape=shape)
    y = kt.tensor(name_y, shape=shape)
    return OpFromGraph([x, y], [kt.exp(x) * y, x + y])


def test_equal_graphs_give_equal_ops_and_interned_nodes():
    op1, op2 = build(), build("p", "q")
    assert op1 is not op2
    assert op1 == op2 and hash(op1) == hash(op2)
    assert op1.digest_bytes == op2.digest_bytes
    a, b = kt.vector("a"), kt.vector("b")
    out1, out2 = op1(a, b), op2(a, b)
    assert out1[0] is out2[0] and out1[1] is out2[1]
    assert out1[0].digest == out2[0].digest


def test_different_graphs_give_different_ops():
    x, y = kt.vector("x"), kt.vector("y")
    base = OpFromGraph([x, y], [x - y])
    assert base != OpFromGraph([y, x], [x - y])  # inputs numbered by position
    assert base != OpFromGraph([x, y], [x + y])
    xs, ys = kt.vector("x", shape=(3,)), kt.vector("y", shape=(3,))
    assert base != OpFromGraph([xs, ys], [xs - ys])  # types are part of the digest
    assert base != OpFromGraph([x, y, kt.vector("z")], [x - y])


def test_perform_matches_inner_graph():
    op = build()
    a, b = kt.vector("a"), kt.vector("b")
    va, vb = RNG.normal(size=4), RNG.normal(size=4)
    got = evaluate(op(a, b), {a: va, b: vb})
    np.testing.assert_allclose(got[0], np.exp(va) * vb)
    np.testing.assert_allclose(got[1], va + vb)


def test_outputs_never_alias_inputs_or_constants():
    x = kt.vector("x")
    op = OpFromGraph([x], [x, kt.constant(np.ones(2))])
    a = kt.vector("a")
    va = np.arange(3.0)
    out, const = evaluate(op(a), {a: va})
    assert out is not va and np.shares_memory(out, va) is False
    np.testing.assert_array_equal(out, va)
    assert const.flags.writeable


def test_infer_shape_uses_outer_shapes():
    x = kt.matrix("x")
    y = kt.vector("y")
    op = OpFromGraph([x, y], [kt.sum(x, axis=0) * y, kt.exp(x)])
    a, b = kt.matrix("a"), kt.vector("b")
    givens = {a: RNG.normal(size=(3, 4)), b: RNG.normal(size=4)}
    check_infer_shape(op(a, b), givens)
    # The shape graph does not need the node's outputs.
    shp = infer_shape(op(a, b)[1])
    assert not any(v.owner is not None and v.owner.op == op for v in ancestors(list(shp)))


def test_static_inner_shapes():
    x = kt.vector("x", shape=(3,))
    op = OpFromGraph([x], [kt.exp(x)])
    a = kt.vector("a")
    assert op(a).type.shape == (3,)
    with pytest.raises(ShapeMismatchError, match="inner graph was built"):
        evaluate(op(a), {a: np.ones(4)})
    with pytest.raises(ShapeMismatchError, match="dimension 0 differs"):
        op(kt.vector("b", shape=(4,)))


def test_bad_construction():
    x, y = kt.vector("x"), kt.vector("y")
    with pytest.raises(KilnValueError, match="not among the inputs"):
        OpFromGraph([x], [x + y])
    with pytest.raises(KilnValueError, match="not among the inputs"):
        OpFromGraph([x], [x + kt.shared(np.ones(2))])
    with pytest.raises(KilnTypeError, match="constant"):
        OpFromGraph([kt.constant(1.0)], [x])
    with pytest.raises(KilnValueError, match="twice"):
        OpFromGraph([x, x], [x])
    with pytest.raises(KilnTypeError, match="list"):
        OpFromGraph(x, [x])  # type: ignore[arg-type]
    with pytest.raises(KilnValueError, match="empty"):
        OpFromGraph([x], [])


def test_bad_application():
    op = build()
    with pytest.raises(KilnValueError, match="expected 2 input"):
        op(kt.vector("a"))
    with pytest.raises(KilnTypeError, match="dtype float64 and 1 dimension"):
        op(kt.vector("a", dtype="float32"), kt.vector("b"))
    with pytest.raises(KilnTypeError, match="dtype float64 and 1 dimension"):
        op(kt.matrix("a"), kt.vector("b"))


def test_grad():
    op = build()
    verify_grad(lambda a, b: op(a, b)[0] + 2 * op(a, b)[1], [RNG.normal(size=3)] * 2)
    verify_grad(lambda a, b: op(a, b)[0], [RNG.normal(size=3), RNG.normal(size=3)])


def test_grad_disconnected_and_discrete_inputs():
    x, y = kt.vector("x"), kt.vector("y")
    n = kt.vector("n", dtype="int64")
    op = OpFromGraph([x, y, n], [x * n])
    a, b, m = kt.vector("a"), kt.vector("b"), kt.vector("m", dtype="int64")
    cost = kt.sum(op(a, b, m))
    ga = grad(cost, a)
    givens = {a: np.ones(3), b: np.ones(3), m: np.arange(3)}
    np.testing.assert_allclose(evaluate(ga, givens), np.arange(3))
    with pytest.raises(DisconnectedInputError):
        grad(cost, b)
    node = op(a, b, m).owner
    assert node.op.L_op(node.inputs, node.outputs, [kt.ones_like(a)])[1:] == [None, None]


def test_grad_of_repeated_and_identity_outputs():
    x = kt.vector("x")
    y = kt.exp(x)
    op = OpFromGraph([x], [y, y, x])
    verify_grad(lambda a: op(a)[0] + 2 * op(a)[1] + 3 * op(a)[2], [RNG.normal(size=3)])


def test_nested_grad():
    x = kt.vector("x")
    op = OpFromGraph([x], [kt.sin(x) * x])
    a = kt.vector("a")
    g = grad(kt.sum(op(a)), a)  # cos(a) a + sin(a)
    h = grad(kt.sum(g), a)  # -sin(a) a + 2 cos(a)
    va = RNG.normal(size=4)
    np.testing.assert_allclose(evaluate(g, {a: va}), np.cos(va) * va + np.sin(va))
    np.testing.assert_allclose(evaluate(h, {a: va}), -np.sin(va) * va + 2 * np.cos(va))
    verify_grad(lambda v: grad(kt.sum(op(v) ** 2), v), [va])


def test_op_from_graph_inside_op_from_graph():
    x = kt.vector("x")
    inner = OpFromGraph([x], [kt.exp(x)])
    y = kt.vector("y")
    outer = OpFromGraph([y], [inner(y) * y])
    y2 = kt.vector("y2")
    assert outer == OpFromGraph([y2], [OpFromGraph([x], [kt.exp(x)])(y2) * y2])
    a = kt.vector("a")
    va = RNG.normal(size=3)
    np.testing.assert_allclose(evaluate(outer(a), {a: va}), np.exp(va) * va)
    check_infer_shape(outer(a), {a: va})
    verify_grad(outer, [va])
