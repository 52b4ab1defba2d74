"""Random variables on torch: generators mapped to ``torch.Generator``, draws by torch.

The RNG mapping. A graph's generators are NumPy ``Generator`` values (shared variables
made by ``kiln_random.rng(seed)``). At each call the linker turns each generator input
into a ``torch.Generator`` on the call's device (:func:`torch_generator`): it copies the
NumPy generator, draws one 63-bit integer from the copy and seeds the torch generator
with it; the advanced copy is what the function returns as the generator's next state,
so the update a compiled function applies makes the next call draw new values, and the
same seed gives the same draws. Inside the program the torch generator is stateful:
each draw advances it, so the chained draws of one function are independent. The draws
are torch's streams, not NumPy's: they agree with the VM in distribution, not value.

Sizes follow NumPy as on the VM: a draw has the batch shape ``size`` (or the broadcast
of the parameters' batch shapes) followed by its core shape. A parameter that breaks a
distribution's constraint raises ``KilnValueError``, as on the VM. Gamma draws use
Marsaglia and Tsang's method (torch's own gamma sampler takes no generator), in log
space for shapes below one; a random variable with no torch sampler here draws with its
NumPy ``rng_fn`` from a NumPy generator seeded by the torch one (one warning).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.special as ts

import kiln_random as kr
from kiln_graph import Apply, KilnValueError
from kiln_random import RandomVariable, copy_generator
from kiln_torch._convert import DTYPES
from kiln_torch._funcify import TorchImpl, torch_funcify
from kiln_torch.scalar import HostComputationWarning
from kiln_torch.shape import host_inputs, ints

#: ``sampler(gen, batch_shape, *params) -> draw``: params broadcast to the batch shape
#: followed by their core shapes (float64 tensors); the draw has the batch shape
#: followed by its core one.
Sampler = Callable[..., Any]
F64 = torch.float64


def torch_generator(
    generator: np.random.Generator, device: torch.device
) -> tuple[torch.Generator, np.random.Generator]:
    """Return a ``torch.Generator`` seeded from ``generator`` and the generator advanced.

    ``generator`` is not changed: a copy draws one 63-bit integer, the torch seed.
    """
    advanced = copy_generator(generator)
    seed = int(advanced.integers(0, 2**63))
    return torch.Generator(device=device).manual_seed(seed), advanced


def _normal(g: Any, shape: tuple[int, ...]) -> Any:
    return torch.randn(shape, generator=g, dtype=F64, device=g.device)


def _uniform(g: Any, shape: tuple[int, ...]) -> Any:
    """Uniform draws in (0, 1]: their logarithm is finite."""
    return 1.0 - torch.rand(shape, generator=g, dtype=F64, device=g.device)


def _exponential(g: Any, shape: tuple[int, ...]) -> Any:
    return -torch.log(_uniform(g, shape))


def log_gamma(g: Any, shape: tuple[int, ...], alpha: Any) -> Any:
    """Log of standard Gamma(alpha) draws (Marsaglia-Tsang; boosted below alpha = 1)."""
    alpha = torch.broadcast_to(alpha, shape)
    small = alpha < 1.0
    a = torch.where(small, alpha + 1.0, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    out = torch.full(shape, math.nan, dtype=F64, device=g.device)
    todo = torch.isfinite(a) & (a > 0)
    while bool(todo.any()):
        x = _normal(g, shape)
        v = (1.0 + c * x) ** 3
        log_u = torch.log(_uniform(g, shape))
        log_v = torch.log(torch.clamp(v, min=1e-300))
        accept = todo & (v > 0) & (log_u < 0.5 * x * x + d - d * v + d * log_v)
        out = torch.where(accept, torch.log(d) + log_v, out)
        todo = todo & ~accept
    boost = torch.log(_uniform(g, shape)) / alpha
    return torch.where(small, out + boost, out)


def _gamma(g: Any, shape: tuple[int, ...], alpha: Any) -> Any:
    return torch.exp(log_gamma(g, shape, alpha))


def _truncated_normal(g: Any, s: tuple[int, ...], mu: Any, sigma: Any, lo: Any, hi: Any) -> Any:
    """Inverse-CDF draws in log space, in the lower tail (the bounds flipped if needed)."""
    a, b = (lo - mu) / sigma, (hi - mu) / sigma
    flip = a + b > 0
    a, b = torch.where(flip, -b, a), torch.where(flip, -a, b)
    log_pa, log_pb = ts.log_ndtr(a), ts.log_ndtr(b)
    u = torch.rand(s, generator=g, dtype=F64, device=g.device)
    log_q = log_pb + torch.log1p(u * torch.expm1(log_pa - log_pb))
    x = torch.where(log_q > -700.0, ts.ndtri(torch.exp(torch.clamp(log_q, min=-700.0))), 0.0)
    far = log_q <= -700.0
    z = -torch.sqrt(-2.0 * log_q)
    for _ in range(8):  # Newton on log_ndtr(z) = log_q, from the asymptote
        log_pdf = -0.5 * z * z - 0.5 * math.log(2.0 * math.pi)
        z = z - (ts.log_ndtr(z) - log_q) / torch.exp(log_pdf - ts.log_ndtr(z))
    x = torch.clamp(torch.where(far, z, x), a, b)
    return mu + sigma * torch.where(flip, -x, x)


def _student_t(g: Any, s: tuple[int, ...], nu: Any) -> Any:
    chi2 = 2.0 * _gamma(g, s, nu / 2.0)
    return _normal(g, s) / torch.sqrt(chi2 / nu)


def _beta(g: Any, s: tuple[int, ...], a: Any, b: Any) -> Any:
    la, lb = log_gamma(g, s, a), log_gamma(g, s, b)
    return torch.exp(la - torch.logaddexp(la, lb))


def _poisson(g: Any, s: tuple[int, ...], mu: Any) -> Any:
    return torch.poisson(torch.broadcast_to(mu, s).contiguous(), generator=g)


def _binomial(g: Any, s: tuple[int, ...], n: Any, p: Any) -> Any:
    n = torch.broadcast_to(n.to(F64), s).contiguous()
    p = torch.broadcast_to(p.to(F64), s).contiguous()
    return torch.binomial(n, p, generator=g)


def _negative_binomial(g: Any, s: tuple[int, ...], n: Any, p: Any) -> Any:
    lam = _gamma(g, s, n) * (1.0 - p) / p
    return _poisson(g, s, lam)


def _geometric(g: Any, s: tuple[int, ...], p: Any) -> Any:
    return 1.0 + torch.floor(torch.log(_uniform(g, s)) / torch.log1p(-p))


def _categorical(g: Any, s: tuple[int, ...], p: Any) -> Any:
    cdf = torch.cumsum(p, dim=-1)
    u = torch.rand(s, generator=g, dtype=F64, device=g.device) * cdf[..., -1]
    k = (cdf <= u[..., None]).sum(-1)
    return torch.clamp(k, max=p.shape[-1] - 1)


def _multinomial(g: Any, s: tuple[int, ...], n: Any, p: Any) -> Any:
    """Draw the counts by conditional binomials, one category after another."""
    p = p / p.sum(-1, keepdim=True)
    left = torch.broadcast_to(n.to(F64), s).clone()
    rest = torch.ones(s, dtype=F64, device=g.device)
    counts = []
    for j in range(p.shape[-1] - 1):
        pj = p[..., j]
        q = torch.clamp(torch.where(rest > 0, pj / rest, 0.0), 0.0, 1.0)
        x = torch.binomial(left.contiguous(), q.contiguous(), generator=g)
        counts.append(x)
        left = left - x
        rest = rest - pj
    counts.append(left)
    return torch.stack(counts, dim=-1)


def _dirichlet(g: Any, s: tuple[int, ...], alpha: Any) -> Any:
    # Log-space Gammas: tiny concentrations still give a point of the simplex.
    return torch.softmax(log_gamma(g, tuple(alpha.shape), alpha), dim=-1)


def _multivariate_normal(g: Any, s: tuple[int, ...], mu: Any, cov: Any) -> Any:
    chol = torch.linalg.cholesky(cov)
    z = _normal(g, tuple(mu.shape))
    return mu + torch.einsum("...ij,...j->...i", chol, z)


def _vonmises(g: Any, s: tuple[int, ...], mu: Any, kappa: Any) -> Any:
    """Best and Fisher's rejection sampler, every element redrawn until it accepts."""
    r = 0.5 / kappa + torch.sqrt(1.0 + (0.5 / kappa) ** 2)
    w = torch.zeros(s, dtype=F64, device=g.device)
    todo = torch.ones(s, dtype=torch.bool, device=g.device)
    while bool(todo.any()):
        z = torch.cos(math.pi * torch.rand(s, generator=g, dtype=F64, device=g.device))
        w_new = (1.0 + r * z) / (r + z)
        c = kappa * (r - w_new)
        u = _uniform(g, s)
        ok = todo & ((c * (2.0 - c) > u) | (torch.log(c / u) + 1.0 >= c))
        w = torch.where(ok, w_new, w)
        todo = todo & ~ok
    theta = torch.arccos(torch.clamp(w, -1.0, 1.0))
    sign = torch.rand(s, generator=g, dtype=F64, device=g.device) < 0.5
    theta = torch.where(sign, -theta, theta)
    x = mu + torch.where(kappa > 1e6, _normal(g, s) / torch.sqrt(kappa), theta)
    return x - 2.0 * math.pi * torch.floor((x + math.pi) / (2.0 * math.pi))


