"""MLX samplers of the draws that need a loop elsewhere: counts, von Mises, truncated normal.

A traced MLX program has no data-dependent loop, so every sampler here runs a fixed
number of steps chosen so that running out has negligible probability, and ``mx.where``
keeps each element's first accepted proposal:

- Poisson(``mu``): below ``mu = 10`` inversion of the CDF by :data:`INVERSION_STEPS`
  sequential steps (``P(X >= 80) < 1e-40``); from 10 Hoermann's transformed rejection
  with squeeze (PTRS), :data:`ROUNDS` proposals, each accepted with probability above 0.9.
- Binomial(``n``, ``p``): drawn with ``q = min(p, 1 - p)`` and mirrored; below
  ``n q = 10`` inversion as above, from 10 Hoermann's BTRS (:data:`ROUNDS` proposals).
- Negative binomial(``n``, ``p``): Poisson with a Gamma(``n``, ``(1 - p) / p``) mean.
- Hypergeometric(``N``, ``k``, ``n``): inversion of the CDF over a window of the support
  around the mean, of half-width ``5 sqrt(max n) + 20`` (the mass outside is below
  ``2 exp(-50)`` by Hoeffding's inequality). The window's width is a shape, so ``n`` is a
  value known when tracing (each new value traces a new program).
- Von Mises(``mu``, ``kappa``): Best and Fisher's rejection sampler (:data:`ROUNDS`
  proposals, each accepted with probability above 0.65); a normal of variance
  ``1 / kappa`` above ``kappa = 1e6``.
- Truncated normal: inversion in log space, ``log Phi(x) = log Phi(a) + log1p(u (Phi(b) /
  Phi(a) - 1))`` in the lower tail (the bounds mirrored when above the mean), solved by
  Newton's method on ``log Phi`` (exact down to ``-38`` sigma and beyond, through
  ``erfcx``).
- Multinomial(``n``, ``p``): one binomial per category, of the count left over.

``P(all proposals rejected)`` is below 1e-20 for every rejection sampler here. Their
unrolled rounds are more than ``mx.compile`` can afford (minutes of g++): a graph with
one of these draws runs eagerly (:data:`UNCOMPILABLE`, :class:`kiln_mlx.MlxLinker`).
"""

from __future__ import annotations

import math
from typing import Any

import mlx.core as mx
import numpy as np

import kiln_random as kr
from kiln_mlx import _float64_math as f64
from kiln_mlx._dtypes import const
from kiln_mlx.random import gamma, normal, register_sampler, uniform

#: Proposals of each rejection sampler (every element keeps its first accepted one).
ROUNDS = 48
#: Steps of the inversion of a Poisson or binomial CDF (means below 10).
INVERSION_STEPS = 80
_INVERSION_BELOW = 10.0


def _lfact(x: Any) -> Any:
    return f64.lgamma(x + const(1.0, x))


def _invert_counts(u: Any, p0: Any, ratio: Any) -> Any:
    """Return the count where the CDF first reaches ``u``.

    ``pmf(0) = p0`` and ``pmf(k) / pmf(k - 1) = ratio(k)``.
    """
    pmf, cdf = p0, p0
    count = mx.zeros_like(u)
    one = const(1.0, u)
    for k in range(1, INVERSION_STEPS + 1):
        count = count + mx.where(cdf < u, one, const(0.0, u))
        pmf = pmf * ratio(const(float(k), u))
        cdf = cdf + pmf
    return count


def _first_accepted(proposals: list[tuple[Any, Any]], like: Any) -> Any:
    result = mx.full(like.shape, const(math.nan, like), dtype=like.dtype)
    done = mx.zeros(like.shape, dtype=mx.bool_)
    for value, ok in proposals:
        result = mx.where(done | ~ok, result, value)
        done = done | ok
    return result


