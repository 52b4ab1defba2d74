"""``kl.sample(executor=..., nuts_sampler=...)`` for nutpie and the JAX engines: a chain per task.

As for kiln's NUTS (:mod:`kiln._distributed`), the client compiles the model, writes its
log-density as data (:meth:`kiln_model.CompiledModel.package`) and submits one
:class:`EngineChainTask` per chain: the package, the engine's name, the chain's seed
(the ``SeedSequence`` child chain ``c`` gets from ``random_seed``) and the engine's
options. A worker rebuilds the log-density (:func:`kiln_model.load_package`) and runs
the engine's sampler for that one chain; the expand function there is the identity, so
the task sends back the unconstrained draws and the statistics, and the client computes
the values (:func:`kiln_samplers.trace_from_chain_traces`).

nutpie and numpyro seed the chains of one multi-chain run their own way, so chain ``c``
of a distributed run is the engine's one-chain run with chain ``c``'s seed, not chain
``c`` of a local multi-chain run: the same ``random_seed`` gives the same draws on any
executor and any number of workers (:func:`sample_engine_chain_task` run here gives
them too). On a worker nutpie calls the model's C functions where the backend has the
native ABI (Numba, C); the JAX engines need a package of the JAX backend. Faults,
retries and Ctrl-C are :func:`kiln._distributed._gather`'s; a chain's bar moves when its
task ends (the engines report no progress from inside a run).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

import kiln_samplers
from kiln._distributed import ChainOutcome, _details, _gather, _worker_name
from kiln._executors import ExecutorAdapter
from kiln_compile import Mode, NativeModel, NativeUnavailable, function, native_model
from kiln_graph import tensor as kt
from kiln_model import CompiledModel, ModelPackage, PackagedModel, load_package

#: The engines that run a chain per task, and how each samples one chain.
REMOTE_ENGINES = ("nutpie", "numpyro", "blackjax")


@dataclasses.dataclass(frozen=True)
class EngineChainTask:
    """One chain of an engine: data only (the package, the seed, the engine's options)."""

    package: ModelPackage
    engine: str
    chain: int
    seed: np.random.SeedSequence
    draws: int
    tune: int
    target_accept: float
    options: Mapping[str, Any]
    topic: str = ""
    reporter: str | None = None

    @property
    def chain_ids(self) -> tuple[int, ...]:
        """The chains this task runs."""
        return (self.chain,)


class _WorkerModel:
    """A rebuilt log-density as the engines' compiled-model protocol, expanding to itself.

    Its one output ``x`` is the unconstrained vector: the values of the draws are
    computed by the client, from the client's model.
    """

    out_names = ["x"]
    dims: dict[str, Any] = {}
    coords: dict[str, Any] = {}

    def __init__(self, model: PackagedModel) -> None:
        self._model = model
        self.ndim = model.ndim
        self.discrete_mask = model.discrete_mask
        self._native: NativeModel | None = None

    def logp_dlogp(self, x: Any) -> tuple[float, np.ndarray]:
        """Return the log-density at ``x`` and its gradient."""
        return self._model.logp_dlogp(x)

    def logp(self, x: Any) -> float:
        """Return the log-density at ``x``."""
        return self._model.logp(x)

    def initial_point(self, seed: Any = None) -> np.ndarray:
        """Return the start point, jittered by ``seed`` as the client's model would."""
        return self._model.initial_point(seed)

    def expand(self, x: Any) -> dict[str, np.ndarray]:
        """Return ``{"x": x}``."""
        return {"x": np.array(x, dtype="float64")}

    def logp_jax(self, x: Any) -> Any:
        """Return the log-density at ``x`` as a JAX scalar (JAX packages)."""
        return self._model.logp_jax(x)

    def expand_jax(self, x: Any) -> dict[str, Any]:
        """Return ``{"x": x}``."""
        return {"x": x}

    def native(self) -> NativeModel:
        """Return the log-density and the identity expand as the native C ABI.

        Raises ``kiln_compile.NativeUnavailable`` where the backend has none.
        """
        if self._native is None:
            logp = self._model.function
            x = kt.vector("x", shape=(self.ndim,))
            identity = function([x], [x], mode=Mode(None, linker=logp.linker), trust_input=True)
            self._native = native_model(logp, identity)
        return self._native


_worker_models: dict[str, _WorkerModel] = {}
_worker_models_lock = threading.Lock()


def _worker_model(package: ModelPackage, where: str) -> _WorkerModel:
    """Return the worker's model of ``package``, built once per process.

    Later chains of the same model on this worker reuse its native functions (the
    identity expand linked once) and, for the JAX engines, its traced functions.
    """
    model = load_package(package, where=where)
    with _worker_models_lock:
        found = _worker_models.get(package.key)
        if found is None or found._model is not model:
            found = _worker_models[package.key] = _WorkerModel(model)
        return found


def _one_chain(task: EngineChainTask) -> dict[str, Any]:
    """Return the arguments every engine's sampler takes for the task's one chain."""
    return {
        "draws": task.draws,
        "tune": task.tune,
        "chains": 1,
        "cores": 1,
        "random_seed": task.seed,
        "target_accept": task.target_accept,
        "progressbar": False,
        "options": task.options,
    }


def _nutpie_chain(model: _WorkerModel, task: EngineChainTask) -> kiln_samplers.Trace:
    native = None
    if kiln_samplers.nutpie_private_api():
        try:
            native = model.native()
        except NativeUnavailable:
            native = None  # nutpie calls the model back through Python
    return kiln_samplers.sample_nutpie(model, native=native, **_one_chain(task))


def _jax_chain(model: _WorkerModel, task: EngineChainTask) -> kiln_samplers.Trace:
    from kiln_jax import enable_compilation_cache

    enable_compilation_cache()
    sampler = {"numpyro": kiln_samplers.sample_numpyro, "blackjax": kiln_samplers.sample_blackjax}
    trace, _ = sampler[task.engine](model, **_one_chain(task))
    return trace  # type: ignore[no-any-return]


def sample_engine_chain_task(task: EngineChainTask) -> ChainOutcome:
    """Run one chain of ``task.engine`` where this function is called (a worker)."""
    where = _worker_name()
    start = time.perf_counter()
    model = _worker_model(task.package, f"worker {where}")
    rebuilt = time.perf_counter()
    run = _nutpie_chain if task.engine == "nutpie" else _jax_chain
    # The placeholder posterior (the vector itself) is not sent back: the client expands.
    trace = dataclasses.replace(run(model, task), posterior={})
    return ChainOutcome(task.chain, trace, where, rebuilt - start, time.perf_counter() - rebuilt)


def sample_engine_on_executor(
    compiled: CompiledModel,
    adapter: ExecutorAdapter,
    engine: str,
    *,
    draws: int,
    tune: int,
    chains: int,
    random_seed: Any,
    target_accept: float,
    options: Mapping[str, Any],
    progressbar: bool,
) -> tuple[kiln_samplers.Trace, dict[str, Any]]:
    """Run ``chains`` chains of ``engine`` as tasks of ``adapter``; return the trace and details.

    Raises
    ------
    ChainsFailedError
        If chains failed after their retries (the others' draws in ``error.trace``).
    """
    package = compiled.package()
    seeds = kiln_samplers.chain_seeds(random_seed, chains)
    tasks = [
        EngineChainTask(package, engine, c, seeds[c], draws, tune, target_accept, dict(options))
        for c in range(chains)
    ]
    got = _gather(adapter, sample_engine_chain_task, tasks, chains, draws + tune, progressbar)
    trace = kiln_samplers.trace_from_chain_traces(
        compiled, got.results, chains, tune, got.elapsed, got.interrupted
    )
    return trace, _details(got, trace, adapter, package, chains)