def _hypergeometric(g: Any, s: tuple[int, ...], n_items: Any, k: Any, n: Any) -> Any:
    """One urn draw at a time for every element, up to the largest ``n``."""
    drawn = torch.zeros(s, dtype=F64, device=g.device)
    good, total = k.to(F64).clone(), n_items.to(F64).clone()
    steps = int(n.max().item()) if n.numel() else 0
    for i in range(steps):
        u = torch.rand(s, generator=g, dtype=F64, device=g.device)
        active = i < n
        hit = active & (u * total < good)
        drawn, good, total = drawn + hit, good - hit.to(F64), total - active.to(F64)
    return drawn


#: The torch sampler of each random variable class (registered with ``torch_funcify``).
_SAMPLERS: dict[type[RandomVariable], Sampler] = {
    kr.NormalRV: lambda g, s, mu, sigma: mu + sigma * _normal(g, s),
    kr.HalfNormalRV: lambda g, s, sigma: torch.abs(sigma * _normal(g, s)),
    kr.LogNormalRV: lambda g, s, mu, sigma: torch.exp(mu + sigma * _normal(g, s)),
    kr.UniformRV: lambda g, s, lo, hi: (
        lo + (hi - lo) * torch.rand(s, generator=g, dtype=F64, device=g.device)
    ),
    kr.ExponentialRV: lambda g, s, scale: scale * _exponential(g, s),
    kr.GammaRV: lambda g, s, shape, scale: scale * _gamma(g, s, shape),
    kr.BetaRV: _beta,
    kr.InverseGammaRV: lambda g, s, alpha, beta: beta * torch.exp(-log_gamma(g, s, alpha)),
    kr.StudentTRV: lambda g, s, nu, mu, sigma: mu + sigma * _student_t(g, s, nu),
    kr.HalfStudentTRV: lambda g, s, nu, sigma: torch.abs(sigma * _student_t(g, s, nu)),
    kr.CauchyRV: lambda g, s, alpha, beta: (
        alpha + beta * torch.tan(math.pi * (_uniform(g, s) - 0.5))
    ),
    kr.HalfCauchyRV: lambda g, s, beta: torch.abs(
        beta * torch.tan(math.pi * (_uniform(g, s) - 0.5))
    ),
    kr.LaplaceRV: lambda g, s, mu, b: mu + b * (_exponential(g, s) - _exponential(g, s)),
    kr.LogisticRV: lambda g, s, mu, scale: mu + scale * ts.logit(_uniform(g, s)),
    kr.WeibullRV: lambda g, s, alpha, beta: beta * _exponential(g, s) ** (1.0 / alpha),
    kr.TruncatedNormalRV: _truncated_normal,
    kr.VonMisesRV: _vonmises,
    kr.BernoulliRV: lambda g, s, p: torch.rand(s, generator=g, dtype=F64, device=g.device) < p,
    kr.BinomialRV: _binomial,
    kr.PoissonRV: _poisson,
    kr.NegativeBinomialRV: _negative_binomial,
    kr.GeometricRV: _geometric,
    kr.CategoricalRV: _categorical,
    kr.HyperGeometricRV: _hypergeometric,
    kr.DirichletRV: _dirichlet,
    kr.MultinomialRV: _multinomial,
    kr.MultivariateNormalRV: _multivariate_normal,
}


