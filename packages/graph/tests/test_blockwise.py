import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    Blockwise,
    KilnTypeError,
    KilnValueError,
    OpFromGraph,
    ShapeMismatchError,
    grad,
    infer_shape,
    toposort,
)
from kiln_graph._blockwise import parse_signature
from kiln_graph._linalg import Cholesky, MatMul, SlogDet, Solve
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

RNG = np.random.default_rng(3)
BMATMUL = Blockwise(MatMul(), "(m,k),(k,n)->(m,n)")


def test_parse_signature():
    assert parse_signature("(m,n),(n)->(m)") == ((("m", "n"), ("n",)), (("m",),))
    assert parse_signature(" (), () -> () ") == (((), ()), ((),))
    assert parse_signature("(m,m)->(),()") == ((("m", "m"),), ((), ()))
    for bad in ["(m,n)", "m->n", "(m,)->(m)", "(m)->", "((m))->(m)"]:
        with pytest.raises(KilnValueError, match="gufunc signature"):
            parse_signature(bad)
    with pytest.raises(KilnTypeError):
        parse_signature(3)  # type: ignore[arg-type]


def test_props_and_interning():
    assert BMATMUL == Blockwise(MatMul(), " (m, k), (k, n) -> (m, n) ")
    assert BMATMUL == Blockwise(MatMul())  # the core op's declared signature
    assert BMATMUL != Blockwise(Cholesky(), "(m,m)->(m,m)")
    a, b = kt.tensor("a", shape=(None, 2, 3)), kt.matrix("b")
    assert BMATMUL(a, b) is Blockwise(MatMul())(a, b)
    with pytest.raises(KilnTypeError, match="core_op"):
        Blockwise(np.add, "(),()->()")  # type: ignore[arg-type]
    with pytest.raises(KilnValueError, match="gufunc_signature"):
        Blockwise(kt.exp(kt.scalar("s")).owner.op)


def test_static_shapes_and_broadcasting():
    a = kt.tensor("a", shape=(5, 1, 3, 4))
    b = kt.tensor("b", shape=(7, 4, 2))
    out = BMATMUL(a, b)
    assert out.type.shape == (5, 7, 3, 2)
    # An input with fewer batch dims is padded with broadcastable ones.
    assert out.owner.inputs[1].type.shape == (1, 7, 4, 2)
    # Core dims take their static length from any input that knows it.
    c = kt.tensor("c", shape=(None, None, 4))
    d = kt.tensor("d", shape=(None, None, 2))
    assert BMATMUL(c, d).type.shape == (None, None, 2)
    e = kt.tensor("e", shape=(None, 3, None))
    f = kt.tensor("f", shape=(None, 4, 2))
    assert BMATMUL(e, f).type.shape == (None, 3, 2)


def test_static_errors():
    with pytest.raises(ShapeMismatchError, match="incompatible"):
        BMATMUL(kt.tensor("a", shape=(2, 3, 4)), kt.tensor("b", shape=(3, 4, 2)))
    with pytest.raises(ShapeMismatchError):
        BMATMUL(kt.tensor("a", shape=(2, 3, 4)), kt.tensor("b", shape=(2, 5, 2)))
    with pytest.raises(KilnValueError, match="at least 2 dimension"):
        BMATMUL(kt.vector("a"), kt.matrix("b"))
    with pytest.raises(KilnValueError, match="expected 2 input"):
        BMATMUL(kt.matrix("a"))
    # A symbol repeated across inputs must have one static length.
    v, w = kt.vector("v"), kt.vector("w")
    both = Blockwise(OpFromGraph([v, w], [kt.sum(v) + kt.sum(w)]), "(n),(n)->()")
    with pytest.raises(ShapeMismatchError, match="core dimension 'n'"):
        both(kt.tensor("a", shape=(2, 3)), kt.matrix("b", shape=(2, 4)))
    # The core op checks its inputs first.
    with pytest.raises(ShapeMismatchError, match="solve: a has static shape"):
        Blockwise(Solve(b_ndim=1))(kt.tensor("a", shape=(2, None, 3)), kt.matrix("b", shape=(2, 4)))
    # The signature must fit the core op.
    with pytest.raises(KilnValueError, match="declares 1 core dimension"):
        Blockwise(MatMul(), "(m,k),(k,n)->(m)")(kt.tensor("a", shape=(2, 3, 4)), kt.matrix("b"))
    with pytest.raises(KilnValueError, match="declares 1 output"):
        Blockwise(SlogDet(), "(m,m)->()")(kt.tensor("a", shape=(2, 3, 3)))


