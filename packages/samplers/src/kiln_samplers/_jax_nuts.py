"""NUTS from numpyro and blackjax over the JAX path of the compiled-model protocol.

Both engines run JAX code end to end: they need the model's pure, traceable
``logp_jax(x)`` and ``expand_jax(x)`` over the flat float64 vector (DESIGN.md, "JAX
path"). Everything runs under JAX's scoped float64 switch (``jax.enable_x64``), so the
process-wide setting is left as it was.

A chain is three jitted programs, each compiled once for all chains and kept by JAX's
persistent cache (:class:`_Engine`): its start (initialization), a run of ``n`` warm-up
transitions and a run of ``n`` kept transitions from draw ``i`` on (``n`` and ``i``
are arguments, so one program serves every chunk). Python calls them in chunks of about
:data:`~kiln_samplers._nuts.PIECE_S` (sized from the last chunk's time per transition)
and looks at the stop flag between chunks: Ctrl-C returns the draws made so far, cut to
the shortest chain, with one :class:`~kiln_samplers.SamplingInterrupted` warning (as
kiln's own NUTS). The chunks carry the sampler's state and read the keys split before
the draws, so the draws are those of one uninterrupted program with the same seed.
blackjax's window adaptation offers only a whole run; its steps are rebuilt from its
public parts in :mod:`kiln_samplers._blackjax_warmup`, with the state and parameters
of that run.

Chains run in parallel threads (``chain_method="parallel"``, the default: XLA runs
without the GIL), one after the other (``"sequential"``), or vectorized
(``"vectorized"``, ``jax.vmap``: chains advance in lock-step; on a CPU it traces and
runs several times slower, measured on eight schools); the main thread only waits, so
that it sees Ctrl-C at once. XLA's compile time is measured through ``jax.monitoring``'s
compile-duration events and reported apart from the sampling time. Statistics are
renamed to kiln's vocabulary; ``lp`` is the log-density (numpyro reports the potential
energy, its negative); a progress bar per chain (kiln's :class:`Progress`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from kiln_samplers import _nuts_core as core
from kiln_samplers._blackjax_warmup import window_steps
from kiln_samplers._jax_internals import COMPILE_EVENT, compile_event_known
from kiln_samplers._nuts import PIECE_S
from kiln_samplers._progress import Progress
from kiln_samplers._sample import Trace, chain_seeds, warn_interrupted
from kiln_samplers._threads import chain_workers

CHAIN_METHODS = ("vectorized", "parallel", "sequential")
#: The most bytes of draws (and their statistics) one chunk returns per chain: bounds the
#: chunk's length for models of many parameters.
CHUNK_BYTES = 1 << 22
#: The most draws, and bytes of draws and their values, one batch of the expansion holds.
EXPAND_ROWS = 1024
EXPAND_BYTES = 1 << 26
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
    if isinstance(random_seed, np.random.SeedSequence):
        seq = random_seed
    else:
        entropy = random_seed if not isinstance(random_seed, list | tuple) else list(random_seed)
        seq = np.random.SeedSequence(entropy)
    return int(seq.generate_state(1, dtype=np.uint32)[0])


def _tree_depth(n_steps: np.ndarray) -> np.ndarray:
    """Stan's tree depth from a trajectory's leapfrog steps (2**depth - 1 when full)."""
    return np.ceil(np.log2(np.asarray(n_steps, dtype=np.float64) + 1.0)).astype(np.int64)


def _expand_rows(ndim: int, shapes: Mapping[str, Any]) -> int:
    """Return the rows of the fixed-size batches the draws are expanded in."""
    per_row = 8 * (ndim + sum(math.prod(s.shape) for s in shapes.values()))
    return max(1, min(EXPAND_ROWS, EXPAND_BYTES // per_row))


def _posterior(model: JaxCompiledModel, unconstrained: np.ndarray) -> dict[str, np.ndarray]:
    """Return the values and deterministics of every draw (``model.expand_jax``).

    The draws go through one compiled ``vmap(expand_jax)`` in batches of a size fixed by
    the model's shapes (the last batch padded with copies of its last draw), so that any
    number of draws (an interrupted run's) reuses the program compiled before (JAX's
    persistent cache), rather than compiling one for each number of draws.
    """
    import jax

    chains, draws, ndim = unconstrained.shape
    flat = unconstrained.reshape(chains * draws, ndim)
    n = flat.shape[0]
    shapes = jax.eval_shape(model.expand_jax, jax.ShapeDtypeStruct((ndim,), flat.dtype))
    out = {k: np.empty((n, *shapes[k].shape), shapes[k].dtype) for k in model.out_names}
    if n:
        rows = _expand_rows(ndim, shapes)
        expand = jax.jit(jax.vmap(model.expand_jax))
        batch = np.empty((rows, ndim), flat.dtype)
        for start in range(0, n, rows):
            k = min(rows, n - start)
            batch[:k] = flat[start : start + k]
            batch[k:] = flat[start + k - 1]
            values = expand(batch)
            for name, target in out.items():
                target[start : start + k] = np.asarray(values[name])[:k]
    return {k: v.reshape(chains, draws, *v.shape[1:]) for k, v in out.items()}


@dataclasses.dataclass(frozen=True)
class _Engine:
    """One engine's chain as pure, traceable functions.

    ``begin(key, x0) -> (carry, keys)`` initializes a chain and returns the keys its
    draws read (None when the carry holds its key); ``warm(carry) -> carry`` is one
    warm-up transition (None: no warm-up);
    ``draw(carry, keys, i) -> (carry, (x, stats))`` is the ``i``-th kept transition;
    ``stats`` names its statistics (scalars; stored in kiln's dtypes).
    """

    begin: Callable[[Any, Any], tuple[Any, Any]]
    warm: Callable[[Any], Any] | None
    draw: Callable[[Any, Any, Any], tuple[Any, Any]]
    stats: tuple[str, ...]


@dataclasses.dataclass
class _Programs:
    """An engine's compiled programs, for one chain or all chains vectorized.

    ``warm(carry, n)`` runs ``n`` warm-up transitions; ``draw(carry, keys, i, n)`` runs
    ``n <= rows`` kept transitions from draw ``i`` on and returns their draws in the
    first ``n`` of ``rows`` rows. ``spec`` is one draw's ``(x, stats)`` shapes.
    """

    begin: Any
    warm: Any
    draw: Any
    rows: int
    spec: Any
    vectorized: bool


def _compile(engine: _Engine, rows: int, key: Any, x0: Any, vectorized: bool) -> _Programs:
    """Trace and compile ``engine``'s programs for arguments like ``key`` and ``x0``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def warm(carry: Any, n: Any) -> Any:
        assert engine.warm is not None
        return lax.fori_loop(0, n, lambda _, c: engine.warm(c), carry)  # type: ignore[misc]

    x_shape = x0.shape[1:] if vectorized else x0.shape
    row = jax.ShapeDtypeStruct
    spec = (
        row(x_shape, x0.dtype),
        {k: row((), _STAT_DTYPES.get(k, np.float64)) for k in engine.stats},
    )

    def draw(carry: Any, keys: Any, start: Any, n: Any) -> Any:
        bufs = jax.tree.map(lambda s: jnp.zeros((rows, *s.shape), s.dtype), spec)

        def body(j: Any, c: Any) -> Any:
            carry, bufs = c
            carry, out = engine.draw(carry, keys, start + j)
            return carry, jax.tree.map(lambda b, o: b.at[j].set(o.astype(b.dtype)), bufs, out)

        return lax.fori_loop(0, n, body, (carry, bufs))

    index = jax.ShapeDtypeStruct((), np.int32)
    if vectorized:
        begin_fn, warm_fn = jax.vmap(engine.begin), jax.vmap(warm, in_axes=(0, None))
        draw_fn = jax.vmap(draw, in_axes=(0, 0, None, None))
    else:
        begin_fn, warm_fn, draw_fn = engine.begin, warm, draw
    begin = jax.jit(begin_fn).lower(key, x0)
    carry, keys = begin.out_info
    return _Programs(
        begin.compile(),
        None if engine.warm is None else jax.jit(warm_fn).lower(carry, index).compile(),
        jax.jit(draw_fn).lower(carry, keys, index, index).compile(),
        rows,
        spec,
        vectorized,
    )


@dataclasses.dataclass
class _Part:
    """The draws of one chain, or of all chains vectorized (leading axis: chain)."""

    x: np.ndarray  # (chains, n, ndim)
    stats: dict[str, np.ndarray]  # {name: (chains, n)}
    warmup_done: bool

    @property
    def n_done(self) -> int:
        return int(self.x.shape[1])


@dataclasses.dataclass
class _Sizer:
    """Sizes chunks to take about ``PIECE_S`` from the last one's time per transition.

    The first chunk is one transition (its time is not known before).
    """

    per_step: float = math.inf

    def size(self, most: int) -> int:
        if self.per_step * most <= PIECE_S:
            return most
        return max(1, min(most, int(PIECE_S / self.per_step)))

    def timed(self, k: int, seconds: float) -> None:
        self.per_step = max(seconds / k, 1e-9)


def _run_part(
    progs: _Programs,
    key: Any,
    x0: Any,
    tune: int,
    draws: int,
    chains: int,
    stop: threading.Event,
    updates: list[Callable[[int, np.ndarray, bool], None]],
) -> _Part:
    """Run a chain (or the vectorized chains) in chunks until done or ``stop`` is set."""
    import jax

    x_spec, stat_spec = progs.spec

    def empty(warmup_done: bool) -> _Part:
        stats = {k: np.empty((chains, 0, *s.shape), s.dtype) for k, s in stat_spec.items()}
        return _Part(np.empty((chains, 0, *x_spec.shape), x_spec.dtype), stats, warmup_done)

    def report(k: int, diverging: np.ndarray | None, tuning: bool) -> None:
        for c, update in enumerate(updates):
            flags = np.zeros((k, core.N_STATS))
            if diverging is not None:
                flags[:, core.DIVERGING] = diverging[c]
            update(k, flags, tuning)

    if stop.is_set():  # a sequential chain not yet started
        return empty(False)
    sizer = _Sizer()
    carry, keys = jax.block_until_ready(progs.begin(key, x0))
    warmed = tune if progs.warm is None else 0
    while warmed < tune:
        if stop.is_set():
            return empty(False)
        k = sizer.size(tune - warmed)
        begin = time.perf_counter()
        carry = jax.block_until_ready(progs.warm(carry, np.int32(k)))
        sizer.timed(k, time.perf_counter() - begin)
        report(k, None, True)
        warmed += k
    xs: list[np.ndarray] = []
    stats: list[dict[str, np.ndarray]] = []
    done = 0
    while done < draws and not stop.is_set():
        k = sizer.size(min(draws - done, progs.rows))
        begin = time.perf_counter()
        carry, (x, st) = progs.draw(carry, keys, np.int32(done), np.int32(k))
        cut = (slice(None), slice(k)) if progs.vectorized else (slice(k),)
        x = np.array(np.asarray(x)[cut])  # a copy: the buffer's unused rows are dropped
        st = {name: np.array(np.asarray(v)[cut]) for name, v in st.items()}
        sizer.timed(k, time.perf_counter() - begin)
        if not progs.vectorized:
            x, st = x[None], {name: v[None] for name, v in st.items()}
        xs.append(x)
        stats.append(st)
        report(k, st.get("diverging"), False)
        done += k
    if not xs:
        return empty(True)
    return _Part(
        np.concatenate(xs, axis=1),
        {name: np.concatenate([s[name] for s in stats], axis=1) for name in stats[0]},
        True,
    )


def _drive(parts: list[Callable[[], _Part]], workers: int, stop: threading.Event) -> Any:
    """Run ``parts`` in ``workers`` threads while this (main) thread waits for Ctrl-C.

    Ctrl-C (a ``KeyboardInterrupt`` here) sets ``stop``: each part returns after its
    current chunk. Returns the parts' results and whether it was interrupted. The parts
    start once all are submitted (Ctrl-C before that: nothing ran, the interrupt is
    raised), so that the wait for Ctrl-C covers every moment a part runs.
    """
    go = threading.Event()

    def guarded(part: Callable[[], _Part]) -> _Part:
        go.wait()
        try:
            return part()
        except BaseException:
            stop.set()  # a failed chain ends the others soon
            raise

    results: list[_Part | None] = [None] * len(parts)
    interrupted = False
    futures: dict[concurrent.futures.Future[_Part], int] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            for i, part in enumerate(parts):
                futures[pool.submit(guarded, part)] = i
            go.set()
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.1)
                for f in done:
                    results[futures[f]] = f.result()
        except KeyboardInterrupt:
            if not go.is_set():
                raise
            interrupted = True
            stop.set()
            for f, i in futures.items():
                results[i] = f.result()
        finally:
            if not go.is_set():  # interrupted while submitting: the parts end at once
                stop.set()
                go.set()
    return results, interrupted


