"""The arguments of kiln's sampling entry points, checked before anything compiles.

Every check names the argument, what it received and what it expects; a backend or
NUTS engine whose package is missing names the ``pip install`` that brings it. The
model's own input (parameters, data) is checked by :mod:`kiln_model` as the model is
built; a start point with a non-finite log-density is explained by
:func:`explain_initial_point`, which names the variables whose terms are not finite.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import kiln_samplers
from kiln._engines import ENGINES, Engine, EngineResult, EngineRun
from kiln._executors import executor_adapter
from kiln_compile import KNOWN_BACKENDS, BackendNotInstalledError, available_linkers, get_linker
from kiln_graph import KilnTypeError, KilnValueError
from kiln_model import Model, ModelError, check_initial_point

#: The ``init=`` methods of ``kl.sample`` (PyMC's names): ``jitter+`` starts the chains
#: at jittered points; ``adapt_full`` adapts a dense mass matrix, ``adapt_diag`` a
#: diagonal one; ``auto`` is ``jitter+`` and the engine's default mass matrix.
INITS = ("auto", "jitter+adapt_diag", "adapt_diag", "jitter+adapt_full", "adapt_full")

#: The option of each engine that ``init`` sets: its mass matrix, dense or diagonal.
_METRIC_OPTION: dict[str, tuple[str, dict[str, Any]]] = {
    "kiln": ("metric", {"adapt_full": "dense", "adapt_diag": "diag"}),
    "numpyro": ("dense_mass", {"adapt_full": True, "adapt_diag": False}),
    "blackjax": ("dense_mass", {"adapt_full": True, "adapt_diag": False}),
}

#: The ``pip install`` that brings each backend (kiln's extras where there is one).
_BACKEND_INSTALL = {
    "jax": "kiln[jax]",
    "torch": "kiln[torch]",
    "mlx": "kiln[mlx]",
    "mlx_float32": "kiln[mlx]",
}

#: The packages a backend's linker imports, beyond its kiln package.
_BACKEND_NEEDS = {
    "jax": ("jax",),
    "numba": ("numba",),
    "torch": ("torch",),
    "mlx": ("mlx.core",),
    "mlx_float32": ("mlx.core",),
}


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value: Any, low: int, allow_none: bool = False) -> None:
    """Raise unless ``value`` is an int ``>= low`` (or None when ``allow_none``)."""
    if value is None and allow_none:
        return
    if not _is_int(value) or value < low:
        what = f"an int >= {low}" + (" or None" if allow_none else "")
        raise KilnValueError(f"{name}: expected {what}, got {_describe(value)}")


def check_bool(name: str, value: Any) -> None:
    """Raise unless ``value`` is a bool (or the int 0 or 1)."""
    if not isinstance(value, bool | np.bool_) and not (_is_int(value) and value in (0, 1)):
        raise KilnTypeError(f"{name}: expected True or False, got {_describe(value)}")


def check_mapping(name: str, value: Any) -> None:
    """Raise unless ``value`` is None or a mapping (a dict of options)."""
    if value is not None and not isinstance(value, Mapping):
        raise KilnTypeError(f"{name}: expected a dict of options or None, got {_describe(value)}")


def check_random_seed(value: Any, chains: int | None = None) -> None:
    """Raise unless ``value`` is a seed kiln takes.

    None, a non-negative int, or (when ``chains`` is given: one per chain) a list of
    ``chains`` non-negative ints; without ``chains`` (the predictive functions) also a
    ``np.random.SeedSequence`` or ``np.random.Generator``.
    """
    per_chain = f", or a list of {chains} non-negative ints (one per chain)" if chains else ""
    generators = "" if chains else ", a np.random.SeedSequence or a np.random.Generator"
    expected = f"None, a non-negative int{per_chain}{generators}"
    if value is None or (_is_int(value) and value >= 0):
        return
    if not chains and isinstance(value, np.random.SeedSequence | np.random.Generator):
        return
    if chains and isinstance(value, list | tuple):
        if len(value) != chains:
            raise KilnValueError(
                f"random_seed: {len(value)} seeds for {chains} chains; expected {expected}"
            )
        bad = [s for s in value if not (_is_int(s) and s >= 0)]
        if not bad:
            return
        raise KilnValueError(
            f"random_seed: the seeds must be non-negative ints, got {_describe(bad[0])} "
            f"among them; expected {expected}"
        )
    raise KilnValueError(f"random_seed: expected {expected}, got {_describe(value)}")


def _importable(package: str) -> bool:
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def check_backend(backend: Any) -> None:
    """Raise unless ``backend`` is None or an installed backend whose packages import.

    A known backend that is not installed (or whose library is missing, e.g. ``jax``)
    raises :class:`BackendNotInstalledError` naming the ``pip install`` to run.
    """
    if backend is None:
        return
    if not isinstance(backend, str):
        raise KilnTypeError(
            f"backend: expected a backend name (one of {available_linkers()}), got "
            f"{_describe(backend)}"
        )
    install = _BACKEND_INSTALL.get(backend, KNOWN_BACKENDS.get(backend))
    if backend in available_linkers():
        missing = [p for p in _BACKEND_NEEDS.get(backend, ()) if not _importable(p)]
        if not missing:
            try:
                get_linker(backend)
                return
            except ImportError as exc:
                missing = [getattr(exc, "name", None) or str(exc)]
        raise BackendNotInstalledError(
            f"backend={backend!r} needs the package {missing[0]!r}, which cannot be "
            f"imported; install it with `pip install {install or missing[0]}`"
        )
    if install is not None:
        raise BackendNotInstalledError(
            f"backend={backend!r} is not installed; install it with `pip install {install}` "
            f"(installed backends: {available_linkers()})"
        )
    raise KilnValueError(
        f"backend: {backend!r} is not an installed backend; valid: {available_linkers()} "
        f"(others kiln knows, once installed: {sorted(set(KNOWN_BACKENDS))})"
    )


def check_nuts_sampler(nuts_sampler: Any) -> None:
    """Raise unless ``nuts_sampler`` names an engine whose packages can be imported."""
    if not isinstance(nuts_sampler, str) or nuts_sampler not in ENGINES:
        raise KilnValueError(
            f"nuts_sampler: unknown sampler {_describe(nuts_sampler)}; valid: {sorted(ENGINES)}"
        )
    entry = ENGINES[nuts_sampler]
    needs = [entry.package] if entry.package else []
    needs += list(_BACKEND_NEEDS.get(entry.backend or "", ()))
    missing = [p for p in needs if not _importable(p)]
    if missing:
        raise BackendNotInstalledError(
            f"nuts_sampler={nuts_sampler!r} needs the package {missing[0]!r}, which cannot "
            f"be imported; install it with `pip install kiln[{nuts_sampler}]`"
        )


def check_target_accept(value: Any) -> None:
    """Raise unless ``value`` is a real number strictly between 0 and 1."""
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool | np.bool_)
        or not 0.0 < float(value) < 1.0
    ):
        raise KilnValueError(
            f"target_accept: expected a number strictly between 0 and 1, got {_describe(value)}"
        )


def check_nuts_options(options: Mapping[str, Any] | None, target_accept: float) -> None:
    """Raise unless ``options`` are options of kiln's NUTS (``nuts_sampler='kiln'``)."""
    try:
        kiln_samplers.NutsSettings(target_accept=target_accept, **dict(options or {}))
    except TypeError as exc:
        accepted = [f.name for f in dataclasses.fields(kiln_samplers.NutsSettings)]
        accepted.remove("target_accept")
        raise KilnTypeError(
            f"nuts_sampler_kwargs: {exc}; kiln's NUTS takes {accepted} (and target_accept= "
            "is an argument of kl.sample)"
        ) from None
    except ValueError as exc:
        raise KilnValueError(f"nuts_sampler_kwargs: {exc}") from None