def poisson(key: Any, shape: tuple[int, ...], dtype: Any, mu: Any) -> Any:
    """Return Poisson(``mu``) draws (as floats of ``dtype``)."""
    k_inv, k_rej = mx.random.split(key)
    small = mu < const(_INVERSION_BELOW, mu)
    lam_small = mx.where(small, mu, const(1.0, mu))
    inverted = _invert_counts(
        uniform(k_inv, shape, dtype), f64.exp(-lam_small), lambda k: lam_small / k
    )
    lam = mx.where(small, const(_INVERSION_BELOW, mu), mu)
    c = lambda v: const(v, lam)  # noqa: E731
    slam = mx.sqrt(lam)
    log_lam = mx.log(lam)
    b = c(0.931) + c(2.53) * slam
    a = c(-0.059) + c(0.02483) * b
    log_alpha = mx.log(c(1.1239) + c(1.1328) / (b - c(3.4)))
    vr = c(0.9277) - c(3.6224) / (b - c(2.0))
    keys = mx.random.split(k_rej, 2 * ROUNDS)
    proposals = []
    for r in range(ROUNDS):
        u = uniform(keys[2 * r], shape, dtype) - c(0.5)
        v = uniform(keys[2 * r + 1], shape, dtype)
        us = c(0.5) - mx.abs(u)
        k = mx.floor((c(2.0) * a / us + b) * u + lam + c(0.43))
        squeeze = (us >= c(0.07)) & (v <= vr)
        safe_k = mx.maximum(k, c(0.0))
        log_accept = mx.log(v) + log_alpha - mx.log(a / (us * us) + b)
        full = log_accept <= -lam + safe_k * log_lam - _lfact(safe_k)
        ok = (k >= c(0.0)) & (squeeze | (~((us < c(0.013)) & (v > us)) & full))
        proposals.append((k, ok))
    rejected = _first_accepted(proposals, lam)
    zero = mu == const(0.0, mu)
    return mx.where(zero, const(0.0, mu), mx.where(small, inverted, rejected))


def binomial(key: Any, shape: tuple[int, ...], dtype: Any, n: Any, p: Any) -> Any:
    """Return Binomial(``n``, ``p``) draws (as floats of ``dtype``)."""
    k_inv, k_rej = mx.random.split(key)
    c = lambda v: const(v, p)  # noqa: E731
    flip = p > c(0.5)
    q = mx.where(flip, c(1.0) - p, p)
    small = n * q < c(_INVERSION_BELOW)
    # Inversion: pmf(0) = (1 - q)^n, pmf(k) / pmf(k - 1) = (n - k + 1) / k * q / (1 - q).
    qs = mx.where(small, q, c(0.0))
    odds = qs / (c(1.0) - qs)
    inverted = _invert_counts(
        uniform(k_inv, shape, dtype),
        f64.exp(n * mx.log1p(-qs)),
        lambda k: mx.maximum(n - k + c(1.0), c(0.0)) / k * odds,
    )
    inverted = mx.minimum(inverted, n)
    # BTRS, where n q >= 10 (elsewhere on harmless stand-in values).
    nn = mx.where(small, c(100.0), n)
    qq = mx.where(small, c(0.5), q)
    spq = mx.sqrt(nn * qq * (c(1.0) - qq))
    b = c(1.15) + c(2.53) * spq
    a = c(-0.0873) + c(0.0248) * b + c(0.01) * qq
    center = nn * qq + c(0.5)
    alpha = (c(2.83) + c(5.1) / b) * spq
    vr = c(0.92) - c(4.2) / b
    mode = mx.floor((nn + c(1.0)) * qq)
    log_odds = mx.log(qq) - mx.log1p(-qq)
    h_mode = _lfact(mode) + _lfact(nn - mode)
    keys = mx.random.split(k_rej, 2 * ROUNDS)
    proposals = []
    for r in range(ROUNDS):
        u = uniform(keys[2 * r], shape, dtype) - c(0.5)
        v = uniform(keys[2 * r + 1], shape, dtype)
        us = c(0.5) - mx.abs(u)
        k = mx.floor((c(2.0) * a / us + b) * u + center)
        inside = (k >= c(0.0)) & (k <= nn)
        squeeze = (us >= c(0.07)) & (v <= vr)
        safe_k = mx.clip(k, c(0.0), nn)
        log_v = mx.log(v * alpha / (a / (us * us) + b))
        full = log_v <= h_mode - _lfact(safe_k) - _lfact(nn - safe_k) + (safe_k - mode) * log_odds
        proposals.append((k, inside & (squeeze | full)))
    rejected = _first_accepted(proposals, nn)
    draw = mx.where(small, inverted, rejected)
    return mx.where(flip, n - draw, draw)


