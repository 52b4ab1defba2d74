"""Canonicalize: a Blockwise of an OpFromGraph is its inner graph batched node by node."""

from __future__ import annotations

import numpy as np

import kiln_graph.tensor as kt
from kiln_graph import Blockwise, OpFromGraph, toposort
from kiln_graph.testing import evaluate
from kiln_rewrite import Query, rewrite

CANON = Query(phases=("merge", "canonicalize"))


def _blockwise_of_graphs(outputs: list) -> list:
    return [
        n
        for n in toposort(outputs)
        if isinstance(n.op, Blockwise) and isinstance(n.op.core_op, OpFromGraph)
    ]


def _expand_like(n: int):
    """Return a batched graph shaped like a model's expand: a draw's pieces, transformed."""
    xs = kt.matrix("xs", shape=(None, n))
    data = kt.vector("data", shape=(3,))

    def one_draw(x, d):
        pieces = [kt.exp(x[i]) if i % 2 else x[i] for i in range(n)]
        return [*pieces, x[0:2] * 2.0, kt.sum(d) + x[1], kt.dot(d, d)]

    cores = ",".join(["()"] * n + ["(two)", "()", "()"])
    outs = kt.vectorize(one_draw, f"(n),(k)->{cores}")(xs, data)
    return [xs, data], list(outs)


def test_the_inner_graph_is_batched_node_by_node():
    inputs, outs = _expand_like(6)
    assert _blockwise_of_graphs(outs)
    new = rewrite(inputs, outs, CANON)
    assert not _blockwise_of_graphs(new)
    # Elemwise, slicing and a reduction of unbatched data: no Blockwise at all left.
    assert not any(isinstance(n.op, Blockwise) for n in toposort(new))
    rng = np.random.default_rng(0)
    givens = {inputs[0]: rng.normal(size=(4, 6)), inputs[1]: rng.normal(size=3)}
    for a, b in zip(evaluate(outs, givens), evaluate(new, givens), strict=True):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_the_node_count_grows_linearly_with_the_outputs():
    counts = []
    for n in (50, 100):
        inputs, outs = _expand_like(n)
        counts.append(len(toposort(rewrite(inputs, outs, CANON))))
    assert counts[1] <= 2.2 * counts[0]


def test_an_op_without_a_batched_rule_becomes_its_own_blockwise():
    a = kt.tensor("a", shape=(None, 3, 3))

    def inv_plus(m):
        return kt.exp(kt.inv(m))

    out = kt.vectorize(inv_plus, "(m,m)->(m,m)")(a)
    (new,) = rewrite([a], [out], CANON)
    assert not _blockwise_of_graphs([new])
    value = np.eye(3) * 2.0 + np.random.default_rng(1).normal(size=(2, 3, 3)) * 0.1
    np.testing.assert_allclose(evaluate(new, {a: value}), evaluate(out, {a: value}), rtol=1e-12)


def test_a_batched_reshape_keeps_its_static_shape():
    """A reshape to (1,) batched stays (batch, 1): a later product broadcasts it.

    Its shape input reaches the Blockwise as a constant broadcast along the batch (a
    (1, 1) constant once folded); the core op must still see the constant (1,), or the
    output's static length 1 is lost and the product with a length-5 vector fails.
    """
    xs = kt.vector("xs")
    five = np.linspace(0.0, 1.0, 5)
    f = kt.vectorize(lambda x: kt.sum(kt.reshape(x * x, (1,)) * kt.constant(five)), "()->()")
    (out,) = rewrite([xs], [f(xs)])
    np.testing.assert_allclose(evaluate(out, {xs: np.array([1.0, 2.0])}), [2.5, 10.0])
    b = Blockwise(kt.reshape(kt.scalar("s"), (1,)).owner.op, "(),(d)->(e)")
    assert b(xs, kt.constant(np.array([[1]]))).type.shape == (None, 1)


