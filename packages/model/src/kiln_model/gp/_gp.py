"""``Latent`` and ``Marginal`` Gaussian processes, as PyMC's ``pm.gp`` builds them.

Both work through the Cholesky factor of the covariance plus a small jitter on its
diagonal (PyMC's ``stabilize``), triangular solves and the log-determinant from the
factor's diagonal; a covariance that is not positive definite makes the Cholesky fail,
which the samplers take as a rejected point (a divergence), never as NaN draws.
"""

from __future__ import annotations

from typing import Any

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._model import Deterministic
from kiln_model._multivariate import MvNormal
from kiln_model.gp.cov import BaseCovariance, as_inputs
from kiln_model.gp.mean import Mean, Zero

__all__ = ["Latent", "Marginal"]

#: The jitter PyMC adds to a covariance's diagonal before its Cholesky factor.
JITTER = 1e-6


def stabilize(K: TensorVariable, jitter: float = JITTER) -> TensorVariable:
    """Return ``K + jitter * I`` (PyMC's ``pm.gp.util.stabilize``)."""
    return K + jitter * kt.eye(K.shape[0])


def _solve_lower(L: TensorVariable, b: TensorVariable) -> TensorVariable:
    return kt.solve_triangular(L, b, lower=True)


class _GP:
    def __init__(self, *, mean_func: Mean | None = None, cov_func: BaseCovariance) -> None:
        if not isinstance(cov_func, BaseCovariance):
            raise KilnTypeError(
                f"cov_func: expected a covariance of kl.gp.cov, got {type(cov_func).__name__}"
            )
        if mean_func is not None and not isinstance(mean_func, Mean):
            raise KilnTypeError(
                f"mean_func: expected a mean function of kl.gp.mean, got {type(mean_func).__name__}"
            )
        self.mean_func = mean_func if mean_func is not None else Zero()
        self.cov_func = cov_func

    def __add__(self, other: _GP) -> _GP:
        if type(other) is not type(self):
            raise KilnTypeError(f"cannot add a {type(other).__name__} to a {type(self).__name__}")
        return type(self)(
            mean_func=self.mean_func + other.mean_func, cov_func=self.cov_func + other.cov_func
        )


