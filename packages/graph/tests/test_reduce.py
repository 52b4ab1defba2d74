"""Reductions against NumPy / SciPy: values, dtypes, shapes, gradients and errors."""

import numpy as np
import pytest
import scipy.special as sp

import kiln_graph.tensor as kt
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph._reduce import Argmax, CumSum
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

SHAPE = (2, 3, 4)
DTYPES = ["float64", "float32", "int32", "bool"]


def random_array(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-2, 3, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def np_logsumexp(x, axis=None, keepdims=False):
    if x.dtype.kind in "biu":
        x = x.astype("float64")
    return sp.logsumexp(x, axis=axis, keepdims=keepdims)


# name -> (kiln function, NumPy reference, accepts a tuple of axes)
REDUCTIONS = {
    "sum": (kt.sum, np.sum, True),
    "prod": (kt.prod, np.prod, True),
    "max": (kt.max, np.max, True),
    "min": (kt.min, np.min, True),
    "all": (kt.all, np.all, True),
    "any": (kt.any, np.any, True),
    "mean": (kt.mean, np.mean, True),
    "var": (kt.var, np.var, True),
    "std": (kt.std, np.std, True),
    "logsumexp": (kt.logsumexp, np_logsumexp, True),
    "argmax": (kt.argmax, np.argmax, False),
}
AXES = [None, 0, 1, -1, (0, 2), (), (0, 1, 2)]
SINGLE_AXES = [None, 0, 1, -1]


def reduction_cases():
    for name, (_, _, tuples) in REDUCTIONS.items():
        for axis in AXES if tuples else SINGLE_AXES:
            for keepdims in (False, True):
                yield pytest.param(name, axis, keepdims, id=f"{name}-axis={axis}-kd={keepdims}")


def assert_matches(result, expected, dtype):
    expected = np.asarray(expected)
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    assert result.shape == expected.shape
    if expected.dtype.kind in "fc":
        rtol = 1e-5 if dtype == "float32" or expected.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(result, expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "axis", "keepdims"), list(reduction_cases()))
def test_reduction_matches_numpy(name, axis, keepdims, dtype):
    fn, ref, _ = REDUCTIONS[name]
    value = random_array(SHAPE, dtype)
    x = kt.tensor("x", dtype=dtype, shape=(None, 3, None))
    out = fn(x, axis=axis, keepdims=keepdims)
    expected = ref(value, axis=axis, keepdims=keepdims)
    assert_matches(evaluate(out, {x: value}), expected, dtype)
    check_infer_shape(out, {x: value})


