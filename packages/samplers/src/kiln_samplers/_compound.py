"""Compound steps and the chains' driver of step methods (``sample_steps``).

A draw runs every step of a :class:`CompoundStep` once, in order, on the same point
(Gibbs-like: each step updates its own entries given the others). :class:`NUTS` is the
NUTS transition of :mod:`kiln_samplers._nuts_core` as a step over some (continuous)
entries, conditional on the rest, with Stan's windowed warm-up; it runs the Python
transition calling ``model.logp_dlogp`` on the full vector.

``sample_steps`` runs the chains as ``sample_nuts`` does: one thread per chain, a
generator per chain from ``random_seed`` (the same draws whatever ``cores``), progress
bars, Ctrl-C returns what was drawn (a stop request is seen after each draw). When a
step is a population method (DEMetropolis), all chains run in lock-step in one thread.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, override

import numpy as np

from kiln_samplers import _nuts_core as core
from kiln_samplers._adaptation import regularized_variance, warmup_schedule
from kiln_samplers._nuts import _find_step_size, _restart_step_size
from kiln_samplers._nuts_settings import STAT_NAMES, ChainState, NutsSettings, jitter_of
from kiln_samplers._progress import Progress
from kiln_samplers._protocol import CompiledModel
from kiln_samplers._sample import (
    Trace,
    chain_seeds,
    posterior_draws,
    warn_interrupted,
)
from kiln_samplers._steps import Step, StepContext
from kiln_samplers._threads import blas_threads_for, chain_workers

_NUTS_DTYPES: dict[str, Any] = {
    name: np.bool_
    if name == "diverging"
    else np.int64
    if name in ("tree_depth", "n_steps")
    else np.float64
    for name in STAT_NAMES
}


@dataclasses.dataclass
class NutsStepState:
    """The sub-vector's NUTS chain state and where the warm-up schedule is."""

    chain: ChainState
    iteration: int
    window_start: int
    ends: list[int]


