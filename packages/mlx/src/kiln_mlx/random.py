"""Random variables on MLX: generators mapped to MLX keys, draws built from MLX's bits.

The RNG mapping. A graph's generators are NumPy ``Generator`` values (shared
variables made by ``kiln_random.rng(seed)``). At each call the linker turns each
generator input into an MLX key: it copies the generator, draws one 63-bit integer
from the copy (:func:`key_data`), and passes it as the key's two uint32 words; the
advanced copy is what the function returns as the generator's next state, so the same
seed gives the same draws and the next call draws new ones. Inside the traced program
keys are split functionally (``mx.random.split``): each draw splits its input key into
(next key, subkey). The draws are MLX's streams, not NumPy's: they agree with the VM in
distribution, not value.

float64. MLX's ``uniform`` refuses float64 and its ``normal`` draws float32 values: a
float64 uniform here is ``(a 2**27 + b + 1/2) / 2**53`` from two integer draws of 26
and 27 bits (``mx.random.randint``), in (0, 1); normals are Box-Muller pairs of those
uniforms with kiln's float64 ``exp``/``sin``/``cos`` (:mod:`kiln_mlx._float64_math`).
Gamma draws use Marsaglia and Tsang's method with a fixed number of proposals
(:data:`GAMMA_ROUNDS`, each accepted with probability above 0.95: all rejected has
probability below 1e-20), since a traced MLX program has no data-dependent loop.

The draws that need a data-dependent loop elsewhere (Poisson, binomial, negative
binomial, hypergeometric, von Mises, truncated normal, multinomial) are in
:mod:`kiln_mlx._draws`, with fixed numbers of steps. A random variable without an MLX
sampler raises :class:`~kiln_mlx.NoMlxImplementation` when the graph is linked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np

import kiln_random as kr
from kiln_graph import Apply
from kiln_mlx import _float64_math as f64
from kiln_mlx._dtypes import as_mx, const, mx_dtype
from kiln_mlx._funcify import MlxImpl, mlx_funcify, no_implementation, static_inputs
from kiln_random import RandomVariable, copy_generator

#: Proposals per element of a Gamma draw (Marsaglia-Tsang; see the module docstring).
GAMMA_ROUNDS = 16

#: ``sampler(key, batch_shape, dtype, *params) -> draw``: params broadcast to the batch
#: shape followed by their core shapes; the draw has the batch shape then its core one.
Sampler = Callable[..., Any]


def key_data(generator: np.random.Generator) -> tuple[np.ndarray, np.random.Generator]:
    """Return the MLX key words for ``generator`` and the generator advanced past it.

    ``generator`` is not changed: a copy draws one 63-bit integer, the key's seed.
    """
    advanced = copy_generator(generator)
    seed = int(advanced.integers(0, 2**63))
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32), advanced


def uniform(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return uniform draws in (0, 1) of MLX ``dtype`` (53 random bits for float64)."""
    if dtype != mx.float64:
        return mx.random.uniform(shape=shape, dtype=dtype, key=key)
    k1, k2 = mx.random.split(key)
    high = mx.random.randint(0, 2**26, shape, dtype=mx.int32, key=k1).astype(mx.float64)
    low = mx.random.randint(0, 2**27, shape, dtype=mx.int32, key=k2).astype(mx.float64)
    scale = mx.array(2.0**-53, dtype=mx.float64)
    return (
        high * mx.array(2.0**27, dtype=mx.float64) + low + mx.array(0.5, dtype=mx.float64)
    ) * scale