@pytest.mark.parametrize(("name", "axis", "keepdims"), list(reduction_cases()))
def test_reduction_static_shape(name, axis, keepdims):
    fn, ref, _ = REDUCTIONS[name]
    x = kt.tensor("x", shape=SHAPE)
    out = fn(x, axis=axis, keepdims=keepdims)
    assert out.type.shape == np.shape(ref(np.ones(SHAPE), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize(
    ("axis", "keepdims", "static", "expected"),
    [
        (0, False, (None, 3, None), (3, None)),
        (1, True, (None, 3, None), (None, 1, None)),
        ((0, 2), False, (None, 3, None), (3,)),
        (None, True, (None, 3, None), (1, 1, 1)),
    ],
)
def test_reduction_partial_static_shape(axis, keepdims, static, expected):
    x = kt.tensor("x", shape=static)
    for fn in (kt.sum, kt.mean, kt.var, kt.logsumexp, kt.max):
        assert fn(x, axis=axis, keepdims=keepdims).type.shape == expected


@pytest.mark.parametrize("ddof", [0, 1, 1.5])
@pytest.mark.parametrize("axis", [None, 0, (1, 2)])
@pytest.mark.parametrize("fn", [kt.var, kt.std], ids=["var", "std"])
def test_ddof(fn, axis, ddof):
    value = random_array(SHAPE, "float64")
    x = kt.tensor("x", shape=(None, None, None))
    ref = np.var if fn is kt.var else np.std
    np.testing.assert_allclose(
        evaluate(fn(x, axis=axis, ddof=ddof), {x: value}), ref(value, axis=axis, ddof=ddof)
    )


def test_var_too_few_elements_is_inf_or_nan_as_numpy():
    x = kt.vector("x")
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        expected = np.var(np.ones(2), ddof=2)
    assert np.isinf(expected) or np.isnan(expected)
    result = evaluate(kt.var(x, ddof=2), {x: np.ones(2)})
    np.testing.assert_array_equal(result, expected)


def test_mean_of_float16_keeps_dtype():
    x = kt.vector("x", dtype="float16")
    value = np.linspace(0, 1, 7).astype("float16")
    out = evaluate(kt.mean(x), {x: value})
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, np.mean(value), rtol=1e-3)


def test_mean_method_and_interning():
    x = kt.matrix("x")
    assert x.mean(axis=0) is kt.mean(x, axis=0)
    assert kt.cumsum(x, axis=1) is kt.cumsum(x, axis=1)
    assert CumSum(0) == CumSum(0) and CumSum(0) != CumSum(0, reverse=True)
    assert Argmax(1) == Argmax(1) and hash(Argmax(None)) == hash(Argmax(None))


# --- argmax --------------------------------------------------------------------------------


def test_argmax_ties_and_nan_follow_numpy():
    x = kt.matrix("x")
    value = np.array([[1.0, 3.0, 3.0], [np.nan, 0.0, np.nan]])
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(
            evaluate(kt.argmax(x, axis=axis), {x: value}), np.argmax(value, axis=axis)
        )


def test_argmax_has_no_gradient():
    x = kt.vector("x")
    assert Argmax(0).grad([x], [kt.vector("g")]) == [None]
    # The argmax branch contributes nothing to the gradient.
    cost = kt.sum(x) + kt.cast(kt.argmax(x), "float64")
    np.testing.assert_array_equal(evaluate(kt.grad(cost, x), {x: np.arange(3.0)}), np.ones(3))


def test_argmax_of_empty_axis_is_an_error():
    with pytest.raises(KilnValueError, match="zero-length"):
        kt.argmax(kt.tensor("x", shape=(2, 0)), axis=1)
    x = kt.matrix("x")
    with pytest.raises(KilnValueError, match="empty"):
        evaluate(kt.argmax(x, axis=1), {x: np.ones((2, 0))})


# --- logsumexp -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        np.array([[1000.0, 1000.0, -1000.0], [-1000.0, -1001.0, -np.inf]]),
        np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0]]),
        np.array([[np.inf, np.inf, 0.0], [-np.inf, 0.0, 0.0]]),
    ],
    ids=["large", "all-minus-inf", "plus-inf"],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_is_stable(value, keepdims):
    x = kt.matrix("x")
    with np.errstate(all="ignore"):
        expected = sp.logsumexp(value, axis=1, keepdims=keepdims)
        result = evaluate(kt.logsumexp(x, axis=1, keepdims=keepdims), {x: value})
    np.testing.assert_allclose(result, expected)


# --- cumsum --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + ["uint8"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2])
def test_cumsum_matches_numpy(axis, dtype):
    value = random_array(SHAPE, "int32" if dtype == "uint8" else dtype)
    value = np.abs(value).astype(dtype) if dtype == "uint8" else value
    x = kt.tensor("x", dtype=dtype, shape=(None, 3, None))
    out = kt.cumsum(x, axis=axis)
    assert_matches(evaluate(out, {x: value}), np.cumsum(value, axis=axis), dtype)
    check_infer_shape(out, {x: value})


@pytest.mark.parametrize(
    ("shape", "axis", "expected"),
    [
        ((2, 3, 4), None, (24,)),
        ((2, None), None, (None,)),
        ((2, None), 0, (2, None)),
        ((), None, (1,)),
    ],
)
def test_cumsum_static_shape(shape, axis, expected):
    assert kt.cumsum(kt.tensor("x", shape=shape), axis=axis).type.shape == expected


def test_cumsum_of_a_scalar():
    x = kt.scalar("x")
    for axis in (None, 0):
        out = kt.cumsum(x, axis=axis)
        np.testing.assert_array_equal(evaluate(out, {x: 3.0}), np.cumsum(np.float64(3.0)))
        check_infer_shape(out, {x: 3.0})


def test_reverse_cumsum():
    x = kt.matrix("x")
    value = random_array((3, 4), "float64")
    out = CumSum(1, reverse=True)(x)
    expected = np.flip(np.cumsum(np.flip(value, 1), axis=1), 1)
    np.testing.assert_allclose(evaluate(out, {x: value}), expected)


