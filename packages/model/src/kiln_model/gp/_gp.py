"""``Latent`` and ``Marginal`` Gaussian processes, as PyMC's ``pm.gp`` builds them.

Both work through the Cholesky factor of the covariance plus a small jitter on its
diagonal (PyMC's ``stabilize``), triangular solves and the log-determinant from the
factor's diagonal; a covariance that is not positive definite makes the Cholesky fail,
which the samplers take as a rejected point (a divergence), never as NaN draws.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, ancestors, graph_replace
from kiln_graph import tensor as kt
from kiln_model._kron import cartesian, kron_diag, kron_dot, kron_solve_lower
from kiln_model._model import Deterministic
from kiln_model._multivariate import MvNormal
from kiln_model.gp.cov import BaseCovariance, as_inputs
from kiln_model.gp.mean import Mean, Zero

__all__ = [
    "TP",
    "Latent",
    "LatentKron",
    "Marginal",
    "MarginalApprox",
    "MarginalKron",
    "MarginalSparse",
    "cartesian",
    "kron_diag",
    "kron_dot",
    "kron_solve_lower",
]

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

    def _conditional_parts(
        self, name: str, Xnew: Any, given: dict[str, Any] | None, jitter: float
    ) -> tuple[TensorVariable, TensorVariable, TensorVariable, int]:
        """Return the conditional mean and covariance at ``Xnew``, ``L^-1 (f - mean)``, ``n``."""
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
        return mu, cov, v, _length(X, "conditional")

    def conditional(
        self,
        name: str,
        Xnew: Any,
        given: dict[str, Any] | None = None,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the GP's values at ``Xnew`` given its values at the prior's ``X``."""
        mu, cov, _, _ = self._conditional_parts(name, Xnew, given, jitter)
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

    def predict(
        self,
        Xnew: Any,
        point: dict[str, Any] | None = None,
        diag: bool = False,
        pred_noise: bool = False,
        given: dict[str, Any] | None = None,
        jitter: float = JITTER,
        model: Any = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the conditional's mean and covariance (its variances: ``diag``) at ``Xnew``.

        Numbers, with the model's free variables at ``point`` (constrained values by
        name, e.g. ``kl.find_MAP``'s).
        """
        mu, cov = self._conditional_moments(Xnew, pred_noise, given, jitter)
        mean, covariance = _predict_at([mu, cov], point, model)
        return mean, (np.diag(covariance).copy() if diag else covariance)


def _predict_at(
    outputs: list[TensorVariable], point: dict[str, Any] | None, model: Any
) -> list[np.ndarray]:
    """Return ``outputs`` evaluated with the model's free variables set from ``point``.

    ``point`` maps variable names to their (constrained) values, as the points of
    ``kl.find_MAP`` or one draw of the posterior hold them.
    """
    import kiln_compile
    from kiln_model._model import modelcontext

    m = modelcontext(model)
    replace: dict[Any, Any] = {}
    for info in m.free_variables:
        if point is None or info.name not in point:
            continue
        replace[info.rv] = kt.constant(np.asarray(point[info.name], dtype=info.rv.dtype))
    outputs = list(graph_replace(outputs, replace, strict=False))  # type: ignore[arg-type]
    free: dict[Any, str] = {info.rv: info.name for info in m.free_variables}
    missing = sorted({free[v] for v in ancestors(outputs) if v in free})
    if missing:
        raise KilnValueError(
            f"predict: point has no values of {missing}; give them (e.g. a point of kl.find_MAP)"
        )
    f = kiln_compile.function([], outputs, mode=kiln_compile.Mode(linker="vm"))
    return [np.asarray(v) for v in f()]


def _length(X: TensorVariable, where: str) -> int:
    n = X.type.shape[0]
    if n is None:
        raise KilnValueError(
            f"{where}: X needs a known number of rows (a NumPy array or kl.Data), got a "
            "matrix of unknown length"
        )
    return int(n)


class TP(Latent):
    """A Student's t process: ``f`` is multivariate Student's t with ``nu`` degrees of freedom.

    ``prior`` draws ``f = mean(X) + sqrt(nu / w) L v`` (``w`` chi-squared with ``nu``
    degrees, ``v`` standard normal, ``L`` the Cholesky factor of ``scale_func(X)``);
    ``conditional`` adds the exact conditional, a multivariate Student's t of
    ``nu + n`` degrees of freedom. (PyMC's reparameterised prior scales the mean too,
    ``sqrt(nu) / w``; kiln's is the Student's t process itself.)
    """

    def __init__(
        self,
        *,
        mean_func: Mean | None = None,
        scale_func: BaseCovariance | None = None,
        cov_func: BaseCovariance | None = None,
        nu: Any = None,
    ) -> None:
        if nu is None:
            raise KilnTypeError("TP: give nu, the degrees of freedom")
        if (scale_func is None) == (cov_func is None):
            raise KilnTypeError("TP: give scale_func (or its former name cov_func)")
        super().__init__(mean_func=mean_func, cov_func=scale_func or cov_func)  # type: ignore[arg-type]
        self.nu = nu
        self.scale_func = self.cov_func

    def prior(
        self,
        name: str,
        X: Any,
        reparameterize: bool = True,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add and return the process's values at ``X`` under ``name``."""
        from kiln_model._continuous import Normal
        from kiln_model._continuous_derived import ChiSquared
        from kiln_model._multivariate_derived import MvStudentT

        X = as_inputs(X)
        mu = self.mean_func(X)
        L = kt.cholesky(stabilize(self.cov_func(X), jitter))
        if reparameterize:
            w = ChiSquared(f"{name}_chi2_", self.nu)
            v = Normal(f"{name}_rotated_", 0.0, 1.0, shape=_length(X, "prior"))
            scale = kt.sqrt(kt.as_tensor(self.nu, dtype="float64") / w)
            f = Deterministic(name, mu + scale * kt.dot(L, v), dims=kwargs.pop("dims", None))
        else:
            f = MvStudentT(name, nu=self.nu, mu=mu, chol=L, **kwargs)
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
        """Add and return the process at ``Xnew`` given its values at the prior's ``X``."""
        from kiln_model._multivariate_derived import MvStudentT

        mu, cov, v, n = self._conditional_parts(name, Xnew, given, jitter)
        nu = kt.as_tensor(self.nu, dtype="float64")
        nu2 = nu + n
        scale = (nu + kt.dot(v, v) - 2.0) / (nu2 - 2.0) * cov
        return MvStudentT(name, nu=nu2, mu=mu, scale=stabilize(scale, jitter), **kwargs)  # type: ignore[no-any-return]


class MarginalApprox(Marginal):
    """A sparse approximation of :class:`Marginal` through inducing points ``Xu``.

    ``approx`` is ``"VFE"`` (Titsias's variational bound, the default), ``"FITC"`` or
    ``"DTC"``; the cost grows as ``n m**2`` for ``m`` inducing points. As PyMC's, the
    likelihood is added as a Potential ``marginalapprox_loglik_<name>``.
    """

    _APPROXIMATIONS = ("VFE", "FITC", "DTC")

    def __init__(
        self,
        approx: str = "VFE",
        *,
        mean_func: Mean | None = None,
        cov_func: BaseCovariance,
    ) -> None:
        if approx not in self._APPROXIMATIONS:
            raise KilnValueError(f"approx: one of {list(self._APPROXIMATIONS)}, got {approx!r}")
        super().__init__(mean_func=mean_func, cov_func=cov_func)
        self.approx = approx

    def _parts(self, jitter: float) -> tuple[Any, ...]:
        X, Xu, y = self.X, self.Xu, self.y
        sigma2 = kt.as_tensor(self.sigma, dtype="float64") ** 2
        Luu = kt.cholesky(stabilize(self.cov_func(Xu), jitter))
        A = _solve_lower(Luu, self.cov_func(Xu, X))
        Qffd = kt.sum(A * A, axis=0)
        if self.approx == "FITC":
            Lamd = kt.maximum(self.cov_func(X, diag=True) - Qffd, 0.0) + sigma2
        else:
            Lamd = kt.ones_like(Qffd) * sigma2
        A_l = A / Lamd
        L_B = kt.cholesky(kt.eye(Xu.shape[0]) + kt.dot(A_l, A.T))
        r = y - self.mean_func(X)
        r_l = r / Lamd
        c = _solve_lower(L_B, kt.dot(A, r_l))
        return sigma2, Luu, A, Qffd, Lamd, L_B, r, r_l, c

    def marginal_likelihood(  # type: ignore[override]
        self,
        name: str,
        X: Any,
        Xu: Any,
        y: Any,
        sigma: Any = None,
        noise: Any = None,
        jitter: float = JITTER,
        **kwargs: Any,
    ) -> TensorVariable:
        """Add the approximate log marginal likelihood of ``y`` (a Potential)."""
        from kiln_model._model import Potential

        sigma = noise if sigma is None else sigma
        if sigma is None:
            raise KilnTypeError(f"{name}: give sigma, the noise's standard deviation")
        self.X, self.Xu = as_inputs(X), as_inputs(Xu)
        self.y, self.sigma = kt.as_tensor(y, dtype="float64"), sigma
        sigma2, _, A, _, Lamd, L_B, r, r_l, c = self._parts(jitter)
        n = _length(self.X, "marginal_likelihood")
        if self.approx == "VFE":
            trace = (kt.sum(self.cov_func(self.X, diag=True)) - kt.sum(A * A)) / (2.0 * sigma2)
        else:
            trace = 0.0
        k = kt.arange(L_B.shape[0])
        logdet = 0.5 * kt.sum(kt.log(Lamd)) + kt.sum(kt.log(L_B[k, k]))
        quadratic = 0.5 * (kt.dot(r, r_l) - kt.dot(c, c))
        loglik = -(0.5 * n * math.log(2.0 * math.pi) + logdet + quadratic + trace)
        return Potential(f"marginalapprox_loglik_{name}", loglik, **kwargs)  # type: ignore[no-any-return]

    def _conditional_moments(
        self, Xnew: Any, pred_noise: bool, given: dict[str, Any] | None, jitter: float
    ) -> tuple[TensorVariable, TensorVariable]:
        if given:
            raise KilnValueError("MarginalApprox.conditional: given is not supported")
        if not hasattr(self, "Xu"):
            raise KilnValueError("call marginal_likelihood(...) first")
        Xnew = as_inputs(Xnew)
        sigma2, Luu, _, _, _, L_B, _, _, c = self._parts(jitter)
        As = _solve_lower(Luu, self.cov_func(self.Xu, Xnew))
        mu = self.mean_func(Xnew) + kt.dot(As.T, kt.solve_triangular(L_B.T, c, lower=False))
        C = _solve_lower(L_B, As)
        cov = self.cov_func(Xnew) - kt.dot(As.T, As) + kt.dot(C.T, C)
        if pred_noise:
            cov = cov + sigma2 * kt.eye(Xnew.shape[0])
        return mu, cov


#: PyMC's former name of :class:`MarginalApprox`.
MarginalSparse = MarginalApprox


class LatentKron(Latent):
    """A latent GP on a grid: the Cartesian product of ``Xs``, covariance ``kron(K_1, ...)``.

    ``cov_funcs`` holds one covariance per grid axis. ``prior(name, Xs)`` costs the
    Cholesky factors of the small ``K_i`` only (``f = mean(X) + kron(L_1, ...) v``);
    ``conditional(name, Xnew)`` takes any new points (rows of all the axes' columns).
    """

    def __init__(
        self, *, mean_func: Mean | None = None, cov_funcs: list[BaseCovariance] | None = None
    ) -> None:
        if not cov_funcs:
            raise KilnTypeError("LatentKron: give cov_funcs, one covariance per grid axis")
        from kiln_model.gp.cov import Kron

        self.cov_funcs = list(cov_funcs)
        super().__init__(mean_func=mean_func, cov_func=Kron(self.cov_funcs))  # type: ignore[arg-type]

    def prior(  # type: ignore[override]
        self, name: str, Xs: list[Any], jitter: float = JITTER, **kwargs: Any
    ) -> TensorVariable:
        """Add and return the GP's values on the grid of ``Xs`` under ``name``."""
        from kiln_model._continuous import Normal

        if len(Xs) != len(self.cov_funcs):
            raise KilnValueError(
                f"{name}: {len(Xs)} grid axes in Xs for {len(self.cov_funcs)} cov_funcs"
            )
        X = cartesian(*Xs)
        self.Xs, self.X = [as_inputs(x) for x in Xs], as_inputs(X)
        self.chols = [
            kt.cholesky(stabilize(k(x), jitter))
            for k, x in zip(self.cov_funcs, self.Xs, strict=True)
        ]
        v = Normal(f"{name}_rotated_", 0.0, 1.0, shape=len(X))
        f = Deterministic(
            name, self.mean_func(self.X) + kron_dot(self.chols, v), dims=kwargs.pop("dims", None)
        )
        self.f = f
        return f

    def conditional(  # type: ignore[override]
        self, name: str, Xnew: Any, jitter: float = JITTER, **kwargs: Any
    ) -> TensorVariable:
        """Add and return the GP at the points ``Xnew`` given its values on the grid."""
        if not hasattr(self, "chols"):
            raise KilnValueError(f"{name}: call prior(...) first")
        Xnew = as_inputs(Xnew)
        A = kron_solve_lower(self.chols, self.cov_func(self.X, Xnew))
        v = kron_solve_lower(self.chols, self.f - self.mean_func(self.X))
        mu = self.mean_func(Xnew) + kt.dot(A.T, v)
        cov = self.cov_func(Xnew) - kt.dot(A.T, A)
        return MvNormal(name, mu=mu, cov=stabilize(cov, jitter), **kwargs)  # type: ignore[no-any-return]


class MarginalKron(Marginal):
    """A GP with normal noise on a grid: ``y`` ~ ``KroneckerNormal`` of ``kron(K_1, ...)``.

    ``cov_funcs`` holds one covariance per grid axis. ``marginal_likelihood(name, Xs, y,
    sigma)`` adds the observed ``y`` (rows in the order of ``cartesian(*Xs)``) without
    forming the ``N x N`` covariance: each ``K_i`` is eigendecomposed, so a grid of
    ``N`` points costs ``O(sum(n_i**3) + N sum(n_i))`` per evaluation, not ``O(N**3)``.
    ``conditional(name, Xnew)`` and ``predict(Xnew)`` take any new points (rows of all
    the axes' columns).
    """

    def __init__(
        self, *, mean_func: Mean | None = None, cov_funcs: list[BaseCovariance] | None = None
    ) -> None:
        if not cov_funcs:
            raise KilnTypeError("MarginalKron: give cov_funcs, one covariance per grid axis")
        from kiln_model.gp.cov import Kron

        self.cov_funcs = list(cov_funcs)
        super().__init__(mean_func=mean_func, cov_func=Kron(self.cov_funcs))  # type: ignore[arg-type]

    def __add__(self, other: _GP) -> _GP:
        raise KilnTypeError("MarginalKron: sums of Kronecker-structured GPs are not supported")

    def marginal_likelihood(  # type: ignore[override]
        self, name: str, Xs: list[Any], y: Any, sigma: Any, is_observed: bool = True, **kwargs: Any
    ) -> TensorVariable:
        """Add ``y`` ~ KroneckerNormal(mean(X), [K_i(X_i)], sigma) under ``name`` (observed)."""
        from kiln_model._multivariate_matrix import KroneckerNormal

        if len(Xs) != len(self.cov_funcs):
            raise KilnValueError(
                f"{name}: {len(Xs)} grid axes in Xs for {len(self.cov_funcs)} cov_funcs"
            )
        if not is_observed:
            raise KilnValueError(f"{name}: is_observed=False is not supported; give y")
        if isinstance(sigma, BaseCovariance):
            raise KilnTypeError(f"{name}: sigma must be a number or a scalar, not a covariance")
        X = cartesian(*Xs)
        n_y = np.shape(y)[0] if np.ndim(y) else None
        if n_y != len(X):
            raise KilnValueError(
                f"{name}: y has {n_y} values for a grid of {len(X)} points (the product of the "
                "lengths of Xs)"
            )
        self.Xs = [as_inputs(x) for x in Xs]
        self.X, self.y, self.sigma = as_inputs(X), kt.as_tensor(y, dtype="float64"), sigma
        covs = [k(x) for k, x in zip(self.cov_funcs, self.Xs, strict=True)]
        mu = self.mean_func(self.X)
        return KroneckerNormal(name, mu=mu, covs=covs, sigma=sigma, observed=y, **kwargs)  # type: ignore[no-any-return]

    def _conditional_moments(
        self, Xnew: Any, pred_noise: bool, given: dict[str, Any] | None, jitter: float
    ) -> tuple[TensorVariable, TensorVariable]:
        if given:
            raise KilnValueError("MarginalKron: given is not supported; call marginal_likelihood")
        if not hasattr(self, "Xs"):
            raise KilnValueError("call marginal_likelihood(...) first")
        Xnew = as_inputs(Xnew)
        pairs = [kt.eigh(k(x)) for k, x in zip(self.cov_funcs, self.Xs, strict=True)]
        qs = [q for _, q in pairs]
        qts = [q.T for q in qs]
        sigma2 = kt.as_tensor(self.sigma, dtype="float64") ** 2
        eigs = kron_diag(*(w for w, _ in pairs)) + sigma2
        knm = self.cov_func(self.X, Xnew)
        alpha = kron_dot(qs, kron_dot(qts, self.y - self.mean_func(self.X)) / eigs)
        mu = self.mean_func(Xnew) + kt.dot(knm.T, alpha)
        a = kron_dot(qts, knm) / kt.sqrt(eigs)[:, None]
        cov = self.cov_func(Xnew) - kt.dot(a.T, a)
        if pred_noise:
            cov = cov + sigma2 * kt.eye(Xnew.shape[0])
        return mu, cov
