"""Elementwise ops on Numba: edge values of each dtype, broadcasting, errors, in-place.

Every scalar op on edge values of each dtype, broadcasting along static length-1
dimensions and 0-d inputs, shape errors at run time, and in-place Elemwise leaving the
caller's arrays alone.

Random float64/float32 values of every scalar op are in the shared conformance table
(``test_conformance.py``); here each op meets the values where implementations differ:
zeros of both signs, infinities, NaN, negative numbers, integer overflow of uint8, bools.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile.testing import CaseGraph, ConformanceCase, compare_with_vm, run_conformance
from kiln_graph import Elemwise, KilnTypeError, ScalarOp, ShapeMismatchError
from kiln_graph import _math as m
from kiln_graph._elemwise import Cast

NUMBA_RAW = kiln.Mode(rewrites=None, linker="numba")
NUMBA_FAST = kiln.FAST_RUN.with_linker("numba")

EDGES: dict[str, list[Any]] = {
    # (-1e300 is -1e30 in float32)
    "f": [
        -np.inf,
        -1e300,
        -3.5,
        -2.5,
        -1.0,
        -0.5,
        -0.0,
        0.0,
        0.5,
        1.0,
        1.5,
        2.0,
        2.5,
        40.0,
        np.inf,
        np.nan,
    ],
    "i": [-7, -3, -2, -1, 0, 1, 2, 3, 5, 100],
    "u": [0, 1, 2, 3, 5, 100, 255],
    "b": [False, True],
}
#: Small values for polygamma's order: SciPy picks its loop (and float32 overflow) by
#: dtype in ways a compiled kernel does not mirror for large orders of integer inputs.
ORDERS = {
    "f": [0.0, 1.0, 2.0, 3.0, -1.0, 1.5],
    "i": [0, 1, 2, 3],
    "u": [0, 1, 2, 3],
    "b": [False, True],
}

SCALAR_OPS = [c for c in m.__all_scalar_ops__ if c not in (Cast, ScalarOp)]
#: Ops NumPy does not define on a dtype kind (kiln refuses to build them) or where its
#: result is undefined (integer powers with negative exponents raise in NumPy).
SKIP = {"i": {m.Pow}, "u": {m.Pow}}


def _edges(dtype: str) -> np.ndarray:
    kind = np.dtype(dtype).kind
    edges = [-1e30 if v == -1e300 and dtype == "float32" else v for v in EDGES[kind]]
    return np.array(edges, dtype=dtype)


def _edge_case(op_class: type, dtype: str) -> ConformanceCase | None:
    """Return the case of ``op_class`` on all pairs (triples) of ``dtype``'s edge values."""
    kind = np.dtype(dtype).kind
    nin = op_class.nin if op_class.nin > 0 else 2
    if op_class in SKIP.get(kind, ()):
        return None

    def dtype_of(i: int) -> str:
        return "bool" if op_class is m.Switch and i == 0 else dtype

    def values_of(i: int) -> np.ndarray:
        if op_class is m.Polygamma and i == 0:
            return np.array(ORDERS[kind], dtype=dtype)
        return _edges(dtype_of(i))

    # Input i varies along dimension i (static length 1 elsewhere): every combination
    # of edge values, through broadcasting.
    statics = [tuple(None if d == i else 1 for d in range(nin)) for i in range(nin)]
    try:
        probe = Elemwise(op_class())(
            *[kt.tensor(dtype=dtype_of(i), shape=statics[i]) for i in range(nin)]
        )
    except Exception:  # noqa: BLE001  # not defined on this dtype in NumPy
        return None
    if probe.dtype == "float16":  # Numba has no float16
        return None

    def build(rng: np.random.Generator) -> CaseGraph:
        inputs = [kt.tensor(f"x{i}", dtype=dtype_of(i), shape=statics[i]) for i in range(nin)]
        values = []
        for i in range(nin):
            v = values_of(i)
            values.append(v.reshape([len(v) if d == i else 1 for d in range(nin)]))
        return CaseGraph(inputs, [Elemwise(op_class())(*inputs)], values)

    return ConformanceCase(f"{op_class.__name__}[{dtype}]", build, dtype, grad=False)


def _cast_cases(dtype: str) -> list[ConformanceCase]:
    kind = np.dtype(dtype).kind
    targets = ["float64", "float32", "int64", "int8", "uint8", "bool"]

    def build(rng: np.random.Generator) -> CaseGraph:
        x = kt.vector("x", dtype=dtype)
        values = _edges(dtype)
        if kind == "f":  # float -> int of NaN, inf or out of range is undefined
            values = np.array([-3.5, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.5, 40.0], dtype)
        return CaseGraph([x], [kt.cast(x, t) for t in targets if t != dtype], [values])

    return [ConformanceCase(f"cast[{dtype}]", build, dtype, grad=False)]