def test_reductions_and_joins_are_batched_along_shifted_axes():
    """A simplex-like transform: sums, a max and a Join with an unbatched constant."""
    xs = kt.matrix("xs", shape=(None, 4))

    def one_draw(x):
        shifted = x - kt.max(x)
        tail = kt.concatenate([shifted, kt.constant(np.zeros(1))])
        both = kt.concatenate([x, x * 2.0])
        return [tail / kt.sum(kt.exp(tail)), both, kt.sum(x[None, :] * x[:, None], axis=1)]

    outs = list(kt.vectorize(one_draw, "(n)->(m),(k),(n)")(xs))
    new = rewrite([xs], outs, CANON)
    assert not any(isinstance(n.op, Blockwise) for n in toposort(new))
    value = np.random.default_rng(2).normal(size=(5, 4))
    for a, b in zip(evaluate(outs, {xs: value}), evaluate(new, {xs: value}), strict=True):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-14)
    np.testing.assert_allclose(
        evaluate(new[1], {xs: value}), np.concatenate([value, 2.0 * value], axis=1)
    )


def test_a_join_of_batched_inputs():
    """Batch lengths that must agree join natively; a static length 1 broadcasts."""
    a = kt.tensor("a", shape=(None, 3))
    b = kt.tensor("b", shape=(None, 3))
    out = kt.vectorize(lambda x, y: kt.concatenate([x, y]), "(n),(n)->(m)")(a, b)
    (new,) = rewrite([a, b], [out], CANON)
    assert not any(isinstance(n.op, Blockwise) for n in toposort([new]))
    va, vb = np.ones((4, 3)), np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(evaluate(new, {a: va, b: vb}), np.concatenate([va, vb], axis=1))
    # a gets a leading batch dimension of static length 1 against c's: it broadcasts.
    c = kt.tensor("c", shape=(None, None, 3))
    out = kt.vectorize(lambda x, y: kt.concatenate([x, y]), "(n),(n)->(m)")(a, c)
    (new,) = rewrite([a, c], [out], CANON)
    assert any(isinstance(n.op, Blockwise) for n in toposort([new]))
    vc = np.arange(24.0).reshape(2, 4, 3)
    np.testing.assert_allclose(
        evaluate(new, {a: va, c: vc}),
        np.concatenate([np.broadcast_to(va, (2, 4, 3)), vc], axis=2),
    )


def test_gathers_by_unbatched_indices_are_batched():
    """``x[idx]``, ``m[rows, cols]`` and a packed vector read as a matrix become one gather."""
    xs = kt.matrix("xs", shape=(None, 6))
    ms = kt.tensor("ms", shape=(None, 2, 3))
    idx = np.array([5, 0, 0, 2])
    packed = np.array([[0, 1, 3], [1, 2, 4], [3, 4, 5]])  # a symmetric matrix from 6 values
    rows, cols = np.array([0, 1, 1]), np.array([2, 0, 2])

    def one_draw(x, m):
        return [x[idx], x[kt.constant(packed)], m[rows, cols], m[:, idx[:2] % 3]]

    outs = list(kt.vectorize(one_draw, "(n),(r,c)->(a),(b,b),(k),(r,d)")(xs, ms))
    new = rewrite([xs, ms], outs, CANON)
    assert not any(isinstance(n.op, Blockwise) for n in toposort(new))
    rng = np.random.default_rng(3)
    x, m = rng.normal(size=(5, 6)), rng.normal(size=(5, 2, 3))
    expected = [x[:, idx], x[:, packed], m[:, rows, cols], m[:, :, idx[:2] % 3]]
    for got, want in zip(evaluate(new, {xs: x, ms: m}), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_gather_whose_index_arrays_are_apart_keeps_its_blockwise():
    """NumPy puts the dimensions of index arrays apart in the index first: not batchable."""
    xs = kt.tensor("xs", shape=(None, 2, 3, 4))
    i, j = np.array([1, 0]), np.array([3, 3])
    out = kt.vectorize(lambda x: x[i, :, j], "(a,b,c)->(k,b)")(xs)
    (new,) = rewrite([xs], [out], CANON)
    assert any(isinstance(n.op, Blockwise) for n in toposort([new]))
    value = np.arange(48.0).reshape(2, 2, 3, 4)
    np.testing.assert_array_equal(evaluate(new, {xs: value}), np.stack([v[i, :, j] for v in value]))