def _check(op: RandomVariable, params: list[Any]) -> None:
    """Raise as the VM does when the parameters break one of the op's constraints."""
    values = dict(zip(op.params, params, strict=True))
    for expr, description in op.constraints:
        ok = eval(expr, {"__builtins__": {}}, values)  # noqa: S307
        if not bool(torch.all(torch.as_tensor(ok))):
            raise KilnValueError(f"{op.name}: {description} (invalid parameter values)")


def _batch_shape(op: RandomVariable, batch: int, size: Any, params: list[Any]) -> tuple[int, ...]:
    given = size.numel() if isinstance(size, torch.Tensor) else np.size(size)
    if given:
        return ints(size)
    if not batch:
        return ()
    return tuple(torch.broadcast_shapes(*(tuple(p.shape[:batch]) for p in params)))


def rv_implementation(op: RandomVariable, node: Apply, sampler: Sampler) -> TorchImpl:
    """Return the torch function of ``node``: ``(gen, size, *params) -> (gen, draw)``."""
    batch = op.batch_ndim(node)
    dtype = DTYPES[node.outputs[1].type.dtype]  # type: ignore[attr-defined]
    param_float = [np.dtype(v.type.dtype).kind == "f" for v in node.inputs[2:]]  # type: ignore[attr-defined]

    def draw(gen: Any, size: Any, *params: Any) -> tuple[Any, Any]:
        shape = _batch_shape(op, batch, size, list(params))
        full = [
            torch.broadcast_to(p.to(F64) if f else p, shape + tuple(p.shape[batch:]))
            for p, f in zip(params, param_float, strict=True)
        ]
        _check(op, full)
        value = sampler(gen, shape, *[p.to(F64) for p in full])
        return gen, value.to(dtype)

    return host_inputs(draw, 1)


