"""Gaussians as native log-densities, shared by the NUTS tests.

``gaussian_c`` (a 4-d badly scaled Gaussian) has the native ABI the kernels call
(:data:`LOGP_C`); :class:`Native` wraps such a function as kiln_samplers consumes it
(``NativePointers``); :func:`correlated_gaussian` makes a correlated one, natively and
in the compiled-model protocol.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit, types

from kiln_samplers._native import NativeLogp

MU = np.array([1.0, -2.0, 0.5, 10.0])
SD = np.array([1.0, 0.1, 3.0, 20.0])  # badly scaled: the mass matrix must adapt

#: The native ABI: ``int logp(size_t n, const double* x, double* grad, double* logp,
#: const void* user_data)`` (what kiln_compile.NativeModel.logp_cptr points at).
LOGP_C = types.intc(
    types.uintp,
    types.CPointer(types.float64),
    types.CPointer(types.float64),
    types.CPointer(types.float64),
    types.voidptr,
)


@njit
def gaussian_logp(n, x_, grad_, logp_):
    """Write the log-density and gradient of the 4-d Gaussian of ``MU`` and ``SD``; return 0."""
    x, grad = carray(x_, (n,)), carray(grad_, (n,))
    total = 0.0
    for i in range(n):
        z = (x[i] - MU[i]) / SD[i]
        grad[i] = -z / SD[i]
        total += z * z
    logp_[0] = -0.5 * total
    return 0


@cfunc(LOGP_C)
def gaussian_c(n, x_, grad_, logp_, user_data):
    return gaussian_logp(n, x_, grad_, logp_)


class Native:
    """A model's native log-density as kiln_samplers consumes it (``NativePointers``)."""

    def __init__(self, function=gaussian_c, n=4):
        self.logp_cptr = function.address
        self.expand_cptr = None
        self.user_data_ptr = 0
        self.n = n
        self.keep_alive = (function,)

    def refresh(self):
        pass

    def describe(self, code):
        return f"the test model's code {code}"


#: The native Gaussian called from Python: ``logp = fn(x, grad, user_data)``.
gaussian_native = NativeLogp(Native())


def correlated_gaussian(mean, cov):
    """Return a Gaussian of ``mean`` and ``cov``: its native function and its model class.

    The class is the compiled-model protocol (a Python log-density, ``x`` the draws'
    one variable; initial points uniform within one standard deviation of the mean).
    """
    mean, precision = np.asarray(mean, dtype="float64"), np.linalg.inv(cov)
    scales = np.sqrt(np.diagonal(cov))

    @cfunc(LOGP_C)
    def logp_c(n, x_, grad_, logp_, user_data):
        x, grad = carray(x_, (n,)), carray(grad_, (n,))
        total = 0.0
        for i in range(n):
            g = 0.0
            for j in range(n):
                g -= precision[i, j] * (x[j] - mean[j])
            grad[i] = g
            total += (x[i] - mean[i]) * g
        logp_[0] = 0.5 * total
        return 0

    class Model:
        ndim = mean.shape[0]
        out_names = ["x"]
        dims = {"x": None}
        coords: dict = {}

        def logp_dlogp(self, x):
            g = -precision @ (x - mean)
            return 0.5 * float((x - mean) @ g), g

        def logp(self, x):
            return self.logp_dlogp(x)[0]

        def expand(self, x):
            return {"x": x.copy()}

        def initial_point(self, seed=None):
            return mean + np.random.default_rng(seed).uniform(-1, 1, self.ndim) * scales

    return logp_c, Model
