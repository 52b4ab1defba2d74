"""Numba's on-disk cache for generated modules: beside the module, checksummed, never fatal.

The functions of a generated module are decorated with this module's :func:`njit`
(``@njit(cache=True, ...)``) and :func:`cfunc`. Where Numba's internals are usable
(:func:`kiln_numba._numba_internals.usable`), each function gets kiln's checked cache
instead of Numba's own ``FunctionCache``, which differs in four ways:

- it always lives in ``__pycache__`` beside the module file (the Stage-2 cache entry),
  never in a fallback folder elsewhere, so one cache root holds everything;
- every index and data file carries a SHA-256 of its content, so a truncated or
  corrupted file (which Numba would unpickle, or hand to LLVM, and crash on) is
  detected, counted in :attr:`CacheFileStats.damaged` and treated as a miss: the
  function is compiled again and the file rewritten;
- every file also carries a digest of the module's source and the function's name,
  so a file copied from another function's cache is refused; files are written
  private (0600, in a 0700 folder) and read only when they and their folders are the
  user's own and nobody else can write them (Numba's files are pickles: whoever can
  write them can run code);
- a file that cannot be written (read-only cache) leaves the function working, with
  one :class:`~kiln_compile.CacheWarning` for the whole cache root;
- loading machine code does not refresh Numba's typing and target registries (about
  0.2 s once per process): code loaded from the cache is never typed or lowered again.

Writes stay Numba's: a temporary file renamed into place, so two processes compiling
the same function at once both succeed and readers never see half a file. On a Numba
whose internals were not checked, the functions get Numba's own cache
(``numba.njit(cache=True)``), which also lives beside the module file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba

from kiln_compile import (
    DiskCache,
    config,
    make_private_dirs,
    mark_unwritable,
    new_temporary,
    trusted_file,
    trusted_folder,
)
from kiln_numba import _numba_cache_internals as cache_internals
from kiln_numba import _numba_internals as internals
from kiln_numba._numba_cache_internals import CacheFileStats, CachePolicy

__all__ = ["CacheFileStats", "cache_file_stats", "cfunc", "kernel_njit", "njit"]


def _cache_root(pycache: Path) -> Path:
    """Return the kiln cache root of ``<root>/numba/<entry>/__pycache__``."""
    return pycache.parent.parent.parent


def _write_error(pycache: Path, exc: OSError) -> None:
    mark_unwritable(_cache_root(pycache), pycache, exc)


def _trusted(path: str) -> bool:
    """Whether Numba's cache file ``path`` may be read: its folders and itself are private."""
    pycache = Path(path).parent
    root = _cache_root(pycache)
    return trusted_folder(root, pycache) and trusted_file(path, root)


def _make_folder(path: str) -> None:
    pycache = Path(path)
    make_private_dirs(_cache_root(pycache), pycache)


_POLICY = CachePolicy(
    trusted=_trusted,
    write_temporary=new_temporary,
    make_folder=_make_folder,
    on_write_error=_write_error,
)


def njit(*args: Any, cache: bool = False, callee: bool = False, **kwargs: Any) -> Any:
    """Return ``numba.njit``, with kiln's checked cache (beside the module) when ``cache``.

    Generated modules use it as ``@njit(cache=True, error_model='numpy')``. Caching is
    skipped when the module's ``__kiln_cache__`` global is false (a module that has no
    file in the cache, e.g. when the cache is off or cannot be written). ``callee``
    marks a function that only other compiled functions of the module call (its code is
    cached inside theirs): it is compiled without the wrappers Python would call it
    through (:func:`kiln_numba._numba_internals.callee_options`), and cannot be cached.
    Calling such a function from Python is not checked by Numba: it crashes.
    """
    if callee:
        if cache:
            raise TypeError("njit: a callee (callee=True) is cached inside its callers")
        kwargs.update(internals.callee_options())

    def decorate(fn: Callable[..., Any]) -> Any:
        wanted = cache and fn.__globals__.get("__kiln_cache__", True)
        if wanted and not internals.usable():
            return numba.njit(cache=True, **kwargs)(fn)
        dispatcher = numba.njit(**kwargs)(fn)
        if wanted:
            cache_internals.checked_cache(dispatcher, dispatcher.py_func, _POLICY)
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

    def decorate(fn: Callable[..., Any]) -> Any:
        wanted = cache and fn.__globals__.get("__kiln_cache__", True)
        if not internals.usable():
            return numba.cfunc(signature, cache=bool(wanted), **options)(fn)
        callback = cache_internals.cfunc_uncompiled(fn, signature, options)
        if wanted:
            cache_internals.checked_cache(callback, fn, _POLICY)
        callback.compile()
        return callback

    return decorate


def cache_file_stats(dispatcher: Any) -> CacheFileStats | None:
    """Return the :class:`CacheFileStats` of a dispatcher made by :func:`njit` (or None)."""
    return cache_internals.cache_file_stats(dispatcher)


def attach_kernel_cache(dispatcher: Any) -> None:
    """Give a kernel's dispatcher kiln's checked cache in ``<root>/numba/kernels/<module>``.

    Called at the dispatcher's first compile, so it follows the config then; nothing
    when the cache is off, cannot be written or is not trusted.
    """
    fn = dispatcher.py_func
    folder = DiskCache("numba").folder("kernels", fn.__module__)
    if folder is not None:
        cache_internals.checked_cache(dispatcher, fn, _POLICY, cache_path=str(folder))


def kernel_njit(*args: Any, **options: Any) -> Any:
    """Return ``numba.njit`` for kiln's own compiled kernels, cached under the kiln cache root.

    For functions of installed modules (linear algebra, indexing, random draws) that
    generated code calls: their machine code is kept with kiln's checked cache in
    ``<cache root>/numba/kernels/<module>``, chosen at the first compile (so
    ``config.cache`` and ``config.cache_dir`` set in Python are honoured), never in
    ``__pycache__`` beside the installed file. ``options`` are Numba's (``inline=...``,
    ``error_model=...``). On a Numba whose internals were not checked, Numba's own cache
    beside the module, when ``config.cache`` is on at import.
    """

    def decorate(fn: Callable[..., Any]) -> Any:
        if not internals.usable():
            return numba.njit(cache=bool(config.cache), **options)(fn)
        return cache_internals.late_cache_dispatcher(fn, options, attach_kernel_cache)

    if len(args) == 1 and callable(args[0]) and not options:
        return decorate(args[0])
    if args:
        raise TypeError("kernel_njit: pass options as keywords (inline=..., error_model=...)")
    return decorate
