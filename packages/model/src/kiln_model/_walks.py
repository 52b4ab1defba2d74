"""Random walks (PyMC's names): RandomWalk, GaussianRandomWalk, MvGaussianRandomWalk.

A walk is its initial point followed by the cumulative sum of its steps, so its
draws run on every backend; its log-density is the initial point's plus the steps'.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model._continuous import Normal
from kiln_model._distribution import density_of
from kiln_model._math import LOG_2PI, bound
from kiln_model._multivariate import MvNormal
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
    core = innov_node.op.core_ndim
    init_dist = _init_or_default(
        name, init_dist, lambda: Normal.dist(0.0, 100.0), "kl.Normal.dist(0, 100)"
    )
    init_node = _draw_node(f"{name}: init_dist", init_dist, core)
    innov_src = _init_batch(innovation_dist) if core else innovation_dist
    batch = _batch(size, _init_batch(init_dist) if core else init_dist, innov_src)
    n = kt.as_tensor(innovation_dist).type.shape[-1] if core else None
    if core and n is None:
        n = kt.shape_i(innovation_dist, -1)
    init_size = (*batch, n) if core and not init_node.op.core_ndim else batch
    init, init_core = fresh_draw(f"{name}: init_dist", init_dist, init_size, core)
    innov = kr.draw(
        innov_node.op,
        tuple(
            _at(p, None, len(sig))
            for p, sig in zip(innov_node.inputs[2:], innov_node.op.inputs_sig, strict=True)
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


# --- multivariate Gaussian random walk -------------------------------------------------------


def _chol_of(name: str, cov: Any, tau: Any, chol: Any, lower: bool) -> TensorVariable:
    given = [k for k, v in (("cov", cov), ("tau", tau), ("chol", chol)) if v is not None]
    if len(given) != 1:
        raise KilnTypeError(f"{name}: give exactly one of cov, tau and chol, got {given or 'none'}")
    if chol is not None:
        factor = _float(chol)
        return factor if lower else _mT(factor)
    matrix = _float(cov) if cov is not None else kt.inv(_float(tau))
    if matrix.ndim < 2:
        raise KilnValueError(f"{name}: {given[0]} must be a matrix, got a {matrix.ndim}-d tensor")
    return kt.cholesky(matrix)


@dataclasses.dataclass(eq=False)
class MvWalkDensity:
    """The log-density of a Gaussian vector walk: parameters ``(mu, chol, *init)``.

    ``init`` gives the initial vector's log-density (``init_core``: 1 for a vector
    distribution, 0 for independent scalars, summed over the vector).
    """

    init: Any
    init_core: int

    def logp(self, value: Any, mu: Any, chol: Any, *init_params: Any) -> TensorVariable:
        """Return the initial vector's log-density plus MvNormal(mu, L L^T) of the steps."""
        value = kt.as_tensor(value)
        first = self.init.logp(value[..., 0, :], *init_params)
        if self.init_core == 0:
            first = kt.sum(first, axis=-1)
        diffs = value[..., 1:, :] - value[..., :-1, :] - kt.as_tensor(mu)[..., None, :]
        z = kt.solve_triangular(chol, _mT(diffs), lower=True, b_ndim=2)
        diag = kt.sum(chol * kt.eye(kt.shape_i(chol, -1)), axis=-1)
        steps, n = kt.shape_i(value, -2) - 1, kt.shape_i(value, -1)
        lp = (
            -0.5 * kt.sum(kt.square(z), axis=(-2, -1))
            - kt.cast(steps, "float64") * kt.sum(kt.log(diag), axis=-1)
            - 0.5 * kt.cast(steps * n, "float64") * LOG_2PI
        )
        return bound(first + lp, kt.all(diag > 0, axis=-1))

    def support_point(self, rv: TensorVariable, mu: Any, chol: Any, *init_params: Any) -> Any:
        """Return the initial support point plus ``t * mu`` at time ``t``."""
        start = kt.cast(self.init.support_point(rv[..., 0, :], *init_params), "float64")
        t = kt.arange(kt.shape_i(rv, -2), dtype="float64")
        return start[..., None, :] + t[:, None] * kt.as_tensor(mu)[..., None, :]

    def default_transform(self, rv: TensorVariable) -> None:
        """Return None: a walk's values are real."""
        return None


class MvGaussianRandomWalk(_TimeSeries):
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

    ndim_supp = 2
    params = ("mu", "cov", "tau", "chol", "lower")
    defaults: ClassVar[dict[str, Any]] = {"lower": True}

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        name = cls.display_name()
        init_dist = kwargs.pop("init_dist", None)
        p = cls._bind(args, kwargs)
        if p.get("mu") is None:
            raise KilnTypeError(f"{name}: missing parameter mu")
        steps = _check_steps(name, steps, length, 1)
        check_constants(name, {"cov": p.get("cov")}, MvNormal.param_checks)
        chol = _chol_of(name, p.get("cov"), p.get("tau"), p.get("chol"), bool(p["lower"]))
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
        batch = _batch(size, mu[..., 0], chol[..., 0, 0], _init_batch(init_dist))
        init_size = batch if init_node.op.core_ndim else (*batch, n)
        init, core = fresh_draw(f"{name}: init_dist", init_dist, init_size, 1)
        if init.type.shape[-1] not in (None, n):
            raise KilnValueError(
                f"{name}: init_dist draws vectors of length {init.type.shape[-1]}, the steps {n}"
            )
        z = kr.normal(0.0, 1.0, size=(*batch, steps, n), rng=rng)
        moves = mu[..., None, :] + kt.matmul(z, _mT(chol))
        first = kt.cast(init, "float64")[..., None, :]
        rv = kt.concatenate([first, first + kt.cumsum(moves, axis=-2)], axis=-2)
        init_cls, init_params = density_of(init)
        return rv, MvWalkDensity(init_cls, core), [mu, chol, *init_params]
