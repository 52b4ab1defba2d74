"""The checked per-function cache and the dispatchers kiln_numba makes, on Numba's internals.

Part of the wall :mod:`kiln_numba._numba_internals` (whose :data:`CHECKED` versions and
:func:`usable` gate everything here; callers ask it first): the per-function on-disk
cache beside a generated module, checksummed and never fatal, that loads machine code
without refreshing Numba's registries and keeps the object code for the shared library
(:func:`checked_cache`: ``numba.core.caching``'s ``FunctionCache``,
``IndexDataCacheFile``, ``_CacheLocator`` and ``_SourceFileBackedLocatorMixin``,
``CompileResultCacheImpl.rebuild``, a dispatcher's ``_cache``,
``numba.core.ccallback.CFunc``), and dispatchers whose cache is attached at their first
compile or whose explicit signatures are compiled at first use
(:func:`late_cache_dispatcher`, :func:`first_use_dispatcher`:
``CPUDispatcher._compile_for_args``, ``get_call_template``, ``typeinfer``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# --- the checked per-function cache ---------------------------------------------------------

_MAGIC = b"KILNNBA2"
_DIGEST = 32


def _pack(payload: bytes, binding: bytes) -> bytes:
    return _MAGIC + binding + hashlib.sha256(payload).digest() + payload


def _unpack(blob: bytes, binding: bytes) -> bytes | None:
    """Return the payload of a checksummed file written for ``binding``, or None.

    None when the file is damaged, or was written for another function (``binding``
    is a digest of the module's source and the function's name).
    """
    start = len(_MAGIC) + _DIGEST
    head = start + _DIGEST
    if len(blob) < head or not blob.startswith(_MAGIC) or blob[len(_MAGIC) : start] != binding:
        return None
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[start:head]:
        return None
    return payload


@dataclasses.dataclass(frozen=True)
class CachePolicy:
    """What kiln_numba's checked cache asks of kiln's cache layer.

    ``trusted(path)`` says whether a cache file may be read (its folders and the file
    are the user's own and private); ``write_temporary(folder)`` returns ``(fd, path)``
    of a new private temporary file there; ``make_folder(path)`` creates a private
    folder; ``on_write_error(pycache, exc)`` is told of a failed save.
    """

    trusted: Callable[[str], bool]
    write_temporary: Callable[[str], tuple[int, str]]
    make_folder: Callable[[str], None]
    on_write_error: Callable[[Path, OSError], None]


@dataclasses.dataclass
class CacheFileStats:
    """What one function's cache met in this process.

    ``damaged`` holds the files found truncated or corrupted (each then rebuilt);
    ``write_errors`` counts saves that failed (a read-only cache).
    """

    damaged: set[str] = dataclasses.field(default_factory=set)
    write_errors: int = 0


# The cache's classes subclass Numba's internals: each is defined at first use (after
# usable() said they are there), not when this module is imported.


@functools.cache
def _checked_cache_file_class() -> type:
    from numba.core import caching
    from numba.core.serialize import dumps

    class CheckedCacheFile(caching.IndexDataCacheFile):  # type: ignore[misc, name-defined]
        """Numba's index + data files, each prefixed with a magic, a binding and a SHA-256.

        The binding is a digest of the module's source and the function's name: a
        file copied from another function's cache is refused. Files are read only
        where ``policy.trusted`` says so, and written private (0600).
        """

        def __init__(
            self,
            cache_path: str,
            filename_base: str,
            source_stamp: Any,
            stats: CacheFileStats,
            binding: bytes,
            policy: CachePolicy,
        ) -> None:
            super().__init__(cache_path, filename_base, source_stamp)
            self.stats = stats
            self._binding = binding
            self._policy = policy

        def _dump(self, obj: Any) -> bytes:
            return _pack(dumps(obj), self._binding)

        @contextlib.contextmanager
        def _open_for_write(self, filepath: str) -> Iterator[Any]:
            fd, tmp = self._policy.write_temporary(os.path.dirname(filepath))
            try:
                with os.fdopen(fd, "wb") as f:
                    yield f
                os.replace(tmp, filepath)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise

        def _read(self, path: str) -> Any:
            """Return the unpickled content of ``path``; None if missing, damaged or untrusted."""
            if not self._policy.trusted(path):
                return None
            try:
                with open(path, "rb") as f:
                    blob = f.read()
            except OSError:
                return None
            payload = _unpack(blob, self._binding)
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

    return CheckedCacheFile


@functools.cache
def _locator_class() -> type:
    from numba.core import caching

    class BesideModuleLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):  # type: ignore[misc, name-defined]
        """Locate a function's cache in ``__pycache__`` beside its (generated) module."""

        def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = str(Path(py_file).resolve().parent / "__pycache__")

        def get_cache_path(self) -> str:
            return self._cache_path

        def ensure_cache_path(self) -> None:
            """Create the cache folder, private to the user (Numba's follows the umask)."""
            make_folder = getattr(self, "kiln_make_folder", None)
            if make_folder is not None:
                make_folder(self._cache_path)
            else:
                super().ensure_cache_path()

        @classmethod
        def from_function(cls, py_func: Callable[..., Any], py_file: str) -> Any:
            if not os.path.isfile(py_file):
                return None
            return cls(py_func, py_file)

    return BesideModuleLocator


@functools.cache
def _cache_impl_class() -> type:
    from numba.core import caching

    class KilnCacheImpl(caching.CompileResultCacheImpl):  # type: ignore[misc, name-defined]
        _locator_classes = [_locator_class()]  # type: ignore[list-item]

        def rebuild(self, target_context: Any, payload: Any) -> Any:
            """Return the cached compile result, its library keeping its object code.

            Numba's loader hands the object code to LLVM and drops it; it stays on the
            library for :mod:`kiln_numba._shared_library` (see :func:`object_code`).
            """
            cres = super().rebuild(target_context, payload)
            _name, kind, data = payload[0]
            if kind == "object":
                cres.library.kiln_object_code = data[0]
            return cres

    return KilnCacheImpl


@functools.cache
def function_cache_class() -> type:
    """Return ``KilnFunctionCache``, defined at first use: it subclasses Numba's internals."""
    from numba.core import caching
    from numba.core.runtime import rtsys

    class KilnFunctionCache(caching.FunctionCache):  # type: ignore[misc, name-defined]
        """Numba's per-function cache, checksummed and never fatal.

        Loading machine code initializes only Numba's runtime (NRT), not its typing and
        target registries (Numba installs all of its NumPy, CPython and typed-container
        implementations there, about 0.2 s once per process): loaded code is never typed
        or lowered again. A compile (a miss) refreshes the registries itself.
        """

        _impl_class = _cache_impl_class()  # type: ignore[assignment]

        def __init__(
            self, py_func: Callable[..., Any], policy: CachePolicy, cache_path: str | None
        ):
            super().__init__(py_func)
            self.stats = CacheFileStats()
            self._on_write_error = policy.on_write_error
            locator = self._impl.locator
            if cache_path is not None:
                locator._cache_path = self._cache_path = cache_path
            locator.kiln_make_folder = policy.make_folder
            binding = hashlib.sha256(Path(locator._py_file).read_bytes())
            binding.update(self._impl.filename_base.encode())
            self._cache_file = _checked_cache_file_class()(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base,
                source_stamp=locator.get_source_stamp(),
                stats=self.stats,
                binding=binding.digest(),
                policy=policy,
            )

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            """Return the cached compile result for ``sig``, or None; never raises."""
            try:
                rtsys.initialize(target_context)
                with self._guard_against_spurious_io_errors():
                    return self._load_overload(sig, target_context)
            except Exception:  # noqa: BLE001  # checksummed data Numba could not rebuild
                self.stats.damaged.add(f"{self._cache_path} ({sig})")
                return None

        def save_overload(self, sig: Any, data: Any) -> None:
            """Store the compile result; a write that fails is reported, never raised."""
            try:
                super().save_overload(sig, data)
            except OSError as exc:
                self.stats.write_errors += 1
                self._on_write_error(Path(self._cache_path), exc)

    return KilnFunctionCache


def checked_cache(
    dispatcher: Any,
    py_func: Callable[..., Any],
    policy: CachePolicy,
    cache_path: str | None = None,
) -> CacheFileStats:
    """Give ``dispatcher`` (an njit dispatcher or a ``CFunc``) kiln's checked cache.

    The cache lives in ``cache_path``, by default ``__pycache__`` beside ``py_func``'s
    module file, under the rules of ``policy`` (what may be read, how files are
    written, who hears of a failed save). Returns the cache's statistics.
    """
    cache = function_cache_class()(py_func, policy, cache_path)
    dispatcher._cache = cache
    return cache.stats  # type: ignore[no-any-return]


def cache_file_stats(dispatcher: Any) -> CacheFileStats | None:
    """Return the :class:`CacheFileStats` of a dispatcher given :func:`checked_cache`, or None."""
    stats = getattr(getattr(dispatcher, "_cache", None), "stats", None)
    return stats if isinstance(stats, CacheFileStats) else None


def cfunc_uncompiled(fn: Callable[..., Any], signature: Any, options: dict[str, Any]) -> Any:
    """Return Numba's ``CFunc`` of ``fn`` before its compile (``numba.cfunc`` compiles at once)."""
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    args, return_type = sigutils.normalize_signature(signature)
    return CFunc(fn, (args, return_type), {}, options)


# --- signatures compiled at first use --------------------------------------------------------


@functools.cache
def _late_cache_class() -> type:
    from numba.core.registry import CPUDispatcher

    class LateCacheDispatcher(CPUDispatcher):  # type: ignore[misc, valid-type]
        """A CPU dispatcher that is given its on-disk cache at its first compile.

        So the cache follows the config at that moment (``config.cache_dir`` set in
        Python after import included), not at import.
        """

        _kiln_attach: Callable[[Any], None] | None = None

        def compile(self, sig: Any) -> Any:
            """Attach the cache (once), then compile ``sig`` or load it from the cache."""
            from kiln_graph.helpers import freeze_survivors, long_lived_objects

            attach, self._kiln_attach = self._kiln_attach, None
            if attach is not None:
                attach(self)
            with long_lived_objects():
                compiled = super().compile(sig)
                freeze_survivors()  # later collections in this compile skip what it made
                return compiled

    return LateCacheDispatcher


def late_cache_dispatcher(
    fn: Callable[..., Any], options: dict[str, Any], attach: Callable[[Any], None] | None
) -> Any:
    """Return a nopython dispatcher of ``fn``; ``attach(it)`` runs before its first compile."""
    dispatcher = _late_cache_class()(
        py_func=fn, locals={}, targetoptions={"nopython": True, **options}
    )
    dispatcher._kiln_attach = attach
    return dispatcher


@functools.cache
def _first_use_class() -> type:
    from numba.core import typeinfer

    class FirstUseDispatcher(_late_cache_class()):  # type: ignore[misc, valid-type]
        """A CPU dispatcher compiled for its signatures when it is first used."""

        _kiln_signatures: tuple[str, ...] = ()

        def _compile_signatures(self) -> None:
            signatures, self._kiln_signatures = self._kiln_signatures, ()
            if not signatures:
                return
            with typeinfer.register_dispatcher(self):
                for sig in signatures:
                    self.compile(sig)
            self.disable_compile()

        def get_call_template(self, args: Any, kws: Any) -> Any:
            """Compile the signatures, then type a call from compiled code (as Numba does)."""
            self._compile_signatures()
            return super().get_call_template(args, kws)

        def _compile_for_args(self, *args: Any, **kws: Any) -> Any:
            """Compile the signatures at the first call from Python, then dispatch it."""
            if self._kiln_signatures:
                self._compile_signatures()
                return self(*args, **kws)
            return super()._compile_for_args(*args, **kws)  # type: ignore[misc]

    return FirstUseDispatcher


def first_use_dispatcher(
    fn: Callable[..., Any],
    signatures: tuple[str, ...],
    attach: Callable[[Any], None] | None,
) -> Any:
    """Return a nopython dispatcher of ``fn`` that compiles ``signatures`` at first use.

    ``attach(dispatcher)`` (its on-disk cache) is called before that compile.
    """
    dispatcher = _first_use_class()(py_func=fn, locals={}, targetoptions={"nopython": True})
    dispatcher._kiln_attach = attach
    dispatcher._kiln_signatures = signatures
    return dispatcher
