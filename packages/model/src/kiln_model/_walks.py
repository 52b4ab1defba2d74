"""Random walks (PyMC's names): RandomWalk, GaussianRandomWalk and the walks of vectors.

A walk is its initial point followed by the cumulative sum of its steps, so its
draws run on every backend; its log-density is the initial point's plus the steps'.
MvGaussianRandomWalk and MvStudentTRandomWalk share one construction (:class:`_MvWalk`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, cast

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model._continuous import Normal
from kiln_model._distribution import density_of
from kiln_model._math import LOG_2PI, bound
from kiln_model._multivariate import MvNormal
from kiln_model._multivariate_derived import MvStudentT
from kiln_model._series import (
    _along,
    _at,
    _batch,
    _check_steps,
    _draw_node,
    _float,
    _init_batch,
    _init_or_default,
    _TimeSeries,
    fresh_draw,
)
from kiln_model._validate import check_constants
from kiln_random import RandomVariable


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    x = kt.as_tensor(x)
    return kt.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


@dataclasses.dataclass(eq=False)
class WalkDensity:
    """The log-density of a random walk, parameters ``(*init, *innovation)``.

    ``init`` / ``innov`` give the initial point's and the steps' log-densities (classes
    or density objects); ``n_init`` is how many parameters are the initial point's.
    ``core`` is 1 for a walk of vectors (time second last), ``init_core`` 0 when the
    initial vector is independent scalars (their log-densities summed). The steps'
    parameters have a time axis of length 1 before their core axes.
    """

    init: Any
    n_init: int
    innov: Any
    core: int = 0
    init_core: int = 0

    def logp(self, value: Any, *params: Any) -> TensorVariable:
        """Return ``init.logp(x_0) + sum_t innov.logp(x_t - x_{t-1})`` (summed over time)."""
        value = kt.as_tensor(value)
        first = self.init.logp(_at(value, 0, self.core), *params[: self.n_init])
        if self.init_core < self.core:
            first = kt.sum(first, axis=-1)
        diffs = _along(value, slice(1, None), self.core) - _along(value, slice(None, -1), self.core)
        rest = kt.sum(self.innov.logp(diffs, *params[self.n_init :]), axis=-1)
        return kt.as_tensor(first + rest)

    def support_point(self, rv: TensorVariable, *params: Any) -> TensorVariable:
        """Return the initial support point plus the cumulative steps' support points."""
        init_params, innov_params = params[: self.n_init], params[self.n_init :]
        start = self.init.support_point(_at(rv, 0, self.core), *init_params)
        moves = self.innov.support_point(_along(rv, slice(1, None), self.core), *innov_params)
        first = _at(kt.cast(start, "float64"), None, self.core)
        path = first + kt.cumsum(kt.cast(moves, "float64"), axis=-1 - self.core)
        return kt.concatenate([first, path], axis=-1 - self.core)

    def default_transform(self, rv: TensorVariable) -> None:
        """Return None: a walk's values are real."""
        return None


def _walk(
    name: str,
    innovation_dist: Any,
    init_dist: Any,
    steps: Any,
    length: Any,
    size: Any,
    rng: Any,
) -> tuple[TensorVariable, Any, list[Variable]]:
    """Return a walk of ``innovation_dist`` steps (scalar or vector) from ``init_dist``."""
    steps = _check_steps(name, steps, length, 1)
    innov_node = _draw_node(f"{name}: innovation_dist", innovation_dist, 1)
    innov_op = cast(RandomVariable, innov_node.op)
    core = innov_op.core_ndim
    init_dist = _init_or_default(
        name, init_dist, lambda: Normal.dist(0.0, 100.0), "kl.Normal.dist(0, 100)"
    )
    init_op = cast(RandomVariable, _draw_node(f"{name}: init_dist", init_dist, core).op)
    innov_src = _init_batch(innovation_dist) if core else innovation_dist
    batch = _batch(size, _init_batch(init_dist) if core else init_dist, innov_src)
    n: Any = kt.as_tensor(innovation_dist).type.shape[-1] if core else None
    if core and n is None:
        n = kt.shape_i(innovation_dist, -1)
    init_size = (*batch, n) if core and not init_op.core_ndim else batch
    init, init_core = fresh_draw(f"{name}: init_dist", init_dist, init_size, core)
    innov = kr.draw(
        innov_op,
        tuple(
            _at(p, None, len(sig))
            for p, sig in zip(innov_node.inputs[2:], innov_op.inputs_sig, strict=True)
        ),
        (*batch, steps),
        rng,
    )
    init_cls, init_params = density_of(init)
    innov_cls, innov_params = density_of(innov)
    first = _at(kt.cast(init, "float64"), None, core)
    path = first + kt.cumsum(kt.cast(innov, "float64"), axis=-1 - core)
    rv = kt.concatenate([first, path], axis=-1 - core)
    density = WalkDensity(init_cls, len(init_params), innov_cls, core, init_core)
    return rv, density, [*init_params, *innov_params]


