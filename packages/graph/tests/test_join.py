"""concatenate / stack (and the Split Op behind their gradient) against NumPy."""

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_graph import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._join import Join, Split
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad


def random_array(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def unknown(shape):
    return (None,) * len(shape)


# (shapes, axis)
CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 5)], 1),
    ([(2, 3), (2, 2)], -1),
    ([(2, 3, 4), (2, 1, 4)], 1),
    ([(2, 3, 4), (2, 3, 2), (2, 3, 1)], 2),
    ([(3,), (0,), (2,)], 0),
    ([(2, 3), (3, 2)], None),
]
DTYPE_CASES = [
    ("float64", "float64"),
    ("float32", "float32"),
    ("int32", "float32"),
    ("bool", "int32"),
    ("int32", "int64"),
    ("bool", "bool"),
]


@pytest.mark.parametrize("dtypes", DTYPE_CASES, ids="-".join)
@pytest.mark.parametrize(("shapes", "axis"), CONCAT_CASES)
def test_concatenate_matches_numpy(shapes, axis, dtypes):
    values = [random_array(s, dtypes[i % 2], seed=i) for i, s in enumerate(shapes)]
    xs = [kt.tensor(f"x{i}", dtype=v.dtype, shape=unknown(v.shape)) for i, v in enumerate(values)]
    out = kt.concatenate(xs, axis=axis)
    givens = dict(zip(xs, values, strict=True))
    result = evaluate(out, givens)
    expected = np.concatenate(values, axis=axis)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    check_infer_shape(out, givens)


