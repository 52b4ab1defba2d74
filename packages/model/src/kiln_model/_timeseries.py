"""Time series: random walks, AR(p), GARCH(1,1) and Euler-Maruyama SDEs (PyMC's names).

A series' time axis is its last one (the second last for multivariate walks, whose
last axis is the vector); batch dimensions come first. Its length is ``steps`` plus
the number of initial points (one, or ``ar_order``), given directly or taken from
``shape``, ``dims`` or ``observed``. Initial points are draws of ``init_dist``, an
unnamed ``.dist()`` draw resized to the series' batch shape.

Draws run on every backend without a scan: a random walk is a cumulative sum, and the
AR and GARCH recursions are affine in their state given the innovations
(``s_t = a_t s_{t-1} + c_t``), which :func:`affine_scan` solves in ``log2(steps)``
vectorized doubling rounds. The GARCH log-density uses the same scan: given the
observed path, the variance recursion is affine with known coefficients.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

import kiln_random as kr
from kiln_graph import (
    Apply,
    KilnTypeError,
    KilnValueError,
    Op,
    TensorType,
    TensorVariable,
    Variable,
)
from kiln_graph import tensor as kt
from kiln_model._continuous import Normal
from kiln_model._distribution import Distribution, density_of, register_density
from kiln_model._errors import ModelError
from kiln_model._math import LOG_2PI, bound
from kiln_model._model import _as_dims, modelcontext
from kiln_model._multivariate import MvNormal
from kiln_model._symbolic import SymbolicDistribution, _as_param, batch_shape
from kiln_model._validate import check_constants
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


def _mT(x: Any) -> TensorVariable:  # noqa: N802
    x = kt.as_tensor(x)
    return kt.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _along(x: Any, sl: slice, core: int) -> TensorVariable:
    """Return ``x`` sliced by ``sl`` along the axis ``core`` places before the last."""
    return kt.as_tensor(x)[(Ellipsis, sl, *([slice(None)] * core))]


def affine_scan(
    a: Any, c: Any, s0: Any, matrix: bool = False
) -> TensorVariable:  # the one recursion solver of this module
    """Return ``s_1..s_n`` of ``s_t = a_t s_{t-1} + c_t`` (time: the axis before the core).

    Scalar (``matrix=False``): ``a``, ``c`` are ``(..., n)`` and ``s0`` is ``(...)``.
    Matrix: ``a`` is ``(..., n, p, p)``, ``c`` ``(..., n, p)``, ``s0`` ``(..., p)``.
    Each doubling round composes every step's affine map with the one ``d`` steps
    earlier (Hillis-Steele prefix scan), so ``ceil(log2 n)`` rounds of vectorized
    products give every prefix; the products are those of the sequential recursion.
    """
    a_t, c_t = kt.as_tensor(a), kt.as_tensor(c)
    n = c_t.type.shape[-2 if matrix else -1]
    if n is None:
        raise KilnValueError("affine_scan: the time axis needs a static length")
    ka, kc = (2, 1) if matrix else (0, 0)

    def compose(later: Any, earlier: Any) -> Any:
        return kt.matmul(later, earlier) if matrix else later * earlier

    def apply(m: Any, v: Any) -> Any:
        return kt.matmul(m, v[..., None])[..., 0] if matrix else m * v

    d = 1
    while d < n:
        late_a = _along(a_t, slice(d, None), ka)
        a_next = compose(late_a, _along(a_t, slice(None, -d), ka))
        c_next = apply(late_a, _along(c_t, slice(None, -d), kc)) + _along(c_t, slice(d, None), kc)
        a_t = kt.concatenate([_along(a_t, slice(None, d), ka), a_next], axis=-1 - ka)
        c_t = kt.concatenate([_along(c_t, slice(None, d), kc), c_next], axis=-1 - kc)
        d *= 2
    s0_t = kt.as_tensor(s0)
    return apply(a_t, s0_t[..., None, :] if matrix else s0_t[..., None]) + c_t


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
    try:
        new = kr.draw(owner.op, tuple(owner.inputs[2:]), tuple(size), kr.rng())
    except (KilnValueError, KilnTypeError) as exc:
        raise KilnValueError(
            f"{what}: its parameters do not fit the series' batch shape {tuple(size)}: {exc}"
        ) from exc
    return new, owner.op.core_ndim


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


def _sigma_of(name: str, sigma: Any, tau: Any) -> TensorVariable:
    if sigma is not None and tau is not None:
        raise KilnTypeError(f"{name}: give sigma or tau, not both")
    if tau is not None:
        return _float(tau) ** -0.5
    return _float(1.0 if sigma is None else sigma)


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
        register_density(rv, density, params)
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


# --- random walks ----------------------------------------------------------------------------


def _at(x: Any, i: int | None, core: int) -> TensorVariable:
    """Return ``x`` at index ``i`` (None: a new axis) of the axis ``core`` before the last."""
    return kt.as_tensor(x)[(Ellipsis, i, *([slice(None)] * core))]


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


# --- AR(p) -----------------------------------------------------------------------------------


def _ar_order(name: str, rho: TensorVariable, constant: bool, ar_order: Any) -> int:
    """Return the AR order: ``ar_order``, or rho's static last axis (less the constant)."""
    n = rho.type.shape[-1]
    order = _static_int(name, "ar_order", ar_order)
    if order is None:
        if n is None:
            raise KilnValueError(
                f"{name}: cannot tell the AR order from rho, whose last axis has no static "
                "length: give ar_order=..."
            )
        order = n - int(constant)
    if order < 1:
        raise KilnValueError(
            f"{name}: the AR order must be >= 1, got {order} (rho's last axis: {n}, "
            f"constant={constant}); rho holds {'the constant, then ' if constant else ''}"
            "one coefficient per lag"
        )
    if n is not None and n != order + int(constant):
        raise KilnValueError(
            f"{name}: rho's last axis has length {n}, but ar_order={order}"
            f"{' with a constant' if constant else ''} needs {order + int(constant)}"
        )
    return order


