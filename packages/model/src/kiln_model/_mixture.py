"""Mixtures: ``Mixture(name, w, comp_dists)`` and ``NormalMixture(name, w, mu, sigma)``.

The log-density is ``logsumexp_k(log w_k + logp_k(value))`` over the components (the
last axis of ``w``). The draw is a graph of draws: a component index per element
(``categorical(w)``) selecting one of the components' draws (each redrawn with the
mixture's batch shape), so it runs on every backend.

Components are given as a list of unnamed draws of univariate distributions
(``kl.Normal.dist(...)``, ``kl.Gumbel.dist(...)``), or as one draw whose last axis
holds the components.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, infer_shape
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._continuous import Normal
from kiln_model._distribution import Distribution, broadcast_like, register_density
from kiln_model._symbolic import SymbolicDistribution, redraw


@dataclasses.dataclass(eq=False)
class MixtureDensity:
    """The log-density of a mixture: parameters ``(w, *component parameters)``.

    ``components`` holds each component's distribution class and number of parameters;
    ``stacked`` is True when one draw holds all components along its last axis.
    """

    components: list[tuple[type[Distribution], int]]
    stacked: bool
    support: str
    discrete: bool

    def _split(self, params: Sequence[Any]) -> list[list[Any]]:
        out, k = [], 0
        for _, n in self.components:
            out.append(list(params[k : k + n]))
            k += n
        return out

    def component_logps(self, value: Any, *params: Any) -> TensorVariable:
        """Return each component's log-density at ``value``, stacked on a last axis."""
        value = kt.as_tensor(value)
        groups = self._split(params)
        if self.stacked:
            (dist, _), group = self.components[0], groups[0]
            return dist.logp(kt.expand_dims(value, -1), *group)
        return kt.stack(
            [d.logp(value, *g) for (d, _), g in zip(self.components, groups, strict=True)], axis=-1
        )

    def logp(self, value: Any, w: Any, *params: Any) -> TensorVariable:
        """Return ``logsumexp(log w + component log-densities)`` over the components."""
        return kt.logsumexp(kt.log(w) + self.component_logps(value, *params), axis=-1)

    def logcdf(self, value: Any, w: Any, *params: Any) -> TensorVariable:
        """Return the log-CDF: ``logsumexp(log w + component log-CDFs)``."""
        value = kt.as_tensor(value)
        groups = self._split(params)
        if self.stacked:
            (dist, _), group = self.components[0], groups[0]
            comps = dist.logcdf(kt.expand_dims(value, -1), *group)
        else:
            comps = kt.stack(
                [d.logcdf(value, *g) for (d, _), g in zip(self.components, groups, strict=True)],
                axis=-1,
            )
        return kt.logsumexp(kt.log(w) + comps, axis=-1)

    def support_point(self, rv: TensorVariable, w: Any, *params: Any) -> TensorVariable:
        """Return the weighted mean of the components' support points."""
        points = []
        groups = self._split(params)
        for (dist, _), group in zip(self.components, groups, strict=True):
            points.append(kt.cast(_point(dist, group), "float64"))
        stacked = (
            points[0]
            if self.stacked
            else kt.stack([kt.broadcast_to(p, infer_shape(rv)) for p in points], axis=-1)
        )
        mean = kt.sum(w * stacked, axis=-1)
        if self.discrete:
            mean = kt.cast(kt.floor(mean + 0.5), "int64")
        return (
            broadcast_like(mean, rv)
            if not self.discrete
            else kt.broadcast_to(mean, infer_shape(rv))
        )

    def default_transform(self, rv: TensorVariable) -> tr.Transform | None:
        """Return the components' common transform (None if they differ)."""
        found = {_SUPPORT_TRANSFORM.get(d.support) for d, _ in self.components}
        return found.pop() if len(found) == 1 else None


_SUPPORT_TRANSFORM: dict[str, tr.Transform | None] = {
    "real": None,
    "positive": tr.log,
    "nonnegative": tr.log,
    "unit": tr.logodds,
}


