"""Blockwise in C: the core op's code called per batch index (LAPACK's included)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import FallbackWarning
from kiln_graph import ShapeMismatchError, ops
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


def _c_function(inputs: list, outputs: list) -> kc.Function:
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every op in C
        return kc.function(inputs, outputs, mode=C)


def _spd(rng: np.random.Generator, batch: int, n: int, dtype: str) -> np.ndarray:
    m = rng.normal(size=(batch, n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_batched_linear_algebra_matches_the_vm(dtype: str) -> None:
    """Products, Cholesky, slogdet and solves over a batch, one input broadcast."""
    a = kt.tensor("a", dtype=dtype, shape=(None, None, None))
    b = kt.tensor("b", dtype=dtype, shape=(None, None, None))
    v = kt.tensor("v", dtype=dtype, shape=(1, None, None))
    outs = [
        ops.Blockwise(ops.MatMul())(a, b),
        kt.cholesky(a),
        kt.slogdet(a)[1],
        kt.solve(a, b),
        kt.solve(v, b),
        kt.cholesky(v),
    ]
    f = _c_function([a, b, v], outs)
    rng = np.random.default_rng(0)
    av, bv = _spd(rng, 2, 3, dtype), rng.normal(size=(2, 3, 2)).astype(dtype)
    vv = av[:1]
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(f(av, bv, vv), kc.function([a, b, v], outs)(av, bv, vv), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol)
    np.testing.assert_allclose(f(av, bv, vv)[1], np.linalg.cholesky(av), rtol=rtol)


def test_an_empty_batch_and_errors_are_the_vms() -> None:
    """An empty batch: empty outputs; unbroadcastable batches, a failed Cholesky: errors."""
    a = kt.tensor("a", shape=(None, None, None))
    b = kt.tensor("b", shape=(None, None, None))
    outs = [ops.Blockwise(ops.MatMul())(a, b), kt.cholesky(a)]
    f = _c_function([a, b], outs)
    vm = kc.function([a, b], outs)
    empty = (np.zeros((0, 3, 3)), np.zeros((0, 3, 2)))
    for got, want in zip(f(*empty), vm(*empty), strict=True):
        assert got.shape == want.shape
    with pytest.raises(ShapeMismatchError, match="Blockwise"):
        f(np.zeros((2, 3, 3)), np.zeros((3, 3, 2)))
    bad = -np.stack([np.eye(3)] * 2)
    with pytest.raises(np.linalg.LinAlgError, match=r"Blockwise.*not positive definite"):
        f(bad, np.zeros((2, 3, 2)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_vectors_solved_against_one_matrix_match_the_vm(dtype: str) -> None:
    """A stack of vectors against one broadcast matrix (one LAPACK call, views around it)."""
    a = kt.matrix("a", dtype=dtype)
    b = kt.matrix("b", dtype=dtype)
    lower = kt.cholesky(a)
    outs = [
        kt.solve_triangular(lower[None], b, lower=True, b_ndim=1),
        kt.solve_triangular(lower[None], b, lower=True, trans=1, b_ndim=1),
        kt.solve(a[None], b, b_ndim=1),
        kt.solve(a[None], b, assume_a="pos", b_ndim=1) * 2.0,
    ]
    f = _c_function([a, b], outs)
    rng = np.random.default_rng(1)
    av, bv = _spd(rng, 1, 4, dtype)[0], rng.normal(size=(5, 4)).astype(dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    got = f(av, bv)
    for g, want in zip(got, kc.function([a, b], outs)(av, bv), strict=True):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=rtol)
    np.testing.assert_allclose(got[2], np.linalg.solve(av, bv.T).T, rtol=rtol)
