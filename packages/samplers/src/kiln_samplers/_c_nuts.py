"""kiln's NUTS transition compiled from C (``_nuts_kernel.c``), the kernel NUTS runs first.

The Numba kernel (:mod:`kiln_samplers._numba_nuts`) takes 3-5 s of Numba's typing and
LLVM the first time, and that compile is most of a cold ``kl.sample``. The same
functions written in C take the system's C compiler about 0.3 s. The library is built
once, in a background thread started by :func:`prefetch` (the compiler runs as another
process, on another core, while the model compiles), and stored in
``<cache root>/samplers/nuts-<digest>.so`` (the cache root is ``KILN_CACHE_DIR`` or
``~/.cache/kiln``), written atomically with its SHA-256 beside it; a library whose
digest does not match is built again.

The kernel calls the model's native log-density (a function of the signature
``LOGP_GRAD_SIGNATURE``) at the entry point the model gives as
``NativeLogpGrad.native_address``, in the calling convention kiln_numba's native
wrappers have (Numba's; kiln_numba finds the address, this package knows no Numba).
Before a chain uses it, :func:`sample_chunk_for` calls the model once that way and once
from Python, and uses the C kernel only when both give the same log-density and
gradient to the bit (an entry of another calling convention fails that check).

It computes what ``_nuts_core`` computes, in the same order, with NumPy's own normal
generator, so the draws are those of the Python and Numba kernels (a test checks it to
the bit). Without a C compiler (or on a platform other than Linux and macOS), or when
the check fails, :func:`sample_chunk_for` returns None and the Numba kernel runs.
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
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from kiln_samplers import _nuts_core as core

_SOURCE = Path(__file__).with_name("_nuts_kernel.c")
_FLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")
_COMPILE_TIMEOUT_S = 120.0

_f8 = ctypes.c_double
_i8 = ctypes.c_int64
_i4 = ctypes.c_int32
_p = ctypes.c_void_p


def _cache_root() -> Path:
    return Path(os.environ.get("KILN_CACHE_DIR") or Path.home() / ".cache" / "kiln")


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


def _library_path(compiler: str) -> Path:
    """Return the library's path: a digest of the source, compiler, flags, NumPy, machine."""
    key = hashlib.sha256()
    for part in (_SOURCE.read_bytes(), compiler.encode(), " ".join(_FLAGS).encode()):
        key.update(part)
    key.update(f"{np.__version__} {platform.machine()} {sys.platform}".encode())
    return _cache_root() / "samplers" / f"nuts-{key.hexdigest()[:16]}.so"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_valid(path: Path) -> bool:
    """Whether ``path`` exists with the digest written beside it when it was built."""
    try:
        return path.with_suffix(".sha256").read_text().strip() == _digest(path)
    except OSError:
        return False


