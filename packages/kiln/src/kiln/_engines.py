"""The NUTS engines ``kiln.sample`` can drive, one run function each.

An engine takes an :class:`EngineRun` (the model, the mode and the sampling options
``kiln.sample`` validated) and returns an :class:`EngineResult`: a
:class:`kiln_samplers.Trace` (posterior draws with the model's names and shapes,
``sample_stats`` in kiln's vocabulary, the unconstrained draws) and the compiled model
the draws came from. ``kiln.sample`` turns every engine's result into the same ArviZ
layout. Engines are registered in :data:`ENGINES` by name, with the package each needs
and the ``module:function`` that runs it (imported only when that engine is used).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import kiln_samplers
from kiln_compile import Mode, NativeUnavailable, get_linker, linker_name_of
from kiln_graph import KilnValueError
from kiln_model import CompiledModel, Model


@dataclasses.dataclass(frozen=True)
class EngineRun:
    """What ``kiln.sample`` asks of an engine (arguments already validated).

    ``backend_given`` says whether the user chose the backend (``backend=`` or
    ``compile_kwargs``): an engine that needs one backend may pick it when the user did
    not, and must raise a clear error when the user chose another.
    """

    model: Model
    mode: Mode
    backend_given: bool
    draws: int
    tune: int
    chains: int
    cores: int | None
    random_seed: Any
    target_accept: float
    jitter: bool
    progressbar: bool
    options: Mapping[str, Any]  # nuts_sampler_kwargs
    #: Where the chains run: None (threads here), a Dask Client or a futures Executor.
    executor: Any = None


@dataclasses.dataclass
class EngineResult:
    """An engine's draws, the compiled model they belong to, and its timings."""

    trace: kiln_samplers.Trace
    compiled: CompiledModel
    compile_time: float
    max_treedepth: int
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)


Engine = Callable[[EngineRun], EngineResult]


@dataclasses.dataclass(frozen=True)
class EngineEntry:
    """A registered engine: the package it needs (None: only kiln) and where it lives.

    ``backend`` names the one backend the engine samples on (None: any backend), and
    ``note`` is what the docs' table of NUTS engines says about it (``nox -s docs``
    fails on an entry without one).
    """

    package: str | None
    target: str  # "module:function"
    backend: str | None = None
    note: str = ""

    def load(self) -> Engine:
        """Import and return the engine's run function."""
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


#: The NUTS engines, by the name ``kiln.sample(nuts_sampler=...)`` takes.
ENGINES: dict[str, EngineEntry] = {
    "kiln": EngineEntry(
        None,
        "kiln._engines:run_kiln",
        note="kiln's own NUTS. On a backend with the native log-density ABI (Numba, C) "
        "the whole trajectory loop is one compiled kernel calling the model's C function, "
        "chains in threads without the GIL; on other backends the same algorithm runs as "
        "a Python loop.",
    ),
    "nutpie": EngineEntry(
        "nutpie",
        "kiln._engine_nutpie:run_nutpie",
        note="nutpie's NUTS (Rust). On a backend with the native log-density ABI "
        "(Numba, C) it calls the model through its C function pointers "
        "(`CompiledModel.native()`), elsewhere through the host `logp_dlogp`.",
    ),
    "numpyro": EngineEntry(
        "numpyro",
        "kiln._engine_jax:run_numpyro",
        backend="jax",
        note="numpyro's NUTS, a JAX program that calls the log-density inside XLA; "
        "chains vectorized by default.",
    ),
    "blackjax": EngineEntry(
        "blackjax",
        "kiln._engine_jax:run_blackjax",
        backend="jax",
        note="blackjax's NUTS with its window adaptation, a JAX program like numpyro's.",
    ),
}


def get_engine(name: Any) -> Engine:
    """Return the run function of the engine ``name``.

    Raises
    ------
    KilnValueError
        For an unknown name (listing the valid ones) or an engine whose package is not
        installed (naming it).
    """
    if not isinstance(name, str) or name not in ENGINES:
        raise KilnValueError(f"nuts_sampler: unknown sampler {name!r}; valid: {sorted(ENGINES)}")
    entry = ENGINES[name]
    if entry.package is not None and importlib.util.find_spec(entry.package) is None:
        raise KilnValueError(
            f"nuts_sampler={name!r} needs the package {entry.package!r}: "
            f"pip install {entry.package}"
        )
    return entry.load()


