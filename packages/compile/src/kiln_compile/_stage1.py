"""Stage 1 with its on-disk cache: rewrite a prepared graph, or load it rewritten.

The key of a function is the SHA-256 of: the structural digest of the prepared graph
(inputs numbered by position), the rewrite query, the kiln version, the format of the
stored graphs and a fingerprint of the rewriting code (the selected rewrites' names and
identities, and the source files of ``kiln_graph``, ``kiln_random``, ``kiln_rewrite`` and
of the modules registering the selected rewrites, each by path, size and modification
time, as Python's bytecode cache checks its sources: reading each file's contents in
every new process cost milliseconds of a warm compile). The fingerprint makes an edited
rewrite (an editable install, a test registering one) a new key rather than a stale hit.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kiln_compile._cache import DiskCache
from kiln_compile._fgraph import FunctionGraph
from kiln_compile._profile import Profile
from kiln_compile._serialize import (
    FORMAT,
    CorruptGraphError,
    GraphNotSerializableError,
    dumps_graph_parts,
    loads_graph,
)
from kiln_graph import Constant, Variable
from kiln_rewrite import Query, db, rewrite

#: The Stage-1 namespace of the on-disk cache.
STAGE1 = DiskCache("stage1")

# Packages whose code decides what a rewritten graph is (kiln_compile: how it is driven
# and stored). Their files' sizes and times are in every key, in place of kiln's version
# (reading that from the package metadata costs a new process tens of milliseconds, and
# a version does not change with the code of a development install).
_CODE_PACKAGES = ("kiln_graph", "kiln_random", "kiln_rewrite", "kiln_compile")


@functools.cache
def _file_digest(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError:
        return b""
    return f"{path} {st.st_size} {st.st_mtime_ns}\n".encode()


@functools.cache
def _package_files(package: str) -> tuple[str, ...]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return ()
    files: list[str] = []
    for location in spec.submodule_search_locations:
        files.extend(str(p) for p in sorted(Path(location).rglob("*.py")))
    return tuple(files)


def code_fingerprint(query: Query) -> str:
    """Return a digest of the rewriting code that ``query`` runs."""
    h = hashlib.sha256()
    files: dict[str, None] = {}
    for package in _CODE_PACKAGES:
        files.update(dict.fromkeys(_package_files(package)))
    for r in db:
        if query.selects(r):
            module = getattr(r.fn, "__module__", None) or ""
            h.update(f"{r.name}|{r.phase}|{r.identity}|{module}\n".encode())
            path = getattr(sys.modules.get(module), "__file__", None)
            if path:
                files.setdefault(path, None)
    for path in files:
        h.update(_file_digest(path))
    return h.hexdigest()


def stage1_key(fgraph: FunctionGraph, query: Query) -> str:
    """Return the Stage-1 cache key of ``fgraph`` rewritten by ``query``."""
    h = hashlib.sha256(b"kiln-stage1\n")
    for part in (
        fgraph.digest,
        query.key(),
        str(FORMAT),
        code_fingerprint(query),
    ):
        h.update(part.encode())
        h.update(b"\n")
    return h.hexdigest()


def _load_paused(
    payload: bytes, inputs: Sequence[Variable], known: Sequence[Constant]
) -> list[Variable]:
    """Return :func:`loads_graph`'s outputs, the cyclic garbage collector paused meanwhile.

    Rebuilding a graph allocates thousands of containers, which in a process holding
    a large model starts full collections of its whole heap (measured: 5-25 ms of a
    20 ms warm compile). What it builds is the graph returned, not garbage.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return loads_graph(payload, inputs, known)
    finally:
        if was_enabled:
            gc.enable()


def rewrite_stage1(fgraph: FunctionGraph, query: Query, profile: Profile | None) -> FunctionGraph:
    """Return ``fgraph`` rewritten by ``query``, from the Stage-1 cache when it holds it.

    On a miss the graph is rewritten and stored; a stored graph that cannot be rebuilt
    is discarded and the graph rewritten again. Graphs that cannot be serialized are
    rewritten every time (with no error).
    """
    stats = profile.rewrites if profile is not None else None
    if not STAGE1.enabled:
        if profile is not None:
            profile.cache = "disabled"
        return fgraph.with_outputs(rewrite(fgraph.inputs, fgraph.outputs, query, stats))
    t0 = time.perf_counter()
    key = stage1_key(fgraph, query)
    t1 = time.perf_counter()
    payload = STAGE1.get(key)
    note = ""
    if payload is not None:
        try:
            outs = _load_paused(payload, fgraph.inputs, fgraph.constants)
            if len(outs) != len(fgraph.outputs) or any(
                a.type != b.type for a, b in zip(outs, fgraph.outputs, strict=True)
            ):
                raise CorruptGraphError("the stored outputs do not match the function's")
        except CorruptGraphError as exc:
            STAGE1.discard(key)
            note = f"discarded a damaged entry ({exc})"
        else:
            if profile is not None:
                profile.cache = "hit"
                profile.cache_key = key
                profile.cache_times.update({"key": t1 - t0, "load": time.perf_counter() - t1})
            return fgraph.with_outputs(outs)
    t2 = time.perf_counter()
    outs = rewrite(fgraph.inputs, fgraph.outputs, query, stats)
    t3 = time.perf_counter()
    try:
        # The function's own large constants (its data) are stored by digest: its key
        # covers their values, so a process that finds the entry holds them already.
        blob = dumps_graph_parts(fgraph.inputs, outs, fgraph.constants)
    except GraphNotSerializableError as exc:
        stored, note = False, f"not stored: {exc}"
    else:
        stored = STAGE1.put(key, blob)
        if not stored:
            note = note or "not stored: the cache cannot be written"
    if profile is not None:
        profile.cache = "miss"
        profile.cache_key = key
        profile.cache_note = note
        profile.cache_times.update({"key": t1 - t0, "lookup": t2 - t1})
        if stored:
            profile.cache_times["store"] = time.perf_counter() - t3
    return fgraph.with_outputs(outs)
