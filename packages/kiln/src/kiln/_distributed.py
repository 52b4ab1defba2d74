"""``kl.sample(executor=...)``: kiln's NUTS chains as tasks of a distributed engine.

The client compiles the model (as for a local run), writes its log-density as data
(:meth:`kiln_model.CompiledModel.package`) and submits one :class:`ChainTask` per
chain: the package, the chain's seed (the same ``SeedSequence`` child a local run
gives that chain) and the NUTS settings. A worker rebuilds the log-density once per
process (:func:`kiln_model.load_package`: versions checked, no rewriting, its own kiln
cache), runs the chain exactly as a local thread would (``init_chain``, ``run_chain``)
and returns the :class:`ChainOutcome`. The client gathers the chains in order and
computes the draws' values itself: chain ``c`` of a run draws what chain ``c`` of a
local run with the same ``random_seed`` draws, to the bit.

Faults: a task that raised is retried (by Dask, or resubmitted by kiln where the
executor still takes tasks); a task whose worker died is rerun by Dask elsewhere.
A chain that still fails ends the run with :class:`ChainsFailedError`, naming each
failed chain and its exception, and holding the other chains' draws
(``error.idata``). Ctrl-C cancels the chains still running and returns the finished
ones with a :class:`kiln_samplers.SamplingInterrupted` warning.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

import kiln_samplers
from kiln._executors import ExecutorAdapter
from kiln_compile import NativeUnavailable
from kiln_graph import KilnValueError
from kiln_model import CompiledModel, ModelPackage, load_package

#: How often the client looks at its futures (seconds): Ctrl-C is seen this fast.
POLL_S = 0.05


class ChainsFailedError(KilnValueError):
    """Chains of a distributed run failed after their retries.

    ``failures`` maps each failed chain to its exception; ``idata`` (set by
    ``kl.sample``) holds the draws of the chains that finished, ``trace`` the same as a
    :class:`kiln_samplers.Trace`.
    """

    def __init__(self, message: str, failures: dict[int, BaseException]) -> None:
        super().__init__(message)
        self.failures = failures
        self.trace: kiln_samplers.Trace | None = None
        #: The engine's result of the finished chains, and their DataTree (kl.sample).
        self.result: Any = None
        self.idata: Any = None


@dataclasses.dataclass(frozen=True)
class ChainTask:
    """One chain's task: data only (the package, the seed, the settings)."""

    package: ModelPackage
    chain: int
    seed: np.random.SeedSequence
    draws: int
    tune: int
    settings: kiln_samplers.NutsSettings
    #: The progress topic of the run and the reporter kind (None: no reports).
    topic: str
    reporter: str | None

    @property
    def chain_ids(self) -> tuple[int, ...]:
        """The chains this task runs."""
        return (self.chain,)


@dataclasses.dataclass
class ChainOutcome:
    """What a worker sends back: the chain's result and where and how it ran.

    The result is kiln's NUTS chain's, or another engine's one-chain trace
    (:mod:`kiln._distributed_engines`).
    """

    chain: int
    result: kiln_samplers.ChainResult | kiln_samplers.Trace
    worker: str
    #: Seconds to rebuild the log-density (about 0 when the process had it) and to sample.
    rebuild_s: float
    sampling_s: float

    def chain_results(self) -> list[kiln_samplers.ChainResult | kiln_samplers.Trace]:
        """Return the results of the task's chains, in its ``chain_ids`` order."""
        return [self.result]


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _TaskProgress:
    """A task's progress for the chains it runs: ``updater(chain)`` as :class:`Progress`'s.

    On Dask each update goes to the client as an event (:func:`kiln._executor_dask.reporter`);
    other executors report nothing (the client's bar moves when the task ends).
    """

    def __init__(self, topic: str, kind: str | None) -> None:
        self.topic, self.kind = topic, kind
        self._finish: list[Callable[[], None]] = []

    def updater(self, chain: int) -> Callable[[int, np.ndarray, bool], None] | None:
        """Return the callback ``update(n_new, stats_of_the_new, tuning)`` of ``chain``."""
        if self.kind != "dask":
            return lambda n, stats, tuning: None
        from kiln._executor_dask import reporter

        report = reporter(self.topic, chain)
        diverging = kiln_samplers.STAT_NAMES.index("diverging")
        self._finish.append(lambda: report(0, 0, False, True))

        def update(n: int, stats: np.ndarray, tuning: bool) -> None:
            # as Progress's: a compound step passes its count as a (1, 1) array
            divergences = 0 if tuning else int(np.sum(stats[:, diverging]))
            report(n, divergences, tuning, False)

        return update

    def finish(self) -> None:
        """Send what the chains reported since the last event."""
        for finish in self._finish:
            finish()


