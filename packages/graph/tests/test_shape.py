"""Shape Ops against NumPy: reshape, transpose, dimshuffle, broadcast/alloc, arange, eye."""

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import (
    KilnTypeError,
    KilnValueError,
    ShapeMismatchError,
    graph_inputs,
    infer_shape,
)
from kiln_graph._node import Constant
from kiln_graph.ops import Reshape, Shape
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

DTYPES = ["float64", "float32", "int32", "bool"]


def random_array(shape, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def unknown(shape):
    return (None,) * len(shape)


def check_against_numpy(out, givens, expected):
    result = evaluate(out, givens)
    expected = np.asarray(expected)
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)
    check_infer_shape(out, givens)


# --- reshape / flatten ---------------------------------------------------------------------

RESHAPE_CASES = [
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), (4, -1)),
    ((2, 3, 4), (2, -1, 3)),
    ((6,), (1, 6)),
    ((), (1, 1)),
    ((1, 1), ()),
    ((0, 3), (-1, 3)),
    ((0, 3), (3, 0)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "newshape"), RESHAPE_CASES)
def test_reshape_matches_numpy(shape, newshape, dtype):
    value = random_array(shape, dtype)
    x = kt.tensor("x", dtype=dtype, shape=unknown(shape))
    check_against_numpy(kt.reshape(x, newshape), {x: value}, np.reshape(value, newshape))
    static = kt.tensor("s", dtype=dtype, shape=shape)
    assert kt.reshape(static, newshape).type.shape == np.reshape(value, newshape).shape


@pytest.mark.parametrize(("shape", "newshape"), RESHAPE_CASES)
def test_reshape_gradient(shape, newshape):
    verify_grad(lambda a: kt.reshape(a, newshape), [random_array(shape)])


def test_reshape_with_symbolic_shapes():
    x = kt.tensor("x", shape=(None, None, 4))
    value = random_array((2, 3, 4))
    n = kt.scalar("n", dtype="int64")
    m = kt.scalar("m", dtype="int32")
    # scalar entries, with -1 given statically or only at run time
    for newshape, n_value in [((n, -1), 3), ((n, 2, 4), 3), ((n, 4, m), -1)]:
        out = kt.reshape(x, newshape)
        givens = {x: value, n: n_value, m: 2}
        numeric = tuple(n_value if e is n else 2 if e is m else e for e in newshape)
        check_against_numpy(out, givens, np.reshape(value, numeric))
    # a shape vector variable, and the shape of another tensor
    s = kt.vector("s", dtype="int32", shape=(2,))
    check_against_numpy(
        kt.reshape(x, s), {x: value, s: np.array([4, 6], "int32")}, value.reshape(4, 6)
    )
    y = kt.matrix("y")
    out = kt.reshape(x, kt.shape(y))
    check_against_numpy(out, {x: value, y: np.ones((6, 4))}, value.reshape(6, 4))
    # the inferred shape does not need the output
    assert all(s.owner is None or s.owner.inputs[0] is not out for s in infer_shape(out))


def test_reshape_static_shapes_and_shortcuts():
    x = kt.tensor("x", shape=(None, 3, 4))
    n = kt.scalar("n", dtype="int64")
    assert kt.reshape(x, (n, -1)).type.shape == (None, None)
    assert kt.reshape(x, (-1, 12)).type.shape == (None, 12)
    assert kt.reshape(kt.tensor("s", shape=(2, 3, 4)), (n, -1)).type.shape == (None, None)
    assert kt.reshape(kt.tensor("s", shape=(2, 3, 4)), (4, -1)).type.shape == (4, 6)
    static = kt.tensor("t", shape=(2, 3))
    assert kt.reshape(static, (2, 3)) is static
    assert x.reshape(-1, 4) is kt.reshape(x, (-1, 4))
    assert x.reshape((-1, 4)) is kt.reshape(x, (-1, 4))


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda x: kt.reshape(x, (-1, -1)), KilnValueError, "at most one dimension can be -1"),
        (lambda x: Reshape(3)(x, (2, 12)), KilnValueError, "must have length 3"),
        (lambda x: kt.reshape(x, kt.vector("v", dtype="int64")), KilnValueError, "known"),
        (lambda x: kt.reshape(x, (2.0, 12)), KilnTypeError, "newshape"),
        (lambda x: kt.reshape(x, kt.vector("v", shape=(2,))), KilnTypeError, "integer vector"),
        (lambda x: kt.reshape(x, (5, 5)), ShapeMismatchError, "cannot reshape"),
        (lambda x: kt.reshape(x, (5, -1)), ShapeMismatchError, "cannot reshape"),
    ],
)
def test_reshape_bad_input(make, error, match):
    with pytest.raises(error, match=match):
        make(kt.tensor("x", shape=(2, 3, 4)))


