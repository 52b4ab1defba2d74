"""Linear algebra on the Numba backend against the VM (one compiled graph per case set)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.stats import multivariate_normal

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph._linalg import Tri

# Every op here has a Numba implementation, and BLAS always gets contiguous arrays.
pytestmark = [
    pytest.mark.filterwarnings("error::kiln_numba.ObjectModeWarning"),
    pytest.mark.filterwarnings("error:.*faster on contiguous arrays"),
]

RAW = kiln.Mode(rewrites=None, linker="numba")
FAST = kiln.FAST_RUN.with_linker("numba")
VM = kiln.Mode(rewrites=None, linker="vm")


def spd(rng: np.random.Generator, n: int, *batch: int) -> np.ndarray:
    """Return a well-conditioned symmetric positive-definite matrix (or a stack of them)."""
    m = rng.normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_core_ops_match_vm(dtype: str) -> None:
    rng = np.random.default_rng(0)
    a, b = kt.matrix("a", dtype=dtype), kt.matrix("b", dtype=dtype)
    v = kt.vector("v", dtype=dtype)
    outs = [
        kt.matmul(a, b),
        kt.dot(a, v),
        kt.dot(v, a),
        kt.dot(v, v),
        kt.cholesky(a),
        kt.cholesky(a, lower=False),
        kt.solve(a, b),
        kt.solve(a, v),
        kt.solve(a, b, assume_a="sym", lower=True),
        kt.solve(a, v, assume_a="sym"),
        kt.solve(a, b, assume_a="pos"),
        kt.solve(a, v, assume_a="pos", lower=True),
        kt.solve_triangular(a, v, lower=True),
        kt.solve_triangular(a, b, lower=False),
        kt.solve_triangular(a, b, lower=True, trans=1),
        kt.solve_triangular(a, v, lower=False, trans="T", unit_diagonal=True),
        kt.solve_triangular(a, b, lower=True, unit_diagonal=True),
        kt.inv(a),
        kt.det(a),
        *kt.slogdet(a),
        Tri(True, 0)(a),
        Tri(False, 1)(a),
        Tri(True, -2)(b),
    ]
    # Not symmetric: the solves that read one triangle must read the right one.
    s = spd(rng, 5) + np.triu(rng.normal(size=(5, 5)), 1)
    values = [
        s.astype(dtype),
        rng.normal(size=(5, 3)).astype(dtype),
        rng.normal(size=5).astype(dtype),
    ]
    results = compare_with_vm(
        [a, b, v], outs, values, backend=RAW, rtol=1e-4 if dtype == "float32" else None
    )
    assert all(r.dtype == dtype for r in results)
    # And an independent reference for a few.
    lower = np.tril(values[0]) + np.tril(values[0], -1).T
    np.testing.assert_allclose(results[4], np.linalg.cholesky(lower), rtol=1e-4)
    np.testing.assert_allclose(
        results[12], sla.solve_triangular(values[0], values[2], lower=True), rtol=1e-4
    )


def test_matmul_dtypes_and_layouts() -> None:
    rng = np.random.default_rng(1)
    f32, f64 = kt.matrix("f32", dtype="float32"), kt.matrix("f64")
    i64, i8 = kt.matrix("i64", dtype="int64"), kt.matrix("i8", dtype="int8")
    flag = kt.matrix("flag", dtype="bool")
    outs = [
        kt.matmul(f32, f64),  # upcast to float64
        kt.matmul(i64, kt.transpose(i64)),  # integer: the explicit loop
        kt.matmul(i8, kt.transpose(i8)),  # wraps around like NumPy
        kt.matmul(flag, kt.transpose(flag)),
        kt.matmul(i64, f64),
        kt.matmul(kt.transpose(f64), f64),  # a Fortran-ordered operand: no copy
        kt.matmul(f64[:, ::2], kt.transpose(f64[:, ::2])),  # strided: copied to C order
        kt.cholesky(i64[:2, :2] * 0 + kt.eye(2, dtype="int64")),  # integer input: float64
    ]
    values = [
        rng.normal(size=(3, 4)).astype("float32"),
        rng.normal(size=(4, 4)),
        rng.integers(-5, 5, size=(4, 4)),
        rng.integers(-128, 127, size=(4, 6)).astype("int8"),
        rng.random((3, 5)) < 0.5,
    ]
    compare_with_vm([f32, f64, i64, i8, flag], outs, values, backend=RAW)


def test_regression_product_goes_through_blas() -> None:
    """``X @ beta`` (the logistic-regression benchmark) is one BLAS call, no copy."""
    rng = np.random.default_rng(2)
    x, beta = kt.matrix("X"), kt.vector("beta")
    y = kt.vector("y")
    eta = kt.dot(x, beta)
    logp = kt.sum(y * eta - kt.softplus(eta))
    outs = [logp, *kt.grad(logp, [beta])]
    values = [rng.normal(size=(10000, 20)), rng.normal(size=20), (rng.random(10000) < 0.5) * 1.0]
    compare_with_vm([x, beta, y], outs, values, backend=FAST, rtol=1e-9)
    f = kiln.function([x, beta, y], outs, mode=FAST)
    assert f.thunk.source.count("dot_kernel(") == 2  # X @ beta and X.T @ residual


def test_decomposition_errors_raise_like_the_vm() -> None:
    """One graph, each op on its own input: a bad value for one input raises there."""
    names = ["chol", "pos", "gen", "inv", "tri"]
    mats = [kt.matrix(n) for n in names]
    b = kt.vector("b")
    outs = [
        kt.cholesky(mats[0]),
        kt.solve(mats[1], b, assume_a="pos"),
        kt.solve(mats[2], b),
        kt.inv(mats[3]),
        kt.solve_triangular(mats[4], b, lower=True),
    ]
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])
    bad = [not_pd, not_pd, np.ones((2, 2)), np.ones((2, 2)), np.zeros((2, 2))]
    good = [np.eye(2)] * 5
    functions = [kiln.function([*mats, b], outs, mode=m) for m in (RAW, VM)]
    for k in range(5):
        values = [*good[:k], bad[k], *good[k + 1 :], np.ones(2)]
        for f in functions:
            with pytest.raises(np.linalg.LinAlgError):
                f(*values)
    # A singular matrix has determinant 0 (no error), as in NumPy.
    f = kiln.function([mats[3]], [kt.det(mats[3]), *kt.slogdet(mats[3])], mode=RAW)
    assert [float(r) for r in f(np.ones((2, 2)))] == [0.0, 0.0, -np.inf]


def test_empty_and_non_finite_matrices() -> None:
    a, b = kt.matrix("a"), kt.vector("b")
    outs = [
        kt.cholesky(a),
        kt.inv(a),
        kt.det(a),
        *kt.slogdet(a),
        kt.solve(a, b),
        kt.solve(a, b, assume_a="pos"),
        kt.solve_triangular(a, b),
        kt.matmul(a, a),
    ]
    compare_with_vm([a, b], outs, [np.zeros((0, 0)), np.zeros(0)], backend=RAW)
    # NaN in, NaN out: no "Array must not contain infs or NaNs" error (the VM's NaNs
    # depend on where LAPACK meets the NaN; the Numba kernels give NaN everywhere).
    f = kiln.function([a, b], outs, mode=RAW)
    bad = np.eye(3)
    bad[1, 1] = np.nan
    chol, inv, det, _, logdet, gen, pos, _, _ = f(bad, np.ones(3))
    for r in (chol, inv, det, logdet, gen, pos):
        assert np.isnan(r).all()


def test_gradients_of_linalg_graphs() -> None:
    """Gradients (Cholesky, triangular solves, inverses) compiled with FAST_RUN vs the VM."""
    rng = np.random.default_rng(3)
    n = 4
    sigma, mu, x = kt.matrix("sigma"), kt.vector("mu"), kt.vector("x")
    # MvNormal logp through the Cholesky factor.
    chol = kt.cholesky(sigma)
    z = kt.solve_triangular(chol, x - mu, lower=True)
    log_diag = kt.log(kt.sum(chol * kt.eye(n), axis=1))
    logp = -0.5 * kt.sum(z * z) - kt.sum(log_diag) - 0.5 * n * np.log(2 * np.pi)
    upper = kt.cholesky(sigma, lower=False)
    other = (
        kt.slogdet(sigma)[1]
        + kt.sum(kt.inv(sigma) * sigma)
        + kt.det(sigma)
        + kt.sum(kt.solve(sigma, mu, assume_a="pos"))
        + kt.sum(kt.solve(sigma, kt.outer(mu, x)))
        + kt.sum(upper * upper)
        + kt.sum(kt.solve_triangular(upper, mu, trans=1))
    )
    outs = [logp, *kt.grad(logp, [sigma, mu]), other, *kt.grad(other, [sigma, mu])]
    s = spd(rng, n)
    values = [s, rng.normal(size=n), rng.normal(size=n)]
    (lp, *_) = compare_with_vm([sigma, mu, x], outs, values, backend=FAST, rtol=1e-8)
    np.testing.assert_allclose(lp, multivariate_normal(values[1], s).logpdf(values[2]))


@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_large_triangular_solves_by_blocks_match_scipy(lower, trans, unit_diagonal) -> None:
    """Order >= 128 with several right-hand sides: the blocked path (BLAS updates)."""
    rng = np.random.default_rng(4)
    n = 200  # not a multiple of the block: a last, shorter block
    a = rng.normal(size=(n, n)) / n + 2.0 * np.eye(n)
    b = rng.normal(size=(n, 9))
    x, y = kt.matrix("a"), kt.matrix("b")
    out = kt.solve_triangular(x, y, lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    f = kiln.function([x, y], out, mode=kiln.Mode(linker="numba"))
    want = sla.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    np.testing.assert_allclose(f(a, b), want, rtol=1e-12, atol=1e-14)
    singular = a.copy()
    singular[150, 150] = 0.0
    if not unit_diagonal:
        with pytest.raises(np.linalg.LinAlgError, match="singular"):
            f(singular, b)


def test_kernels_get_c_contiguous_matrices_only() -> None:
    """A transpose or a strided slice is made contiguous before a kernel: one compile each."""
    from numba import types

    from kiln_numba import _linalg_kernels as kernels

    rng = np.random.default_rng(5)
    m, b = kt.matrix("m"), kt.matrix("b")
    s = kt.matrix("s", shape=(4, 4))  # a static order: the kernel without the blocked path
    a = m.T[:, ::2]  # Fortran-ordered and strided: (4, 3)
    sq = m.T @ m + kt.eye(4)
    outs = [
        kt.cholesky(a @ a.T + 4.0 * kt.eye(4)),
        kt.solve(sq.T, b.T),  # a transpose is Fortran-ordered
        kt.solve_triangular(sq.T, b.T, lower=True),
        kt.inv(sq.T),
        kt.det(sq.T),
        kt.slogdet(sq.T)[1],
        kt.eigh(sq.T)[0],
        Tri(lower=True, k=0)(m.T),
        kt.solve_triangular((s @ s.T + kt.eye(4)).T, b.T, lower=False, trans=1),
    ]
    value_m, value_b = rng.normal(size=(6, 4)), rng.normal(size=(2, 4))
    values = [value_m, value_b, rng.normal(size=(4, 4))]
    compare_with_vm([m, b, s], outs, values, backend=RAW, rtol=1e-10)
    names = ["cholesky", "solve", "solve_triangular", "solve_triangular_small", "inv", "det"]
    for name in [*names, "slogdet", "eigh", "tri"]:
        kernel = getattr(kernels, f"{name}_kernel")
        arrays = [t for sig in kernel.signatures for t in sig if isinstance(t, types.Array)]
        assert arrays and all(t.layout == "C" for t in arrays), (name, kernel.signatures)
