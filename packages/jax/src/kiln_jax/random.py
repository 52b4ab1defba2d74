"""Random variables on JAX: generators mapped to JAX keys, draws by ``jax.random``.

The RNG mapping. A graph's generators are NumPy ``Generator`` values (shared
variables made by ``kiln_random.rng(seed)``). At each call the linker turns each
generator input into a JAX key: it copies the generator, draws one 63-bit integer from
the copy (:func:`key_data`), and passes that integer as the key's data (threefry, two
uint32 words); the advanced copy is what the function returns as the generator's next
state, so the update a compiled function applies makes the next call draw new
values, and the same seed gives the same draws. Inside the traced program keys are
split functionally: each draw splits its input key into (next key, subkey) and draws
from the subkey, so the chained draws of one function are independent. The draws are
JAX's streams, not NumPy's: they agree with the VM in distribution, not value.

Sizes follow NumPy as on the VM: a draw has the batch shape ``size`` (or the broadcast
of the parameters' batch shapes) followed by its core shape. XLA cannot raise, so a
parameter that breaks a distribution's constraint gives NaN (float draws) where the
VM raises; integer draws are left as JAX draws them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr
import jax.scipy.special as jsp
import numpy as np

import kiln_random as kr
from kiln_graph import Apply
from kiln_jax._funcify import JaxImpl, jax_funcify, static_inputs
from kiln_random import RandomVariable, copy_generator

#: The JAX key implementation kiln's keys use (two uint32 words of data).
KEY_IMPL = "threefry2x32"

#: ``sampler(key, batch_shape, *params) -> draw``: params broadcast to the batch shape
#: followed by their core shapes; the draw has the batch shape followed by its core one.
Sampler = Callable[..., Any]


def key_data(generator: np.random.Generator) -> tuple[np.ndarray, np.random.Generator]:
    """Return the JAX key data for ``generator`` and the generator advanced past it.

    ``generator`` is not changed: a copy draws one 63-bit integer, the key's seed.
    """
    advanced = copy_generator(generator)
    seed = int(advanced.integers(0, 2**63))
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32), advanced


def as_key(data: Any) -> Any:
    """Return the typed JAX key of ``data`` (from :func:`key_data`)."""
    return jr.wrap_key_data(data, impl=KEY_IMPL)


F64 = "float64"


def _normal(key: Any, batch: tuple[int, ...], mu: Any, sigma: Any) -> Any:
    return mu + sigma * jr.normal(key, batch, F64)


def _truncated_normal(
    key: Any, batch: tuple[int, ...], mu: Any, sigma: Any, lower: Any, upper: Any
) -> Any:
    """Inverse-CDF draws in log space, in the lower tail (the bounds flipped if needed).

    ``log Phi(x) = log Phi(a) + log(...)`` is solved for ``x`` with ``ndtri`` where
    ``Phi(x)`` is a float64 number and by Newton's method on ``log_ndtr`` beyond
    (bounds down to ``-40`` sigma and more stay exact).
    """
    a, b = (lower - mu) / sigma, (upper - mu) / sigma
    flip = a + b > 0
    a, b = jnp.where(flip, -b, a), jnp.where(flip, -a, b)
    log_pa, log_pb = jsp.log_ndtr(a), jsp.log_ndtr(b)
    u = jr.uniform(key, batch, F64)
    log_q = log_pb + jnp.log1p(u * jnp.expm1(log_pa - log_pb))
    x = jnp.where(log_q > -700.0, jsp.ndtri(jnp.exp(jnp.maximum(log_q, -700.0))), 0.0)
    far = log_q <= -700.0
    z = -jnp.sqrt(-2.0 * log_q)
    for _ in range(8):  # Newton on log_ndtr(z) = log_q, from the asymptote
        log_pdf = -0.5 * z * z - 0.5 * np.log(2.0 * np.pi)
        z = z - (jsp.log_ndtr(z) - log_q) / jnp.exp(log_pdf - jsp.log_ndtr(z))
    x = jnp.clip(jnp.where(far, z, x), a, b)
    return mu + sigma * jnp.where(flip, -x, x)


def _geometric(key: Any, batch: tuple[int, ...], p: Any) -> Any:
    u = jr.uniform(key, batch, F64, minval=np.finfo(F64).tiny, maxval=1.0)
    return 1.0 + jnp.floor(jnp.log(u) / jnp.log1p(-p))


def _negative_binomial(key: Any, batch: tuple[int, ...], n: Any, p: Any) -> Any:
    k1, k2 = jr.split(key)
    lam = jr.gamma(k1, n, batch, F64) * (1.0 - p) / p
    return jr.poisson(k2, lam, batch)


def _dirichlet(key: Any, batch: tuple[int, ...], alpha: Any) -> Any:
    # Log-space Gammas: tiny concentrations still give a point of the simplex.
    log_g = jr.loggamma(key, alpha, alpha.shape, F64)
    return jax.nn.softmax(log_g, axis=-1)


def _multivariate_normal(key: Any, batch: tuple[int, ...], mu: Any, cov: Any) -> Any:
    chol = jnp.linalg.cholesky(cov)
    z = jr.normal(key, mu.shape, F64)
    return mu + jnp.einsum("...ij,...j->...i", chol, z)


def _vonmises(key: Any, batch: tuple[int, ...], mu: Any, kappa: Any) -> Any:
    """Best and Fisher's rejection sampler, every element redrawn until it accepts."""
    s = 0.5 / kappa
    r = s + jnp.sqrt(1.0 + s * s)

    def propose(k: Any) -> tuple[Any, Any]:
        k1, k2 = jr.split(k)
        z = jnp.cos(np.pi * jr.uniform(k1, batch, F64))
        w = (1.0 + r * z) / (r + z)
        c = kappa * (r - w)
        u = jr.uniform(k2, batch, F64, minval=np.finfo(F64).tiny, maxval=1.0)
        return w, (c * (2.0 - c) > u) | (jnp.log(c / u) + 1.0 >= c)

    def body(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k, w, done = state
        k, sub = jr.split(k)
        w_new, ok = propose(sub)
        return k, jnp.where(done, w, w_new), done | ok

    k_loop, k_sign, k_normal = jr.split(key, 3)
    init = (k_loop, jnp.zeros(batch, F64), jnp.zeros(batch, bool))
    _, w, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), body, init)
    theta = jnp.arccos(jnp.clip(w, -1.0, 1.0))
    theta = jnp.where(jr.bernoulli(k_sign, 0.5, batch), -theta, theta)
    normal = jr.normal(k_normal, batch, F64) / jnp.sqrt(kappa)
    x = mu + jnp.where(kappa > 1e6, normal, theta)
    return x - 2.0 * np.pi * jnp.floor((x + np.pi) / (2.0 * np.pi))