def test_perform_with_broadcasting():
    a = kt.tensor("a", shape=(None, 1, None, None))
    b = kt.tensor("b", shape=(None, None, None))
    va, vb = RNG.normal(size=(5, 1, 3, 4)), RNG.normal(size=(7, 4, 2))
    out = BMATMUL(a, b)
    np.testing.assert_allclose(evaluate(out, {a: va, b: vb}), np.matmul(va, vb))
    check_infer_shape(out, {a: va, b: vb})


def test_perform_runtime_errors():
    a, b = kt.tensor("a", shape=(None, None, None)), kt.tensor("b", shape=(None, None, None))
    out = BMATMUL(a, b)
    with pytest.raises(ShapeMismatchError, match="batch dimension 0"):
        evaluate(out, {a: np.ones((2, 3, 4)), b: np.ones((3, 4, 2))})
    with pytest.raises(ShapeMismatchError, match="core dimension 'k'"):
        evaluate(out, {a: np.ones((2, 3, 4)), b: np.ones((2, 5, 2))})


def test_empty_batch():
    a, b = kt.tensor("a", shape=(None, None, None)), kt.matrix("b")
    out = BMATMUL(a, b)
    got = evaluate(out, {a: np.ones((0, 3, 4)), b: np.ones((4, 2))})
    assert got.shape == (0, 3, 2)


def test_multiple_outputs():
    x = kt.tensor("x", shape=(None, None, None))
    sign, logabsdet = Blockwise(SlogDet())(x)
    vx = RNG.normal(size=(4, 3, 3))
    got = evaluate([sign, logabsdet], {x: vx})
    want = np.linalg.slogdet(vx)
    np.testing.assert_allclose(got[0], want.sign)
    np.testing.assert_allclose(got[1], want.logabsdet)
    check_infer_shape([sign, logabsdet], {x: vx})


def test_grad_sums_over_broadcast_batch_dims():
    verify_grad(BMATMUL, [RNG.normal(size=(1, 3, 4)), RNG.normal(size=(5, 4, 2))])
    verify_grad(BMATMUL, [RNG.normal(size=(3, 4)), RNG.normal(size=(2, 1, 4, 2))])
    verify_grad(lambda x: Blockwise(SlogDet())(x)[1], [RNG.normal(size=(2, 3, 3))])


def test_grad_node_is_blockwise_of_op_from_graph():
    a, b = kt.tensor("a", shape=(None, 3, 4)), kt.matrix("b", shape=(4, 2))
    ga = grad(kt.sum(BMATMUL(a, b)), a)
    ops = {type(n.op) for n in kt_nodes(ga)}
    assert Blockwise in ops
    cores = [n.op.core_op for n in kt_nodes(ga) if isinstance(n.op, Blockwise)]
    assert any(isinstance(c, OpFromGraph) for c in cores)
    # Building the gradient twice gives the same nodes.
    assert grad(kt.sum(BMATMUL(a, b)), a) is ga


def kt_nodes(v):
    return toposort(v)


def test_nested_grad_through_blockwise():
    f = kt.vectorize(lambda x: kt.sum(x**3), "(n)->()")
    x = kt.matrix("x")
    g = grad(kt.sum(f(x)), x)  # 3 x^2
    h = grad(kt.sum(g), x)  # 6 x
    vx = RNG.normal(size=(2, 3))
    np.testing.assert_allclose(evaluate(g, {x: vx}), 3 * vx**2)
    np.testing.assert_allclose(evaluate(h, {x: vx}), 6 * vx)
    verify_grad(lambda v: grad(kt.sum(f(v) ** 2), v), [vx])


def test_infer_shape_falls_back_to_the_output():
    # The core output's length is not a signature symbol of any input.
    f = kt.vectorize(lambda v: kt.reshape(v, (2, -1)), "(n)->(a,b)")
    x = kt.matrix("x")
    out = f(x)
    assert out.type.shape == (None, 2, None)
    check_infer_shape(out, {x: RNG.normal(size=(3, 6))})


def test_infer_shape_through_the_core_op():
    # The core output's length is computed from the core input's length.
    f = kt.vectorize(lambda v: kt.zeros((kt.shape_i(v, 0) * 2,)) + kt.sum(v), "(n)->(m)")
    x = kt.matrix("x")
    out = f(x)
    check_infer_shape(out, {x: RNG.normal(size=(3, 4))})
    shp = infer_shape(out)
    assert not any(isinstance(n.op, Blockwise) for n in toposort(list(shp)))


# --- vectorize ----------------------------------------------------------------------------