def run_kiln(run: EngineRun) -> EngineResult:
    """Kiln's own NUTS: a compiled kernel on a backend with the native ABI, Python otherwise.

    Whether the backend has it is the linker's capability (``kiln_compile.NativeLinker``),
    asked through ``CompiledModel.native()``, never the backend's name.
    """
    options = dict(run.options)
    settings = kiln_samplers.NutsSettings(target_accept=run.target_accept, **options)
    start = time.perf_counter()
    native_backend = hasattr(get_linker(linker_name_of(run.mode)), "native")
    if native_backend and run.executor is None:  # on another core, while the model compiles
        kiln_samplers.prefetch_native_kernel()
    compiled = run.model.logp_dlogp_function(mode=run.mode, jitter=run.jitter)
    native = None
    try:
        native = compiled.native(expand=False) if run.executor is None else None
    except NativeUnavailable as exc:
        if native_backend:  # a backend without the native ABI samples in Python anyway
            warnings.warn(
                f"kl.sample: the model's log-density cannot be called by the compiled NUTS "
                f"kernel ({exc}); sampling with the Python kernel, which is many times "
                "slower (idata.attrs['nuts_kernel'] == 'python')",
                kiln_samplers.SlowPathWarning,
                stacklevel=3,
            )
    # The draws' batched expand function (values and deterministics of all draws in one
    # call, on the Python VM: milliseconds) is built now rather than after sampling, so
    # that a graph that cannot be batched is said before the chains run.
    try:
        compiled.expand_draws(compiled.initial_point(seed=0)[None])
    except Exception:  # noqa: BLE001 (a bad start point: the draws are evaluated later)
        pass
    if compiled.expand_draws_problem is not None:
        warnings.warn(
            "kl.sample: the model's values and deterministics are computed draw by draw "
            "after sampling (a Python loop, slow for many draws): batching them failed "
            f"({compiled.expand_draws_problem})",
            kiln_samplers.SlowPathWarning,
            stacklevel=3,
        )
    compile_time = time.perf_counter() - start
    if run.executor is not None:
        return _run_on_executor(run, compiled, settings, compile_time)
    trace = kiln_samplers.sample_nuts(
        compiled,
        draws=run.draws,
        tune=run.tune,
        chains=run.chains,
        cores=run.cores,
        random_seed=run.random_seed,
        settings=settings,
        native=native,
        progressbar=run.progressbar,
    )
    return EngineResult(trace, compiled, compile_time, settings.max_treedepth)


def _run_on_executor(
    run: EngineRun, compiled: CompiledModel, settings: Any, compile_time: float
) -> EngineResult:
    """Kiln's NUTS with each chain a task of ``run.executor`` (:mod:`kiln._distributed`)."""
    from kiln._distributed import sample_on_executor

    def sample(adapter: Any) -> tuple[kiln_samplers.Trace, dict[str, Any]]:
        return sample_on_executor(
            compiled,
            adapter,
            draws=run.draws,
            tune=run.tune,
            chains=run.chains,
            random_seed=run.random_seed,
            settings=settings,
            progressbar=run.progressbar,
        )

    result = run_chains_on_executor(run, compiled, compile_time, settings.max_treedepth, sample)
    kernel = result.trace.kernel or ""
    if "python" in kernel and hasattr(get_linker(compiled.function.linker), "native"):
        warnings.warn(
            "kl.sample: on the workers the model's log-density could not be called by the "
            "compiled NUTS kernel; the chains ran the Python kernel, which is many times "
            "slower (idata.attrs['nuts_kernel'])",
            kiln_samplers.SlowPathWarning,
            stacklevel=4,
        )
    return result


def run_chains_on_executor(
    run: EngineRun,
    compiled: CompiledModel,
    compile_time: float,
    max_treedepth: int,
    sample: Callable[[Any], tuple[kiln_samplers.Trace, dict[str, Any]]],
) -> EngineResult:
    """Return an engine's result of ``sample(adapter)``, its chains tasks of ``run.executor``.

    The result's attributes say where each chain ran (:func:`kiln._distributed.executor_attrs`);
    a :class:`kiln.ChainsFailedError` carries the finished chains' result.
    """
    from kiln._distributed import ChainsFailedError, executor_attrs
    from kiln._executors import executor_adapter

    try:
        trace, details = sample(executor_adapter(run.executor))
    except ChainsFailedError as error:
        if error.trace is not None:
            error.result = EngineResult(error.trace, compiled, compile_time, max_treedepth)
        raise
    return EngineResult(trace, compiled, compile_time, max_treedepth, executor_attrs(details))


def run_engine_on_executor(
    run: EngineRun, compiled: CompiledModel, engine: str, compile_time: float, max_treedepth: int
) -> EngineResult:
    """Run nutpie's or a JAX engine's chains as tasks of ``run.executor``, one each.

    See :mod:`kiln._distributed_engines`.
    """
    from kiln._distributed_engines import sample_engine_on_executor

    def sample(adapter: Any) -> tuple[kiln_samplers.Trace, dict[str, Any]]:
        return sample_engine_on_executor(
            compiled,
            adapter,
            engine,
            draws=run.draws,
            tune=run.tune,
            chains=run.chains,
            random_seed=run.random_seed,
            target_accept=run.target_accept,
            options=run.options,
            progressbar=run.progressbar,
        )

    return run_chains_on_executor(run, compiled, compile_time, max_treedepth, sample)