@pytest.mark.parametrize(("shapes", "axis"), CONCAT_CASES)
def test_concatenate_static_shape(shapes, axis):
    xs = [kt.tensor(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    expected = np.concatenate([np.ones(s) for s in shapes], axis=axis).shape
    assert kt.concatenate(xs, axis=axis).type.shape == expected


@pytest.mark.parametrize(
    ("static", "axis", "expected"),
    [
        ([(2, None), (None, 3)], 0, (None, 3)),
        ([(2, None), (3, None)], 0, (5, None)),
        ([(2, None), (2, 3)], 1, (2, None)),
        ([(None, 4), (2, None)], 1, (2, None)),
    ],
)
def test_concatenate_partial_static_shape(static, axis, expected):
    xs = [kt.tensor(f"x{i}", shape=s) for i, s in enumerate(static)]
    out = kt.concatenate(xs, axis=axis)
    assert out.type.shape == expected
    values = [np.ones((2, 3) if axis == 0 else (2, 4)), np.ones((3, 3) if axis == 0 else (2, 3))]
    if all(
        s is None or s == n
        for v, st in zip(values, static, strict=True)
        for s, n in zip(st, v.shape, strict=True)
    ):
        check_infer_shape(out, dict(zip(xs, values, strict=True)))


def test_concatenate_one_tensor_and_interning():
    x, y = kt.matrix("x"), kt.matrix("y")
    assert kt.concatenate([x]) is x
    assert kt.concatenate([x, y], axis=1) is kt.concatenate((x, y), axis=-1)
    assert Join(0) == Join(0) and Join(0) != Join(1)


def test_concatenate_of_values_and_variables():
    x = kt.vector("x")
    out = kt.concatenate([x, np.array([7.0, 8.0])])
    np.testing.assert_array_equal(evaluate(out, {x: np.ones(1)}), [1.0, 7.0, 8.0])


# --- stack ---------------------------------------------------------------------------------

STACK_CASES = [((), 0), ((3,), 0), ((3,), 1), ((3,), -1), ((2, 3), 1), ((2, 3), -3), ((2, 3), 2)]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
@pytest.mark.parametrize(("shape", "axis"), STACK_CASES)
def test_stack_matches_numpy(shape, axis, dtype):
    values = [random_array(shape, dtype, seed=i) for i in range(3)]
    xs = [kt.tensor(f"x{i}", dtype=dtype, shape=unknown(shape)) for i in range(3)]
    out = kt.stack(xs, axis=axis)
    givens = dict(zip(xs, values, strict=True))
    result = evaluate(out, givens)
    expected = np.stack(values, axis=axis)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    check_infer_shape(out, givens)
    static = [kt.tensor(f"s{i}", dtype=dtype, shape=shape) for i in range(3)]
    assert kt.stack(static, axis=axis).type.shape == expected.shape


def test_stack_mixed_dtypes_and_partial_shapes():
    x = kt.tensor("x", dtype="int32", shape=(None, 3))
    y = kt.tensor("y", dtype="float32", shape=(2, None))
    out = kt.stack([x, y], axis=1)
    assert out.type.shape == (2, 2, 3)
    values = {x: np.ones((2, 3), "int32"), y: np.zeros((2, 3), "float32")}
    expected = np.stack(list(values.values()), axis=1)
    result = evaluate(out, values)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)


# --- gradients -----------------------------------------------------------------------------


@pytest.mark.parametrize(("shapes", "axis"), CONCAT_CASES)
def test_concatenate_gradient(shapes, axis):
    values = [random_array(s, "float64", seed=i) for i, s in enumerate(shapes)]
    verify_grad(lambda *xs: kt.concatenate(list(xs), axis=axis), values)


@pytest.mark.parametrize(("shape", "axis"), STACK_CASES)
def test_stack_gradient(shape, axis):
    values = [random_array(shape, "float64", seed=i) for i in range(2)]
    verify_grad(lambda *xs: kt.stack(list(xs), axis=axis), values)


def test_concatenate_gradient_reuses_an_input_and_mixes_dtypes():
    x = kt.vector("x")
    i = kt.vector("i", dtype="int32")
    out = kt.concatenate([x, 2 * x, i])
    g = kt.grad(kt.sum(out * kt.arange(1.0, 7.0)), x)
    np.testing.assert_array_equal(
        evaluate(g, {x: np.ones(2), i: np.ones(2, "int32")}), [1 + 6, 2 + 8]
    )
    verify_grad(lambda a: kt.concatenate([a, a**2], axis=0), [np.array([1.0, 2.0])])
    value = random_array((3,), "float32")
    verify_grad(lambda a, b: kt.concatenate([a, b]), [value, value])


def test_second_derivative_through_concatenate():
    verify_grad(
        lambda a: kt.grad(kt.sum(kt.concatenate([a, a**2]) ** 2), a), [np.array([0.5, -1.0])]
    )


def test_jacobian_stacks_rows():
    x = kt.vector("x", shape=(3,))
    jac = kt.jacobian(x**2, x)
    value = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(evaluate(jac, {x: value}), np.diag(2 * value))


# --- Split ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("axis", "sizes"), [(0, (1, 3)), (1, (2, 0, 3)), (1, (5,))])
def test_split(axis, sizes):
    x = kt.matrix("x")
    value = random_array((4, 5), "float64")
    outs = Split(axis, len(sizes)).make_node(x, *sizes).outputs
    expected = np.split(value, np.cumsum(sizes)[:-1], axis=axis)
    for out, exp in zip(evaluate(list(outs), {x: value}), expected, strict=True):
        np.testing.assert_array_equal(out, exp)
    check_infer_shape(list(outs), {x: value})
    assert [o.type.shape[axis] for o in outs] == list(sizes)

    def split_and_join(a):
        pieces = Split(axis, len(sizes)).make_node(a, *sizes).outputs
        return kt.concatenate(list(pieces), axis=axis) ** 2

    verify_grad(split_and_join, [value])


def test_split_errors():
    x = kt.matrix("x")
    with pytest.raises(ShapeMismatchError, match="add up to 4"):
        Split(0, 2).make_node(kt.tensor("s", shape=(5, 2)), 1, 3)
    with pytest.raises(KilnTypeError, match=r"sizes\[1\]"):
        Split(0, 2).make_node(x, 1, 2.0)
    with pytest.raises(KilnValueError, match="non-negative"):
        Split(0, 2).make_node(x, 1, -1)
    n = kt.scalar("n", dtype="int64")
    piece = Split(0, 2).make_node(x, n, 1).outputs[0]
    with pytest.raises(ShapeMismatchError, match="cannot cut"):
        evaluate(piece, {x: np.ones((3, 2)), n: 1})


# --- bad input -----------------------------------------------------------------------------


def test_concatenate_mismatched_shapes():
    with pytest.raises(ShapeMismatchError, match="dimension 1 differ"):
        kt.concatenate([kt.tensor("a", shape=(2, 3)), kt.tensor("b", shape=(2, 4))])
    x, y = kt.matrix("x"), kt.matrix("y")
    out = kt.concatenate([x, y], axis=0)
    with pytest.raises(ShapeMismatchError, match=r"tensors\[1\] has shape \(2, 4\)"):
        evaluate(out, {x: np.ones((2, 3)), y: np.ones((2, 4))})
    with pytest.raises(ShapeMismatchError):
        evaluate(kt.stack([x, y]), {x: np.ones((2, 3)), y: np.ones((3, 2))})


@pytest.mark.parametrize(
    ("tensors", "kwargs", "error", "match"),
    [
        ("mixed-ndim", {}, KilnValueError, r"tensors\[1\] has 1 dimension"),
        ("empty", {}, KilnValueError, "must not be empty"),
        ("variable", {}, KilnTypeError, "list or tuple"),
        ("scalars", {}, KilnValueError, "0-d tensors cannot be concatenated"),
        ("matrices", {"axis": 2}, KilnValueError, "axis: 2 is out of range for a 2-d"),
        ("matrices", {"axis": -3}, KilnValueError, "axis: -3 is out of range"),
        ("matrices", {"axis": 0.0}, KilnTypeError, "axis must be an int"),
    ],
)
def test_concatenate_bad_input(tensors, kwargs, error, match):
    args = {
        "mixed-ndim": [kt.matrix("a"), kt.vector("b")],
        "empty": [],
        "variable": kt.matrix("m"),
        "scalars": [kt.scalar("a"), kt.scalar("b")],
        "matrices": [kt.matrix("a"), kt.matrix("b")],
    }[tensors]
    with pytest.raises(error, match=match):
        kt.concatenate(args, **kwargs)


def test_stack_bad_input():
    with pytest.raises(KilnValueError, match=r"tensors\[1\] has 2 dimension"):
        kt.stack([kt.vector("a"), kt.matrix("b")])
    with pytest.raises(KilnValueError, match="axis: 3 is out of range for a 3-d"):
        kt.stack([kt.matrix("a"), kt.matrix("b")], axis=3)
    with pytest.raises(ShapeMismatchError):
        kt.stack([kt.tensor("a", shape=(2,)), kt.tensor("b", shape=(3,))])
    with pytest.raises(KilnValueError, match="must not be empty"):
        kt.stack([])
