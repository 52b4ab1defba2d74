"""Composite scalar programs: construction, props, printing, values.

Values are compared with the unfused Elemwise graph on the reference interpreter, bit
for bit.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    Composite,
    Elemwise,
    GradientError,
    KilnTypeError,
    KilnValueError,
    ScalarConstant,
)
from kiln_graph._math import Add, Exp, Log, Mul
from kiln_graph.testing import check_infer_shape, evaluate


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 5, shape).astype(dtype)
    return rng.uniform(0.1, 2.0, shape).astype(dtype)


def fused(inputs, outputs):
    """Return ``outputs`` computed by one Elemwise(Composite) node on ``inputs``."""
    op = Composite.from_graph(inputs, outputs)
    return op, Elemwise(op)(*inputs)


# name -> (input dtypes, function of the inputs)
EXPRESSIONS = {
    "exp_mul_add": (["float64"] * 3, lambda x, y, z: kt.exp(x) * y + z),
    "float32": (["float32"] * 3, lambda x, y, z: kt.exp(x) * y + z * 0.5),
    "float32_float64": (["float32", "float64"], lambda x, y: kt.log1p(x) / (y - 3.0)),
    "ints": (["int32", "int64"], lambda a, b: (a * b + 3) // 2 - a % 3),
    "int8_exp": (["int8"], lambda a: kt.exp(a) + kt.sqrt(a)),
    "uint8_wraps": (["uint8", "uint8"], lambda a, b: a * b * 200 + a),
    "switch": (
        ["float64", "float64", "int32"],
        lambda x, y, k: kt.switch((x > y) & (k < 3), kt.log(x), y * k),
    ),
    "casts": (
        ["float64", "int16"],
        lambda x, k: kt.cast(kt.cast(x * 10, "int32") + k, "float32") / 7,
    ),
    "bool_ops": (["bool", "float64"], lambda b, x: kt.switch(~b | (x > 1), x, -x)),
    "shared_subexpr": (["float64"], lambda x: kt.square(kt.exp(x)) + kt.exp(x) * 2),
    "special": (["float64", "float64"], lambda x, y: kt.gammaln(x) - kt.erf(y) * kt.sigmoid(x)),
    "pow_clip": (["float64", "float64"], lambda x, y: kt.clip(x**y, 0.5, 1.5) - x ** (-y)),
}


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_values_and_dtype_equal_unfused(name):
    dtypes, fn = EXPRESSIONS[name]
    inputs = [kt.vector(f"i{k}", dtype=d) for k, d in enumerate(dtypes)]
    out = fn(*inputs)
    op, new = fused(inputs, [out])
    assert new.dtype == out.dtype
    assert op.output_dtype(*dtypes) == out.dtype
    rng = np.random.default_rng(0)
    givens = {v: draw(rng, (50,), d) for v, d in zip(inputs, dtypes, strict=True)}
    expected = evaluate(out, givens)
    got = evaluate(new, givens)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_broadcasting_inputs():
    m, v = kt.matrix("m"), kt.vector("v")
    row = kt.dimshuffle(v, ("x", 0))
    out = kt.exp(row) * m + 1
    op, new = fused([row, m], [out])
    rng = np.random.default_rng(1)
    givens = {m: rng.normal(size=(3, 4)), v: rng.normal(size=4)}
    np.testing.assert_array_equal(evaluate(new, givens), evaluate(out, givens))
    assert new.type.shape == out.type.shape
    check_infer_shape(new, givens)


def test_str_is_readable():
    x, y, z = kt.vector("x"), kt.vector("y"), kt.vector("z")
    assert str(Composite.from_graph([x, y, z], [kt.exp(x) * y + z])) == (
        "Composite{exp(i0) * i1 + i2}"
    )
    assert str(Composite.from_graph([x, y], [x - (y - x), (x - y) - x])) == (
        "Composite{i0 - (i1 - i0), i0 - i1 - i0}"
    )
    assert str(Composite.from_graph([x, y], [(-x) ** 2, -(x**y)])) == (
        "Composite{(-i0) ** 2.0, -i0 ** i1}"
    )
    e = kt.exp(x)
    text = str(Composite.from_graph([x], [e * e + kt.cast(x, "float32")]))
    assert text == "Composite{t0 = exp(i0); t0 * t0 + float32(i0)}"
    assert str(Composite.from_graph([x], [kt.switch(x > 0, x, 0.5)])) == (
        "Composite{switch(i0 > 0.0, i0, 0.5)}"
    )


def test_long_programs_print_truncated():
    x = kt.vector("x")
    out = x
    for k in range(300):
        out = out * 1.5 + k
    text = str(Composite.from_graph([x], [out]))
    assert len(text) < 500 and text.endswith("...}")


def test_equal_programs_give_equal_ops():
    x, y = kt.vector("x"), kt.vector("y")
    a, b = kt.matrix("a", dtype="float32"), kt.matrix("b", dtype="float32")
    op1 = Composite.from_graph([x, y], [kt.exp(x) * y])
    op2 = Composite.from_graph([a, b], [kt.exp(a) * b])
    op3 = Composite.from_graph([x, y], [kt.exp(y) * x])
    assert op1 == op2 and hash(op1) == hash(op2) and op1.digest_bytes == op2.digest_bytes
    assert op1 != op3 and op1.digest_bytes != op3.digest_bytes
    # Elemwise nodes are interned on the op's props.
    assert Elemwise(op1)(x, y) is Elemwise(op2)(x, y)
    direct = Composite(2, [(Exp(), (0,)), (Mul(), (2, 1))], [3])
    assert direct == op1
    assert pickle.loads(pickle.dumps(op1)) == op1


def test_constants_are_inlined_with_their_dtype():
    x = kt.vector("x", dtype="float32")
    out = x * kt.constant(np.float64(0.1))
    op = Composite.from_graph([x], [out])
    (const_step,) = [s for s, _ in op.steps if isinstance(s, ScalarConstant)]
    assert const_step.dtype == "float64"
    assert op.output_dtype("float32") == out.dtype == "float64"
    value = np.linspace(0, 1, 7, dtype="float32")
    np.testing.assert_array_equal(evaluate(Elemwise(op)(x), {x: value}), evaluate(out, {x: value}))


def test_scalar_constant_props():
    nan1 = ScalarConstant.from_value(np.nan, "float64")
    nan2 = ScalarConstant.from_value(float("nan"), "float64")
    assert nan1 == nan2  # compared by bytes: NaN equals NaN
    assert ScalarConstant.from_value(1, "int8") != ScalarConstant.from_value(1, "int16")
    assert str(ScalarConstant.from_value(2.5, "float32")) == "2.5"
    assert ScalarConstant.from_value(3, "int32").impl().dtype == np.int32
    with pytest.raises(KilnValueError, match="one value"):
        ScalarConstant.from_value([1, 2])


def test_nested_composites_are_inlined():
    x, y = kt.vector("x"), kt.vector("y")
    inner = Elemwise(Composite.from_graph([x], [kt.exp(x) + 1]))(x)
    outer = Composite.from_graph([x, y], [inner * y])
    assert not any(isinstance(op, Composite) for op, _ in outer.steps)
    assert str(outer) == "Composite{(exp(i0) + 1.0) * i1}"


def test_identical_steps_are_shared_and_dead_steps_dropped():
    op = Composite(
        1,
        [(Exp(), (0,)), (Exp(), (0,)), (Log(), (0,)), (Add(), (1, 2))],
        [4],
    )
    assert op.impl(np.array([0.5])) == pytest.approx(2 * np.exp(0.5))
    x = kt.vector("x")
    e1, e2 = kt.exp(x), Elemwise(Exp())(x)
    built = Composite.from_graph([x], [e1 + e2])
    assert len(built.steps) == 2  # exp once (interned), then add


def test_multiple_outputs():
    x, y = kt.vector("x"), kt.vector("y", dtype="float32")
    e = kt.exp(x)
    op = Composite.from_graph([x, y], [e, e * y, kt.cast(y, "int64")])
    assert op.nout == 3
    assert op.output_dtypes("float64", "float32") == ("float64", "float64", "int64")
    with pytest.raises(KilnValueError, match="output_dtypes"):
        op.output_dtype("float64", "float32")
    xv, yv = np.array([0.0, 1.0]), np.array([2.5, 3.5], dtype="float32")
    r0, r1, r2 = op.impl(xv, yv)
    np.testing.assert_array_equal(r0, evaluate(e, {x: xv}))
    np.testing.assert_array_equal(r1, evaluate(e * y, {x: xv, y: yv}))
    assert r2.dtype == np.int64


def test_output_not_using_every_input_gets_the_full_shape():
    x, y = kt.vector("x"), kt.matrix("y")
    op = Composite(2, [(Exp(), (0,))], [2])
    row = kt.dimshuffle(x, ("x", 0))
    out = Elemwise(op)(row, y)
    value = evaluate(out, {x: np.zeros(3), y: np.zeros((2, 3))})
    np.testing.assert_array_equal(value, np.ones((2, 3)))


def test_impl_writes_into_out_even_when_out_is_an_input():
    x, y = kt.vector("x"), kt.vector("y")
    op = Composite.from_graph([x, y], [kt.exp(x) * y + x])
    xv, yv = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    expected = op.impl(xv, yv)
    buf = xv.copy()
    assert op.impl(buf, yv, out=buf) is buf
    np.testing.assert_array_equal(buf, expected)
    # The last step is a switch (no ``out=`` support): the result is copied in.
    op2 = Composite.from_graph([x, y], [kt.switch(x > 0.15, y, x)])
    buf = xv.copy()
    op2.impl(buf, yv, out=buf)
    np.testing.assert_array_equal(buf, [0.1, 2.0, 3.0])


def test_no_gradient():
    x = kt.vector("x")
    out = Elemwise(Composite.from_graph([x], [kt.exp(x) * 2]))(x)
    with pytest.raises(GradientError, match="runs after autodiff"):
        kt.grad(kt.sum(out), x)


def test_invalid_programs():
    with pytest.raises(KilnValueError, match="reads slot 3"):
        Composite(2, [(Exp(), (3,))], [2])
    with pytest.raises(KilnValueError, match="takes 1 argument"):
        Composite(2, [(Exp(), (0, 1))], [2])
    with pytest.raises(KilnValueError, match="at least one output"):
        Composite(1, [(Exp(), (0,))], [])
    with pytest.raises(KilnValueError, match="output slot 5"):
        Composite(1, [(Exp(), (0,))], [5])
    with pytest.raises(KilnTypeError, match="not a ScalarOp"):
        Composite(1, [(np.exp, (0,))], [1])  # type: ignore[list-item]
    op = Composite(2, [(Add(), (0, 1))], [2])
    with pytest.raises(KilnValueError, match="expected 2 input"):
        Elemwise(op)(kt.vector("x"))


def test_from_graph_errors():
    x, y = kt.vector("x"), kt.vector("y")
    with pytest.raises(KilnValueError, match="not listed in inputs"):
        Composite.from_graph([x], [x + y])
    with pytest.raises(KilnValueError, match="not a single-output Elemwise"):
        Composite.from_graph([x], [kt.exp(kt.cumsum(x))])
    with pytest.raises(KilnValueError, match="several elements"):
        Composite.from_graph([x], [x + kt.constant(np.array([1.0, 2.0]))])
    with pytest.raises(KilnValueError, match="listed twice"):
        Composite.from_graph([x, x], [x + 1])
