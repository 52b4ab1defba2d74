"""An Op with only ``perform`` runs through Numba's object mode, with one warning."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_graph import Apply, Op, TensorType
from kiln_numba import ObjectModeWarning

NUMBA_RAW = kiln.Mode(rewrites=None, linker="numba")


class HypotAndArgmin(Op):
    """``(hypot(x, y), argmin(x))``: defined here, in no kiln package, with only perform."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = kt.as_tensor(x), kt.as_tensor(y)
        return Apply.create(self, [x, y], [x.type, TensorType("int64", ())])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        x, y = inputs
        outputs[0] = np.hypot(x, y)
        outputs[1] = np.argmin(x)


def test_op_without_implementation_runs_in_object_mode_with_one_warning():
    """Exactly one ObjectModeWarning naming the Op; values as NumPy, calls repeat."""
    x, y = kt.vector("x"), kt.vector("y")
    h, i = HypotAndArgmin()(x, y)
    outputs = [kt.exp(h) * 2, i + 1, HypotAndArgmin()(y, x)[0]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = kiln.function([x, y], outputs, mode=NUMBA_RAW)
        xv, yv = np.array([3.0, -1.0, 0.5]), np.array([4.0, 2.0, -2.0])
        for _ in range(2):
            a, b, c = f(xv, yv)
            np.testing.assert_allclose(a, np.exp(np.hypot(xv, yv)) * 2, rtol=1e-14)
            assert b.dtype == np.int64 and b == np.argmin(xv) + 1
            np.testing.assert_allclose(c, np.hypot(yv, xv), rtol=1e-14)
    object_mode = [w for w in caught if issubclass(w.category, ObjectModeWarning)]
    assert len(object_mode) == 1, [str(w.message) for w in caught]
    assert "HypotAndArgmin" in str(object_mode[0].message)
    assert "numba.objmode" in f.thunk.source
    # The module holds Python objects: it is compiled in memory, never cached on disk.
    assert f.thunk.stage2["cache"] == "uncacheable"


def test_warning_is_given_once_per_op_class():
    """A second graph with the same Op compiles without a second warning."""
    x = kt.vector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ObjectModeWarning)
        kiln.function([x], HypotAndArgmin()(x, x)[0], mode=NUMBA_RAW)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ObjectModeWarning)
        f = kiln.function([x], HypotAndArgmin()(x, x)[0] + 1, mode=NUMBA_RAW)
    np.testing.assert_allclose(f(np.array([3.0])), [np.hypot(3.0, 3.0) + 1])


def test_object_mode_errors_propagate():
    """An error raised by perform reaches the caller."""

    class Fails(Op):
        __props__ = ()

        def make_node(self, x: Any) -> Apply:
            x = kt.as_tensor(x)
            return Apply.create(self, [x], [x.type])

        def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
            raise ValueError("this op always fails")

    x = kt.vector("x")
    with pytest.warns(ObjectModeWarning, match="Fails"):
        f = kiln.function([x], Fails()(x) * 2, mode=NUMBA_RAW)
    with pytest.raises(ValueError, match="always fails"):
        f(np.ones(2))
