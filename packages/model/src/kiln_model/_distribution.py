"""``Distribution``: a random variable's draw op, its log-density, support and transform.

A distribution class declares what can be declared: ``rv_op`` (the draw, from
:mod:`kiln_random`), ``params`` (the user's parameter names, with ``defaults``),
``support`` (which values have density) and ``default_transform``. It implements
``rv_params`` (user parameters -> the draw op's parameters), ``logp(value, *op_params)``
and, where closed-form, ``logcdf``, both in terms of the draw op's parameters (those
on the draw's node), and ``support_point`` (a central value: the initial point).

``Normal("mu", 0, 1)`` inside a model registers a variable and returns its draw;
``Normal.dist(0, 1)`` returns an unnamed draw for use as a building block.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import (
    KilnTypeError,
    KilnValueError,
    RandomGeneratorType,
    SharedVariable,
    TensorVariable,
    Variable,
    graph_inputs,
    infer_shape,
)
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._errors import ModelError
from kiln_model._imputation import impute, missing_mask
from kiln_model._model import Model, VariableInfo, _as_dims, modelcontext
from kiln_model._parametrizations import (
    Alternative,
    alternative_names,
    other_forms,
    resolve,
)
from kiln_model._validate import (
    Check,
    check_constants,
    check_draw_parameters,
    check_finite,
    check_observed_values,
)
from kiln_random import RandomVariable

#: ``transform=`` left unset: use the distribution's default transform.
UNSET: Any = object()

#: The distribution class of each draw op class (for ``logp(rv, value)`` of any draw).
DISTRIBUTIONS: dict[type, type[Distribution]] = {}

NEG_INF = -np.inf

#: The density of each draw that is a graph of other draws (``SymbolicDistribution``,
#: ``Mixture``, ``CustomDist``...): ``draw -> (dist, params)``, where
#: ``dist.logp(value, *params)`` is its log-density. One registry for every such kind.
_GRAPH_DENSITIES: weakref.WeakKeyDictionary[Variable, tuple[Any, list[Variable]]] = (
    weakref.WeakKeyDictionary()
)


def register_density(rv: Variable, dist: Any, params: list[Variable], rng: Any = None) -> None:
    """Record that ``dist.logp(value, *params)`` is the log-density of the draw graph ``rv``.

    ``rng``: the generator the user gave ``dist()``; the other generators of the draw
    graph are then seeded from it (:func:`seed_further_generators`).
    """
    _GRAPH_DENSITIES[rv] = (dist, list(params))
    if rng is not None:
        seed_further_generators(rv, rng, params)


def seed_further_generators(rv: Variable, rng: Any, known: list[Any]) -> None:
    """Seed the generators ``build`` made for further draws from the one the user gave.

    A class's first draw takes ``rng``; each further draw takes a fresh ``kr.rng()``.
    So that ``Dist.dist(..., rng=kr.rng(seed))`` draws the same numbers every run, those
    generators (the graph inputs of ``rv`` that are neither ``rng`` nor inputs of the
    parameters ``known``) get children of ``rng``'s seed sequence, in graph order.
    """
    if not isinstance(rng, SharedVariable) or not isinstance(rng.type, RandomGeneratorType):
        return
    seq = getattr(rng.get_value(borrow=True).bit_generator, "seed_seq", None)
    if not isinstance(seq, np.random.SeedSequence):
        return
    seen = set(graph_inputs([v for v in known if isinstance(v, Variable)])) | {rng}
    further = [
        v
        for v in graph_inputs([rv])
        if v not in seen
        and isinstance(v, SharedVariable)
        and isinstance(v.type, RandomGeneratorType)
    ]
    for g, child in zip(further, seq.spawn(len(further)), strict=True):
        g.set_value(np.random.default_rng(child), borrow=True)


class Distribution:
    """Base class of distributions (see the module docstring)."""

    rv_op: ClassVar[RandomVariable]
    params: ClassVar[tuple[str, ...]]
    defaults: ClassVar[dict[str, Any]] = {}
    #: "real", "positive", "nonnegative", "unit" (0..1), "interval" (parameter bounds),
    #: "nonnegative_integer", "positive_integer", "binary", "simplex", "counts".
    support: ClassVar[str] = "real"
    #: Whether draws are integers (observed values are checked and cast to int64).
    discrete: ClassVar[bool] = False
    #: Constraints on the user's parameters that the draw op does not declare (or
    #: declares in its own parameters), checked where the parameters are constants:
    #: ``(parameter names, predicate, message)``.
    param_checks: ClassVar[tuple[Check, ...]] = ()
    #: Constraints between observed values and constant parameters (Binomial: k <= n):
    #: ``(op parameter names, predicate(value, *params), message)``.
    observed_checks: ClassVar[tuple[Check, ...]] = ()
    #: PyMC's other parametrizations (``Normal(tau=...)``): each names parameters of
    #: ``params`` that, given together, determine base ones (:mod:`._parametrizations`).
    alternatives: ClassVar[tuple[Alternative, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        op = cls.__dict__.get("rv_op")
        if op is not None:
            DISTRIBUTIONS.setdefault(type(op), cls)

    def __new__(  # type: ignore[misc]
        cls,
        name: str,
        *args: Any,
        dims: Any = None,
        shape: Any = None,
        observed: Any = None,
        transform: Any = UNSET,
        initval: Any = None,
        model: Model | None = None,
        **kwargs: Any,
    ) -> TensorVariable:
        m = modelcontext(model)
        full = m.check_new_name(name)
        core = cls.core_ndim()
        dims_t = _as_dims(dims, None, full)
        if observed is not None and dims_t is not None:
            _dims_from_observed(m, full, dims_t, observed)
        mask = missing_mask(full, observed) if observed is not None else None
        if mask is not None:  # missing values: observed and imputed parts
            free = {"initval": initval} | ({} if transform is UNSET else {"transform": transform})
            return impute(cls, m, name, observed, mask, args, kwargs, dims_t, shape, free)
        obs = _as_observed(cls, full, observed) if observed is not None else None
        size: Any = None
        if dims_t is not None:
            if shape is not None:
                raise ModelError(f"{full}: give dims or shape, not both")
            full_shape = m.shape_from_dims(dims_t, full)
            size = full_shape[: len(full_shape) - core] if core else full_shape
        elif shape is not None:
            full_shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            size = full_shape[: len(full_shape) - core] if core else full_shape
        elif obs is not None:
            obs_shape = obs.type.shape
            if None in obs_shape:
                size = tuple(kt.shape_i(obs, i) for i in range(obs.ndim - core))
            else:
                size = obs_shape[: len(obs_shape) - core] if core else obs_shape
        try:
            rv = cls.dist(*args, size=size, **kwargs)
        except (KilnValueError, KilnTypeError) as exc:
            raise type(exc)(f"{full}: {exc}") from exc
        if dims_t is not None and len(dims_t) != rv.ndim:
            raise ModelError(f"{full}: {len(dims_t)} dims {dims_t} for a {rv.ndim}-d variable")
        dist, params = cls.density_of(rv)
        if obs is not None:
            _check_observed_shape(full, rv, obs)
            if rv.owner is not None and rv.owner.op is getattr(cls, "rv_op", None):
                check_observed_values(full, rv, _data_of(obs), cls.observed_checks)
            info = VariableInfo(full, rv, dist, obs, None, True, dims_t, params=params)
        else:
            t = dist.default_transform(rv) if transform is UNSET else transform
            if t is not None and not isinstance(t, tr.Transform):
                raise KilnTypeError(
                    f"{full}: transform must be a kiln Transform or None, got {t!r}"
                )
            if initval is not None:
                _check_initval(cls, full, rv, initval)
            value = _value_variable(full, rv, t)
            info = VariableInfo(full, rv, dist, value, t, False, dims_t, initval, params)
        m.register(info)
        return rv

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
            core = cls.core_ndim()
            size = full[: len(full) - core] if core else full
        op_params = cls.rv_params(**params)
        rv = kr.draw(cls.rv_op, tuple(op_params), size, rng if rng is not None else kr.rng())
        check_draw_parameters(rv)
        return rv

    @classmethod
    def core_ndim(cls) -> int:
        """Return the number of core dimensions of one draw (0: a scalar distribution)."""
        return cls.rv_op.core_ndim

    @classmethod
    def density_of(cls, rv: TensorVariable) -> tuple[Any, list[Variable]]:
        """Return what gives ``rv``'s log-density and its parameters: ``(dist, params)``.

        ``dist.logp(value, *params)`` is the log-density; the one registered for a draw
        graph (:func:`register_density`), else the class itself and the parameters of
        the draw's node.
        """
        registered = _GRAPH_DENSITIES.get(rv)
        if registered is not None:
            return registered
        if rv.owner is not None and rv.owner.op is not getattr(cls, "rv_op", None):
            # A class whose dist() returns another class's draw (kl.Truncated of a
            # Normal is a TruncatedNormal draw): the draw's own class gives the density.
            return distribution_of(rv), list(rv.owner.inputs[2:])
        return cls, list(rv.owner.inputs[2:])  # type: ignore[union-attr]

    @classmethod
    def _bind(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(cls.params):
            raise KilnTypeError(
                f"{cls.__name__}: takes {len(cls.params)} parameter(s) {cls.params}, "
                f"got {len(args)}"
            )
        bound = dict(zip(cls.params, args, strict=False))
        for key, value in kwargs.items():
            if key not in cls.params:
                raise KilnTypeError(
                    f"{cls.__name__}: unknown parameter {key!r}; parameters: {cls.params}"
                )
            if key in bound:
                raise KilnTypeError(f"{cls.__name__}: parameter {key!r} given twice")
            bound[key] = value
        resolve(cls.__name__, cls.alternatives, bound)
        for key, value in cls.defaults.items():
            if bound.get(key) is None:
                bound[key] = value
        return bound

    @classmethod
    def base_params(cls) -> tuple[str, ...]:
        """Return the parameters no alternative parametrization names, in order."""
        alternative = alternative_names(cls.alternatives)
        return tuple(p for p in cls.params if p not in alternative)

    @classmethod
    def rv_params(cls, *args: Any, **params: Any) -> tuple[Any, ...]:
        """Return the draw op's parameters for the user's (default: the same, in order).

        Called with the user's parameters by name (``args`` is empty).
        """
        names = cls.base_params()
        missing = [p for p in names if params.get(p) is None]
        if missing:
            raise KilnTypeError(
                f"{cls.__name__}: missing parameter(s) {missing}"
                + other_forms(cls.alternatives, missing)
            )
        return tuple(params[p] for p in names)

    @staticmethod
    def logp(value: Any, *params: Any) -> TensorVariable:
        """Return the log-density of ``value`` (elementwise; core dimensions summed)."""
        raise NotImplementedError

    @staticmethod
    def logcdf(value: Any, *params: Any) -> TensorVariable:
        """Return the log of the cumulative distribution function at ``value``."""
        raise NotImplementedError

    @staticmethod
    def icdf(value: Any, *params: Any) -> TensorVariable:
        """Return the quantile function (inverse CDF) at the probability ``value``.

        Defined where it has a closed form or a cheap one; :func:`icdf` names the
        distribution when it has none.
        """
        raise NotImplementedError

    @classmethod
    def support_point(cls, rv: TensorVariable, *params: Any) -> TensorVariable:
        """Return a central point of the support, shaped like ``rv`` (the initial value)."""
        return broadcast_like(params[0], rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        """Return the transform a free variable of this distribution is sampled through."""
        return _SUPPORT_TRANSFORMS.get(cls.support)

    @classmethod
    def check_observed(cls, name: str, value: np.ndarray) -> None:
        """Raise if observed data lies outside the support (where parameters do not matter)."""
        check = _SUPPORT_CHECKS.get(cls.support)
        if check is not None and not check[0](value):
            raise KilnValueError(f"{name}: observed values must be {check[1]} for {cls.__name__}")


_SUPPORT_TRANSFORMS: dict[str, tr.Transform | None] = {
    "real": None,
    "positive": tr.log,
    "nonnegative": tr.log,
    "unit": tr.logodds,
    "simplex": tr.simplex,
}

_SUPPORT_CHECKS: dict[str, tuple[Callable[[np.ndarray], bool], str]] = {
    "positive": (lambda x: bool(np.all(x > 0)), "> 0"),
    "nonnegative": (lambda x: bool(np.all(x >= 0)), ">= 0"),
    "unit": (lambda x: bool(np.all((x >= 0) & (x <= 1))), "in [0, 1]"),
    "nonnegative_integer": (
        lambda x: bool(np.all((x >= 0) & (np.mod(x, 1) == 0))),
        "non-negative integers",
    ),
    "positive_integer": (lambda x: bool(np.all((x >= 1) & (np.mod(x, 1) == 0))), "integers >= 1"),
    "binary": (lambda x: bool(np.all((x == 0) | (x == 1))), "0 or 1"),
    "counts": (
        lambda x: bool(np.all((x >= 0) & (np.mod(x, 1) == 0))),
        "non-negative integer counts",
    ),
    "simplex": (
        lambda x: bool(np.all(x >= 0) and np.allclose(np.sum(x, axis=-1), 1.0)),
        "on the simplex (non-negative, summing to 1 along the last axis)",
    ),
}


def broadcast_like(x: Any, rv: TensorVariable) -> TensorVariable:
    """Return ``x`` broadcast to the shape of ``rv`` (from shape inference, not the draw)."""
    shape = infer_shape(rv)
    value = kt.cast(kt.as_tensor(x), "float64") if not _is_float(x) else kt.as_tensor(x)
    return kt.broadcast_to(value, shape)


def _is_float(x: Any) -> bool:
    return isinstance(x, TensorVariable) and x.dtype == "float64"


def _value_variable(name: str, rv: TensorVariable, t: tr.Transform | None) -> TensorVariable:
    shape = rv.type.shape
    if t is not None:
        suffix = f"_{t.name}__"
        if t.core_ndim and shape and shape[-1] is not None:
            shape = t.forward_shape(shape)  # type: ignore[arg-type]
    else:
        suffix = ""
    dtype = rv.dtype if t is None else "float64"
    return kt.tensor(f"{name}{suffix}", dtype=dtype, shape=shape)


def _as_observed(cls: type[Distribution], name: str, observed: Any) -> TensorVariable:
    """Return observed data as a tensor (a Data variable stays one), after checking it."""
    if isinstance(observed, SharedVariable):
        value = np.asarray(observed.get_value(borrow=True))
        var: TensorVariable = observed  # type: ignore[assignment]
    elif isinstance(observed, Variable):
        raise KilnTypeError(
            f"{name}: observed must be data (an array or a kl.Data variable), got the "
            f"expression {observed!r}"
        )
    else:
        value = np.asarray(observed)
        if value.dtype.kind not in "biuf":
            raise KilnTypeError(f"{name}: observed data must be numeric, got dtype {value.dtype}")
        var = None  # type: ignore[assignment]
    check_finite(f"{name}: observed", value, "drop or correct the infinite values")
    cls.check_observed(name, value)
    if var is not None:
        return var
    dtype = "int64" if cls.discrete else "float64"
    return kt.constant(value.astype(dtype) if value.dtype != dtype else value)


def _dims_from_observed(m: Model, name: str, dims: tuple[str, ...], observed: Any) -> None:
    """Add the dims of ``dims`` the model lacks, with their lengths taken from ``observed``.

    As in PyMC, such a dim has a length but no labels (the results number it 0..n-1);
    bound to a Data variable's shape when ``observed`` is one, so it follows ``set_data``.
    """
    unknown = [d for d in dims if d not in m.dim_lengths]
    if not unknown:
        return
    shared = isinstance(observed, SharedVariable)
    shape = np.shape(observed.get_value(borrow=True) if shared else observed)
    if len(dims) != len(shape):
        raise ModelError(
            f"{name}: {len(dims)} dims {dims} for observed data of shape {shape}; the dims "
            f"{unknown} have no coords, so their lengths must come from the data"
        )
    for axis, d in enumerate(dims):
        if d in unknown:
            m.add_coord(d, length=kt.shape_i(observed, axis) if shared else int(shape[axis]))


def _check_initval(cls: type[Distribution], name: str, rv: TensorVariable, initval: Any) -> None:
    """Raise unless ``initval`` is numeric, finite, of ``rv``'s shape and in its support."""
    if isinstance(initval, Variable):
        return  # an expression: evaluated with the initial point
    value = np.asarray(initval)
    if value.dtype.kind not in "biuf":
        raise KilnTypeError(
            f"{name}: initval: expected numbers, got {initval!r} (dtype {value.dtype})"
        )
    check_finite(f"{name}: initval", value, "give a finite starting value")
    static = tuple(rv.type.shape)
    try:
        shaped = np.broadcast_shapes(value.shape, tuple(1 if n is None else n for n in static))
    except ValueError:
        shaped = None
    if shaped is None or value.ndim > len(static) or (None not in static and shaped != static):
        raise ModelError(
            f"{name}: initval has shape {value.shape}, which does not fit the variable's "
            f"shape {static}"
        )
    check = _SUPPORT_CHECKS.get(cls.support)
    if check is not None and not check[0](value):
        raise KilnValueError(
            f"{name}: initval must be {check[1]} (the support of {cls.__name__}), got "
            f"{np.array2string(value, threshold=8)}"
        )