def _point(dist: type[Distribution], params: list[Any]) -> Any:
    """Return a component's central value (its support point on a draw of its own shape)."""
    if issubclass(dist, SymbolicDistribution):
        return dist.support_point(
            kt.as_tensor(dist.build(*params, size=None, rng=kr.rng(0))), *params
        )
    template = kr.draw(dist.rv_op, tuple(params), None, kr.rng(0))
    return dist.support_point(template, *template.owner.inputs[2:])  # type: ignore[union-attr]


class Mixture(Distribution):
    """Mixture(w, comp_dists): a weighted mixture of component distributions.

    ``w`` holds the weights along its last axis; ``comp_dists`` is a list of unnamed
    draws (``kl.Normal.dist(mu, sigma)``, ...) or one draw whose last axis holds the
    components.
    """

    params: ClassVar[tuple[str, ...]] = ("w", "comp_dists")

    @classmethod
    def core_ndim(cls) -> int:
        return 0

    @classmethod
    def dist(
        cls,
        w: Any = None,
        comp_dists: Any = None,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:  # type: ignore[override]
        """Return an unnamed mixture draw of batch shape ``size`` (or ``shape``)."""
        if w is None or comp_dists is None:
            raise KilnTypeError("Mixture: give w and comp_dists")
        if shape is not None:
            if size is not None:
                raise KilnValueError("Mixture: give size or shape, not both")
            size = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        w_t = kt.as_tensor(w, dtype="float64")
        if w_t.ndim < 1:
            raise KilnValueError("Mixture: w needs a last axis of components")
        stacked = not isinstance(comp_dists, list | tuple)
        comps = [comp_dists] if stacked else list(comp_dists)
        n_comp = kt.shape_i(w_t, -1)
        index = kr.categorical(w_t, size=size, rng=rng if rng is not None else kr.rng())
        batch = tuple(infer_shape(index))
        # Each component drawn anew with the mixture's batch shape (and one more axis of
        # components for a stacked draw); any univariate distribution, a draw op's or a
        # graph of draws (kl.Gumbel.dist), has its density with the new draw.
        dists, param_groups, fresh = [], [], []
        for i, c in enumerate(comps):
            what = "Mixture: comp_dists" if stacked else f"Mixture: component {i}"
            dist, params, draw = redraw(what, c, (*batch, n_comp) if stacked else batch)
            dists.append(dist)
            param_groups.append(params)
            fresh.append(draw)
        supports = {d.support for d in dists}
        discrete = {d.discrete for d in dists}
        if len(discrete) != 1:
            raise KilnTypeError("Mixture: mix either continuous or discrete components, not both")
        density = MixtureDensity(
            [(d, len(g)) for d, g in zip(dists, param_groups, strict=True)],
            stacked,
            supports.pop() if len(supports) == 1 else "real",
            discrete.pop(),
        )
        draws = fresh[0] if stacked else kt.stack(fresh, axis=-1)
        picked = kt.eq(kt.expand_dims(index, -1), kt.arange(n_comp))
        zero = kt.zeros_like(draws)
        rv = kt.sum(kt.switch(picked, draws, zero), axis=-1)
        register_density(rv, density, [w_t, *[p for g in param_groups for p in g]], rng=rng)
        return rv

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        return None


class NormalMixture(Mixture):
    """NormalMixture(w, mu, sigma): normals of means ``mu`` and sds ``sigma`` (last axis)."""

    params = ("w", "mu", "sigma")

    @classmethod
    def dist(
        cls,
        w: Any = None,
        mu: Any = None,
        sigma: Any = None,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:  # type: ignore[override]
        """Return an unnamed normal-mixture draw."""
        if w is None or mu is None or sigma is None:
            raise KilnTypeError("NormalMixture: give w, mu and sigma")
        return Mixture.dist(w, Normal.dist(mu, sigma), size=size, shape=shape, rng=rng)