def _run_chains(
    model: JaxCompiledModel,
    engine: _Engine,
    method: str,
    cores: int | None,
    chains: int,
    draws: int,
    tune: int,
    random_seed: Any,
    init: np.ndarray,
    progressbar: bool,
) -> tuple[Trace, float | None]:
    """Run ``engine``'s chains in chunks as ``method`` says; stop on Ctrl-C.

    Returns the trace (stats in kiln's dtypes; a missing ``tree_depth`` derived from
    ``n_steps``; an interrupted run cut to the draws every kept chain made) and XLA's
    compile seconds, which the sampling time leaves out (None: not known on this JAX).
    """
    import jax

    clock = _CompileClock()
    stop = threading.Event()
    rows = max(1, min(draws, CHUNK_BYTES // (8 * (model.ndim + 8))))
    with jax.enable_x64(True), clock.running():
        keys = jax.random.split(jax.random.key(_key_seed(random_seed)), chains)
        x0 = jax.numpy.asarray(init)
        start = time.perf_counter()
        vectorized = method == "vectorized"
        if vectorized:
            progs = _compile(engine, rows, keys, x0, True)
        else:
            progs = _compile(engine, rows, keys[0], x0[0], False)
        progress = Progress(chains, draws + tune, enabled=progressbar)  # after compiling
        updaters = [progress.updater(c) for c in range(chains)]
        jobs: list[Callable[[], _Part]]
        if vectorized:
            job = (progs, keys, x0, tune, draws, chains, stop, updaters)
            jobs = [functools.partial(_run_part, *job)]
            workers = 1
        else:
            jobs = [
                functools.partial(
                    _run_part, progs, keys[c], x0[c], tune, draws, 1, stop, updaters[c : c + 1]
                )
                for c in range(chains)
            ]
            parallel = method == "parallel" and chains > 1
            workers = chain_workers(chains, cores) if parallel else 1
        try:
            parts, interrupted = _drive(jobs, workers, stop)
        finally:
            progress.close()
        elapsed = time.perf_counter() - start
        compile_during = clock.seconds or 0.0
        kept = [p for p in parts if p.warmup_done and p.n_done > 0] or parts
        n = min(p.n_done for p in kept)
        xs = np.concatenate([p.x[:, :n] for p in kept])
        raw = {k: np.concatenate([p.stats[k][:, :n] for p in kept]) for k in kept[0].stats}
        if interrupted:
            warming_up = sum(p.x.shape[0] for p in parts if not p.warmup_done)
            warn_interrupted(n, xs.shape[0], chains, warming_up)
        posterior = _posterior(model, xs)
    stats = {k: np.asarray(v).astype(_STAT_DTYPES.get(k, np.float64)) for k, v in raw.items()}
    stats.setdefault("tree_depth", _tree_depth(stats["n_steps"]))
    trace = Trace(posterior, stats, xs, max(elapsed - compile_during, 0.0), tune, interrupted)
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
    and dual-averaging step-size adaptation) run inside jitted programs (start,
    warm-up, draws) compiled once per chain method, which JAX's persistent cache keeps:
    numpyro's ``MCMC`` driver would run the initialization op by op and compile each
    operation separately. Warm-up and draws run in chunks (module docstring): Ctrl-C
    returns the draws made so far. ``progressbar`` shows a bar per chain. ``options``
    (``nuts_sampler_kwargs``):
    ``chain_method`` (``"parallel"`` default, ``"sequential"``, ``"vectorized"``),
    ``max_tree_depth`` / ``max_treedepth``, ``dense_mass``, ``step_size`` (the initial
    one).
    """
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

    def begin(key: Any, x0: Any) -> Any:
        state = init_kernel(
            x0,
            num_warmup=tune,
            step_size=float(opts.get("step_size", 1.0)),
            dense_mass=bool(opts.get("dense_mass", False)),
            target_accept_prob=target_accept,
            max_tree_depth=max_depth,
            rng_key=key,
        )
        return state, None  # the state carries its key

    def draw(s: Any, keys: Any, i: Any) -> Any:
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

    stats = ("diverging", "energy", "n_steps", "step_size", "lp", "acceptance_rate")
    engine = _Engine(begin, sample_kernel, draw, stats)
    return _run_chains(
        model, engine, method, cores, chains, draws, tune, random_seed, init, progressbar
    )


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
    ``dense_mass``. With ``tune=0`` the draws use a unit mass matrix and the step size
    of blackjax's search (``find_reasonable_step_size``; its window adaptation cannot
    run 0 steps). The window adaptation runs step by step
    (:func:`~kiln_samplers._blackjax_warmup.window_steps`: the state and parameters of
    ``blackjax.window_adaptation(...).run``), so warm-up and draws run in chunks
    (module docstring): Ctrl-C returns the draws made so far. ``progressbar`` shows a
    bar per chain.
    """
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.adaptation.step_size import find_reasonable_step_size

    opts = _check_options(
        options or {},
        {"chain_method", "max_treedepth", "max_num_doublings", "dense_mass"},
        "blackjax",
    )
    max_depth = int(opts.pop("max_treedepth", opts.pop("max_num_doublings", 10)))
    method = opts.pop("chain_method")
    diagonal = not bool(opts.pop("dense_mass", False))
    init = _initial_points(model, random_seed, chains)
    if tune > 0:
        window_init, window_step, window_parameters = window_steps(
            model.logp_jax, tune, diagonal, target_accept, max_depth
        )

    def begin(key: Any, x0: Any) -> Any:
        warm_key, draw_key = jax.random.split(key)
        draw_keys = jax.random.split(draw_key, draws)
        if tune == 0:  # blackjax adapts in no 0-step run: a step size from its search
            inverse = jnp.ones(x0.shape) if diagonal else jnp.eye(x0.shape[0])

            def kernel(eps: Any) -> Any:
                return blackjax.nuts(model.logp_jax, eps, inverse, max_num_doublings=max_depth)

            state = kernel(1.0).init(x0)
            step_size = find_reasonable_step_size(
                warm_key, lambda eps: kernel(eps).step, state, 1.0, target_accept
            )
            params = {"step_size": step_size, "inverse_mass_matrix": inverse}
            return (state, params, ()), draw_keys
        state, window = window_init(warm_key, x0)
        return (state, window_parameters(window), window), draw_keys

    def warm(carry: Any) -> Any:
        state, window = window_step(carry[0], carry[2])
        return state, window_parameters(window), window

    def draw(carry: Any, keys: Any, i: Any) -> Any:
        state, params, window = carry
        step = blackjax.nuts(model.logp_jax, **params, max_num_doublings=max_depth).step
        state, info = step(keys[i], state)
        stats = {
            "diverging": info.is_divergent,
            "energy": info.energy,
            "n_steps": info.num_integration_steps,
            "tree_depth": info.num_trajectory_expansions,
            "step_size": params["step_size"],
            "lp": state.logdensity,
            "acceptance_rate": info.acceptance_rate,
        }
        return (state, params, window), (state.position, stats)

    stats = ("diverging", "energy", "n_steps", "tree_depth", "step_size", "lp", "acceptance_rate")
    engine = _Engine(begin, warm if tune > 0 else None, draw, stats)
    return _run_chains(
        model, engine, method, cores, chains, draws, tune, random_seed, init, progressbar
    )