def test_reshape_incompatible_size_at_run_time():
    x = kt.tensor("x", shape=(None, 4))
    with pytest.raises(ShapeMismatchError, match="reshape"):
        evaluate(kt.reshape(x, (5, -1)), {x: np.ones((3, 4))})


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (0, 2)])
def test_flatten(shape):
    value = random_array(shape)
    x = kt.tensor("x", shape=unknown(shape))
    check_against_numpy(kt.flatten(x), {x: value}, value.flatten())
    check_against_numpy(x.flatten(), {x: value}, value.flatten())
    assert kt.flatten(kt.tensor("s", shape=shape)).type.shape == (value.size,)
    verify_grad(kt.flatten, [value])


# --- transpose / dimshuffle ----------------------------------------------------------------

TRANSPOSE_CASES = [
    ((2, 3), None),
    ((2, 3, 4), None),
    ((2, 3, 4), (1, 0, 2)),
    ((2, 3, 4), (-1, 0, 1)),
    ((), None),
    ((3,), (0,)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "axes"), TRANSPOSE_CASES)
def test_transpose(shape, axes, dtype):
    value = random_array(shape, dtype)
    x = kt.tensor("x", dtype=dtype, shape=unknown(shape))
    check_against_numpy(kt.transpose(x, axes), {x: value}, np.transpose(value, axes))
    static = kt.tensor("s", dtype=dtype, shape=shape)
    assert kt.transpose(static, axes).type.shape == np.transpose(value, axes).shape


@pytest.mark.parametrize(("shape", "axes"), TRANSPOSE_CASES)
def test_transpose_gradient(shape, axes):
    verify_grad(lambda a: kt.transpose(a, axes), [random_array(shape)])


def test_transpose_attribute():
    x = kt.tensor("x", shape=(2, None, 4))
    assert x.T.type.shape == (4, None, 2)
    assert x.T is kt.transpose(x)


@pytest.mark.parametrize(
    ("axes", "error", "match"),
    [
        ((0, 0, 1), KilnValueError, "not a permutation"),
        ((0, 1), KilnValueError, "not a permutation"),
        ((0, 1, 3), KilnValueError, "axes: 3 is out of range"),
        ((0, 1, "2"), KilnTypeError, "axes: expected an int"),
    ],
)
def test_transpose_bad_axes(axes, error, match):
    with pytest.raises(error, match=match):
        kt.transpose(kt.tensor("x", shape=(2, 3, 4)), axes)


def np_dimshuffle(a, pattern):
    kept = [p for p in pattern if p != "x"]
    dropped = [d for d in range(a.ndim) if d not in kept]
    b = np.transpose(a, kept + dropped)
    b = b.reshape(b.shape[: len(kept)])
    for i, p in enumerate(pattern):
        if p == "x":
            b = np.expand_dims(b, i)
    return b


DIMSHUFFLE_CASES = [
    ((2, 3), (1, "x", 0)),
    ((2, 3), ("x", 0, 1, "x")),
    ((1, 3), (1,)),
    ((2, 1, 3), ("x", 2, 0)),
    ((), ("x", "x")),
    ((1,), ()),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "pattern"), DIMSHUFFLE_CASES)
def test_dimshuffle(shape, pattern, dtype):
    value = random_array(shape, dtype)
    static = tuple(1 if n == 1 else None for n in shape)
    x = kt.tensor("x", dtype=dtype, shape=static)
    expected = np_dimshuffle(value, pattern)
    check_against_numpy(kt.dimshuffle(x, pattern), {x: value}, expected)
    check_against_numpy(x.dimshuffle(*pattern), {x: value}, expected)
    assert kt.dimshuffle(kt.tensor("s", shape=shape), pattern).type.shape == expected.shape


@pytest.mark.parametrize(("shape", "pattern"), DIMSHUFFLE_CASES)
def test_dimshuffle_gradient(shape, pattern):
    verify_grad(lambda a: kt.dimshuffle(a, pattern), [random_array(shape)])


@pytest.mark.parametrize(
    ("pattern", "match"),
    [((0,), "cannot drop dimension 1"), ((0, 0, 1), "repeated"), ((0, 2), "out of range")],
)
def test_dimshuffle_bad_pattern(pattern, match):
    with pytest.raises(KilnValueError, match=match):
        kt.dimshuffle(kt.tensor("x", shape=(2, None)), pattern)