# --- gradients -----------------------------------------------------------------------------

GRAD_FUNCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "logsumexp"]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("name", GRAD_FUNCTIONS)
def test_reduction_gradient(name, axis, keepdims):
    fn = REDUCTIONS[name][0]
    # Distinct entries away from zero: max/min have no ties, prod no zeros.
    value = np.random.default_rng(1).permutation(np.arange(1, 25)).reshape(SHAPE) / 10.0
    verify_grad(lambda a: fn(a, axis=axis, keepdims=keepdims), [value])


@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_gradient_with_ddof(ddof):
    value = random_array((3, 4), "float64")
    verify_grad(lambda a: kt.var(a, axis=1, ddof=ddof), [value])
    verify_grad(lambda a: kt.std(a, axis=0, ddof=ddof), [value])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum_gradient(axis):
    value = random_array((3, 4), "float64")
    verify_grad(lambda a: kt.cumsum(a, axis=axis), [value])
    op_axis = None if axis is None else axis % 2  # the Op takes a normalized axis
    verify_grad(lambda a: CumSum(op_axis, reverse=True)(a), [value])


def test_cumsum_second_derivative():
    x = kt.vector("x")
    cost = kt.sum(kt.cumsum(x**2) * kt.arange(1.0, 4.0))
    g = kt.grad(cost, x)  # 2 x_j * sum_{i >= j} (i + 1)
    value = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(evaluate(g, {x: value}), 2 * value * np.array([6.0, 5.0, 3.0]))
    verify_grad(lambda a: kt.grad(kt.sum(kt.cumsum(a**2)), a), [value])


@pytest.mark.parametrize(
    "value",
    [
        np.array([[1.5, 0.0, 2.0], [3.0, -1.0, 2.0]]),
        np.array([[0.0, 0.0, 2.0], [3.0, 0.0, 2.0]]),
    ],
    ids=["one-zero", "two-zeros"],
)
def test_prod_gradient_with_zeros(value):
    verify_grad(lambda a: kt.prod(a, axis=1), [value])
    verify_grad(lambda a: kt.prod(a), [value])


def test_float32_gradient():
    value = random_array((3, 4), "float32")
    verify_grad(lambda a: kt.logsumexp(a, axis=1), [value])
    verify_grad(lambda a: kt.var(a, axis=0), [value])


def test_reduction_of_integers_has_no_gradient():
    x = kt.vector("x")
    i = kt.vector("i", dtype="int32")
    cost = kt.sum(x) + kt.mean(i) + kt.cast(kt.sum(kt.cumsum(i)), "float64")
    np.testing.assert_array_equal(evaluate(kt.grad(cost, x), {x: np.ones(2)}), np.ones(2))


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(REDUCTIONS) + ["cumsum"])
@pytest.mark.parametrize("axis", [3, -4])
def test_unknown_axis(name, axis):
    fn = kt.cumsum if name == "cumsum" else REDUCTIONS[name][0]
    with pytest.raises(KilnValueError, match=f"axis: {axis} is out of range for a 3-d"):
        fn(kt.tensor("x", shape=(None, None, None)), axis=axis)


@pytest.mark.parametrize("fn", [kt.sum, kt.mean, kt.var, kt.logsumexp])
def test_repeated_or_bad_axis(fn):
    x = kt.matrix("x")
    with pytest.raises(KilnValueError, match="repeated axis"):
        fn(x, axis=(0, -2))
    with pytest.raises(KilnTypeError, match="axis"):
        fn(x, axis=1.0)


@pytest.mark.parametrize("fn", [kt.argmax, kt.cumsum])
def test_single_axis_functions_reject_tuples(fn):
    with pytest.raises(KilnTypeError, match="axis must be None or an int"):
        fn(kt.matrix("x"), axis=(0, 1))


def test_bad_ddof_and_complex_input():
    x = kt.matrix("x")
    with pytest.raises(KilnTypeError, match="ddof"):
        kt.var(x, ddof="1")
    z = kt.vector("z", dtype="complex128")
    for fn in (kt.mean, kt.var, kt.std, kt.logsumexp, kt.argmax):
        with pytest.raises(KilnTypeError, match="complex"):
            fn(z)
