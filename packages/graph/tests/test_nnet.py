"""softmax, log_softmax and logaddexp against SciPy / NumPy: values, extremes, gradients."""

import numpy as np
import pytest
import scipy.special as sp

import kiln_graph.tensor as kt
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

AXES = [-1, 0, 1, None, (0, 1)]


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softmax_and_log_softmax_match_scipy(axis, dtype):
    m = kt.matrix("m", dtype=dtype)
    value = (np.random.default_rng(0).normal(size=(3, 4)) * 5).astype(dtype)
    rtol = 1e-13 if dtype == "float64" else 1e-5
    out = evaluate(kt.softmax(m, axis=axis), {m: value})
    assert out.dtype == dtype
    np.testing.assert_allclose(out, sp.softmax(value, axis=axis), rtol=rtol)
    out = evaluate(kt.log_softmax(m, axis=axis), {m: value})
    assert out.dtype == dtype
    np.testing.assert_allclose(out, sp.log_softmax(value, axis=axis), rtol=rtol)


def test_no_overflow_at_large_inputs():
    x = kt.vector("x")
    value = np.array([1000.0, 1000.0, -1000.0])
    np.testing.assert_allclose(evaluate(kt.softmax(x), {x: value}), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(
        evaluate(kt.log_softmax(x), {x: value}), sp.log_softmax(value), rtol=1e-14
    )
    # a -inf entry has probability 0 and log-probability -inf
    value = np.array([0.0, -np.inf])
    np.testing.assert_array_equal(evaluate(kt.softmax(x), {x: value}), [1.0, 0.0])
    np.testing.assert_array_equal(evaluate(kt.log_softmax(x), {x: value}), [0.0, -np.inf])


def test_integer_input_gives_float64():
    i = kt.vector("i", dtype="int32")
    assert kt.softmax(i).dtype == "float64"
    assert kt.log_softmax(i).dtype == "float64"
    value = np.array([1, 2, 3], dtype="int32")
    np.testing.assert_allclose(evaluate(kt.softmax(i), {i: value}), sp.softmax(value))


def test_bad_input_is_refused():
    x = kt.vector("x")
    with pytest.raises(KilnValueError, match="axis"):
        kt.softmax(x, axis=1)
    with pytest.raises(KilnTypeError, match="complex"):
        kt.log_softmax(kt.vector("z", dtype="complex128"))


@pytest.mark.parametrize("fn", [kt.softmax, kt.log_softmax], ids=lambda f: f.__name__)
def test_gradients_and_shapes(fn):
    value = np.random.default_rng(1).normal(size=(3, 4))
    verify_grad(lambda a: fn(a, axis=1), [value])
    verify_grad(lambda a: fn(a, axis=0), [value])
    m = kt.matrix("m")
    check_infer_shape(fn(m, axis=0), {m: value})


def test_logaddexp_extremes_and_gradient_at_ties():
    x, y = kt.vector("x"), kt.vector("y")
    a = np.array([1000.0, -1000.0, np.inf, -np.inf, 0.0])
    b = np.array([1000.0, -1000.0, np.inf, -np.inf, 3.0])
    np.testing.assert_array_equal(evaluate(kt.logaddexp(x, y), {x: a, y: b}), np.logaddexp(a, b))
    gx, gy = kt.grad(kt.sum(kt.logaddexp(x, y)), [x, y])
    got_x, got_y = evaluate([gx, gy], {x: a, y: b})
    np.testing.assert_allclose(got_x, [0.5, 0.5, 0.5, 0.5, sp.expit(-3.0)], rtol=1e-14)
    np.testing.assert_allclose(got_y, [0.5, 0.5, 0.5, 0.5, sp.expit(3.0)], rtol=1e-14)