def _data_of(obs: TensorVariable) -> np.ndarray:
    if isinstance(obs, SharedVariable):
        return np.asarray(obs.get_value(borrow=True))
    return np.asarray(obs.data)  # type: ignore[attr-defined]


def _check_observed_shape(name: str, rv: TensorVariable, obs: TensorVariable) -> None:
    if rv.ndim != obs.ndim:
        raise ModelError(
            f"{name}: the observed data has {obs.ndim} dimension(s), the variable {rv.ndim} "
            f"(shape {rv.type.shape}); reshape the data or give dims/shape"
        )
    for i, (a, b) in enumerate(zip(rv.type.shape, obs.type.shape, strict=True)):
        if a is not None and b is not None and a != b:
            raise ModelError(
                f"{name}: the observed data has shape {obs.type.shape}, the variable "
                f"{rv.type.shape} (dimension {i} differs)"
            )


def logp(rv: TensorVariable, value: Any) -> TensorVariable:
    """Return the log-density of ``value`` under the draw ``rv`` (e.g. from ``.dist()``)."""
    dist, params = density_of(rv)
    return dist.logp(kt.as_tensor(value), *params)


def logcdf(rv: TensorVariable, value: Any) -> TensorVariable:
    """Return the log-CDF at ``value`` under the draw ``rv``."""
    dist, params = density_of(rv)
    return dist.logcdf(kt.as_tensor(value), *params)


