"""NUTS from numpyro and blackjax over the JAX path of the compiled-model protocol.

Both engines run JAX code end to end: they need the model's pure, traceable
``logp_jax(x)`` and ``expand_jax(x)`` over the flat float64 vector (DESIGN.md, "JAX
path"). Everything runs under JAX's scoped float64 switch (``jax.enable_x64``), so the
process-wide setting is left as it was.

Each engine's whole run of a chain (initialization, warm-up, draws) is one jitted
program, compiled once for all chains and kept by JAX's persistent cache. Chains run in
parallel threads (``chain_method="parallel"``, the default: XLA runs without the GIL),
one after the other (``"sequential"``), or vectorized (``"vectorized"``, ``jax.vmap``:
one call whose chains advance in lock-step; on a CPU it traces and runs several times
slower, measured on eight schools). XLA's compile time is measured through
``jax.monitoring``'s compile-duration events and reported apart from the sampling
time. Statistics are renamed to kiln's vocabulary; ``lp`` is the log-density (numpyro
reports the potential energy, its negative).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from kiln_samplers._jax_internals import COMPILE_EVENT, compile_event_known
from kiln_samplers._sample import Trace, chain_seeds

CHAIN_METHODS = ("vectorized", "parallel", "sequential")
_STAT_DTYPES = {"diverging": bool, "n_steps": np.int64, "tree_depth": np.int64}


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
    """Sums the seconds XLA spends compiling while it is active (JAX monitoring events).

    ``seconds`` is None where the event's name is not known to be JAX's
    (:mod:`kiln_samplers._jax_internals`).
    """

    def __init__(self) -> None:
        self.seconds: float | None = 0.0 if compile_event_known() else None
        self._active = False

    def __call__(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if self._active and event == COMPILE_EVENT and self.seconds is not None:
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
    method = out.get("chain_method", "parallel")
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


def _map_chains(fn: Callable[..., Any], method: str, cores: int | None, *args: Any) -> Any:
    """Run ``fn`` over the leading (chain) axis of ``args`` as ``method`` says.

    ``"parallel"`` and ``"sequential"`` compile ``fn`` for one chain once and call it per
    chain (in ``cores`` threads, or one after the other); ``"vectorized"`` compiles
    ``jax.vmap(fn)``: one call for all chains, whose trajectories then advance in
    lock-step (on a CPU it traces and runs several times slower than a chain at a time).
    """
    import jax

    if method == "vectorized":
        return jax.block_until_ready(jax.jit(jax.vmap(fn))(*args))
    n = int(args[0].shape[0])
    compiled = jax.jit(fn).lower(*(a[0] for a in args)).compile()

    def chain(i: int) -> Any:
        return jax.block_until_ready(compiled(*(a[i] for a in args)))

    if method == "parallel" and n > 1:
        workers = min(n, cores or min(4, os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            outs = list(pool.map(chain, range(n)))
    else:
        outs = [chain(i) for i in range(n)]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


def _run_chains(
    model: JaxCompiledModel,
    one_chain: Callable[[Any, Any], Any],
    method: str,
    cores: int | None,
    chains: int,
    tune: int,
    random_seed: Any,
    init: np.ndarray,
) -> tuple[Trace, float | None]:
    """Run ``one_chain(key, x0) -> (draws, {stat: per draw})`` for every chain.

    Returns the trace (stats in kiln's dtypes; a missing ``tree_depth`` derived from
    ``n_steps``) and XLA's compile seconds, which the sampling time leaves out (None:
    not known on this JAX).
    """
    import jax

    clock = _CompileClock()
    with jax.enable_x64(True), clock.running():
        keys = jax.random.split(jax.random.key(_key_seed(random_seed)), chains)
        start = time.perf_counter()
        xs, raw = _map_chains(one_chain, method, cores, keys, jax.numpy.asarray(init))
        elapsed = time.perf_counter() - start
        xs = np.asarray(xs)
        posterior = _posterior(model, xs)
    stats = {k: np.asarray(v).astype(_STAT_DTYPES.get(k, np.float64)) for k, v in raw.items()}
    stats.setdefault("tree_depth", _tree_depth(stats["n_steps"]))
    trace = Trace(posterior, stats, xs, max(elapsed - (clock.seconds or 0.0), 0.0), tune, False)
    return trace, clock.seconds


def sample_numpyro(
    model: JaxCompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    target_accept: float = 0.8,
    progressbar: bool = True,
    options: Mapping[str, Any] | None = None,
) -> tuple[Trace, float | None]:
    """Run numpyro's NUTS on ``model.logp_jax``; return the draws and XLA's compile time.

    numpyro's own kernels (``numpyro.infer.hmc.hmc``: its NUTS, windowed mass-matrix
    and dual-averaging step-size adaptation) run inside one jitted program per chain
    method (initialization, warm-up and draws of every chain), which JAX's persistent
    cache keeps: numpyro's ``MCMC`` driver would run the initialization op by op and
    compile each operation separately. ``progressbar`` is accepted for symmetry (the
    program runs as one XLA call). ``options`` (``nuts_sampler_kwargs``):
    ``chain_method`` (``"parallel"`` default, ``"sequential"``, ``"vectorized"``),
    ``max_tree_depth`` / ``max_treedepth``, ``dense_mass``, ``step_size`` (the initial
    one).
    """
    import jax
    from numpyro.infer.hmc import hmc

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

    init_kernel, sample_kernel = hmc(potential_fn=potential, algo="NUTS")

    def one_chain(key: Any, x0: Any) -> Any:
        state = init_kernel(
            x0,
            num_warmup=tune,
            step_size=float(opts.get("step_size", 1.0)),
            dense_mass=bool(opts.get("dense_mass", False)),
            target_accept_prob=target_accept,
            max_tree_depth=max_depth,
            rng_key=key,
        )
        state = jax.lax.fori_loop(0, tune, lambda _, s: sample_kernel(s), state)

        def body(s: Any, _: Any) -> Any:
            s = sample_kernel(s)
            stats = {
                "diverging": s.diverging,
                "energy": s.energy,
                "n_steps": s.num_steps,
                "step_size": s.adapt_state.step_size,
                "lp": -s.potential_energy,
                "acceptance_rate": s.accept_prob,
            }
            return s, (s.z, stats)

        _, out = jax.lax.scan(body, state, None, length=draws)
        return out

    return _run_chains(model, one_chain, method, cores, chains, tune, random_seed, init)


def sample_blackjax(
    model: JaxCompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    target_accept: float = 0.8,
    progressbar: bool = True,
    options: Mapping[str, Any] | None = None,
) -> tuple[Trace, float | None]:
    """Run blackjax's NUTS after its window adaptation; return the draws and compile time.

    ``options`` (``nuts_sampler_kwargs``): ``chain_method`` (``"parallel"`` default,
    ``"sequential"``, ``"vectorized"``), ``max_treedepth`` / ``max_num_doublings``,
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
            stats = {
                "diverging": info.is_divergent,
                "energy": info.energy,
                "n_steps": info.num_integration_steps,
                "tree_depth": info.num_trajectory_expansions,
                "step_size": params["step_size"],
                "lp": s.logdensity,
                "acceptance_rate": info.acceptance_rate,
            }
            return s, (s.position, stats)

        _, out = jax.lax.scan(body, state, jax.random.split(draw_key, draws))
        return out

    return _run_chains(model, one_chain, method, cores, chains, tune, random_seed, init)