def _hypergeometric(key: Any, batch: tuple[int, ...], n_items: Any, k: Any, n: Any) -> Any:
    """One urn draw at a time for every element, up to the largest ``n``."""

    def body(i: Any, state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        drawn, good, total = state
        u = jr.uniform(jr.fold_in(key, i), batch, F64)
        hit = (i < n) & (u * total < good)
        active = i < n
        return drawn + hit, good - hit, total - active

    zero = jnp.zeros(batch, n.dtype)
    init = (zero, k + zero, n_items + zero)
    drawn, _, _ = jax.lax.fori_loop(0, jnp.max(n, initial=0), body, init)
    return drawn


#: The JAX sampler of each random variable class (registered with ``jax_funcify`` below).
_SAMPLERS: dict[type[RandomVariable], Sampler] = {
    kr.NormalRV: _normal,
    kr.HalfNormalRV: lambda k, s, sigma: jnp.abs(sigma * jr.normal(k, s, F64)),
    kr.LogNormalRV: lambda k, s, mu, sigma: jnp.exp(_normal(k, s, mu, sigma)),
    kr.UniformRV: lambda k, s, lo, hi: lo + (hi - lo) * jr.uniform(k, s, F64),
    kr.ExponentialRV: lambda k, s, scale: scale * jr.exponential(k, s, F64),
    kr.GammaRV: lambda k, s, shape, scale: scale * jr.gamma(k, shape, s, F64),
    kr.BetaRV: lambda k, s, a, b: jr.beta(k, a, b, s, F64),
    kr.InverseGammaRV: lambda k, s, alpha, beta: beta / jr.gamma(k, alpha, s, F64),
    kr.StudentTRV: lambda k, s, nu, mu, sigma: mu + sigma * jr.t(k, nu, s, F64),
    kr.HalfStudentTRV: lambda k, s, nu, sigma: jnp.abs(sigma * jr.t(k, nu, s, F64)),
    kr.CauchyRV: lambda k, s, alpha, beta: alpha + beta * jr.cauchy(k, s, F64),
    kr.HalfCauchyRV: lambda k, s, beta: jnp.abs(beta * jr.cauchy(k, s, F64)),
    kr.LaplaceRV: lambda k, s, mu, b: mu + b * jr.laplace(k, s, F64),
    kr.LogisticRV: lambda k, s, mu, scale: mu + scale * jr.logistic(k, s, F64),
    kr.WeibullRV: lambda k, s, alpha, beta: beta * jr.exponential(k, s, F64) ** (1.0 / alpha),
    kr.TruncatedNormalRV: _truncated_normal,
    kr.VonMisesRV: _vonmises,
    kr.BernoulliRV: lambda k, s, p: jr.bernoulli(k, p, s),
    kr.BinomialRV: lambda k, s, n, p: jr.binomial(k, n, p, s, F64),
    kr.PoissonRV: lambda k, s, mu: jr.poisson(k, mu, s),
    kr.NegativeBinomialRV: _negative_binomial,
    kr.GeometricRV: _geometric,
    kr.CategoricalRV: lambda k, s, p: jr.categorical(k, jnp.log(p), axis=-1, shape=s),
    kr.HyperGeometricRV: _hypergeometric,
    kr.DirichletRV: _dirichlet,
    kr.MultinomialRV: lambda k, s, n, p: jr.multinomial(
        k, n, p / p.sum(-1, keepdims=True), shape=s
    ),
    kr.MultivariateNormalRV: _multivariate_normal,
}


def _valid(op: RandomVariable, params: list[Any]) -> Any:
    """Return where the (scalar) parameters meet the op's constraints (NumPy source)."""
    values = {
        name: p for name, p, dims in zip(op.params, params, op.inputs_sig, strict=True) if not dims
    }
    ok: Any = True
    for expr, _ in op.constraints:
        ok = ok & eval(expr, {"np": jnp, "__builtins__": {}}, values)  # noqa: S307
    return ok


def _batch_shape(op: RandomVariable, batch: int, size: Any, params: list[Any]) -> tuple[int, ...]:
    if len(size):
        return tuple(int(n) for n in np.asarray(size))
    return tuple(np.broadcast_shapes(*(jnp.shape(p)[:batch] for p in params))) if batch else ()


def rv_implementation(op: RandomVariable, node: Apply, sampler: Sampler) -> JaxImpl:
    """Return the JAX function of ``node``: ``(key, size, *params) -> (next key, draw)``."""
    batch = op.batch_ndim(node)
    dtype = node.outputs[1].type.dtype  # type: ignore[attr-defined]
    is_float = np.dtype(dtype).kind == "f"

    def draw(key: Any, size: Any, *params: Any) -> tuple[Any, Any]:
        shape = _batch_shape(op, batch, size, list(params))
        full = [jnp.broadcast_to(jnp.asarray(p), shape + jnp.shape(p)[batch:]) for p in params]
        next_key, sub = jr.split(key)
        value = sampler(sub, shape, *full)
        if is_float and op.constraints:
            valid = _valid(op, full)
            if op.core_ndim:
                valid = jnp.expand_dims(valid, tuple(range(-op.core_ndim, 0)))
            value = jnp.where(valid, value, jnp.nan)
        return next_key, jnp.asarray(value).astype(dtype)

    return static_inputs(draw, 1)


def register_sampler(cls: type[RandomVariable], sampler: Sampler) -> None:
    """Register ``sampler`` as the JAX draw of the random variables of ``cls``."""

    def jax_funcify_rv(op: RandomVariable, node: Apply) -> JaxImpl:
        return rv_implementation(op, node, sampler)

    jax_funcify_rv.__name__ = f"jax_funcify_{cls.__name__}"
    jax_funcify.register(cls)(jax_funcify_rv)


for _cls, _sampler in _SAMPLERS.items():
    register_sampler(_cls, _sampler)
