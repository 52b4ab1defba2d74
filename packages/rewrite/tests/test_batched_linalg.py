"""Canonicalize: solves of a batch of vectors and batched triangles become one call."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import kiln_graph.tensor as kt
from kiln_graph import Blockwise, toposort
from kiln_graph.ops import Solve, SolveTriangular, Tri
from kiln_graph.testing import evaluate
from kiln_rewrite import Query, rewrite

CANON = Query(phases=("merge", "canonicalize"))


def _blockwise_ops(outputs: list) -> list:
    return [n.op.core_op for n in toposort(outputs) if isinstance(n.op, Blockwise)]


def _lower(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.tril(rng.normal(size=(n, n))) + 3.0 * np.eye(n)


@pytest.mark.parametrize(
    ("core", "reference"),
    [
        (
            SolveTriangular(lower=True, b_ndim=1),
            lambda a, b: sla.solve_triangular(a, b, lower=True),
        ),
        (
            SolveTriangular(lower=False, trans=1, b_ndim=1),
            lambda a, b: sla.solve_triangular(a, b, lower=False, trans=1),
        ),
        (
            SolveTriangular(lower=True, unit_diagonal=True, b_ndim=1),
            lambda a, b: sla.solve_triangular(a, b, lower=True, unit_diagonal=True),
        ),
        (Solve(assume_a="gen", b_ndim=1), lambda a, b: np.linalg.solve(a, b)),
        (Solve(assume_a="pos", lower=True, b_ndim=1), lambda a, b: sla.solve(a, b, assume_a="pos")),
    ],
)
def test_solves_of_a_batch_of_vectors_are_one_matrix_solve(core, reference) -> None:
    """MvNormal's pattern: one matrix (with a broadcastable batch dimension), N rows."""
    rng = np.random.default_rng(0)
    a = kt.matrix("a", shape=(3, 3))
    rows = kt.matrix("rows", shape=(None, 3))
    out = Blockwise(core, "(m,m),(m)->(m)")(a[None, :, :], rows)
    (new,) = rewrite([a, rows], [out], CANON)
    assert _blockwise_ops([new]) == []
    assert [type(n.op) for n in toposort([new]) if n.op.__class__ is type(core)]
    lower = _lower(rng, 3)
    a_value = lower if isinstance(core, SolveTriangular) else lower @ lower.T
    if isinstance(core, SolveTriangular) and not core.lower:
        a_value = a_value.T
    b_value = rng.normal(size=(7, 3))
    got = evaluate(new, {a: a_value, rows: b_value})
    np.testing.assert_allclose(got, evaluate(out, {a: a_value, rows: b_value}), rtol=1e-13)
    want = np.stack([reference(a_value, row) for row in b_value])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_solves_left_as_blockwise() -> None:
    """A matrix per batch element, or b with two batch dimensions: the loop stays."""
    tri = SolveTriangular(lower=True, b_ndim=1)
    per_row = Blockwise(tri, "(m,m),(m)->(m)")(
        kt.tensor("many", shape=(None, 3, 3)), kt.matrix("rows", shape=(None, 3))
    )
    two_batch = Blockwise(tri, "(m,m),(m)->(m)")(
        kt.matrix("a", shape=(3, 3)), kt.tensor("grid", shape=(None, None, 3))
    )
    for out in (per_row, two_batch):
        inputs = [v for v in out.owner.inputs if v.owner is None]
        (new,) = rewrite(inputs, [out], CANON)
        assert _blockwise_ops([new]) == [tri]


def test_a_batch_of_triangles_is_one_triangle() -> None:
    """The gradient of MvNormal's solves: a Blockwise of Tril over N outer products."""
    x = kt.tensor("x", shape=(None, 3, 3))
    sig = "(m,n)->(m,n)"
    outs = [Blockwise(Tri(lower=True, k=0), sig)(x), Blockwise(Tri(lower=False, k=1), sig)(x)]
    new = rewrite([x], outs, CANON)
    assert _blockwise_ops(new) == []
    value = np.random.default_rng(1).normal(size=(5, 3, 3))
    got = evaluate(new, {x: value})
    np.testing.assert_array_equal(got[0], np.tril(value))
    np.testing.assert_array_equal(got[1], np.triu(value, 1))