# --- expand_dims / squeeze -----------------------------------------------------------------

EXPAND_CASES = [((2, 3), 0), ((2, 3), -1), ((2, 3), (0, 2)), ((), 0), ((2, 3), (-1, 0)), ((3,), 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "axis"), EXPAND_CASES)
def test_expand_dims(shape, axis, dtype):
    value = random_array(shape, dtype)
    x = kt.tensor("x", dtype=dtype, shape=unknown(shape))
    expected = np.expand_dims(value, axis)
    check_against_numpy(kt.expand_dims(x, axis), {x: value}, expected)
    new_axes = [int(a) % expected.ndim for a in np.atleast_1d(axis)]
    assert all(kt.expand_dims(x, axis).type.shape[a] == 1 for a in new_axes)
    verify_grad(lambda a: kt.expand_dims(a, axis), [random_array(shape)])


def test_expand_dims_bad_axis():
    with pytest.raises(KilnValueError, match="axis: 3 is out of range for a 3-d"):
        kt.expand_dims(kt.matrix("x"), 3)
    with pytest.raises(KilnValueError, match="repeated"):
        kt.expand_dims(kt.matrix("x"), (0, 0))


SQUEEZE_CASES = [
    ((1, 3, 1), None),
    ((1, 3, 1), 0),
    ((1, 3, 1), -1),
    ((1, 3, 1), (0, 2)),
    ((1, 1), None),
    ((2, 3), None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "axis"), SQUEEZE_CASES)
def test_squeeze(shape, axis, dtype):
    value = random_array(shape, dtype)
    static = tuple(1 if n == 1 else None for n in shape)
    x = kt.tensor("x", dtype=dtype, shape=static)
    check_against_numpy(kt.squeeze(x, axis), {x: value}, np.squeeze(value, axis))
    verify_grad(lambda a: kt.squeeze(a, axis), [random_array(shape)])


def test_squeeze_of_a_non_1_dimension():
    x = kt.tensor("x", shape=(1, 3, None))
    with pytest.raises(KilnValueError, match="dimension 1 .* has static length 3, not 1"):
        kt.squeeze(x, 1)
    with pytest.raises(KilnValueError, match="static length None, not 1"):
        kt.squeeze(x, -1)
    with pytest.raises(KilnValueError, match="axis: 3 is out of range"):
        kt.squeeze(x, 3)
    assert kt.squeeze(x).type.shape == (3, None)


# --- broadcast_to / alloc and constructors ---------------------------------------------------

