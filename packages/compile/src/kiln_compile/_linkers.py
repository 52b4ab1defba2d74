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


@dataclasses.dataclass(frozen=True)
class LinkerDoc:
    """What the documentation says about a backend, kept on its linker class.

    The backends table of the docs is generated from the ``doc`` attribute of every
    installed linker (``nox -s docs`` fails on a linker without one).

    Attributes
    ----------
    compiles
        How Stage 2 turns the rewritten graph into a callable, in a few words.
    system_compiler
        What the backend needs besides its Python packages (``"no"``, or e.g.
        ``"yes: a C compiler"``).
    cache
        What the backend keeps on disk under the cache root (``"nothing"`` if none).
    note
        One or two sentences: when to choose this backend.
    """

    compiles: str
    system_compiler: str
    cache: str
    note: str


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
    #: Tags (or rewrite names) that Stage 1 never runs for this backend, whatever the
    #: mode selects: rewrites that mean nothing to it. Every rewrite carries its phase's
    #: name as a tag, so a phase is excluded by its name (``("inplace",)``). Optional:
    #: a linker without it excludes nothing.
    excluded_rewrites: tuple[str, ...]
    #: What the docs' backends table says about this backend (see :class:`LinkerDoc`).
    doc: LinkerDoc

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> Thunk:
        """Return the callable that computes ``fgraph``."""
        ...


@functools.cache
def _registered() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="kiln.linkers")}


def backend_query(query: Query, linker: Linker) -> Query:
    """Return ``query`` as it runs for ``linker``.

    The linker's own rewrite tags are selected (unless the query excludes them), and
    its ``excluded_rewrites`` are excluded (the one way a backend opts out of phases
    or rewrites, e.g. JAX of the in-place phase).
    """
    tags = frozenset(getattr(linker, "rewrite_tags", ())) - query.exclude
    excluded = frozenset(getattr(linker, "excluded_rewrites", ()))
    if tags and not tags <= query.include:
        query = dataclasses.replace(query, include=query.include | tags)
    if excluded and not excluded <= query.exclude:
        query = dataclasses.replace(query, exclude=query.exclude | excluded)
    return query


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
