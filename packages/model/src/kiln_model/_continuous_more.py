"""More of PyMC's continuous distributions, drawn as graphs of kiln's draws.

LogitNormal, Triangular, AsymmetricLaplace, Wald, SkewStudentT, Interpolated and Rice
transform draws kiln already has (normal, uniform, exponential, beta), so they draw on
every backend; VonMises has its own rejection-sampling op (``kiln_random.vonmises``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kiln_random as kr
from kiln_graph import KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model import _transforms as tr
from kiln_model._continuous import _interval_transform
from kiln_model._distribution import Distribution, broadcast_like, density_of, icdf_bound
from kiln_model._math import LOG_2, LOG_2PI, bound, normal_lcdf
from kiln_model._parametrizations import Alternative, as_float, precision
from kiln_model._symbolic import SymbolicDistribution, batch_shape
from kiln_model._validate import Check

_LOG_2PI_HALF = 0.5 * LOG_2PI


def _positive(*names: str) -> tuple[Check, ...]:
    return tuple(((n,), lambda v: v > 0, f"{n} must be > 0") for n in names)


class LogitNormal(SymbolicDistribution):
    """LogitNormal(mu, sigma, tau): ``sigmoid(Normal(mu, sigma))`` on (0, 1)."""

    params = ("mu", "sigma", "tau")
    defaults = {"mu": 0.0, "sigma": 1.0}
    alternatives = (precision("tau", "sigma"),)
    param_checks = _positive("sigma")
    support = "unit"

    @classmethod
    def build(cls, mu: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        return kt.sigmoid(kr.normal(mu, sigma, size=batch_shape(size, mu, sigma), rng=rng))

    @staticmethod
    def logp(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        z = (kt.logit(value) - mu) / sigma
        lp = -0.5 * z * z - kt.log(sigma) - _LOG_2PI_HALF - kt.log(value) - kt.log1p(-value)
        return bound(lp, value > 0, value < 1, sigma > 0)

    @staticmethod
    def logcdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        x = kt.clip(value, 0.0, 1.0)
        inside = normal_lcdf((kt.logit(x) - mu) / sigma)
        lcdf = kt.switch(value <= 0, -np.inf, kt.switch(value >= 1, 0.0, inside))
        return bound(lcdf, sigma > 0)

    @staticmethod
    def icdf(value: Any, mu: Any, sigma: Any) -> TensorVariable:
        z = np.sqrt(2.0) * kt.erfinv(2.0 * value - 1.0)
        return icdf_bound(kt.sigmoid(mu + sigma * z), value, sigma > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(kt.sigmoid(mu), rv)  # the median


class Triangular(SymbolicDistribution):
    """Triangular(lower, c, upper): the density rises linearly to its mode ``c``, then falls."""

    params = ("lower", "c", "upper")
    defaults = {"lower": 0.0, "c": 0.5, "upper": 1.0}
    param_checks = (
        (("lower", "upper"), lambda lo, hi: lo < hi, "lower must be < upper"),
        (
            ("lower", "c", "upper"),
            lambda lo, c, hi: (lo <= c) & (c <= hi),
            "c must be in [lower, upper]",
        ),
    )
    support = "interval"

    @classmethod
    def build(cls, lower: Any, c: Any, upper: Any, *, size: Any, rng: Any) -> TensorVariable:
        u = kr.uniform(size=batch_shape(size, lower, c, upper), rng=rng)
        return cls._quantile(u, lower, c, upper)

    @staticmethod
    def _quantile(q: Any, lower: Any, c: Any, upper: Any) -> TensorVariable:
        width = upper - lower
        left = lower + kt.sqrt(q * width * (c - lower))
        right = upper - kt.sqrt((1.0 - q) * width * (upper - c))
        return kt.switch(q * width < c - lower, left, right)

    @staticmethod
    def icdf(value: Any, lower: Any, c: Any, upper: Any) -> TensorVariable:
        x = Triangular._quantile(value, lower, c, upper)
        return icdf_bound(x, value, lower <= c, c <= upper, lower < upper)

    @staticmethod
    def logp(value: Any, lower: Any, c: Any, upper: Any) -> TensorVariable:
        # Each side is computed where it is selected only (c may equal a bound).
        below = value < c
        left = kt.log(kt.switch(below, value - lower, 1.0)) - kt.log(
            kt.switch(below, c - lower, 1.0)
        )
        right = kt.log(kt.switch(below, 1.0, upper - value)) - kt.log(
            kt.switch(below, 1.0, upper - c)
        )
        lp = LOG_2 - kt.log(upper - lower) + kt.switch(below, left, right)
        return bound(lp, value >= lower, value <= upper, lower <= c, c <= upper, lower < upper)

    @staticmethod
    def logcdf(value: Any, lower: Any, c: Any, upper: Any) -> TensorVariable:
        width = upper - lower
        below = value < c
        d_lo = kt.switch(below, value - lower, 1.0)
        d_hi = kt.switch(below, 1.0, upper - value)
        left = 2.0 * kt.log(d_lo) - kt.log(width) - kt.log(kt.switch(below, c - lower, 1.0))
        right = kt.log1p(-(d_hi * d_hi) / (width * kt.switch(below, 1.0, upper - c)))
        inside = kt.switch(below, left, right)
        lcdf = kt.switch(value <= lower, -np.inf, kt.switch(value >= upper, 0.0, inside))
        return bound(lcdf, lower <= c, c <= upper, lower < upper)

    @classmethod
    def support_point(cls, rv: TensorVariable, lower: Any, c: Any, upper: Any) -> TensorVariable:
        return broadcast_like((lower + c + upper) / 3.0, rv)  # the mean

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        _, (lower, _, upper) = density_of(rv)
        return _interval_transform(lower, upper)


class AsymmetricLaplace(SymbolicDistribution):
    """AsymmetricLaplace(b, kappa, mu): ``b / (kappa + 1/kappa) exp(-b s kappa^s (x - mu))``.

    ``s`` is the sign of ``x - mu``; drawn as ``mu + E1 / (b kappa) - kappa E2 / b``
    with ``E1, E2`` standard exponentials.
    """

    params = ("b", "kappa", "mu")
    defaults = {"mu": 0.0}
    param_checks = _positive("b", "kappa")

    @classmethod
    def build(cls, b: Any, kappa: Any, mu: Any, *, size: Any, rng: Any) -> TensorVariable:
        s = batch_shape(size, b, kappa, mu)
        e1 = kr.exponential(size=s, rng=rng)
        e2 = kr.exponential(size=s, rng=kr.rng())
        return mu + e1 / (b * kappa) - kappa * e2 / b

    @staticmethod
    def logp(value: Any, b: Any, kappa: Any, mu: Any) -> TensorVariable:
        d = value - mu
        rate = kt.switch(d >= 0, b * kappa, b / kappa)
        lp = kt.log(b) - kt.log(kappa + 1.0 / kappa) - kt.abs(d) * rate
        return bound(lp, b > 0, kappa > 0)

    @staticmethod
    def logcdf(value: Any, b: Any, kappa: Any, mu: Any) -> TensorVariable:
        d = value - mu
        k2 = kappa * kappa
        below = kt.log(k2) - kt.log1p(k2) + kt.switch(d < 0, d, 0.0) * b / kappa
        above = kt.log1p(-kt.exp(-kt.switch(d < 0, 0.0, d) * b * kappa) / (1.0 + k2))
        return bound(kt.switch(d < 0, below, above), b > 0, kappa > 0)

    @staticmethod
    def icdf(value: Any, b: Any, kappa: Any, mu: Any) -> TensorVariable:
        k2 = kappa * kappa
        below = value * (1.0 + k2) < k2  # F(mu) = kappa^2 / (1 + kappa^2)
        q_lo = kt.switch(below, value, 0.5)
        q_hi = kt.switch(below, 0.5, value)
        lower = mu + kappa / b * (kt.log(q_lo) + kt.log1p(k2) - kt.log(k2))
        upper = mu - (kt.log1p(-q_hi) + kt.log1p(k2)) / (b * kappa)
        return icdf_bound(kt.switch(below, lower, upper), value, b > 0, kappa > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, b: Any, kappa: Any, mu: Any) -> TensorVariable:
        return broadcast_like(mu + (1.0 / kappa - kappa) / b, rv)  # the mean


class Wald(SymbolicDistribution):
    """Wald(mu, lam, phi, alpha): inverse Gaussian of mean ``mu``, shape ``lam``, shift ``alpha``.

    ``phi = lam / mu`` may replace ``lam`` or ``mu``. Drawn by Michael, Schucany and
    Haas's (1976) transformation of a normal and a uniform.
    """

    params = ("mu", "lam", "phi", "alpha")
    defaults = {"alpha": 0.0}
    alternatives = (
        Alternative(
            ("mu", "phi"), ("lam",), lambda mu, phi: (as_float(mu) * phi,), _positive("phi")
        ),
        Alternative(
            ("lam", "phi"), ("mu",), lambda lam, phi: (as_float(lam) / phi,), _positive("phi")
        ),
    )
    param_checks = _positive("mu", "lam")
    support = "interval"

    @classmethod
    def build(cls, mu: Any, lam: Any, alpha: Any, *, size: Any, rng: Any) -> TensorVariable:
        s = batch_shape(size, mu, lam, alpha)
        n = kr.normal(size=s, rng=rng)
        u = kr.uniform(size=s, rng=kr.rng())
        v = n * n
        # y = mu + mu^2 v / (2 lam) - mu / (2 lam) sqrt(4 mu lam v + mu^2 v^2), the smaller
        # root, written as mu e / (1 + sqrt(1 + e))^2 with e = 4 lam / (mu v): no digits
        # cancel for any ratio of lam to mu v.
        e = 4.0 * lam / (mu * v)
        y = mu * e / (1.0 + kt.sqrt(1.0 + e)) ** 2
        y = kt.switch(kt.eq(v, 0.0), mu, y)
        x = kt.switch(u * (mu + y) <= mu, y, mu * mu / y)
        return alpha + x

    @staticmethod
    def logp(value: Any, mu: Any, lam: Any, alpha: Any) -> TensorVariable:
        x = value - alpha
        xs = kt.switch(x > 0, x, 1.0)
        lp = (
            0.5 * (kt.log(lam) - LOG_2PI)
            - 1.5 * kt.log(xs)
            - lam * (xs - mu) ** 2 / (2.0 * mu * mu * xs)
        )
        return bound(lp, x > 0, mu > 0, lam > 0)

    @staticmethod
    def logcdf(value: Any, mu: Any, lam: Any, alpha: Any) -> TensorVariable:
        x = value - alpha
        xs = kt.switch(x > 0, x, 1.0)
        r = kt.sqrt(lam / xs)
        inside = kt.logaddexp(
            normal_lcdf(r * (xs / mu - 1.0)), 2.0 * lam / mu + normal_lcdf(-r * (xs / mu + 1.0))
        )
        return bound(kt.switch(x > 0, inside, -np.inf), mu > 0, lam > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, lam: Any, alpha: Any) -> TensorVariable:
        return broadcast_like(alpha + mu, rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        _, (_, _, alpha) = density_of(rv)
        return _interval_transform(alpha, kt.as_tensor(np.inf))


class SkewStudentT(SymbolicDistribution):
    """SkewStudentT(a, b, mu, sigma): Jones and Faddy's (2003) skewed t (``a = b``: Student t).

    Drawn from ``B ~ Beta(a, b)`` as ``mu + sigma sqrt(a + b) (2B - 1) / (2 sqrt(B (1 - B)))``.
    """

    params = ("a", "b", "mu", "sigma", "lam")
    defaults = {"mu": 0.0, "sigma": 1.0}
    alternatives = (precision("lam", "sigma"),)
    param_checks = _positive("a", "b", "sigma")

    @classmethod
    def build(cls, a: Any, b: Any, mu: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        beta = kr.beta(a, b, size=batch_shape(size, a, b, mu, sigma), rng=rng)
        t = kt.sqrt(a + b) * (2.0 * beta - 1.0) / (2.0 * kt.sqrt(beta * (1.0 - beta)))
        return mu + sigma * t

    @staticmethod
    def logp(value: Any, a: Any, b: Any, mu: Any, sigma: Any) -> TensorVariable:
        t = (value - mu) / sigma
        ab = a + b
        r = kt.sqrt(ab + t * t)
        # r + t and r - t without cancellation: (r + t)(r - t) = a + b.
        r_plus = kt.switch(t >= 0, r + t, ab / (r - t))
        r_minus = kt.switch(t <= 0, r - t, ab / (r + t))
        log_r = kt.log(r)
        lp = (
            (a + 0.5) * (kt.log(r_plus) - log_r)
            + (b + 0.5) * (kt.log(r_minus) - log_r)
            - (ab - 1.0) * LOG_2
            - kt.betaln(a, b)
            - 0.5 * kt.log(ab)
            - kt.log(sigma)
        )
        return bound(lp, a > 0, b > 0, sigma > 0)

    @staticmethod
    def logcdf(value: Any, a: Any, b: Any, mu: Any, sigma: Any) -> TensorVariable:
        # F = I_z(a, b) with z = (1 + t / r) / 2 = (r + t) / (2 r); above the median as
        # 1 - I_{1-z}(b, a), so that each tail keeps its digits.
        t = (value - mu) / sigma
        ab = a + b
        r = kt.sqrt(ab + t * t)
        z = kt.switch(t >= 0, r + t, ab / (r - t)) / (2.0 * r)
        z_c = kt.switch(t <= 0, r - t, ab / (r + t)) / (2.0 * r)
        lower = kt.log(kt.betainc(a, b, kt.switch(z < 0.5, z, 0.25)))
        upper = kt.log1p(-kt.betainc(b, a, kt.switch(z < 0.5, 0.25, z_c)))
        return bound(kt.switch(z < 0.5, lower, upper), a > 0, b > 0, sigma > 0)

    @classmethod
    def support_point(
        cls, rv: TensorVariable, a: Any, b: Any, mu: Any, sigma: Any
    ) -> TensorVariable:
        # The mode: t = (a - b) sqrt(a + b) / sqrt((2a + 1)(2b + 1)).
        t = (a - b) * kt.sqrt(a + b) / kt.sqrt((2.0 * a + 1.0) * (2.0 * b + 1.0))
        return broadcast_like(mu + sigma * t, rv)


class Rice(SymbolicDistribution):
    """Rice(nu, sigma, b): the length of a 2-d normal vector of mean length ``nu``, sd ``sigma``.

    ``b = nu / sigma`` may replace ``nu``. Drawn as ``|(nu + sigma N1, sigma N2)|``.
    """

    params = ("nu", "sigma", "b")
    alternatives = (
        Alternative(
            ("b", "sigma"),
            ("nu",),
            lambda b, sigma: (as_float(b) * sigma,),
            ((("b",), lambda b: b >= 0, "b must be >= 0"),),
            keeps=("sigma",),
        ),
    )
    param_checks = (
        (("nu",), lambda nu: nu >= 0, "nu must be >= 0"),
        *_positive("sigma"),
    )
    support = "nonnegative"

    @classmethod
    def build(cls, nu: Any, sigma: Any, *, size: Any, rng: Any) -> TensorVariable:
        s = batch_shape(size, nu, sigma)
        x = kr.normal(nu, sigma, size=s, rng=rng)
        y = kr.normal(0.0, sigma, size=s, rng=kr.rng())
        return kt.sqrt(x * x + y * y)

    @staticmethod
    def logp(value: Any, nu: Any, sigma: Any) -> TensorVariable:
        # log(x / s^2) - (x^2 + nu^2) / (2 s^2) + log I0(x nu / s^2), with I0 = i0e * exp:
        # the exponents combine into -(x - nu)^2 / (2 s^2), which never overflows.
        s2 = sigma * sigma
        x = kt.switch(value > 0, value, 1.0)
        lp = kt.log(x) - kt.log(s2) - (x - nu) ** 2 / (2.0 * s2) + kt.log(kt.i0e(x * nu / s2))
        return bound(kt.switch(kt.eq(value, 0.0), -np.inf, lp), value >= 0, nu >= 0, sigma > 0)

    @classmethod
    def support_point(cls, rv: TensorVariable, nu: Any, sigma: Any) -> TensorVariable:
        return broadcast_like(kt.sqrt(nu * nu + 2.0 * sigma * sigma), rv)  # sqrt(E[X^2])


class VonMises(Distribution):
    """VonMises(mu, kappa): density ``exp(kappa cos(x - mu)) / (2 pi I0(kappa))`` on [-pi, pi]."""

    rv_op = kr.OPS["vonmises"]
    params = ("mu", "kappa")
    defaults = {"mu": 0.0, "kappa": 1.0}
    support = "interval"

    @staticmethod
    def logp(value: Any, mu: Any, kappa: Any) -> TensorVariable:
        # log I0(kappa) = log i0e(kappa) + kappa: finite for every kappa.
        lp = kappa * (kt.cos(value - mu) - 1.0) - LOG_2PI - kt.log(kt.i0e(kappa))
        valid = kr.OPS["vonmises"].conditions(kappa=kappa)
        return bound(lp, value >= -np.pi, value <= np.pi, *valid)

    @classmethod
    def support_point(cls, rv: TensorVariable, mu: Any, kappa: Any) -> TensorVariable:
        wrapped = mu - 2.0 * np.pi * kt.floor((mu + np.pi) / (2.0 * np.pi))
        return broadcast_like(wrapped, rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        return tr.circular


class Interpolated(SymbolicDistribution):
    """Interpolated(x_points, pdf_points): the piecewise-linear density through the points.

    ``pdf_points`` need not be normalized. Drawn by inverting the CDF, a quadratic on
    each segment.
    """

    params = ("x_points", "pdf_points")
    support = "interval"

    @classmethod
    def dist(
        cls, *args: Any, size: Any = None, shape: Any = None, rng: Any = None, **kwargs: Any
    ) -> TensorVariable:
        """Return an unnamed draw (``x_points``, ``pdf_points``: vectors of one length)."""
        params = cls._bind(args, dict(kwargs))
        for name in cls.params:
            p: Any = params.get(name)
            ndim = p.ndim if isinstance(p, TensorVariable) else np.ndim(p)
            if ndim != 1:
                raise KilnValueError(
                    f"Interpolated: {name} must be a vector of points, got {ndim} dimension(s)"
                )
        x, pdf = (params[n] for n in cls.params)
        if not isinstance(x, Variable) and not isinstance(pdf, Variable):
            xv, pv = np.asarray(x, dtype=float), np.asarray(pdf, dtype=float)
            if xv.shape != pv.shape or xv.size < 2:
                raise KilnValueError(
                    "Interpolated: x_points and pdf_points must have the same length >= 2, "
                    f"got {xv.shape} and {pv.shape}"
                )
            if not np.all(np.diff(xv) > 0):
                raise KilnValueError("Interpolated: x_points must be strictly increasing")
            if np.any(pv < 0) or not np.sum(pv) > 0:
                raise KilnValueError("Interpolated: pdf_points must be >= 0, not all 0")
        return super().dist(*args, size=size, shape=shape, rng=rng, **kwargs)

    @staticmethod
    def _segments(x: Any, pdf: Any) -> tuple[Any, Any, Any, Any, Any]:
        """Return each segment's left point, width, left density, slope and area."""
        x0, w = x[:-1], x[1:] - x[:-1]
        p0 = pdf[:-1]
        return x0, w, p0, (pdf[1:] - p0) / w, 0.5 * (p0 + pdf[1:]) * w

    @classmethod
    def build(cls, x: Any, pdf: Any, *, size: Any, rng: Any) -> TensorVariable:
        u = kr.uniform(size=size if size is not None else (), rng=rng)
        return cls._quantile(u, x, pdf)

    @staticmethod
    def _quantile(q: Any, x: Any, pdf: Any) -> TensorVariable:
        x0, _, p0, slope, areas = Interpolated._segments(x, pdf)
        cum = kt.cumsum(areas)
        target = q * cum[-1]
        # The segment holding the target: the number of segment ends at or below it.
        n_seg = kt.shape_i(areas, 0)
        seg = kt.minimum(
            kt.sum(kt.cast(cum <= kt.expand_dims(target, -1), "int64"), axis=-1), n_seg - 1
        )
        before = kt.concatenate([kt.zeros((1,), dtype="float64"), cum[:-1]])
        rest = target - before[seg]
        p, s = p0[seg], slope[seg]
        # The root of p d + s d^2 / 2 = rest, in the form that cancels no digits.
        root = p + kt.sqrt(kt.maximum(p * p + 2.0 * s * rest, 0.0))
        d = kt.switch(rest > 0, 2.0 * rest / kt.switch(rest > 0, root, 1.0), 0.0)
        return kt.clip(x0[seg] + d, x[0], x[-1])

    @staticmethod
    def icdf(value: Any, x: Any, pdf: Any) -> TensorVariable:
        q = kt.clip(value, 0.0, 1.0)
        return icdf_bound(Interpolated._quantile(q, x, pdf), value)

    @staticmethod
    def logp(value: Any, x: Any, pdf: Any) -> TensorVariable:
        x0, w, p0, slope, areas = Interpolated._segments(x, pdf)
        v = kt.expand_dims(value, -1)
        n = kt.shape_i(x0, 0)
        last = kt.eq(kt.arange(n), n - 1)
        inside = kt.logical_and(
            v >= x0, kt.logical_or(v < x0 + w, kt.logical_and(last, v <= x0 + w))
        )
        density = kt.sum(kt.switch(inside, p0 + slope * (v - x0), 0.0), axis=-1)
        ok = kt.logical_and(value >= x[0], value <= x[-1])
        return kt.switch(ok, kt.log(density) - kt.log(kt.sum(areas)), -np.inf)

    @staticmethod
    def logcdf(value: Any, x: Any, pdf: Any) -> TensorVariable:
        x0, w, p0, slope, areas = Interpolated._segments(x, pdf)
        d = kt.clip(kt.expand_dims(value, -1) - x0, 0.0, w)
        mass = kt.sum(p0 * d + 0.5 * slope * d * d, axis=-1)
        return kt.switch(value <= x[0], -np.inf, kt.log(mass) - kt.log(kt.sum(areas)))

    @classmethod
    def support_point(cls, rv: TensorVariable, x: Any, pdf: Any) -> TensorVariable:
        *_, areas = cls._segments(x, pdf)
        mid = 0.5 * (x[1:] + x[:-1])
        return broadcast_like(kt.sum(areas * mid) / kt.sum(areas), rv)

    @classmethod
    def default_transform(cls, rv: TensorVariable) -> tr.Transform | None:
        _, (x, _) = density_of(rv)
        points = kt.as_tensor(x)
        return _interval_transform(points[0], points[-1])
