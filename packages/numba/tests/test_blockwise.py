"""Blockwise, vectorize and OpFromGraph on the Numba backend against the VM."""

from __future__ import annotations

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph import Blockwise, OpFromGraph
from kiln_graph._linalg import Cholesky, Det, MatMul, SlogDet, SolveTriangular

pytestmark = pytest.mark.filterwarnings("error::kiln_numba.ObjectModeWarning")

RAW = kiln.Mode(rewrites=None, linker="numba")
FAST = kiln.FAST_RUN.with_linker("numba")


def spd(rng: np.random.Generator, n: int, *batch: int) -> np.ndarray:
    """Return a stack of well-conditioned symmetric positive-definite matrices."""
    m = rng.normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_batched_linalg_broadcasts_batch_dimensions(dtype: str) -> None:
    rng = np.random.default_rng(0)
    # Batch dimensions (2, 3): a broadcasts along the second, b along the first.
    a = kt.tensor("a", dtype=dtype, shape=(2, 1, 4, 4))
    b = kt.tensor("b", dtype=dtype, shape=(1, 3, 4, 2))
    v = kt.tensor("v", dtype=dtype, shape=(None, 4))
    stack = kt.tensor("stack", dtype=dtype, shape=(None, None, 4))
    outs = [
        kt.matmul(a, b),
        kt.cholesky(a),
        kt.solve(a, b),
        kt.solve(a, b, assume_a="pos"),
        kt.solve_triangular(a, b, lower=True, trans=1),
        kt.inv(a),
        kt.det(a),
        *kt.slogdet(a),
        kt.solve(a[:, 0], v, b_ndim=1),  # (2, 4, 4) with (n, 4): n must be 2
        kt.matmul(stack, kt.transpose(stack, (0, 2, 1))),
    ]
    values = [
        spd(rng, 4, 2, 1).astype(dtype),
        rng.normal(size=(1, 3, 4, 2)).astype(dtype),
        rng.normal(size=(2, 4)).astype(dtype),
        rng.normal(size=(3, 5, 4)).astype(dtype),
    ]
    results = compare_with_vm(
        [a, b, v, stack], outs, values, backend=RAW, rtol=1e-4 if dtype == "float32" else None
    )
    assert [r.shape for r in results[:3]] == [(2, 3, 4, 2), (2, 1, 4, 4), (2, 3, 4, 2)]
    np.testing.assert_allclose(results[0], values[0] @ values[1], rtol=1e-5)
    assert all(r.dtype == dtype for r in results)


def test_batch_mismatch_and_empty_batches() -> None:
    a = kt.tensor("a", shape=(None, 3, 3))
    b = kt.tensor("b", shape=(None, 3, 2))
    prod = Blockwise(MatMul())(a, b)
    f = kiln.function([a, b], [prod, kt.cholesky(a)], mode=RAW)
    vm = kiln.function([a, b], [prod, kt.cholesky(a)], mode=kiln.Mode(rewrites=None, linker="vm"))
    for fn in (f, vm):
        with pytest.raises(ValueError, match="batch dimension 0"):
            fn(np.ones((2, 3, 3)), np.ones((4, 3, 2)))
    # An empty batch: the core shapes are known from the inputs.
    compare_with_vm([a, b], [prod, kt.cholesky(a)], [np.ones((0, 3, 3)), np.ones((0, 3, 2))], RAW)
    # No batch dimensions at all.
    m = kt.matrix("m")
    outs = [Blockwise(Cholesky())(m), Blockwise(Det())(m), *Blockwise(SlogDet())(m)]
    compare_with_vm([m], outs, [2.0 * np.eye(3)], RAW)


def test_vectorized_functions() -> None:
    rng = np.random.default_rng(1)
    x, y = kt.matrix("x"), kt.matrix("y")
    s = kt.vector("s")
    inner = kt.vectorize(lambda u, w: kt.sum(u * w), "(n),(n)->()")
    two = kt.vectorize(lambda u: (kt.exp(u), kt.max(u)), "(n)->(n),()")
    scalar = kt.vectorize(lambda p, q: p * q + 1.0, "(),()->()")
    # A new core dimension: its length is only known from a result.
    head = kt.vectorize(lambda u: u[:2] * 2.0, "(n)->(m)")
    quad = kt.vectorize(lambda m, u: kt.dot(u, kt.dot(m, u)), "(n,n),(n)->()")
    outs = [
        inner(x, y),
        inner(x, s),  # s broadcasts over x's rows
        *two(x),
        scalar(s, s),
        head(x),
        quad(kt.stack([x[:3, :3], y[:3, :3]]), x[:2, :3]),
    ]
    values = [rng.normal(size=(4, 5)), rng.normal(size=(4, 5)), rng.normal(size=5)]
    compare_with_vm([x, y, s], outs, values, backend=RAW)
    f = kiln.function([x, y, s], [head(x)], mode=RAW)
    with pytest.raises(ValueError, match="empty batch"):
        f(np.ones((0, 5)), *values[1:])


def test_opfromgraph_inner_graphs() -> None:
    rng = np.random.default_rng(2)
    u, w = kt.vector("u"), kt.vector("w")
    inner = OpFromGraph([u, w], [kt.exp(u) * w + kt.constant(np.arange(3.0)), u])
    p = kt.vector("p")
    nested = OpFromGraph([p], [inner(p, p)[0] * 2.0])
    x, y = kt.vector("x"), kt.vector("y")
    first, same = inner(x, y)
    outs = [first, same, inner(y, x)[0], nested(x), nested(y), kt.sum(nested(first))]
    values = [rng.normal(size=3), rng.normal(size=3)]
    compare_with_vm([x, y], outs, values, backend=RAW)
    f = kiln.function([x, y], outs, mode=RAW)
    # One function per inner graph, however many nodes apply it.
    assert f.thunk.source.count("def fn_") == 2
    # An inner output that is an inner input is a copy, as on the VM.
    result = f(*values)
    result[1][:] = 0.0
    assert not np.shares_memory(result[1], values[0])
    np.testing.assert_array_equal(f(*values)[1], values[0])


def test_gradients_through_blockwise_and_opfromgraph() -> None:
    rng = np.random.default_rng(3)
    a = kt.tensor("a", shape=(None, 3, 3))
    b = kt.tensor("b", shape=(None, 3))
    chol = Blockwise(Cholesky(lower=True))(a)
    z = Blockwise(SolveTriangular(lower=True, b_ndim=1))(chol, b)
    logdet = kt.sum(kt.slogdet(a)[1])
    u = kt.vector("u")
    ofg = OpFromGraph([u], [kt.sum(kt.exp(u) * u)])
    cost = kt.sum(z * z) + logdet + ofg(kt.flatten(b))
    outs = [cost, *kt.grad(cost, [a, b])]
    values = [spd(rng, 3, 4), rng.normal(size=(4, 3))]
    compare_with_vm([a, b], outs, values, backend=FAST, rtol=1e-8)
