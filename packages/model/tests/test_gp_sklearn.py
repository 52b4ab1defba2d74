"""kl.gp's covariances against scikit-learn's kernels where the two define the same function.

An independent implementation next to the hand-written NumPy of ``test_gp.py``. The
parametrizations differ in places: scikit-learn's ``ExpSineSquared`` has
``exp(-2 sin^2(pi d / p) / l^2)`` where PyMC's ``Periodic`` has ``exp(-0.5 sin^2(pi d /
T) / ls^2)`` (so ``l = 2 ls``), and its ``DotProduct`` is ``sigma_0^2 + x . x'``
(PyMC's ``Linear`` with ``c = 0``, plus a ``Constant``).
"""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl

kernels = pytest.importorskip("sklearn.gaussian_process.kernels")

cov = kl.gp.cov
RNG = np.random.default_rng(11)
X = np.column_stack([np.linspace(0.0, 5.0, 12), RNG.uniform(-2, 2, 12)])
XS = np.column_stack([np.linspace(-1.0, 6.0, 7), RNG.uniform(-2, 2, 7)])
LS = np.array([0.8, 1.7])


class _first_input:
    """A scikit-learn kernel of the first input column only (PyMC's ``active_dims=[0]``)."""

    def __init__(self, kernel) -> None:
        self.kernel = kernel

    def __call__(self, a, b=None):
        return self.kernel(a[:, :1], None if b is None else b[:, :1])

    def diag(self, a):
        return self.kernel.diag(a[:, :1])


PAIRS = {
    "ExpQuad": (cov.ExpQuad(2, ls=LS), kernels.RBF(length_scale=LS)),
    "ExpQuad ls_inv": (cov.ExpQuad(2, ls_inv=1.0 / LS), kernels.RBF(length_scale=LS)),
    "Matern52": (cov.Matern52(2, ls=LS), kernels.Matern(length_scale=LS, nu=2.5)),
    "Matern32": (cov.Matern32(2, ls=LS), kernels.Matern(length_scale=LS, nu=1.5)),
    "Matern12": (cov.Matern12(2, ls=LS), kernels.Matern(length_scale=LS, nu=0.5)),
    "Exponential": (  # PyMC's Exponential is exp(-0.5 r): Matern 1/2 at twice the scale
        cov.Exponential(2, ls=LS),
        kernels.Matern(length_scale=2.0 * LS, nu=0.5),
    ),
    "RatQuad": (  # isotropic: scikit-learn's has one length scale
        cov.RatQuad(2, alpha=0.7, ls=1.3),
        kernels.RationalQuadratic(length_scale=1.3, alpha=0.7),
    ),
    "Periodic": (  # one input: scikit-learn's is of the Euclidean distance, PyMC's per input
        cov.Periodic(2, period=2.3, ls=0.6, active_dims=[0]),
        _first_input(kernels.ExpSineSquared(length_scale=1.2, periodicity=2.3)),
    ),
    "Linear + Constant": (
        cov.Linear(2, c=0.0) + cov.Constant(0.49),
        kernels.DotProduct(sigma_0=0.7),
    ),
    "scaled": (
        1.7**2 * cov.Matern52(2, ls=LS),
        kernels.ConstantKernel(1.7**2) * kernels.Matern(length_scale=LS, nu=2.5),
    ),
    "sum and product": (
        cov.ExpQuad(2, ls=LS) * cov.RatQuad(2, alpha=2.0, ls=1.1) + cov.Constant(0.3),
        kernels.RBF(length_scale=LS) * kernels.RationalQuadratic(length_scale=1.1, alpha=2.0)
        + kernels.ConstantKernel(0.3),
    ),
    "power": (
        cov.Matern32(2, ls=LS) ** 2,
        kernels.Exponentiation(kernels.Matern(length_scale=LS, nu=1.5), 2),
    ),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_covariances_match_scikit_learns_kernels(name: str) -> None:
    ours, theirs = PAIRS[name]
    full, cross, diag = kl.draw([ours(X), ours(X, XS), ours(X, diag=True)])
    # kl.gp's distances carry PyMC's sqrt(d**2 + 1e-12): 1e-6 off at distance 0 for the
    # kernels of |d| (Matern, Exponential).
    atol = 2e-6 if "Matern" in name or "Exponential" in name or "power" in name else 1e-12
    np.testing.assert_allclose(full, theirs(X), rtol=1e-10, atol=atol)
    np.testing.assert_allclose(cross, theirs(X, XS), rtol=1e-10, atol=atol)
    np.testing.assert_allclose(diag, theirs.diag(X), rtol=1e-10, atol=atol)


def test_white_noise_is_scikit_learns_white_kernel() -> None:
    ours, theirs = cov.WhiteNoise(0.4), kernels.WhiteKernel(noise_level=0.16)
    full, cross, diag = kl.draw([ours(X), ours(X, XS), ours(X, diag=True)])
    np.testing.assert_allclose(full, theirs(X), rtol=1e-14)
    np.testing.assert_allclose(cross, theirs(X, XS), rtol=1e-14)
    np.testing.assert_allclose(diag, theirs.diag(X), rtol=1e-14)
