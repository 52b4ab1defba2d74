"""kiln's NUTS transition compiled from C (``_nuts_kernel.c``), the kernel NUTS runs first.

The Numba kernel (:mod:`kiln_samplers._numba_nuts`) takes 3-5 s of Numba's typing and
LLVM the first time, and that compile is most of a cold ``kl.sample``. The same
functions written in C take the system's C compiler about 0.3 s. The library is built
once, in a background thread started by :func:`prefetch` (the compiler runs as another
process, on another core, while the model compiles), and kept in the store given to
:func:`use_kernel_store`: the umbrella ``kiln`` gives ``kiln_compile.DiskCache("samplers")``,
so the kernel is an entry of kiln's disk cache (checksummed, written atomically,
following ``config.cache_dir`` and ``config.cache``). The verified bytes are written to a
file of this process's own, which is loaded and deleted. Without a store the kernel is
built once per process.

Two definitions of one algorithm, on purpose: ``_nuts_core.py`` (run by Python, and
compiled by Numba where there is no C compiler) and ``_nuts_kernel.c``, written line
by line after it. The C one pays for itself: about 0.3 s to build cold against 3-5 s of
Numba's compile, the difference of a cold ``kl.sample``. The contract between them is
the bit-exact test (``test_the_c_kernel_computes_what_the_python_core_computes_to_the_bit``
in ``packages/samplers/tests/test_nuts.py``): the same draws, statistics and generator
state, to the bit. Change both together, and that test tells whether they still agree.

The kernel calls the model's native log-density through the one C ABI every native
backend provides (``kiln_compile.NativeModel``, :class:`kiln_samplers.NativePointers`):
``int logp(size_t n, const double* x, double* grad, double* logp, const void* user_data)``
at ``logp_cptr``, with ``user_data_ptr``. This package knows no backend's calling
convention, and the kernel is the same library for every backend and every model.

It computes what ``_nuts_core`` computes, in the same order, with NumPy's own normal
generator, so the draws are those of the Python and Numba kernels (a test checks it to
the bit). Without a C compiler (or on a platform other than Linux and macOS), or when
the build fails, :func:`sample_chunk_for` returns None and the Numba kernel runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from kiln_samplers import _nuts_core as core
from kiln_samplers._native import NativeLogp, fatal_error

_SOURCE = Path(__file__).with_name("_nuts_kernel.c")
#: The library's sources: the kernel, and the diagnostics' passes after their sort
#: (``_diagnostics_kernel.c``, called by :mod:`kiln_samplers._diagnostics`).
_SOURCES = (_SOURCE, Path(__file__).with_name("_diagnostics_kernel.c"))
_FLAGS = ("-O2", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fno-math-errno")
_COMPILE_TIMEOUT_S = 120.0

_f8 = ctypes.c_double
_i8 = ctypes.c_int64
_i4 = ctypes.c_int32
_p = ctypes.c_void_p


def _compiler() -> str | None:
    """Return the C compiler's path (``CC``, Python's, or ``cc``), or None."""
    if sys.platform not in ("linux", "darwin"):
        return None
    for candidate in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc"):
        if candidate:
            found = shutil.which(candidate.split()[0])
            if found:
                return found
    return None


def _npyrandom() -> Path:
    """NumPy's static library of its generators' distributions (``random_standard_normal``)."""
    return Path(np.random.__file__).parent / "lib" / "libnpyrandom.a"


class ArtifactStore(Protocol):
    """Where the built kernel is kept between processes: checksummed, written atomically.

    ``kiln_compile.DiskCache("samplers")`` is one (the umbrella ``kiln`` installs it with
    :func:`use_kernel_store`, so the kernel follows ``config.cache_dir`` and ``config.cache``).
    """

    def get(self, key: str) -> bytes | None:
        """Return the bytes stored under ``key`` (verified), or None."""
        ...

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key``; return whether it was written."""
        ...

    def folder(self, *parts: str, whole_tree: bool = False) -> Path | None:
        """Return a private folder of the store for files another library writes, or None.

        The Numba kernel keeps Numba's cache there. None: no such folder (caching off,
        or a folder someone else can write).
        """
        ...


#: The store of built kernels (None: the kernel is built once per process).
_store: ArtifactStore | None = None


def use_kernel_store(store: ArtifactStore | None) -> None:
    """Keep the built NUTS kernels in ``store`` (None: build them once per process).

    The C kernel is an entry of the store; the Numba kernel's Numba cache lives in
    ``store.folder("numba")``. Without a store nothing is written to disk.
    """
    global _store
    _store = store


def kernel_store() -> ArtifactStore | None:
    """Return the store given to :func:`use_kernel_store` (None: none)."""
    return _store


