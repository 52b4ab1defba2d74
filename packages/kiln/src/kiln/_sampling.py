"""``kiln.sample``: compile a model on a backend, run a NUTS engine, return ArviZ data."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

import kiln_samplers
from kiln._arguments import (
    check_nuts_options,
    check_sample_arguments,
    explain_initial_point,
    init_options,
)
from kiln._distributed import ChainsFailedError
from kiln._distributed_engines import REMOTE_ENGINES
from kiln._engine_steps import needs_steps, run_steps
from kiln._engines import EngineResult, EngineRun, get_engine
from kiln_compile import FAST_RUN, DiskCache, Mode, available_linkers, get_mode
from kiln_graph import Constant, KilnTypeError, KilnValueError, SharedVariable
from kiln_graph.helpers import long_lived_objects
from kiln_model import Model, modelcontext

# kiln's compiled NUTS kernel is an entry of kiln's disk cache (config.cache_dir,
# config.cache), like every other compiled artefact.
kiln_samplers.use_kernel_store(DiskCache("samplers"))


def _mode(backend: str | None, compile_kwargs: Mapping[str, Any] | None) -> Mode:
    kwargs = dict(compile_kwargs or {})
    unknown = sorted(set(kwargs) - {"mode"})
    if unknown:
        raise KilnTypeError(f"compile_kwargs: unknown keys {unknown}; accepted: ['mode']")
    if backend is not None and "mode" in kwargs:
        raise KilnValueError(
            "give backend= or compile_kwargs={'mode': ...}, not both: backend picks the "
            "linker of the default mode, a mode sets rewrites and linker together"
        )
    if "mode" in kwargs:
        return get_mode(kwargs["mode"])
    if backend is None:
        return FAST_RUN
    if not isinstance(backend, str):
        raise KilnTypeError(f"backend: expected a backend name, got {backend!r}")
    if backend not in available_linkers():
        raise KilnValueError(
            f"backend: {backend!r} is not an installed backend; installed: "
            f"{available_linkers()} (others need their package, e.g. kiln-jax)"
        )
    return FAST_RUN.with_linker(backend)


def _data_groups(model: Model) -> tuple[dict[str, Any], dict[str, Any]]:
    observed, constant = {}, {}
    observed_data_vars = set()
    for info in model.observed_variables:
        v = info.value
        if isinstance(v, SharedVariable):
            observed_data_vars.add(v)
            observed[info.name] = np.asarray(v.get_value())
        elif isinstance(v, Constant):
            observed[info.name] = np.asarray(v.data)
    for name, var in model.data.items():
        if var not in observed_data_vars:
            constant[name] = np.asarray(var.get_value())
    return observed, constant


def sample(
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    random_seed: Any = None,
    backend: str | None = None,
    nuts_sampler: str = "kiln",
    compile_kwargs: Mapping[str, Any] | None = None,
    target_accept: float = 0.8,
    init: str = "auto",
    step: Any = None,
    progressbar: bool = True,
    nuts_sampler_kwargs: Mapping[str, Any] | None = None,
    idata_kwargs: Mapping[str, Any] | None = None,
    model: Model | None = None,
    executor: Any = None,
) -> Any:
    """Draw from the posterior of ``model`` (the one of the ``with`` block) with NUTS.

    Returns an ArviZ ``DataTree`` with the groups ``posterior`` (constrained values and
    deterministics, with dims and coords), ``sample_stats``, ``observed_data`` and
    ``constant_data``; its attributes hold ``sampling_time`` and ``compile_time``
    (seconds). ``backend`` picks the linker (``"numba"``, the default, runs the whole
    sampler loop in compiled code; ``"vm"`` and the others run a Python loop).

    ``nuts_sampler_kwargs`` are the NUTS engine's options. kiln's NUTS takes
    ``max_treedepth`` (10), ``max_energy_error`` (1000), ``step_size_jitter`` (each
    transition's step size is the adapted one times a uniform draw from [1 - jitter,
    1 + jitter]; by default 0.1, nutpie's, under a dense mass matrix or nutpie's
    schedule and none under a diagonal one), ``adaptation``, the warm-up
    of its diagonal mass matrix: ``"stan"`` (the default, Stan's windows) or ``"grad"``
    (nutpie's gradient-based estimate; the user guide's warm-up section compares them),
    and ``metric``: ``"auto"`` (the default: diagonal, or dense where the warm-up finds
    correlations on a posterior that looks Gaussian, for models of at most 100
    coordinates; its warm-up ends with nutpie's diagonal estimate and final 15% of
    step-size adaptation), ``"diag"`` or ``"dense"`` (Stan's windows exactly).

    ``init`` takes PyMC's names. ``"auto"`` (the default) starts each chain at a
    jittered initial point and adapts the engine's default mass matrix (kiln's NUTS:
    ``metric="auto"``; the other engines: diagonal). ``"jitter+adapt_diag"`` asks for a
    diagonal mass matrix;
    ``"jitter+adapt_full"`` for a dense one (kiln's NUTS: ``metric="dense"``, the
    covariance of the warm-up draws over Stan's windows; numpyro and blackjax:
    ``dense_mass=True``), which samples correlated posteriors (regressions on
    correlated predictors) in far fewer steps; ``"adapt_diag"`` and ``"adapt_full"``
    start at the initial point itself. The mass matrix kiln's NUTS adapted is the
    result's ``nuts_metric`` attribute.

    ``step`` takes step methods (``kl.Metropolis([mu])``, a list of them, or a
    ``kl.CompoundStep``); the free variables no step covers get NUTS (continuous),
    ``kl.BinaryMetropolis`` (Bernoulli), ``kl.CategoricalGibbsMetropolis`` (Categorical)
    or ``kl.Metropolis`` (other discrete), as PyMC assigns them; the assignment is
    printed (silenced by ``progressbar=False`` or a handler on the ``kiln`` logger).
    Each step's statistics go to ``sample_stats``.

    ``executor`` runs the chains as tasks of a distributed engine instead of threads
    of this process: a ``dask.distributed.Client`` (``pip install kiln[dask]``) or any
    ``concurrent.futures.Executor`` (a ``ProcessPoolExecutor`` on one machine). Each
    worker rebuilds the model's log-density from data shipped with the task (its own
    kiln cache makes that fast when warm); with kiln's NUTS and step methods chain
    ``c`` draws what it draws locally for the same ``random_seed``. A chain that fails
    after its retries raises :class:`kiln.ChainsFailedError`, whose ``idata`` holds the
    other chains' draws. A population step (DEMetropolis) runs its chains together in
    one task. nutpie, numpyro and blackjax run one chain per task too: chain ``c`` is
    the engine's one-chain run with chain ``c``'s seed, the same on any executor (not
    chain ``c`` of a local multi-chain run of that engine).

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 1)
    ...     idata = kl.sample(random_seed=1)
    """
    check_sample_arguments(
        draws=draws,
        tune=tune,
        chains=chains,
        cores=cores,
        random_seed=random_seed,
        backend=backend,
        nuts_sampler=nuts_sampler,
        compile_kwargs=compile_kwargs,
        target_accept=target_accept,
        init=init,
        progressbar=progressbar,
        nuts_sampler_kwargs=nuts_sampler_kwargs,
        idata_kwargs=idata_kwargs,
        model=model,
        executor=executor,
    )
    m = modelcontext(model)
    mode = _mode(backend, compile_kwargs)
    engine = get_engine(nuts_sampler)
    steps = needs_steps(m, step)
    options = init_options(init, nuts_sampler, nuts_sampler_kwargs, bool(steps))
    if nuts_sampler == "kiln":
        check_nuts_options(options, float(target_accept))
    if steps:  # step methods: given, or for discrete variables
        if nuts_sampler != "kiln":
            raise KilnValueError(
                f"nuts_sampler={nuts_sampler!r} samples continuous variables with NUTS only; "
                "step methods (step=..., or the ones discrete variables need) run with "
                "nuts_sampler='kiln'"
            )
        engine = functools.partial(run_steps, step=step)
    if executor is not None and nuts_sampler not in ("kiln", *REMOTE_ENGINES):
        raise KilnValueError(
            f"executor: chains run on an executor with nuts_sampler in "
            f"{['kiln', *REMOTE_ENGINES]} (and step methods); got nuts_sampler={nuts_sampler!r}"
        )
    idata_options = dict(idata_kwargs or {})
    unknown = sorted(set(idata_options) - {"log_likelihood"})
    if unknown:
        raise KilnTypeError(f"idata_kwargs: unknown keys {unknown}; accepted: ['log_likelihood']")
    run = EngineRun(
        model=m,
        mode=mode,
        backend_given=backend is not None or bool(compile_kwargs),
        draws=draws,
        tune=tune,
        chains=chains,
        cores=cores,
        random_seed=random_seed,
        target_accept=target_accept,
        jitter=init.startswith("jitter+") or init == "auto",
        progressbar=progressbar,
        options=options,
        executor=executor,
    )
    # What it makes (compiled functions, the trace, the DataTree) outlives it. A with
    # block, not a decorator: warnings name the caller's line through a fixed stack depth.
    with long_lived_objects():
        try:
            result = explain_initial_point(engine, m)(run)
        except ChainsFailedError as error:
            if error.result is not None:  # the chains that finished, as the usual DataTree
                error.idata = _to_datatree(m, error.result, nuts_sampler, idata_options)
            raise
        check = None
        if not result.trace.interrupted:  # an interrupted run's one warning says it is partial
            # Read from the arrays (not the DataTree), in another thread while this one
            # builds the DataTree; only what the screen picks is computed on every draw
            # (the warnings are the exact check's). The free variables, as PyMC checks (a
            # deterministic is a function of them).
            check = kiln_samplers.start_check_diagnostics(
                result.trace,
                result.max_treedepth,
                exact_extremes=False,
                var_names=[v.name for v in m.free_variables if v.name in result.trace.posterior],
            )
        idata = _to_datatree(m, result, nuts_sampler, idata_options)
        if check is not None:
            check()
    return idata


def _to_datatree(
    m: Model, result: EngineResult, nuts_sampler: str, idata_options: Mapping[str, Any]
) -> Any:
    """Return the ArviZ DataTree of an engine's result (posterior, stats, data groups)."""
    compiled, trace = result.compiled, result.trace
    observed, constant = _data_groups(m)
    dims = {**compiled.dims, **{k: m.named_dims.get(k) for k in [*observed, *constant]}}
    idata = kiln_samplers.to_datatree(
        trace,
        dims=dims,
        coords=compiled.coords,
        observed_data=observed,
        constant_data=constant,
        attrs={
            "compile_time": result.compile_time,
            "backend": compiled.function.linker,
            "nuts_sampler": nuts_sampler,
            **result.attrs,
        },
    )
    if idata_options.get("log_likelihood"):
        idata["log_likelihood"] = _log_likelihood(compiled, trace, dims, compiled.coords)
    return idata


def _log_likelihood(
    compiled: Any, trace: Any, dims: Mapping[str, Any], coords: Mapping[str, Any]
) -> Any:
    """Return the pointwise log-likelihood of every draw as a DataTree group."""
    out = kiln_samplers.map_draws(compiled.observed_logp, trace.unconstrained)
    group_dims = {k: list(dims[k]) for k in out if dims.get(k)}
    import arviz_base  # xarray and pandas: half of `import kiln`, so on use

    tree = arviz_base.from_dict(
        {"log_likelihood": out},
        dims=group_dims,
        coords={k: list(v) for k, v in coords.items()},
    )
    return tree["log_likelihood"]
