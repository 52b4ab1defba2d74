"""``Truncated(name, dist, lower, upper)``: a distribution restricted to an interval.

The density is the base density inside ``[lower, upper]`` divided by the base's mass
there, ``F(upper) - F(lower)`` (``F(lower - 1)`` for integers), taken from the upper
tail (``S(lower) - S(upper)``, ``S = 1 - F``) where both bounds are above the median, so
that it keeps its digits far in either tail.

Draws are inverse-CDF draws: a uniform ``q`` between the bounds' CDF values (in log
space), then the point where the base's log-CDF reaches ``log q``, found by bisection
written in the graph (:data:`BISECTION_STEPS` halvings of a bracket that covers the
interval; an infinite side is reached through ``t / (1 - t)``). It needs only the
base's ``logcdf``, so it works for any base and runs on every backend. A truncated
Normal is kiln's ``TruncatedNormal``, which has an exact draw.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import TensorVariable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._censored import bounded_base
from kiln_model._continuous import TruncatedNormal
from kiln_model._distribution import Distribution, density_of, register_density
from kiln_model._math import LOG_2, log_diff_exp
from kiln_model._symbolic import batch_shape

#: Halvings of the draw's bracket: the bracket [0, 1] of the bisection variable shrinks
#: to 2**-64 of its length, below the spacing of float64 numbers near 1.
BISECTION_STEPS = 64


@dataclasses.dataclass(eq=False)
class TruncatedDensity:
    """The log-density of a truncated draw: parameters ``(lower, upper, *base parameters)``."""

    base: Any
    discrete: bool

    def _log_cdf_at_bounds(self, lower: Any, upper: Any, params: tuple[Any, ...]) -> Any:
        """Return ``log F`` just below ``lower`` and at ``upper`` (stand-ins where infinite)."""
        lo_inf, hi_inf = kt.isinf(lower), kt.isinf(upper)
        # Finite stand-ins keep the unselected branches (and their gradients) finite.
        lo = kt.switch(lo_inf, kt.switch(hi_inf, 0.0, upper), lower)
        hi = kt.switch(hi_inf, kt.switch(lo_inf, 0.0, lower), upper)
        below = self.base.logcdf(lo - 1.0 if self.discrete else lo, *params)
        at_hi = self.base.logcdf(hi, *params)
        return kt.switch(lo_inf, -np.inf, below), kt.switch(hi_inf, 0.0, at_hi)

    def log_mass(self, lower: Any, upper: Any, params: tuple[Any, ...]) -> Any:
        """Return ``log(F(upper) - F(lower))`` of the base, from the tail that keeps digits."""
        log_lo, log_hi = self._log_cdf_at_bounds(lower, upper, params)
        lower_tail = log_diff_exp(log_hi, log_lo)
        # Both bounds above the median: S(lower) - S(upper), S = 1 - F.
        upper_tail = log_diff_exp(kt.log1mexp(log_lo), kt.log1mexp(log_hi))
        return kt.switch(log_lo > -LOG_2, upper_tail, lower_tail)

    def logp(self, value: Any, lower: Any, upper: Any, *params: Any) -> TensorVariable:
        """Return the base log-density minus the log-mass of the interval; -inf outside."""
        value = kt.as_tensor(value)
        logp = self.base.logp(value, *params) - self.log_mass(lower, upper, params)
        return kt.switch(kt.logical_or(value < lower, value > upper), -np.inf, logp)

    def logcdf(self, value: Any, lower: Any, upper: Any, *params: Any) -> TensorVariable:
        """Return ``log((F(value) - F(lower)) / (F(upper) - F(lower)))`` inside the bounds."""
        value = kt.as_tensor(value)
        inside = kt.clip(value, lower, upper)
        lcdf = self.log_mass(lower, inside, params) - self.log_mass(lower, upper, params)
        return kt.switch(value < lower, -np.inf, kt.switch(value >= upper, 0.0, lcdf))

    def support_point(self, rv: TensorVariable, lower: Any, upper: Any, *params: Any) -> Any:
        """Return the base's support point moved inside the bounds where it lies outside."""
        point = self.base.support_point(rv, *params)
        lo_inf, hi_inf = kt.isinf(lower), kt.isinf(upper)
        one = 1 if self.discrete else 1.0
        mid = (lower + upper) / 2 if not self.discrete else kt.floor((lower + upper) / 2)
        inside = kt.switch(lo_inf, upper - one, kt.switch(hi_inf, lower + one, mid))
        outside = kt.logical_or(point < lower, point > upper)
        out = kt.switch(outside, inside, point)
        return kt.cast(out, rv.dtype) if self.discrete else out

    def default_transform(self, rv: TensorVariable) -> tr.Transform | None:
        """Return the interval transform of the bounds (None for integers)."""
        if self.discrete:
            return None
        _, lower, upper = _bounds_of(rv)
        lo = None if _is_constant(lower, -np.inf) else lower
        hi = None if _is_constant(upper, np.inf) else upper
        return tr.interval(lo, hi) if lo is not None or hi is not None else None