def register_sampler(cls: type[RandomVariable], sampler: Sampler) -> None:
    """Register ``sampler`` as the torch draw of the random variables of ``cls``."""

    def torch_funcify_rv(op: RandomVariable, node: Apply) -> TorchImpl:
        return rv_implementation(op, node, sampler)

    torch_funcify_rv.__name__ = f"torch_funcify_{cls.__name__}"
    torch_funcify.register(cls)(torch_funcify_rv)


for _cls, _sampler in _SAMPLERS.items():
    register_sampler(_cls, _sampler)

_warned: set[type] = set()


@torch_funcify.register(RandomVariable)
def torch_funcify_RandomVariable(op: RandomVariable, node: Apply) -> TorchImpl:  # noqa: N802
    """Draw with the op's NumPy ``rng_fn``, from a NumPy generator seeded by the torch one."""
    if type(op) not in _warned:
        _warned.add(type(op))
        warnings.warn(
            f"kiln_torch: no torch sampler for {op.name} ({type(op).__name__}); it draws "
            "with its NumPy implementation on the host, seeded from the torch generator",
            HostComputationWarning,
            stacklevel=2,
        )
    dtype = node.outputs[1].type.dtype  # type: ignore[attr-defined]

    def draw(gen: Any, size: Any, *params: Any) -> tuple[Any, Any]:
        seed = int(torch.randint(0, 2**62, (), generator=gen, device=gen.device).item())
        arrays = [p.detach().cpu().numpy() for p in params]
        results: list[Any] = [None, None]
        host_size = np.asarray(size.cpu().numpy() if isinstance(size, torch.Tensor) else size)
        op.perform(node, [np.random.default_rng(seed), host_size, *arrays], results)
        value = torch.from_numpy(np.array(results[1], dtype=dtype)).to(gen.device)
        return gen, value

    return host_inputs(draw, 1)
