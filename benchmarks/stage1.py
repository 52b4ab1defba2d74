"""Stage-1 (rewriting) benchmarks on the models M1-M4 (``kiln_models.py``).

For each model: the log density and its gradient are built from fresh inputs, prepared
(``kiln_compile.prepare``) and rewritten with ``FAST_RUN_QUERY``. Reported:

- ``rewrite``: seconds to rewrite, without statistics (the headline number);
- ``phases``: seconds per phase, from separate repeats (about half as many) with
  :class:`RewriteStats` (which times each rule, so its total is a little higher than
  the headline);
- ``nodes``: the node count before rewriting and after each phase;
- ``build`` / ``prepare``: seconds to build the graph (logp + grad) and to prepare it;
- ``new_process``: a new Python process that compiles the model (``kiln.function`` on the
  Python VM, ``profile=True``), run twice on one empty cache folder
  (``KILN_CACHE_DIR``): the first is cold, the second finds whatever the first left in
  the cache. Each reports ``kiln.function``'s profile: ``compile_times_s`` (``prepare``,
  ``rewrite`` = Stage 1 with the cache lookup, ``link``), the cache outcome (``"hit"``,
  ``"miss"``...) and ``cache_times_s``, where the profile has them; ``cache_files`` says
  how many files the cold run left in the cache folder.

Every graph is built from new inputs, so each repeat rewrites new nodes (interning
gives no shortcut). One untimed warm-up precedes the repeats; ``gc.collect()`` runs
before each timed repeat.

Run alone (``python benchmarks/stage1.py``) or from ``run.py``, which adds the results
to its JSON file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kiln
from kiln_compile import prepare
from kiln_graph import toposort
from kiln_models import MODELS, build, ndim
from kiln_rewrite import FAST_RUN_QUERY, PHASES, RewriteStats, rewrite

HERE = Path(__file__).resolve().parent


def _median_dict(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for run in runs for k in run}
    return {k: statistics.median(run.get(k, 0.0) for run in runs) for k in sorted(keys)}


def time_kiln_rewrite(name: str, repeats: int) -> dict:
    """Return Stage-1 timings of model ``name``: rewrite, per phase, build, prepare, nodes.

    Each repeat builds the model from fresh inputs; medians are over ``repeats``, after
    one untimed warm-up.
    """
    warm_inputs, warm_outputs = build(name)
    rewrite(warm_inputs, warm_outputs, FAST_RUN_QUERY)
    build_s, prepare_s, rewrite_s, with_stats_s, phases = [], [], [], [], []
    stats = RewriteStats()
    # Fewer repeats for the per-phase breakdown: it is context, not the headline.
    for with_stats, n in ((False, repeats), (True, max(3, (repeats + 1) // 2))):
        for _ in range(n):
            gc.collect()
            t0 = time.perf_counter()
            inputs, outputs = build(name)
            t1 = time.perf_counter()
            fgraph = prepare(inputs, outputs)
            t2 = time.perf_counter()
            if with_stats:
                stats = RewriteStats()
                rewrite(fgraph.inputs, fgraph.outputs, FAST_RUN_QUERY, stats)
                with_stats_s.append(time.perf_counter() - t2)
                phases.append(dict(stats.phase_times))
            else:
                rewrite(fgraph.inputs, fgraph.outputs, FAST_RUN_QUERY)
                rewrite_s.append(time.perf_counter() - t2)
                build_s.append(t1 - t0)
                prepare_s.append(t2 - t1)
    top = sorted(stats.times.items(), key=lambda kv: -kv[1])[:5]
    return {
        "ndim": ndim(name),
        "nodes": dict(stats.nodes),
        "rewrite_median_s": statistics.median(rewrite_s),
        "rewrite_times_s": rewrite_s,
        "rewrite_with_stats_median_s": statistics.median(with_stats_s),
        "phase_median_s": _median_dict(phases),
        "build_median_s": statistics.median(build_s),
        "prepare_median_s": statistics.median(prepare_s),
        "applied": {k: v for k, v in sorted(stats.applied.items()) if v},
        "top_rewrites_by_time_s": dict(top),
    }


def _child(name: str) -> None:
    """Compile model ``name`` once in this (new) process; print the timings as JSON."""
    t0 = time.perf_counter()
    inputs, outputs = build(name)
    t1 = time.perf_counter()
    f = kiln.function(inputs, outputs, mode=kiln.Mode(FAST_RUN_QUERY, linker="vm"), profile=True)
    t2 = time.perf_counter()
    prof = f.profile
    print(
        json.dumps(
            {
                "build_s": t1 - t0,
                "function_s": t2 - t1,
                "compile_times_s": dict(getattr(prof, "compile_times", {})),
                # The Stage-1 cache's outcome and timings, where the profile reports them.
                "cache": getattr(prof, "cache", None),
                "cache_times_s": dict(getattr(prof, "cache_times", {})),
                "cache_note": getattr(prof, "cache_note", ""),
                "nodes_after": len(toposort(list(f.outputs))),
            }
        )
    )


def _run_child(name: str, cache_dir: str) -> dict:
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", name],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["exit " + str(proc.returncode)]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    return result


def time_new_process(name: str) -> dict:
    """Compile ``name`` in two new processes sharing one empty cache folder: cold, then warm."""
    with tempfile.TemporaryDirectory(prefix="kiln-bench-cache-") as cache_dir:
        cold = _run_child(name, cache_dir)
        files = sum(len(fs) for _, _, fs in os.walk(cache_dir))
        warm = _run_child(name, cache_dir)
    return {"cold": cold, "warm": warm, "cache_files": files}


def run_stage1(repeats: int, new_process: bool = True) -> dict:
    """Return the Stage-1 results of every model (see the module docstring)."""
    out = {}
    for name in MODELS:
        try:
            res = time_kiln_rewrite(name, repeats)
        except Exception as exc:  # a rule being written may break one model; report it
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if new_process:
            res["new_process"] = time_new_process(name)
        out[name] = res
    return out


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:9.2f}"


def format_table(results: dict) -> str:
    """Return a printable table of :func:`run_stage1`'s results (times in ms)."""
    found = {p for r in results.values() for p in r.get("phase_median_s", {})}
    phases = sorted(found, key=_phase_order)
    head = f"{'model':<6}{'ndim':>5}{'nodes':>12}{'rewrite':>10}{'build':>10}"
    head += "".join(f"{p[:9]:>10}" for p in phases)
    head += f"{'s1 cold':>10}{'s1 warm':>10}  warm cache"
    lines = [
        "Stage 1 (FAST_RUN rewriting), medians in ms; s1 cold / s1 warm: Stage 1 (cache "
        "lookup included) in a new process, with an empty / a filled cache",
        head,
    ]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"{name:<6} failed: {r['error'][:100]}")
            continue
        nodes = f"{r['nodes'].get('before', 0)}->{r['nodes'].get(phases[-1], 0) if phases else 0}"
        line = f"{name:<6}{r['ndim']:>5}{nodes:>12}{_ms(r['rewrite_median_s']):>10}"
        line += f"{_ms(r['build_median_s']):>10}"
        line += "".join(f"{_ms(r['phase_median_s'].get(p)):>10}" for p in phases)
        proc = r.get("new_process", {})
        for key in ("cold", "warm"):
            line += f"{_ms(proc.get(key, {}).get('compile_times_s', {}).get('rewrite')):>10}"
        line += f"  {proc.get('warm', {}).get('cache') or proc.get('warm', {}).get('error', '-')}"
        lines.append(line)
    return "\n".join(lines)


def _phase_order(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else len(PHASES)


def main() -> None:
    """Run the Stage-1 benchmarks alone; print the table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    results = run_stage1(args.repeats)
    print(format_table(results))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"stage1": results}, indent=2))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
