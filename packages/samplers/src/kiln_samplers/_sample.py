"""``sample_nuts``: chains in parallel threads (the compiled kernel releases the GIL).

Each chain gets its own generator from ``random_seed`` (``SeedSequence.spawn``), so the
draws are the same whatever ``cores`` is. Ctrl-C stops every chain within about
:data:`kiln_samplers._nuts.PIECE_S` (the chains run in pieces that short and look at a
stop flag between them) and returns what was drawn, with one
:class:`SamplingInterrupted` warning (:func:`warn_interrupted`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_samplers._nuts import init_chain, run_chain
from kiln_samplers._nuts_core import N_STATS
from kiln_samplers._nuts_settings import STAT_NAMES, ChainResult, NutsSettings
from kiln_samplers._progress import Progress
from kiln_samplers._protocol import CompiledModel, NativePointers
from kiln_samplers._threads import blas_threads_for, chain_workers

#: The statistics that are not floats (the chains record every statistic as a float).
_STAT_DTYPES = {"diverging": np.bool_, "tree_depth": np.int64, "n_steps": np.int64}
_STAT_INDEX = {name: STAT_NAMES.index(name) for name in _STAT_DTYPES}


class SamplingInterrupted(UserWarning):
    """Sampling was stopped (Ctrl-C): the result holds the draws made until then."""


@dataclasses.dataclass
class Trace:
    """Draws of every chain: ``posterior`` {name: (chain, draw, ...)}, ``sample_stats``."""

    posterior: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray]
    unconstrained: np.ndarray  # (chain, draw, ndim)
    sampling_time: float
    tuning_steps: int
    interrupted: bool
    #: Leapfrog steps of all chains (warm-up included; None where the engine does not
    #: say) and the kernel that took them (``"c"``, ``"numba"``, ``"python"``, an engine).
    n_leapfrog: int | None = None
    kernel: str | None = None
    #: The mass matrix kiln's NUTS adapted (``"diag"``, ``"dense"``; None: another engine).
    metric: str | None = None


def chain_seeds(random_seed: Any, chains: int) -> list[np.random.SeedSequence]:
    """Return one independent seed per chain derived from ``random_seed``.

    ``random_seed`` is anything ``numpy.random.SeedSequence`` takes, a ``SeedSequence``
    (its children, as a fresh one's ``spawn`` gives, without changing it: the same
    sequence always gives the same seeds), or one seed per chain.
    """
    if isinstance(random_seed, np.random.SeedSequence):
        s = random_seed
        return [
            np.random.SeedSequence(s.entropy, spawn_key=(*s.spawn_key, c), pool_size=s.pool_size)
            for c in range(chains)
        ]
    if isinstance(random_seed, list | tuple):
        if len(random_seed) != chains:
            raise ValueError(f"random_seed: {len(random_seed)} seeds for {chains} chains")
        return [np.random.SeedSequence(s) for s in random_seed]
    return np.random.SeedSequence(random_seed).spawn(chains)


def sample_nuts(
    model: CompiledModel,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    settings: NutsSettings | None = None,
    native: NativePointers | None = None,
    progressbar: bool = True,
) -> Trace:
    """Run ``chains`` NUTS chains of ``tune`` warm-up and ``draws`` kept iterations."""
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")
    settings = settings or NutsSettings()
    cores = chain_workers(chains, cores)
    seeds = chain_seeds(random_seed, chains)
    if native is not None:
        native.refresh()
    stop = threading.Event()
    progress = Progress(chains, draws + tune, enabled=progressbar)
    start = time.perf_counter()
    # Each chain writes its draws into its row of these (from its own thread, as it
    # draws): the results read them without copying.
    out_draws = np.empty((chains, draws, int(model.ndim)))
    out_stats = np.empty((chains, draws, N_STATS))
    out_typed = _typed_stats(chains, draws)

    def one(chain: int) -> ChainResult:
        state = init_chain(model, seeds[chain], native=native)
        result = run_chain(
            model, state, draws, tune, settings, native, progress.updater(chain), stop,
            out=(out_draws[chain], out_stats[chain]),
        )  # fmt: skip
        _write_typed_stats(out_typed, chain, out_stats[chain, : result.n_done])
        return result

    results: list[ChainResult | None] = [None] * chains
    interrupted = False
    with blas_threads_for(cores), concurrent.futures.ThreadPoolExecutor(cores) as pool:
        futures = {pool.submit(one, c): c for c in range(chains)}
        try:
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.1)
                for f in done:
                    results[futures[f]] = f.result()
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for f, c in futures.items():
                results[c] = f.result()
    progress.close()
    elapsed = time.perf_counter() - start
    return trace_from_chains(
        model, results, chains, tune, elapsed, interrupted,
        written=(out_draws, out_stats, out_typed),
    )  # fmt: skip


def _typed_stats(chains: int, draws: int) -> dict[str, np.ndarray]:
    """Return the empty ``(chain, draw)`` arrays of the statistics that are not floats."""
    return {name: np.empty((chains, draws), dtype=dtype) for name, dtype in _STAT_DTYPES.items()}


def _write_typed_stats(typed: dict[str, np.ndarray], chain: int, rows: np.ndarray) -> None:
    """Write chain ``chain``'s statistics that are not floats (of its ``rows``) into ``typed``.

    Called by each chain's thread when it is done, so that the conversions run in
    parallel rather than after sampling.
    """
    for name, array in typed.items():
        array[chain, : rows.shape[0]] = rows[:, _STAT_INDEX[name]]


def trace_from_chains(
    model: CompiledModel,
    results: Sequence[ChainResult | None],
    chains: int,
    tune: int,
    elapsed: float,
    interrupted: bool,
    written: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None = None,
) -> Trace:
    """Return the :class:`Trace` of the chains' results (None: a chain that never ran).

    The chains that finished warm-up and drew are kept (all of them when none did),
    each cut to the fewest draws among them; an interrupted run warns once
    (:func:`warn_interrupted`). ``model`` computes the draws' values (``expand_draws``
    or ``expand``). What :func:`sample_nuts` returns, and what a run whose chains ran
    elsewhere (``kl.sample(executor=...)``) gathers.

    ``written``: the ``(chain, draw, ndim)`` and ``(chain, draw, N_STATS)`` arrays the
    chains wrote their draws into (``run_chain``'s ``out``), and the ``(chain, draw)``
    arrays of the statistics that are not floats, which they filled once done; when
    every chain is kept, the trace's unconstrained draws and statistics are views of
    them, not copies.
    """
    outs = [r for r in results if r is not None]
    kept = [r for r in outs if r.warmup_done and r.n_done > 0] or outs
    n = min((r.n_done for r in kept), default=0)
    if interrupted:
        warn_interrupted(n, len(kept), chains, sum(not r.warmup_done for r in outs))
    typed: dict[str, np.ndarray] = {}
    if written is not None and len(kept) == len(results) == written[0].shape[0]:
        unconstrained, columns = written[0][:, :n], written[1][:, :n]
        typed = {name: array[:, :n] for name, array in written[2].items()}
    elif kept:
        unconstrained = np.stack([r.draws[:n] for r in kept])
        columns = np.stack([r.stats[:n] for r in kept])
    else:
        unconstrained = np.empty((0, 0, int(getattr(model, "ndim", 0))))
        columns = np.empty((0, 0, N_STATS))
    posterior = posterior_draws(model, unconstrained)
    sample_stats: dict[str, np.ndarray] = {}
    for k, name in enumerate(STAT_NAMES[:N_STATS]):
        dtype = _STAT_DTYPES.get(name)
        if dtype is None:
            sample_stats[name] = columns[:, :, k]
        else:
            sample_stats[name] = typed[name] if name in typed else columns[:, :, k].astype(dtype)
    # One number per chain, repeated along the draws (a read-only view, not a copy).
    step_size_bar = np.array([r.step_size_bar for r in kept], dtype=np.float64)
    sample_stats["step_size_bar"] = np.broadcast_to(step_size_bar[:, None], (len(kept), n))
    kernels = sorted({r.kernel for r in kept})
    metrics = sorted({r.metric for r in outs})
    return Trace(
        posterior,
        sample_stats,
        unconstrained,
        elapsed,
        tune,
        interrupted,
        n_leapfrog=sum(r.n_leapfrog for r in outs),
        kernel="+".join(kernels),
        metric="+".join(metrics) or None,
    )


def trace_from_chain_traces(
    model: CompiledModel,
    traces: Sequence[Trace | None],
    chains: int,
    tune: int,
    elapsed: float,
    interrupted: bool,
) -> Trace:
    """Return one :class:`Trace` of one-chain traces run apart (None: a chain that never ran).

    Each trace is an engine's run of one chain (nutpie's or a JAX engine's, on a worker
    of ``kl.sample(executor=...)``); their posteriors are not read: ``model`` computes
    the values of the stacked unconstrained draws, as :func:`trace_from_chains` does.
    The chains that drew are kept, each cut to the fewest draws among them.
    """
    kept = [t for t in traces if t is not None and t.unconstrained.shape[1] > 0]
    n = min((t.unconstrained.shape[1] for t in kept), default=0)
    if interrupted:
        warn_interrupted(n, len(kept), chains, 0)
    unconstrained = (
        np.concatenate([t.unconstrained[:, :n] for t in kept])
        if kept
        else np.empty((0, 0, int(getattr(model, "ndim", 0))))
    )
    stats = (
        {k: np.concatenate([t.sample_stats[k][:, :n] for t in kept]) for k in kept[0].sample_stats}
        if kept
        else {}
    )
    steps = [t.n_leapfrog for t in kept]
    return Trace(
        posterior_draws(model, unconstrained),
        stats,
        unconstrained,
        elapsed,
        tune,
        interrupted or any(t.interrupted for t in kept),
        n_leapfrog=None if None in steps else sum(s for s in steps if s is not None),
        kernel="+".join(sorted({t.kernel for t in kept if t.kernel})) or None,
        metric="+".join(sorted({t.metric for t in kept if t.metric})) or None,
    )


def warn_interrupted(draws: int, kept: int, chains: int, warming_up: int) -> None:
    """Warn (:class:`SamplingInterrupted`) that sampling stopped early, and what was kept.

    ``draws`` per chain kept from ``kept`` of the ``chains`` chains; ``warming_up`` is how
    many chains were still in warm-up when stopped (their warm-up draws are not kept).

    Examples
    --------
    >>> warn_interrupted(120, 4, 4, 0)  # doctest: +SKIP
    """
    message = (
        f"sampling interrupted: kept {draws} draws per chain from {kept} of {chains} "
        "chain(s), the draws made until then"
    )
    if warming_up:
        message += (
            f"; {warming_up} chain(s) were still warming up (tuning), and warm-up draws "
            "are not kept"
        )
    warnings.warn(message, SamplingInterrupted, stacklevel=3)


def posterior_draws(model: CompiledModel, unconstrained: np.ndarray) -> dict[str, np.ndarray]:
    """Return ``{name: (chain, draw, ...)}``: the model's values at every draw.

    One batched call of the model's optional ``expand_draws`` (``(k, ndim)`` rows to
    ``(k, ...)`` values) when it has one, else :func:`map_draws` of ``expand``.
    """
    chains, draws, ndim = unconstrained.shape
    batched = getattr(model, "expand_draws", None)
    if batched is None or draws == 0:
        return map_draws(model.expand, unconstrained, template=model.initial_point(0))
    flat = batched(unconstrained.reshape(chains * draws, ndim))
    return {k: np.asarray(v).reshape(chains, draws, *np.shape(v)[1:]) for k, v in flat.items()}


def map_draws(
    fn: Callable[[np.ndarray], dict[str, Any]],
    unconstrained: np.ndarray,
    template: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Return ``{name: (chain, draw, ...) array}`` of ``fn`` applied to every draw.

    With no draw (sampling interrupted during warm-up), ``fn(template)`` gives the names
    and shapes of the empty arrays (without a template: an empty dict).
    """
    chains, draws, _ = unconstrained.shape
    out: dict[str, np.ndarray] = {}
    if draws == 0 and template is not None:
        for k, v in fn(template).items():
            v = np.asarray(v)
            out[k] = np.empty((chains, 0, *v.shape), dtype=v.dtype)
        return out
    for c in range(chains):
        for d in range(draws):
            for k, v in fn(unconstrained[c, d]).items():
                v = np.asarray(v)
                if k not in out:
                    out[k] = np.empty((chains, draws, *v.shape), dtype=v.dtype)
                out[k][c, d] = v
    return out