BROADCAST_CASES = [
    ((1, 3), (4, 3)),
    ((3,), (2, 3)),
    ((), (2, 2)),
    ((1, 1), (2, 3)),
    ((2, 1, 3), (2, 4, 3)),
    ((2, 3), (5, 2, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "target"), BROADCAST_CASES)
def test_broadcast_to(shape, target, dtype):
    value = random_array(shape, dtype)
    static = tuple(1 if n == 1 else None for n in shape)
    x = kt.tensor("x", dtype=dtype, shape=static)
    expected = np.broadcast_to(value, target)
    out = kt.broadcast_to(x, target)
    check_against_numpy(out, {x: value}, expected)
    assert out.type.shape == target
    check_against_numpy(kt.alloc(x, *target), {x: value}, expected)


@pytest.mark.parametrize(("shape", "target"), BROADCAST_CASES)
def test_broadcast_to_gradient(shape, target):
    value = random_array(shape)
    verify_grad(lambda a: kt.broadcast_to(a, target), [value])
    verify_grad(lambda a: kt.alloc(a, *target), [value])


def test_broadcast_to_symbolic_shape():
    x = kt.tensor("x", shape=(1, 3))
    n = kt.scalar("n", dtype="int32")
    out = kt.broadcast_to(x, (n, 3))
    assert out.type.shape == (None, 3)
    value = random_array((1, 3))
    check_against_numpy(out, {x: value, n: 4}, np.broadcast_to(value, (4, 3)))
    y = kt.matrix("y")
    out = kt.broadcast_to(x, (kt.shape_i(y, 0), kt.shape_i(y, 1)))
    assert out.type.shape == (None, 3)
    check_against_numpy(out, {x: value, y: np.ones((2, 3))}, np.broadcast_to(value, (2, 3)))
    x2 = kt.tensor("x2", shape=(2, 3))
    assert kt.broadcast_to(x2, (2, 3)) is x2


def test_broadcast_to_bad_input():
    with pytest.raises(ShapeMismatchError, match="cannot broadcast"):
        kt.broadcast_to(kt.tensor("x", shape=(2, 3)), (4, 3))
    with pytest.raises(KilnValueError, match="cannot broadcast a 2-d value to 1"):
        kt.broadcast_to(kt.matrix("x"), (3,))
    with pytest.raises(KilnTypeError, match="integer scalar"):
        kt.alloc(kt.vector("x"), 2.5)
    # an unknown length broadcasts only if it is declared static 1
    x = kt.vector("x")
    with pytest.raises(ShapeMismatchError, match="only static length-1"):
        evaluate(kt.broadcast_to(x, (3,)), {x: np.ones(1)})


n_sym = kt.scalar("n", dtype="int64")
CONSTRUCTOR_CASES = [
    ("zeros", lambda: kt.zeros((2, 3)), lambda: np.zeros((2, 3))),
    ("zeros-int32", lambda: kt.zeros((2, 3), "int32"), lambda: np.zeros((2, 3), "int32")),
    ("zeros-int", lambda: kt.zeros(4), lambda: np.zeros(4)),
    ("ones", lambda: kt.ones((3,)), lambda: np.ones((3,))),
    ("ones-bool", lambda: kt.ones((2, 2), "bool"), lambda: np.ones((2, 2), "bool")),
    ("full-int", lambda: kt.full((2, 2), 7), lambda: np.full((2, 2), 7)),
    ("full-float", lambda: kt.full((2,), 1.5), lambda: np.full((2,), 1.5)),
    ("full-f32", lambda: kt.full((2, 1), 1.5, "float32"), lambda: np.full((2, 1), 1.5, "float32")),
    ("full-symbolic", lambda: kt.full((n_sym, 2), 3.0), lambda: np.full((4, 2), 3.0)),
    ("zeros-symbolic", lambda: kt.zeros((n_sym,), "int32"), lambda: np.zeros(4, "int32")),
    ("alloc", lambda: kt.alloc(2.5, 2, n_sym), lambda: np.full((2, 4), 2.5)),
]


@pytest.mark.parametrize(
    ("make", "ref"), [c[1:] for c in CONSTRUCTOR_CASES], ids=[c[0] for c in CONSTRUCTOR_CASES]
)
def test_constructors(make, ref):
    out = make()
    check_against_numpy(out, {n_sym: 4} if n_sym in graph_inputs([out]) else {}, ref())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("like_dtype", [None, "float32", "int32"])
def test_zeros_like_ones_like(dtype, like_dtype):
    value = random_array((2, 3), dtype)
    x = kt.tensor("x", dtype=dtype, shape=(None, 3))
    check_against_numpy(kt.zeros_like(x, like_dtype), {x: value}, np.zeros_like(value, like_dtype))
    check_against_numpy(kt.ones_like(x, like_dtype), {x: value}, np.ones_like(value, like_dtype))
    assert kt.zeros_like(x).type.shape == (None, 3)


# --- shape / shape_i -----------------------------------------------------------------------


def test_shape_and_shape_i():
    x = kt.tensor("x", shape=(None, 3, None))
    value = random_array((2, 3, 4))
    s = kt.shape(x)
    assert s.owner is not None and isinstance(s.owner.op, Shape)
    assert s.type.shape == (3,) and s.dtype == "int64"
    check_against_numpy(s, {x: value}, np.array(value.shape))
    check_against_numpy(x.shape, {x: value}, np.array(value.shape))
    for i in (0, 1, 2, -1):
        check_against_numpy(kt.shape_i(x, i), {x: value}, np.int64(value.shape[i]))
    assert isinstance(kt.shape_i(x, 1), Constant) and int(kt.shape_i(x, 1).data) == 3
    static = kt.shape(kt.tensor("s", shape=(2, 5)))
    assert isinstance(static, Constant)
    np.testing.assert_array_equal(static.data, [2, 5])
    assert kt.shape(kt.scalar("c")).type.shape == (0,)
    with pytest.raises(KilnValueError, match="out of range"):
        kt.shape_i(kt.matrix("m"), 2)


# --- arange --------------------------------------------------------------------------------

ARANGE_CASES = [
    ((5,), {}),
    ((2, 7), {}),
    ((2, 7, 2), {}),
    ((7, 2, -1), {}),
    ((7, 2, -3), {}),
    ((0.0, 1.0, 0.1), {}),
    ((1.5,), {}),
    ((5, 1), {}),
    ((0, 10, 3), {"dtype": "float32"}),
    ((1.0, 4.0), {"dtype": "int32"}),
    ((-2.5, 2.5, 0.5), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), ARANGE_CASES)
def test_arange_of_constants(args, kwargs):
    out = kt.arange(*args, **kwargs)
    expected = np.arange(*args, **kwargs)
    assert out.type.shape == expected.shape
    check_against_numpy(out, {}, expected)


@pytest.mark.parametrize(("args", "kwargs"), ARANGE_CASES)
def test_arange_of_symbolic_scalars(args, kwargs):
    symbols = [
        kt.scalar(f"a{i}", dtype="float64" if isinstance(a, float) else "int64")
        for i, a in enumerate(args)
    ]
    out = kt.arange(*symbols, **kwargs)
    assert out.type.shape == (None,)
    check_against_numpy(out, dict(zip(symbols, args, strict=True)), np.arange(*args, **kwargs))


def test_arange_mixed_and_32_bit_arguments():
    n = kt.scalar("n", dtype="int32")
    out = kt.arange(1, n, 2)
    assert out.dtype == np.arange(np.int32(1), np.int32(9), 2).dtype
    check_against_numpy(out, {n: 9}, np.arange(1, np.int32(9), 2))
    f = kt.scalar("f", dtype="float32")
    check_against_numpy(kt.arange(f), {f: 3.5}, np.arange(np.float32(3.5)))
    x = kt.matrix("x")
    out = kt.arange(kt.shape_i(x, 0))
    check_against_numpy(out, {x: np.ones((3, 2))}, np.arange(3))


def test_arange_has_no_gradient():
    x = kt.scalar("x")
    cost = x + kt.sum(kt.arange(x, 5.0))
    np.testing.assert_array_equal(evaluate(kt.grad(cost, x), {x: 1.0}), 1.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 5, 0), {}, KilnValueError, "step must not be zero"),
        ((np.ones(3),), {}, KilnTypeError, "stop: expected a scalar"),
        ((True,), {}, KilnTypeError, "stop: expected a real number"),
        ((0, 1j), {}, KilnTypeError, "stop: expected a real number"),
        ((5,), {"dtype": "bool"}, KilnTypeError, "dtype"),
        ((5,), {"dtype": "foo"}, KilnTypeError, "dtype"),
    ],
)
def test_arange_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        kt.arange(*args, **kwargs)


