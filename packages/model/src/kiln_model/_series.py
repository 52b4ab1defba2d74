"""Shared construction of PyMC's time series: the time length, the steps and the initial draws.

A series' time axis is its last one (the second last for multivariate walks, whose
last axis is the vector); batch dimensions come first. Its length is ``steps`` plus
the number of initial points (one, or ``ar_order``), given directly or taken from
``shape``, ``dims`` or ``observed``. Initial points are draws of ``init_dist``, an
unnamed ``.dist()`` draw resized to the series' batch shape. Each family's module
(:mod:`._walks`, :mod:`._autoregressive`, :mod:`._sde`) subclasses :class:`_TimeSeries`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np

import kiln_random as kr
from kiln_graph import Apply, KilnTypeError, KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model._distribution import Distribution, register_density
from kiln_model._errors import ModelError
from kiln_model._model import _as_dims, modelcontext
from kiln_model._symbolic import SymbolicDistribution, _as_param, batch_shape
from kiln_random import RandomVariable

#: Warnings point at the first caller outside kiln_model (the user's model code).
_KILN_MODEL_DIR = os.path.dirname(__file__)

_DEFAULT_INIT = (
    "{name}: init_dist not given; the initial values default to {default}. "
    "Give init_dist=... to silence this warning."
)


# --- helpers ---------------------------------------------------------------------------------


def _float(p: Any) -> TensorVariable:
    """Return a parameter as a float64 tensor (a list holding variables is stacked)."""
    if isinstance(p, list | tuple) and any(isinstance(q, Variable) for q in p):
        return kt.stack([_float(q) for q in p])
    t = _as_param(p)
    return t if t.dtype == "float64" else kt.cast(t, "float64")


def _along(x: Any, sl: slice, core: int) -> TensorVariable:
    """Return ``x`` sliced by ``sl`` along the axis ``core`` places before the last."""
    return kt.as_tensor(x)[(Ellipsis, sl, *([slice(None)] * core))]


def _at(x: Any, i: int | None, core: int) -> TensorVariable:
    """Return ``x`` at index ``i`` (None: a new axis) of the axis ``core`` before the last."""
    return kt.as_tensor(x)[(Ellipsis, i, *([slice(None)] * core))]


def _static_int(name: str, what: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise KilnValueError(f"{name}: {what} must be an integer, got {value!r}")
    return int(value)


def _check_steps(name: str, steps: Any, length: Any, offset: int) -> int:
    """Return ``steps`` checked against a time length (``steps + offset`` points)."""
    steps = _static_int(name, "steps", steps)
    length = _static_int(name, "the time length", length) if length is not None else None
    if steps is None:
        if length is None:
            raise KilnValueError(
                f"{name}: the number of time steps is unknown: give steps=..., or shape, "
                "dims or observed whose time axis has a known length"
            )
        steps = length - offset
    if steps < 1:
        raise KilnValueError(
            f"{name}: steps must be >= 1, got {steps}"
            + (f" (a time length of {length} with {offset} initial point(s))" if length else "")
        )
    if length is not None and length != steps + offset:
        raise KilnValueError(
            f"{name}: the time axis has length {length}, but steps={steps} needs "
            f"steps + {offset} = {steps + offset} points"
        )
    return steps


def _draw_node(what: str, rv: Any, max_core: int) -> Apply:
    """Return the node of the unnamed draw ``rv`` after checking it (one draw op, unnamed)."""
    owner = getattr(rv, "owner", None)
    if not isinstance(rv, Variable) or owner is None or not isinstance(owner.op, RandomVariable):
        raise KilnTypeError(
            f"{what}: expected an unnamed draw such as kl.Normal.dist(0, 1), got {rv!r}"
        )
    if rv.name is not None:
        raise KilnValueError(
            f"{what}: expected an unnamed draw (a distribution's .dist(...)), got the model "
            f"variable {rv.name!r}"
        )
    if owner.op.core_ndim > max_core:
        raise KilnValueError(
            f"{what}: expected a distribution with at most {max_core} core dimension(s), got "
            f"{owner.op} with {owner.op.core_ndim}"
        )
    return owner


def fresh_draw(what: str, rv: Any, size: Any, max_core: int) -> tuple[TensorVariable, int]:
    """Return a new draw of the unnamed draw ``rv``'s distribution of batch shape ``size``.

    Returns the draw and its number of core dimensions. ``rv`` must be one draw
    (``kl.Normal.dist(...)``), not a model variable, with at most ``max_core`` core
    dimensions.
    """
    owner = _draw_node(what, rv, max_core)
    op = cast(RandomVariable, owner.op)
    try:
        new = kr.draw(op, tuple(owner.inputs[2:]), tuple(size), kr.rng())
    except (KilnValueError, KilnTypeError) as exc:
        raise KilnValueError(
            f"{what}: its parameters do not fit the series' batch shape {tuple(size)}: {exc}"
        ) from exc
    return new, op.core_ndim


def _init_or_default(name: str, init_dist: Any, default: Callable[[], Any], shown: str) -> Any:
    if init_dist is not None:
        return init_dist
    warnings.warn(
        _DEFAULT_INIT.format(name=name, default=shown),
        UserWarning,
        skip_file_prefixes=(_KILN_MODEL_DIR,),
    )
    return default()


def _batch(size: Any, *sources: Any) -> tuple[Any, ...]:
    out = batch_shape(size, *sources)
    return () if out is None else tuple(out)


def _init_batch(init_dist: Any) -> TensorVariable:
    """Return a tensor of the batch shape an initial-values draw brings (its last axis dropped).

    A vector of initial values (``ar_order`` values, a walk's vector) is the last axis
    whether it comes from one vector draw or from scalar draws of that shape (as PyMC).
    """
    t = kt.as_tensor(init_dist)
    return t[..., 0] if t.ndim else t


# --- the shared constructor ------------------------------------------------------------------


class _TimeSeries(SymbolicDistribution):
    """Shared construction: the time length from ``steps``/``shape``/``dims``/``observed``."""

    ndim_supp = 1

    @classmethod
    def display_name(cls) -> str:
        """Return the name errors and warnings give (the public class's)."""
        return cls.__name__.lstrip("_").replace("Vector", "")

    @classmethod
    def n_init(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        """Return the number of initial points (the time length is ``steps`` more)."""
        return 1

    def __new__(  # type: ignore[misc]
        cls,
        name: str,
        *args: Any,
        steps: Any = None,
        dims: Any = None,
        shape: Any = None,
        observed: Any = None,
        model: Any = None,
        **kwargs: Any,
    ) -> TensorVariable:
        m = modelcontext(model)
        full = m.prefixed(name)
        length = _time_length(m, full, dims, shape, observed, cls.ndim_supp)
        if length is not None:
            try:
                steps = _check_steps(cls.display_name(), steps, length, cls.n_init(args, kwargs))
            except (KilnValueError, KilnTypeError) as exc:
                raise type(exc)(f"{full}: {exc}") from exc
        return Distribution.__new__(  # type: ignore[no-any-return]
            cls,
            name,
            *args,
            steps=steps,
            dims=dims,
            shape=shape,
            observed=observed,
            model=model,
            **kwargs,
        )

    @classmethod
    def dist(  # type: ignore[override]
        cls,
        *args: Any,
        steps: Any = None,
        size: Any = None,
        shape: Any = None,
        rng: Any = None,
        **kwargs: Any,
    ) -> TensorVariable:
        """Return an unnamed series of ``steps`` steps, batch shape ``size`` (or ``shape``)."""
        name = cls.display_name()
        length = None
        if shape is not None:
            if size is not None:
                raise KilnValueError(f"{name}: give size or shape, not both")
            full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            if len(full) < cls.ndim_supp:
                raise KilnValueError(
                    f"{name}: shape {full} needs at least {cls.ndim_supp} dimension(s) "
                    "(the time axis last)"
                )
            size = full[: len(full) - cls.ndim_supp]
            length = full[len(full) - cls.ndim_supp]
        if size is not None and isinstance(size, int | np.integer):
            size = (size,)
        rv, density, params = cls.make(
            kwargs, args, steps, length, size, kr.rng() if rng is None else rng
        )
        register_density(rv, density, params, rng=rng)
        return rv

    @classmethod
    def make(
        cls,
        kwargs: dict[str, Any],
        args: tuple[Any, ...],
        steps: Any,
        length: Any,
        size: Any,
        rng: Any,
    ) -> tuple[TensorVariable, Any, list[Variable]]:
        """Return ``(draw, density, density parameters)`` of one series."""
        raise NotImplementedError


def _time_length(m: Any, name: str, dims: Any, shape: Any, observed: Any, core: int) -> Any:
    """Return the static length of the time axis (``core`` places from the end), or None."""
    if shape is not None:
        full = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        return full[-core] if len(full) >= core else None
    if dims is not None:
        dims_t = _as_dims(dims, None, name)
        if dims_t is not None and len(dims_t) >= core:
            n = m.dim_lengths.get(dims_t[-core])
            if isinstance(n, int | np.integer):
                return int(n)
    if observed is not None:
        value = observed.get_value(borrow=True) if hasattr(observed, "get_value") else observed
        arr = np.asarray(value)
        if arr.ndim < core:
            raise ModelError(
                f"{name}: the observed data has {arr.ndim} dimension(s); a series needs "
                f"{core} or more (time {'second ' if core == 2 else ''}last)"
            )
        return arr.shape[-core]
    return None
