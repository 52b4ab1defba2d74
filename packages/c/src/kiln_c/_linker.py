"""The C linker: a rewritten graph -> one C file -> one cached shared library -> a thunk.

Stage 2 for C. :func:`~kiln_c._codegen.generate` writes the graph as one C99 file,
:mod:`kiln_c._library` builds it with the system compiler (or finds it in kiln's
cache) and maps it, and :class:`CThunk` calls its ``kiln_run`` with the NumPy inputs
described in place (:mod:`kiln_c._runtime`).

Nodes whose Op has no C implementation run their ``perform`` through a callback into
Python (one warning per graph names those Ops); their results are copied into memory
the C side owns. An error inside the generated code (an index out of bounds, shapes
that do not broadcast) returns a status, the node's index and a message, raised as
the kiln exception the VM raises for it, with a note naming the node and the backend.
An exception inside a callback is raised as it is.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from typing import Any

from kiln_c import _compiler, _library, _trampoline
from kiln_c._codegen import Generated, describe, generate
from kiln_c._thunk import BACKEND, CThunk
from kiln_c.native import native_model
from kiln_compile import FunctionGraph, LinkerDoc, Profile, config

#: Loaded libraries of this process, by key.
_loaded: dict[str, Any] = {}


class FallbackWarning(UserWarning):
    """Some Ops of a graph have no C implementation and run through Python."""


def _through_perform(generated: Generated) -> list[Any]:
    """Return the nodes run through ``perform`` (not the callbacks of nodes' C code)."""
    return [n for k, n in generated.fallbacks.items() if k < len(generated.nodes)]


def _warn_fallbacks(generated: Generated) -> None:
    nodes = _through_perform(generated)
    if not nodes:
        return
    names = sorted({type(node.op).__name__ for node in nodes})
    warnings.warn(
        f"kiln: the C backend has no implementation of {', '.join(names)}; "
        f"{len(nodes)} node(s) run their Python `perform` through a "
        "callback (slower; correct)",
        FallbackWarning,
        stacklevel=4,
    )


class _Upgrade:
    """The optimised build of a source whose quick (tcc) build the thunks run meanwhile.

    A thread builds it with the system compiler (and caches it, as a plain miss would);
    then every attached thunk adopts it between two calls. If that build fails, the
    thunks keep the quick library (same results) and the error is kept on ``error``.
    """

    def __init__(self, generated: Generated, key: str, graph: str, quick_lib: Any) -> None:
        self.quick_lib = quick_lib
        self.error: BaseException | None = None
        self._generated, self._key, self._graph = generated, key, graph
        self._built_lib: Any = None
        self._thunks: list[CThunk] = []
        self._lock = threading.Lock()
        # Not a daemon: a process that ends first still leaves the library in the cache.
        self.thread = threading.Thread(target=self._build, name=f"kiln-c-build-{key[:12]}")

    def _build(self) -> None:
        gen = self._generated
        try:
            payload, key, origin = _library.library_bytes(gen.source, True)
            lib = _loaded[key] = _library.load(payload, key)
            if origin != "built":
                fallbacks = sorted(gen.fallbacks)
                _library.remember_graph(self._graph, key, fallbacks, len(gen.nodes))
        except BaseException as exc:  # noqa: BLE001 (kept: the quick library stays in use)
            self.error = exc
            lib = None
        with self._lock:
            self._built_lib, thunks = lib, self._thunks
            self._thunks = []
            _upgrades.pop(self._key, None)
        for thunk in thunks:
            self._adopt(thunk, lib)

    def _adopt(self, thunk: CThunk, lib: Any) -> None:
        if lib is not None:
            thunk.adopt(lib)
            thunk.stage2["optimised"] = True
        thunk.upgrade = None

    def attach(self, thunk: CThunk) -> None:
        """Have ``thunk`` (running the quick library) adopt the optimised one when built."""
        with self._lock:
            if self._built_lib is None and self.error is None:  # still building
                thunk.quick()
                thunk.upgrade = self
                self._thunks.append(thunk)
                return
        self._adopt(thunk, self._built_lib)

    def wait(self) -> None:
        """Wait until the optimised library is built and adopted (or its build failed).

        Returns at once where no optimised build was started (``KILN_C_QUICK=only``):
        the quick library stays in use.
        """
        if self.thread.ident is not None:
            self.thread.join()


#: The optimised builds running in the background, by library key.
_upgrades: dict[str, _Upgrade] = {}
_upgrades_lock = threading.Lock()


def _quick(generated: Generated, key: str, graph: str, use_cache: bool) -> _Upgrade | None:
    """Return the running upgrade of library ``key`` after a quick build, or None.

    None when there is no quick compiler, the cache is off, or the quick compiler fails
    on this source (then the optimised build is the only one). ``KILN_C_QUICK=only``
    (for tests of the quick build's results) starts no optimised build.
    """
    if _compiler.find_quick_compiler() is None or not use_cache:
        return None
    with _upgrades_lock:
        running = _upgrades.get(key)
        if running is not None:
            return running
    try:
        quick_lib = _library.load(_compiler.build(generated.source, quick=True), key)
    except (_compiler.CompileError, OSError):
        return None
    with _upgrades_lock:
        running = _upgrades.get(key)
        if running is not None:
            return running
        upgrade = _upgrades[key] = _Upgrade(generated, key, graph, quick_lib)
    if os.environ.get("KILN_C_QUICK", "").strip().lower() != "only":
        upgrade.thread.start()
    return upgrade


def _built(fgraph: FunctionGraph, graph: str) -> tuple[Generated, Any, str, str] | None:
    """Return the tables, library, library key and origin of an already built ``fgraph``.

    Found through its graph key ``graph`` without writing its source; None if the cache
    does not hold it (or holds an entry that does not fit this graph).
    """
    found = _library.find_graph(graph)
    if found is None:
        return None
    key, fallbacks, n_nodes = found
    lib, origin = _loaded.get(key), "memory"
    if lib is None:
        payload = _library.cached_library(key)
        if payload is None:
            return None
        lib, origin = _loaded.setdefault(key, _library.load(payload, key)), "hit"
    try:
        generated = describe(fgraph, fallbacks)
    except IndexError:  # an entry of another graph: a fallback index past its nodes
        return None
    if len(generated.nodes) != n_nodes:
        return None
    return generated, lib, key, origin


class CLinker:
    """Link a function graph into one C file, built by the system C compiler."""

    name = BACKEND
    #: Tags of C-only rewrites: ``c`` (kiln_c.loop_fusion: fused loops, small dot
    #: products as sums), on top of Stage 1's fusion and in-place plan.
    rewrite_tags: tuple[str, ...] = ("c",)
    excluded_rewrites: tuple[str, ...] = ()
    doc = LinkerDoc(
        compiles="the whole graph written as one C99 file (one small function per fused "
        "loop), built by the system C compiler into a shared library",
        system_compiler="yes: a C compiler (`CC`, `cc`, `gcc` or `clang`)",
        cache="`c/<key>.so`: the shared library, and its checksum in `c/<key>.kc`",
        note="Fast builds (a second or so for a model's log-density and gradient), "
        "loaded in milliseconds from the cache; LAPACK through SciPy's exported routines; "
        "random draws through NumPy's libnpyrandom (the VM's stream); Ops without C "
        "code run through Python.",
    )

    def native(self, logp_function: Any, expand_function: Any = None) -> Any:
        """Return a model's log-density (and expand function) as the native C ABI.

        The generated library's own ``kiln_native_logp`` and ``kiln_native_expand``
        (:func:`kiln_c.native.native_model`). Raises
        :class:`kiln_compile.NativeUnavailable` saying why it cannot (an Op without C
        code, a function that does not take one float64 vector).
        """
        return native_model(logp_function, expand_function)

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> CThunk:
        """Generate, build (or load from the cache) and return the callable computing ``fgraph``.

        Raises
        ------
        CompilerNotFoundError
            If there is no C compiler.
        """
        start = time.perf_counter()
        _trampoline.start()  # beside the graph's build, if it needs building
        use_cache = bool(config.cache)
        graph = _library.graph_key(fgraph)
        found = _built(fgraph, graph) if use_cache else None
        upgrade: _Upgrade | None = None
        if found is not None:
            generated, lib, key, origin = found
        else:
            generated = generate(fgraph)
            key = _library.library_key(generated.source)
            lib, origin = _loaded.get(key), "memory"
            if lib is None and use_cache and _library.cached_library(key) is None:
                upgrade = _quick(generated, key, graph, use_cache)
            if upgrade is not None:
                lib, origin = upgrade.quick_lib, "quick"
            elif lib is None:
                payload, key, origin = _library.library_bytes(generated.source, use_cache)
                lib = _loaded[key] = _library.load(payload, key)
            if upgrade is None and use_cache and origin != "built":
                fallbacks = sorted(generated.fallbacks)
                _library.remember_graph(graph, key, fallbacks, len(generated.nodes))
        _warn_fallbacks(generated)
        thunk = CThunk(fgraph, generated, lib, quick=upgrade is not None)
        if upgrade is not None:
            upgrade.attach(thunk)
        thunk.stage2.update(
            key=key,
            cache=origin,
            link_s=time.perf_counter() - start,
            fallbacks=sorted({str(n.op) for n in _through_perform(generated)}),
        )
        if profile is not None:
            profile.stage2 = thunk.stage2
        return thunk
