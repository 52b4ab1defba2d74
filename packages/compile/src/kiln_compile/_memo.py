"""The in-process memo of compiled functions: the same graph is rewritten and linked once.

Keyed by the prepared graph's structural digest (inputs numbered by position, constants
by value), the linker and the rewrite query. A hit reuses the rewritten graph and the
linked callable (which computes from positional values, so it serves any inputs of the
same types): a model built twice, or sampled twice, compiles once. Identical graphs on
other variables (another model's Data) get the cached graph rebound to their inputs.
Bounded (least recently used entries go first); ``config.memo = False`` turns it off.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from kiln_compile._fgraph import FunctionGraph
from kiln_graph import as_variable_list, graph_replace

#: Entries kept; each holds a graph and a linked callable.
MAX_ENTRIES = 256


@dataclasses.dataclass
class MemoStats:
    """Hits and misses of the memo in this process."""

    hits: int = 0
    misses: int = 0


_entries: collections.OrderedDict[tuple[Any, ...], tuple[FunctionGraph, Any]] = (
    collections.OrderedDict()
)
stats = MemoStats()


def lookup(key: tuple[Any, ...], prepared: FunctionGraph) -> tuple[FunctionGraph, Any] | None:
    """Return ``(rewritten graph on prepared's inputs, thunk)`` for ``key``, or None."""
    found = _entries.get(key)
    if found is None:
        stats.misses += 1
        return None
    _entries.move_to_end(key)
    stats.hits += 1
    fgraph, thunk = found
    if fgraph.inputs == prepared.inputs:
        return fgraph, thunk
    mapping = dict(zip(fgraph.inputs, prepared.inputs, strict=True))
    outputs = as_variable_list(graph_replace(list(fgraph.outputs), mapping, strict=False))
    rebound = FunctionGraph(
        prepared.inputs,
        outputs,
        prepared.n_explicit,
        prepared.update_targets,  # type: ignore[arg-type]
    )
    return rebound, thunk


def store(key: tuple[Any, ...], fgraph: FunctionGraph, thunk: Any) -> None:
    """Remember the rewritten graph and thunk of ``key``."""
    _entries[key] = (fgraph, thunk)
    _entries.move_to_end(key)
    while len(_entries) > MAX_ENTRIES:
        _entries.popitem(last=False)


def clear() -> None:
    """Forget every memoized function (and reset the counts)."""
    _entries.clear()
    stats.hits = stats.misses = 0