def _innovation_core(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    innov = args[0] if args else kwargs.get("innovation_dist")
    node = getattr(innov, "owner", None)
    return node.op.core_ndim if node is not None and isinstance(node.op, RandomVariable) else 0


class RandomWalk(_TimeSeries):
    """RandomWalk(innovation_dist, init_dist, steps): ``x_t = x_{t-1} + innovation``.

    ``x[..., 0] ~ init_dist`` and ``x[..., t] - x[..., t - 1] ~ innovation_dist`` for
    ``t = 1..steps``, both unnamed draws (``.dist(...)``) whose batch shapes broadcast
    into the walk's. A vector ``innovation_dist`` (``kl.MvNormal.dist(...)``) makes a
    walk of vectors, of shape ``(..., steps + 1, n)``; its ``init_dist`` is a vector
    draw or scalar draws. Without ``init_dist`` the initial point is ``Normal(0, 100)``
    with a warning, as in PyMC.

    Examples
    --------
    >>> import kiln as kl
    >>> x = kl.RandomWalk.dist(
    ...     innovation_dist=kl.StudentT.dist(nu=4), init_dist=kl.Normal.dist(), steps=9
    ... )
    """

    params = ("innovation_dist",)

    def __new__(cls, name: str, *args: Any, **kwargs: Any) -> TensorVariable:  # type: ignore[misc]
        target = _VectorRandomWalk if _innovation_core(args, kwargs) else cls
        return _TimeSeries.__new__(target, name, *args, **kwargs)

    @classmethod
    def dist(cls, *args: Any, **kwargs: Any) -> TensorVariable:  # type: ignore[override]
        """Return an unnamed walk (of vectors when ``innovation_dist`` draws vectors)."""
        target = _VectorRandomWalk if _innovation_core(args, kwargs) else cls
        return super(RandomWalk, target).dist(*args, **kwargs)  # type: ignore[no-any-return]

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        init_dist = kwargs.pop("init_dist", None)
        params = cls._bind(args, kwargs)
        if params.get("innovation_dist") is None:
            raise KilnTypeError(f"{cls.display_name()}: missing parameter innovation_dist")
        return _walk(
            cls.display_name(), params["innovation_dist"], init_dist, steps, length, size, rng
        )


class _VectorRandomWalk(RandomWalk):
    """A RandomWalk of vectors (time second last); made by RandomWalk itself."""

    ndim_supp = 2


class GaussianRandomWalk(_TimeSeries):
    """GaussianRandomWalk(mu=0, sigma=1, init_dist, steps): Normal(mu, sigma) innovations.

    ``x[..., 0] ~ init_dist`` (default ``Normal(0, 100)``, with a warning as in PyMC)
    and ``x[..., t] - x[..., t - 1] ~ Normal(mu, sigma)``; the time axis is the last,
    of length ``steps + 1``.

    Examples
    --------
    >>> import kiln as kl
    >>> with kl.Model():
    ...     trend = kl.GaussianRandomWalk(
    ...         "trend", sigma=0.1, init_dist=kl.Normal.dist(0, 1), steps=99
    ...     )
    """

    params = ("mu", "sigma")
    defaults: ClassVar[dict[str, Any]] = {"mu": 0.0, "sigma": 1.0}
    param_checks = ((("sigma",), lambda s: s > 0, "sigma must be > 0"),)

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        from_kwargs = kwargs.pop("init_dist", None)
        params = cls._bind(args, kwargs)
        check_constants(cls.display_name(), params, cls.param_checks)
        innovation = Normal.dist(_float(params["mu"]), _float(params["sigma"]))
        return _walk(cls.display_name(), innovation, from_kwargs, steps, length, size, rng)


# --- walks of vectors with correlated steps: MvNormal or MvStudentT --------------------------


def _chol_of(name: str, forms: dict[str, Any], lower: bool) -> TensorVariable:
    """Return the lower Cholesky factor from exactly one of ``forms`` (matrix, tau or chol)."""
    given = [k for k, v in forms.items() if v is not None]
    if len(given) != 1:
        *head, last = forms
        raise KilnTypeError(
            f"{name}: give exactly one of {', '.join(head)} and {last}, got {given or 'none'}"
        )
    (key,) = given
    if key == "chol":
        factor = _float(forms[key])
        return factor if lower else _mT(factor)
    matrix = kt.inv(_float(forms[key])) if key == "tau" else _float(forms[key])
    if matrix.ndim < 2:
        raise KilnValueError(f"{name}: {key} must be a matrix, got a {matrix.ndim}-d tensor")
    return kt.cholesky(matrix)


@dataclasses.dataclass(eq=False)
class MvWalkDensity:
    """The log-density of a vector walk: parameters ``(mu, chol, *init)``, ``nu`` first for t.

    The steps are ``MvNormal(mu, L L^T)``, or ``MvStudentT(nu, mu, L L^T)`` when
    ``student``. ``init`` gives the initial vector's log-density (``init_core``: 1 for
    a vector distribution, 0 for independent scalars, summed over the vector).
    """

    init: Any
    init_core: int
    student: bool = False

    def logp(self, value: Any, *params: Any) -> TensorVariable:
        """Return the initial vector's log-density plus the steps' (MvNormal or MvStudentT)."""
        nu, (mu, chol, *init_params) = (params[0], params[1:]) if self.student else (None, params)
        value = kt.as_tensor(value)
        first = self.init.logp(value[..., 0, :], *init_params)
        if self.init_core == 0:
            first = kt.sum(first, axis=-1)
        diffs = value[..., 1:, :] - value[..., :-1, :] - kt.as_tensor(mu)[..., None, :]
        z = kt.solve_triangular(chol, _mT(diffs), lower=True, b_ndim=2)
        diag = kt.sum(chol * kt.eye(kt.shape_i(chol, -1)), axis=-1)
        steps, n = kt.shape_i(value, -2) - 1, kt.shape_i(value, -1)
        log_det = kt.cast(steps, "float64") * kt.sum(kt.log(diag), axis=-1)
        if nu is None:
            lp = (
                -0.5 * kt.sum(kt.square(z), axis=(-2, -1))
                - log_det
                - 0.5 * kt.cast(steps * n, "float64") * LOG_2PI
            )
            return bound(first + lp, kt.all(diag > 0, axis=-1))
        nu_t = kt.as_tensor(nu)[..., None]
        k = kt.cast(n, "float64")
        per_step = (
            kt.gammaln((nu_t + k) / 2.0)
            - kt.gammaln(nu_t / 2.0)
            - 0.5 * k * kt.log(np.pi * nu_t)
            - 0.5 * (nu_t + k) * kt.log1p(kt.sum(kt.square(z), axis=-2) / nu_t)
        )
        lp = kt.sum(per_step, axis=-1) - log_det
        return bound(first + lp, kt.all(diag > 0, axis=-1), kt.as_tensor(nu) > 0)

    def support_point(self, rv: TensorVariable, *params: Any) -> Any:
        """Return the initial support point plus ``t * mu`` at time ``t``."""
        mu, _, *init_params = params[1:] if self.student else params
        start = kt.cast(self.init.support_point(rv[..., 0, :], *init_params), "float64")
        t = kt.arange(kt.shape_i(rv, -2), dtype="float64")
        return start[..., None, :] + t[:, None] * kt.as_tensor(mu)[..., None, :]

    def default_transform(self, rv: TensorVariable) -> None:
        """Return None: a walk's values are real."""
        return None


class _MvWalk(_TimeSeries):
    """Shared construction of a walk of vectors whose steps are ``mu + L z`` (``z`` normal).

    ``scale_forms`` names the parameters that give the steps' scale matrix (one of them
    is given), ``checked`` those that ``param_checks`` checks where they are constants;
    a Student-t walk (``student``) divides each step by ``sqrt(w / nu)``,
    ``w`` chi-squared with ``nu`` degrees of freedom.
    """

    ndim_supp = 2
    scale_forms: ClassVar[tuple[str, ...]] = ()
    student: ClassVar[bool] = False
    checked: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        name = cls.display_name()
        init_dist = kwargs.pop("init_dist", None)
        p = cls._bind(args, kwargs)
        required = ("nu", "mu") if cls.student else ("mu",)
        missing = [k for k in required if p.get(k) is None]
        if missing:
            raise KilnTypeError(f"{name}: missing parameter(s) {', '.join(missing)}")
        steps = _check_steps(name, steps, length, 1)
        check_constants(name, {k: p.get(k) for k in cls.checked}, cls.param_checks)
        chol = _chol_of(name, {k: p.get(k) for k in cls.scale_forms}, bool(p["lower"]))
        nu = _float(p["nu"]) if cls.student else None
        mu = _float(p["mu"])
        mu = mu + kt.zeros_like(chol[..., 0])
        n = mu.type.shape[-1]
        if n is None:
            raise KilnValueError(
                f"{name}: the vector length (mu's or cov's last axis) must be static"
            )
        init_dist = _init_or_default(
            name,
            init_dist,
            lambda: MvNormal.dist(np.zeros(n), 100.0 * np.eye(n)),
            "kl.MvNormal.dist(0, 100 I)",
        )
        init_node = _draw_node(f"{name}: init_dist", init_dist, 1)
        nu_batch = () if nu is None else (nu,)
        batch = _batch(size, mu[..., 0], chol[..., 0, 0], _init_batch(init_dist), *nu_batch)
        init_size = batch if init_node.op.core_ndim else (*batch, n)
        init, core = fresh_draw(f"{name}: init_dist", init_dist, init_size, 1)
        if init.type.shape[-1] not in (None, n):
            raise KilnValueError(
                f"{name}: init_dist draws vectors of length {init.type.shape[-1]}, the steps {n}"
            )
        z = kr.normal(0.0, 1.0, size=(*batch, steps, n), rng=rng)
        spread = kt.matmul(z, _mT(chol))
        if nu is not None:
            w = kr.gamma(nu[..., None] / 2.0, 2.0, size=(*batch, steps), rng=kr.rng())
            spread = spread / kt.sqrt(w / nu[..., None])[..., None]
        moves = mu[..., None, :] + spread
        first = kt.cast(init, "float64")[..., None, :]
        rv = kt.concatenate([first, first + kt.cumsum(moves, axis=-2)], axis=-2)
        init_cls, init_params = density_of(init)
        density = MvWalkDensity(init_cls, core, cls.student)
        return rv, density, [*nu_batch, mu, chol, *init_params]


class MvGaussianRandomWalk(_MvWalk):
    """MvGaussianRandomWalk(mu, cov | tau | chol, init_dist, steps): a walk of vectors.

    Values have shape ``(..., steps + 1, n)``: time is the second last axis. ``x[..., 0,
    :] ~ init_dist`` (default ``MvNormal(0, 100 I)``, with a warning as in PyMC) and the
    steps are ``MvNormal(mu, cov)``; ``chol`` is the Cholesky factor (upper when
    ``lower=False``), ``tau`` the precision.

    Examples
    --------
    >>> import kiln as kl
    >>> import numpy as np
    >>> x = kl.MvGaussianRandomWalk.dist(
    ...     mu=np.zeros(2), cov=np.eye(2), init_dist=kl.Normal.dist(size=2), steps=9
    ... )
    """

    params = ("mu", "cov", "tau", "chol", "lower")
    defaults: ClassVar[dict[str, Any]] = {"lower": True}
    scale_forms = ("cov", "tau", "chol")
    checked = ("cov",)
    param_checks = MvNormal.param_checks


class MvStudentTRandomWalk(_MvWalk):
    """MvStudentTRandomWalk(nu, mu, scale | cov | tau | chol, init_dist, steps): t steps.

    A walk of vectors, shape ``(..., steps + 1, n)`` (time second last), whose steps are
    ``MvStudentT(nu, mu, scale)``: ``mu + L z / sqrt(w / nu)`` with ``z`` standard
    normal and ``w`` chi-squared with ``nu`` degrees of freedom, drawn afresh at each
    step. ``scale`` (also spelled ``cov``) is the scale matrix, ``tau`` its inverse,
    ``chol`` its Cholesky factor (upper when ``lower=False``). ``x[..., 0, :] ~
    init_dist`` (default ``MvNormal(0, 100 I)``, with a warning as in PyMC).

    Examples
    --------
    >>> import kiln as kl
    >>> import numpy as np
    >>> x = kl.MvStudentTRandomWalk.dist(
    ...     nu=4.0, mu=np.zeros(2), scale=np.eye(2), init_dist=kl.Normal.dist(size=2), steps=9
    ... )
    """

    params = ("nu", "mu", "scale", "cov", "tau", "chol", "lower")
    defaults: ClassVar[dict[str, Any]] = {"lower": True}
    scale_forms = ("scale", "cov", "tau", "chol")
    student = True
    checked = ("nu", "scale", "cov", "tau")
    param_checks = MvStudentT.param_checks