def test_vectorize_matches_numpy():
    def affine(a, x, b):
        return kt.dot(a, x) + b

    f = kt.vectorize(affine, "(m,n),(n),(m)->(m)")
    a = kt.tensor("a", shape=(None, None, None))
    x = kt.vector("x")
    b = kt.tensor("b", shape=(1, None))
    va, vx, vb = RNG.normal(size=(5, 3, 2)), RNG.normal(size=2), RNG.normal(size=(1, 3))
    out = f(a, x, b)
    assert isinstance(out.owner.op, Blockwise)
    assert isinstance(out.owner.op.core_op, OpFromGraph)
    want = np.vectorize(lambda p, q, r: p @ q + r, signature="(m,n),(n),(m)->(m)")(va, vx, vb)
    np.testing.assert_allclose(evaluate(out, {a: va, x: vx, b: vb}), want)
    check_infer_shape(out, {a: va, x: vx, b: vb})
    verify_grad(f, [va, vx, vb])


def test_vectorize_same_graph_is_interned():
    f = kt.vectorize(lambda v: kt.exp(v) / kt.sum(kt.exp(v)), "(n)->(n)")
    g = kt.vectorize(lambda w: kt.exp(w) / kt.sum(kt.exp(w)), "(n)->(n)")
    x = kt.matrix("x")
    assert f(x) is g(x) is f(x)


def test_vectorize_without_batch_dims_applies_the_graph_directly():
    f = kt.vectorize(lambda v: kt.sum(v**2), "(n)->()")
    x = kt.vector("x")
    assert isinstance(f(x).owner.op, OpFromGraph)
    vx = RNG.normal(size=4)
    np.testing.assert_allclose(evaluate(f(x), {x: vx}), np.sum(vx**2))


def test_vectorize_multiple_outputs_and_static_core_shape():
    f = kt.vectorize(lambda v: (kt.sum(v), v * 2.0), "(n)->(),(n)")
    x = kt.tensor("x", shape=(None, 3))
    total, double = f(x)
    assert total.type.shape == (None,) and double.type.shape == (None, 3)
    vx = RNG.normal(size=(4, 3))
    got = evaluate([total, double], {x: vx})
    np.testing.assert_allclose(got[0], vx.sum(-1))
    np.testing.assert_allclose(got[1], 2 * vx)
    verify_grad(lambda v: f(v)[0] + kt.sum(f(v)[1], axis=-1), [vx])


def test_vectorize_with_discrete_input():
    f = kt.vectorize(lambda v, n: v * n, "(n),()->(n)")
    x, k = kt.matrix("x"), kt.vector("k", dtype="int64")
    out = f(x, k)
    vx, vk = RNG.normal(size=(3, 2)), np.arange(3)
    np.testing.assert_allclose(evaluate(out, {x: vx, k: vk}), vx * vk[:, None])
    gx = grad(kt.sum(out), x)
    np.testing.assert_allclose(evaluate(gx, {x: vx, k: vk}), np.broadcast_to(vk[:, None], vx.shape))


def test_vectorize_errors():
    f = kt.vectorize(lambda v: kt.sum(v), "(n)->()")
    with pytest.raises(KilnValueError, match="takes 1 input"):
        f(kt.vector("x"), kt.vector("y"))
    with pytest.raises(KilnValueError, match="at least 1 dimension"):
        f(kt.scalar("x"))
    g = kt.vectorize(lambda v: (v, v), "(n)->(n)")
    with pytest.raises(KilnValueError, match="declares 1 output"):
        g(kt.vector("x"))
    h = kt.vectorize(lambda v: v, "(n)->()")
    with pytest.raises(KilnValueError, match="declares 0 core dimension"):
        h(kt.vector("x"))
    with pytest.raises(KilnTypeError, match="callable"):
        kt.vectorize(3, "(n)->()")  # type: ignore[arg-type]
    with pytest.raises(KilnValueError, match="gufunc signature"):
        kt.vectorize(kt.sum, "n->()")


def test_a_core_op_whose_perform_broadcasts_is_performed_once(monkeypatch):
    """MatMul's perform (np.matmul) takes the whole batch; other core ops loop over it."""
    calls = []
    perform = MatMul.perform

    def counted(self, node, inputs, outputs):
        calls.append(np.shape(inputs[0]))
        perform(self, node, inputs, outputs)

    monkeypatch.setattr(MatMul, "perform", counted)
    a, b = kt.tensor("a", shape=(None, 1, None, None)), kt.matrix("b")
    va, vb = RNG.normal(size=(5, 1, 3, 4)), RNG.normal(size=(4, 2))
    np.testing.assert_allclose(evaluate(BMATMUL(a, b), {a: va, b: vb}), np.matmul(va, vb))
    assert calls == [(5, 1, 3, 4)]
    assert MatMul.perform_broadcasts and not Cholesky.perform_broadcasts
