"""``kl.sample(nuts_sampler="nutpie")``: nutpie's NUTS on a kiln model.

On a backend that provides the native log-density ABI (``CompiledModel.native()``:
Numba, the default, and C) nutpie calls the model's C functions (logp and expand,
without the GIL); on any other backend it calls the compiled model back through
Python. Both give the layout of kiln's own NUTS (posterior, coords and dims,
``sample_stats`` names). Ctrl-C returns the draws made so far, with a
``SamplingInterrupted`` warning.
"""

from __future__ import annotations

import time
import warnings

import kiln_samplers
from kiln._engines import EngineResult, EngineRun, run_engine_on_executor
from kiln_compile import NativeUnavailable, get_linker
from kiln_graph import KilnValueError

#: nutpie's default tree depth (its ``maxdepth`` setting).
_MAXDEPTH = 10


def run_nutpie(run: EngineRun) -> EngineResult:
    """Sample ``run.model`` with nutpie: C functions where the backend has the native ABI.

    Elsewhere nutpie calls the model back through Python. A nutpie outside
    :data:`kiln_samplers.SUPPORTED_NUTPIE_VERSIONS` is driven through its public API
    (Python callbacks), with one ``NutpieVersionWarning``.

    Raises
    ------
    KilnValueError
        For ``nuts_sampler_kwargs`` nutpie does not take (naming them).
    ImportError
        If nutpie is not installed.
    """
    try:
        _, settings = kiln_samplers.nutpie_options(run.options)
    except ValueError as exc:
        raise KilnValueError(str(exc)) from None
    start = time.perf_counter()
    compiled = run.model.logp_dlogp_function(mode=run.mode, jitter=run.jitter)
    compiled.expand_function  # noqa: B018  # compiled here: its time is compile time
    max_treedepth = int(settings.get("maxdepth", _MAXDEPTH))
    if run.executor is not None:  # a chain per task (kiln._distributed_engines)
        compile_time = time.perf_counter() - start
        return run_engine_on_executor(run, compiled, "nutpie", compile_time, max_treedepth)
    native = None
    path = "python"
    if kiln_samplers.nutpie_private_api():
        try:
            native = compiled.native()
            path = "pointers"
        except NativeUnavailable as exc:  # no native ABI here: nutpie calls back into Python
            if hasattr(get_linker(compiled.function.linker), "native"):
                warnings.warn(f"nutpie: using the Python callbacks: {exc}", stacklevel=3)
    compile_time = time.perf_counter() - start
    trace = kiln_samplers.sample_nutpie(
        compiled,
        draws=run.draws,
        tune=run.tune,
        chains=run.chains,
        cores=run.cores,
        random_seed=run.random_seed,
        target_accept=run.target_accept,
        native=native,
        progressbar=run.progressbar,
        options=run.options,
    )
    attrs = {"nutpie_path": path, "nutpie_version": kiln_samplers.import_nutpie().__version__}
    return EngineResult(trace, compiled, compile_time, max_treedepth, attrs)