def negative_binomial(key: Any, shape: tuple[int, ...], dtype: Any, n: Any, p: Any) -> Any:
    """Return negative binomial draws: Poisson with a Gamma(n, (1 - p) / p) mean."""
    k1, k2 = mx.random.split(key)
    lam = gamma(k1, n, shape, dtype) * (const(1.0, p) - p) / p
    return poisson(k2, shape, dtype, lam)


def hypergeometric(
    key: Any, shape: tuple[int, ...], dtype: Any, total: Any, good: Any, n: Any, *, n_max: int
) -> Any:
    """Return hypergeometric draws: ``n`` items from ``total``, ``good`` of them marked."""
    c = lambda v: const(v, total)  # noqa: E731
    half = int(math.ceil(5.0 * math.sqrt(max(n_max, 0)) + 20.0))
    low = mx.maximum(c(0.0), n - (total - good))
    high = mx.minimum(n, good)
    mean = n * good / mx.maximum(total, c(1.0))
    offsets = mx.arange(-half, half + 1, dtype=total.dtype)
    x = mx.floor(mean)[..., None] + offsets
    inside = (x >= low[..., None]) & (x <= high[..., None])
    xs = mx.clip(x, low[..., None], high[..., None])
    g, t, m = good[..., None], total[..., None], n[..., None]
    log_pmf = (
        _lfact(g)
        - _lfact(xs)
        - _lfact(g - xs)
        + _lfact(t - g)
        - _lfact(m - xs)
        - _lfact(t - g - m + xs)
    )
    log_pmf = mx.where(inside, log_pmf, c(-math.inf))
    weights = f64.exp(log_pmf - mx.max(log_pmf, axis=-1, keepdims=True))
    cdf = mx.cumsum(weights, axis=-1)
    u = uniform(key, shape, dtype)[..., None] * cdf[..., -1:]
    # The first value of the window whose CDF reaches u (values outside the support weigh 0).
    return x[..., 0] + mx.sum(cdf < u, axis=-1).astype(total.dtype)


def vonmises(key: Any, shape: tuple[int, ...], dtype: Any, mu: Any, kappa: Any) -> Any:
    """Return von Mises(``mu``, ``kappa``) draws in ``[-pi, pi)``."""
    c = lambda v: const(v, kappa)  # noqa: E731
    s = c(0.5) / kappa
    r = s + mx.sqrt(c(1.0) + s * s)
    keys = mx.random.split(key, 2 * ROUNDS + 2)
    proposals = []
    for i in range(ROUNDS):
        z = f64.cos(c(math.pi) * uniform(keys[2 * i], shape, dtype))
        w = (c(1.0) + r * z) / (r + z)
        cc = kappa * (r - w)
        u = uniform(keys[2 * i + 1], shape, dtype)
        ok = (cc * (c(2.0) - cc) > u) | (mx.log(cc / u) + c(1.0) >= cc)
        proposals.append((w, ok))
    w = _first_accepted(proposals, kappa)
    theta = mx.arccos(mx.clip(w, c(-1.0), c(1.0)))
    theta = mx.where(uniform(keys[-2], shape, dtype) < c(0.5), -theta, theta)
    near = normal(keys[-1], shape, dtype) / mx.sqrt(kappa)
    x = mu + mx.where(kappa > c(1e6), near, theta)
    two_pi = c(2.0 * math.pi)
    return x - two_pi * mx.floor((x + c(math.pi)) / two_pi)