def init_options(
    init: str, nuts_sampler: str, options: Mapping[str, Any] | None, steps: bool
) -> dict[str, Any]:
    """Return the engine's options (``nuts_sampler_kwargs``) with what ``init`` asks of it.

    ``adapt_full`` asks for the engine's dense mass matrix, ``adapt_diag`` for its
    diagonal one, ``auto`` for its default. ``adapt_full`` with an engine without a
    dense one or with step methods (their NUTS adapts a diagonal one), or an option
    that says otherwise, is a named error.
    """
    out = dict(options or {})
    adapt = init.removeprefix("jitter+")
    if adapt == "auto":
        return out
    if steps or nuts_sampler not in _METRIC_OPTION:
        if adapt == "adapt_diag":  # what those adapt anyway
            return out
        what = "step methods" if steps else f"nuts_sampler={nuts_sampler!r}"
        raise KilnValueError(
            f"init={init!r}: a dense mass matrix is adapted by nuts_sampler in "
            f"{sorted(_METRIC_OPTION)} without step methods; {what} adapts a diagonal one "
            "(use init='jitter+adapt_diag')"
        )
    key, values = _METRIC_OPTION[nuts_sampler]
    value = values[adapt]
    if key in out and out[key] != value:
        kind = "dense" if adapt == "adapt_full" else "diagonal"
        raise KilnValueError(
            f"init={init!r} asks for a {kind} mass matrix, but nuts_sampler_kwargs has "
            f"{key}={out[key]!r} (expected {value!r}, or leave it out)"
        )
    out[key] = value
    return out


