"""NUTS from numpyro and blackjax over the JAX path of the compiled-model protocol.

Both engines run JAX code end to end: they need the model's pure, traceable
``logp_jax(x)`` and ``expand_jax(x)`` over the flat float64 vector (DESIGN.md, "JAX
path"). Everything runs under JAX's scoped float64 switch (``jax.enable_x64``), so the
process-wide setting is left as it was.

Chains run vectorized (``jax.vmap``, the default: one compiled program for every
chain), in parallel over devices (``jax.pmap``; needs one device per chain, e.g.
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` on a CPU) or sequentially,
chosen by ``chain_method``. XLA's compile time is measured through
``jax.monitoring``'s compile-duration events and reported apart from the sampling
time. Statistics are renamed to kiln's vocabulary; ``lp`` is the log-density (numpyro
reports the potential energy, its negative).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from kiln_samplers._sample import Trace, chain_seeds

CHAIN_METHODS = ("vectorized", "parallel", "sequential")


class JaxCompiledModel(Protocol):
    """The JAX path of the compiled-model protocol."""

    ndim: int
    out_names: list[str]

    def logp_jax(self, x: Any) -> Any:
        """Return the log-density at ``x`` as a JAX scalar (pure, traceable)."""
        ...

    def expand_jax(self, x: Any) -> dict[str, Any]:
        """Return the constrained values and deterministics at ``x`` (pure, traceable)."""
        ...

    def initial_point(self, seed: Any = None) -> np.ndarray:
        """Return a starting point."""
        ...


class _CompileClock:
    """Sums the seconds XLA spends compiling while it is active (JAX monitoring events)."""

    _EVENTS = ("/jax/core/compile/backend_compile_duration",)

    def __init__(self) -> None:
        self.seconds = 0.0
        self._active = False

    def __call__(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if self._active and event in self._EVENTS:
            self.seconds += duration_secs

    @contextlib.contextmanager
    def running(self) -> Iterator[_CompileClock]:
        import jax.monitoring

        self._active = True
        jax.monitoring.register_event_duration_secs_listener(self)
        try:
            yield self
        finally:
            self._active = False
            with contextlib.suppress(Exception):
                jax.monitoring.unregister_event_duration_listener(self)


def _check_options(options: Mapping[str, Any], allowed: set[str], engine: str) -> dict[str, Any]:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"nuts_sampler_kwargs: {engine} does not take {unknown}; accepted: {sorted(allowed)}"
        )
    out = dict(options)
    method = out.get("chain_method", "vectorized")
    if method not in CHAIN_METHODS:
        raise ValueError(
            f"nuts_sampler_kwargs: chain_method must be one of {list(CHAIN_METHODS)}, "
            f"got {method!r}"
        )
    out["chain_method"] = method
    return out


def _initial_points(model: JaxCompiledModel, random_seed: Any, chains: int) -> np.ndarray:
    seeds = chain_seeds(random_seed, chains)
    return np.stack([model.initial_point(s) for s in seeds])


def _key_seed(random_seed: Any) -> int:
    entropy = random_seed if not isinstance(random_seed, list | tuple) else list(random_seed)
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0])


def _tree_depth(n_steps: np.ndarray) -> np.ndarray:
    """Stan's tree depth from a trajectory's leapfrog steps (2**depth - 1 when full)."""
    return np.ceil(np.log2(np.asarray(n_steps, dtype=np.float64) + 1.0)).astype(np.int64)


def _posterior(model: JaxCompiledModel, unconstrained: np.ndarray) -> dict[str, np.ndarray]:
    import jax

    chains, draws, ndim = unconstrained.shape
    flat = unconstrained.reshape(chains * draws, ndim)
    values = jax.jit(jax.vmap(model.expand_jax))(flat)
    return {
        name: np.asarray(values[name]).reshape(chains, draws, *np.shape(values[name])[1:])
        for name in model.out_names
    }


def _map_chains(fn: Callable[..., Any], method: str, *args: Any) -> Any:
    """Run ``fn`` over the leading (chain) axis of ``args`` as ``method`` says."""
    import jax

    if method == "vectorized":
        return jax.jit(jax.vmap(fn))(*args)
    if method == "parallel":
        n = args[0].shape[0]
        if jax.local_device_count() < n:
            raise ValueError(
                f"nuts_sampler_kwargs: chain_method='parallel' needs one device per chain "
                f"({n}), JAX has {jax.local_device_count()}; use 'vectorized' or set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before importing jax"
            )
        return jax.pmap(fn)(*args)
    compiled = jax.jit(fn)
    outs = [compiled(*(a[i] for a in args)) for i in range(args[0].shape[0])]
    return jax.tree.map(lambda *xs: np.stack(xs), *outs)


def sample_numpyro(
    model: JaxCompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    random_seed: Any = None,
    target_accept: float = 0.8,
    progressbar: bool = True,
    options: Mapping[str, Any] | None = None,
) -> tuple[Trace, float]:
    """Run numpyro's NUTS on ``model.logp_jax``; return the draws and XLA's compile time.

    ``options`` (``nuts_sampler_kwargs``): ``chain_method`` (``"vectorized"`` default,
    ``"parallel"``, ``"sequential"``), ``max_tree_depth`` / ``max_treedepth``,
    ``dense_mass``, ``step_size``.
    """
    import jax
    from numpyro.infer import MCMC, NUTS

    opts = _check_options(
        options or {},
        {"chain_method", "max_tree_depth", "max_treedepth", "dense_mass", "step_size"},
        "numpyro",
    )
    max_depth = int(opts.pop("max_treedepth", opts.pop("max_tree_depth", 10)))
    method = opts.pop("chain_method")
    init = _initial_points(model, random_seed, chains)

    def potential(x: Any) -> Any:
        return -model.logp_jax(x)

    clock = _CompileClock()
    with jax.enable_x64(True), clock.running():
        kernel = NUTS(
            potential_fn=potential,
            target_accept_prob=target_accept,
            max_tree_depth=max_depth,
            **opts,
        )
        mcmc = MCMC(
            kernel,
            num_warmup=tune,
            num_samples=draws,
            num_chains=chains,
            chain_method=method,
            progress_bar=progressbar and method != "vectorized",
        )
        start = time.perf_counter()
        mcmc.run(
            jax.random.key(_key_seed(random_seed)),
            init_params=init if chains > 1 else init[0],
            extra_fields=(
                "diverging",
                "energy",
                "num_steps",
                "accept_prob",
                "potential_energy",
                "adapt_state.step_size",
            ),
        )
        samples = np.asarray(mcmc.get_samples(group_by_chain=True)).reshape(chains, draws, -1)
        extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
        elapsed = time.perf_counter() - start
        posterior = _posterior(model, samples)
    n_steps = extra["num_steps"].astype(np.int64)
    stats = {
        "diverging": extra["diverging"].astype(bool),
        "energy": extra["energy"].astype(np.float64),
        "n_steps": n_steps,
        "tree_depth": _tree_depth(n_steps),
        "step_size": extra["adapt_state.step_size"].astype(np.float64),
        "lp": -extra["potential_energy"].astype(np.float64),
        "acceptance_rate": extra["accept_prob"].astype(np.float64),
    }
    trace = Trace(posterior, stats, samples, max(elapsed - clock.seconds, 0.0), tune, False)
    return trace, clock.seconds


def sample_blackjax(
    model: JaxCompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    random_seed: Any = None,
    target_accept: float = 0.8,
    progressbar: bool = True,
    options: Mapping[str, Any] | None = None,
) -> tuple[Trace, float]:
    """Run blackjax's NUTS after its window adaptation; return the draws and compile time.

    ``options`` (``nuts_sampler_kwargs``): ``chain_method`` (``"vectorized"`` default,
    ``"parallel"``, ``"sequential"``), ``max_treedepth`` / ``max_num_doublings``,
    ``dense_mass``. ``progressbar`` is accepted for symmetry; blackjax shows none.
    """
    import blackjax
    import jax

    opts = _check_options(
        options or {},
        {"chain_method", "max_treedepth", "max_num_doublings", "dense_mass"},
        "blackjax",
    )
    max_depth = int(opts.pop("max_treedepth", opts.pop("max_num_doublings", 10)))
    method = opts.pop("chain_method")
    diagonal = not bool(opts.pop("dense_mass", False))
    init = _initial_points(model, random_seed, chains)

    def one_chain(key: Any, x0: Any) -> Any:
        warm_key, draw_key = jax.random.split(key)
        warmup = blackjax.window_adaptation(
            blackjax.nuts,
            model.logp_jax,
            is_mass_matrix_diagonal=diagonal,
            target_acceptance_rate=target_accept,
            max_num_doublings=max_depth,
        )
        (state, params), _ = warmup.run(warm_key, x0, num_steps=tune)
        step = blackjax.nuts(model.logp_jax, **params).step  # params hold max_num_doublings

        def body(s: Any, k: Any) -> Any:
            s, info = step(k, s)
            return s, (s.position, s.logdensity, info)

        _, (xs, lps, info) = jax.lax.scan(body, state, jax.random.split(draw_key, draws))
        return (
            xs,
            lps,
            info.is_divergent,
            info.energy,
            info.num_integration_steps,
            info.num_trajectory_expansions,
            info.acceptance_rate,
            jax.numpy.broadcast_to(params["step_size"], (draws,)),
        )

    clock = _CompileClock()
    with jax.enable_x64(True), clock.running():
        keys = jax.random.split(jax.random.key(_key_seed(random_seed)), chains)
        start = time.perf_counter()
        out = _map_chains(one_chain, method, keys, jax.numpy.asarray(init))
        out = jax.block_until_ready(out)
        elapsed = time.perf_counter() - start
        xs, lps, div, energy, n_steps, depth, accept, step_size = (np.asarray(o) for o in out)
        posterior = _posterior(model, xs)
    stats = {
        "diverging": div.astype(bool),
        "energy": energy.astype(np.float64),
        "n_steps": n_steps.astype(np.int64),
        "tree_depth": depth.astype(np.int64),
        "step_size": step_size.astype(np.float64),
        "lp": lps.astype(np.float64),
        "acceptance_rate": accept.astype(np.float64),
    }
    trace = Trace(posterior, stats, xs, max(elapsed - clock.seconds, 0.0), tune, False)
    return trace, clock.seconds