def _log_ndtr(z: Any) -> Any:
    """Return ``log Phi(z)`` (through ``erfcx`` below 0: no underflow in the far tail)."""
    c = lambda v: const(v, z)  # noqa: E731
    t = -z / c(math.sqrt(2.0))
    neg = z < c(0.0)
    tn = mx.where(neg, t, c(0.0))
    lower = mx.log(f64.erfcx(tn) * c(0.5)) - tn * tn
    upper = mx.log1p(-c(0.5) * f64.erfc(mx.where(neg, c(0.0), -t)))
    return mx.where(neg, lower, upper)


def truncated_normal(
    key: Any, shape: tuple[int, ...], dtype: Any, mu: Any, sigma: Any, lower: Any, upper: Any
) -> Any:
    """Return normal(``mu``, ``sigma``) draws truncated to ``[lower, upper]``."""
    c = lambda v: const(v, mu)  # noqa: E731
    a, b = (lower - mu) / sigma, (upper - mu) / sigma
    flip = a + b > c(0.0)
    a, b = mx.where(flip, -b, a), mx.where(flip, -a, b)
    log_pa, log_pb = _log_ndtr(a), _log_ndtr(b)
    u = uniform(key, shape, dtype)
    log_q = log_pb + mx.log1p(u * mx.expm1(log_pa - log_pb))
    q = f64.exp(log_q)
    start = c(math.sqrt(2.0)) * f64.erfinv(c(2.0) * q - c(1.0))
    z = mx.where(log_q > c(-20.0), start, -mx.sqrt(c(-2.0) * log_q))
    z = mx.where(mx.isfinite(z), z, c(0.0))
    for _ in range(10):  # Newton on log Phi(z) = log q
        log_phi = _log_ndtr(z)
        log_pdf = c(-0.5) * z * z - c(0.5 * math.log(2.0 * math.pi))
        z = z - (log_phi - log_q) / f64.exp(log_pdf - log_phi)
    x = mx.clip(z, a, b)
    return mu + sigma * mx.where(flip, -x, x)


def multinomial(key: Any, shape: tuple[int, ...], dtype: Any, n: Any, p: Any) -> Any:
    """Return multinomial draws: a binomial per category, of the count left over."""
    k = p.shape[-1]
    p = p / mx.sum(p, axis=-1, keepdims=True)
    keys = mx.random.split(key, max(k, 2))
    left = n
    mass = mx.ones(shape, dtype=p.dtype)
    counts = []
    for i in range(k - 1):
        share = p[..., i] / mx.maximum(mass, const(1e-300, p))
        share = mx.clip(share, const(0.0, p), const(1.0, p))
        x = binomial(keys[i], shape, dtype, left, share)
        counts.append(x)
        left = left - x
        mass = mass - p[..., i]
    counts.append(left)
    return mx.stack(counts, axis=-1)


def _hypergeometric_sampler(
    key: Any, shape: tuple[int, ...], dtype: Any, *params: Any, static: Any
) -> Any:
    return hypergeometric(key, shape, dtype, *params, n_max=int(np.max(static[2], initial=0)))


#: The random variables whose samplers run eagerly (see the module docstring).
UNCOMPILABLE: tuple[type, ...] = (
    kr.PoissonRV,
    kr.BinomialRV,
    kr.NegativeBinomialRV,
    kr.VonMisesRV,
    kr.TruncatedNormalRV,
    kr.MultinomialRV,
    kr.HyperGeometricRV,
)

register_sampler(kr.PoissonRV, poisson)
register_sampler(kr.BinomialRV, binomial)
register_sampler(kr.NegativeBinomialRV, negative_binomial)
register_sampler(kr.VonMisesRV, vonmises)
register_sampler(kr.TruncatedNormalRV, truncated_normal)
register_sampler(kr.MultinomialRV, multinomial)
register_sampler(kr.HyperGeometricRV, _hypergeometric_sampler, static_params=(2,))
