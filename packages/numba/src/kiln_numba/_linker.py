"""The Numba linker: generated source -> module file in the cache -> cached njit function.

Stage 2 of a compile writes the generated module to
``<cache root>/numba/<key>/kiln_gen.py``, keyed by the generated source, the code
generator's version, Numba's and llvmlite's versions and a fingerprint of kiln_numba's
own code (whose runtime helpers are compiled into the machine code). Numba compiles it
lazily, at the first call, with kiln's checked cache (:mod:`kiln_numba._cache`), which
stores the machine code in ``__pycache__`` beside the module; a new process that
compiles a structurally identical graph imports the same file and loads the machine
code instead of running LLVM. Constants are passed to the function as arguments (from
the rewritten graph, itself cached by Stage 1), never baked into the code, so graphs
that differ only in their constants' values share one entry.

After a compile, the function's machine code is also linked into a shared library
(:mod:`kiln_numba._shared_library`) that a later process loads in place of the module,
without importing Numba, for arguments of the types it was compiled for.

Nothing in the cache is trusted blindly: a module file whose text is not the generated
source is rewritten (and Numba's files for it dropped); Numba's files carry checksums
and a damaged one is rebuilt. When the cache is off (``config.cache``), cannot be
written (one :class:`~kiln_compile.CacheWarning` per cache root), or the module cannot
be cached (an Op in object mode), the module lives in memory only and is compiled in
each process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import linecache
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kiln_compile import (
    DiskCache,
    FunctionGraph,
    config,
    mark_unwritable,
    new_temporary,
)
from kiln_graph import KilnTypeError
from kiln_graph.helpers import long_lived_objects
from kiln_numba import _codegen, _shared_library
from kiln_numba._codegen import FUNCTION_NAME, Generated
from kiln_numba._errors import KilnRuntimeError

_MODULE_FILE = "kiln_gen.py"
_NAMESPACE = "numba"


@functools.cache
def code_fingerprint() -> str:
    """Return a digest of the sources compiled into generated code, Numba's and llvmlite's.

    The sources are kiln_numba's and kiln_random's (its draws' ``core_fn``).
    """
    versions = (importlib.metadata.version(name) for name in ("numba", "llvmlite"))
    h = hashlib.sha256(("|".join(versions) + "\n").encode())
    for package in ("kiln_numba", "kiln_random"):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(location).rglob("*.py")):
                h.update(path.name.encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def stage2_key(fgraph: FunctionGraph, gen: Generated) -> str:
    """Return the Stage-2 cache key of ``gen``, the module generated for ``fgraph``.

    The generated source decides the machine code (constants are arguments), so equal
    sources share an entry. A module that cannot be cached (object-mode fallbacks hold
    Python objects of this graph) is also keyed by the graph's digest.
    """
    h = hashlib.sha256(b"kiln-numba\n")
    parts = [gen.source, str(_codegen.CODEGEN_VERSION), code_fingerprint()]
    if not gen.cacheable:
        parts.append(fgraph.digest)
    for part in parts:
        h.update(part.encode())
        h.update(b"\n")
    return h.hexdigest()


def _cache_root() -> Path:
    return Path(os.path.expanduser(config.cache_dir))


def _module_file(key: str, source: str, filename: str = _MODULE_FILE) -> tuple[Path | None, str]:
    """Return the cache entry's module file ``filename`` holding ``source`` (written if needed).

    The entry of ``key`` holds the generated module (``kiln_gen.py``) and may hold
    other modules built on it (:mod:`kiln_numba.native`'s wrappers). Returns ``(path,
    outcome)``; ``path`` is None when the module cannot live in the cache: ``outcome``
    is then ``"disabled"`` or ``"unwritable"``.
    """
    if not config.cache:
        return None, "disabled"
    root = _cache_root()
    entry = DiskCache(_NAMESPACE).folder(key[:32])
    if entry is None:
        return None, "unwritable"
    target = entry / filename
    try:
        if target.read_text() == source:
            return target, "found"
    except (OSError, UnicodeDecodeError):
        pass
    try:
        fd, tmp = new_temporary(entry, suffix=".py")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            if target.exists():
                # A different (damaged or stale) module: replace it and drop Numba's
                # files, which were built from the old one.
                for built in (entry / "__pycache__").glob(f"{target.stem}.*"):
                    built.unlink(missing_ok=True)
                os.replace(tmp, target)
            else:
                try:
                    os.link(tmp, target)  # create-if-absent: the first writer wins
                except FileExistsError:
                    pass
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if target.read_text() == source:
            return target, "written"
    except OSError as exc:
        mark_unwritable(root, entry.parent, exc)
        return None, "unwritable"
    return None, "unwritable"  # another process keeps writing a different module


def _exec_module(name: str, source: str, filename: str, gen: Generated, cache: bool) -> ModuleType:
    """Run ``source`` as the module ``name`` (no bytecode files); return it."""
    module = ModuleType(name)
    module.__file__ = filename
    module.__dict__.update(gen.python_globals)
    module.__dict__["__kiln_cache__"] = cache
    if not os.path.isfile(filename):
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _entry(key: str) -> Path:
    """Return the folder of the cache entry ``key``."""
    return _cache_root() / _NAMESPACE / key[:32]


_shared_loaded: dict[str, _shared_library.SharedFunction] = {}


def _load_shared(key: str, gen: Generated) -> _shared_library.SharedFunction | None:
    """Return the shared library's function of ``key`` (this process's, or from the cache).

    None when the module is already loaded through Numba here, or has no library.
    """
    shared = _shared_loaded.get(key)
    if shared is not None or not gen.cacheable or not config.cache:
        return shared
    if module_name(key) in sys.modules:
        return None
    shared = _shared_library.load(key, _entry(key), module_name(key))
    if shared is not None:
        _shared_loaded[key] = shared
    return shared


def module_name(key: str) -> str:
    """Return the name in ``sys.modules`` of the generated module of the entry ``key``."""
    return f"kiln_numba_gen_{key[:24]}"


def load_function(
    fgraph: FunctionGraph, gen: Generated, key: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Return the njit dispatcher of ``gen`` and what Stage 2 found in the cache.

    The dispatcher comes from this process's modules when the same source was loaded
    before, else from the module file in the cache (written if needed), else from an
    in-memory module. The returned dict holds ``"key"``, ``"module"`` and ``"cache"``
    (``"memory"`` when loaded in this process; otherwise completed at the first call).
    ``key`` is :func:`stage2_key`'s, when the caller has it.
    """
    key = key if key is not None else stage2_key(fgraph, gen)
    with _load_lock:  # a module being executed by another thread is in sys.modules
        return _load_function(fgraph, gen, key)


