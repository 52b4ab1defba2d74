"""The JAX NUTS engines, numpyro and blackjax: the model compiled on the JAX backend.

Their samplers are JAX programs that call the log-density inside XLA, so the model is
always linked by kiln-jax: with no backend chosen, ``kiln.sample`` picks ``"jax"``;
another backend chosen explicitly is an error that says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kiln_samplers
from kiln._engines import ENGINES, EngineResult, EngineRun, run_engine_on_executor
from kiln_compile import get_linker
from kiln_graph import KilnValueError
from kiln_model import CompiledModel


def _compile_on_jax(run: EngineRun, engine: str) -> tuple[CompiledModel, float]:
    backend = ENGINES[engine].backend
    assert backend is not None
    linker = run.mode.linker
    if run.backend_given and linker not in (backend, "auto"):
        raise KilnValueError(
            f"nuts_sampler={engine!r} samples with JAX and needs the JAX backend, but the "
            f"backend is {linker!r}: pass backend={backend!r} or leave backend unset (kiln "
            f"then picks {backend!r}); for the Numba backend use nuts_sampler='kiln' or "
            "'nutpie'"
        )
    get_linker(backend)  # a clear error when kiln-jax is not installed
    from kiln_jax import enable_compilation_cache

    enable_compilation_cache()
    start = time.perf_counter()
    mode = run.mode.with_linker(backend)
    compiled = run.model.logp_dlogp_function(mode=mode, jitter=run.jitter)
    return compiled, time.perf_counter() - start


def _run(run: EngineRun, engine: str, sampler: Callable[..., Any]) -> EngineResult:
    compiled, graph_time = _compile_on_jax(run, engine)
    options = dict(run.options)
    depth_keys = ("max_treedepth", "max_tree_depth", "max_num_doublings")
    max_treedepth = int(next((options[k] for k in depth_keys if k in options), 10))
    if run.executor is not None:  # a chain per task (kiln._distributed_engines)
        return run_engine_on_executor(run, compiled, engine, graph_time, max_treedepth)
    trace, xla_time = sampler(
        compiled,
        draws=run.draws,
        tune=run.tune,
        chains=run.chains,
        cores=run.cores,
        random_seed=run.random_seed,
        target_accept=run.target_accept,
        progressbar=run.progressbar,
        options=options,
    )
    return EngineResult(
        trace,
        compiled,
        graph_time + (xla_time or 0.0),
        max_treedepth,
        attrs={
            "graph_compile_time": graph_time,
            # (unknown on a JAX whose compile event kiln_samplers was not checked on)
            "xla_compile_time": float("nan") if xla_time is None else xla_time,
        },
    )


def run_numpyro(run: EngineRun) -> EngineResult:
    """Run numpyro's NUTS on the JAX-linked model (chains in parallel threads by default)."""
    return _run(run, "numpyro", kiln_samplers.sample_numpyro)


def run_blackjax(run: EngineRun) -> EngineResult:
    """Run blackjax's NUTS with its window adaptation on the JAX-linked model."""
    return _run(run, "blackjax", kiln_samplers.sample_blackjax)
