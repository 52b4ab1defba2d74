"""Peer benchmark: kiln's Stage 1 against PyTensor's rewriting, on M1-M4, in one process.

Run with ``nox -s peer`` (its own virtualenv, with PyMC and PyTensor pinned by
``peer-constraints.txt``), or ``python benchmarks/peer.py --output FILE`` where PyMC is
installed.

Both sides rewrite the graph of ``[logp, *dlogp/dvalue]`` with one input per free
variable (PyMC's value variables); the data are constants on both sides.

- PyTensor: the model is built with PyMC (``pymc_models.py``); its log density and
  gradient go through exactly what ``pytensor.function`` does before linking, and only
  the rewriting is timed: ``FunctionMaker.create_fgraph`` (a fresh clone each repeat,
  with the function's features attached, untimed), then ``mode.optimizer(fgraph)`` under
  ``config.change_flags(mode=mode, traceback__limit=config.traceback__compile_limit)``,
  as ``FunctionMaker.prepare_fgraph`` does; this is what PyTensor's profile reports as
  ``rewriting_time``. The mode is the one ``pymc.compile`` uses: PyTensor's default mode
  (its default linker's rewrite query) plus ``random_make_inplace`` and
  ``local_check_parameter_to_ninf_switch``.
- kiln: ``stage1.time_kiln_rewrite`` (``kiln_models.py``, prepared, then
  ``kiln_rewrite.rewrite`` with ``FAST_RUN_QUERY``), each repeat on a freshly built graph.

Each side gets one untimed warm-up per model; ``gc.collect()`` runs before each timed
repeat; the figures are medians. ``ratio`` is kiln / PyTensor (the target is <= 0.5).
``logp_check`` compares the two log densities at one random point (PyMC's unrewritten
terms on PyTensor's Python linker, kiln's graph on its VM), so both sides provably
compute the same math.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import pymc
import pytensor
from pytensor.compile.maker import FunctionMaker
from pytensor.compile.mode import Mode, get_default_mode

import kiln
import kiln_models
import pymc_models
from stage1 import time_kiln_rewrite

TARGET_RATIO = 0.5


def pymc_mode() -> Mode:
    """Return the mode ``pymc.compile`` uses for a model's functions (default bounds)."""
    mode = get_default_mode()
    query = mode.provided_optimizer.including(
        "random_make_inplace", "local_check_parameter_to_ninf_switch"
    )
    return Mode(linker=mode.linker, optimizer=query)


def _fresh_fgraph(inputs: list, outputs: list) -> pytensor.graph.fg.FunctionGraph:
    specs_in = [FunctionMaker.wrap_in(v) for v in inputs]
    specs_out = [FunctionMaker.wrap_out(v) for v in outputs]
    fgraph, _ = FunctionMaker.create_fgraph(specs_in, specs_out, force_clone=True)
    return fgraph


def _rewrite_once(fgraph: pytensor.graph.fg.FunctionGraph, mode: Mode) -> float:
    rewriter = mode.optimizer
    with pytensor.config.change_flags(
        mode=mode, traceback__limit=pytensor.config.traceback__compile_limit
    ):
        start = time.perf_counter()
        rewriter(fgraph)
        return time.perf_counter() - start


def time_pytensor_rewrite(name: str, repeats: int, mode: Mode) -> dict:
    """Return PyTensor's rewriting time of model ``name`` (median of ``repeats``) and sizes."""
    t0 = time.perf_counter()
    _, inputs, outputs = pymc_models.build(name)
    build_s = time.perf_counter() - t0
    _rewrite_once(_fresh_fgraph(inputs, outputs), mode)  # warm-up
    times, before, after = [], 0, 0
    for _ in range(repeats):
        fgraph = _fresh_fgraph(inputs, outputs)
        before = len(fgraph.apply_nodes)
        gc.collect()
        times.append(_rewrite_once(fgraph, mode))
        after = len(fgraph.apply_nodes)
    return {
        "rewrite_median_s": statistics.median(times),
        "rewrite_times_s": times,
        "nodes": {"before": before, "after": after},
        "build_s": build_s,
    }


