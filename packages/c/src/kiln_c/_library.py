"""Shared libraries of generated files: built once, kept in kiln's cache, loaded verified.

A graph's library is ``<cache root>/c/<key>.so``, keyed by a digest of the generated
source, the compiler (path and version), the flags and this module's format (graphs
that differ only in constant values share it). A second, smaller entry, keyed by the
rewritten graph itself (:func:`graph_key`), names that library and the nodes that run
through Python, so that a warm process finds the library without writing the source.
Its
description is an entry of kiln's disk cache under the same key (``c/<key>.kc``:
checksummed, bound to its key, written atomically): the SHA-256 and size of the
library. The library file itself is written to a private temporary file and renamed
into place, so readers see a whole file or none, and two processes building the same
graph both succeed.

Loading reads the file's bytes, checks them against the description (a truncated,
bit-flipped or swapped file fails: it is rebuilt and rewritten) and that the file and
its folders are the user's own (:func:`kiln_compile.trusted_file`), then maps those
verified bytes from a private copy (on Linux an anonymous in-memory file,
``memfd_create``), so nothing can change between the check and ``dlopen``. With the
cache off (``config.cache``) or unwritable, the library is built in each process and
nothing is written.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib
import os
import tempfile
import threading
from typing import Any

import numpy as np

from kiln_c import _compiler
from kiln_c._codegen import CODEGEN_VERSION
from kiln_compile import (
    CorruptDataError,
    DiskCache,
    FunctionGraph,
    dumps_data,
    loads_data,
    mark_unwritable,
    new_temporary,
    trusted_file,
)

NAMESPACE = _compiler.CACHE_NAMESPACE
#: Bumped when what is stored changes meaning.
FORMAT = 1
_lock = threading.Lock()


def library_key(source: str, include: tuple[str, ...] = ()) -> str:
    """Return the cache key of the library built from ``source`` here.

    ``include``: the folders ``-I`` adds (the trampoline's Python headers).
    """
    h = hashlib.sha256(f"kiln-c {FORMAT} {CODEGEN_VERSION}\n".encode())
    compiler = _compiler.find_compiler()
    flags = " ".join([*_compiler.flags(), *include])
    for part in (source, _compiler.compiler_identity(compiler), flags):
        h.update(part.encode())
        h.update(b"\n")
    return h.hexdigest()


#: The packages whose code decides the C source of a rewritten graph.
_CODE_PACKAGES = ("kiln_c", "kiln_graph", "kiln_random")


def _source_files(folder: str) -> list[tuple[str, int, int]]:
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir() and entry.name != "__pycache__":
                found += _source_files(entry.path)
            elif entry.name.endswith((".py", ".h", ".c")):
                st = entry.stat()
                found.append((entry.path, st.st_size, st.st_mtime_ns))
    return found


@functools.cache
def code_fingerprint() -> str:
    """Return a digest of the code that writes a graph's C source (computed once).

    The source files of kiln_c, kiln_graph and kiln_random by path, size and
    modification time (as Python's own bytecode cache checks its sources: an edit
    changes them, reading no file), and NumPy's version (the C side reads its arrays).
    """
    h = hashlib.sha256(f"numpy {np.__version__}\n".encode())
    for package in _CODE_PACKAGES:
        module = importlib.import_module(package)
        for folder in getattr(module, "__path__", []):
            for path, size, mtime in sorted(_source_files(folder)):
                h.update(f"{path} {size} {mtime}\n".encode())
    return h.hexdigest()


def graph_key(fgraph: FunctionGraph) -> str:
    """Return the key under which the library of the rewritten ``fgraph`` is found.

    A digest of the graph (its structure and constant values), the code generator's
    version and code (:func:`code_fingerprint`), the compiler, the flags and, for a graph
    with linear algebra, the BLAS integers' type (``kiln_c.linalg.blas_int``; a graph
    without it never looks for a BLAS): whatever
    would change the generated source or its build changes this key, and it is
    computed without writing the source.
    """
    from kiln_c.linalg import blas_int, uses_blas  # the BLAS integers of its C, if any

    h = hashlib.sha256(f"kiln-c graph {FORMAT} {CODEGEN_VERSION}\n".encode())
    compiler = _compiler.find_compiler()
    for part in (
        fgraph.digest,
        code_fingerprint(),
        _compiler.compiler_identity(compiler),
        " ".join(_compiler.flags()),
        blas_int() if uses_blas(fgraph.nodes) else "",
    ):
        h.update(part.encode())
        h.update(b"\n")
    return h.hexdigest()


def find_graph(key: str) -> tuple[str, list[int], int] | None:
    """Return the library key, fallback node indices and node count stored under ``key``."""
    cache = DiskCache(NAMESPACE)
    if not cache.enabled:
        return None
    described = cache.get(key)
    if described is None:
        return None
    try:
        entry = loads_data(described)
        library, fallbacks, nodes = entry["library"], entry["fallbacks"], entry["nodes"]
        if not (
            isinstance(library, str)
            and isinstance(nodes, int)
            and isinstance(fallbacks, list)
            and all(isinstance(k, int) and 0 <= k < 2 * nodes for k in fallbacks)  # callbacks
        ):
            raise CorruptDataError("not a graph entry of the C backend")
    except (CorruptDataError, KeyError, TypeError):
        cache.discard(key)
        return None
    return library, fallbacks, nodes


def remember_graph(key: str, library: str, fallbacks: list[int], nodes: int) -> None:
    """Store under the graph key ``key`` its library's key and its fallback nodes."""
    cache = DiskCache(NAMESPACE)
    if cache.enabled:
        entry = {"library": library, "fallbacks": list(fallbacks), "nodes": nodes}
        cache.put(key, dumps_data(entry))