def sample_chain_task(task: ChainTask) -> ChainOutcome:
    """Run one chain of kiln's NUTS where this function is called (a worker).

    Rebuilds the log-density from ``task.package`` (once per process), samples with the
    compiled kernel when the backend has the native ABI, and returns the draws.
    """
    where = _worker_name()
    start = time.perf_counter()
    model = load_package(task.package, where=f"worker {where}")
    native = None
    try:
        native = model.native()
        native.refresh()
    except NativeUnavailable:
        native = None
    rebuilt = time.perf_counter()
    state = kiln_samplers.init_chain(model, task.seed, native=native)
    progress = _TaskProgress(task.topic, task.reporter)
    result = kiln_samplers.run_chain(
        model, state, task.draws, task.tune, task.settings, native, progress.updater(task.chain)
    )
    progress.finish()
    return ChainOutcome(task.chain, result, where, rebuilt - start, time.perf_counter() - rebuilt)


@dataclasses.dataclass(frozen=True)
class StepsTask:
    """The task of step-method chains: one chain, or a population's chains together."""

    package: ModelPackage
    #: kiln_samplers steps, not bound (the worker binds them to its model).
    steps: tuple[Any, ...]
    chains: tuple[int, ...]
    #: Every chain's seed (chain ``c`` draws from ``seeds[c]``, as locally).
    seeds: tuple[np.random.SeedSequence, ...]
    draws: int
    tune: int
    topic: str
    reporter: str | None

    @property
    def chain_ids(self) -> tuple[int, ...]:
        """The chains this task runs."""
        return self.chains


@dataclasses.dataclass
class StepsOutcome:
    """What a worker sends back for a :class:`StepsTask`."""

    chains: tuple[int, ...]
    results: list[kiln_samplers.StepChainResult]
    worker: str
    rebuild_s: float
    sampling_s: float

    def chain_results(self) -> list[kiln_samplers.StepChainResult]:
        """Return the results of the task's chains, in its ``chain_ids`` order."""
        return self.results


def sample_steps_task(task: StepsTask) -> StepsOutcome:
    """Run the step-method chains of ``task`` where this function is called (a worker)."""
    where = _worker_name()
    start = time.perf_counter()
    model = load_package(task.package, where=f"worker {where}")
    steps = kiln_samplers.bind_steps(model, task.steps)
    rebuilt = time.perf_counter()
    progress = _TaskProgress(task.topic, task.reporter)
    results = kiln_samplers.run_step_chains(
        model, steps, task.chains, task.seeds, task.draws, task.tune, progress
    )
    progress.finish()
    elapsed = time.perf_counter() - rebuilt
    return StepsOutcome(task.chains, results, where, rebuilt - start, elapsed)


@dataclasses.dataclass
class _Gathered:
    """The tasks' results, chain by chain (None: a chain that never finished)."""

    results: list[Any]
    outcomes: dict[int, Any]
    failures: dict[int, BaseException]
    interrupted: bool
    elapsed: float


def _gather(
    adapter: ExecutorAdapter,
    fn: Callable[[Any], Any],
    tasks: list[Any],
    chains: int,
    total: int,
    progressbar: bool,
) -> _Gathered:
    """Run ``fn(task)`` for every task on ``adapter``; retry, watch Ctrl-C, gather.

    Each task runs the chains ``task.chain_ids`` and its outcome's ``chain_results()``
    are theirs, in that order; ``total`` is each chain's number of iterations (its bar).
    """
    run_id = uuid.uuid4().hex[:12]
    topic = f"kiln-progress-{run_id}"
    tasks = [dataclasses.replace(t, topic=topic, reporter=adapter.reporter) for t in tasks]
    progress = kiln_samplers.Progress(chains, total, enabled=progressbar)
    reported = [0] * chains

    def on_message(message: dict[str, Any]) -> None:
        c, n = int(message.get("chain", -1)), int(message.get("n", 0))
        if 0 <= c < chains:
            reported[c] += n
            progress.advance(c, n, int(message.get("divergences", 0)))

    out = _Gathered([None] * chains, {}, {}, False, 0.0)
    attempts = [0] * len(tasks)
    start = time.perf_counter()
    with adapter.progress(topic, on_message):
        futures = {
            adapter.submit(fn, t, f"kiln-chain-{run_id}-{i}"): i for i, t in enumerate(tasks)
        }
        try:
            while futures:
                done = [f for f in futures if f.done()]
                if not done:
                    time.sleep(POLL_S)
                    continue
                for f in done:
                    i = futures.pop(f)
                    try:
                        outcome = f.result()
                    except Exception as exc:  # noqa: BLE001 (reported with the chain)
                        if attempts[i] < adapter.retries and adapter.can_resubmit(exc):
                            attempts[i] += 1
                            key = f"kiln-chain-{run_id}-{i}-retry{attempts[i]}"
                            futures[adapter.submit(fn, tasks[i], key)] = i
                        else:
                            out.failures.update(dict.fromkeys(tasks[i].chain_ids, exc))
                        continue
                    for c, result in zip(tasks[i].chain_ids, outcome.chain_results(), strict=True):
                        out.outcomes[c], out.results[c] = outcome, result
                        progress.advance(c, max(total - reported[c], 0))
        except KeyboardInterrupt:
            out.interrupted = True
            for f in futures:
                f.cancel()
    progress.close()
    out.elapsed = time.perf_counter() - start
    return out


