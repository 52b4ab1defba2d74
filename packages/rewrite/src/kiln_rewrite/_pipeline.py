"""The Stage-1 pipeline: run the selected rewrites phase by phase."""

from __future__ import annotations

import time
from collections.abc import Sequence

from kiln_graph import Variable, toposort
from kiln_rewrite._db import PHASE_RULES, PHASES, Query, db
from kiln_rewrite._engine import rewrite_graph
from kiln_rewrite._stats import RewriteStats

#: All rewrites tagged ``fast_run``, every phase.
FAST_RUN_QUERY = Query(include=frozenset({"fast_run"}))
#: Cheap rewrites only: merge and the ``fast_compile`` part of canonicalize.
FAST_COMPILE_QUERY = Query(include=frozenset({"fast_compile"}), phases=("merge", "canonicalize"))


def rewrite(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    query: Query = FAST_RUN_QUERY,
    stats: RewriteStats | None = None,
) -> list[Variable]:
    """Return ``outputs`` rewritten by the phases and rewrites that ``query`` selects.

    ``inputs`` are the function's inputs (global rewrites such as in-place need to
    know them: graph inputs are never overwritten).

    Examples
    --------
    >>> rewrite([x], [kt.log(1 + x)])  # [log1p(x)]  # doctest: +SKIP
    """
    outs = list(outputs)
    if stats is not None:
        stats.nodes["before"] = len(toposort(outs))
    for phase in query.phases:
        start = time.perf_counter()
        local = [r for p in PHASE_RULES[phase] for r in db.in_phase(p, query) if not r.is_global]
        if local:
            outs = rewrite_graph(outs, local, stats)
        for glob in db.in_phase(phase, query):
            if glob.is_global:
                t0 = time.perf_counter()
                new_outs = glob.fn(list(inputs), outs)
                if stats is not None:
                    changed = any(a is not b for a, b in zip(new_outs, outs, strict=True))
                    stats.record_try(glob.name, time.perf_counter() - t0, changed)
                outs = new_outs
        if stats is not None:
            stats.phase_times[phase] = time.perf_counter() - start
            stats.nodes[phase] = len(toposort(outs))
    return outs


def pipeline(query: Query = FAST_RUN_QUERY) -> str:
    """Return the phases in order and, in each, the rewrites ``query`` selects.

    Each line names a rewrite and the identity it applies; the docs are generated
    from this.
    """
    lines = []
    for i, phase in enumerate(PHASES, 1):
        active = phase in query.phases
        lines.append(f"{i}. {phase}" + ("" if active else "  (not run by this query)"))
        for r in db.in_phase(phase, query):
            kind = "global" if r.is_global else "local"
            lines.append(f"    {r.name:<36} {kind:<6}  {r.identity}")
        if phase == "merge":
            lines.append(
                "    (interning gives identical subexpressions and equal constants one node "
                "as graphs are built)"
            )
        extra = [p for p in PHASE_RULES[phase] if p != phase]
        if extra:
            lines.append(f"    (also applies the {', '.join(extra)} rewrites)")
    return "\n".join(lines)


__all__ = ["FAST_COMPILE_QUERY", "FAST_RUN_QUERY", "PHASES", "pipeline", "rewrite"]
