"""The callable that runs a C-compiled graph without ctypes (``kiln_trampoline.c``).

A graph's library has no ``Python.h`` (so it builds in milliseconds with any C
compiler and caches per graph); its ``kiln_call`` is reached through ctypes, whose
argument conversion costs about 1.5 µs a call. ``kiln_trampoline.c`` is one small
CPython extension, the same for every graph: its callable's vectorcall makes the
outputs and calls the graph's ``kiln_callv`` with the objects themselves. It is built
once per Python, compiler and source, by the same compiler and cache layer as the
graphs (``kiln_c._library``), on a thread started as linking starts (a cold build runs
beside the graph's; a quick tcc build does not wait for it, and its thunk keeps ctypes
unless it is ready). Where it cannot be built (no ``Python.h``, a compiler error) one
:class:`TrampolineWarning` says so and thunks use ctypes.
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
_state: dict[str, Any] = {"new": None, "problem": None, "thread": None, "warned": False}


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
        _state["new"] = _load()
    except Exception as exc:  # noqa: BLE001 (any failure: the ctypes path, said once)
        _state["problem"] = exc


def start() -> None:
    """Start loading the trampoline (from the cache, else built) on a thread of its own.

    The C linker calls it as it starts linking, so that a cold build runs beside the
    graph's; later calls do nothing.
    """
    with _lock:
        if _state["thread"] is not None:
            return
        thread = threading.Thread(target=_build, name="kiln-c-trampoline", daemon=True)
        thread.start()
        _state["thread"] = thread


def constructor(wait: bool = True) -> Any:
    """Return ``kiln_trampoline_new`` (ctypes), or None where there is none.

    None: it cannot be built or, with ``wait`` false, it is not ready yet.
    """
    start()
    if wait:
        _state["thread"].join()
    problem = _state["problem"]
    if problem is not None and not _state["warned"]:  # said once, in a caller's thread
        _state["warned"] = True
        warnings.warn(
            f"kiln: the C backend's call trampoline could not be built ({problem}); "
            "compiled graphs are called through ctypes (about 1.5 µs more per call)",
            TrampolineWarning,
            stacklevel=3,
        )
    return _state["new"]


def make_direct(
    callv: int,
    head: int,
    n_in: int,
    outputs: list[tuple[Any, Any]],
    on_error: Any,
    keep: Any,
    wait: bool = True,
) -> Any:
    """Return the trampoline's callable for one thunk, or None (see :func:`constructor`).

    ``callv`` and ``head`` are the addresses of the graph's ``kiln_callv`` and of its
    call head; ``outputs`` the ``(shape, dtype)`` of each output it makes; ``on_error``
    raises the error of a status; ``keep`` holds what the addresses point into.
    """
    new = constructor(wait)
    if new is None:
        return None
    import numpy as np

    shapes = tuple(tuple(int(d) for d in shape) for shape, _ in outputs)
    dtypes = tuple(np.dtype(dtype) for _, dtype in outputs)
    return new(callv, head, n_in, np.empty, shapes, dtypes, on_error, keep)
