"""The cosine series of the periodic covariance: ``ive(j, a)`` of every order, in the graph.

``exp(a (cos(theta) - 1)) = sum_j c_j ive(j, a) cos(j theta)`` (``c_0 = 1``, ``c_j = 2``):
the coefficients of ``kl.gp.cov.Periodic``'s expansion, which ``kl.gp.HSGPPeriodic``
and ``Periodic.power_spectral_density_approx`` use. Below both, so that neither imports
the other.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt

__all__ = ["ive_by_quadrature", "periodic_sqrt_psd"]

#: The floor under a series coefficient before its square root: far below any
#: coefficient that matters (its square root, 1e-9, against an amplitude of order 1),
#: it keeps the square root's gradient bounded where the quadrature rounds a
#: coefficient that is really about 0 to 0 or to a tiny negative number.
_COEFF_FLOOR = 1e-18


def _n_intervals(m: int) -> int:
    """Return the quadrature's number of intervals for ``m`` orders.

    Its aliasing error, about ``ive(2 N - j, a)`` for ``j < m``, lies far below the
    series' own truncation error ``ive(m, a)``.
    """
    return 2 * m + 32


def _quadrature_matrix(m: int) -> np.ndarray:
    """Return the ``(m, N + 1)`` trapezoidal weights ``cos(j t_k) w_k / N``."""
    n = _n_intervals(m)
    t = math.pi * np.arange(n + 1) / n
    w = np.ones(n + 1)
    w[0] = w[-1] = 0.5
    return np.cos(np.outer(np.arange(m), t)) * w / n  # type: ignore[no-any-return]


def ive_by_quadrature(m: int, a: Any) -> TensorVariable:
    """Return ``ive(j, a)`` for ``j = 0, ..., m - 1`` as a graph expression of ``a``.

    The trapezoidal rule on ``(1 / pi) * integral_0^pi exp(a (cos t - 1)) cos(j t) dt``
    with ``N = 2 m + 32`` intervals; ``a`` is a scalar (a number or a scalar tensor, a
    random variable included) or a one-element vector. The error is about ``1e-16``
    absolute (``1e-18`` for the high orders at small ``a``): coefficients far below
    that come out as rounding noise, possibly negative.
    """
    m = _check_m(m)
    n = _n_intervals(m)
    cos_t = np.cos(math.pi * np.arange(n + 1) / n)
    a = kt.as_tensor(a, dtype="float64")
    if a.type.shape not in ((), (1,), (None,)):
        raise KilnValueError(
            f"a: expected a scalar (or a one-element vector), got shape {a.type.shape}"
        )
    if a.ndim == 1:  # indexed, not reshaped: the draws' batched graphs keep static shapes
        a = a[0]
    # The rule applied to exp(...) - 1, plus the rule on 1 (exactly 1 for j = 0 and 0
    # for j > 0): the same quadrature, but the high orders' sums no longer cancel
    # terms of order 1, which at small a (large ls) cuts their rounding error from
    # about 1e-16 to 1e-18.
    samples = kt.expm1(a * kt.constant(cos_t - 1.0))
    first = np.zeros(m)
    first[0] = 1.0
    return kt.dot(kt.constant(_quadrature_matrix(m)), samples) + kt.constant(first)


def periodic_sqrt_psd(cov_func: Any, m: int) -> TensorVariable:
    """Return ``sqrt(c_j ive(j, 1 / (4 ls**2)))`` for ``j < m``: the basis' amplitudes.

    ``c_0 = 1`` and ``c_j = 2``; these are the standard deviations of the cosine
    series' coefficients of ``cov_func`` (PyMC's ``Periodic.power_spectral_density_approx``
    plays this role).
    """
    m = _check_m(m)
    ls = cov_func.ls
    if ls.type.shape not in ((), (1,), (None,)):
        raise KilnValueError(
            f"cov_func: expected one length scale for one input dimension, got ls of shape "
            f"{ls.type.shape}"
        )
    q = ive_by_quadrature(m, 1.0 / (4.0 * ls**2))
    c = np.full(m, 2.0)
    c[0] = 1.0
    # An absolute floor (see _COEFF_FLOOR): rounding can make an ~0 coefficient negative.
    return kt.sqrt(kt.maximum(kt.constant(c) * q, _COEFF_FLOOR))


def _check_m(m: Any) -> int:
    if isinstance(m, bool) or not isinstance(m, int | np.integer):
        raise KilnTypeError(
            f"m: expected a positive int (the number of cosine terms), got {type(m).__name__} {m!r}"
        )
    if m < 1:
        raise KilnValueError(f"m: expected a positive int (the number of cosine terms), got {m}")
    return int(m)
