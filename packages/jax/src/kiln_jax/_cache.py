"""Stage 2 on disk: JAX's persistent compilation cache, under kiln's cache root.

XLA's compiled executables are kept by JAX itself (its persistent compilation cache,
keyed by the lowered program, JAX's version and the device). kiln points it at
``<cache root>/jax`` (``KILN_CACHE_DIR``, ``config.cache_dir``) the first time a graph
is linked on JAX, unless the user configured a cache directory for JAX already (that
one is kept), and lowers JAX's minimum compile time for an entry to zero when it was
left at its default (kiln's functions mostly compile in well under JAX's default of
one second; without this, nothing would be stored). Both are settings of JAX's global
config, changed once per process, here and nowhere else. With ``config.cache`` off
nothing is changed; a cache root that cannot be written, or that another user owns or
can write (JAX's entries are compiled code), gives one
:class:`~kiln_compile.CacheWarning` (like kiln's other caches) and JAX runs without
the persistent cache. The folder is created private (0700), like every folder of the
cache root; JAX writes the files in it.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from kiln_compile import DiskCache, config, mark_unwritable, new_temporary
from kiln_jax._jax_internals import reset_compilation_cache

_NAMESPACE = "jax"
#: JAX's default ``jax_persistent_cache_min_compile_time_secs``.
_JAX_DEFAULT_MIN_COMPILE_TIME = 1.0


def _probe(directory: Path) -> None:
    """Raise OSError unless a file can be created in ``directory``."""
    fd, name = new_temporary(directory)
    os.close(fd)
    os.unlink(name)


def enable_compilation_cache() -> str | None:
    """Point JAX's persistent compilation cache at ``<kiln cache root>/jax``.

    A directory the user configured for JAX (``jax_compilation_cache_dir``) is kept.
    Returns the directory JAX uses, or None when there is none (``config.cache`` off,
    or kiln's cache root cannot be written: one ``CacheWarning`` then).

    Examples
    --------
    >>> enable_compilation_cache()  # doctest: +SKIP
    '/home/me/.cache/kiln/jax'
    """
    current = jax.config.jax_compilation_cache_dir
    if current:
        return str(current)
    if not config.cache:
        return None
    cache = DiskCache(_NAMESPACE)
    target = cache.folder()  # private (0700), and None if someone else can write there
    if target is None:
        return None
    try:
        _probe(target)
    except OSError as exc:
        mark_unwritable(cache.root, target, exc)
        return None
    jax.config.update("jax_compilation_cache_dir", str(target))
    if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # JAX decides once per process whether it uses the cache: a function compiled before
    # this (with no directory) made it decide "no". There was no cache in use: start over.
    reset_compilation_cache()
    return str(target)