def test_arange_zero_step_at_run_time():
    step = kt.scalar("step", dtype="int64")
    with pytest.raises(KilnValueError, match="step must not be zero"):
        evaluate(kt.arange(0, 5, step), {step: 0})


# --- eye -----------------------------------------------------------------------------------

EYE_CASES = [
    ((3,), {}),
    ((3, 4), {}),
    ((3, 4, 1), {}),
    ((4, 3, -2), {}),
    ((3, None, 5), {}),
    ((0,), {}),
    ((3,), {"dtype": "int32"}),
    ((2, 3), {"dtype": "bool"}),
    ((2, 2), {"dtype": "float32"}),
]


@pytest.mark.parametrize(("args", "kwargs"), EYE_CASES)
def test_eye(args, kwargs):
    out = kt.eye(*args, **kwargs)
    expected = np.eye(*args, **kwargs)
    assert out.type.shape == expected.shape
    check_against_numpy(out, {}, expected)
    n, m = kt.scalar("n", dtype="int64"), kt.scalar("m", dtype="int32")
    symbolic = kt.eye(n, None if args[1:2] in ((), (None,)) else m, *args[2:], **kwargs)
    givens = {n: args[0]} if args[1:2] in ((), (None,)) else {n: args[0], m: args[1]}
    check_against_numpy(symbolic, givens, expected)


def test_eye_static_shape_of_symbolic_arguments():
    x = kt.tensor("x", shape=(None, 3))
    assert kt.eye(kt.shape_i(x, 1)).type.shape == (3, 3)
    assert kt.eye(kt.shape_i(x, 0), 2).type.shape == (None, 2)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1,), KilnValueError, "n must be non-negative"),
        ((2, -3), KilnValueError, "m must be non-negative"),
        ((2.0,), KilnTypeError, "n: expected an integer"),
        ((2, 2, 0.5), KilnTypeError, "k: expected an integer"),
        ((np.ones(2, "int64"),), KilnTypeError, "n: expected a scalar"),
    ],
)
def test_eye_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        kt.eye(*args)


def test_eye_negative_size_at_run_time():
    n = kt.scalar("n", dtype="int64")
    with pytest.raises(KilnValueError, match="non-negative"):
        evaluate(kt.eye(n), {n: -2})
