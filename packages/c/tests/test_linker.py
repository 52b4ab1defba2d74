"""The C linker: NumPy's dtype semantics, errors as the VM raises them, Python fallbacks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg

import kiln_compile as kc
from kiln_c import CompilerNotFoundError, FallbackWarning, _compiler, has_c_implementation
from kiln_graph import Apply, KilnIndexError, Op, ShapeMismatchError, ops
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
VM = kc.Mode(linker="vm")


def _both(inputs: list, outputs: list, *values: np.ndarray) -> tuple[list, list]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        c = kc.function(inputs, outputs, mode=C)(*values)
    vm = kc.function(inputs, outputs, mode=VM)(*values)
    return c, vm


def _same(c: list, vm: list) -> None:
    for a, b in zip(c, vm, strict=True):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint64"])
def test_integer_arithmetic_is_numpys(dtype: str) -> None:
    """Wrapping, floor division and modulo (by zero and of negatives) as NumPy computes them."""
    x, y = kt.vector("x", dtype=dtype), kt.vector("y", dtype=dtype)
    info = np.iinfo(dtype)
    xv = np.array([info.max, info.min, 7, 0, 5, 3], dtype=dtype)
    if info.min < 0:
        xv[2] = -7
    yv = np.array([2, 3, 2, 0, 0, 1], dtype=dtype)
    outputs = [x + y, x * y, x // y, x % y, kt.maximum(x, y), x > y, abs(x), kt.sign(x)]
    _same(*_both([x, y], outputs, xv, yv))


def test_bools_and_casts_are_numpys() -> None:
    """Logical ops on bools; float to narrow unsigned wraps through int64; bool sums."""
    a, b = kt.vector("a", dtype="bool"), kt.vector("b", dtype="bool")
    f = kt.vector("f")
    av, bv = np.array([True, False, True, False]), np.array([True, True, False, False])
    fv = np.array([-3.0, 2.5, 300.0, 0.0])
    outputs = [
        a & b,
        a | b,
        ~a,
        a + b,
        kt.sum(a),
        kt.any(a),
        kt.all(b),
        kt.cast(f, "uint8"),
        kt.cast(f, "bool"),
        kt.cast(a, "float64") * f,
    ]
    _same(*_both([a, b, f], outputs, av, bv, fv))


def test_float_special_values_are_numpys() -> None:
    """NaN propagation of maximum and sign, floor division and modulo of floats by zero."""
    x, y = kt.vector("x"), kt.vector("y")
    xv = np.array([np.nan, 1.0, -5.5, np.inf, 7.0, -0.0])
    yv = np.array([1.0, np.nan, 2.0, 3.0, 0.0, -2.0])
    outputs = [kt.maximum(x, y), kt.minimum(x, y), kt.sign(x), x // y, x % y, kt.isnan(x)]
    c, vm = _both([x, y], outputs, xv, yv)
    for a, b in zip(c, vm, strict=True):
        np.testing.assert_array_equal(a, b)


def test_broadcasting_and_strided_inputs() -> None:
    """Inputs that broadcast, and views that are not contiguous (reversed, transposed)."""
    x = kt.tensor("x", shape=(None, 1, None))
    y = kt.matrix("y")
    xv = np.arange(24.0).reshape(2, 1, 12)[:, :, ::-2]
    yv = np.arange(18.0).reshape(6, 3).T[::1, :]
    outputs = [kt.exp(x / 10) * y, kt.sum(x * y, axis=(0, 2)), kt.max(y.T, axis=0)]
    c, vm = _both([x, y], outputs, xv, yv)
    for a, b in zip(c, vm, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_outputs_never_alias_inputs() -> None:
    """An output that is an input (or a view of one) is a copy the caller owns."""
    x = kt.vector("x")
    f = kc.function([x], [x, x[::-1], kt.exp(x)], mode=C)
    xv = np.arange(3.0)
    same, rev, e = f(xv)
    assert not np.shares_memory(same, xv) and not np.shares_memory(rev, xv)
    same[0] = 5.0
    assert xv[0] == 0.0
    np.testing.assert_array_equal(rev, [2.0, 1.0, 0.0])
    e[:] = 0  # outputs are writeable arrays that own their memory (through their base)
    np.testing.assert_allclose(f(xv)[2], np.exp(xv), rtol=1e-15)  # kiln_exp_v: 1 ulp


def test_an_index_out_of_bounds_is_the_vms_error() -> None:
    """KilnIndexError naming the op and the backend, raised from the generated code."""
    x = kt.vector("x")
    i = kt.scalar("i", dtype="int64")
    f = kc.function([x, i], [x[i] * 2.0], mode=C)
    assert f(np.arange(3.0), np.int64(-1))[0] == 4.0
    with pytest.raises(KilnIndexError, match="out of bounds for axis 0 with size 3") as info:
        f(np.arange(3.0), np.int64(3))
    assert any("backend 'c'" in note for note in info.value.__notes__)
    with pytest.raises(KilnIndexError):
        kc.function([x, i], [x[i] * 2.0], mode=VM)(np.arange(3.0), np.int64(3))


def test_a_gather_out_of_bounds_is_an_index_error() -> None:
    """An integer-vector index out of bounds: KilnIndexError, as on the VM."""
    x = kt.vector("x")
    idx = kt.vector("idx", dtype="int64")
    f = kc.function([x, idx], [x[idx]], mode=C)
    np.testing.assert_array_equal(f(np.arange(4.0), np.array([3, -4]))[0], [3.0, 0.0])
    with pytest.raises(KilnIndexError, match="index 4 is out of bounds"):
        f(np.arange(4.0), np.array([0, 4]))


def test_shapes_that_do_not_broadcast_are_a_shape_mismatch() -> None:
    """ShapeMismatchError naming the op, as on the VM."""
    x, y = kt.vector("x"), kt.vector("y")
    f = kc.function([x, y], [kt.exp(x) + y], mode=C)
    with pytest.raises(ShapeMismatchError, match="length 3 in dimension 0"):
        f(np.ones(2), np.ones(3))


class _Halve(Op):
    """An Op with no C code (defined here): its node runs through ``perform``."""

    def make_node(self, x: object) -> Apply:
        x = kt.as_tensor(x)
        return Apply.create(self, [x], [x.type])

    def perform(self, node: Apply, inputs: list, outputs: list) -> None:
        (x,) = inputs
        if np.any(x < 0):
            raise IndexError(f"_Halve: a negative value in {x}")
        outputs[0] = x / 2


def test_an_op_without_c_code_runs_through_python_with_one_warning() -> None:
    """An Op with no C code: one warning names it; values and errors are the VM's."""
    assert not has_c_implementation(_Halve)
    x = kt.vector("x")
    with pytest.warns(FallbackWarning, match="_Halve") as caught:
        f = kc.function([x], [kt.sum(_Halve()(x) * 2.0)], mode=C)
    assert len([w for w in caught if issubclass(w.category, FallbackWarning)]) == 1
    np.testing.assert_allclose(f(np.arange(4.0))[0], 6.0, rtol=1e-14)
    with pytest.raises(IndexError, match="negative") as info:
        f(np.array([1.0, -1.0]))
    assert any("backend 'c'" in note for note in info.value.__notes__)