def _library_key(compiler: str) -> str:
    """Return the kernel's key: a digest of the sources, compiler, flags, NumPy, machine."""
    key = hashlib.sha256()
    for source in _SOURCES:
        key.update(source.read_bytes())
    key.update(f"{compiler} {' '.join(_FLAGS)}".encode())
    key.update(f"{np.__version__} {platform.machine()} {sys.platform}".encode())
    return key.hexdigest()


_BUILD_PREFIX = "kiln-nuts-"


def _remove_stale_builds() -> None:
    """Remove the build folders of killed processes of this user (``kiln-nuts-<pid>-*``)."""
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"{_BUILD_PREFIX}*-*"):
        pid = folder.name[len(_BUILD_PREFIX) :].split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def _build(compiler: str, state: _State) -> bytes | None:
    """Return the kernel compiled into a shared library (its bytes), or None."""
    _remove_stale_builds()
    with tempfile.TemporaryDirectory(prefix=f"{_BUILD_PREFIX}{os.getpid()}-") as folder:
        out = Path(folder) / "nuts.so"
        command = [
            compiler, *_FLAGS, f"-I{np.get_include()}", *map(str, _SOURCES), str(_npyrandom()),
            "-lm", "-o", str(out),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                raise OSError(done.stderr.strip()[-2000:])
            return out.read_bytes()
        except (OSError, subprocess.SubprocessError) as exc:
            state.error = f"compiling {', '.join(p.name for p in _SOURCES)} failed: {exc}"
            return None


def _private_copy(payload: bytes, state: _State) -> Path:
    """Write verified library bytes to a file of this process's own, to be loaded.

    The file is what the loader maps, so it is written from the bytes the store
    verified (nothing another process can change between the check and the load). On
    Linux it is an anonymous in-memory file (``memfd_create``), which nothing can see
    and which leaves nothing behind; elsewhere a private temporary file, deleted once
    loaded.
    """
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create("kiln-nuts")
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        state.fd = fd
        return Path(f"/proc/self/fd/{fd}")
    fd, name = tempfile.mkstemp(prefix="kiln-nuts-", suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(payload)
    return Path(name)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.path: Path | None = None
        self.fd: int | None = None  # the in-memory file behind ``path``, if any
        self.library: Any = None
        self.error: str | None = None


_state = _State()


def _find_or_build(state: _State, store: ArtifactStore | None) -> None:
    """Find the library in ``store`` or build it, for ``state`` (both as when started)."""
    compiler = _compiler()
    if compiler is None:
        state.error = "no C compiler (CC, or cc on PATH) on Linux or macOS"
        return
    if not _npyrandom().is_file():
        state.error = f"NumPy's {_npyrandom()} is missing"
        return
    key = _library_key(compiler)
    payload = store.get(key) if store is not None else None
    if payload is None:
        payload = _build(compiler, state)
        if payload is None:
            return
        if store is not None:
            store.put(key, payload)
    state.path = _private_copy(payload, state)


def prefetch() -> bool:
    """Start building the C kernel in a background thread unless it is cached or started.

    Returns whether the C kernel can be expected (False: no C compiler, or an earlier
    build failed), so that the caller can start the Numba kernel's compile instead.
    """
    with _state.lock:
        if _state.thread is None and _state.library is None:
            _state.thread = threading.Thread(
                target=_find_or_build, args=(_state, _store), daemon=True
            )
            _state.thread.start()
    return _state.error is None and _compiler() is not None


def library() -> Any:
    """Return the loaded C kernel (``ctypes.CDLL``), or None when it is not available."""
    prefetch()
    thread = _state.thread
    if thread is not None:
        thread.join()
    with _state.lock:
        if _state.library is None and _state.path is not None and _state.error is None:
            try:
                lib = ctypes.CDLL(str(_state.path))
            except OSError as exc:
                _state.error = f"loading {_state.path} failed: {exc}"
                return None
            finally:
                # An in-memory file stays open while the library is mapped: the loader
                # knows a library by its path, and a closed descriptor's number
                # (/proc/self/fd/N) would be reused by the next library mapped this
                # way (kiln_c's), which the loader would take for this kernel.
                if _state.fd is None:
                    _state.path.unlink(missing_ok=True)
                _state.path = None
            lib.kiln_nuts_sample_chunk.restype = _f8
            lib.kiln_nuts_sample_chunk.argtypes = (
                _p, _p, _p, _i8, _p, _p, _f8, _p, _p, _p, _i8, _p, _p, _f8, _i8, _f8, _f8,
                _i4, _i4, _i4, ctypes.POINTER(_i4), ctypes.POINTER(_i8),
            )  # fmt: skip
            screened = (
                _i8, _i8, _i8, _p, _p, _p, _i8, _i8, _f8, _f8, ctypes.c_int, _p, _p, _i8, _p,
                _p, _p, _p,
            )  # fmt: skip
            lib.kiln_gradients.restype = _i4
            lib.kiln_gradients.argtypes = (_p, _p, _i8, _i8, _p, _p)
            lib.kiln_screened_rhat_ess_start.restype = _p
            lib.kiln_screened_rhat_ess_start.argtypes = screened
            lib.kiln_screened_rhat_ess_join.restype = None
            lib.kiln_screened_rhat_ess_join.argtypes = (_p,)
            _state.library = lib
        return _state.library


def affine_logp_address() -> int | None:
    """Return the address of ``kiln_affine_logp`` (the dense metric's log-density), or None.

    None where the C kernel is not available. See :mod:`kiln_samplers._dense_metric`.
    """
    lib = library()
    return None if lib is None else ctypes.cast(lib.kiln_affine_logp, _p).value


def gradients(fn: NativeLogp, x: np.ndarray) -> np.ndarray | None:
    """Return ``fn``'s gradient at each row of ``x``, computed in one call of the C kernel.

    None where the C kernel is not loaded (the caller loops in Python). A point the model
    rejects gives a row of NaN; a fatal code raises the error saying what it means.
    """
    lib = _state.library
    if lib is None:
        return None
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    m, n = x.shape
    code = lib.kiln_gradients(fn.native.logp_cptr, fn.user_data, n, m, _pointer(x), _pointer(out))
    if code < 0:
        raise fatal_error(fn.native, code)
    return out


def loaded_library() -> Any:
    """Return the C kernel if this process has loaded it already, else None (never builds)."""
    return _state.library


def _pointer(array: np.ndarray, rows: int | None = None) -> int:
    if array.dtype != np.float64 or not array.flags.c_contiguous:
        raise ValueError("the C NUTS kernel needs C-contiguous float64 arrays")
    if rows is not None and array.shape[0] < rows:
        raise ValueError(f"the C NUTS kernel needs {rows} rows, got {array.shape[0]}")
    return int(array.ctypes.data)


def _sample_chunk(lib: Any, bitgens: dict[int, tuple[Any, int]], *args: Any) -> float:
    (fn, user_data, rng, q, grad, logp, inv_mass, adapt, welford, n_draws, draws, stats,
     target_accept, max_depth, max_energy_error, jitter, adapt_step, collect,
     update) = args  # fmt: skip
    n = q.shape[0]
    if (
        grad.shape != (n,) or inv_mass.shape != (n,) or adapt.shape != (core.N_ADAPT,)
        or welford.shape != (core.WELFORD_ROWS, n) or draws.shape[1:] != (n,)
        or stats.shape[1:] != (core.N_STATS,)
    ):  # fmt: skip
        raise ValueError("sample_chunk: arrays of the wrong shapes for the C NUTS kernel")
    entry = bitgens.get(id(rng))
    if entry is None or entry[0] is not rng:
        entry = (rng, int(rng.bit_generator.ctypes.bit_generator.value))
        bitgens[id(rng)] = entry
    status, done = _i4(0), _i8(0)
    with rng.bit_generator.lock:
        logp = lib.kiln_nuts_sample_chunk(
            fn.native.logp_cptr, user_data, entry[1], n, _pointer(q), _pointer(grad), logp,
            _pointer(inv_mass), _pointer(adapt), _pointer(welford), n_draws,
            _pointer(draws, n_draws), _pointer(stats, n_draws), target_accept, max_depth,
            max_energy_error, float(jitter), int(adapt_step), bool(collect), bool(update),
            ctypes.byref(status), ctypes.byref(done),
        )  # fmt: skip
    if status.value == 1:
        raise MemoryError("the C NUTS kernel could not allocate its work arrays")
    if status.value < 0:
        raise fatal_error(fn.native, status.value)
    return float(logp)


def sample_chunk_for(fn: NativeLogp) -> Any:
    """Return ``sample_chunk`` (``_nuts_core``'s arguments) on the C kernel, or None.

    Waits for the build started by :func:`prefetch`. The chunk's ``fn`` is ``fn`` (the
    model's :class:`~kiln_samplers._native.NativeLogp`: the kernel calls its
    ``logp_cptr``) and its ``user_data`` the model's ``user_data_ptr``. A fatal code
    from the model raises ``RuntimeError`` saying what it means.
    """
    lib = library()
    if lib is None:
        return None
    bitgens: dict[int, tuple[Any, int]] = {}

    def sample_chunk(*args: Any) -> float:
        """``_nuts_core.sample_chunk(*args)``, run by the C kernel."""
        return _sample_chunk(lib, bitgens, *args)

    return sample_chunk
