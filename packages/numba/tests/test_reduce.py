"""Numba reductions (CAReduce, FusedReduce, Argmax, CumSum) against the Python VM.

Each test compiles one function with many outputs (Numba compiles are slow) and checks
values, dtypes and shapes against the unrewritten graph on the VM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph import Composite, FusedReduce, Variable
from kiln_graph import _math as m
from kiln_graph._reduce import Argmax, CAReduce, CumSum

NUMBA = kiln.Mode(rewrites=None, linker="numba")
FAST_NUMBA = kiln.FAST_RUN.with_linker("numba")
KINDS = ("sum", "prod", "max", "min", "all", "any")
AXES_3D: list[Any] = [None, 0, -1, (0, 2)]


def check(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    values: Sequence[Any],
    mode: kiln.Mode = NUMBA,
    **tol: float,
) -> list[Any]:
    """Compare with the VM and check that no node fell back to object mode."""
    f = kiln.function(list(inputs), list(outputs), mode=mode)
    assert "objmode" not in f.thunk.source, f.thunk.source
    return compare_with_vm(inputs, outputs, values, backend=mode, **tol)


def raises_like_vm(inputs: Sequence[Variable], output: Variable, values: Sequence[Any]) -> None:
    """Both the VM and Numba raise a ValueError for ``values``."""
    for mode in (kiln.Mode(rewrites=None, linker="vm"), NUMBA):
        f = kiln.function(list(inputs), output, mode=mode)
        with pytest.raises(ValueError):
            f(*values)


def _data(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.6
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 5, size=shape).astype(dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_careduce_float_every_kind(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None, None))
    # Full reduction, an innermost run, an outer axis, a mix: every loop structure.
    outs = [getattr(kt, kind)(x, axis=axis) for kind in KINDS for axis in AXES_3D]
    outs += [kt.sum(x, axis=(1, 2)), kt.max(x, axis=(0, 1)), kt.prod(x, axis=1)]
    outs += [kt.sum(x, axis=(0, 2), keepdims=True), kt.any(x, axis=-1, keepdims=True)]
    data = _data((3, 4, 5), dtype)
    check([x], outs, [data])
    # NaN propagates through max and min (and sum, prod) like NumPy; 0 is false.
    data[1, 2, 3] = np.nan
    data[0, 0, 0] = 0.0
    res = check([x], outs, [data])
    n = len(AXES_3D)
    assert np.isnan(res[2 * n]) and np.isnan(res[3 * n])  # max, min of all
    assert not res[4 * n] and res[5 * n]  # all, any of all


def test_careduce_non_contiguous_input() -> None:
    x = kt.tensor("x", dtype="float64", shape=(None, None, None))
    outs = [kt.sum(x, axis=0), kt.max(x, axis=(0, 2)), kt.all(x), kt.prod(x, axis=2)]
    data = np.ascontiguousarray(_data((5, 3, 4), "float64").transpose(1, 2, 0))
    check([x], outs, [data.transpose(2, 0, 1)])  # a transposed view


def test_careduce_max_min_nan_positions() -> None:
    x = kt.matrix("x")
    outs = [kt.max(x, axis=1), kt.min(x, axis=1), kt.max(x, axis=0), kt.min(x), kt.max(x)]
    data = np.array([[np.nan, 1.0, 2.0], [1.0, np.nan, -3.0], [1.0, 2.0, np.nan], [4.0, 5.0, 6.0]])
    res = check([x], outs, [data])
    np.testing.assert_array_equal(res[0], [np.nan, np.nan, np.nan, 6.0])
    np.testing.assert_array_equal(res[1], [np.nan, np.nan, np.nan, 4.0])
    assert np.isnan(res[3]) and np.isnan(res[4])


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_careduce_discrete_dtypes(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None))
    outs = [getattr(kt, kind)(x, axis=axis) for kind in KINDS for axis in (None, 0)]
    res = check([x], outs, [_data((4, 3), dtype, seed=1)])
    # NumPy's dtypes: sums and products of small integers and bools widen to 64 bits.
    sum_dtype = {"int32": "int64", "int64": "int64", "uint8": "uint64", "bool": "int64"}
    assert res[0].dtype == sum_dtype[dtype]
    assert res[4].dtype == dtype  # max keeps the dtype
    assert res[8].dtype == "bool"


def test_complex_sums_products_and_truth() -> None:
    z = kt.tensor("z", dtype="complex128", shape=(None, None))
    outs = [kt.sum(z, axis=0), kt.prod(z), kt.all(z, axis=1), kt.any(z), CumSum(1, True)(z)]
    data = _data((3, 4), "float64") + 1j * _data((3, 4), "float64", 1)
    data[1, 2] = 0
    check([z], outs, [data])


def test_careduce_static_shapes_and_extremes() -> None:
    x = kt.tensor("x", dtype="float64", shape=(2, 3, 4))
    i = kt.tensor("i", dtype="int64", shape=(3,))
    outs = [kt.sum(x, axis=1), kt.max(x, axis=(0, 2)), kt.prod(x), kt.max(i), kt.min(i)]
    extremes = np.array([np.iinfo("int64").min, np.iinfo("int64").max, 0])
    check([x, i], outs, [_data((2, 3, 4), "float64"), extremes])


def test_careduce_0d_and_empty() -> None:
    s = kt.scalar("s")
    e = kt.tensor("e", dtype="float64", shape=(None, None))
    outs: list[Variable] = [CAReduce(kind, ())(s) for kind in KINDS]
    outs += [
        getattr(kt, kind)(e, axis=axis)
        for kind in ("sum", "prod", "all", "any")
        for axis in (None, 0, 1)
    ]
    outs += [kt.max(e, axis=0), kt.min(e, axis=0)]  # the reduced axis is not empty
    res = check([s, e], outs, [np.array(-2.5), np.zeros((3, 0))])
    assert res[6].shape == () and res[6] == 0.0
    assert res[-1].shape == (0,)


def test_careduce_max_of_empty_axis_raises() -> None:
    e = kt.tensor("e", dtype="float64", shape=(None, None))
    raises_like_vm([e], kt.max(e, axis=0), [np.zeros((0, 3))])
    raises_like_vm([e], kt.min(e), [np.zeros((0, 0))])


# --- FusedReduce -------------------------------------------------------------------------


def _program() -> Composite:
    a, b, c = kt.scalar("a"), kt.scalar("b"), kt.scalar("c")
    return Composite.from_graph([a, b, c], [kt.exp(a) * b + c])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_reduce_broadcasting(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None))
    y = kt.tensor("y", dtype=dtype, shape=(1, None))
    z = kt.tensor("z", dtype=dtype, shape=(None, 1))
    prog = _program()
    outs = [
        FusedReduce(kind, axis, prog)(x, y, z)
        for kind in ("sum", "prod", "max", "min")
        for axis in ((0,), (1,), (0, 1))
    ]
    outs += [FusedReduce(kind, (1,), m.GT())(x, y) for kind in ("all", "any", "sum")]
    outs += [FusedReduce("sum", (0, 1), m.Mul())(x, kt.constant(np.asarray(2.0, dtype)))]
    outs += [FusedReduce("max", (0,), m.Exp())(x)]
    values = [_data((4, 3), dtype), _data((1, 3), dtype, 1) - 1, _data((4, 1), dtype, 2)]
    values[0][2, 1] = np.nan
    check([x, y, z], outs, values)


def test_fused_reduce_static_and_mismatched_shapes() -> None:
    x = kt.tensor("x", dtype="float64", shape=(2, 3))
    y = kt.tensor("y", dtype="float64", shape=(None, 3))
    out = FusedReduce("sum", (1,), m.Mul())(x, y)
    check([x, y], [out], [_data((2, 3), "float64"), _data((2, 3), "float64", 1)])
    raises_like_vm([x, y], out, [_data((2, 3), "float64"), _data((3, 3), "float64")])


def test_fused_reduce_int_and_bool_dtypes() -> None:
    i = kt.tensor("i", dtype="int32", shape=(None, None))
    b = kt.tensor("b", dtype="bool", shape=(None, None))
    outs = [
        FusedReduce("sum", (1,), m.Add())(i, i),  # int32 values, int64 sum
        FusedReduce("max", (0,), m.Mul())(i, i),
        FusedReduce("sum", (0, 1), m.AND())(b, b),  # bool values, int64 sum
        FusedReduce("any", (0,), m.NOT())(b),
    ]
    check([i, b], outs, [_data((3, 4), "int32"), _data((3, 4), "bool")])


# --- Argmax ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_argmax(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None, None))
    outs = [Argmax(axis)(x) for axis in (None, 0, 1, 2)] + [kt.argmax(x, axis=1, keepdims=True)]
    data = _data((3, 4, 5), dtype)
    data.flat[[7, 20, 33]] = data.max()  # ties: the first index wins
    if dtype.startswith("float"):
        data[1, 2, 3] = np.nan
        data[2, 0, 4] = np.nan
        data[0, 3, :] = np.nan
    check([x], outs, [data])


def test_argmax_0d_and_empty() -> None:
    s = kt.scalar("s")
    e = kt.matrix("e")
    check([s], [Argmax(None)(s)], [np.array(3.0)])
    raises_like_vm([e], Argmax(0)(e), [np.zeros((2, 0))])  # the VM's rule: any empty input
    raises_like_vm([e], Argmax(1)(e), [np.zeros((2, 0))])
    raises_like_vm([e], Argmax(None)(e), [np.zeros((0, 3))])


# --- CumSum ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cumsum(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None, None))
    outs = [CumSum(axis, rev)(x) for axis in (None, 0, 2) for rev in (False, True)]
    check([x], outs, [_data((3, 4, 5), dtype)])


def test_cumsum_discrete_dtypes() -> None:
    i = kt.tensor("i", dtype="int32", shape=(None, None))
    b = kt.tensor("b", dtype="bool", shape=(None, None))
    outs = [CumSum(None)(i), CumSum(1, True)(i), CumSum(0)(b), CumSum(None, True)(b)]
    res = check([i, b], outs, [_data((3, 4), "int32"), _data((3, 4), "bool")])
    assert [r.dtype for r in res] == ["int64"] * 4  # NumPy accumulates in 64 bits


def test_cumsum_0d_empty_and_static() -> None:
    s = kt.scalar("s")
    e = kt.matrix("e")
    v = kt.tensor("v", dtype="float64", shape=(6,))
    outs = [CumSum(None)(s), CumSum(None, True)(s), CumSum(1)(e), CumSum(None, True)(e)]
    outs += [CumSum(0)(v), CumSum(0, True)(v)]
    res = check([s, e, v], outs, [np.array(2.0), np.zeros((3, 0)), np.arange(6.0)])
    assert res[0].shape == (1,)


# --- end to end: FAST_RUN rewrites (fusion) on Numba ---------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fast_run_reductions_end_to_end(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None))
    y = kt.tensor("y", dtype=dtype, shape=(None, None))
    outs = [kt.sum(kt.exp(x) * y), kt.max(x * y + 1.0, axis=0), kt.logsumexp(x, axis=1)]
    if dtype == "float64":
        outs += [
            kt.sum(kt.log1p(kt.exp(x)) - y, axis=1),
            kt.mean(x * y, axis=0),
            kt.var(x, axis=1),
            kt.argmax(x - y, axis=0),
            kt.cumsum(x * 2.0, axis=1),
        ]
    f = kiln.function([x, y], outs, mode=FAST_NUMBA)
    assert "of=" in f.thunk.source  # the fusion phase built FusedReduce nodes
    values = [_data((5, 4), dtype), _data((5, 4), dtype, 3)]
    res = check([x, y], outs, values, mode=FAST_NUMBA)
    # Also against the unrewritten graph on the VM (compare_with_vm rewrites its reference).
    plain = kiln.function([x, y], outs, mode=kiln.Mode(rewrites=None, linker="vm"))(*values)
    tol = 1e-5 if dtype == "float32" else 1e-10
    for got, want in zip(res, plain, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