def check_sample_arguments(
    *,
    draws: Any,
    tune: Any,
    chains: Any,
    cores: Any,
    random_seed: Any,
    backend: Any,
    nuts_sampler: Any,
    compile_kwargs: Any,
    target_accept: Any,
    init: Any,
    progressbar: Any,
    nuts_sampler_kwargs: Any,
    idata_kwargs: Any,
    model: Any,
    executor: Any = None,
) -> None:
    """Check the arguments of ``kiln.sample`` (raising a named error for the first bad one)."""
    if model is not None and not isinstance(model, Model):
        raise KilnTypeError(f"model: expected a kiln Model or None, got {_describe(model)}")
    check_int("draws", draws, 1)
    check_int("tune", tune, 0)
    check_int("chains", chains, 1)
    check_int("cores", cores, 1, allow_none=True)
    check_random_seed(random_seed, chains)
    check_target_accept(target_accept)
    if not isinstance(init, str) or init not in INITS:
        raise KilnValueError(f"init: unknown {_describe(init)}; expected one of {list(INITS)}")
    check_bool("progressbar", progressbar)
    check_mapping("compile_kwargs", compile_kwargs)
    check_mapping("nuts_sampler_kwargs", nuts_sampler_kwargs)
    check_mapping("idata_kwargs", idata_kwargs)
    check_backend(backend)
    check_nuts_sampler(nuts_sampler)
    if nuts_sampler == "kiln":
        check_nuts_options(nuts_sampler_kwargs, float(target_accept))
    if executor is not None:
        executor_adapter(executor)  # raises, naming what it accepts


def check_names(var_names: Any) -> None:
    """Raise unless ``var_names`` is None, a name, or a list of names."""
    if var_names is None or isinstance(var_names, str):
        return
    if not isinstance(var_names, Sequence) or not all(isinstance(n, str) for n in var_names):
        raise KilnTypeError(
            f"var_names: expected a list of variable names (str), got {_describe(var_names)}"
        )


def check_predictive_arguments(
    *,
    random_seed: Any,
    backend: Any,
    compile_kwargs: Any,
    var_names: Any,
    model: Any,
    draws: Any = 1,
    flags: Mapping[str, Any] | None = None,
) -> None:
    """Check the arguments of the predictive functions (``flags``: their bool options)."""
    if model is not None and not isinstance(model, Model):
        raise KilnTypeError(f"model: expected a kiln Model or None, got {_describe(model)}")
    check_int("draws", draws, 1)
    check_names(var_names)
    check_random_seed(random_seed)
    for name, value in (flags or {}).items():
        check_bool(name, value)
    check_mapping("compile_kwargs", compile_kwargs)
    check_backend(backend)


def explain_initial_point(engine: Engine | Callable[..., EngineResult], model: Model) -> Engine:
    """Return ``engine`` raising, when it finds no finite start, which term is not finite.

    The engines' samplers know only a flat vector: when one reports no initial point
    with a finite log-density, the model's terms are evaluated at its initial point
    (and at a jittered one) and the variables whose terms are not finite are named
    (:func:`kiln_model.check_initial_point`).
    """

    @functools.wraps(engine)
    def run(r: EngineRun) -> EngineResult:
        try:
            return engine(r)
        except (ValueError, RuntimeError) as exc:
            if "initial point" not in str(exc) or isinstance(exc, ModelError):
                raise
            points: list[Any] = [None]
            if r.jitter:
                points.append(model.initial_point(jitter=True, seed=0))
            for point in points:
                try:
                    check_initial_point(model, point)
                except ModelError as named:
                    raise named from exc
                except Exception:  # noqa: BLE001 (the engine's own error stands)
                    break
            raise

    return run
