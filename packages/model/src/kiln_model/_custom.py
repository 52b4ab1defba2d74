"""``CustomDist``: a variable with a user-written log-density (and, optionally, draws)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._distribution import Distribution, broadcast_like, register_density
from kiln_random import RandomVariable


@dataclasses.dataclass(eq=False)
class CustomDensity:
    """A user's ``logp(value, *params)`` and, optionally, ``support_point(rv, *params)``."""

    logp_fn: Callable[..., Any]
    logcdf_fn: Callable[..., Any] | None
    support_point_fn: Callable[..., Any] | None
    discrete: bool

    def logp(self, value: Any, *params: Any) -> TensorVariable:
        """Return the user's log-density."""
        return kt.as_tensor(self.logp_fn(value, *params))

    def logcdf(self, value: Any, *params: Any) -> TensorVariable:
        """Return the user's log-CDF."""
        if self.logcdf_fn is None:
            raise NotImplementedError("this CustomDist has no logcdf")
        return kt.as_tensor(self.logcdf_fn(value, *params))

    def support_point(self, rv: TensorVariable, *params: Any) -> TensorVariable:
        """Return the user's support point, or 0 (1 for nothing better known) like PyMC."""
        if self.support_point_fn is not None:
            return broadcast_like(self.support_point_fn(rv, *params), rv)
        return broadcast_like(0.0, rv)

    def default_transform(self, rv: TensorVariable) -> tr.Transform | None:
        """Return None: a custom density is sampled as it is unless a transform is given."""
        return None


class NoDrawRV(RandomVariable):
    """The draw op of a CustomDist without ``dist``: it has no draws."""

    name, signature, dtype = "custom", "->()", "float64"
    params = ()

    @staticmethod
    def core_fn(rng: Any) -> float:
        raise ValueError("CustomDist: no dist= was given, so this variable has no draws")


class NoDrawIntRV(NoDrawRV):
    """The integer-valued draw op of a CustomDist without ``dist``."""

    name, dtype = "custom_int", "int64"


class CustomDist(Distribution):
    """A distribution from the user's functions.

    ``CustomDist(name, *params, logp=f, dist=g, logcdf=h, support_point=s, dtype=...)``:
    ``f(value, *params)`` is the log-density (elementwise); ``g(*params, size=size)``
    (optional) builds a symbolic draw from other draws (``kl.Normal.dist(...)``...), for
    prior and posterior predictive sampling. Without ``dist`` the variable has no draws.
    """

    params = ("params",)

    @classmethod
    def core_ndim(cls) -> int:
        return 0

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        *params: Any,
        logp: Callable[..., Any] | None = None,
        dist: Callable[..., Any] | None = None,
        logcdf: Callable[..., Any] | None = None,
        support_point: Callable[..., Any] | None = None,
        dtype: str = "float64",
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
    ) -> TensorVariable:
        """Return an unnamed draw of the custom distribution."""
        if not callable(logp):
            raise KilnTypeError("CustomDist: logp must be a function logp(value, *params)")
        if shape is not None:
            size = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        tensors = [kt.as_tensor(p) for p in params]
        discrete = np.dtype(dtype).kind in "iub"
        if dist is not None:
            rv = kt.as_tensor(dist(*tensors, size=size))
        else:
            op = NoDrawIntRV() if discrete else NoDrawRV()
            rv = kr.draw(op, (), size, rng if rng is not None else kr.rng())
        density = CustomDensity(logp, logcdf, support_point, discrete)
        register_density(rv, density, list[Variable](tensors), rng=rng)
        return rv

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        return None