class NUTS(Step):
    """NUTS over some continuous entries, given the others (a step of a compound).

    Parameters
    ----------
    indices
        The (continuous) entries it updates, all of them when None.
    target_accept, max_treedepth, max_energy_error
        As in :class:`kiln_samplers.NutsSettings`.
    """

    name = "NUTS"
    stats_dtypes = _NUTS_DTYPES
    handles_discrete = False

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        target_accept: float = 0.8,
        max_treedepth: int = 10,
        max_energy_error: float = 1000.0,
        step_size_jitter: float | None = None,
    ) -> None:
        super().__init__(indices)
        self.settings = NutsSettings(
            target_accept, max_treedepth, max_energy_error, step_size_jitter
        )

    def _fn(self, model: CompiledModel, x: np.ndarray) -> Callable[..., float]:
        """Return ``fn(q, grad, _) -> logp`` over the step's entries of the live ``x``."""
        idx = self.indices

        def fn(q: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
            x[idx] = q
            logp, g = model.logp_dlogp(x)
            grad[:] = g[idx]
            return logp

        return fn

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> NutsStepState:
        assert self.indices is not None
        n = self.indices.size
        logp, grad = model.logp_dlogp(x)
        chain = ChainState(
            q=x[self.indices].copy(),
            logp=float(logp),
            grad=np.asarray(grad)[self.indices].copy(),
            inv_mass=np.ones(n),
            adapt=np.zeros(core.N_ADAPT),
            welford=np.zeros((3, n)),
            rng=rng,
        )
        _restart_step_size(chain, _find_step_size(self._fn(model, x), None, chain))
        x[self.indices] = chain.q
        window_start, ends = warmup_schedule(context.tune)
        return NutsStepState(chain, 0, window_start, ends)

    @override
    def step(
        self,
        model: CompiledModel,
        state: NutsStepState,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        s, settings, fn = state.chain, self.settings, self._fn(model, x)
        s.q = x[self.indices].copy()
        s.logp, grad = model.logp_dlogp(x)  # the other steps may have moved the rest
        s.grad = np.asarray(grad)[self.indices].copy()
        a = s.adapt
        adapted = a[core.COUNT] > 0 and not tuning
        eps = math.exp(a[core.LOG_EPS_BAR] if adapted else a[core.LOG_EPS])
        jitter = jitter_of(settings, None)
        if jitter > 0.0:
            eps *= 1.0 + jitter * (2.0 * s.rng.random() - 1.0)
        row = np.empty(core.N_STATS)
        s.logp = core.nuts_step(
            fn, None, s.rng, s.q, s.logp, s.grad, eps, s.inv_mass,
            settings.max_treedepth, settings.max_energy_error, row, np.zeros(2),
        )  # fmt: skip
        x[self.indices] = s.q
        if tuning:
            accept = row[core.ACCEPT] if math.isfinite(row[core.ACCEPT]) else 0.0
            core.dual_averaging(a, accept, settings.target_accept)
            i = state.iteration
            if state.window_start <= i < (state.ends[-1] if state.ends else 0):
                w = s.welford
                w[0, 0] += 1.0
                delta = s.q - w[1]
                w[1] += delta / w[0, 0]
                w[2] += delta * (s.q - w[1])
            state.iteration = i + 1
            if state.iteration in state.ends:
                s.inv_mass = regularized_variance(s.welford)
                s.welford[:] = 0.0
                _restart_step_size(s, _find_step_size(fn, None, s))
                x[self.indices] = s.q
        eps_bar = math.exp(a[core.LOG_EPS_BAR]) if a[core.COUNT] > 0 else eps
        return s.logp, (*row.tolist(), eps_bar)


class CompoundStep:
    """Several steps run one after the other at each draw (each on its own entries).

    ``methods`` is the list of steps, in the order they run; ``CompoundStep`` is also
    what a list of steps given to :func:`sample_steps` becomes.
    """

    def __init__(self, methods: Sequence[Step]) -> None:
        methods = list(methods)
        if not methods:
            raise ValueError("CompoundStep: expected at least one step, got none")
        for m in methods:
            if not isinstance(m, Step):
                raise TypeError(f"CompoundStep: expected steps, got {m!r}")
        self.methods = methods

    def describe(self) -> str:
        """Return the step names, PyMC's way: a ``CompoundStep`` line, then one per step."""
        return "CompoundStep\n" + "\n".join(f">{m.describe()}" for m in self.methods)


def as_steps(step: Step | CompoundStep | Sequence[Step]) -> list[Step]:
    """Return the list of steps of a step, a compound step or a sequence of steps."""
    if isinstance(step, CompoundStep):
        return list(step.methods)
    if isinstance(step, Step):
        return [step]
    if isinstance(step, list | tuple):
        return CompoundStep(step).methods
    raise TypeError(f"step: expected a step, a list of steps or a CompoundStep, got {step!r}")


def bind_steps(model: CompiledModel, steps: Sequence[Step]) -> list[Step]:
    """Bind every step's indices to ``model``; check each entry has exactly one step."""
    bound = [s.bind(model) for s in steps]
    owner = np.full(model.ndim, -1)
    for k, s in enumerate(bound):
        assert s.indices is not None
        twice = s.indices[owner[s.indices] >= 0]
        if twice.size:
            raise ValueError(
                f"step: entries {twice.tolist()} are given to two steps "
                f"({bound[owner[twice[0]]].name} and {s.name})"
            )
        owner[s.indices] = k
    missing = np.flatnonzero(owner < 0)
    if missing.size:
        raise ValueError(f"step: entries {missing.tolist()} have no step")
    return bound


@dataclasses.dataclass
class StepChainResult:
    """One chain of :func:`run_step_chains`: its kept draws and each step's statistics."""

    draws: np.ndarray  # (n, ndim)
    stats: list[np.ndarray]  # one (n, n_stats) array per step
    n_done: int
    warmup_done: bool


def _init_point(model: CompiledModel, rng: np.random.Generator, max_tries: int = 20) -> np.ndarray:
    for _ in range(max_tries):
        x = np.array(model.initial_point(rng.integers(2**63)), dtype="float64")
        logp = model.logp(x)
        if math.isfinite(logp):
            return x
    raise ValueError(
        f"no initial point with a finite log-density in {max_tries} tries (last logp {logp}); "
        "check the model's support points"
    )


# As in ``run_chain``: an overflow in a trajectory (a momentum or an energy that becomes
# inf) is a divergence or a rejection, reported as one, not as one NumPy RuntimeWarning
# per entry of the vector.
@np.errstate(over="ignore", invalid="ignore", divide="ignore")
def run_step_chains(
    model: CompiledModel,
    steps: Sequence[Step],
    chains: Sequence[int],
    seeds: Sequence[np.random.SeedSequence],
    draws: int,
    tune: int,
    progress: Any = None,
    stop: threading.Event | None = None,
    chunk: int = 50,
) -> list[StepChainResult]:
    """Run ``chains`` of the bound ``steps`` in lock-step (one, or the population).

    Chain ``c`` draws from ``seeds[c]``. ``progress`` has ``updater(chain)`` (a
    :class:`Progress`; None: no progress); ``stop`` ends the chains early (they keep
    what they drew). What :func:`sample_steps` runs per thread, and a worker per task.
    """
    progress = progress if progress is not None else Progress(len(seeds), 0, enabled=False)
    stop = stop if stop is not None else threading.Event()
    rngs = [np.random.default_rng(seeds[c]) for c in chains]
    points = np.stack([_init_point(model, rng) for rng in rngs])
    logps = [model.logp(p) for p in points]
    population = points if any(s.population for s in steps) else None
    states = [
        [s.init(model, points[k], rngs[k], StepContext(tune, k, population)) for s in steps]
        for k in range(len(chains))
    ]
    widths = [len(s.stat_names) for s in steps]
    nuts = next((j for j, s in enumerate(steps) if isinstance(s, NUTS)), None)
    out_draws = np.empty((len(chains), draws, model.ndim))
    out_stats = [[np.empty((draws, w)) for w in widths] for _ in chains]
    updates = [progress.updater(c) for c in chains]
    divergences = np.zeros((len(chains), 1, 1))  # since the last progress update
    pending = 0
    n_done = 0
    for it in range(tune + draws):
        if stop.is_set():
            return [
                StepChainResult(
                    out_draws[k, :n_done], [a[:n_done] for a in out_stats[k]], n_done, it >= tune
                )
                for k in range(len(chains))
            ]
        tuning = it < tune
        for k in range(len(chains)):
            x, rng = points[k], rngs[k]
            for j, s in enumerate(steps):
                logps[k], stats = s.step(model, states[k][j], x, logps[k], rng, tuning)
                if not tuning:
                    out_stats[k][j][n_done] = stats
                    if j == nuts:
                        divergences[k] += stats[0]
            if not tuning:
                out_draws[k, n_done] = x
        n_done += not tuning
        pending += 1
        if pending == chunk or it + 1 in (tune, tune + draws):
            for k, update in enumerate(updates):
                update(pending, divergences[k], tuning)
            divergences[:] = 0.0
            pending = 0
    return [StepChainResult(out_draws[k], out_stats[k], draws, True) for k in range(len(chains))]


def sample_steps(
    model: CompiledModel,
    step: Step | CompoundStep | Sequence[Step],
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    progressbar: bool = True,
) -> Trace:
    """Run ``chains`` chains of ``step`` (one step, a list, or a :class:`CompoundStep`).

    Each draw runs the steps in order. Returns a :class:`Trace` whose ``sample_stats``
    hold each step's statistics (a statistic that several steps report gets a last
    axis, one entry per step in their order) and ``tune`` (False for kept draws).

    Examples
    --------
    >>> trace = sample_steps(model, [NUTS([0]), Metropolis([1])])  # doctest: +SKIP
    """
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}: expected an int >= {low}, got {value!r}")
    steps = bind_steps(model, as_steps(step))
    seeds = chain_seeds(random_seed, chains)
    cores = chain_workers(chains, cores)
    population = any(s.population for s in steps)
    groups = [list(range(chains))] if population else [[c] for c in range(chains)]
    stop = threading.Event()
    progress = Progress(chains, draws + tune, enabled=progressbar)
    start = time.perf_counter()
    results: dict[int, StepChainResult] = {}
    interrupted = False
    workers = 1 if population else cores
    with blas_threads_for(workers), concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {
            pool.submit(run_step_chains, model, steps, g, seeds, draws, tune, progress, stop): g
            for g in groups
        }
        try:
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.1)
                for f in done:
                    results.update(zip(futures[f], f.result(), strict=True))
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for f, g in futures.items():
                results.update(zip(g, f.result(), strict=True))
    progress.close()
    elapsed = time.perf_counter() - start
    outs = [results[c] for c in range(chains)]
    return trace_from_step_chains(model, steps, outs, chains, tune, elapsed, interrupted)