def _cases(dtype: str) -> list[ConformanceCase]:
    cases = [_edge_case(c, dtype) for c in SCALAR_OPS]
    return [c for c in cases if c is not None] + _cast_cases(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint8", "bool"])
def test_scalar_ops_on_edge_values(dtype):
    """Every scalar op valid on ``dtype`` gives the VM's dtype and values on edge inputs."""
    cases = _cases(dtype)
    assert len(cases) >= {"float64": 55, "float32": 55, "int64": 50, "uint8": 35, "bool": 25}[dtype]
    run_conformance("numba", cases, gradients=False).check()


def test_int32_and_int8_arithmetic():
    """Division, remainder, powers, abs, sign and comparisons in the narrow integer types."""
    ops = [m.FloorDivide, m.Mod, m.TrueDivide, m.Maximum, m.Abs, m.Sign, m.Neg, m.LT, m.Reciprocal]
    cases = [_edge_case(c, dt) for dt in ("int32", "int8") for c in ops]
    run_conformance("numba", [c for c in cases if c is not None], gradients=False).check()


def test_broadcasting_static_ones_and_scalars():
    """Inputs broadcast along their static length-1 dimensions and 0-d inputs, as NumPy."""
    a = kt.tensor("a", shape=(2, 1, 3))
    b = kt.tensor("b", shape=(None, 1))
    s = kt.scalar("s")
    i = kt.tensor("i", dtype="int32", shape=(1, 1, 1))
    outs = [a * b + s, kt.switch(a > s, b, i), kt.maximum(s, s * 2), a - a.dimshuffle(0, 2, 1)]
    rng = np.random.default_rng(0)
    values = [
        rng.normal(size=(2, 1, 3)),
        rng.normal(size=(4, 1)),
        np.array(0.25),
        np.array([[[7]]], np.int32),
    ]
    got = compare_with_vm([a, b, s, i], outs, values, backend=NUMBA_RAW)
    av, bv, sv, iv = values
    np.testing.assert_allclose(got[0], av * bv + sv, rtol=1e-15)
    assert got[0].shape == (2, 4, 3)
    np.testing.assert_array_equal(got[1], np.where(av > sv, bv, iv))
    assert got[2].shape == () and got[3].shape == (2, 3, 3)


@pytest.mark.parametrize("mode", [NUMBA_RAW, NUMBA_FAST], ids=["raw", "fused"])
def test_shape_mismatch_at_run_time_is_a_clear_error(mode):
    """Lengths that differ at run time raise the VM's ShapeMismatchError, naming the op."""
    x, y = kt.vector("x"), kt.vector("y")
    f = kiln.function([x, y], kt.exp(x) * y + 1, mode=mode)
    np.testing.assert_allclose(f(np.zeros(3), np.ones(3)), np.full(3, 2.0))
    with pytest.raises(ShapeMismatchError, match=r"input 1 has a different length in dimension 0"):
        f(np.zeros(3), np.ones(4))
    with pytest.raises(ShapeMismatchError):  # the same error as the VM's
        kiln.function([x, y], kt.exp(x) * y + 1, mode=kiln.Mode(None, "vm"))(
            np.zeros(3), np.ones(4)
        )
    np.testing.assert_allclose(f(np.zeros(2), np.ones(2)), np.full(2, 2.0))  # still usable


def test_inplace_elemwise_leaves_inputs_unchanged():
    """In-place Elemwise (FAST_RUN) writes into intermediates only, never into inputs."""
    x = kt.vector("x")
    a = kt.matrix("a")
    c = kt.constant(np.array([1.0, 2.0, 3.0]))
    outs = [
        kt.exp(kt.dot(a, x)) + 1,  # in place into the product
        (kt.sum(a, axis=0) * x + 1) * 2,  # in place into the reduction
        kt.tanh(a.T * 2) - x,  # a view of an input: must not be written
        kt.exp(c + x) * kt.log1p(kt.reshape(a, (-1,))[:3] ** 2),
        kt.softmax(x * 3) + x,
    ]
    rng = np.random.default_rng(1)
    xv, av = rng.normal(size=3), rng.normal(size=(3, 3))
    x0, a0 = xv.copy(), av.copy()
    f = kiln.function([x, a], outs, mode=NUMBA_FAST)
    assert "inplace" in f.thunk.source
    constants = [np.array(k, copy=True) for k in f.thunk.constants]
    ref = kiln.function([x, a], outs, mode=kiln.Mode(None, "vm"))(xv, av)
    for _ in range(2):  # a second call must not see buffers overwritten by the first
        got = f(xv, av)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-13)
        np.testing.assert_array_equal(xv, x0)
        np.testing.assert_array_equal(av, a0)
    for k, k0 in zip(f.thunk.constants, constants, strict=True):  # nor into constants
        np.testing.assert_array_equal(k, k0)


