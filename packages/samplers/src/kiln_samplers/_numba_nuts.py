"""The NUTS functions of :mod:`kiln_samplers._nuts_core`, compiled by Numba once.

The model's log-density is the native C ABI every native backend provides
(``kiln_compile.NativeModel``): an argument of type ``FunctionType(LOGP_C)`` (a C
function pointer, given as a :class:`NumbaNativeLogp`, which Numba's first-class
function types take through their ``WrapperAddressProtocol``) and its ``user_data``
address. ``sample_chunk`` has an explicit signature, so Numba compiles it once, caches
it on disk, and every model of every backend runs through it, as through the C kernel.

The first compile takes seconds. :func:`prefetch` starts it in a background process
when the on-disk cache holds no kernel yet, so that it runs on another core while the
model's own log-density compiles; :func:`kernel_pending` tells whether that process is
still at work (the chains meanwhile run the same functions in Python), and
:func:`compiled_sample_chunk` waits for it and loads what it stored.

Only Numba's public API is used: ``njit(cache=True)`` with ``numba.config.CACHE_DIR``
pointed, while the functions are decorated, at the folder ``numba/<digest>`` of the
kernel store (:func:`kiln_samplers.use_kernel_store`; the umbrella's is
``<kiln cache root>/samplers``), and first-class function types. Numba's cache keys a
function by its own file's time stamp and its own bytecode, never by the functions it
calls, and the kernel's functions (of ``_nuts_core.py``) hold the machine code of this
module's ``_call_logp``: so the folder is named by a digest of both files' contents, of
Numba's and NumPy's versions and of the Python (:func:`_kernel_key`), and a change to
either file can never load a stale kernel. Numba's cache files are pickles: the store
gives the folder only when it and everything in it are the user's own and private, and
the files are made private (0600) after Numba writes them. Without a store, or with
the cache off, nothing is written: the kernel is compiled once per process. Whether the
cache holds the kernel is told by a marker file written there once a process has
compiled or loaded it (:func:`_kernel_cached`).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import subprocess
import sys
import threading
import types as pytypes
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from kiln_samplers import _nuts_core as core
from kiln_samplers._native import NativeLogp

#: ``int logp(size_t n, const double* x, double* grad, double* logp, const void* user_data)``
#: as the Numba type of a first-class function.
LOGP_C = types.FunctionType(
    types.intc(
        types.uintp,
        types.CPointer(types.float64),
        types.CPointer(types.float64),
        types.CPointer(types.float64),
        types.voidptr,
    )
)

_F8 = types.float64[::1]
_F8_2D = types.float64[:, ::1]
SAMPLE_CHUNK_SIGNATURE = types.float64(
    LOGP_C,
    types.intp,
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
    types.float64,
    types.int64,
    types.boolean,
    types.boolean,
)


class NumbaNativeLogp(NativeLogp, types.WrapperAddressProtocol):  # type: ignore[misc]
    """A model's native log-density, callable from Python and passed to the Numba kernel.

    Numba takes it for an argument of type ``LOGP_C`` through its wrapper address
    (``numba.types.WrapperAddressProtocol``, public API): the kernel calls
    ``native.logp_cptr`` directly.
    """

    def __wrapper_address__(self) -> int:
        """Return the address of the model's C function."""
        return int(self.native.logp_cptr)

    def signature(self) -> Any:
        """Return the C function's Numba signature."""
        return LOGP_C.signature


@intrinsic
def _void_pointer(typingctx: Any, address: Any) -> Any:
    """Return the address ``address`` (an integer) as a ``void*``."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return types.voidptr(address), codegen


def _call_logp(fn, user_data, q, g):  # type: ignore[no-untyped-def]
    """``_nuts_core.call_logp`` for the model's C function: -inf where it rejects ``q``."""
    out = np.empty(1)
    code = fn(np.uintp(q.shape[0]), q.ctypes, g.ctypes, out.ctypes, _void_pointer(user_data))
    if code < 0:
        raise RuntimeError("the model's native log-density returned a fatal error code")
    if code != 0:
        return -np.inf
    return out[0]


_HELPERS = (
    "log_add_exp", "kinetic", "symmetric_accept", "is_turning", "leapfrog", "_ckpt_indices",
    "nuts_step", "dual_averaging", "welford_add", "grad_metric",
)  # fmt: skip
_namespace: dict[str, Any] = dict(vars(core))