def icdf(rv: TensorVariable, value: Any) -> TensorVariable:
    """Return the quantile function (inverse CDF) of the draw ``rv`` at probability ``value``.

    NaN where ``value`` lies outside [0, 1] or the parameters are invalid. A discrete
    distribution gives the smallest value of its support whose CDF reaches ``value``,
    as float64 (so that NaN can mark the outside), like PyMC.

    Examples
    --------
    >>> import kiln_model as km
    >>> from kiln_compile import function
    >>> q = km.icdf(km.Exponential.dist(lam=2.0), 0.5)
    >>> round(float(function([], q, mode="FAST_COMPILE")()), 6)
    0.346574
    """
    dist, params = density_of(rv)
    method = getattr(dist, "icdf", None)
    if method is None or method is Distribution.icdf:
        name = getattr(dist, "__name__", type(dist).__name__)
        raise NotImplementedError(
            f"icdf: {name} has no quantile function in kiln (it has no closed or cheap "
            "form); draw from it, or use its logcdf"
        )
    q = kt.as_tensor(value)
    if q.dtype != "float64":
        q = kt.cast(q, "float64")
    return method(q, *params)


def icdf_bound(quantile: Any, value: Any, *conditions: Any) -> TensorVariable:
    """Return ``quantile`` where ``0 <= value <= 1`` and every condition holds, else NaN."""
    ok = kt.logical_and(value >= 0.0, value <= 1.0)
    for c in conditions:
        ok = kt.logical_and(ok, c)
    quantile = kt.as_tensor(quantile)
    if quantile.dtype != "float64":
        quantile = kt.cast(quantile, "float64")
    return kt.switch(ok, quantile, np.nan)


def density_of(rv: Variable) -> tuple[Any, list[Variable]]:
    """Return ``(dist, params)`` of the unnamed draw ``rv``: ``dist.logp(value, *params)``."""
    registered = _GRAPH_DENSITIES.get(rv)
    if registered is not None:
        return registered
    return distribution_of(rv), list(rv.owner.inputs[2:])  # type: ignore[union-attr]


def distribution_of(rv: Variable) -> type[Distribution]:
    """Return the distribution class of the draw ``rv`` (one RandomVariable node)."""
    owner = rv.owner
    if owner is None or not isinstance(owner.op, RandomVariable):
        raise KilnTypeError(f"expected a random draw (e.g. kl.Normal.dist(0, 1)), got {rv!r}")
    dist = DISTRIBUTIONS.get(type(owner.op))
    if dist is None:
        raise KilnTypeError(f"no distribution has the draw op {owner.op}")
    return dist