@dataclasses.dataclass(eq=False)
class ARDensity:
    """The log-density of an AR(p) series, conditional on its first ``p`` values.

    Parameters ``(rho, sigma, *init)``; ``init_core`` is 0 when the initial values are
    independent scalar draws (their log-densities summed), 1 for one vector draw.
    """

    order: int
    constant: bool
    init: Any
    init_core: int

    def logp(self, value: Any, rho: Any, sigma: Any, *init_params: Any) -> TensorVariable:
        """Return the initial values' log-density plus ``Normal(mean_t, sigma)`` of the rest."""
        value, rho = kt.as_tensor(value), kt.as_tensor(rho)
        p, off = self.order, int(self.constant)
        mean = rho[..., 0, None] if self.constant else 0.0
        for i in range(1, p + 1):
            mean = mean + rho[..., off + i - 1, None] * value[..., p - i : -i]
        first = self.init.logp(value[..., :p], *init_params)
        if self.init_core == 0:
            first = kt.sum(first, axis=-1)
        rest = Normal.logp(value[..., p:], mean, kt.as_tensor(sigma)[..., None])
        return kt.as_tensor(first + kt.sum(rest, axis=-1))

    def support_point(self, rv: TensorVariable, rho: Any, sigma: Any, *init_params: Any) -> Any:
        """Return the last initial support point held along the whole series (as PyMC)."""
        start = self.init.support_point(rv[..., : self.order], *init_params)
        return kt.cast(start[..., -1, None] + kt.zeros_like(rv, dtype="float64"), "float64")

    def default_transform(self, rv: TensorVariable) -> None:
        """Return None: the values are real."""
        return None


