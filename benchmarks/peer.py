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

Numba backend (both sides, logp + gradient; see ``stage2.py``): each side compiles the
model in two new processes on one cache folder that starts empty (``KILN_CACHE_DIR``,
``NUMBA_CACHE_DIR`` and PyTensor's ``base_compiledir``/``compiledir`` through
``PYTENSOR_FLAGS``, all in a temporary folder): ``cold`` then ``warm``, each timed from
building the model to the first call returning, with Stage 1 (kiln's ``rewrite``,
PyTensor's profile ``rewriting_time``) and Stage 2 (``link`` / ``linker_time``, plus the
first call) apart. PyTensor's function is ``pymc.pytensorf.compile(value_vars, [logp,
*grads])`` in its default mode (Numba), as ``model.compile_logp`` / ``compile_dlogp``
build theirs. The warm process then times calls (``trust_input``, profiling off, one
fixed point), kiln's with the hand-written ``@njit`` baseline (M1-M3) and ``jax.jit``
(M3, when JAX is importable) beside it. ``numba_ratios`` gathers, per model,
kiln / PyTensor for cold (target <= 0.5) and warm (<= 0.1) compile and per call, and
kiln / njit per call (<= 1.2 on M1, M2) and kiln / JAX (M3, <= 1).

C backend (``c``; skipped with ``--no-c``): the same two processes per side, kiln's
``linker="c"`` against PyTensor's C backend (``pymc.pytensorf.compile`` in the ``CVM``
mode with PyMC's two extra rewrites; its compiledir in the temporary folder, so the cold
process compiles every C module). ``c_ratios``: kiln / PyTensor cold (issue #23's
target <= 0.05), warm and per call, and kiln / njit per call. A pip-installed PyTensor
may find no BLAS (it says so), which slows its CVM matrix products.

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
from pytensor.compile.mode import Mode, get_default_mode, get_mode

import kiln
import kiln_models
import pymc_models
import stage2
from stage1 import time_kiln_rewrite

TARGET_RATIO = 0.5
NUMBA_TARGETS = {"cold": 0.5, "warm": 0.1, "per_call_over_njit": 1.2, "per_call_over_jax": 1.0}
#: Issue #23: kiln's C backend's cold compile at most 0.05x PyTensor's (CVM).
C_TARGETS = {"cold": 0.05, "per_call_over_njit": 1.2}


def pymc_mode(name: str | None = None) -> Mode:
    """Return the mode ``pymc.compile`` uses for a model's functions (default bounds).

    ``name``: a PyTensor mode (``"CVM"``, its C backend) in place of the default (Numba).
    """
    mode = get_default_mode() if name is None else get_mode(name)
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


def _child_pytensor(name: str, calls: bool, linker: str = "numba") -> dict:
    """Compile model ``name`` with PyMC/PyTensor in this new process; time it.

    ``linker``: ``numba`` (PyTensor's default mode) or ``c`` (its C backend, ``CVM``).
    """
    t0 = time.perf_counter()
    model, inputs, outputs = pymc_models.build(name)
    t1 = time.perf_counter()
    start = model.initial_point()
    point = stage2.fixed_point([np.shape(start[v.name]) for v in inputs])
    point = [p.astype(v.type.dtype) for p, v in zip(point, inputs, strict=True)]
    mode = None if linker == "numba" else pymc_mode("CVM")
    f = pymc.pytensorf.compile(inputs, outputs, profile=True, mode=mode)
    f.trust_input = True
    t2 = time.perf_counter()
    f(*point)
    t3 = time.perf_counter()
    prof = f.profile
    res = {
        "build_s": t1 - t0,
        "function_s": t2 - t1,
        "first_call_s": t3 - t2,
        "stage1_s": prof.rewriting_time,
        "link_s": prof.linker_time,
        "stage2_s": prof.linker_time + (t3 - t2),
        "total_s": t3 - t0,
        "linker": type(f.maker.linker).__name__,
    }
    if calls:
        f.profile = None
        f.maker.profile = None
        res["per_call_s"] = stage2.time_calls(lambda: f(*point))["median_s"]
    return res