def trace_from_step_chains(
    model: CompiledModel,
    steps: Sequence[Step],
    results: Sequence[StepChainResult | None],
    chains: int,
    tune: int,
    elapsed: float,
    interrupted: bool,
) -> Trace:
    """Return the :class:`Trace` of step-method chains (None: a chain that never ran).

    As :func:`trace_from_chains` for NUTS: the chains that finished warm-up are kept,
    cut to the fewest draws; what :func:`sample_steps` returns, and what a run whose
    chains ran elsewhere (``kl.sample(executor=...)``) gathers.
    """
    outs = [r for r in results if r is not None]
    kept = [r for r in outs if r.warmup_done and r.n_done > 0] or outs
    n = min((r.n_done for r in kept), default=0)
    if interrupted:
        warn_interrupted(n, len(kept), chains, sum(not r.warmup_done for r in outs))
    if kept:
        unconstrained = np.stack([r.draws[:n] for r in kept])
        per_step = [np.stack([r.stats[j][:n] for r in kept]) for j in range(len(steps))]
    else:
        unconstrained = np.empty((0, 0, model.ndim))
        per_step = [np.empty((0, 0, len(s.stat_names))) for s in steps]
    posterior = posterior_draws(model, unconstrained)
    return Trace(posterior, step_stats(steps, per_step), unconstrained, elapsed, tune, interrupted)


def step_stats(steps: Sequence[Step], per_step: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Return ``{name: (chain, draw[, step])}`` of each step's (chain, draw, n_stats) array.

    A name several steps report is stacked on a last axis, one entry per step.
    """
    columns: dict[str, list[tuple[np.ndarray, Any]]] = {}
    for s, arr in zip(steps, per_step, strict=True):
        for k, (name, dtype) in enumerate(s.stats_dtypes.items()):
            columns.setdefault(name, []).append((arr[..., k], dtype))
    out: dict[str, np.ndarray] = {}
    for name, cols in columns.items():
        dtype = np.result_type(*(d for _, d in cols))
        values = [c.astype(dtype) for c, _ in cols]
        out[name] = values[0] if len(values) == 1 else np.stack(values, axis=-1)
    shape = per_step[0].shape[:2]
    out["tune"] = np.zeros(shape, dtype=bool)
    return out
