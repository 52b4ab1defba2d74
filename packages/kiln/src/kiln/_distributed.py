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


@dataclasses.dataclass
class ChainOutcome:
    """What a worker sends back: the chain's result and where and how it ran."""

    chain: int
    result: kiln_samplers.ChainResult
    worker: str
    #: Seconds to rebuild the log-density (about 0 when the process had it) and to sample.
    rebuild_s: float
    sampling_s: float


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _progress_callback(task: ChainTask) -> tuple[Any, Callable[[], None]]:
    """Return ``run_chain``'s progress callback for ``task`` and the one that ends it."""
    if task.reporter != "dask":
        return None, lambda: None
    from kiln._executor_dask import reporter

    report = reporter(task.topic, task.chain)
    diverging = kiln_samplers.STAT_NAMES.index("diverging")

    def progress(n: int, stats: np.ndarray, tuning: bool) -> None:
        divergences = 0 if tuning else int(np.sum(stats[:, diverging]))
        report(n, divergences, tuning, False)

    return progress, lambda: report(0, 0, False, True)


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
    progress, finish = _progress_callback(task)
    result = kiln_samplers.run_chain(
        model, state, task.draws, task.tune, task.settings, native, progress
    )
    finish()
    return ChainOutcome(task.chain, result, where, rebuilt - start, time.perf_counter() - rebuilt)


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
    """Run ``chains`` chains as tasks of ``adapter``; return the trace and run details.

    The details (``idata.attrs`` of the run) say where each chain ran and how long
    the workers took to rebuild the model.

    Raises
    ------
    ChainsFailedError
        If chains failed after their retries (the others' draws in ``error.trace``).
    """
    package = compiled.package()
    seeds = kiln_samplers.chain_seeds(random_seed, chains)
    run_id = uuid.uuid4().hex[:12]
    topic = f"kiln-progress-{run_id}"
    tasks = [
        ChainTask(package, c, seeds[c], draws, tune, settings, topic, adapter.reporter)
        for c in range(chains)
    ]
    progress = kiln_samplers.Progress(chains, draws + tune, enabled=progressbar)
    reported = [0] * chains

    def on_message(message: dict[str, Any]) -> None:
        c, n = int(message.get("chain", -1)), int(message.get("n", 0))
        if 0 <= c < chains:
            reported[c] += n
            progress.advance(c, n, int(message.get("divergences", 0)))

    results: list[kiln_samplers.ChainResult | None] = [None] * chains
    outcomes: dict[int, ChainOutcome] = {}
    failures: dict[int, BaseException] = {}
    attempts = [0] * chains
    interrupted = False
    start = time.perf_counter()
    with adapter.progress(topic, on_message):
        futures = {
            adapter.submit(sample_chain_task, t, f"kiln-chain-{run_id}-{t.chain}"): t.chain
            for t in tasks
        }
        try:
            while futures:
                done = [f for f in futures if f.done()]
                if not done:
                    time.sleep(POLL_S)
                    continue
                for f in done:
                    c = futures.pop(f)
                    try:
                        outcome = f.result()
                    except Exception as exc:  # noqa: BLE001 (reported with the chain)
                        if attempts[c] < adapter.retries and adapter.can_resubmit(exc):
                            attempts[c] += 1
                            key = f"kiln-chain-{run_id}-{c}-retry{attempts[c]}"
                            futures[adapter.submit(sample_chain_task, tasks[c], key)] = c
                        else:
                            failures[c] = exc
                        continue
                    outcomes[c] = outcome
                    results[c] = outcome.result
                    progress.advance(c, max(draws + tune - reported[c], 0))
        except KeyboardInterrupt:
            interrupted = True
            for f in futures:
                f.cancel()
    progress.close()
    elapsed = time.perf_counter() - start
    trace = kiln_samplers.trace_from_chains(compiled, results, chains, tune, elapsed, interrupted)
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
    return trace, details