def test_integer_array_indexing_is_numpys() -> None:
    """AdvancedSubtensor / AdvancedIncSubtensor with integer arrays, in C, as the VM."""
    x = kt.tensor("x", shape=(None, None, None))
    i, j = kt.vector("i", dtype="int64"), kt.matrix("j", dtype="int32")
    outs = [
        x[i, i],
        x[j, i],
        x[-1, i, j],
        kt.inc_subtensor(x[j, i], 1.5),
        kt.set_subtensor(x[i, i], x[0, 0]),
        kt.grad(kt.sum(x[j, i] ** 2), x),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        f = kc.function([x, i, j], outs, mode=C)
    xv = np.random.default_rng(0).normal(size=(3, 4, 5))
    iv, jv = np.array([0, 2, -1, 2]), np.array([[1, 0, 1, 1], [2, 2, 0, 1]], dtype="int32")
    c = f(xv, iv, jv)
    for got, want in zip(c, kc.function([x, i, j], outs, mode=VM)(xv, iv, jv), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_array_equal(c[1], xv[jv, iv])
    with pytest.raises(KilnIndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        f(xv, np.array([0, 3]), jv[:, :2])


def test_a_matrix_that_is_not_positive_definite_raises_linalgerror_naming_the_op() -> None:
    """Cholesky in C (LAPACK's potrf): NumPy's LinAlgError, as the VM's SciPy raises."""
    assert has_c_implementation(ops.Cholesky)
    a = kt.matrix("a")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        f = kc.function([a], [kt.sum(kt.cholesky(a) * 2.0)], mode=C)
    spd = np.array([[4.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(f(spd)[0], 2 * np.sum(np.linalg.cholesky(spd)), rtol=1e-14)
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(scipy.linalg.LinAlgError):
        kc.function([a], [kt.cholesky(a)], mode=VM)(bad)
    with pytest.raises(scipy.linalg.LinAlgError, match=r"Cholesky.*not positive definite") as info:
        f(bad)
    assert any("backend 'c'" in note and "Cholesky" in note for note in info.value.__notes__)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_singular_matrices_raise_as_the_vm(dtype: str) -> None:
    """A singular matrix: LinAlgError from solve, solve_triangular and inv; det and slogdet 0."""
    a, b = kt.matrix("a", dtype=dtype), kt.vector("b", dtype=dtype)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], dtype=dtype)
    rhs = np.ones(2, dtype=dtype)
    for out in (kt.solve(a, b), kt.solve_triangular(a * 0.0, b), kt.inv(a)):
        for mode in (VM, C):
            with pytest.raises(scipy.linalg.LinAlgError):
                kc.function([a, b], [out], mode=mode)(singular, rhs)
    dets = [kt.det(a), *kt.slogdet(a)]
    c, vm = _both([a], dets, singular)
    for x, y in zip(c, vm, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_every_core_op_family_has_c_code() -> None:
    """The ops of a model's log-density and gradient have C code (no Python per call)."""
    for op in (
        ops.Elemwise,
        ops.DimShuffle,
        ops.CAReduce,
        ops.FusedReduce,
        ops.Subtensor,
        ops.IncSubtensor,
        ops.AdvancedSubtensor1,
        ops.AdvancedIncSubtensor1,
        ops.Reshape,
        ops.Alloc,
        ops.Shape,
        ops.ShapeI,
        ops.MakeVector,
        ops.Join,
        ops.MatMul,
    ):
        assert has_c_implementation(op), op


def test_a_missing_compiler_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """No compiler on PATH (and CC unset or wrong): a clear error, not a crash."""
    monkeypatch.setenv("CC", "/nonexistent/kiln-cc")
    _compiler.find_compiler.cache_clear()
    try:
        with pytest.raises(CompilerNotFoundError, match="install gcc|Xcode|install a C compiler"):
            _compiler.find_compiler()
    finally:
        monkeypatch.undo()
        _compiler.find_compiler.cache_clear()


def test_flags_keep_libraries_portable() -> None:
    """No -march=native unless asked; no fused multiply-adds (the same bits at every -O)."""
    flags = _compiler.flags()
    assert "-ffp-contract=off" in flags and "-std=c99" in flags
    assert not any(f.startswith("-march") for f in flags)


def test_matmul_of_views_and_integers() -> None:
    """BLAS on contiguous and transposed floats; loops for integers and strided views."""
    a, b = kt.matrix("a"), kt.matrix("b")
    ai, bi = kt.matrix("ai", dtype="int32"), kt.matrix("bi", dtype="int32")
    rng = np.random.default_rng(0)
    av, bv = rng.normal(size=(5, 4)), rng.normal(size=(4, 3))
    outputs = [a @ b, a.T.T @ b, b.T @ a.T, ai @ bi]
    iv = rng.integers(-5, 5, size=(5, 4)).astype("int32")
    jv = rng.integers(-5, 5, size=(4, 3)).astype("int32")
    c, vm = _both([a, b, ai, bi], outputs, av, bv[:, ::1], iv, jv)
    for x, y in zip(c, vm, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=1e-13)
    strided = kc.function([a, b], [a @ b], mode=C)(av[::-1, ::2], bv[::2, :])[0]
    np.testing.assert_allclose(strided, av[::-1, ::2] @ bv[::2, :], rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matmul_of_a_matrix_and_a_column(dtype: str) -> None:
    """gemv: C- and F-ordered matrices times columns of any stride (negative: a copy)."""
    a, b = kt.matrix("a", dtype=dtype), kt.matrix("b", dtype=dtype)
    f = kc.function([a, b], [a @ b], mode=C)
    rng = np.random.default_rng(1)
    big = rng.normal(size=(12, 9)).astype(dtype)
    col = rng.normal(size=(18, 4)).astype(dtype)
    rtol = 1e-13 if dtype == "float64" else 1e-5
    cases = [
        (big[:, :6], col[:6, :1]),  # a strided row-major matrix (a copy), a strided column
        (big[:7, :6].copy(), col[:6, 2:3]),  # contiguous times a column of stride 4 items
        (big[:6, :7].T, col[::3, 1:2]),  # Fortran order times a column of stride 12 items
        (big[:7, :6].copy(), col[5::-1, :1]),  # a negative stride: gemm on a copy
        (big[:5, :1].copy(), col[:1, :1]),  # k == 1
        (big[:1, :6].copy(), np.ascontiguousarray(col[:6, :1])),  # m == 1
    ]
    for av, bv in cases:
        (got,) = f(av, bv)
        assert got.dtype == dtype and got.shape == (av.shape[0], 1)
        np.testing.assert_allclose(got, av.astype("float64") @ bv.astype("float64"), rtol=rtol)
