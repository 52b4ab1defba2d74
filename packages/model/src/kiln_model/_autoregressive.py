"""Autoregressive series (PyMC's names): AR(p) and GARCH(1,1).

Their recursions are affine in the state given the innovations, so draws are an
:func:`affine_scan`; the GARCH log-density uses the same scan for the variances of
the observed path.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._affine_scan import affine_scan
from kiln_model._continuous import Normal
from kiln_model._distribution import density_of
from kiln_model._math import LOG_2PI, bound
from kiln_model._series import (
    _batch,
    _check_steps,
    _draw_node,
    _float,
    _init_batch,
    _init_or_default,
    _static_int,
    _TimeSeries,
    fresh_draw,
)
from kiln_model._validate import check_constants


def _sigma_of(name: str, sigma: Any, tau: Any) -> TensorVariable:
    if sigma is not None and tau is not None:
        raise KilnTypeError(f"{name}: give sigma or tau, not both")
    if tau is not None:
        return _float(tau) ** -0.5
    return _float(1.0 if sigma is None else sigma)


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