#: Held while a generated module is looked up or executed (chains call first in threads).
_load_lock = threading.RLock()


def _load_function(fgraph: FunctionGraph, gen: Generated, key: str) -> tuple[Any, dict[str, Any]]:
    name = module_name(key)
    info: dict[str, Any] = {"key": key}
    loaded = sys.modules.get(name)
    if loaded is not None:
        info["module"] = getattr(loaded, "__file__", "")
        return getattr(loaded, FUNCTION_NAME), info
    path: Path | None = None
    outcome = "uncacheable"
    if gen.cacheable:
        path, outcome = _module_file(key, gen.source)
    if path is not None:
        module = _exec_module(name, gen.source, str(path), gen, cache=True)
        info["module"] = str(path)
    else:
        filename = f"<kiln_numba generated {key[:16]}>"
        module = _exec_module(name, gen.source, filename, gen, cache=False)
        info["module"] = "in memory"
        info["cache"] = outcome
    return getattr(module, FUNCTION_NAME), info


def _counts(jit_fn: Any) -> tuple[int, int, int]:
    stats = jit_fn.stats
    return (
        sum(stats.cache_hits.values()),
        sum(stats.cache_misses.values()),
        len(jit_fn.overloads),
    )


#: The dtypes Numba's CPU target compiles arrays of (no float16, no long double).
_NUMBA_DTYPES = frozenset(
    np.dtype(t)
    for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
    + ("uint64", "float32", "float64", "complex64", "complex128")
)


