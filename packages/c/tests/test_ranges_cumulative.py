"""ARange, Eye, Argmax and CumSum in C: NumPy's values to the bit, for each layout."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import FallbackWarning
from kiln_graph import KilnValueError
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


def _c_function(inputs: list, outputs: list) -> kc.Function:
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every op in C
        return kc.function(inputs, outputs, mode=C)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_values_are_numpys(dtype: str) -> None:
    """Every axis, the flattened input, a transposed (strided) input, NaN and ties."""
    x = kt.tensor("x", dtype=dtype, shape=(None, None, None))
    n = kt.scalar("n", dtype="int64")
    step_dtype = "float32" if dtype == "float32" else "float64"
    outs = [
        kt.argmax(x, axis=1),
        kt.argmax(x),
        kt.argmax(x.T, axis=0),
        kt.cumsum(x, axis=0),
        kt.cumsum(x),
        kt.cumsum(x.T, axis=1),
        kt.eye(n, n + 1, 1, dtype=dtype),
        kt.eye(n, 2, -3, dtype=dtype),
        kt.arange(n),
        kt.arange(0.5, n, 0.3, dtype=step_dtype),
        kt.arange(n, -4, -3),
    ]
    f = _c_function([x, n], outs)
    rng = np.random.default_rng(0)
    xv = np.round(rng.normal(size=(3, 4, 5)) * 2).astype(dtype)
    if dtype.startswith("float"):
        xv[1, 2, 3] = np.nan
    for got, want in zip(f(xv, 7), kc.function([x, n], outs)(xv, 7), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(f(xv, 7)[1], np.argmax(xv))
    np.testing.assert_array_equal(f(xv, 7)[9], np.arange(0.5, 7, 0.3, dtype=step_dtype))


def test_errors_are_the_vms() -> None:
    """An empty axis for argmax, a zero step for arange, a negative size for eye."""
    x = kt.matrix("x")
    n = kt.scalar("n", dtype="int64")
    with pytest.raises(KilnValueError, match="empty"):
        _c_function([x], [kt.argmax(x, axis=1)])(np.ones((2, 0)))
    with pytest.raises(KilnValueError, match="step must not be zero"):
        _c_function([n], [kt.arange(0, 5, n)])(0)
    with pytest.raises(KilnValueError, match="non-negative"):
        _c_function([n], [kt.eye(n)])(-1)