def _compiled(name: str, folder: Path | None, signature: Any = None) -> Any:
    fn = getattr(core, name)
    copy = pytypes.FunctionType(fn.__code__, _namespace, name, fn.__defaults__)
    copy.__qualname__ = fn.__qualname__
    if folder is None:
        dispatcher = njit(nogil=True, error_model="numpy")(copy)
    else:
        # Numba picks a function's cache folder when it is decorated.
        configured = getattr(numba.config, "CACHE_DIR", "")
        setattr(numba.config, "CACHE_DIR", str(folder))  # noqa: B010 (not in Numba's stubs)
        try:
            dispatcher = njit(nogil=True, error_model="numpy", cache=True)(copy)
        finally:
            setattr(numba.config, "CACHE_DIR", configured)  # noqa: B010
    if signature is not None:  # compiled (or loaded) now, and for that signature only
        dispatcher.compile(signature)
        dispatcher.disable_compile()
    return dispatcher


def _compiled_call_logp(folder: Path | None) -> Any:
    """Return :func:`_call_logp` compiled (cached in ``folder`` when given)."""
    if folder is None:
        return njit(nogil=True, error_model="numpy")(_call_logp)
    configured = getattr(numba.config, "CACHE_DIR", "")
    setattr(numba.config, "CACHE_DIR", str(folder))  # noqa: B010 (not in Numba's stubs)
    try:
        return njit(nogil=True, error_model="numpy", cache=True)(_call_logp)
    finally:
        setattr(numba.config, "CACHE_DIR", configured)  # noqa: B010


#: The cache folder given to a background compile (its process has no kernel store).
_FOLDER_ARGUMENT: Path | None = None


def _cache_folder() -> Path | None:
    """Return the private folder holding Numba's cache of the kernel, or None (no cache)."""
    if _FOLDER_ARGUMENT is not None:
        return _FOLDER_ARGUMENT
    from kiln_samplers._c_nuts import kernel_store

    store = kernel_store()
    folder = getattr(store, "folder", None)
    if folder is None:
        return None
    found = folder("numba", _kernel_key(), whole_tree=True)
    return Path(found) if found is not None else None


#: The files whose code Numba compiles into the kernel.
_SOURCES = (Path(core.__file__), Path(__file__))


def _kernel_key() -> str:
    """Return the digest naming the folder of Numba's cache of the kernel (module docstring).

    It covers the contents of :data:`_SOURCES` (``_nuts_core.py`` and this module),
    Numba's and NumPy's versions and the Python.
    """
    key = hashlib.sha256()
    for path in _SOURCES:
        key.update(path.read_bytes())
    key.update(f"{numba.__version__} {np.__version__} {sys.implementation.cache_tag}".encode())
    return key.hexdigest()[:16]


def _make_private(folder: Path) -> None:
    """Make what Numba wrote in ``folder`` private (its files follow the umask)."""
    for where, folders, files in os.walk(folder):
        for name in folders:
            os.chmod(os.path.join(where, name), 0o700)
        for name in files:
            os.chmod(os.path.join(where, name), 0o600)


#: The background compile started by :func:`prefetch` (None when none was needed).
_prefetching: subprocess.Popen[bytes] | None = None
_PREFETCH_TIMEOUT_S = 600.0


def _marker(folder: Path) -> Path:
    """Return the marker file saying that Numba's cache in ``folder`` holds the kernel.

    ``folder`` is named by :func:`_kernel_key`, so the marker is of this kernel.
    """
    return folder / "kiln-nuts.cached"


def _kernel_cached(folder: Path | None) -> bool:
    """Whether a process compiled (or loaded) ``sample_chunk`` into Numba's cache in ``folder``."""
    if getattr(numba.config, "DISABLE_JIT", False):
        return True  # nothing to compile
    try:
        return folder is not None and _marker(folder).is_file()
    except OSError:
        return False


def _mark_cached(folder: Path | None) -> None:
    """Write :func:`_marker` (a cache that cannot be written has none: a later prefetch)."""
    if folder is None:
        return
    try:
        _make_private(folder)
        fd = os.open(_marker(folder), os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    except OSError:
        pass


def prefetch() -> None:
    """Start compiling the NUTS kernel in a background process if no cache holds it.

    Returns at once. A background process that fails costs nothing: the kernel is then
    compiled in this process when :func:`compiled_sample_chunk` is first called.
    """
    global _prefetching
    if _prefetching is not None or _load_sample_chunk.cache_info().currsize:
        return
    folder = _cache_folder()
    if folder is None or _kernel_cached(folder):
        return  # no cache to fill (compiled here when needed), or filled already
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = (
        "import sys, pathlib, kiln_samplers._numba_nuts as m; "
        "m._FOLDER_ARGUMENT = pathlib.Path(sys.argv[1]); m.compiled_sample_chunk()"
    )
    try:
        _prefetching = subprocess.Popen(
            [sys.executable, "-c", code, str(folder)],
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
    folder = _cache_folder()
    _namespace["call_logp"] = _compiled_call_logp(folder)
    for name in _HELPERS:
        _namespace[name] = _compiled(name, folder)
    kernel = _compiled("sample_chunk", folder, SAMPLE_CHUNK_SIGNATURE)
    _mark_cached(folder)
    return kernel
