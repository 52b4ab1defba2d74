"""Matrix-valued and structured-covariance normals (PyMC's names and parameters).

``Wishart`` (drawn by the Bartlett decomposition) and ``WishartBartlett`` (PyMC's model
construction from chi-squared and normal free variables), ``MatrixNormal``,
``KroneckerNormal``, ``CAR`` and ``ICAR``. Draws are graphs of kiln's draws and
linear algebra, so they run on every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._continuous import Normal
from kiln_model._continuous_derived import ChiSquared
from kiln_model._distribution import broadcast_like
from kiln_model._kron import kron_diag, kron_dot, kron_solve_lower
from kiln_model._math import LOG_2PI, bound
from kiln_model._model import Deterministic
from kiln_model._multivariate import _is_positive_definite
from kiln_model._symbolic import SymbolicDistribution, batch_shape

_LOG_PI = float(np.log(np.pi))


def _f(x: Any) -> TensorVariable:
    x = kt.as_tensor(x)
    return x if x.dtype == "float64" else kt.cast(x, "float64")


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    x = kt.as_tensor(x)
    return kt.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _order(what: str, m: TensorVariable) -> int:
    n = m.type.shape[-1]
    if n is None:
        raise KilnValueError(f"{what}: the matrix's order must be known (a constant shape)")
    return int(n)


def _trace(m: Any, n: int) -> TensorVariable:
    return kt.sum(kt.as_tensor(m) * kt.eye(n), axis=(-2, -1))


def _log_diag_sum(chol: Any, n: int) -> TensorVariable:
    return kt.sum(kt.log(kt.sum(kt.as_tensor(chol) * kt.eye(n), axis=-1)), axis=-1)


def _as_tuple(size: Any) -> tuple[Any, ...]:
    if size is None:
        return ()
    return (size,) if isinstance(size, int | np.integer) else tuple(size)


def bartlett_factor(nu: Any, p: int, size: Any, rng: Any) -> TensorVariable:
    """Return ``(*size, p, p)`` Bartlett factors ``A`` with ``A A^T ~ Wishart(nu, I)``.

    ``A`` is lower triangular: ``A_ii^2 ~ ChiSquared(nu - i)`` (``i = 0..p-1``) and the
    entries below the diagonal standard normal, all independent.
    """
    batch = _as_tuple(size)
    dof = kt.expand_dims(_f(nu), -1) - np.arange(p, dtype=np.float64)
    c2 = kr.gamma(dof / 2.0, 2.0, size=(*batch, p), rng=rng)
    z = kr.normal(0.0, 1.0, size=(*batch, p, p), rng=kr.rng())
    strict = kt.constant(np.tril(np.ones((p, p), dtype=bool), -1))
    return kt.switch(strict, z, kt.expand_dims(kt.sqrt(c2), -2) * kt.eye(p))


def _wishart_valid(nu: Any, v: Any) -> Any:
    return nu > np.shape(v)[-1] - 1


class Wishart(SymbolicDistribution):
    """Wishart(nu, V): ``p x p`` positive-definite matrices with ``nu`` degrees of freedom.

    The mean is ``nu V``. Draws: ``L A A^T L^T`` with ``L`` the Cholesky factor of ``V``
    and ``A`` a Bartlett factor. As in PyMC there is no default transform: a free
    Wishart variable is not sampled well by gradient methods (use ``LKJCholeskyCov``).
    """

    params = ("nu", "V")
    ndim_supp = 2
    param_checks = (
        (("V",), _is_positive_definite, "V must be symmetric positive definite"),
        (("nu", "V"), _wishart_valid, "nu must be > p - 1 (V is p x p)"),
    )

    @classmethod
    def build(cls, nu: Any, v: Any, *, size: Any, rng: Any) -> TensorVariable:
        v = _f(v)
        p = _order(cls.__name__, v)
        batch = batch_shape(size, nu, v[..., 0, 0])
        la = kt.matmul(kt.cholesky(v), bartlett_factor(nu, p, batch, rng))
        return kt.matmul(la, _mT(la))

    @staticmethod
    def logp(value: Any, nu: Any, v: Any) -> TensorVariable:
        x, nu, v = _f(value), _f(nu), _f(v)
        p = _order("Wishart", v)
        sign_x, logdet_x = kt.slogdet(x)
        _, logdet_v = kt.slogdet(v)
        multi_gammaln = p * (p - 1) / 4.0 * _LOG_PI
        for j in range(p):
            multi_gammaln = multi_gammaln + kt.gammaln(nu / 2.0 - j / 2.0)
        lp = (
            (nu - p - 1.0) / 2.0 * kt.switch(sign_x > 0, logdet_x, 0.0)
            - 0.5 * _trace(kt.solve(v, x), p)
            - nu * p / 2.0 * float(np.log(2.0))
            - nu / 2.0 * logdet_v
            - multi_gammaln
        )
        symmetric = kt.all(kt.eq(x, _mT(x)), axis=(-2, -1))
        return bound(lp, sign_x > 0, symmetric, nu > p - 1)

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any, v: Any) -> TensorVariable:
        return broadcast_like(kt.expand_dims(kt.expand_dims(_f(nu), -1), -1) * v, rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> None:
        return None


def WishartBartlett(  # noqa: N802
    name: str,
    S: Any,  # noqa: N803
    nu: Any,
    is_cholesky: bool = False,
    return_cholesky: bool = False,
    initval: Any = None,
) -> TensorVariable:
    """Return a Wishart(``nu``, ``S``) matrix built from free chi-squared and normal variables.

    PyMC's construction for sampling a Wishart prior: free variables ``<name>_c``
    (``ChiSquared(nu - i)`` for ``i = 0..p-1``: the squared diagonal of a Bartlett
    factor ``A``) and ``<name>_z`` (standard normals below its diagonal), and the
    deterministic ``<name> = L A A^T L^T`` (``L A`` with ``return_cholesky``), ``L`` the
    Cholesky factor of ``S`` (``S`` itself with ``is_cholesky``). ``S`` and ``nu`` are
    constants. PyMC gives the diagonal ``ChiSquared(nu - 1 - i)`` degrees of freedom,
    one fewer than the Bartlett decomposition; kiln uses the decomposition's, so that
    the matrix is Wishart(``nu``, ``S``) with mean ``nu S``. ``initval`` (a ``p x p``
    matrix) starts the variables at its Bartlett factor.

    Examples
    --------
    >>> import numpy as np, kiln as kl
    >>> with kl.Model():
    ...     prec = kl.WishartBartlett("prec", np.eye(3), nu=5.0)
    """
    s = np.asarray(S, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise KilnValueError(f"WishartBartlett: S must be a square matrix, got shape {s.shape}")
    p = s.shape[0]
    if not np.isscalar(nu) and np.ndim(nu) != 0:
        raise KilnTypeError(f"WishartBartlett: nu must be a number, got {nu!r}")
    nu = float(nu)
    if not nu > p - 1:
        raise KilnValueError(f"WishartBartlett: nu must be > p - 1 = {p - 1}, got nu={nu}")
    if is_cholesky:
        chol = s
    else:
        if not _is_positive_definite(s):
            raise KilnValueError("WishartBartlett: S must be symmetric positive definite")
        chol = np.linalg.cholesky(s)
    rows, cols = np.tril_indices(p, -1)
    c_init = z_init = None
    if initval is not None:
        a = np.linalg.cholesky(np.linalg.solve(chol, np.linalg.solve(chol, initval).T))
        c_init, z_init = np.diag(a) ** 2, a[rows, cols]
    c = ChiSquared(f"{name}_c", nu - np.arange(p, dtype=np.float64), shape=p, initval=c_init)
    z = Normal(f"{name}_z", 0.0, 1.0, shape=len(rows), initval=z_init)
    index = np.full((p, p), len(rows) + p, dtype=np.int64)
    index[rows, cols] = np.arange(len(rows))
    index[np.arange(p), np.arange(p)] = len(rows) + np.arange(p)
    entries = kt.concatenate([z, kt.sqrt(c), kt.zeros((1,))])
    la = kt.matmul(kt.constant(chol), entries[kt.constant(index)])
    return Deterministic(name, la if return_cholesky else kt.matmul(la, _mT(la)))


def _one_of(what: str, **given: Any) -> tuple[str, Any]:
    found = {k: v for k, v in given.items() if v is not None}
    if len(found) != 1:
        raise KilnTypeError(
            f"{what}: give exactly one of {', '.join(given)}; got {sorted(found) or 'none'}"
        )
    return next(iter(found.items()))


def _chol_of(key: str, value: Any) -> TensorVariable:
    """Return the Cholesky factor of a covariance given as ``*cov``, ``*chol`` or ``*tau``."""
    value = _f(value)
    if key.endswith("chol"):
        return value
    if key.endswith("tau"):
        return kt.cholesky(kt.inv(value))
    return kt.cholesky(value)


class MatrixNormal(SymbolicDistribution):
    """MatrixNormal(mu, rowcov=/rowchol=/rowtau=, colcov=/colchol=/coltau=): ``m x n`` matrices.

    ``vec(X)`` is normal with covariance ``colcov (x) rowcov``: the rows covary by
    ``rowcov`` (``m x m``), the columns by ``colcov`` (``n x n``). Draws:
    ``mu + L_row Z L_col^T`` with ``Z`` standard normal.
    """

    params = ("mu", "rowcov", "rowchol", "rowtau", "colcov", "colchol", "coltau")
    ndim_supp = 2
    param_checks = (
        (("rowcov",), _is_positive_definite, "rowcov must be symmetric positive definite"),
        (("colcov",), _is_positive_definite, "colcov must be symmetric positive definite"),
        (("rowtau",), _is_positive_definite, "rowtau must be symmetric positive definite"),
        (("coltau",), _is_positive_definite, "coltau must be symmetric positive definite"),
    )

    @classmethod
    def rv_params(
        cls,
        mu: Any = None,
        rowcov: Any = None,
        rowchol: Any = None,
        rowtau: Any = None,
        colcov: Any = None,
        colchol: Any = None,
        coltau: Any = None,
    ) -> tuple[Any, ...]:
        if mu is None:
            raise KilnTypeError(f"{cls.__name__}: give mu")
        rk, rv = _one_of(cls.__name__, rowcov=rowcov, rowchol=rowchol, rowtau=rowtau)
        ck, cv = _one_of(cls.__name__, colcov=colcov, colchol=colchol, coltau=coltau)
        return (mu, _chol_of(rk, rv), _chol_of(ck, cv))

    @classmethod
    def build(cls, mu: Any, rowchol: Any, colchol: Any, *, size: Any, rng: Any) -> TensorVariable:
        m, n = _order(cls.__name__, rowchol), _order(cls.__name__, colchol)
        mu = _f(mu) + kt.zeros((m, n))
        batch = _as_tuple(batch_shape(size, mu[..., 0, 0]))
        z = kr.normal(0.0, 1.0, size=(*batch, m, n), rng=rng)
        return mu + kt.matmul(kt.matmul(rowchol, z), _mT(colchol))

    @staticmethod
    def logp(value: Any, mu: Any, rowchol: Any, colchol: Any) -> TensorVariable:
        x, mu = _f(value), _f(mu)
        m, n = _order("MatrixNormal", rowchol), _order("MatrixNormal", colchol)
        d = x - mu
        a = kt.solve_triangular(rowchol, d, lower=True, b_ndim=2)  # L_r^-1 (X - M)
        b = kt.solve_triangular(colchol, _mT(a), lower=True, b_ndim=2)  # L_c^-1 (...)^T
        quad = kt.sum(b * b, axis=(-2, -1))
        return (
            -0.5 * m * n * LOG_2PI
            - n * _log_diag_sum(rowchol, m)
            - m * _log_diag_sum(colchol, n)
            - 0.5 * quad
        )

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, *rest: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


class KroneckerNormal(SymbolicDistribution):
    """KroneckerNormal(mu, covs=/chols=/evds=, sigma=None): a normal of Kronecker covariance.

    The covariance is ``kron(covs[0], covs[1], ...)`` (from Cholesky factors ``chols``
    or eigendecompositions ``evds``: ``(eigenvalues, eigenvectors)`` pairs), plus
    ``sigma^2 I`` when ``sigma`` is given. The density never forms the ``N x N``
    covariance (``N`` the product of the factors' orders): without ``sigma`` it takes
    each factor's Cholesky factor, with ``sigma`` each factor's eigendecomposition
    (``kron(Q_i) diag(kron(w_i) + sigma^2) kron(Q_i)^T``), so a grid of ``N`` points
    costs the factors' decompositions and ``O(N sum(n_i))`` per evaluation. Draws form
    the full covariance.
    """

    params = ("mu", "covs", "chols", "evds", "sigma")
    ndim_supp = 1

    @classmethod
    def rv_params(
        cls,
        mu: Any = None,
        covs: Any = None,
        chols: Any = None,
        evds: Any = None,
        sigma: Any = None,
    ) -> tuple[Any, ...]:
        """Return ``(mu, noise variance, *factors)``: -1 as the variance when no ``sigma``."""
        if mu is None:
            raise KilnTypeError(f"{cls.__name__}: give mu")
        key, factors = _one_of(cls.__name__, covs=covs, chols=chols, evds=evds)
        if not isinstance(factors, list | tuple) or not factors:
            raise KilnTypeError(f"{cls.__name__}: {key} must be a non-empty list of matrices")
        mats = []
        for f in factors:
            if key == "evds":
                vals, vecs = f
                vecs = _f(vecs)
                mats.append(kt.matmul(vecs * _f(vals), _mT(vecs)))
            elif key == "chols":
                c = _f(f)
                mats.append(kt.matmul(c, _mT(c)))
            else:
                mats.append(_f(f))
        for i, mat in enumerate(mats):
            if mat.ndim != 2 or None in mat.type.shape:
                raise KilnValueError(
                    f"{cls.__name__}: {key}[{i}] must be a matrix of constant shape, got "
                    f"shape {mat.type.shape}"
                )
        noise = kt.constant(-1.0) if sigma is None else _f(sigma) ** 2
        return (mu, noise, *mats)

    @staticmethod
    def _cov(noise: Any, mats: tuple[Any, ...]) -> TensorVariable:
        cov = mats[0]
        for mat in mats[1:]:
            cov = kt.kron(_f(cov), _f(mat))
        if not _no_noise(noise):
            cov = cov + noise * kt.eye(cov.type.shape[0])
        return cov  # type: ignore[no-any-return]

    @classmethod
    def build(cls, mu: Any, noise: Any, *mats: Any, size: Any, rng: Any) -> TensorVariable:
        cov = cls._cov(noise, mats)
        mu = _f(mu) + kt.zeros_like(cov[..., 0])
        return kr.multivariate_normal(mu, cov, size=size, rng=rng)

    @staticmethod
    def logp(value: Any, mu: Any, noise: Any, *mats: Any) -> TensorVariable:
        x = _f(value)
        n = int(np.prod([_order("KroneckerNormal", _f(m)) for m in mats]))
        d = x - mu
        if d.ndim == 1:
            cols = d
        elif d.ndim == 2:  # a batch of vectors: the columns of one matrix
            cols = _mT(d)
        else:
            raise KilnValueError("KroneckerNormal: values of at most one batch dimension")
        if _no_noise(noise):
            chols = [kt.cholesky(_f(m)) for m in mats]
            z = kron_solve_lower(chols, cols)
            quad = kt.sum(z * z, axis=0)
            logdet = 0.0
            for c in chols:
                k = _order("KroneckerNormal", c)
                logdet = logdet + (n // k) * _log_diag_sum(c, k)
            return -0.5 * n * LOG_2PI - logdet - 0.5 * quad  # type: ignore[no-any-return]
        pairs = [kt.eigh(_f(m)) for m in mats]
        eigs = kron_diag(*(w for w, _ in pairs)) + noise
        z = kron_dot([_mT(q) for _, q in pairs], cols)
        if d.ndim == 2:
            quad = kt.sum(z * z / eigs[:, None], axis=0)
        else:
            quad = kt.sum(z * z / eigs)
        logp = -0.5 * n * LOG_2PI - 0.5 * kt.sum(kt.log(eigs)) - 0.5 * quad
        # a covariance that is not positive definite is a rejected point, not a NaN
        return bound(logp, kt.all(eigs > 0))  # type: ignore[no-any-return]

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, *rest: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


def _no_noise(noise: Any) -> bool:
    """Whether ``noise`` is :meth:`KroneckerNormal.rv_params`' constant for "no sigma"."""
    data = getattr(noise, "data", None)
    return data is not None and np.ndim(data) == 0 and float(data) == -1.0


def _adjacency(what: str, w: Any, binary: bool = False) -> np.ndarray:
    """Return ``W`` as a float array after checking it is a symmetric adjacency matrix."""
    if isinstance(w, TensorVariable) and not hasattr(w, "data"):
        raise KilnTypeError(f"{what}: W must be a constant matrix (an array), got {w!r}")
    arr = np.asarray(getattr(w, "data", w), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise KilnValueError(f"{what}: W must be a square matrix, got shape {arr.shape}")
    if not np.allclose(arr, arr.T) or np.any(arr < 0):
        raise KilnValueError(f"{what}: W must be symmetric with non-negative entries")
    if binary and not np.all((arr == 0) | (arr == 1)):
        raise KilnValueError(f"{what}: W must hold 0 and 1 only (an adjacency matrix)")
    if np.any(arr.sum(axis=1) == 0):
        isolated = np.flatnonzero(arr.sum(axis=1) == 0).tolist()
        raise KilnValueError(f"{what}: W has nodes without neighbours: {isolated}")
    return arr


def _gaussian_from_precision(
    what: str, mu: Any, q: Any, n: int, size: Any, rng: Any
) -> TensorVariable:
    """Return draws of ``Normal(mu, Q^-1)``: ``mu + L^-T z`` with ``Q = L L^T``."""
    batch = _as_tuple(size)
    if len(batch) > 1:
        raise KilnValueError(f"{what}: draws of at most one batch dimension, got size {batch}")
    chol = kt.cholesky(q)
    z = kr.normal(0.0, 1.0, size=(*batch, n), rng=rng)
    if batch:
        x = _mT(kt.solve_triangular(chol, _mT(z), trans=1, lower=True, b_ndim=2))
    else:
        x = kt.solve_triangular(chol, z, trans=1, lower=True)
    return _f(mu) + x


def _gaussian_precision_logp(d: Any, q: Any, n: int) -> TensorVariable:
    """Return ``0.5 log det Q - 0.5 d^T Q d - n/2 log(2 pi)`` (-inf unless Q is PD)."""
    sign, logdet = kt.slogdet(q)
    quad = kt.sum(d * kt.matmul(d, q), axis=-1)
    return bound(0.5 * logdet - 0.5 * quad - 0.5 * n * LOG_2PI, sign > 0)


class CAR(SymbolicDistribution):
    """CAR(mu, W, alpha, tau): a conditional autoregression over the graph of adjacency ``W``.

    Normal with precision ``tau (D - alpha W)``, ``D`` the diagonal of ``W``'s row sums;
    ``alpha`` in (-1, 1) keeps it positive definite. ``W`` is a constant symmetric
    matrix with non-negative weights.
    """

    params = ("mu", "W", "alpha", "tau")
    ndim_supp = 1
    param_checks = (
        (("alpha",), lambda a: (a > -1) & (a < 1), "alpha must be in (-1, 1)"),
        (("tau",), lambda t: t > 0, "tau must be > 0"),
    )

    @classmethod
    def rv_params(
        cls,
        mu: Any = None,
        W: Any = None,
        alpha: Any = None,
        tau: Any = None,  # noqa: N803
    ) -> tuple[Any, ...]:
        if mu is None or W is None or alpha is None or tau is None:
            raise KilnTypeError(f"{cls.__name__}: give mu, W, alpha and tau")
        w = _adjacency(cls.__name__, W)
        return (mu, w, alpha, tau)

    @staticmethod
    def _precision(w: Any, alpha: Any, tau: Any) -> TensorVariable:
        w = _f(w)
        d = kt.sum(w, axis=-1) * kt.eye(_order("CAR", w))
        return _f(tau) * (d - _f(alpha) * w)

    @classmethod
    def build(cls, mu: Any, w: Any, alpha: Any, tau: Any, *, size: Any, rng: Any) -> TensorVariable:
        n = _order(cls.__name__, w)
        q = cls._precision(w, alpha, tau)
        return _gaussian_from_precision(cls.__name__, mu + kt.zeros((n,)), q, n, size, rng)

    @staticmethod
    def logp(value: Any, mu: Any, w: Any, alpha: Any, tau: Any) -> TensorVariable:
        n = _order("CAR", w)
        lp = _gaussian_precision_logp(_f(value) - mu, CAR._precision(w, alpha, tau), n)
        return bound(lp, alpha > -1, alpha < 1, tau > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, *rest: Any) -> TensorVariable:
        return broadcast_like(mu, rv)


class ICAR(SymbolicDistribution):
    """ICAR(W, sigma=1, zero_sum_stdev=0.001): an intrinsic autoregression over adjacency ``W``.

    The log-density (unnormalised, as PyMC's) is
    ``-sum_{i~j} (x_i - x_j)^2 / (2 sigma^2) - (sum(x) / (zero_sum_stdev N))^2 / 2``: the
    neighbour differences, with a soft constraint of sum zero. kiln draws from the
    proper normal of that precision (PyMC cannot draw an ICAR). ``W`` is a constant
    symmetric 0/1 matrix with no isolated node.
    """

    params = ("W", "sigma", "zero_sum_stdev")
    defaults = {"sigma": 1.0, "zero_sum_stdev": 0.001}
    ndim_supp = 1
    param_checks = (
        (("sigma",), lambda s: s > 0, "sigma must be > 0"),
        (("zero_sum_stdev",), lambda s: s > 0, "zero_sum_stdev must be > 0"),
    )

    @classmethod
    def rv_params(
        cls,
        W: Any = None,  # noqa: N803
        sigma: Any = 1.0,
        zero_sum_stdev: Any = 0.001,
    ) -> tuple[Any, ...]:
        if W is None:
            raise KilnTypeError(f"{cls.__name__}: give W")
        w = _adjacency(cls.__name__, W, binary=True)
        rows, cols = np.nonzero(np.triu(w, 1))
        return (rows.astype(np.int64), cols.astype(np.int64), w.shape[0], sigma, zero_sum_stdev)

    @classmethod
    def build(
        cls, node1: Any, node2: Any, n: Any, sigma: Any, zsd: Any, *, size: Any, rng: Any
    ) -> TensorVariable:
        k = int(n.data)
        q = cls._precision(node1, node2, k, sigma, zsd)
        return _gaussian_from_precision(cls.__name__, kt.zeros((k,)), q, k, size, rng)

    @staticmethod
    def _precision(node1: Any, node2: Any, n: int, sigma: Any, zsd: Any) -> TensorVariable:
        rows, cols = np.asarray(node1.data), np.asarray(node2.data)
        lap = np.zeros((n, n))
        np.add.at(lap, (rows, cols), -1.0)
        np.add.at(lap, (cols, rows), -1.0)
        lap[np.diag_indices(n)] = -lap.sum(axis=1)
        sigma, zsd = _f(sigma), _f(zsd)
        return kt.constant(lap) / (sigma * sigma) + kt.ones((n, n)) / (zsd * n) ** 2

    @staticmethod
    def logp(value: Any, node1: Any, node2: Any, n: Any, sigma: Any, zsd: Any) -> TensorVariable:
        x, sigma = _f(value), _f(sigma)
        diff = x[..., node1] - x[..., node2]
        pairs = -0.5 * kt.sum(diff * diff, axis=-1) / (sigma * sigma)
        zero_sum = -0.5 * (kt.sum(x, axis=-1) / (zsd * _f(n))) ** 2
        return bound(pairs + zero_sum, sigma > 0, zsd > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, *params: Any) -> TensorVariable:
        return kt.zeros_like(rv, dtype="float64")
