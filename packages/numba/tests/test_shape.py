"""Numba shape ops (Shape, ShapeI, MakeVector, Reshape, Alloc, Join, Split, ARange, Eye).

Each test compiles one function with many outputs and compares values, dtypes and
shapes with the unrewritten graph on the Python VM; errors are ValueErrors on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph import Variable
from kiln_graph._join import Join, Split
from kiln_graph._ranges import ARange, Eye
from kiln_graph.ops import Alloc, MakeVector, Reshape, Shape, ShapeI

NUMBA = kiln.Mode(rewrites=None, linker="numba")
VM = kiln.Mode(rewrites=None, linker="vm")


def check(
    inputs: Sequence[Variable], outputs: Sequence[Variable], values: Sequence[Any]
) -> list[Any]:
    """Compare with the VM and check that no node fell back to object mode."""
    f = kiln.function(list(inputs), list(outputs), mode=NUMBA)
    assert "objmode" not in f.thunk.source, f.thunk.source
    return compare_with_vm(inputs, outputs, values, backend=NUMBA)


def raises_like_vm(
    inputs: Sequence[Variable], output: Variable, cases: Sequence[Sequence[Any]]
) -> None:
    """Both the VM and Numba raise a ValueError for each list of input values."""
    for mode in (VM, NUMBA):
        f = kiln.function(list(inputs), output, mode=mode)
        for values in cases:
            with pytest.raises(ValueError):
                f(*values)


def i64(name: str) -> Variable:
    return kt.scalar(name, dtype="int64")


def test_shape_shape_i_make_vector() -> None:
    x = kt.tensor("x", dtype="float32", shape=(None, 3, None))
    s = kt.scalar("s")
    n, k = i64("n"), i64("k")
    b = kt.scalar("b", dtype="bool")
    outs = [
        Shape()(x),
        Shape()(s),
        ShapeI(0)(x),
        ShapeI(2)(x),
        MakeVector("int64")(n, k, kt.constant(np.int64(7))),
        MakeVector("float32")(s, n),
        MakeVector("bool")(b, b),
        MakeVector("float64")(),
    ]
    res = check(
        [x, s, n, k, b],
        outs,
        [np.zeros((2, 3, 0), "float32"), np.array(1.5), np.array(4), np.array(-2), np.array(True)],
    )
    np.testing.assert_array_equal(res[0], [2, 3, 0])
    assert res[2].shape == () and res[2] == 2


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_reshape(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None))
    shp = kt.tensor("shp", dtype="int64", shape=(3,))
    s = kt.tensor("s", dtype=dtype, shape=())
    one = kt.tensor("one", dtype=dtype, shape=(1,))
    outs = [
        kt.reshape(x, (-1,)),
        kt.reshape(x, (2, -1, 3)),
        kt.reshape(x, (4, 6)),
        Reshape(3)(x, shp),
        kt.reshape(x.T, (-1,)),  # a non-contiguous (transposed) view: copied first
        kt.reshape(s, (1, 1)),
        kt.reshape(one, ()),
    ]
    data = np.arange(24).reshape(6, 4).astype(dtype)
    for shape in ([3, 2, -1], [-1, 4, 2], [2, 3, 4]):
        check(
            [x, shp, s, one], outs, [data, np.array(shape), np.array(5, dtype), np.ones(1, dtype)]
        )
    if dtype == "float64":  # a non-contiguous argument (Numba compiles a second version)
        args = [data.T.copy().T, np.array([2, 12, 1]), np.array(5, dtype), np.ones(1, dtype)]
        check([x, shp, s, one], outs, args)


def test_reshape_errors_and_empty() -> None:
    x = kt.matrix("x")
    shp = kt.tensor("shp", dtype="int64", shape=(2,))
    out = Reshape(2)(x, shp)
    check([x, shp], [out], [np.zeros((0, 3)), np.array([3, 0])])
    check([x, shp], [out], [np.zeros((0, 3)), np.array([-1, 5])])
    raises_like_vm(
        [x, shp],
        out,
        [
            [np.zeros((2, 3)), np.array([4, 2])],  # size mismatch
            [np.zeros((2, 3)), np.array([-1, -1])],  # two unknowns
            [np.zeros((2, 3)), np.array([4, -1])],  # not divisible
            [np.zeros((0, 3)), np.array([0, -1])],  # unknown next to a zero
        ],
    )
    raises_like_vm([x], kt.reshape(x, (5,)), [[np.zeros((2, 3))]])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_alloc(dtype: str) -> None:
    v = kt.tensor("v", dtype=dtype, shape=(None,))
    r = kt.tensor("r", dtype=dtype, shape=(1, None))
    s = kt.tensor("s", dtype=dtype, shape=())
    n, k = i64("n"), i64("k")
    outs = [
        kt.alloc(v, n, k),  # v's length must equal k
        kt.alloc(r, n, k),  # r broadcasts along its static length-1 dimension
        kt.alloc(s, n, k, 2),
        kt.zeros((n, k), dtype=dtype),
        kt.full((n, 3), 7, dtype="int32"),
        kt.ones((k,), dtype="bool"),
        kt.alloc(s),
    ]
    values = [np.arange(3, dtype=dtype), np.arange(3, dtype=dtype)[None], np.array(2.5, dtype)]
    check([v, r, s, n, k], outs, [*values, np.array(2), np.array(3)])
    check([v, r, s, n, k], outs[1:3], [*values, np.array(0), np.array(3)])


def test_alloc_errors() -> None:
    v = kt.vector("v")
    n, k = i64("n"), i64("k")
    out = Alloc()(v, n, k)
    raises_like_vm([v, n, k], out, [[np.zeros(3), np.array(2), np.array(4)]])
    # A runtime length-1 dimension does not broadcast unless its static length is 1.
    raises_like_vm([v, n, k], out, [[np.zeros(1), np.array(2), np.array(4)]])


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_join(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(None, None))
    y = kt.tensor("y", dtype=dtype, shape=(None, 3))
    t = kt.tensor("t", dtype=dtype, shape=(2, None, None))
    outs = [
        kt.concatenate([x, y], axis=0),
        kt.concatenate([x, y, x], axis=1),
        kt.concatenate([t, t], axis=2),
        kt.stack([x, x], axis=1),
        kt.concatenate([x, y], axis=None),
        Join(0)(x),
    ]
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    check([x, y, t], outs, [xv, (xv + 10)[::-1], np.ones((2, 2, 1), dtype)])


def test_join_mixed_dtypes_empty_and_errors() -> None:
    a = kt.tensor("a", dtype="int32", shape=(None,))
    b = kt.tensor("b", dtype="float32", shape=(None,))
    x = kt.matrix("x")
    y = kt.matrix("y")
    outs = [kt.concatenate([a, b]), kt.concatenate([x, y], axis=1)]
    check(
        [a, b, x, y],
        outs,
        [np.arange(3, dtype="int32"), np.zeros(0, "float32"), np.zeros((2, 0)), np.ones((2, 2))],
    )
    raises_like_vm([x, y], kt.concatenate([x, y], axis=1), [[np.zeros((2, 1)), np.zeros((3, 1))]])
    raises_like_vm([x, y], kt.concatenate([y, x], axis=0), [[np.zeros((2, 1)), np.zeros((3, 2))]])


def test_split() -> None:
    x = kt.matrix("x")
    n1, n2, n3 = i64("n1"), i64("n2"), i64("n3")
    t = kt.tensor("t", dtype="int32", shape=(2, 5, None))
    pieces = Split(1, 3).make_node(x, n1, n2, n3).outputs
    static = Split(1, 2).make_node(t, kt.constant(np.int64(2)), kt.constant(np.int64(3))).outputs
    inputs = [x, n1, n2, n3, t]
    data = np.arange(20.0).reshape(4, 5)
    tv = np.arange(20, dtype="int32").reshape(2, 5, 2)
    check(inputs, [*pieces, *static], [data, np.array(2), np.array(0), np.array(3), tv])
    check(inputs, [*pieces, *static], [data.T.copy().T, np.array(5), np.array(0), np.array(0), tv])
    bad = [[data, *map(np.array, lengths), tv] for lengths in ([2, 2, 2], [6, -1, 0])]
    raises_like_vm(inputs, pieces[0], bad)


def test_arange() -> None:
    a, b, c = i64("a"), i64("b"), i64("c")
    p, q, r = kt.scalar("p"), kt.scalar("q"), kt.scalar("r")
    outs = [
        ARange("int64")(a, b, c),
        ARange("int32")(a, b, c),
        ARange("float64")(a, b, c),
        ARange("float64")(p, q, r),
        ARange("float32")(p, q, r),
        ARange("int64")(p, q, r),
        kt.arange(5),
        kt.arange(0.5, 3.0, 0.25, dtype="float32"),
    ]
    inputs = [a, b, c, p, q, r]
    cases = [
        (0, 10, 3, 0.5, 3.7, 0.3),
        (10, 0, -3, 1.0, 2.0, 0.1),
        (5, 5, 1, 2.0, -1.0, 0.5),  # empty ranges
        (-7, 8, 2, -1.5, 1.5, -0.25),
    ]
    for case in cases:
        check(inputs, outs, [np.array(v) for v in case])
    raises_like_vm([a, b, c], ARange("int64")(a, b, c), [[np.array(0), np.array(3), np.array(0)]])


def test_eye() -> None:
    n, m, k = i64("n"), i64("m"), i64("k")
    outs = [
        Eye("float64")(n, m, k),
        Eye("float32")(n, n, k),
        Eye("int32")(m, n, k),
        Eye("bool")(n, m, kt.constant(np.int64(0))),
        kt.eye(3, 4, k=1),
    ]
    for case in ((3, 4, 0), (4, 2, -1), (2, 5, 3), (0, 3, 0), (3, 3, -5)):
        check([n, m, k], outs, [np.array(v) for v in case])
    raises_like_vm([n, m, k], Eye("float64")(n, m, k), [[np.array(-1), np.array(2), np.array(0)]])