class AR(_TimeSeries):
    """AR(rho, sigma | tau, constant=False, ar_order=None, init_dist, steps): autoregression.

    ``x_t = c + rho_1 x_{t-1} + ... + rho_p x_{t-p} + eps_t`` with ``eps_t ~ Normal(0,
    sigma)``; ``rho``'s last axis holds the constant ``c`` first when ``constant=True``,
    then the coefficient of each lag. The first ``p = ar_order`` values are draws of
    ``init_dist`` (a scalar draw, resized to ``(..., p)``, or a vector draw of length
    ``p``; default ``Normal(0, 100)`` with a warning as in PyMC); ``steps`` values
    follow. The log-density is conditional on the first ``p`` values.

    Examples
    --------
    >>> import kiln as kl
    >>> with kl.Model():
    ...     rho = kl.Uniform("rho", -1, 1)
    ...     x = kl.AR("x", [rho], sigma=1.0, init_dist=kl.Normal.dist(0, 1), steps=50)
    """

    params = ("rho", "sigma", "tau")

    @classmethod
    def n_init(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        rho = args[0] if args else kwargs.get("rho")
        if rho is None:
            raise KilnTypeError("AR: missing parameter rho")
        rho_t = _float(rho)
        rho_t = rho_t[None] if rho_t.ndim == 0 else rho_t
        return _ar_order("AR", rho_t, bool(kwargs.get("constant", False)), kwargs.get("ar_order"))

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        name = cls.display_name()
        init_dist = kwargs.pop("init_dist", None)
        constant = kwargs.pop("constant", False)
        ar_order = kwargs.pop("ar_order", None)
        if not isinstance(constant, bool | np.bool_):
            raise KilnTypeError(f"{name}: constant must be True or False, got {constant!r}")
        p = cls._bind(args, kwargs)
        if p.get("rho") is None:
            raise KilnTypeError(f"{name}: missing parameter rho")
        rho = _float(p["rho"])
        rho = rho[None] if rho.ndim == 0 else rho
        order = _ar_order(name, rho, bool(constant), ar_order)
        sigma = _sigma_of(name, p.get("sigma"), p.get("tau"))
        check_constants(
            name, {"sigma": sigma}, ((("sigma",), lambda s: s > 0, "sigma (or tau) must be > 0"),)
        )
        steps = _check_steps(name, steps, length, order)
        init_dist = _init_or_default(
            name, init_dist, lambda: Normal.dist(0.0, 100.0), "kl.Normal.dist(0, 100)"
        )
        init_node = _draw_node(f"{name}: init_dist", init_dist, 1)
        batch = _batch(size, sigma, rho[..., 0], _init_batch(init_dist))
        init_size = batch if init_node.op.core_ndim else (*batch, order)
        init, core = fresh_draw(f"{name}: init_dist", init_dist, init_size, 1)
        if init.type.shape[-1] not in (None, order):
            raise KilnValueError(
                f"{name}: init_dist draws vectors of length {init.type.shape[-1]}; an AR of "
                f"order {order} needs {order} initial values"
            )
        rv = _ar_draw(
            rho, sigma, kt.cast(init, "float64"), order, bool(constant), batch, steps, rng
        )
        init_cls, init_params = density_of(init)
        return rv, ARDensity(order, bool(constant), init_cls, core), [rho, sigma, *init_params]


def _ar_draw(
    rho: Any, sigma: Any, init: Any, p: int, constant: bool, batch: Any, steps: int, rng: Any
) -> TensorVariable:
    """Return ``init`` followed by ``steps`` AR values, by the companion-matrix scan.

    The state ``(x_t, ..., x_{t-p+1})`` moves by ``F s + e_1 (c + eps_t)``; ``F``'s first
    row holds the lag coefficients and its subdiagonal shifts the state down.
    """
    lags = rho[..., 1:] if constant else rho
    eps = kt.as_tensor(sigma)[..., None] * kr.normal(0.0, 1.0, size=(*batch, steps), rng=rng)
    innov = eps + rho[..., 0, None] if constant else eps
    if p == 1:
        x = affine_scan(lags[..., 0, None] + kt.zeros_like(innov), innov, init[..., 0])
        return kt.concatenate([init, x], axis=-1)
    shift = kt.zeros_like(lags[..., None, :1]) + kt.eye(p - 1, p)
    companion = kt.concatenate([lags[..., None, :], shift], axis=-2)
    a = companion[..., None, :, :] + kt.zeros_like(innov)[..., None, None]
    c = innov[..., None] * kt.as_tensor(np.eye(p)[0])
    s = affine_scan(a, c, init[..., ::-1], matrix=True)
    return kt.concatenate([init, s[..., 0]], axis=-1)


# --- GARCH(1,1) ------------------------------------------------------------------------------


def _garch_variances(
    value: Any, omega: Any, alpha_1: Any, beta_1: Any, initial_vol: Any
) -> TensorVariable:
    """Return the variances ``sigma_t^2`` of the path ``value`` (last axis: time).

    ``sigma_t^2 = omega + alpha_1 r_{t-1}^2 + beta_1 sigma_{t-1}^2``: given the path, an
    affine recursion in ``sigma^2`` with the coefficient ``beta_1``.
    """
    value = kt.as_tensor(value)
    c = kt.as_tensor(omega)[..., None] + kt.as_tensor(alpha_1)[..., None] * kt.square(
        value[..., :-1]
    )
    a = kt.as_tensor(beta_1)[..., None] + kt.zeros_like(c)
    s0 = kt.square(initial_vol) + kt.zeros_like(value[..., 0])
    return kt.concatenate([s0[..., None], affine_scan(a, c, s0)], axis=-1)


class GARCH11(_TimeSeries):
    """GARCH11(omega, alpha_1, beta_1, initial_vol, steps): GARCH(1,1) with Normal noise.

    ``r_t ~ Normal(0, sigma_t)`` with ``sigma_t^2 = omega + alpha_1 r_{t-1}^2 + beta_1
    sigma_{t-1}^2`` and ``sigma_0 = initial_vol``; ``steps + 1`` values along the last
    axis. ``omega > 0``, ``alpha_1 >= 0``, ``beta_1 >= 0``, ``initial_vol > 0``.

    Examples
    --------
    >>> import kiln as kl
    >>> r = kl.GARCH11.dist(omega=0.1, alpha_1=0.2, beta_1=0.7, initial_vol=0.5, steps=99)
    """

    params = ("omega", "alpha_1", "beta_1", "initial_vol")
    param_checks = (
        (("omega",), lambda v: v > 0, "omega must be > 0"),
        (("alpha_1",), lambda v: v >= 0, "alpha_1 must be >= 0"),
        (("beta_1",), lambda v: v >= 0, "beta_1 must be >= 0"),
        (("initial_vol",), lambda v: v > 0, "initial_vol must be > 0"),
    )

    @classmethod
    def make(cls, kwargs, args, steps, length, size, rng):  # type: ignore[no-untyped-def]
        name = cls.display_name()
        p = cls._bind(args, kwargs)
        missing = [k for k in cls.params if p.get(k) is None]
        if missing:
            raise KilnTypeError(f"{name}: missing parameter(s) {missing}")
        check_constants(name, p, cls.param_checks)
        omega, alpha, beta, vol = (_float(p[k]) for k in cls.params)
        steps = _check_steps(name, steps, length, 1)
        batch = _batch(size, omega, alpha, beta, vol)
        z = kr.normal(0.0, 1.0, size=(*batch, steps + 1), rng=rng)
        a = beta[..., None] + alpha[..., None] * kt.square(z[..., :-1])
        c = omega[..., None] + kt.zeros_like(a)
        s0 = kt.square(vol) + kt.zeros_like(z[..., 0])
        var = kt.concatenate([s0[..., None], affine_scan(a, c, s0)], axis=-1)
        return kt.sqrt(var) * z, cls, [omega, alpha, beta, vol]

    @staticmethod
    def logp(value: Any, omega: Any, alpha_1: Any, beta_1: Any, initial_vol: Any) -> TensorVariable:
        """Return ``sum_t log Normal(r_t | 0, sigma_t)`` over the last axis."""
        value = kt.as_tensor(value)
        var = _garch_variances(value, omega, alpha_1, beta_1, initial_vol)
        lp = kt.sum(-0.5 * (LOG_2PI + kt.log(var) + kt.square(value) / var), axis=-1)
        return bound(lp, omega > 0, alpha_1 >= 0, beta_1 >= 0, initial_vol > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, *params: Any) -> TensorVariable:
        return kt.zeros_like(rv, dtype="float64")

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> None:
        return None


# --- Euler-Maruyama --------------------------------------------------------------------------


class NoForwardDraw(Op):
    """Stands for a series kiln cannot draw forward; running it raises NotImplementedError.

    Its input is a zero tensor of the series' shape, so the shape is known to the graph
    (support points, shape checks) while no draw is ever computed.
    """

    __props__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = str(what)

    def __str__(self) -> str:
        return f"NoForwardDraw{{{self.what}}}"

    def make_node(self, template: Any) -> Apply:
        template = kt.as_tensor(template)
        return Apply.create(self, [template], [TensorType("float64", template.type.shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        raise NotImplementedError(
            f"{self.what}: forward draws (prior or posterior predictive) of an "
            "Euler-Maruyama series need a sequential loop over time through sde_fn, which "
            "kiln's graphs cannot express (no scan op); its log-density is available, so it "
            "can be sampled as a latent or observed series"
        )

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


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
    forward draws are not available (they need a loop through ``sde_fn`` over time,
    which kiln's graphs lack): drawing one raises ``NotImplementedError``.

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
        template = kt.zeros_like(kt.as_tensor(init), dtype="float64")[..., None] + kt.zeros(
            (steps + 1,)
        )
        rv = NoForwardDraw(f"{name} (dt, sde_fn={getattr(p['sde_fn'], '__name__', 'sde_fn')})")(
            template
        )
        density = EulerMaruyamaDensity(p["sde_fn"], len(pars), init_cls)
        return rv, density, [dt, *pars, *init_params]