def _numba_supports(dtype: str) -> bool:
    """Whether Numba's CPU target compiles arrays of ``dtype`` (it has no float16)."""
    try:
        return np.dtype(dtype) in _NUMBA_DTYPES
    except TypeError:
        return False


def check_dtypes(fgraph: FunctionGraph) -> None:
    """Raise a clear error if a tensor of ``fgraph`` has a dtype Numba does not support."""
    variables = list(fgraph.inputs) + [o for node in fgraph.nodes for o in node.outputs]
    for v in variables:
        dtype = getattr(v.type, "dtype", None)
        if dtype is None or _numba_supports(dtype):
            continue
        what = f"the output of {v.owner.op}" if v.owner is not None else f"the input {v!r}"
        raise KilnTypeError(
            f"the Numba backend does not support dtype {dtype}, the dtype of {what}; "
            "cast to a supported dtype first (e.g. kt.cast(x, 'float32')), or compile "
            "with the Python VM (kiln.Mode(linker='vm'))"
        )


def _with_builtin_dtype(value: Any) -> Any:
    """Return ``value`` (an array) as a view with NumPy's own object for its dtype.

    An unpickled array (a constant from the Stage-1 cache) can carry an equal dtype
    that is another object, which the shared library's check in C, by identity, refuses.
    """
    if isinstance(value, np.ndarray):
        builtin = np.dtype(value.dtype.str)
        if value.dtype is not builtin and value.dtype == builtin:
            return value.view(builtin)
    return value