def _is_constant(x: Any, value: float) -> bool:
    data = getattr(x, "data", None)
    return data is not None and bool(np.all(np.asarray(data) == value))


def _bounds_of(rv: TensorVariable) -> tuple[Any, Any, Any]:
    density, params = density_of(rv)
    return density, params[0], params[1]


def _inverse_cdf_draw(
    density: TruncatedDensity, q_log: Any, lower: Any, upper: Any, params: tuple[Any, ...]
) -> TensorVariable:
    """Return the smallest ``x`` in ``[lower, upper]`` with ``log F(x) >= q_log`` (bisection)."""
    lo_inf, hi_inf = kt.isinf(lower), kt.isinf(upper)
    lo_f = kt.switch(lo_inf, 0.0, lower)
    hi_f = kt.switch(hi_inf, 0.0, upper)
    center = kt.switch(lo_inf, kt.switch(hi_inf, 0.0, hi_f), lo_f)

    def point(t: Any) -> Any:
        # t in [0, 1] -> x: linear on a finite interval, t / (1 - t) towards an infinite
        # side (the clamps keep the end points finite).
        t_hi = kt.minimum(t, 1.0 - 2.0**-53)
        t_lo = kt.maximum(t, 2.0**-60)
        w = kt.clip(2.0 * t - 1.0, -1.0 + 2.0**-53, 1.0 - 2.0**-53)
        return kt.switch(
            lo_inf,
            kt.switch(hi_inf, center + w / (1.0 - kt.abs(w)), hi_f - (1.0 - t_lo) / t_lo),
            kt.switch(hi_inf, lo_f + t_hi / (1.0 - t_hi), lo_f + (hi_f - lo_f) * t),
        )

    def reaches(x: Any) -> Any:
        at = kt.floor(x) if density.discrete else x
        return density.base.logcdf(at, *params) >= q_log

    lo_t = kt.zeros_like(q_log)
    hi_t = kt.ones_like(q_log)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo_t + hi_t)
        up = reaches(point(mid))
        lo_t, hi_t = kt.switch(up, lo_t, mid), kt.switch(up, mid, hi_t)
    x = kt.clip(point(hi_t), lower, upper)
    return kt.floor(x) if density.discrete else x


class Truncated(Distribution):
    """Truncated(dist, lower, upper): ``dist`` restricted to ``[lower, upper]``.

    ``dist`` is an unnamed scalar draw (``kl.Gamma.dist(2, 1)``) whose distribution has a
    ``logcdf``; ``lower`` / ``upper`` may be ``None`` or infinite (no bound on that side).
    """

    params: ClassVar[tuple[str, ...]] = ("dist", "lower", "upper")

    @classmethod
    def core_ndim(cls) -> int:
        return 0

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        dist: Any = None,
        lower: Any = None,
        upper: Any = None,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:
        """Return an unnamed truncated draw of batch shape ``size`` (or ``shape``)."""
        node, base, params, lo, hi, size = bounded_base(
            "Truncated", dist, lower, upper, size, shape, strict=True
        )
        if node.op is kr.OPS["normal"]:  # kiln has the exact truncated normal
            mu, sigma = params
            return TruncatedNormal.dist(mu, sigma, lower=lo, upper=hi, size=size, rng=rng)
        density = TruncatedDensity(base, bool(base.discrete))
        batch = batch_shape(size, lo, hi, *params)
        log_lo, log_hi = density._log_cdf_at_bounds(lo, hi, tuple(params))
        u = kr.uniform(0.0, 1.0, size=batch, rng=rng if rng is not None else kr.rng())
        # log(F(lo) + u (F(hi) - F(lo))), without forming either CDF.
        q_log = kt.logaddexp(log_lo, kt.log(u) + log_diff_exp(log_hi, log_lo))
        rv = _inverse_cdf_draw(density, q_log, lo, hi, tuple(params))
        if density.discrete:
            rv = kt.cast(rv, node.outputs[1].dtype)  # type: ignore[attr-defined]
        register_density(rv, density, [lo, hi, *params])
        return rv

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        return None
