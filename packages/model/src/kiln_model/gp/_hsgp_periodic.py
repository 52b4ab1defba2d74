"""The Hilbert-space approximation of a periodic GP (``kl.gp.HSGPPeriodic``), as PyMC's.

The periodic covariance ``exp(-0.5 (sin(pi tau / period) / ls)**2)`` is
``exp(a (cos(w0 tau) - 1))`` with ``a = 1 / (4 ls**2)`` and ``w0 = 2 pi / period``, and
the generating function of the modified Bessel functions expands it as a cosine series:
``sum_{j >= 0} c_j ive(j, a) cos(j w0 tau)`` with ``c_0 = 1``, ``c_j = 2`` and ``ive`` the
exponentially scaled modified Bessel function of the first kind. With
``cos(j w0 (x - x')) = cos(j w0 x) cos(j w0 x') + sin(j w0 x) sin(j w0 x')``, the first
``m`` terms are a linear model of ``2 m - 1`` standard normal coefficients whose
covariance is the truncated series: ``f = mean(X) + phi_cos (psd * beta_cos) + phi_sin
(psd * beta_sin)`` with ``psd_j = scale * sqrt(c_j ive(j, a))``.

``ive(j, a)`` is computed by the trapezoidal rule on
``(1 / pi) * integral_0^pi exp(a (cos t - 1)) cos(j t) dt``: a periodic integrand, so
the rule is exact up to aliasing (an error of about ``ive(2 N - j, a)`` with ``N``
intervals). It is one constant matrix times ``exp(a (cos t_k - 1))``: an ordinary graph
expression of ``ls`` (which may be a random variable), differentiable and available on
every backend.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._model import Deterministic
from kiln_model.gp._gp import _GP
from kiln_model.gp._periodic_series import _check_m, ive_by_quadrature, periodic_sqrt_psd
from kiln_model.gp.cov import Periodic, as_inputs
from kiln_model.gp.mean import Mean

__all__ = ["HSGPPeriodic", "calc_basis_periodic", "ive_by_quadrature", "periodic_sqrt_psd"]


def calc_basis_periodic(Xs: Any, period: Any, m: int) -> tuple[TensorVariable, TensorVariable]:
    """Return ``cos(j w0 xs)`` and ``sin(j w0 xs)`` (each ``(n, m)``, ``j < m``).

    ``Xs`` holds the centred inputs of one dimension (a vector or an ``(n, 1)`` matrix)
    and ``w0 = 2 pi / period``; the sine basis' first column (``j = 0``) is zeros.
    """
    m = _check_m(m)
    xs = as_inputs(Xs)
    if xs.type.shape[1] not in (1, None):
        raise KilnValueError(
            f"Xs: expected the inputs of one dimension, got {xs.type.shape[1]} columns"
        )
    period = kt.as_tensor(period, dtype="float64")
    if period.type.shape not in ((), (1,), (None,)):
        raise KilnValueError(f"period: expected one period, got shape {period.type.shape}")
    angle = (2.0 * math.pi) * xs / period * kt.constant(np.arange(m, dtype="float64"))
    return kt.cos(angle), kt.sin(angle)


class HSGPPeriodic(_GP):
    """The Hilbert-space approximation of a GP with a ``Periodic`` covariance.

    The first ``m`` terms of the covariance's cosine series in ``cos(j w0 tau)``: ``2 m -
    1`` standard normal coefficients (``m`` for the cosines, ``m - 1`` for the sines),
    whatever the number of points, with ``f`` exactly periodic in the active input.

    Parameters
    ----------
    m
        The number of cosine terms (orders ``j = 0, ..., m - 1``). The covariance's
        truncation error is about ``2 ive(m, 1 / (4 ls**2))``: ``m = max(10, 4 / ls)``
        for the smallest ``ls`` of interest leaves less than 1e-9.
    scale
        The GP's standard deviation (a number or a random variable): the covariance is
        ``scale**2 * cov_func``.
    mean_func
        The mean function (``kl.gp.mean.Zero()`` when not given).
    cov_func
        A ``kl.gp.cov.Periodic`` over one active input dimension, unscaled: its variance
        goes through ``scale``, as in PyMC.

    Notes
    -----
    The amplitudes are the expansion of ``kl.gp.cov.Periodic`` itself, ``scale *
    sqrt(c_j ive(j, 1 / (4 ls**2)))``, so ``phi_cos diag(psd**2) phi_cos^T + phi_sin
    diag(psd**2) phi_sin^T`` tends to ``scale**2 * Periodic(X)`` as ``m`` grows. PyMC's
    ``HSGPPeriodic`` uses ``scale * c_j ive(j, 1 / ls**2)`` (no square root, a different
    ``a``), whose covariance does not tend to its own ``Periodic`` kernel (at ``ls =
    0.7`` its prior variance is about 0.32, not 1); the same ``ls`` and ``scale`` give a
    different prior here.

    Examples
    --------
    >>> import numpy as np
    >>> import kiln as kl
    >>> x = np.linspace(0, 10, 200)
    >>> with kl.Model():  # doctest: +SKIP
    ...     ls = kl.Gamma("ls", 4, 4)
    ...     scale = kl.HalfNormal("scale", 1)
    ...     cov_func = kl.gp.cov.Periodic(1, period=2.5, ls=ls)
    ...     gp = kl.gp.HSGPPeriodic(m=20, scale=scale, cov_func=cov_func)
    ...     f = gp.prior("f", X=x[:, None])
    ...     kl.Normal("y", f, 0.3, observed=np.sin(2 * np.pi * x / 2.5))
    """

    def __init__(
        self,
        m: int,
        scale: Any = 1.0,
        *,
        mean_func: Mean | None = None,
        cov_func: Periodic,
    ) -> None:
        super().__init__(mean_func=mean_func, cov_func=cov_func)
        self._m = _check_m(m)
        if not isinstance(cov_func, Periodic):
            raise KilnTypeError(
                f"cov_func: expected a kl.gp.cov.Periodic, got {type(cov_func).__name__} (give "
                "the GP's standard deviation as scale=, not as a factor of the covariance)"
            )
        if len(cov_func.active_dims) != 1:
            raise KilnValueError(
                "cov_func: expected a Periodic over one active input dimension, got "
                f"{len(cov_func.active_dims)} (active_dims={cov_func.active_dims.tolist()})"
            )
        self.cov_func: Periodic = cov_func
        self.scale = scale
        self._X_center: TensorVariable | None = None

    @property
    def m(self) -> int:
        """The number of cosine terms."""
        return self._m

    def _centred(self, X: Any) -> TensorVariable:
        x, _ = self.cov_func._slice(as_inputs(X), None)
        if self._X_center is None:
            self._X_center = (kt.max(x, axis=0) + kt.min(x, axis=0)) / 2.0
        return x - self._X_center  # type: ignore[no-any-return]

    def _psd(self) -> TensorVariable:
        return kt.as_tensor(self.scale, dtype="float64") * periodic_sqrt_psd(self.cov_func, self._m)

    def prior_linearized(
        self, X: Any
    ) -> tuple[tuple[TensorVariable, TensorVariable], TensorVariable]:
        """Return the bases ``(phi_cos, phi_sin)`` (each ``(n, m)``) at ``X`` and ``psd``.

        ``f = mean(X) + phi_cos @ (psd * beta[:m]) + phi_sin[:, 1:] @ (psd[1:] *
        beta[m:])`` with ``2 m - 1`` standard normal ``beta`` is the approximate GP at
        ``X``. The first call fixes the centre, ``(max + min) / 2`` of ``X``'s active
        column, for later calls and the conditional.
        """
        xs = self._centred(X)
        phi_cos, phi_sin = calc_basis_periodic(xs, self.cov_func.period, self._m)
        return (phi_cos, phi_sin), self._psd()

    def _f(self, X: Any, phi_cos: TensorVariable, phi_sin: TensorVariable) -> TensorVariable:
        m = self._m
        out = self.mean_func(X) + kt.dot(phi_cos, self._coeffs[:m])
        if m > 1:
            out = out + kt.dot(phi_sin[:, 1:], self._coeffs[m:])
        return out  # type: ignore[no-any-return]

    def prior(
        self,
        name: str,
        X: Any,
        dims: Any = None,
        hsgp_coeffs_dims: Any = None,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the approximate GP's values at ``X`` under ``name``.

        The ``2 m - 1`` standard normal coefficients are ``{name}_hsgp_coeffs`` (the
        cosines' first, then the sines'); ``dims`` names ``f``'s dimension.
        """
        from kiln_model._continuous import Normal

        (phi_cos, phi_sin), psd = self.prior_linearized(X)
        m = self._m
        shape = None if hsgp_coeffs_dims is not None else 2 * m - 1
        beta = Normal(f"{name}_hsgp_coeffs", 0.0, 1.0, shape=shape, dims=hsgp_coeffs_dims)
        self._beta = beta
        self._coeffs = beta * kt.concatenate([psd, psd[1:]])
        return Deterministic(name, self._f(X, phi_cos, phi_sin), dims=dims)

    def conditional(self, name: str, Xnew: Any, dims: Any = None, **kwargs: Any) -> TensorVariable:
        """Add and return the approximate GP at ``Xnew`` (a deterministic of the prior's)."""
        if not hasattr(self, "_coeffs"):
            raise KilnValueError(f"{name}: call prior(...) before conditional(...)")
        xs = self._centred(Xnew)
        phi_cos, phi_sin = calc_basis_periodic(xs, self.cov_func.period, self._m)
        return Deterministic(name, self._f(Xnew, phi_cos, phi_sin), dims=dims)