def logp_check(name: str, seed: int = 3) -> dict:
    """Return both log densities of model ``name`` at one random point and their difference.

    PyMC's terms are evaluated one by one (``model.logp(sum=False)``, unrewritten, on
    PyTensor's Python linker, whose ``Elemwise`` takes at most 32 operands) and summed.
    Expect a relative difference near 1e-9, not 1e-16: PyMC takes the log of exactly
    representable constant parameters (``log(5.0)``) in float32, since PyTensor makes
    such Python floats float32 constants.
    """
    model, pt_inputs, _ = pymc_models.build(name)
    py_mode = Mode(linker="py", optimizer=None)
    terms = model.logp(sum=False)
    pt_terms = pytensor.function(pt_inputs, terms, mode=py_mode, on_unused_input="ignore")
    inputs, outputs = kiln_models.build(name)
    kiln_logp = kiln.function(inputs, outputs[0], mode="FAST_COMPILE")
    rng = np.random.default_rng(seed)
    point = [rng.normal(scale=0.5, size=v.type.shape) for v in inputs]
    a = float(sum(np.sum(t) for t in pt_terms(*point)))
    b = float(kiln_logp(*point))
    return {"pytensor": a, "kiln": b, "rel_diff": abs(a - b) / max(abs(a), 1e-300)}


def run_peer(repeats: int, models: tuple[str, ...]) -> dict:
    """Return, per model, kiln's and PyTensor's rewriting timings and their ratio."""
    mode = pymc_mode()
    out = {}
    for name in models:
        res: dict = {}
        for key, measure in (
            ("pytensor", functools.partial(time_pytensor_rewrite, name, repeats, mode)),
            ("kiln", functools.partial(time_kiln_rewrite, name, repeats)),
            ("logp_check", functools.partial(logp_check, name)),
        ):
            try:
                res[key] = measure()
            except Exception as exc:  # report a failing side and go on with the others
                res[key] = {"error": f"{type(exc).__name__}: {exc}"}
        if "error" not in res["kiln"] and "error" not in res["pytensor"]:
            res["ratio_kiln_over_pytensor"] = (
                res["kiln"]["rewrite_median_s"] / res["pytensor"]["rewrite_median_s"]
            )
        out[name] = res
    return out


def format_table(results: dict) -> str:
    """Return a printable table of :func:`run_peer`'s results (medians, ms)."""
    lines = [
        "Stage-1 rewriting of logp + gradient, medians in ms (ratio = kiln / PyTensor, "
        f"target <= {TARGET_RATIO})",
        f"{'model':<6}{'kiln':>10}{'pytensor':>10}{'ratio':>8}  {'kiln nodes':>12}"
        f"{'pt nodes':>12}  {'logp rel diff':>13}",
    ]
    for name, r in results.items():
        failed = [f"{k}: {r[k]['error'][:80]}" for k in ("kiln", "pytensor") if "error" in r[k]]
        if failed:
            lines.append(f"{name:<6} failed: {'; '.join(failed)}")
            continue
        kn, pn = r["kiln"]["nodes"], r["pytensor"]["nodes"]
        k_after = kn.get("inplace", list(kn.values())[-1] if kn else 0)
        lines.append(
            f"{name:<6}{r['kiln']['rewrite_median_s'] * 1e3:10.2f}"
            f"{r['pytensor']['rewrite_median_s'] * 1e3:10.2f}"
            f"{r['ratio_kiln_over_pytensor']:8.3f}  "
            f"{kn.get('before', 0):>5}->{k_after:<5}{pn['before']:>6}->{pn['after']:<5}"
            f"  {r['logp_check'].get('rel_diff', float('nan')):13.1e}"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the peer benchmark, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(pymc_models.MODELS))
    args = parser.parse_args()
    results = run_peer(args.repeats, tuple(args.models))
    mode = pymc_mode()
    report = {
        "kiln_version": kiln.__version__,
        "pytensor_version": pytensor.__version__,
        "pymc_version": pymc.__version__,
        "pytensor_linker": type(mode.linker).__name__,
        "pytensor_query": str(mode.provided_optimizer),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeats": args.repeats,
        "target_ratio": TARGET_RATIO,
        "results": results,
        "ratios": {name: r.get("ratio_kiln_over_pytensor") for name, r in results.items()},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    print(format_table(results))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
