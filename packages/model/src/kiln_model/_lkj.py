"""LKJ priors on correlation matrices: ``LKJCorr`` and ``LKJCholeskyCov`` (PyMC's names).

The LKJ density of a correlation matrix ``C`` of order ``n`` is ``det(C)^(eta - 1)`` over
its normalising constant (Lewandowski, Kurowicka and Joe 2009). Draws follow their
C-vine construction: the canonical partial correlation of column ``i`` is
``2 Beta(a_i, a_i) - 1`` with ``a_i = eta + (n - 2 - i) / 2``, independently, and the
Cholesky factor is built from them (:func:`kiln_model._triangular.corr_cholesky`). Both
draws are graphs of Beta draws and tensor math, so they run on every backend.

``LKJCholeskyCov`` puts the LKJ prior on the correlation and ``sd_dist`` on the scales
of a covariance ``diag(s) C diag(s)``; its value is the packed lower triangle of the
covariance's Cholesky factor ``L = diag(s) W``. Its density in ``L`` is the LKJ density
of ``W`` (in the strict-lower entries of ``W``: ``prod_i W_ii^(2 eta - 3 + n - i)``),
``sd_dist``'s density of ``s`` (the row norms of ``L``) and the Jacobian of
``(s, W) -> L``, ``prod_i W_ii / s_i^i`` (row ``i`` is ``s_i`` times a point of a
hemisphere parametrised by its first ``i`` coordinates).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, TensorVariable, infer_shape
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._distribution import Distribution, register_density
from kiln_model._math import bound
from kiln_model._model import Deterministic
from kiln_model._symbolic import batch_shape, redraw
from kiln_model._triangular import (
    check_size,
    corr_cholesky,
    diagonal,
    expand_packed_triangular,
    pack_tril,
    pack_triu,
    row_norms,
    symmetric_from_triu,
)
from kiln_model._validate import check_constants

_ETA_CHECK = ((("eta",), lambda eta: eta > 0, "eta must be > 0"),)
_LOG_PI = float(np.log(np.pi))


def lkj_log_normalizer(eta: Any, n: int) -> TensorVariable:
    """Return ``-log`` of the integral of ``det(C)^(eta - 1)`` over correlation matrices.

    In the C-vine's partial correlations the integral factorises into one-dimensional
    integrals ``int_{-1}^{1} (1 - p^2)^(a - 1) dp = sqrt(pi) Gamma(a) / Gamma(a + 1/2)``,
    ``n - 1 - i`` of them with ``a = eta + (n - 2 - i) / 2`` for ``i = 0 .. n - 2``.
    """
    eta = kt.as_tensor(eta, dtype="float64")
    total: Any = kt.zeros_like(eta)
    for i in range(n - 1):
        a = eta + (n - 2 - i) / 2.0
        total = total + (n - 1 - i) * (0.5 * _LOG_PI + kt.gammaln(a) - kt.gammaln(a + 0.5))
    return -total


def lkj_corr_cholesky_draw(eta: Any, n: int, size: Any, rng: Any) -> TensorVariable:
    """Return ``(*size, n, n)`` Cholesky factors of LKJ(``eta``) correlation matrices."""
    eta = kt.as_tensor(eta, dtype="float64")
    strict = np.tril(np.ones((n, n), dtype=bool), -1)
    offset = np.where(strict, (n - 2 - np.arange(n)[None, :]) / 2.0, 0.0)
    # Entries on and above the diagonal are not used: drawn with a = 1 (a valid Beta).
    eta_mat = kt.expand_dims(kt.expand_dims(eta, -1), -1)
    alpha = kt.switch(kt.constant(strict), eta_mat + offset, 1.0)
    full = (n, n) if size is None else (*size, n, n)
    b = kr.beta(alpha, alpha, size=full, rng=rng)
    log1mz2 = float(np.log(4.0)) + kt.log(b) + kt.log1p(-b)  # 1 - (2b - 1)^2 = 4 b (1 - b)
    return corr_cholesky(2.0 * b - 1.0, kt.switch(kt.constant(strict), log1mz2, 0.0), n)


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    x = kt.as_tensor(x)
    return kt.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _batch_of(size: Any, shape: Any, what: str) -> Any:
    if shape is None:
        return (size,) if isinstance(size, int | np.integer) else size
    if size is not None:
        raise KilnTypeError(f"{what}: give size or shape, not both")
    full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    return full[:-1]


@dataclasses.dataclass(eq=False)
class LKJCholeskyCovDensity:
    """The log-density of packed Cholesky factors: parameters ``(eta, *sd_dist params)``.

    ``sd`` gives the scales' log-density (``sd.logp(s, *params)``) and ``sd_draw`` is the
    scales' draw (for their support point).
    """

    n: int
    sd: Any
    sd_draw: TensorVariable
    support: ClassVar[str] = "real"
    discrete: ClassVar[bool] = False

    def logp(self, value: Any, eta: Any, *sd_params: Any) -> TensorVariable:
        """Return the log-density of the packed factor ``value`` (module docstring)."""
        n = self.n
        chol = expand_packed_triangular(n, value)
        s = row_norms(chol)
        diag = diagonal(chol, n)
        w_diag = diag / s
        i = np.arange(n, dtype=np.float64)
        log_w = kt.log(kt.switch(diag > 0, w_diag, 1.0))
        lkj = kt.sum((2.0 * kt.expand_dims(eta, -1) - 3.0 + n - i) * log_w, axis=-1)
        jac = kt.sum(log_w - i * kt.log(s), axis=-1)
        sd_logp = kt.as_tensor(self.sd.logp(s, *sd_params))
        if sd_logp.ndim == s.ndim:
            sd_logp = kt.sum(sd_logp, axis=-1)
        lp = lkj_log_normalizer(eta, n) + lkj + jac + sd_logp
        return bound(lp, kt.all(diag > 0, axis=-1), eta > 0)

    def support_point(self, rv: TensorVariable, eta: Any, *sd_params: Any) -> TensorVariable:
        """Return the packed factor of ``diag(s)``, ``s`` the scales' support point."""
        s = self.sd.support_point(self.sd_draw, *sd_params)
        rows, cols = np.tril_indices(self.n)
        point = kt.switch(kt.constant(rows == cols), s[..., kt.constant(rows)], 0.0)
        return kt.broadcast_to(point, infer_shape(rv))

    def default_transform(self, rv: TensorVariable) -> tr.Transform:
        """Return the log of the diagonal entries (:class:`CholeskyCovPacked`)."""
        return tr.CholeskyCovPacked(self.n)