def _details(
    gathered: _Gathered,
    trace: kiln_samplers.Trace,
    adapter: ExecutorAdapter,
    package: ModelPackage,
    chains: int,
) -> dict[str, Any]:
    """Return the run's details (``idata.attrs``), or raise :class:`ChainsFailedError`."""
    outcomes, failures = gathered.outcomes, gathered.failures
    details = {
        "executor": type(adapter).__name__,
        "workers": [outcomes[c].worker if c in outcomes else "" for c in range(chains)],
        "rebuild_s": [outcomes[c].rebuild_s if c in outcomes else np.nan for c in range(chains)],
        "sampling_s": [outcomes[c].sampling_s if c in outcomes else np.nan for c in range(chains)],
        "package_bytes": package.nbytes,
    }
    if failures:
        lines = "; ".join(
            f"chain {c}: {type(e).__name__}: {e}" for c, e in sorted(failures.items())
        )
        error = ChainsFailedError(
            f"{len(failures)} of {chains} chain(s) failed on the executor after their "
            f"retries ({lines}); the {chains - len(failures)} other chain(s) are in "
            "error.idata",
            failures,
        )
        error.trace = trace
        raise error
    return details


def sample_on_executor(
    compiled: CompiledModel,
    adapter: ExecutorAdapter,
    *,
    draws: int,
    tune: int,
    chains: int,
    random_seed: Any,
    settings: kiln_samplers.NutsSettings,
    progressbar: bool,
) -> tuple[kiln_samplers.Trace, dict[str, Any]]:
    """Run ``chains`` NUTS chains as tasks of ``adapter``; return the trace and run details.

    The details (``idata.attrs`` of the run) say where each chain ran and how long
    the workers took to rebuild the model.

    Raises
    ------
    ChainsFailedError
        If chains failed after their retries (the others' draws in ``error.trace``).
    """
    package = compiled.package()
    seeds = kiln_samplers.chain_seeds(random_seed, chains)
    tasks = [
        ChainTask(package, c, seeds[c], draws, tune, settings, "", None) for c in range(chains)
    ]
    got = _gather(adapter, sample_chain_task, tasks, chains, draws + tune, progressbar)
    trace = kiln_samplers.trace_from_chains(
        compiled, got.results, chains, tune, got.elapsed, got.interrupted
    )
    return trace, _details(got, trace, adapter, package, chains)


def sample_steps_on_executor(
    compiled: CompiledModel,
    adapter: ExecutorAdapter,
    steps: list[Any],
    *,
    draws: int,
    tune: int,
    chains: int,
    random_seed: Any,
    progressbar: bool,
) -> tuple[kiln_samplers.Trace, dict[str, Any]]:
    """Run step-method chains (``kiln_samplers`` steps) as tasks of ``adapter``.

    One task per chain; a population step (DEMetropolis) runs its chains in one task,
    as it does locally. Chain ``c`` draws what it draws locally. As
    :func:`sample_on_executor` otherwise.
    """
    package = compiled.package()
    seeds = tuple(kiln_samplers.chain_seeds(random_seed, chains))
    population = any(s.population for s in steps)
    groups = [tuple(range(chains))] if population else [(c,) for c in range(chains)]
    tasks = [StepsTask(package, tuple(steps), g, seeds, draws, tune, "", None) for g in groups]
    got = _gather(adapter, sample_steps_task, tasks, chains, draws + tune, progressbar)
    trace = kiln_samplers.trace_from_step_chains(
        compiled, steps, got.results, chains, tune, got.elapsed, got.interrupted
    )
    return trace, _details(got, trace, adapter, package, chains)


def executor_attrs(details: dict[str, Any]) -> dict[str, Any]:
    """Return the ``idata.attrs`` of a run's details (where and how long each chain ran)."""
    return {
        "executor": details["executor"],
        "chain_workers": ", ".join(details["workers"]),
        # Seconds each chain's worker took to rebuild the model and to sample.
        "chain_rebuild_s": [float(t) for t in details["rebuild_s"]],
        "chain_sampling_s": [float(t) for t in details["sampling_s"]],
        "package_bytes": int(details["package_bytes"]),
    }