def test_float32_stays_float32():
    """float32 graphs compute in float32 with float32 literals (no upcast to float64)."""
    x = kt.vector("x", dtype="float32")
    outs = [kt.exp(x) * 2.5, kt.sigmoid(x) + 1, kt.sum(x * x) / 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compare_with_vm([x], outs, [np.linspace(-2, 2, 5).astype("float32")], NUMBA_FAST)
    assert all(g.dtype == np.float32 for g in got)


def test_float16_is_a_clear_error():
    """Numba has no float16: compiling a graph that holds one says so and what to do."""
    x = kt.vector("x", dtype="int8")
    with pytest.raises(KilnTypeError, match=r"does not support dtype float16.*output of exp.*cast"):
        kiln.function([x], kt.exp(x), mode=NUMBA_RAW)
    f = kiln.function([x], kt.exp(kt.cast(x, "float32")), mode=NUMBA_RAW)
    np.testing.assert_allclose(f(np.arange(3, dtype="int8")), np.exp(np.arange(3.0)), rtol=1e-6)


DIMSHUFFLES = [
    ((3,), ("x", 0)),
    ((3,), (0, "x")),
    ((1,), ()),
    ((1, 1), ()),
    ((), ("x", "x")),
    ((1,), ("x", "x")),
    ((2, 1, 3), (0, 2)),
    ((2, 1, 3), (0, "x", 2)),
    ((2, 1, 3), (2, 0)),
    ((2, 3), (1, 0)),
    ((2, 3, 4), (2, 1, 0)),
    ((2, 3, 4), (1, "x", 2, 0)),
    ((1, 3, 4), (2, "x", 1)),
]


@pytest.mark.parametrize(("shape", "order"), DIMSHUFFLES, ids=str)
def test_dimshuffle_views(shape, order):
    """DimShuffle: drops, new axes and transpositions, of contiguous and strided inputs."""
    x = kt.tensor("x", shape=shape)
    y = x.dimshuffle(*order)
    rng = np.random.default_rng(1)
    value = rng.normal(size=shape)
    strided = np.asarray(rng.normal(size=tuple(2 * n for n in shape)))[
        tuple(slice(None, None, 2) for _ in shape)
    ]
    for v in (value, strided):
        # The shuffled value itself, and used by an elementwise op after it.
        got = compare_with_vm([x], [y, y * 2.0 + 1.0], [v], backend=NUMBA_RAW)
        expected = np.transpose(
            v, [o for o in order if o != "x"] + [d for d in range(len(shape)) if d not in order]
        ).reshape(tuple(1 if o == "x" else shape[o] for o in order))
        np.testing.assert_array_equal(got[0], expected)
        assert got[0].shape == expected.shape


def test_dimshuffle_of_a_constant_is_read_only_safe():
    """A transposed constant (a read-only array) feeds a product and an in-place op."""
    c = np.arange(6.0).reshape(2, 3)
    x = kt.matrix("x", shape=(3, 2))
    out = x + kt.constant(c).dimshuffle(1, 0)
    f = kiln.function([x], [out, kt.exp(out)], mode=NUMBA_FAST)
    got = f(np.ones((3, 2)))
    np.testing.assert_array_equal(got[0], 1.0 + c.T)
    np.testing.assert_allclose(got[1], np.exp(1.0 + c.T))


def test_an_input_of_unknown_length_is_checked_against_a_static_one():
    """X (length unknown) against a length-3 constant: a clear error, never a silent read."""
    x = kt.vector("x")
    y = kt.sum((x - kt.constant(np.array([1.0, 2.0, 3.0]))) ** 2)
    f = kiln.function([x], y, mode=kiln.Mode(linker="numba"))
    assert f(np.array([1.0, 2.0, 4.0])) == 1.0
    with pytest.raises(ShapeMismatchError):
        f(np.array([1.0, 2.0]))


def test_constants_written_as_literals_are_not_parameters() -> None:
    """Only the constants the code reads are passed: one-element ones are literals."""
    x = kt.vector("x")
    big = np.linspace(0.0, 1.0, 50)
    out = x[2] * 2.5 + kt.sum(x * big[:3]) + kt.constant(np.array([4.0]))[0]
    f = kiln.function([x], out, mode=NUMBA_FAST)
    assert [np.size(c) for c in f.thunk.constants] == [3]  # big[:3], folded
    assert re.search(r"def kiln_fn\(i0, c\d+\):", f.thunk.source)
    xv = np.arange(3.0)
    np.testing.assert_allclose(f(xv), xv[2] * 2.5 + np.sum(xv[:3] * big[:3]) + 4.0)