def chol_corr_stds(packed: Any, n: int) -> tuple[TensorVariable, TensorVariable, TensorVariable]:
    """Return ``(chol, corr, stds)`` of packed Cholesky factors of covariance matrices."""
    chol = expand_packed_triangular(n, packed)
    stds = row_norms(chol)
    w = chol / kt.expand_dims(stds, -1)
    return chol, kt.matmul(w, _mT(w)), stds


class LKJCholeskyCov(Distribution):
    """LKJCholeskyCov(eta, n, sd_dist): the Cholesky factor of a covariance with an LKJ prior.

    The correlation is LKJ(``eta``) of order ``n``; the scales are drawn from ``sd_dist``
    (an unnamed univariate draw such as ``kl.Exponential.dist(1.0, shape=n)``). The
    variable ``name`` is the packed lower triangle of the Cholesky factor (length
    ``n (n + 1) / 2``, batch dimensions in front), sampled through
    :class:`~kiln_model.transforms.CholeskyCovPacked`.

    Returns ``(chol, corr, stds)`` when ``compute_corr`` (the default), registering
    ``<name>_corr`` and ``<name>_stds`` as deterministics when ``store_in_trace``; the
    packed factor otherwise. ``.dist(...)`` returns the packed factor.

    Examples
    --------
    >>> import kiln as kl
    >>> with kl.Model():
    ...     chol, corr, stds = kl.LKJCholeskyCov(
    ...         "chol", eta=2.0, n=3, sd_dist=kl.Exponential.dist(1.0, shape=3)
    ...     )
    """

    params: ClassVar[tuple[str, ...]] = ("eta", "n", "sd_dist")
    param_checks = _ETA_CHECK

    def __new__(  # type: ignore[misc]
        cls,
        name: str,
        eta: Any = None,
        n: Any = None,
        sd_dist: Any = None,
        *,
        compute_corr: bool = True,
        store_in_trace: bool = True,
        **kwargs: Any,
    ) -> Any:
        packed = Distribution.__new__(cls, name, eta=eta, n=n, sd_dist=sd_dist, **kwargs)
        if not compute_corr:
            return packed
        chol, corr, stds = chol_corr_stds(packed, int(n))
        if store_in_trace:
            model = kwargs.get("model")
            corr = Deterministic(f"{name}_corr", corr, model=model)
            stds = Deterministic(f"{name}_stds", stds, model=model)
        return chol, corr, stds

    @classmethod
    def core_ndim(cls) -> int:
        return 1

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        eta: Any = None,
        n: Any = None,
        sd_dist: Any = None,
        *,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:
        """Return an unnamed draw: packed lower-triangular Cholesky factors."""
        what = cls.__name__
        if eta is None or n is None or sd_dist is None:
            raise KilnTypeError(f"{what}: give eta, n and sd_dist")
        n = check_size(what, n)
        check_constants(what, {"eta": eta}, cls.param_checks)
        eta_t = kt.as_tensor(eta, dtype="float64")
        batch = _batch_of(size, shape, what)
        if batch is None:
            sd_t = kt.as_tensor(sd_dist)
            sd_batch = sd_t[..., 0] if sd_t.ndim else sd_t
            batch = batch_shape(None, eta_t, sd_batch)
        batch = () if batch is None else tuple(batch)
        sd, sd_params, scales = redraw(f"{what}: sd_dist", sd_dist, (*batch, n))
        w = lkj_corr_cholesky_draw(eta_t, n, batch or None, rng if rng is not None else kr.rng())
        rv = pack_tril(kt.expand_dims(scales, -1) * w, n)
        register_density(rv, LKJCholeskyCovDensity(n, sd, scales), [eta_t, *sd_params], rng=rng)
        return rv