def _build(compiler: str, path: Path) -> Path | None:
    """Compile the kernel into ``path`` (atomically); return where it is, or None.

    A cache folder that cannot be written gets the library in a temporary folder (it
    then lasts as long as this process).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = path.parent
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-")
        probe.close()
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="kiln-nuts-"))
        path = folder / path.name
    _remove_stale_temporaries(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".nuts-", suffix=".so")
    os.close(fd)
    command = [
        compiler, *_FLAGS, f"-I{np.get_include()}", str(_SOURCE), str(_npyrandom()), "-lm",
        "-o", tmp,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise OSError(done.stderr.strip()[-2000:])
        digest = _digest(Path(tmp))
        fd, tmp_digest = tempfile.mkstemp(dir=folder, prefix=".nuts-", suffix=".sha256")
        with os.fdopen(fd, "w") as f:
            f.write(digest)
        os.replace(tmp, path)
        os.replace(tmp_digest, path.with_suffix(".sha256"))
    except (OSError, subprocess.SubprocessError) as exc:
        Path(tmp).unlink(missing_ok=True)
        _state.error = f"compiling {_SOURCE.name} failed: {exc}"
        return None
    return path


#: A build's temporary file older than this was left by a process that died building.
_STALE_S = 3600.0


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete the temporary files of builds that never finished (a killed process)."""
    cutoff = time.time() - _STALE_S
    for tmp in folder.glob(".nuts-*"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
        except OSError:  # another process removed or renamed it
            pass


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.path: Path | None = None
        self.library: Any = None
        self.error: str | None = None
        self.checked: dict[int, tuple[Any, int | None]] = {}


_state = _State()


def _find_or_build() -> None:
    compiler = _compiler()
    if compiler is None:
        _state.error = "no C compiler (CC, or cc on PATH) on Linux or macOS"
        return
    if not _npyrandom().is_file():
        _state.error = f"NumPy's {_npyrandom()} is missing"
        return
    path = _library_path(compiler)
    _state.path = path if _is_valid(path) else _build(compiler, path)


def prefetch() -> bool:
    """Start building the C kernel in a background thread unless it is cached or started.

    Returns whether the C kernel can be expected (False: no C compiler, or an earlier
    build failed), so that the caller can start the Numba kernel's compile instead.
    """
    with _state.lock:
        if _state.thread is None and _state.library is None:
            _state.thread = threading.Thread(target=_find_or_build, daemon=True)
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
            lib.kiln_nuts_sample_chunk.restype = _f8
            lib.kiln_nuts_sample_chunk.argtypes = (
                _p, _p, _i8, _p, _i8, _p, _p, _f8, _p, _p, _p, _i8, _p, _p, _f8, _i8, _f8,
                _i4, _i4, ctypes.POINTER(_i4),
            )  # fmt: skip
            lib.kiln_nuts_call_model.restype = _f8
            lib.kiln_nuts_call_model.argtypes = (_p, _p, _i8, _i8, _p, _p)
            _state.library = lib
        return _state.library


def _check(lib: Any, fn: Any, address: int, user_data: np.ndarray, q: np.ndarray) -> int | None:
    """Return ``address`` if calling it from C gives what calling ``fn`` gives, else None."""
    try:
        expected_grad = np.empty_like(q)
        expected = float(fn(q, expected_grad, user_data))
    except Exception:  # noqa: BLE001 (the Numba kernel runs: its errors are clear)
        return None
    grad = np.full_like(q, np.nan)
    got = lib.kiln_nuts_call_model(
        address, user_data.ctypes.data, user_data.shape[0], q.shape[0], q.ctypes.data,
        grad.ctypes.data,
    )  # fmt: skip
    if got == expected and np.array_equal(grad, expected_grad):
        return address
    warnings.warn(
        "kiln's C NUTS kernel got another log-density from the model than Numba's call "
        f"({got!r} != {expected!r}): sampling with the Numba kernel instead",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


def _pointer(array: np.ndarray, rows: int | None = None) -> int:
    if array.dtype != np.float64 or not array.flags.c_contiguous:
        raise ValueError("the C NUTS kernel needs C-contiguous float64 arrays")
    if rows is not None and array.shape[0] < rows:
        raise ValueError(f"the C NUTS kernel needs {rows} rows, got {array.shape[0]}")
    return int(array.ctypes.data)


def _sample_chunk(lib: Any, address: int, bitgens: dict[int, tuple[Any, int]], *args: Any) -> float:
    (_, user_data, rng, q, grad, logp, inv_mass, adapt, welford, n_draws, draws, stats,
     target_accept, max_depth, max_energy_error, adapt_step, collect) = args  # fmt: skip
    n = q.shape[0]
    if (
        grad.shape != (n,) or inv_mass.shape != (n,) or adapt.shape != (5,)
        or welford.shape != (3, n) or draws.shape[1:] != (n,)
        or stats.shape[1:] != (core.N_STATS,) or user_data.dtype != np.int64
        or not user_data.flags.c_contiguous
    ):  # fmt: skip
        raise ValueError("sample_chunk: arrays of the wrong shapes for the C NUTS kernel")
    entry = bitgens.get(id(rng))
    if entry is None or entry[0] is not rng:
        entry = (rng, int(rng.bit_generator.ctypes.bit_generator.value))
        bitgens[id(rng)] = entry
    status = _i4(0)
    with rng.bit_generator.lock:
        logp = lib.kiln_nuts_sample_chunk(
            address, user_data.ctypes.data, user_data.shape[0], entry[1], n, _pointer(q),
            _pointer(grad), logp, _pointer(inv_mass), _pointer(adapt), _pointer(welford),
            n_draws, _pointer(draws, n_draws), _pointer(stats, n_draws), target_accept,
            max_depth, max_energy_error, bool(adapt_step), bool(collect),
            ctypes.byref(status),
        )  # fmt: skip
    if status.value != 0:
        raise MemoryError("the C NUTS kernel could not allocate its work arrays")
    return float(logp)


def sample_chunk_for(fn: Any, address: int | None, user_data: np.ndarray, q: np.ndarray) -> Any:
    """Return ``sample_chunk`` (``_nuts_core``'s arguments) on the C kernel, or None.

    Waits for the build started by :func:`prefetch`. ``fn`` is the model's native
    log-density and ``address`` its native entry point (``NativeLogpGrad.native_address``;
    None: no C kernel); the first call per ``fn`` checks the entry point at ``q``.
    """
    if not address:
        return None
    lib = library()
    if lib is None:
        return None
    with _state.lock:
        known = _state.checked.get(id(fn))
        if known is None or known[0] is not fn:
            known = (fn, _check(lib, fn, address, user_data, q))
            _state.checked[id(fn)] = known
    address = known[1]
    if address is None:
        return None
    bitgens: dict[int, tuple[Any, int]] = {}

    def sample_chunk(*args: Any) -> float:
        """``_nuts_core.sample_chunk(*args)``, run by the C kernel."""
        return _sample_chunk(lib, address, bitgens, *args)

    return sample_chunk
