"""Euler-Maruyama discretised SDEs (PyMC's name): an exact log-density and forward draws.

The forward draw is the recursion written out step by step in the graph (``steps``
applications of ``sde_fn``), so it runs on every backend; its graph, hence the compile
time of a predictive function, grows with ``steps``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import kiln_random as kr
from kiln_graph import KilnTypeError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._continuous import Normal
from kiln_model._distribution import density_of
from kiln_model._series import (
    _batch,
    _check_steps,
    _float,
    _init_or_default,
    _TimeSeries,
    fresh_draw,
)
from kiln_model._symbolic import _as_param
from kiln_model._validate import check_constants


@dataclasses.dataclass(eq=False)
class EulerMaruyamaDensity:
    """The log-density of an Euler-Maruyama series: parameters ``(dt, *sde_pars, *init)``."""

    sde_fn: Callable[..., Any]
    n_pars: int
    init: Any

    def logp(self, value: Any, dt: Any, *params: Any) -> TensorVariable:
        """Return ``init.logp(x_0) + sum_t log Normal(x_t | x + dt f(x), sqrt(dt) g(x))``."""
        value = kt.as_tensor(value)
        pars = [kt.as_tensor(q)[..., None] for q in params[: self.n_pars]]
        prev = value[..., :-1]
        drift, diffusion = _sde_terms(self.sde_fn, prev, pars)
        mean = prev + dt * drift
        scale = kt.sqrt(dt) * diffusion
        rest = kt.sum(Normal.logp(value[..., 1:], mean, scale), axis=-1)
        return kt.as_tensor(self.init.logp(value[..., 0], *params[self.n_pars :]) + rest)

    def support_point(self, rv: TensorVariable, dt: Any, *params: Any) -> TensorVariable:
        """Return the initial support point held along the series."""
        start = self.init.support_point(rv[..., 0], *params[self.n_pars :])
        return kt.cast(start[..., None] + kt.zeros_like(rv, dtype="float64"), "float64")

    def default_transform(self, rv: TensorVariable) -> None:
        """Return None: the values are real."""
        return None


def _forward_draw(
    sde_fn: Callable[..., Any],
    dt: Any,
    pars: Sequence[Any],
    init: Any,
    batch: tuple[Any, ...],
    steps: int,
    rng: Any,
) -> TensorVariable:
    """Return ``x_0 = init``, ``x_t = x + dt f(x) + sqrt(dt) g(x) z_t`` stacked on a last axis.

    ``sde_fn`` sees each point with a trailing axis of length 1 and the parameters with
    one too, as the log-density passes them (a time axis), so one function serves both.
    """
    z = kr.normal(0.0, 1.0, size=(*batch, steps), rng=rng)
    x = kt.broadcast_to(kt.cast(init, "float64"), batch)
    shifted = [kt.as_tensor(q)[..., None] for q in pars]
    points = [x]
    for t in range(steps):
        drift, diffusion = _sde_terms(sde_fn, x[..., None], shifted)
        step = dt * drift + kt.sqrt(dt) * diffusion * z[..., t : t + 1]
        x = kt.broadcast_to((x[..., None] + step)[..., 0], batch)
        points.append(x)
    return kt.stack(points, axis=-1)


def _sde_terms(sde_fn: Callable[..., Any], x: Any, pars: Sequence[Any]) -> tuple[Any, Any]:
    out = sde_fn(x, *pars)
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise KilnTypeError(
            f"EulerMaruyama: sde_fn must return (drift, diffusion), got {type(out).__name__}"
        )
    return kt.as_tensor(out[0]), kt.as_tensor(out[1])


class EulerMaruyama(_TimeSeries):
    """EulerMaruyama(dt, sde_fn, sde_pars, init_dist, steps): a discretised SDE.

    ``x_t ~ Normal(x_{t-1} + dt f, sqrt(dt) g)`` where ``f, g = sde_fn(x_{t-1},
    *sde_pars)`` are graph expressions (drift and diffusion); ``x_0 ~ init_dist``
    (default ``Normal(0, 100)`` with a warning as in PyMC). The log-density is exact;
    the forward draw applies the recursion ``steps`` times in the graph (its compile
    time grows with ``steps``).

    Examples
    --------
    >>> import kiln as kl
    >>> with kl.Model():
    ...     theta = kl.HalfNormal("theta", 1.0)
    ...     x = kl.EulerMaruyama(
    ...         "x", 0.1, lambda x, th: (-th * x, 0.5), (theta,),
    ...         init_dist=kl.Normal.dist(0, 1), steps=20,
    ...     )
    """

    params = ("dt", "sde_fn", "sde_pars")

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        name = cls.display_name()
        init_dist = kwargs.pop("init_dist", None)
        p = cls._bind(args, kwargs)
        missing = [k for k in cls.params if p.get(k) is None]
        if missing:
            raise KilnTypeError(f"{name}: missing parameter(s) {missing}")
        if not callable(p["sde_fn"]):
            raise KilnTypeError(f"{name}: sde_fn must be callable, got {p['sde_fn']!r}")
        if not isinstance(p["sde_pars"], tuple | list):
            raise KilnTypeError(
                f"{name}: sde_pars must be a tuple of parameters, got {p['sde_pars']!r}"
            )
        dt = _float(p["dt"])
        check_constants(name, {"dt": dt}, ((("dt",), lambda v: v > 0, "dt must be > 0"),))
        pars = [_as_param(q) for q in p["sde_pars"]]
        steps = _check_steps(name, steps, length, 1)
        init_dist = _init_or_default(
            name, init_dist, lambda: Normal.dist(0.0, 100.0), "kl.Normal.dist(0, 100)"
        )
        batch = _batch(size, init_dist, *pars)
        init, _ = fresh_draw(f"{name}: init_dist", init_dist, batch, 0)
        # sde_fn is checked once here (it returns a drift and a diffusion) so that a wrong
        # one fails where the series is made, not where its log-density is compiled.
        _sde_terms(p["sde_fn"], kt.cast(init, "float64")[..., None], [q[..., None] for q in pars])
        init_cls, init_params = density_of(init)
        rv = _forward_draw(p["sde_fn"], dt, pars, init, batch, steps, rng)
        density = EulerMaruyamaDensity(p["sde_fn"], len(pars), init_cls)
        return rv, density, [dt, *pars, *init_params]