class LKJCorr(Distribution):
    """LKJCorr(n, eta): the strict upper triangle of an LKJ(``eta``) correlation matrix.

    The value has ``n (n - 1) / 2`` entries (row by row; batch dimensions in front),
    sampled through :class:`~kiln_model.transforms.CholeskyCorr` so that every value is
    positive definite. ``return_matrix=True`` returns the full ``(..., n, n)`` matrix
    (the variable is still the packed vector).
    """

    params: ClassVar[tuple[str, ...]] = ("n", "eta")
    param_checks = _ETA_CHECK

    def __new__(  # type: ignore[misc]
        cls, name: str, n: Any = None, eta: Any = None, *, return_matrix: bool = False, **kw: Any
    ) -> Any:
        packed = Distribution.__new__(cls, name, n=n, eta=eta, **kw)
        if return_matrix:
            return symmetric_from_triu(packed, int(n))
        return packed

    @classmethod
    def core_ndim(cls) -> int:
        return 1

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        n: Any = None,
        eta: Any = None,
        *,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
        return_matrix: bool = False,
    ) -> TensorVariable:
        """Return an unnamed draw (the packed correlations, or the matrix)."""
        if n is None or eta is None:
            raise KilnTypeError(f"{cls.__name__}: give n and eta")
        n = check_size(cls.__name__, n, least=2)
        check_constants(cls.__name__, {"eta": eta}, cls.param_checks)
        eta_t = kt.as_tensor(eta, dtype="float64")
        batch = _batch_of(size, shape, cls.__name__)
        if batch is None:
            batch = batch_shape(None, eta_t)
        rng = rng if rng is not None else kr.rng()
        w = lkj_corr_cholesky_draw(eta_t, n, batch, rng)
        rv = pack_triu(kt.matmul(w, _mT(w)), n, 1)
        register_density(rv, LKJCorrDensity(n), [eta_t], rng=rng)
        return symmetric_from_triu(rv, n) if return_matrix else rv


@dataclasses.dataclass(eq=False)
class LKJCorrDensity:
    """The LKJ log-density of packed correlations of order ``n``: parameter ``eta``."""

    n: int
    support: ClassVar[str] = "real"
    discrete: ClassVar[bool] = False

    def logp(self, value: Any, eta: Any) -> TensorVariable:
        """Return ``(eta - 1) log det C`` plus the log normaliser; -inf unless ``C`` is PD."""
        corr = symmetric_from_triu(value, self.n)
        # Positive definite iff every leading principal minor is positive (Sylvester).
        minors = [kt.slogdet(corr[..., :k, :k]) for k in range(2, self.n + 1)]
        positive = kt.all(kt.stack([kt.gt(sign, 0) for sign, _ in minors], axis=-1), axis=-1)
        logdet = kt.switch(positive, minors[-1][1], 0.0)
        lp = lkj_log_normalizer(eta, self.n) + (eta - 1.0) * logdet
        return bound(lp, positive, kt.all(kt.abs(value) < 1.0, axis=-1), eta > 0)

    def support_point(self, rv: TensorVariable, eta: Any) -> TensorVariable:
        """Return the identity correlation (all entries 0)."""
        return kt.zeros_like(rv, dtype="float64")

    def default_transform(self, rv: TensorVariable) -> tr.Transform:
        """Return :class:`CholeskyCorr` (values positive-definite by construction)."""
        return tr.CholeskyCorr(self.n)
