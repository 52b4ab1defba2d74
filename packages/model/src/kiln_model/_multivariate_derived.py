"""Multivariate distributions drawn as graphs of kiln's draws (PyMC's names and parameters).

``MvStudentT`` (a multivariate normal over the square root of a scaled chi-squared),
``DirichletMultinomial`` (a multinomial of Dirichlet probabilities),
``StickBreakingWeights`` (Beta stick-breaking fractions) and ``OrderedMultinomial``
(multinomial counts over ordered-logistic classes). Each is a
:class:`SymbolicDistribution`, so its draws run on every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, infer_shape
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._distribution import Distribution, broadcast_like, register_density
from kiln_model._math import LOG_2PI, bound, log_diff_exp
from kiln_model._model import modelcontext
from kiln_model._multivariate import Multinomial, _is_positive_definite
from kiln_model._symbolic import SymbolicDistribution, batch_shape
from kiln_model._validate import check_constants

_LOG_PI = float(np.log(np.pi))
_SIGMA_CHECK = ((("sigma",), lambda s: s > 0, "sigma must be > 0"),)


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    x = kt.as_tensor(x)
    return kt.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _f(x: Any) -> TensorVariable:
    return kt.cast(kt.as_tensor(x), "float64") if kt.as_tensor(x).dtype != "float64" else x


def _mvt_core_logp(x: Any, nu: Any, mu: Any, scale: Any) -> Any:
    chol = kt.cholesky(scale)
    z = kt.solve_triangular(chol, x - mu, lower=True)
    k = kt.cast(kt.shape_i(x, 0), "float64")
    eye = kt.eye(kt.shape_i(x, 0))
    half_logdet = kt.sum(kt.log(kt.abs(kt.sum(chol * eye, axis=-1))))
    return (
        kt.gammaln((nu + k) / 2.0)
        - kt.gammaln(nu / 2.0)
        - 0.5 * k * (kt.log(nu) + _LOG_PI)
        - half_logdet
        - 0.5 * (nu + k) * kt.log1p(kt.sum(z * z) / nu)
    )


_batched_mvt_logp = kt.vectorize(_mvt_core_logp, "(n),(),(n),(n,n)->()")


class MvStudentT(SymbolicDistribution):
    """MvStudentT(nu, mu, scale=/cov=/Sigma=/tau=/chol=): multivariate Student's t vectors.

    ``mu + z / sqrt(w / nu)`` with ``z`` multivariate normal of covariance ``scale`` and
    ``w`` chi-squared with ``nu`` degrees of freedom. Give exactly one of ``scale`` (also
    spelled ``cov`` or ``Sigma``), ``tau`` (its inverse) and ``chol`` (its Cholesky
    factor; upper triangular with ``lower=False``).
    """

    params = ("nu", "mu", "scale", "cov", "Sigma", "tau", "chol", "lower")
    defaults = {"lower": True}
    ndim_supp = 1
    param_checks = (
        (("nu",), lambda nu: nu > 0, "nu must be > 0"),
        (("scale",), _is_positive_definite, "scale must be symmetric positive definite"),
        (("cov",), _is_positive_definite, "cov must be symmetric positive definite"),
        (("Sigma",), _is_positive_definite, "Sigma must be symmetric positive definite"),
        (("tau",), _is_positive_definite, "tau must be symmetric positive definite"),
    )

    @classmethod
    def rv_params(
        cls,
        nu: Any = None,
        mu: Any = None,
        scale: Any = None,
        cov: Any = None,
        Sigma: Any = None,  # noqa: N803
        tau: Any = None,
        chol: Any = None,
        lower: Any = True,
    ) -> tuple[Any, ...]:
        if nu is None or mu is None:
            raise KilnTypeError(f"{cls.__name__}: give nu and mu")
        given = {
            k: v
            for k, v in {
                "scale": scale,
                "cov": cov,
                "Sigma": Sigma,
                "tau": tau,
                "chol": chol,
            }.items()
            if v is not None
        }
        if len(given) != 1:
            raise KilnTypeError(
                f"{cls.__name__}: give exactly one of scale, cov, Sigma, tau and chol; got "
                f"{sorted(given) or 'none'}"
            )
        ((key, value),) = given.items()
        if key == "tau":
            value = kt.inv(kt.as_tensor(value, dtype="float64"))
        elif key == "chol":
            c = kt.as_tensor(value, dtype="float64")
            value = kt.matmul(c, _mT(c)) if lower else kt.matmul(_mT(c), c)
        return (nu, mu, value)

    @classmethod
    def build(cls, nu: Any, mu: Any, scale: Any, *, size: Any, rng: Any) -> TensorVariable:
        mu, scale = _f(mu), _f(scale)
        k_mu = mu if mu.ndim else kt.expand_dims(mu, -1)
        batch = batch_shape(size, nu, k_mu[..., 0], scale[..., 0, 0])
        zeros = kt.zeros_like(scale[..., 0]) + kt.zeros_like(k_mu)
        z = kr.multivariate_normal(zeros, scale, size=batch, rng=rng)
        w = kr.gamma(nu / 2.0, 2.0, size=batch, rng=kr.rng())
        return mu + z / kt.expand_dims(kt.sqrt(w / nu), -1)

    @staticmethod
    def logp(value: Any, nu: Any, mu: Any, scale: Any) -> TensorVariable:
        value, nu, mu, scale = (_f(v) for v in (value, nu, mu, scale))
        mu = mu + kt.zeros_like(value)
        if value.ndim == 1 and nu.ndim == 0 and scale.ndim == 2:
            lp = _mvt_core_logp(value, nu, mu, scale)
        else:
            lp = _batched_mvt_logp(value, nu, mu, scale)
        return bound(lp, nu > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any, mu: Any, scale: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


class DirichletMultinomial(SymbolicDistribution):
    """DirichletMultinomial(n, a): counts of ``n`` draws with Dirichlet(``a``) probabilities."""

    params = ("n", "a")
    ndim_supp = 1
    support = "counts"
    discrete = True
    param_checks = (
        (("n",), lambda n: (n >= 0) & (np.mod(n, 1) == 0), "n must be a non-negative integer"),
        (("a",), lambda a: a > 0, "a must be > 0"),
    )
    observed_checks = Multinomial.observed_checks

    @classmethod
    def build(cls, n: Any, a: Any, *, size: Any, rng: Any) -> TensorVariable:
        a = _f(a)
        batch = batch_shape(size, n, a[..., 0])
        p = kr.dirichlet(a, size=batch, rng=rng)
        return kr.multinomial(kt.cast(n, "int64"), p, size=batch, rng=kr.rng())

    @staticmethod
    def logp(value: Any, n: Any, a: Any) -> TensorVariable:
        x, a = _f(value), _f(a)
        total = kt.sum(a, axis=-1)
        nf = _f(n)
        lp = (
            kt.gammaln(nf + 1.0)
            + kt.gammaln(total)
            - kt.gammaln(nf + total)
            + kt.sum(kt.gammaln(x + a) - kt.gammaln(a) - kt.gammaln(x + 1.0), axis=-1)
        )
        valid = kt.logical_and(kt.all(x >= 0, axis=-1), kt.eq(kt.sum(x, axis=-1), nf))
        return bound(lp, valid, kt.all(a > 0, axis=-1))

    @classmethod
    def support_point(cls, rv: TensorVariable, n: Any, a: Any) -> TensorVariable:
        return Multinomial.support_point(rv, n, a)


class StickBreakingWeights(SymbolicDistribution):
    """StickBreakingWeights(alpha, K): ``K + 1`` weights of a truncated stick-breaking process.

    ``w_k = b_k prod_{j<k} (1 - b_j)`` with ``b_k ~ Beta(1, alpha)`` for ``k < K``; the last
    weight is what remains, so the weights lie on the simplex.
    """

    params = ("alpha", "K")
    ndim_supp = 1
    support = "simplex"
    param_checks = (
        (("alpha",), lambda a: a > 0, "alpha must be > 0"),
        (("K",), lambda k: (k >= 1) & (np.mod(k, 1) == 0), "K must be an integer >= 1"),
    )

    @classmethod
    def rv_params(cls, alpha: Any = None, K: Any = None) -> tuple[Any, ...]:  # noqa: N803
        if alpha is None or K is None:
            raise KilnTypeError(f"{cls.__name__}: give alpha and K")
        if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 1:
            raise KilnTypeError(f"{cls.__name__}: K must be an integer >= 1, got {K!r}")
        return (alpha, int(K))

    @classmethod
    def build(cls, alpha: Any, k: Any, *, size: Any, rng: Any) -> TensorVariable:
        alpha = _f(alpha)
        K = int(k.data)  # noqa: N806  (a constant: rv_params made it an int)
        batch = batch_shape(size, alpha)
        batch = (batch,) if isinstance(batch, int | np.integer) else batch
        full = (K,) if batch is None else (*batch, K)
        b = kr.beta(1.0, kt.expand_dims(alpha, -1), size=full, rng=rng)
        log_rest = kt.cumsum(kt.log1p(-b), axis=-1)  # log prod_{j<=k} (1 - b_j)
        before = kt.exp(log_rest - kt.log1p(-b))
        return kt.concatenate([b * before, kt.exp(log_rest[..., -1:])], axis=-1)

    @staticmethod
    def logp(value: Any, alpha: Any, k: Any) -> TensorVariable:
        x, alpha = _f(value), _f(alpha)
        K = _f(k)  # noqa: N806
        # Remaining stick before each break: r_k = 1 - sum_{j<k} x_j; the density is
        # alpha^K x_K^(alpha - 1) / prod_{0<k<K} r_k (the breaks' Jacobian is prod 1 / r_k).
        rest = 1.0 - kt.cumsum(x[..., :-2], axis=-1)
        lp = K * kt.log(alpha) + (alpha - 1.0) * kt.log(x[..., -1]) - kt.sum(kt.log(rest), axis=-1)
        on_simplex = kt.logical_and(kt.all(x > 0, axis=-1), kt.abs(kt.sum(x, axis=-1) - 1.0) < 1e-9)
        return bound(lp, on_simplex, alpha > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, alpha: Any, k: Any) -> TensorVariable:
        # The weights at the breaks' means b = 1 / (1 + alpha).
        alpha = kt.expand_dims(_f(alpha), -1)
        K = int(k.data)  # noqa: N806
        j = kt.constant(np.arange(K + 1, dtype=np.float64))
        keep = alpha / (1.0 + alpha)
        w = kt.exp(j * kt.log(keep)) * kt.switch(kt.constant(np.arange(K + 1) < K), 1.0 - keep, 1.0)
        return broadcast_like(w, rv)


class OrderedMultinomial(SymbolicDistribution):
    """OrderedMultinomial(eta, cutpoints, n): counts of ``n`` draws of an ordered-logistic class.

    Class ``k`` of ``K + 1`` has probability ``sigmoid(eta - c_{k-1}) - sigmoid(eta - c_k)``.
    ``compute_p`` is accepted and ignored.
    """

    params = ("eta", "cutpoints", "n", "compute_p")
    defaults = {"compute_p": True}
    ndim_supp = 1
    support = "counts"
    discrete = True
    param_checks = (
        (
            ("cutpoints",),
            lambda c: np.all(np.diff(c, axis=-1) >= 0),
            "cutpoints must be increasing along the last axis",
        ),
    )
    observed_checks = Multinomial.observed_checks

    @classmethod
    def rv_params(
        cls, eta: Any = None, cutpoints: Any = None, n: Any = None, compute_p: Any = True
    ) -> tuple[Any, ...]:
        if eta is None or cutpoints is None or n is None:
            raise KilnTypeError(f"{cls.__name__}: give eta, cutpoints and n")
        return (eta, cutpoints, n)

    @staticmethod
    def _log_p(eta: Any, cutpoints: Any) -> TensorVariable:
        z = kt.expand_dims(_f(eta), -1) - _f(cutpoints)
        # S_k = 1 - sigmoid(eta - c_k), the probability of a class <= k, increases with k:
        # P(0) = S_0, P(k) = S_k - S_{k-1}, P(K) = 1 - S_{K-1} = sigmoid(eta - c_{K-1}).
        log_s = -kt.softplus(z)
        first = log_s[..., :1]
        last = -kt.softplus(-z[..., -1:])
        middle = log_diff_exp(log_s[..., 1:], log_s[..., :-1])
        return kt.concatenate([first, middle, last], axis=-1)

    @classmethod
    def build(cls, eta: Any, cutpoints: Any, n: Any, *, size: Any, rng: Any) -> TensorVariable:
        p = kt.exp(cls._log_p(eta, cutpoints))
        batch = batch_shape(size, eta, _f(cutpoints)[..., 0], n)
        return kr.multinomial(kt.cast(n, "int64"), p, size=batch, rng=rng)

    @staticmethod
    def logp(value: Any, eta: Any, cutpoints: Any, n: Any) -> TensorVariable:
        log_p = OrderedMultinomial._log_p(eta, cutpoints)
        return Multinomial.logp(value, n, kt.exp(log_p))

    @classmethod
    def support_point(cls, rv: TensorVariable, eta: Any, cutpoints: Any, n: Any) -> TensorVariable:
        return Multinomial.support_point(rv, n, kt.exp(cls._log_p(eta, cutpoints)))


class ZeroSumNormal(SymbolicDistribution):
    """ZeroSumNormal(sigma=1, n_zerosum_axes=1, support_shape=None): normals summing to zero.

    Independent ``Normal(0, sigma)`` draws with their mean removed along each of the last
    ``n_zerosum_axes`` axes: an isotropic normal on the zero-sum subspace, whose density
    (in that subspace's own volume) is ``prod(n_i - 1)``-dimensional. ``sigma`` must have
    length 1 on the zero-sum axes. The free variable has one entry fewer on each of them
    (:class:`~kiln_model.transforms.ZeroSumTransform`). The shape comes from ``shape``,
    ``dims`` or ``support_shape`` (the lengths of the zero-sum axes).
    """

    params = ("sigma", "n_zerosum_axes", "support_shape")
    defaults = {"sigma": 1.0, "n_zerosum_axes": 1}
    #: The number of zero-sum axes of this class (subclasses fix it: see ``_with_axes``).
    n_axes = 1

    def __new__(  # type: ignore[misc]
        cls,
        name: str,
        sigma: Any = 1.0,
        n_zerosum_axes: Any = None,
        support_shape: Any = None,
        *,
        dims: Any = None,
        shape: Any = None,
        model: Any = None,
        **kwargs: Any,
    ) -> Any:
        n = _n_axes(n_zerosum_axes)
        if support_shape is None:
            full: Any = None
            if shape is not None:
                full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            elif dims is not None:
                m = modelcontext(model)
                dims_t = (dims,) if isinstance(dims, str) else tuple(dims)
                full = m.shape_from_dims(dims_t, m.prefixed(name))
            elif kwargs.get("observed") is not None:
                obs = kwargs["observed"]
                full = np.shape(obs.get_value() if hasattr(obs, "get_value") else obs)
            if full is not None:
                support_shape = tuple(full[len(full) - n :])
        return Distribution.__new__(
            _with_axes(n),
            name,
            sigma=sigma,
            n_zerosum_axes=n,
            support_shape=support_shape,
            dims=dims,
            shape=shape,
            model=model,
            **kwargs,
        )

    @classmethod
    def core_ndim(cls) -> int:
        return cls.n_axes

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        sigma: Any = 1.0,
        n_zerosum_axes: Any = None,
        support_shape: Any = None,
        *,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:
        """Return an unnamed draw of shape ``shape`` or ``(*size, *support_shape)``."""
        n = _n_axes(n_zerosum_axes)
        if shape is not None:
            if size is not None:
                raise KilnTypeError(f"{cls.__name__}: give size or shape, not both")
            full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            if len(full) < n:
                raise KilnValueError(
                    f"{cls.__name__}: shape {full} has fewer than n_zerosum_axes={n} axes"
                )
            size, support_shape = full[: len(full) - n], full[len(full) - n :]
        if support_shape is None:
            raise KilnValueError(
                f"{cls.__name__}: give shape, dims or support_shape (the zero-sum axes' lengths)"
            )
        support_shape = (
            (support_shape,)
            if isinstance(support_shape, int | np.integer)
            else tuple(support_shape)
        )
        if len(support_shape) != n:
            raise KilnValueError(
                f"{cls.__name__}: support_shape {support_shape} must have n_zerosum_axes={n} "
                "entries"
            )
        sigma_t = _f(kt.as_tensor(sigma, dtype="float64"))
        if sigma_t.ndim >= n and any(d != 1 for d in sigma_t.type.shape[sigma_t.ndim - n :]):
            raise KilnValueError(
                f"{cls.__name__}: sigma must have length 1 on the {n} zero-sum axes, got shape "
                f"{sigma_t.type.shape}"
            )
        check_constants(cls.__name__, {"sigma": sigma}, _SIGMA_CHECK)
        size = (size,) if isinstance(size, int | np.integer) else size
        if size is None:
            lead = sigma_t.type.shape[: max(sigma_t.ndim - n, 0)]
            size = tuple(infer_shape(sigma_t)[: len(lead)]) if lead else ()
        full_shape = (*size, *support_shape)
        draw = kr.normal(0.0, 1.0, size=full_shape, rng=rng if rng is not None else kr.rng())
        for axis in range(-n, 0):
            draw = draw - kt.mean(draw, axis=axis, keepdims=True)
        rv = kt.as_tensor(draw * sigma_t)
        register_density(rv, _with_axes(n), [sigma_t], rng=rng)
        return rv

    @classmethod
    def logp(cls, value: Any, sigma: Any) -> TensorVariable:  # type: ignore[override]
        value, sigma = _f(value), _f(sigma)
        n = cls.n_axes
        axes = tuple(range(-n, 0))
        full = 1.0
        dof = 1.0
        for axis in axes:
            length = kt.cast(kt.shape_i(value, axis), "float64")
            full, dof = full * length, dof * (length - 1.0)
        z = value / sigma
        lp = -0.5 * z * z - (0.5 * LOG_2PI + kt.log(sigma)) * (dof / full)
        # Valid where sigma > 0 and the mean along each zero-sum axis is 0 (to rounding).
        zeros = kt.zeros_like(value)
        ok = kt.gt(sigma + zeros, 0.0)
        tol = 1e-9 * (1.0 + kt.max(kt.abs(value)))
        for axis in axes:
            ok = kt.logical_and(ok, kt.abs(kt.mean(value, axis=axis, keepdims=True) + zeros) < tol)
        for _ in axes:
            lp, ok = kt.sum(lp, axis=-1), kt.all(ok, axis=-1)
        return bound(lp, ok)

    @classmethod
    def support_point(cls, rv: TensorVariable, sigma: Any) -> TensorVariable:
        return kt.zeros_like(rv, dtype="float64")

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform:
        return tr.ZeroSumTransform(cls.n_axes)


def _n_axes(n_zerosum_axes: Any) -> int:
    n = 1 if n_zerosum_axes is None else n_zerosum_axes
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise KilnValueError(f"ZeroSumNormal: n_zerosum_axes must be an integer >= 1, got {n!r}")
    return int(n)


_ZERO_SUM_CLASSES: dict[int, type[ZeroSumNormal]] = {1: ZeroSumNormal}


def _with_axes(n: int) -> type[ZeroSumNormal]:
    """Return the ``ZeroSumNormal`` class with ``n`` zero-sum (core) axes."""
    if n not in _ZERO_SUM_CLASSES:
        _ZERO_SUM_CLASSES[n] = type("ZeroSumNormal", (ZeroSumNormal,), {"n_axes": n})
    return _ZERO_SUM_CLASSES[n]
