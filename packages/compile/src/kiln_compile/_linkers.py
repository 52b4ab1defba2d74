"""The linker registry: backends found through the ``kiln.linkers`` entry-point group."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, Protocol

from kiln_compile._fgraph import FunctionGraph
from kiln_compile._profile import Profile
from kiln_graph import KilnValueError
from kiln_rewrite import Query

#: The package that provides each backend kiln knows about.
KNOWN_BACKENDS: dict[str, str] = {
    "vm": "kiln-vm",
    "numba": "kiln-numba",
    "c": "kiln-c",
    "jax": "kiln-jax",
    "torch": "kiln-torch",
    "mlx": "kiln-mlx",
}

Thunk = Callable[[Sequence[Any]], list[Any]]


class BackendNotInstalledError(KilnValueError):
    """A known backend was requested but its package is not installed."""


class Linker(Protocol):
    """What a backend provides: turn a (rewritten) function graph into a callable.

    The callable takes one value per ``fgraph.inputs`` entry and returns one value per
    ``fgraph.outputs`` entry.
    """

    name: str
    #: Tags of the backend-only rewrites (registered by the backend's package) that
    #: Stage 1 runs, in the phases the mode selects, when compiling for this backend.
    rewrite_tags: tuple[str, ...]

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> Thunk:
        """Return the callable that computes ``fgraph``."""
        ...


@functools.cache
def _registered() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="kiln.linkers")}


def backend_query(query: Query, linker: Linker) -> Query:
    """Return ``query`` with the linker's own rewrite tags selected (unless excluded)."""
    tags = frozenset(getattr(linker, "rewrite_tags", ())) - query.exclude
    if not tags or tags <= query.include:
        return query
    return dataclasses.replace(query, include=query.include | tags)


def available_linkers() -> list[str]:
    """Names of the installed linkers."""
    return sorted(_registered())


@functools.cache
def get_linker(name: str) -> Linker:
    """Return the installed linker called ``name``.

    Raises
    ------
    BackendNotInstalledError
        If ``name`` is a known backend whose package is missing (the message names it).
    KilnValueError
        If ``name`` is not a backend kiln knows.
    """
    registry = _registered()
    if name in registry:
        linker_cls = registry[name].load()
        return linker_cls()
    if name in KNOWN_BACKENDS:
        raise BackendNotInstalledError(
            f"backend {name!r} is not installed; install it with "
            f"`pip install {KNOWN_BACKENDS[name]}`"
        )
    valid = sorted(set(KNOWN_BACKENDS) | set(registry) | {"auto"})
    raise KilnValueError(f"linker: unknown backend {name!r}; valid backends: {valid}")


_warned_fallback: list[bool] = []


def resolve_linker_name(name: str, warn: bool = True) -> str:
    """Resolve ``"auto"`` to Numba when installed, else to the Python VM (warning once)."""
    if name != "auto":
        return name
    if "numba" in _registered():
        return "numba"
    if warn and not _warned_fallback:
        _warned_fallback.append(True)
        warnings.warn(
            "kiln: the Numba backend (kiln-numba) is not installed; using the Python VM, "
            "which is much slower. Install kiln-numba or pass mode='FAST_COMPILE' / "
            "linker='vm' to silence this.",
            stacklevel=3,
        )
    return "vm"
