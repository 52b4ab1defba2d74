"""The linker registry: backends found through the ``kiln.linkers`` entry-point group."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kiln_compile._fgraph import FunctionGraph
from kiln_compile._native import NativeModel, NativeUnavailable
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
#: The linker class of each backend kiln knows, as its ``kiln.linkers`` entry point
#: names it (``test_linker_registry`` checks that they agree): found by importing its
#: module, without reading any package metadata.
KNOWN_LINKERS: dict[str, str] = {
    "vm": "kiln_vm:VMLinker",
    "numba": "kiln_numba:NumbaLinker",
    "c": "kiln_c:CLinker",
    "jax": "kiln_jax:JaxLinker",
    "torch": "kiln_torch:TorchLinker",
    "mlx": "kiln_mlx:MlxLinker",
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


class NativeLinker(Linker, Protocol):
    """A linker that also gives compiled models as the native ABI (optional capability).

    A backend whose compiled functions can be called from C without Python (Numba, C)
    implements :meth:`native`; :func:`kiln_compile.native_model` finds it with
    ``getattr(linker, "native", None)``, so linkers without it need nothing.
    """

    def native(self, logp_function: Any, expand_function: Any = None) -> NativeModel:
        """Return ``logp_function`` (``x -> [logp, grad]``), and ``expand_function``, as C.

        Both are kiln Functions this linker compiled, over one float64 vector ``x`` of a
        static length. Raises :class:`kiln_compile.NativeUnavailable` (saying why) when
        these functions cannot be given as the ABI.
        """
        ...


#: The entry-point group of linkers.
GROUP = "kiln.linkers"


@dataclasses.dataclass(frozen=True)
class _KnownEntry:
    """The entry point of a backend kiln knows, found without package metadata."""

    name: str
    value: str  # "module:Linker"

    def load(self) -> Any:
        """Import and return the linker class."""
        module, attr = self.value.split(":")
        return getattr(importlib.import_module(module), attr)


class _Registry(Mapping[str, Any]):
    """The installed linkers' entry points by name, read as lazily as each question allows.

    A backend kiln knows is found by its module (:data:`KNOWN_LINKERS`), reading no
    package metadata: importing ``importlib.metadata`` and scanning every installed
    distribution take tens of milliseconds in each new process, more than a warm
    compile. Listing the linkers, or any other name, scans the entry points once.
    """

    def __init__(self) -> None:
        self._known: dict[str, Any] = {}
        self._all: dict[str, Any] | None = None

    def _scan(self) -> dict[str, Any]:
        if self._all is None:
            from importlib.metadata import entry_points  # 10-30 ms to import

            self._all = {ep.name: ep for ep in entry_points(group=GROUP)}
        return self._all

    def _from_module(self, name: str) -> Any:
        if name not in self._known:
            value = KNOWN_LINKERS[name]
            installed = importlib.util.find_spec(value.split(":")[0]) is not None
            self._known[name] = _KnownEntry(name, value) if installed else None
        return self._known[name]

    def __getitem__(self, name: str) -> Any:
        if self._all is None and name in KNOWN_LINKERS:
            found = self._from_module(name)
            if found is not None:
                return found
        return self._scan()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._scan())

    def __len__(self) -> int:
        return len(self._scan())


@functools.cache
def _registered() -> Mapping[str, Any]:
    return _Registry()


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


def native_model(logp_function: Any, expand_function: Any = None) -> NativeModel:
    """Return a compiled model's log-density (and expand function) as the native ABI.

    Parameters
    ----------
    logp_function
        A kiln :class:`~kiln_compile.Function` mapping the flat float64 vector ``x`` (of
        a static length) to ``[logp, grad]`` (``CompiledModel.function``).
    expand_function
        Optional: a Function of the same linker mapping ``x`` to the model's
        constrained values and deterministics (``CompiledModel.expand_function``).

    Returns
    -------
    NativeModel
        The C function pointers, ``user_data``, and what keeps them alive.

    Raises
    ------
    NativeUnavailable
        If the function's linker does not provide the native ABI, or cannot provide it
        for these functions (the message says why).

    Examples
    --------
    >>> native = native_model(compiled.function, compiled.expand_function)  # doctest: +SKIP
    >>> native.logp_cptr, native.user_data_ptr, native.n  # doctest: +SKIP
    """
    name = getattr(logp_function, "linker", None)
    if not isinstance(name, str):
        raise NativeUnavailable(
            f"native_model: expected a kiln Function, got a {type(logp_function).__name__}"
        )
    if expand_function is not None and getattr(expand_function, "linker", None) != name:
        raise NativeUnavailable(
            "native_model: the expand function was compiled by backend "
            f"{getattr(expand_function, 'linker', None)!r}, the log-density by {name!r}"
        )
    provide = getattr(get_linker(name), "native", None)
    if provide is None:
        raise NativeUnavailable(f"backend {name!r} does not provide the native ABI")
    native = provide(logp_function, expand_function)
    if not isinstance(native, NativeModel):
        raise NativeUnavailable(
            f"backend {name!r}: its native() returned a {type(native).__name__}, not a NativeModel"
        )
    return native
