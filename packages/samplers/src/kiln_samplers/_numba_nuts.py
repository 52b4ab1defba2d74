"""The NUTS functions of :mod:`kiln_samplers._nuts_core`, compiled by Numba once.

The model's log-density is an argument of type ``FunctionType(LOGP_GRAD_SIGNATURE)``
(a function pointer): ``sample_chunk`` has an explicit signature, so Numba compiles it
once, caches it on disk, and every model's native log-density (a function compiled
with that signature, e.g. by ``kiln_numba.native_logp_grad``) runs through it.

The first compile takes seconds. :func:`prefetch` starts it in a background process
when the on-disk cache holds no kernel yet, so that it runs on another core while the
model's own log-density compiles; :func:`kernel_pending` tells whether that process is
still at work (the chains meanwhile run the same functions in Python), and
:func:`compiled_sample_chunk` waits for it and loads what it stored.
"""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
import threading
import types as pytypes
from typing import Any

import numba
from numba import njit, types
from numba.core import caching, sigutils
from numba.core.runtime import rtsys

from kiln_samplers import _nuts_core as core
from kiln_samplers._protocol import LOGP_GRAD_SIGNATURE

_ARGS, _RETURN = sigutils.normalize_signature(LOGP_GRAD_SIGNATURE)
LOGP_GRAD = types.FunctionType(_RETURN(*_ARGS))

_F8 = types.float64[::1]
_F8_2D = types.float64[:, ::1]
SAMPLE_CHUNK_SIGNATURE = types.float64(
    LOGP_GRAD,
    types.int64[::1],
    types.npy_rng,
    _F8,
    _F8,
    types.float64,
    _F8,
    _F8,
    _F8_2D,
    types.int64,
    _F8_2D,
    _F8_2D,
    types.float64,
    types.int64,
    types.float64,
    types.boolean,
    types.boolean,
)

_HELPERS = (
    "log_add_exp", "kinetic", "is_turning", "leapfrog", "_ckpt_indices", "nuts_step",
    "dual_averaging",
)  # fmt: skip
_namespace: dict[str, Any] = dict(vars(core))


class _LoadOnlyCache(caching.FunctionCache):
    """Numba's on-disk cache, except that loading machine code skips the registry refresh.

    Numba's ``load_overload`` first refreshes its typing and target registries (it
    imports and installs every NumPy and CPython implementation it has, about 0.2 s once
    per process), although code loaded from the cache is never typed or lowered again:
    it needs only the runtime (NRT). A cache miss compiles, and refreshes then. (The
    same holds for kiln_numba's cache of generated modules.)
    """

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


def _compiled(name: str, signature: Any = None) -> Any:
    fn = getattr(core, name)
    copy = pytypes.FunctionType(fn.__code__, _namespace, name, fn.__defaults__)
    copy.__qualname__ = fn.__qualname__
    dispatcher = njit(nogil=True, error_model="numpy")(copy)
    dispatcher.enable_caching()
    dispatcher._cache = _LoadOnlyCache(dispatcher.py_func)  # type: ignore[attr-defined]
    if signature is not None:  # compiled (or loaded) now, and for that signature only
        dispatcher.compile(signature)
        dispatcher.disable_compile()
    return dispatcher


#: The background compile started by :func:`prefetch` (None when none was needed).
_prefetching: subprocess.Popen[bytes] | None = None
_PREFETCH_TIMEOUT_S = 600.0


def _kernel_cached() -> bool:
    """Whether Numba's on-disk cache already holds a compiled ``sample_chunk``."""
    if getattr(numba.config, "DISABLE_JIT", False):
        return True  # nothing to compile
    try:
        return bool(_compiled("sample_chunk")._cache._cache_file._load_index())
    except Exception:  # an unreadable cache or a Numba without these internals
        return False


def prefetch() -> None:
    """Start compiling the NUTS kernel in a background process if no cache holds it.

    Returns at once. A background process that fails costs nothing: the kernel is then
    compiled in this process when :func:`compiled_sample_chunk` is first called.
    """
    global _prefetching
    if _prefetching is not None or _load_sample_chunk.cache_info().currsize or _kernel_cached():
        return
    env = dict(os.environ)
    cache_dir = getattr(numba.config, "CACHE_DIR", "")
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = cache_dir
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = "from kiln_samplers._numba_nuts import compiled_sample_chunk as f; f()"
    try:
        _prefetching = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:  # no new processes here: compile in this one when needed
        _prefetching = None
        return
    # A process that exits while the kernel compiles (sampling done in Python first)
    # waits for it, so the cache it leaves is complete for the next one.
    atexit.register(_wait_for_prefetch)


def kernel_pending() -> bool:
    """Whether the background compile started by :func:`prefetch` is still running."""
    process = _prefetching
    return process is not None and process.poll() is None


def _wait_for_prefetch() -> None:
    global _prefetching
    if _prefetching is None:
        return
    try:
        _prefetching.wait(timeout=_PREFETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _prefetching.kill()
        _prefetching.wait()
    _prefetching = None


_loading = threading.Lock()


def compiled_sample_chunk() -> Any:
    """Return the compiled :func:`kiln_samplers._nuts_core.sample_chunk` (loaded or built once).

    Waits for a background compile started by :func:`prefetch`, then loads its result.
    Chains that start together (threads) load it once: the others wait for the first.
    """
    with _loading:
        return _load_sample_chunk()


@functools.cache
def _load_sample_chunk() -> Any:
    _wait_for_prefetch()
    for name in _HELPERS:
        _namespace[name] = _compiled(name)
    return _compiled("sample_chunk", SAMPLE_CHUNK_SIGNATURE)
