"""The Hilbert-space approximate GP (``kl.gp.HSGP``), as PyMC's ``pm.gp.HSGP``.

Solin and Särkkä's basis: on ``[-L, L]`` per input dimension (the inputs centred), the
Laplacian's eigenfunctions ``phi_j(x) = sin(sqrt(lambda_j) (x + L)) / sqrt(L)`` with
``lambda_j = (pi j / (2 L))**2``, all products of ``m_d`` of them over the dimensions; a
stationary covariance is approximately ``phi diag(S(sqrt(lambda))) phi^T`` with ``S``
its power spectral density. ``f = mean(X) + phi (beta * sqrt(S))`` with standard normal
``beta``: a linear model of ``prod(m)`` coefficients, whatever the number of points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._model import Deterministic
from kiln_model.gp._gp import _GP
from kiln_model.gp.cov import (
    Add,
    BaseCovariance,
    ExpQuad,
    Matern32,
    Matern52,
    Prod,
    Stationary,
    as_inputs,
)
from kiln_model.gp.mean import Mean

__all__ = ["HSGP", "calc_eigenvalues", "calc_eigenvectors", "power_spectral_density"]


def calc_eigenvalues(L: Any, m: Sequence[int]) -> TensorVariable:
    """Return the ``(prod(m), D)`` eigenvalues ``(pi j_d / (2 L_d))**2`` of every basis product."""
    S = np.array(list(itertools.product(*(range(1, k + 1) for k in m))), dtype="float64")
    return ((math.pi * kt.constant(S)) / (2.0 * kt.as_tensor(L, dtype="float64"))) ** 2


def calc_eigenvectors(
    Xs: TensorVariable, L: Any, eigvals: TensorVariable, m: Sequence[int]
) -> TensorVariable:
    """Return the ``(n, prod(m))`` basis functions at the centred inputs ``Xs``."""
    L = kt.as_tensor(L, dtype="float64")
    phi: Any = 1.0
    for d in range(len(m)):
        term = kt.sqrt(eigvals[:, d])[None, :] * (Xs[:, d][:, None] + L[d])
        phi = phi * (kt.sin(term) / kt.sqrt(L[d]))
    return phi  # type: ignore[no-any-return]


def power_spectral_density(cov: BaseCovariance, omega: TensorVariable) -> TensorVariable:
    """Return the power spectral density of ``cov`` at the ``(k, D)`` frequencies ``omega``.

    For ``ExpQuad``, ``Matern52`` and ``Matern32``, their sums and their products with
    numbers or scalar tensors (``eta**2 * k``).
    """
    if isinstance(cov, Add):
        parts = [power_spectral_density(f, omega) for f in cov.factors]
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out
    if isinstance(cov, Prod):
        kernels = [f for f in cov.factors if isinstance(f, BaseCovariance)]
        if len(kernels) != 1:
            raise KilnValueError(
                "HSGP: a product of covariances has no power spectral density here; use "
                "one stationary covariance scaled by numbers or scalar random variables"
            )
        out = power_spectral_density(kernels[0], omega)
        for f in cov.factors:
            if not isinstance(f, BaseCovariance):
                out = out * kt.as_tensor(f, dtype="float64")
        return out
    if not isinstance(cov, ExpQuad | Matern52 | Matern32):
        raise KilnValueError(
            f"HSGP: {type(cov).__name__} has no power spectral density; use ExpQuad, "
            "Matern52 or Matern32 (scaled or summed)"
        )
    D = len(cov.active_dims)
    ls = cov.ls * kt.ones((D,))
    w2 = kt.dot(omega**2, ls**2)
    scale = kt.prod(ls)
    if isinstance(cov, ExpQuad):
        return math.sqrt(2.0 * math.pi) ** D * scale * kt.exp(-0.5 * w2)
    nu = 2.5 if isinstance(cov, Matern52) else 1.5
    half = (D + 2 * nu) / 2.0
    const = 2.0**D * math.pi ** (D / 2.0) * math.gamma(half) * (2 * nu) ** nu / math.gamma(nu)
    return const * scale * (2 * nu + w2) ** (-half)


def _stationary_dims(cov: BaseCovariance) -> np.ndarray:
    if isinstance(cov, Stationary):
        return cov.active_dims
    factors = getattr(cov, "factors", [])
    found = [_stationary_dims(f) for f in factors if isinstance(f, BaseCovariance)]
    if not found:
        raise KilnValueError("HSGP: cov_func holds no stationary covariance")
    return found[0]


class HSGP(_GP):
    """The Hilbert-space approximation of a GP with a stationary covariance.

    Parameters
    ----------
    m
        The number of basis functions per active input dimension.
    L, c
        The half-width of the interval per dimension, or (``c``, PyMC's default 1.5 as
        well) the multiple of the centred inputs' largest magnitude it is set to.
    drop_first
        Leave out the first basis function (it is near constant for large ``L``).
    parametrization
        ``"noncentered"`` (the default) or ``"centered"`` coefficients.
    """

    def __init__(
        self,
        m: Sequence[int],
        L: Any = None,  # noqa: N803 (PyMC's name)
        c: float | None = None,
        drop_first: bool = False,
        parametrization: str = "noncentered",
        *,
        mean_func: Mean | None = None,
        cov_func: BaseCovariance,
    ) -> None:
        super().__init__(mean_func=mean_func, cov_func=cov_func)
        self.m = [int(k) for k in m]
        if not self.m or min(self.m) < 1:
            raise KilnValueError(f"m: expected a number of basis functions >= 1 per dim, got {m}")
        if L is not None and c is not None:
            raise KilnTypeError("HSGP: give L or c, not both")
        if parametrization not in ("noncentered", "centered"):
            raise KilnValueError(
                f"parametrization: 'noncentered' or 'centered', got {parametrization!r}"
            )
        self.dims = _stationary_dims(cov_func)
        if len(self.dims) != len(self.m):
            raise KilnValueError(
                f"m: {len(self.m)} entries for {len(self.dims)} active input dimensions"
            )
        self._L = None if L is None else kt.as_tensor(L, dtype="float64") * kt.ones((len(self.m),))
        self.c = 1.5 if c is None and L is None else c
        self.drop_first = bool(drop_first)
        self.parametrization = parametrization

    def _active(self, X: Any) -> TensorVariable:
        X = as_inputs(X)
        return X[:, kt.constant(self.dims)]

    def prior_linearized(self, X: Any) -> tuple[TensorVariable, TensorVariable]:
        """Return the basis ``phi`` (``(n, k)``) at ``X`` and the square root of the PSD.

        ``f = mean(X) + phi @ (beta * sqrt_psd)`` with standard normal ``beta`` is the
        approximate GP at ``X``; this fixes the centre and ``L`` from ``X``.
        """
        x = self._active(X)
        self._X_center = (kt.max(x, axis=0) + kt.min(x, axis=0)) / 2.0
        xs = x - self._X_center
        if self._L is None:
            self.L = self.c * kt.max(kt.abs(xs), axis=0)
        else:
            self.L = self._L
        self._eigvals = calc_eigenvalues(self.L, self.m)
        phi = calc_eigenvectors(xs, self.L, self._eigvals, self.m)
        psd = power_spectral_density(self.cov_func, kt.sqrt(self._eigvals))
        first = int(self.drop_first)
        return phi[:, first:], kt.sqrt(psd[first:])

    def prior(
        self,
        name: str,
        X: Any,
        hsgp_coeffs_dims: Any = None,
        gp_dims: Any = None,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the approximate GP's values at ``X`` under ``name``."""
        from kiln_model._continuous import Normal

        phi, sqrt_psd = self.prior_linearized(X)
        k = int(np.prod(self.m)) - int(self.drop_first)
        shape = None if hsgp_coeffs_dims is not None else k
        if self.parametrization == "noncentered":
            beta = Normal(f"{name}_hsgp_coeffs", 0.0, 1.0, shape=shape, dims=hsgp_coeffs_dims)
            coeffs = beta * sqrt_psd
        else:
            coeffs = beta = Normal(
                f"{name}_hsgp_coeffs", 0.0, sqrt_psd, shape=shape, dims=hsgp_coeffs_dims
            )
        self._beta, self._sqrt_psd, self._coeffs = beta, sqrt_psd, coeffs
        return Deterministic(name, self.mean_func(X) + kt.dot(phi, coeffs), dims=gp_dims)

    def conditional(self, name: str, Xnew: Any, dims: Any = None, **kwargs: Any) -> TensorVariable:
        """Add and return the approximate GP at ``Xnew`` (a deterministic of the prior's)."""
        if not hasattr(self, "_coeffs"):
            raise KilnValueError(f"{name}: call prior(...) first")
        xs = self._active(Xnew) - self._X_center
        phi = calc_eigenvectors(xs, self.L, self._eigvals, self.m)[:, int(self.drop_first) :]
        return Deterministic(name, self.mean_func(Xnew) + kt.dot(phi, self._coeffs), dims=dims)