def normal(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return standard normal draws (Box-Muller on :func:`uniform` for float64)."""
    if dtype != mx.float64:
        return mx.random.normal(shape=shape, dtype=dtype, key=key)
    k1, k2 = mx.random.split(key)
    u1, u2 = uniform(k1, shape, dtype), uniform(k2, shape, dtype)
    radius = mx.sqrt(const(-2.0, u1) * mx.log(u1))
    return radius * f64.cos(const(2.0 * math.pi, u2) * u2)


def exponential(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return standard exponential draws."""
    return -mx.log(uniform(key, shape, dtype))


def gamma(key: Any, alpha: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Return Gamma(``alpha``, 1) draws (Marsaglia-Tsang, boosted below 1)."""
    alpha = as_mx(alpha).astype(dtype)
    one = const(1.0, alpha)
    boosted = mx.where(alpha < one, alpha + one, alpha)
    d = boosted - const(1.0 / 3.0, alpha)
    c = one / mx.sqrt(const(9.0, alpha) * d)
    keys = mx.random.split(key, 2 * GAMMA_ROUNDS + 1)
    result = mx.full(shape, const(math.nan, alpha), dtype=dtype)
    done = mx.zeros(shape, dtype=mx.bool_)
    for r in range(GAMMA_ROUNDS):
        x = normal(keys[2 * r], shape, dtype)
        v = one + c * x
        v = v * v * v
        u = uniform(keys[2 * r + 1], shape, dtype)
        safe_v = mx.where(v > const(0.0, v), v, one)
        ok = (v > const(0.0, v)) & (
            mx.log(u) < const(0.5, x) * x * x + d - d * safe_v + d * mx.log(safe_v)
        )
        result = mx.where(done | ~ok, result, d * safe_v)
        done = done | ok
    boost = mx.power(uniform(keys[-1], shape, dtype), one / alpha)
    return mx.where(alpha < one, result * boost, result)


def _logistic(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    u = uniform(key, shape, dtype)
    return mx.log(u) - mx.log1p(-u)


def _laplace(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    u = uniform(key, shape, dtype) - const(0.5, mx.zeros((), dtype=dtype))
    return -mx.sign(u) * mx.log1p(const(-2.0, u) * mx.abs(u))


def _cauchy(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    u = uniform(key, shape, dtype)
    return mx.tan(const(math.pi, u) * (u - const(0.5, u)))


def _student_t(key: Any, shape: tuple[int, ...], dtype: Any, nu: Any) -> Any:
    k1, k2 = mx.random.split(key)
    z = normal(k1, shape, dtype)
    g = gamma(k2, nu * const(0.5, nu), shape, dtype)
    return z * mx.sqrt(nu * const(0.5, nu) / g)


def _beta(key: Any, shape: tuple[int, ...], dtype: Any, a: Any, b: Any) -> Any:
    k1, k2 = mx.random.split(key)
    x = gamma(k1, a, shape, dtype)
    y = gamma(k2, b, shape, dtype)
    return x / (x + y)


def _dirichlet(key: Any, shape: tuple[int, ...], dtype: Any, alpha: Any) -> Any:
    g = gamma(key, alpha, tuple(alpha.shape), dtype)
    return g / mx.sum(g, axis=-1, keepdims=True)


def _multivariate_normal(key: Any, shape: tuple[int, ...], dtype: Any, mu: Any, cov: Any) -> Any:
    from kiln_mlx.linalg import cholesky_lower

    chol = cholesky_lower(cov)
    z = normal(key, tuple(mu.shape), dtype)
    return mu + mx.matmul(chol, z[..., None], stream=mx.cpu)[..., 0]


def _categorical(key: Any, shape: tuple[int, ...], dtype: Any, p: Any) -> Any:
    u = uniform(key, shape, p.dtype)[..., None]
    cdf = mx.cumsum(p, axis=-1)
    cdf = cdf / cdf[..., -1:]
    return mx.sum(cdf < u, axis=-1).astype(mx.int64)


def _geometric(key: Any, shape: tuple[int, ...], dtype: Any, p: Any) -> Any:
    u = uniform(key, shape, p.dtype)
    return const(1.0, p) + mx.floor(mx.log(u) / mx.log1p(-p))


#: The MLX sampler of each random variable class (registered below).
_SAMPLERS: dict[type[RandomVariable], Sampler] = {
    kr.NormalRV: lambda k, s, d, mu, sigma: mu + sigma * normal(k, s, d),
    kr.HalfNormalRV: lambda k, s, d, sigma: mx.abs(sigma * normal(k, s, d)),
    kr.LogNormalRV: lambda k, s, d, mu, sigma: f64.exp(mu + sigma * normal(k, s, d)),
    kr.UniformRV: lambda k, s, d, lo, hi: lo + (hi - lo) * uniform(k, s, d),
    kr.ExponentialRV: lambda k, s, d, scale: scale * exponential(k, s, d),
    kr.GammaRV: lambda k, s, d, shape, scale: scale * gamma(k, shape, s, d),
    kr.BetaRV: _beta,
    kr.InverseGammaRV: lambda k, s, d, alpha, beta: beta / gamma(k, alpha, s, d),
    kr.StudentTRV: lambda k, s, d, nu, mu, sigma: mu + sigma * _student_t(k, s, d, nu),
    kr.HalfStudentTRV: lambda k, s, d, nu, sigma: mx.abs(sigma * _student_t(k, s, d, nu)),
    kr.CauchyRV: lambda k, s, d, alpha, beta: alpha + beta * _cauchy(k, s, d),
    kr.HalfCauchyRV: lambda k, s, d, beta: mx.abs(beta * _cauchy(k, s, d)),
    kr.LaplaceRV: lambda k, s, d, mu, b: mu + b * _laplace(k, s, d),
    kr.LogisticRV: lambda k, s, d, mu, scale: mu + scale * _logistic(k, s, d),
    kr.WeibullRV: lambda k, s, d, alpha, beta: (
        beta * mx.power(exponential(k, s, d), const(1.0, alpha) / alpha)
    ),
    kr.BernoulliRV: lambda k, s, d, p: uniform(k, s, p.dtype) < p,
    kr.GeometricRV: _geometric,
    kr.CategoricalRV: _categorical,
    kr.DirichletRV: _dirichlet,
    kr.MultivariateNormalRV: _multivariate_normal,
}


def _batch_shape(op: RandomVariable, batch: int, size: Any, params: list[Any]) -> tuple[int, ...]:
    if len(size):
        return tuple(int(n) for n in np.asarray(size))
    return tuple(np.broadcast_shapes(*(tuple(p.shape[:batch]) for p in params))) if batch else ()


def _float_dtype(node: Apply) -> Any:
    """Return the float dtype a draw computes in: the draw's, or float64 for integers."""
    dtype = np.dtype(node.outputs[1].type.dtype)  # type: ignore[attr-defined]
    return mx_dtype(dtype if dtype.kind == "f" else "float64")


def rv_implementation(
    op: RandomVariable, node: Apply, sampler: Sampler, static_params: tuple[int, ...] = ()
) -> MlxImpl:
    """Return the MLX function of ``node``: ``(key, size, *params) -> (next key, draw)``.

    The parameters at ``static_params`` must be known when tracing; the sampler gets
    their NumPy values as ``static`` (a tuple of every parameter, None where not static).
    """
    batch = op.batch_ndim(node)
    dtype = node.outputs[1].type.dtype  # type: ignore[attr-defined]

    def draw(key: Any, size: Any, *params: Any) -> tuple[Any, Any]:
        work = _float_dtype(node)
        known = tuple(np.asarray(p) if i in static_params else None for i, p in enumerate(params))
        arrays = [as_mx(p) for p in params]
        arrays = [a.astype(work) if mx.issubdtype(a.dtype, mx.floating) else a for a in arrays]
        shape = _batch_shape(op, batch, size, arrays)
        full = [mx.broadcast_to(a, shape + tuple(a.shape[batch:])) for a in arrays]
        full = [a.astype(work) if not mx.issubdtype(a.dtype, mx.floating) else a for a in full]
        next_key, sub = mx.random.split(key)
        if static_params:
            value = sampler(sub, shape, work, *full, static=known)
        else:
            value = sampler(sub, shape, work, *full)
        return next_key, as_mx(value, dtype)

    return static_inputs(draw, 1, *(2 + i for i in static_params))


def register_sampler(
    cls: type[RandomVariable], sampler: Sampler, static_params: tuple[int, ...] = ()
) -> None:
    """Register ``sampler`` as the MLX draw of the random variables of ``cls``.

    ``static_params``: positions of the parameters that decide a shape (known when
    tracing, see :func:`rv_implementation`).
    """

    def mlx_funcify_rv(op: RandomVariable, node: Apply) -> MlxImpl:
        return rv_implementation(op, node, sampler, static_params)

    mlx_funcify_rv.__name__ = f"mlx_funcify_{cls.__name__}"
    mlx_funcify.register(cls)(mlx_funcify_rv)


for _cls, _sampler in _SAMPLERS.items():
    register_sampler(_cls, _sampler)


@mlx_funcify.register(RandomVariable)
def mlx_funcify_RandomVariable(op: RandomVariable, node: Apply) -> MlxImpl:  # noqa: N802
    """Raise: this random variable has no MLX sampler (the message names it)."""
    raise no_implementation(f"the random variable {type(op).__name__}", "no MLX sampler yet")
