"""``SymbolicDistribution``: a distribution whose draw is a graph of other draws.

Many distributions are a transformation of ones kiln already draws: a Gumbel is
``mu - beta * log(Exponential(1))``, a zero-inflated Poisson a switch between 0 and a
Poisson draw. Such a class writes ``build`` (the draw graph, from :mod:`kiln_random`'s
draws and tensor math) instead of declaring a draw op, and its draws then run on every
backend with no backend code. The log-density is the class's own ``logp`` in the
parameters ``rv_params`` returns, recorded with the draw (:func:`register_density`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable, Variable, infer_shape
from kiln_graph import tensor as kt
from kiln_model._distribution import Distribution, density_of, register_density
from kiln_model._model import Model
from kiln_model._validate import check_constants
from kiln_random import RandomVariable


class SymbolicDistribution(Distribution):
    """Base class of distributions drawn by a graph of other draws (module docstring).

    Subclasses declare ``params``, ``defaults``, ``support``, ``discrete``, ``ndim_supp``
    (core dimensions of one draw) and implement ``build``, ``logp`` and, where it has a
    closed form, ``logcdf``; ``rv_params`` maps the user's parameters to the ones
    ``build`` and ``logp`` take (default: the same, in order).
    """

    #: The number of core dimensions of one draw (0: a scalar distribution).
    ndim_supp: ClassVar[int] = 0

    @classmethod
    def core_ndim(cls) -> int:
        return cls.ndim_supp

    @classmethod
    def dist(
        cls, *args: Any, size: Any = None, shape: Any = None, rng: Any = None, **kwargs: Any
    ) -> TensorVariable:
        """Return an unnamed draw of this distribution (not part of any model).

        ``size`` is the batch shape (NumPy's); ``shape`` the whole shape of the draw.
        """
        params = cls._bind(args, kwargs)
        check_constants(cls.__name__, params, cls.param_checks)
        if shape is not None:
            if size is not None:
                raise KilnValueError(f"{cls.__name__}: give size or shape, not both")
            full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            size = full[: len(full) - cls.ndim_supp] if cls.ndim_supp else full
        tensors = [_as_param(p) for p in cls.rv_params(**params)]
        rv = kt.as_tensor(cls.build(*tensors, size=size, rng=rng if rng is not None else kr.rng()))
        register_density(rv, cls, list[Variable](tensors), rng=rng)
        return rv

    @classmethod
    def build(cls, *params: Any, **kwargs: Any) -> TensorVariable:
        """Return the draw graph of ``params``, of batch shape ``kwargs["size"]``.

        Called as ``build(*params, size=size, rng=rng)``; ``size`` None: the parameters'
        broadcast batch shape. ``rng`` is the generator of the first draw; further draws
        take ``kr.rng()`` each (identical draw expressions of one generator are one draw).
        """
        raise NotImplementedError


def redraw(what: str, rv: Any, size: Any) -> tuple[Any, list[Variable], TensorVariable]:
    """Return ``(dist, params, draw)``: the unnamed univariate draw ``rv`` drawn anew.

    ``rv`` is a distribution's ``.dist(...)``: one draw op (``kl.Normal.dist(0, 1)``) or a
    :class:`SymbolicDistribution`'s draw graph (``kl.Gumbel.dist(0, 1)``); the new draw
    has batch shape ``size``, the same density ``dist.logp(value, *params)`` and a
    generator of its own. ``what`` names the argument in errors (model variables,
    expressions and multivariate or composite distributions are refused).
    """
    owner = rv.owner if isinstance(rv, Variable) else None
    if owner is None:
        raise KilnTypeError(
            f"{what}: expected an unnamed draw such as kl.Normal.dist(0, 1), got {rv!r}"
        )
    ctx = Model.get_context(error_if_none=False)
    if rv.name is not None or (
        ctx is not None and any(info.rv is rv for info in ctx.variables.values())
    ):
        raise KilnTypeError(
            f"{what}: expected an unnamed draw (made with .dist(...)), not the model variable "
            f"{rv.name!r}"
        )
    try:
        dist, params = density_of(rv)
    except KilnTypeError:
        dist, params = None, []
    if isinstance(owner.op, RandomVariable) and getattr(dist, "rv_op", None) is owner.op:
        if owner.op.core_ndim:
            raise KilnTypeError(f"{what}: expected a univariate distribution, got {owner.op}")
        return dist, params, kr.draw(owner.op, tuple(params), size, kr.rng())
    if isinstance(dist, type) and issubclass(dist, SymbolicDistribution):
        if dist.ndim_supp:
            raise KilnTypeError(f"{what}: expected a univariate distribution, got {dist.__name__}")
        draw = kt.as_tensor(dist.build(*params, size=size, rng=kr.rng()))
        register_density(draw, dist, params)
        return dist, params, draw
    raise KilnTypeError(
        f"{what}: expected the .dist(...) draw of a univariate distribution, got {rv!r}"
    )


def _as_param(p: Any) -> TensorVariable:
    """Return a parameter as a tensor: integers stay int64, everything else float64."""
    if isinstance(p, Variable):
        return p  # type: ignore[return-value]
    value = np.asarray(p)
    return kt.as_tensor(p, dtype="int64" if value.dtype.kind in "iub" else "float64")


def batch_shape(size: Any, *params: Any, core: int = 0) -> Any:
    """Return ``size``, or the broadcast batch shape of ``params`` (each with ``core`` dims).

    Draws of a symbolic distribution each take this size, so that no draw is repeated by
    broadcasting (a scalar Bernoulli switching a vector of Poissons would be one coin).
    """
    if size is not None:
        return size
    tensors = [kt.as_tensor(p) for p in params]
    if core:
        tensors = [t[(Ellipsis, *([0] * core))] for t in tensors]
    total = tensors[0]
    for t in tensors[1:]:
        total = total + kt.zeros_like(t, dtype=total.dtype)
    if total.ndim == 0:
        return None
    return tuple(infer_shape(total))
