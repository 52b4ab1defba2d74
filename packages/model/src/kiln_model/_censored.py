"""``Censored(name, dist, lower, upper)``: a distribution whose values are clipped to bounds.

A value below ``lower`` is recorded as ``lower``, one above ``upper`` as ``upper``: the
bounds carry point masses ``P(X <= lower)`` and ``P(X >= upper)``, and the density
inside is the base distribution's. The draw is the base draw clipped to the bounds, so
it runs on every backend; the log-density needs the base's ``logcdf``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._distribution import Distribution, density_of, register_density
from kiln_model._symbolic import batch_shape
from kiln_random import RandomVariable


@dataclasses.dataclass(eq=False)
class CensoredDensity:
    """The log-density of a censored draw: parameters ``(lower, upper, *base parameters)``.

    ``base`` gives the base distribution's ``logp``/``logcdf`` (a class or a density
    object); ``discrete`` says whether the values are integers (the upper mass is then
    ``1 - F(upper - 1)``).
    """

    base: Any
    discrete: bool

    def _masses(self, value: Any, lower: Any, upper: Any, params: tuple[Any, ...]) -> Any:
        # An infinite bound is never selected; its mass is computed at the value instead
        # so that the branch a switch does not take stays finite (and its gradient too).
        lo = kt.switch(kt.isinf(lower), value, lower)
        hi = kt.switch(kt.isinf(upper), value, upper)
        below = self.base.logcdf(lo, *params)
        above = kt.log1mexp(self.base.logcdf(hi - 1 if self.discrete else hi, *params))
        return below, above

    def logp(self, value: Any, lower: Any, upper: Any, *params: Any) -> TensorVariable:
        """Return the base log-density inside the bounds, the log-masses at the bounds."""
        value = kt.as_tensor(value)
        inside = self.base.logp(value, *params)
        below, above = self._masses(value, lower, upper, params)
        out = kt.switch(kt.eq(value, lower), below, kt.switch(kt.eq(value, upper), above, inside))
        return kt.switch(kt.logical_or(value < lower, value > upper), -np.inf, out)

    def logcdf(self, value: Any, lower: Any, upper: Any, *params: Any) -> TensorVariable:
        """Return the base log-CDF inside the bounds, -inf below ``lower``, 0 from ``upper``."""
        value = kt.as_tensor(value)
        lcdf = self.base.logcdf(kt.clip(value, lower, upper), *params)
        return kt.switch(value < lower, -np.inf, kt.switch(value >= upper, 0.0, lcdf))

    def support_point(self, rv: TensorVariable, lower: Any, upper: Any, *params: Any) -> Any:
        """Return the base's support point clipped strictly inside the bounds where finite."""
        base_point = self.base.support_point(rv, *params)
        return kt.clip(base_point, lower, upper)

    def default_transform(self, rv: TensorVariable) -> tr.Transform | None:
        """Return None: a censored value may sit on a bound."""
        return None


class Censored(Distribution):
    """Censored(dist, lower, upper): ``dist``'s values clipped to ``[lower, upper]``.

    ``dist`` is an unnamed scalar draw (``kl.Normal.dist(mu, sigma)``) whose distribution
    has a ``logcdf``; ``lower`` / ``upper`` may be ``None`` or infinite (no censoring on
    that side). Observed values equal to a bound count the mass beyond it.
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
        """Return an unnamed censored draw of batch shape ``size`` (or ``shape``)."""
        node, base, params, lo, hi, size = bounded_base(
            "Censored", dist, lower, upper, size, shape, strict=False
        )
        batch = batch_shape(size, lo, hi, *params)
        draw = kr.draw(node.op, tuple(params), batch, rng if rng is not None else kr.rng())
        rv = kt.clip(draw, lo, hi)
        if base.discrete:
            rv = kt.cast(rv, draw.dtype)
        register_density(rv, CensoredDensity(base, bool(base.discrete)), [lo, hi, *params])
        return rv

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        return None


def bounded_base(
    what: str, dist: Any, lower: Any, upper: Any, size: Any, shape: Any, strict: bool
) -> tuple[Any, Any, list[Variable], TensorVariable, TensorVariable, Any]:
    """Check the arguments of ``Censored`` / ``Truncated`` (``what``) and return them.

    Returns ``(node, base, params, lower, upper, size)``: the base draw's node, what
    gives its density and its parameters, the bounds as float64 tensors (None is
    infinite) and the batch size (from ``shape`` if given). Constant bounds must have
    ``lower < upper`` (``strict``) or ``lower <= upper``.
    """
    node = dist.owner if isinstance(dist, Variable) else None
    if node is None or not isinstance(node.op, RandomVariable):
        raise KilnTypeError(
            f"{what}: dist must be an unnamed draw such as kl.Normal.dist(0, 1), got {dist!r}"
        )
    if node.op.core_ndim:
        raise KilnTypeError(f"{what}: dist must be a scalar (univariate) distribution")
    base, params = density_of(dist)
    try:
        base.logcdf(kt.as_tensor(0.0), *params)
    except NotImplementedError:
        raise KilnTypeError(
            f"{what}: {getattr(base, '__name__', base)} has no logcdf, which {what} needs"
        ) from None
    if shape is not None:
        if size is not None:
            raise KilnValueError(f"{what}: give size or shape, not both")
        size = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    lo = kt.as_tensor(-np.inf if lower is None else lower, dtype="float64")
    hi = kt.as_tensor(np.inf if upper is None else upper, dtype="float64")
    data_lo, data_hi = getattr(lo, "data", None), getattr(hi, "data", None)
    if data_lo is not None and data_hi is not None:
        lo_v, hi_v = np.asarray(data_lo), np.asarray(data_hi)
        bad = lo_v >= hi_v if strict else lo_v > hi_v
        if np.any(bad):
            raise KilnValueError(
                f"{what}: lower must be {'<' if strict else '<='} upper, got "
                f"lower={np.asarray(data_lo)!r}, upper={np.asarray(data_hi)!r}"
            )
    return node, base, params, lo, hi, size