class NumbaThunk:
    """The callable a Function runs: inputs in, outputs out, constants appended.

    ``jit_fn`` is the raw ``@njit`` dispatcher: call it as ``jit_fn(*inputs,
    *constants)`` from Python or from other Numba code; it returns a tuple. ``stage2``
    is what Stage 2 found (see :attr:`kiln_compile.Profile.stage2`); its ``"cache"``
    and ``"first_call_s"`` are set by the first call, where Numba compiles the function
    or loads its machine code from the cache.

    A thunk made from the function's shared library (``shared``, see
    :mod:`kiln_numba._shared_library`) calls that for arguments of the types it was
    compiled for, without Numba; ``jit_fn`` is then built when first asked for
    (``load_dispatcher``, which imports Numba), as are calls with other arguments.
    After its first call it offers ``direct(*inputs)``, that entry with the constants
    bound (:meth:`~kiln_numba._shared_library.SharedFunction.bind`), which a Function's
    direct calls use.
    """

    def __init__(
        self,
        jit_fn: Any,
        constants: Sequence[Any],
        generated: Generated,
        stage2: dict[str, Any] | None = None,
        *,
        shared: _shared_library.SharedFunction | None = None,
        load_dispatcher: Callable[[], Any] | None = None,
    ) -> None:
        self.constants = tuple(_with_builtin_dtype(c) for c in constants)
        self.source = generated.source
        self._generated = generated
        self.stage2: dict[str, Any] = stage2 if stage2 is not None else {}
        self._first = True
        self._jit_fn = jit_fn
        self._load_dispatcher = load_dispatcher
        self._shared = None
        self._shared_fn: Any = None
        self._shared_call: Any = None
        self._shared_accepts: Callable[[Sequence[Any]], bool] | None = None
        #: ``direct(*inputs)`` -> list of outputs, or NotImplemented for other inputs:
        #: the shared library's C entry with the constants bound, set by the first call
        #: (for :class:`kiln_compile.Function`'s direct calls); None until then or without.
        self.direct: Any = None
        if shared is not None:
            n_inputs = len(shared.args) - len(self.constants)
            if n_inputs >= 0 and shared.accepts(self.constants, start=n_inputs):
                self._shared = shared
                self._shared_fn = shared.fn
                self._shared_call = shared.checked
                self._shared_accepts = _shared_library.checker(shared.args[:n_inputs])

    @property
    def jit_fn(self) -> Any:
        """The ``@njit`` dispatcher of the generated function (Numba is imported for it)."""
        if self._jit_fn is None:
            assert self._load_dispatcher is not None
            self._jit_fn = self._load_dispatcher()
        return self._jit_fn

    @jit_fn.setter
    def jit_fn(self, fn: Any) -> None:
        self._jit_fn = fn
        self._shared = None
        self._shared_call = None
        self._shared_accepts = None
        self.direct = None

    def _callable(self, values: Sequence[Any]) -> Any:
        shared = self._shared
        if shared is not None and self._shared_accepts(values):  # type: ignore[misc]
            return shared.fn
        return self.jit_fn

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        if self._first:
            return self._first_call(values)
        # One tuple of arguments (a Function's direct calls pass a tuple): cheaper than
        # unpacking two sequences into the call.
        args = (values if type(values) is tuple else tuple(values)) + self.constants
        try:
            call = self._shared_call  # checks the arguments in C: NotImplemented if others
            if call is not None:
                result = call(*args)
                if result is not NotImplemented:
                    return list(result)
            accepts = self._shared_accepts
            fn = self._shared_fn if accepts is not None and accepts(values) else self.jit_fn
            return list(fn(*args))
        except KilnRuntimeError as exc:
            raise self._error(exc) from None

    def _error(self, exc: KilnRuntimeError) -> Exception:
        """Return the error that ``kiln_raise(code)`` stands for in the generated code."""
        namespace = getattr(self._jit_fn, "py_func", None)
        if namespace is None:  # the shared library's: the errors are kiln_graph's
            import kiln_graph

            return self._generated.error(int(exc.args[0]), vars(kiln_graph))
        return self._generated.error(int(exc.args[0]), namespace.__globals__)

    def _timed_call(self, fn: Any, values: Sequence[Any]) -> list[Any]:
        """Call ``fn`` once, recording its time as the first call's."""
        start = time.perf_counter()
        try:
            result = list(fn(*values, *self.constants))
        except KilnRuntimeError as exc:
            raise self._error(exc) from None
        finally:
            self.stage2["first_call_s"] = time.perf_counter() - start
        self._first = False  # a first call that raised is a first call again
        return result

    def _first_call(self, values: Sequence[Any]) -> list[Any]:
        """Call once, recording whether Numba compiled, loaded from disk or had it."""
        with long_lived_objects():  # generates, imports and compiles the function (unless loaded)
            fn = self._callable(values)
            if self._shared is not None and fn is self._shared.fn:
                result = self._timed_call(fn, values)
                self.stage2["compiled"] = False
                self.direct = self._shared.bind(self.constants)
                return result
            jit_fn = fn
            hits, misses, _ = _counts(jit_fn)
            result = self._timed_call(jit_fn, values)
            new_hits, new_misses, _ = _counts(jit_fn)
            compiled = new_misses > misses
            self.stage2["compiled"] = compiled
            if "cache" not in self.stage2 or self.stage2.get("loader") == "shared library":
                self.stage2.pop("loader", None)
                if new_hits > hits:
                    self.stage2["cache"] = "hit"
                elif compiled:
                    self.stage2["cache"] = "miss"
                else:
                    self.stage2["cache"] = "memory"
            from kiln_numba._cache import cache_file_stats  # Numba is imported by now

            stats = cache_file_stats(jit_fn)
            if stats is not None:
                if stats.damaged:
                    self.stage2["note"] = f"rebuilt {len(stats.damaged)} damaged cache file(s)"
                if stats.write_errors and self.stage2["cache"] == "miss":
                    self.stage2["cache"] = "unwritable"
            key = self.stage2.get("key")
            outcome = self.stage2["cache"]
            if key is not None and (
                outcome == "miss"
                or (
                    outcome == "hit"
                    and _shared_library.supported()
                    and not _shared_library.has_library(key)
                )
            ):
                # Compiled now, or loaded by a process whose first one exited without
                # building the library (killed): build it when this one exits.
                _shared_library.build_later(key, _entry(key), jit_fn)
            return result