def backend_compare(name: str, timeout: float, linker: str = "numba") -> dict:
    """Return kiln's and PyTensor's cold/warm compile and per-call times, and ratios.

    ``linker``: ``numba`` on both sides, or ``c``: kiln's C backend against PyTensor's
    (``CVM``).
    """
    res = {
        "kiln": stage2.time_model(name, timeout, linker=linker),
        "pytensor": stage2.time_model(
            name, timeout, Path(__file__).resolve(), child="--child-pytensor", linker=linker
        ),
    }
    k, p = res["kiln"], res["pytensor"]
    ratios: dict = {}
    if "error" not in k and "error" not in p:
        ratios["cold"] = k["cold"]["total_s"] / p["cold"]["total_s"]
        ratios["warm"] = k["warm"]["total_s"] / p["warm"]["total_s"]
        ratios["per_call_over_pytensor"] = k["per_call_s"] / p["per_call_s"]
    for key in ("ratio_per_call_over_njit", "ratio_per_call_over_jax"):
        if key in k:
            ratios[key.removeprefix("ratio_")] = k[key]
    res["ratios"] = ratios
    return res


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


def _cell(value: float | None, scale: float = 1e3, width: int = 9, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value * scale:{width}.{digits}f}"


def format_numba_table(numba: dict, linker: str = "numba") -> str:
    """Return a printable table of a backend comparison (compile in ms, calls in us)."""
    t = NUMBA_TARGETS if linker == "numba" else C_TARGETS
    title = "Numba backend" if linker == "numba" else "C backend (PyTensor: CVM)"
    lines = [
        f"{title}, logp + gradient, kiln vs PyTensor/PyMC: compile in new processes "
        "(ms, build to first call; cold = empty caches), per call (us); ratios kiln / other "
        f"(targets: {', '.join(f'{k} <= {v}' for k, v in t.items())})",
        f"{'model':<6}{'k cold':>9}{'pt cold':>9}{'ratio':>7}{'k warm':>9}{'pt warm':>9}"
        f"{'ratio':>7}{'k call':>9}{'pt call':>9}{'ratio':>7}{'/njit':>7}{'/jax':>7}",
    ]
    for name, r in numba.items():
        k, p, q = r["kiln"], r["pytensor"], r["ratios"]
        k = {"cold": {}, "warm": {}, **k}  # a failed side shows "-"
        p = {"cold": {}, "warm": {}, **p}
        line = f"{name:<6}{_cell(k['cold'].get('total_s'))}{_cell(p['cold'].get('total_s'))}"
        line += f"{_cell(q.get('cold'), 1, 7, 3)}{_cell(k['warm'].get('total_s'))}"
        line += f"{_cell(p['warm'].get('total_s'))}{_cell(q.get('warm'), 1, 7, 3)}"
        line += f"{_cell(k.get('per_call_s'), 1e6)}{_cell(p.get('per_call_s'), 1e6)}"
        line += f"{_cell(q.get('per_call_over_pytensor'), 1, 7, 2)}"
        line += f"{_cell(q.get('per_call_over_njit'), 1, 7, 2)}"
        line += f"{_cell(q.get('per_call_over_jax'), 1, 7, 2)}"
        lines.append(line)
        errors = [
            f"{side}: {r[side]['error'][:90]}"
            for side in ("kiln", "pytensor")
            if "error" in r[side]
        ]
        if errors:
            lines.append(f"{'':<6}failed: {'; '.join(errors)}")
    return "\n".join(lines)


def main() -> None:
    """Run the peer benchmark, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, help="JSON file to write (required)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(pymc_models.MODELS))
    parser.add_argument(
        "--no-numba", action="store_true", help="skip the Numba compile / per-call comparison"
    )
    parser.add_argument("--timeout", type=float, default=stage2.CHILD_TIMEOUT_S)
    parser.add_argument(
        "--no-c", action="store_true", help="skip the C (kiln c vs PyTensor CVM) comparison"
    )
    parser.add_argument("--child-pytensor", help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--linker", default="numba", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_pytensor:
        print(json.dumps(_child_pytensor(args.child_pytensor, args.calls, args.linker)))
        return
    if args.output is None:
        parser.error("the following argument is required: --output")
    results = run_peer(args.repeats, tuple(args.models))
    numba: dict = {}
    if not args.no_numba:
        for name in args.models:
            numba[name] = backend_compare(name, args.timeout)
    c: dict = {}
    if not args.no_c:
        for name in args.models:
            c[name] = backend_compare(name, args.timeout, "c")
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
        "numba_targets": NUMBA_TARGETS,
        "numba": numba,
        "numba_ratios": {name: r["ratios"] for name, r in numba.items()},
        "c_targets": C_TARGETS,
        "c": c,
        "c_ratios": {name: r["ratios"] for name, r in c.items()},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    print(format_table(results))
    if numba:
        print(format_numba_table(numba))
    if c:
        print(format_numba_table(c, "c"))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