class Latent(_GP):
    """A GP whose values ``f`` are random variables of the model (any likelihood).

    ``prior(name, X)`` adds ``f`` at the inputs ``X``, non-centred as PyMC does
    (``f = mean(X) + L v`` with ``v`` standard normal, ``L`` the Cholesky factor);
    ``conditional(name, Xnew)`` adds ``f`` at new inputs given it, for prediction
    (``kl.sample_posterior_predictive``).

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     ls = kl.Gamma("ls", 2, 1)
    ...     gp = kl.gp.Latent(cov_func=kl.gp.cov.ExpQuad(1, ls=ls))
    ...     f = gp.prior("f", X=X)
    ...     kl.Poisson("y", kl.math.exp(f), observed=y)
    """

    def prior(
        self,
        name: str,
        X: Any,
        reparameterize: bool = True,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the GP's values at ``X`` under ``name``."""
        from kiln_model._continuous import Normal

        X = as_inputs(X)
        mu = self.mean_func(X)
        L = kt.cholesky(stabilize(self.cov_func(X), jitter))
        if reparameterize:
            n = _length(X, "prior")
            v = Normal(f"{name}_rotated_", 0.0, 1.0, shape=n)
            f = Deterministic(name, mu + kt.dot(L, v), dims=kwargs.pop("dims", None))
        else:
            f = MvNormal(name, mu=mu, chol=L, **kwargs)
        self.X, self.f = X, f
        return f

    def conditional(
        self,
        name: str,
        Xnew: Any,
        given: dict[str, Any] | None = None,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the GP's values at ``Xnew`` given its values at the prior's ``X``."""
        given = given or {}
        X, f = given.get("X", getattr(self, "X", None)), given.get("f", getattr(self, "f", None))
        if X is None or f is None:
            raise KilnValueError(f"{name}: call prior(...) first, or give X and f in given")
        X, Xnew = as_inputs(X), as_inputs(Xnew)
        L = kt.cholesky(stabilize(self.cov_func(X), jitter))
        A = _solve_lower(L, self.cov_func(X, Xnew))
        v = _solve_lower(L, f - self.mean_func(X))
        mu = self.mean_func(Xnew) + kt.dot(A.T, v)
        cov = self.cov_func(Xnew) - kt.dot(A.T, A)
        return MvNormal(name, mu=mu, cov=stabilize(cov, jitter), **kwargs)  # type: ignore[no-any-return]


class Marginal(_GP):
    """A GP with normal noise, integrated out: the likelihood of ``y`` is a MvNormal.

    ``marginal_likelihood(name, X, y, sigma)`` adds the observed ``y``;
    ``conditional(name, Xnew)`` adds the GP at new inputs given ``y`` (with the noise,
    ``pred_noise=True``).

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     ls = kl.Gamma("ls", 2, 1)
    ...     sigma = kl.HalfNormal("sigma", 1)
    ...     gp = kl.gp.Marginal(cov_func=kl.gp.cov.Matern52(1, ls=ls))
    ...     gp.marginal_likelihood("y", X=X, y=y, sigma=sigma)
    """

    def marginal_likelihood(
        self,
        name: str,
        X: Any,
        y: Any,
        sigma: Any = None,
        noise: Any = None,
        jitter: float = JITTER,
        is_observed: bool = True,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add ``y`` ~ MvNormal(mean(X), cov(X) + noise) under ``name`` (observed)."""
        if sigma is None:
            sigma = noise  # PyMC's former name of the argument
        if sigma is None:
            raise KilnTypeError(f"{name}: give sigma, the noise's standard deviation")
        if not is_observed:
            raise KilnValueError(f"{name}: is_observed=False is not supported; give y")
        X = as_inputs(X)
        self.X, self.y, self.sigma = X, kt.as_tensor(y, dtype="float64"), sigma
        mu = self.mean_func(X)
        chol = kt.cholesky(stabilize(self.cov_func(X) + self._noise(X), jitter))
        return MvNormal(name, mu=mu, chol=chol, observed=y, **kwargs)  # type: ignore[no-any-return]

    def _noise(self, X: TensorVariable) -> TensorVariable:
        sigma = self.sigma
        if isinstance(sigma, BaseCovariance):
            return sigma(X)
        return kt.as_tensor(sigma, dtype="float64") ** 2 * kt.eye(X.shape[0])

    def _conditional_moments(
        self, Xnew: Any, pred_noise: bool, given: dict[str, Any] | None, jitter: float
    ) -> tuple[TensorVariable, TensorVariable]:
        given = given or {}
        X = given.get("X", getattr(self, "X", None))
        y = given.get("y", getattr(self, "y", None))
        if "sigma" in given or "noise" in given:
            self.sigma = given.get("sigma", given.get("noise"))
        if X is None or y is None:
            raise KilnValueError("call marginal_likelihood(...) first, or give X and y in given")
        X, Xnew = as_inputs(X), as_inputs(Xnew)
        L = kt.cholesky(stabilize(self.cov_func(X) + self._noise(X), jitter))
        A = _solve_lower(L, self.cov_func(X, Xnew))
        v = _solve_lower(L, kt.as_tensor(y, dtype="float64") - self.mean_func(X))
        mu = self.mean_func(Xnew) + kt.dot(A.T, v)
        cov = self.cov_func(Xnew) - kt.dot(A.T, A)
        if pred_noise:
            cov = cov + self._noise(Xnew)
        return mu, cov

    def conditional(
        self,
        name: str,
        Xnew: Any,
        pred_noise: bool = False,
        given: dict[str, Any] | None = None,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the GP at ``Xnew`` given the observed ``y`` (and its noise)."""
        mu, cov = self._conditional_moments(Xnew, pred_noise, given, jitter)
        return MvNormal(name, mu=mu, cov=stabilize(cov, jitter), **kwargs)  # type: ignore[no-any-return]


def _length(X: TensorVariable, where: str) -> int:
    n = X.type.shape[0]
    if n is None:
        raise KilnValueError(
            f"{where}: X needs a known number of rows (a NumPy array or kl.Data), got a "
            "matrix of unknown length"
        )
    return int(n)
