"""Numba's on-disk cache for generated modules: beside the module, checksummed, never fatal.

The functions of a generated module are decorated with this module's :func:`njit`
(``@njit(cache=True, ...)``), which gives each one a :class:`KilnFunctionCache` instead
of Numba's own ``FunctionCache``. It differs from Numba's in three ways:

- it always lives in ``__pycache__`` beside the module file (the Stage-2 cache entry),
  never in a fallback folder elsewhere, so one cache root holds everything;
- every index and data file carries a SHA-256 of its content, so a truncated or
  corrupted file (which Numba would unpickle, or hand to LLVM, and crash on) is
  detected, counted in :attr:`CacheFileStats.damaged` and treated as a miss: the
  function is compiled again and the file rewritten;
- a file that cannot be written (read-only cache) leaves the function working, with
  one :class:`~kiln_compile.CacheWarning` for the whole cache root;
- loading machine code does not refresh Numba's typing and target registries (Numba
  imports and installs all of its NumPy, CPython and typed-container implementations
  there, about 0.2 s once per process): code loaded from the cache is never typed or
  lowered again, it only needs Numba's runtime (NRT), which is initialized. A compile
  (a cache miss) refreshes the registries itself.

Writes stay Numba's: a temporary file renamed into place, so two processes compiling
the same function at once both succeed and readers never see half a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
from numba.core import caching, sigutils
from numba.core.ccallback import CFunc
from numba.core.runtime import rtsys
from numba.core.serialize import dumps

from kiln_compile import mark_unwritable

_MAGIC = b"KILNNBA1"
_DIGEST = 32


def _pack(payload: bytes) -> bytes:
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def _unpack(blob: bytes) -> bytes | None:
    """Return the payload of a checksummed file, or None if it is damaged."""
    head = len(_MAGIC) + _DIGEST
    if len(blob) < head or not blob.startswith(_MAGIC):
        return None
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[len(_MAGIC) : head]:
        return None
    return payload


@dataclasses.dataclass
class CacheFileStats:
    """What one function's cache met in this process.

    ``damaged`` holds the files found truncated or corrupted (each then rebuilt);
    ``write_errors`` counts saves that failed (a read-only cache).
    """

    damaged: set[str] = dataclasses.field(default_factory=set)
    write_errors: int = 0


class _CheckedCacheFile(caching.IndexDataCacheFile):
    """Numba's index + data files, each prefixed with a magic and a SHA-256 of its content."""

    def __init__(
        self, cache_path: str, filename_base: str, source_stamp: Any, stats: CacheFileStats
    ) -> None:
        super().__init__(cache_path, filename_base, source_stamp)
        self.stats = stats

    def _dump(self, obj: Any) -> bytes:
        return _pack(dumps(obj))

    def _read(self, path: str) -> Any:
        """Return the unpickled content of ``path``; None if missing or damaged."""
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        payload = _unpack(blob)
        if payload is not None:
            try:
                return pickle.loads(payload)
            except Exception:  # noqa: BLE001  # a checksummed payload Numba cannot read
                pass
        self.stats.damaged.add(path)
        return None

    def _load_index(self) -> dict[Any, str]:
        content = self._read(self._index_path)
        if not isinstance(content, tuple) or len(content) != 3:
            return {}
        version, stamp, overloads = content
        if version != self._version or stamp != self._source_stamp:
            return {}  # another Numba, or a stale module file: rebuilt on save
        return overloads  # type: ignore[no-any-return]

    def _save_index(self, overloads: dict[Any, str]) -> None:
        data = self._dump((self._version, self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(data)

    def load(self, key: Any) -> Any:
        """Return the cached data of ``key``, or None (missing, damaged: a miss)."""
        name = self._load_index().get(key)
        if name is None:
            return None
        return self._read(self._data_path(name))


class _BesideModuleLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Locate a function's cache in ``__pycache__`` beside its (generated) module file."""

    def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(Path(py_file).resolve().parent / "__pycache__")

    def get_cache_path(self) -> str:
        return self._cache_path

    @classmethod
    def from_function(
        cls, py_func: Callable[..., Any], py_file: str
    ) -> _BesideModuleLocator | None:
        if not os.path.isfile(py_file):
            return None
        return cls(py_func, py_file)


class _KilnCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_BesideModuleLocator]

    def rebuild(self, target_context: Any, payload: Any) -> Any:
        """Return the cached compile result, its library keeping its object code.

        Numba's loader hands the object code to LLVM and drops it; it stays on the
        library for :mod:`kiln_numba._shared_library` (which links it into a shared
        library when a process has none yet).
        """
        cres = super().rebuild(target_context, payload)
        _name, kind, data = payload[0]
        if kind == "object":
            cres.library.kiln_object_code = data[0]
        return cres


class KilnFunctionCache(caching.FunctionCache):
    """Numba's per-function cache, checksummed and never fatal (see the module docstring)."""

    _impl_class = _KilnCacheImpl

    def __init__(self, py_func: Callable[..., Any]) -> None:
        super().__init__(py_func)
        self.stats = CacheFileStats()
        self._cache_file = _CheckedCacheFile(
            cache_path=self._cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp(),
            stats=self.stats,
        )

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """Return the cached compile result for ``sig``, or None; never raises.

        Unlike Numba's, it initializes only Numba's runtime, not the registries (see
        the module docstring).
        """
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:  # noqa: BLE001  # checksummed data Numba could not rebuild
            self.stats.damaged.add(f"{self._cache_path} ({sig})")
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        """Store the compile result; a cache that cannot be written warns once."""
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            self.stats.write_errors += 1
            pycache = Path(self._cache_path)
            mark_unwritable(_cache_root(pycache), pycache, exc)


def _cache_root(pycache: Path) -> Path:
    """Return the kiln cache root of ``<root>/numba/<entry>/__pycache__``."""
    return pycache.parent.parent.parent


def njit(*args: Any, cache: bool = False, **kwargs: Any) -> Any:
    """Return ``numba.njit``, with kiln's checked cache (beside the module) when ``cache``.

    Generated modules use it as ``@njit(cache=True, error_model='numpy')``. Caching is
    skipped when the module's ``__kiln_cache__`` global is false (a module that has no
    file in the cache, e.g. when the cache is off or cannot be written).
    """

    def decorate(fn: Callable[..., Any]) -> Any:
        dispatcher = numba.njit(**kwargs)(fn)
        if cache and fn.__globals__.get("__kiln_cache__", True):
            dispatcher._cache = KilnFunctionCache(dispatcher.py_func)
        return dispatcher

    if len(args) == 1 and callable(args[0]) and not kwargs:
        return decorate(args[0])
    if args:
        raise TypeError("njit: pass options as keywords (cache=..., error_model=...)")
    return decorate


def cfunc(signature: Any, cache: bool = False, **options: Any) -> Any:
    """Return ``numba.cfunc(signature)``, with kiln's checked cache (beside the module).

    Like :func:`njit` for C callbacks: Numba compiles a ``cfunc`` when it is decorated,
    so the cache is set before that compile, and a cached callback's machine code (with
    everything it calls) is loaded instead of compiled. ``options`` are Numba's
    (``error_model=...``). Caching is skipped when the module's ``__kiln_cache__`` global
    is false.
    """
    args, return_type = sigutils.normalize_signature(signature)

    def decorate(fn: Callable[..., Any]) -> Any:
        callback = CFunc(fn, (args, return_type), {}, options)
        if cache and fn.__globals__.get("__kiln_cache__", True):
            callback._cache = KilnFunctionCache(fn)  # type: ignore[attr-defined]
        callback.compile()
        return callback

    return decorate


def cache_file_stats(dispatcher: Any) -> CacheFileStats | None:
    """Return the :class:`CacheFileStats` of a dispatcher made by :func:`njit` (or None)."""
    cache = getattr(dispatcher, "_cache", None)
    return cache.stats if isinstance(cache, KilnFunctionCache) else None
