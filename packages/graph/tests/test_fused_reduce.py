"""FusedReduce against the unfused CAReduce(Elemwise) pair: values, dtypes, shapes, errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    Composite,
    Elemwise,
    FusedReduce,
    GradientError,
    KilnTypeError,
    KilnValueError,
    ShapeMismatchError,
)
from kiln_graph._math import GT, Exp, Mul
from kiln_graph._reduce import CAReduce
from kiln_graph.testing import check_infer_shape, evaluate

KINDS = ["sum", "prod", "max", "min", "all", "any"]


def unfused(kind, axis, scalar_op, *inputs):
    return CAReduce(kind, axis)(Elemwise(scalar_op)(*inputs))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int32", "bool"])
@pytest.mark.parametrize("axis", [(0,), (1,), (0, 1)])
def test_equals_unfused(kind, dtype, axis):
    x, y = kt.matrix("x", dtype=dtype), kt.matrix("y", dtype=dtype)
    op = Composite.from_graph([x, y], [x * y + x])
    out = FusedReduce(kind, axis, op)(x, y)
    ref = unfused(kind, axis, op, x, y)
    assert out.type == ref.type
    rng = np.random.default_rng(0)
    if dtype == "bool":
        xv, yv = rng.random((3, 5)) < 0.5, rng.random((3, 5)) < 0.5
    else:
        xv = rng.integers(-3, 4, (3, 5)).astype(dtype)
        yv = rng.integers(-3, 4, (3, 5)).astype(dtype)
        if dtype.startswith("float"):
            xv, yv = xv + rng.uniform(0, 1, xv.shape).astype(dtype), yv / 3
    givens = {x: xv, y: yv}
    got, expected = evaluate(out, givens), evaluate(ref, givens)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_broadcasting_inputs_and_shapes():
    v, m = kt.vector("v"), kt.matrix("m")
    row = kt.dimshuffle(v, ("x", 0))
    out = FusedReduce("sum", (1,), Mul())(row, m)
    assert out.type.shape == (None,)
    rng = np.random.default_rng(2)
    givens = {v: rng.normal(size=4), m: rng.normal(size=(3, 4))}
    np.testing.assert_array_equal(
        evaluate(out, givens), evaluate(unfused("sum", (1,), Mul(), row, m), givens)
    )
    check_infer_shape(out, givens)
    check_infer_shape(FusedReduce("max", (0,), Mul())(row, m), givens)
    # Inputs of lower rank are padded as Elemwise pads them.
    padded = FusedReduce("sum", (0, 1), Mul())(v, m)
    np.testing.assert_allclose(evaluate(padded, givens), np.sum(givens[v] * givens[m]), rtol=1e-15)


def test_str_and_props():
    op = FusedReduce("sum", (0,), Exp())
    assert str(op) == "Sum{axis=(0,), of=exp}"
    assert op == FusedReduce("sum", [0], Exp())
    assert op != FusedReduce("prod", (0,), Exp())
    assert op.digest_bytes != FusedReduce("sum", (1,), Exp()).digest_bytes
    x = kt.vector("x")
    fused = FusedReduce("sum", (0,), Composite.from_graph([x], [kt.exp(x) * 2]))
    copy = pickle.loads(pickle.dumps(fused))
    assert copy == fused and copy.digest_bytes == fused.digest_bytes
    np.testing.assert_array_equal(
        evaluate(copy(x), {x: np.arange(3.0)}), evaluate(fused(x), {x: np.arange(3.0)})
    )


def test_errors():
    x = kt.matrix("x")
    with pytest.raises(KilnValueError, match="kind"):
        FusedReduce("mean", (0,), Exp())
    with pytest.raises(KilnValueError, match="out of range"):
        FusedReduce("sum", (2,), Exp())(x)
    with pytest.raises(KilnTypeError, match="ScalarOp"):
        FusedReduce("sum", (0,), np.exp)  # type: ignore[arg-type]
    c = kt.matrix("c", dtype="complex128")
    with pytest.raises(KilnTypeError, match="complex128"):
        FusedReduce("sum", (0,), Exp())(c)
    y = kt.tensor("y", dtype="float64", shape=(None, 0))
    with pytest.raises(KilnValueError, match="zero-length"):
        FusedReduce("max", (1,), Exp())(y)
    two = Composite.from_graph([x], [x, x + 1])
    with pytest.raises(KilnValueError, match="several outputs"):
        FusedReduce("sum", (0,), two)
    out = FusedReduce("sum", (0, 1), Exp())(x)
    with pytest.raises(GradientError, match="after autodiff"):
        kt.grad(out, x)
    z = kt.matrix("z")
    mismatched = FusedReduce("any", (0,), GT())(x, z)
    with pytest.raises(ShapeMismatchError):
        evaluate(mismatched, {x: np.zeros((2, 3)), z: np.zeros((2, 4))})
