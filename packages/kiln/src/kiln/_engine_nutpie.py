"""``kl.sample(nuts_sampler="nutpie")``: nutpie's NUTS on a kiln model.

On the Numba backend (the default) nutpie calls the model's C callbacks
(``kiln_numba.native_c_pointers``: logp and expand, without the GIL); on any other
backend it calls the compiled model back through Python. Both give the layout of
kiln's own NUTS (posterior, coords and dims, ``sample_stats`` names). Ctrl-C returns
the draws made so far, with a ``SamplingInterrupted`` warning.
"""

from __future__ import annotations

import time
import warnings

import kiln_samplers
from kiln._engines import EngineResult, EngineRun
from kiln_graph import KilnTypeError, KilnValueError
from kiln_numba import native_c_pointers

#: nutpie's default tree depth (its ``maxdepth`` setting).
_MAXDEPTH = 10


def run_nutpie(run: EngineRun) -> EngineResult:
    """Sample ``run.model`` with nutpie: C callbacks on Numba, Python callbacks otherwise.

    A nutpie outside :data:`kiln_samplers.SUPPORTED_NUTPIE_VERSIONS` is driven through
    its public API (Python callbacks), with one ``NutpieVersionWarning``.

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
    native = None
    path = "python"
    if compiled.function.linker == "numba" and kiln_samplers.nutpie_private_api():
        try:
            native = native_c_pointers(compiled.function, compiled.expand_function)
            path = "pointers"
        except KilnTypeError as exc:  # an Op in object mode: nutpie calls back into Python
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
    max_treedepth = int(settings.get("maxdepth", _MAXDEPTH))
    return EngineResult(trace, compiled, compile_time, max_treedepth, attrs)
