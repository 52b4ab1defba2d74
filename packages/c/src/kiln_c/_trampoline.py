"""The callable that runs a C-compiled graph without ctypes (``kiln_trampoline.c``).

A graph's library has no ``Python.h`` (so it builds in milliseconds with any C
compiler and caches per graph); its ``kiln_call`` is reached through ctypes, whose
argument conversion costs about 1.5 µs a call. ``kiln_trampoline.c`` is one small
CPython extension, the same for every graph: its callable's vectorcall makes the
outputs and calls the graph's ``kiln_callv`` with the objects themselves. It is built
once per Python, compiler and source, by the same compiler and cache layer as the
graphs (``kiln_c._library``), in a background thread the first time: thunks made before
it is ready keep their ctypes callable. Where it cannot be built (no ``Python.h``, a
compiler error) one :class:`TrampolineWarning` says so and thunks use ctypes.
"""

from __future__ import annotations

import ctypes
import sysconfig
import threading
import warnings
from pathlib import Path
from typing import Any

from kiln_c import _library

SOURCE = Path(__file__).with_name("kiln_trampoline.c")
_lock = threading.Lock()
_state: dict[str, Any] = {"new": None, "started": False, "problem": None}


class TrampolineWarning(UserWarning):
    """The C backend's CPython trampoline could not be built; calls go through ctypes."""


def _source() -> tuple[str, tuple[str, ...]]:
    """Return the source to build (stamped with this Python) and its include folders."""
    include = sysconfig.get_paths()["include"]
    python = f"{sysconfig.get_python_version()} {sysconfig.get_platform()}"
    return f"/* for Python {python} {include} */\n{SOURCE.read_text()}", (include,)


def _load() -> Any:
    """Build (or read from the cache) and load the trampoline; return its constructor."""
    source, include = _source()
    if not Path(include[0], "Python.h").is_file():
        raise FileNotFoundError(f"no Python.h in {include[0]} (install Python's headers)")
    payload, key, _origin = _library.library_bytes(source, use_cache=True, include=include)
    lib = _library.load(payload, key, python=True)
    new = lib.kiln_trampoline_new
    new.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ssize_t) + (ctypes.py_object,) * 5
    new.restype = ctypes.py_object
    return new


def _build() -> None:
    try:
        new = _load()
    except Exception as exc:  # noqa: BLE001 (any failure: the ctypes path, said once)
        _state["problem"] = exc
        warnings.warn(
            f"kiln: the C backend's call trampoline could not be built ({exc}); compiled "
            "graphs are called through ctypes (about 1.5 µs more per call)",
            TrampolineWarning,
            stacklevel=2,
        )
        return
    _state["new"] = new


def constructor(wait: bool = False) -> Any:
    """Return ``kiln_trampoline_new`` (ctypes), or None while it builds or if it cannot.

    The first call starts the build: loaded at once from a warm cache, else compiled in
    a background thread (``wait``: in this one).
    """
    new = _state["new"]
    if new is not None or _state["problem"] is not None:
        return new
    with _lock:
        if _state["started"]:
            return _state["new"]
        _state["started"] = True
    source, include = _source()
    if wait or _library.cached_library(_library.library_key(source, include)) is not None:
        _build()
    else:
        threading.Thread(target=_build, name="kiln-c-trampoline", daemon=True).start()
    return _state["new"]


def make_direct(
    callv: int, head: int, n_in: int, outputs: list[tuple[Any, Any]], on_error: Any, keep: Any
) -> Any:
    """Return the trampoline's callable for one thunk, or None where it is not ready.

    ``callv`` and ``head`` are the addresses of the graph's ``kiln_callv`` and of its
    call head; ``outputs`` the ``(shape, dtype)`` of each output it makes; ``on_error``
    raises the error of a status; ``keep`` holds what the addresses point into.
    """
    new = constructor()
    if new is None:
        return None
    import numpy as np

    shapes = tuple(tuple(int(d) for d in shape) for shape, _ in outputs)
    dtypes = tuple(np.dtype(dtype) for _, dtype in outputs)
    return new(callv, head, n_in, np.empty, shapes, dtypes, on_error, keep)
