"""softmax / log_softmax (composed of existing ops) compile on Numba and match the VM."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm

pytestmark = pytest.mark.filterwarnings("error::kiln_numba.ObjectModeWarning")


def test_softmax_and_log_softmax_with_gradients() -> None:
    x = kt.matrix("x")
    cost = kt.sum(kt.log_softmax(x)[:, 0]) + kt.sum(kt.softmax(x, axis=0) ** 2)
    outs = [
        kt.softmax(x),
        kt.log_softmax(x),
        kt.log_softmax(x, axis=None),
        kt.log(kt.softmax(x)),  # rewritten into log_softmax by the stabilize phase
        kt.grad(cost, x),
    ]
    value = np.array([[1000.0, 1000.0, -np.inf], [0.0, 1.0, 2.0]])
    results = compare_with_vm([x], outs, [value], backend=kiln.FAST_RUN.with_linker("numba"))
    np.testing.assert_allclose(results[0], softmax(value, axis=-1))
    np.testing.assert_allclose(results[1], log_softmax(value, axis=-1))
    np.testing.assert_allclose(results[2], log_softmax(value, axis=None))