def cached_library(key: str) -> bytes | None:
    """Return the verified bytes of the cached library ``key``, or None (missing, damaged)."""
    cache = DiskCache(NAMESPACE)
    return _read_cached(cache, key) if cache.enabled else None


def _read_cached(cache: DiskCache, key: str) -> bytes | None:
    """Return the verified bytes of ``c/<key>.so``, or None (missing, damaged, untrusted)."""
    described = cache.get(key)
    if described is None:
        return None
    try:
        description = loads_data(described)
        digest, size = description["sha256"], description["size"]
    except (CorruptDataError, KeyError, TypeError):
        cache.discard(key)
        return None
    path = cache.directory / f"{key}.so"
    if not trusted_file(path, cache.root):
        return None
    try:
        payload = path.read_bytes()
    except OSError:
        return None
    if len(payload) != size or hashlib.sha256(payload).hexdigest() != digest:
        cache.stats.corrupt += 1
        return None
    return payload


def _write_cached(cache: DiskCache, key: str, payload: bytes) -> bool:
    """Write ``c/<key>.so`` (atomically) and its description; return whether both were."""
    folder = cache.folder()
    if folder is None:
        return False
    target = folder / f"{key}.so"
    try:
        fd, tmp = new_temporary(folder, suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        mark_unwritable(cache.root, folder, exc)
        return False
    description = {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    return cache.put(key, dumps_data(description))


def library_bytes(
    source: str, use_cache: bool, include: tuple[str, ...] = ()
) -> tuple[bytes, str, str]:
    """Return the library of ``source``, its key and where it came from.

    The origin is ``"hit"`` (the cache), ``"miss"`` (built and stored), ``"rebuilt"``
    (a damaged entry replaced) or ``"built"`` (no cache: built for this process).
    """
    key = library_key(source, include)
    cache = DiskCache(NAMESPACE)
    if not use_cache or not cache.enabled:
        return _compiler.build(source, include=include), key, "built"
    corrupt = cache.stats.corrupt
    payload = _read_cached(cache, key)
    if payload is not None:
        return payload, key, "hit"
    payload = _compiler.build(source, include=include)
    written = _write_cached(cache, key, payload)
    origin = "rebuilt" if cache.stats.corrupt > corrupt else "miss"
    return payload, key, origin if written else "built"


#: The in-memory files of loaded libraries, kept open: the loader knows a library by its
#: path, and a closed descriptor's number (``/proc/self/fd/N``) would be reused for the
#: next library, which the loader would then take for this one (libraries stay mapped).
_open_files: list[int] = []


def load(payload: bytes, name: str, python: bool = False) -> Any:
    """Map the library ``payload`` (verified bytes) and return it (``ctypes.CDLL``).

    ``python``: a library that calls Python's C API (``ctypes.PyDLL``: the GIL is kept
    during its calls).
    """
    dll = ctypes.PyDLL if python else ctypes.CDLL
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create(f"kiln-c-{name[:16]}")
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            with _lock:
                lib = dll(f"/proc/self/fd/{fd}")
        except BaseException:
            os.close(fd)
            raise
        _open_files.append(fd)
        return lib
    fd, path = tempfile.mkstemp(prefix="kiln-c-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        return dll(path)
    finally:
        os.unlink(path)
