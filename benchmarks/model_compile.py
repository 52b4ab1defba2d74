"""Time from a model's first line to its compiled logp + gradient (the model layer, #6).

For each benchmark model (``kiln_model_defs.py``), two new processes on one cache folder
that starts empty (``stage2.run_child``): ``cold`` then ``warm``. Each times, in that
process, building the ``kl.Model`` (``build_s``), ``model.logp_dlogp_function()``
(``compile_s``: log-density graph, gradient, Stage 1, Stage 2 link) and the first call
(``first_call_s``: where Numba compiles or loads its cache); ``total_s`` is all three
plus ``backend_import_s``, the import of the Numba backend that a process pays at its
first compile (other imports excluded). The warm ratio is also given without it. The
warm process also reports ``per_call_s`` (median) of ``logp_dlogp`` on a fixed point
and ``native_per_call_s``, of the native ``logp_grad`` that kiln's NUTS and nutpie call
(``kiln_numba.native_logp_grad``).

PyMC 6.4 on this kind of machine (issue #6), cold / warm seconds: M1 4.4 / 1.0,
M2 6.7 / 1.4, M3 10.7 / 2.4, M4 27.6 / 11.5; ``nox -s peer`` measures PyMC's side in
the same run (its ``numba`` block). Run alone: ``python benchmarks/model_compile.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: PyMC 6.4's cold / warm seconds quoted by the issue (same data, same kind of machine).
PYMC_QUOTED = {"M1": (4.4, 1.0), "M2": (6.7, 1.4), "M3": (10.7, 2.4), "M4": (27.6, 11.5)}


def _child(name: str, calls: bool) -> dict:
    import kiln_model_defs
    import stage2

    backend_import = stage2.import_backend()
    t0 = time.perf_counter()
    model = kiln_model_defs.build(name)
    t1 = time.perf_counter()
    compiled = model.logp_dlogp_function()
    t2 = time.perf_counter()
    x = compiled.initial_point(seed=0)
    compiled.logp_dlogp(x)
    t3 = time.perf_counter()
    out = {
        "build_s": t1 - t0,
        "compile_s": t2 - t1,
        "first_call_s": t3 - t2,
        "total_s": t3 - t0 + backend_import,
        "backend_import_s": backend_import,
        "ndim": compiled.ndim,
        "linker": compiled.function.linker,
    }
    if calls:
        out["per_call_s"] = stage2.time_calls(lambda: compiled.logp_dlogp(x))["median_s"]
        if compiled.function.linker == "numba":  # what kiln's NUTS and nutpie call
            from kiln_numba import native_logp_grad

            native = native_logp_grad(compiled.function)
            q = np.ascontiguousarray(x, dtype=np.float64)
            grad = np.empty_like(q)
            out["native_per_call_s"] = stage2.time_calls(
                lambda: native.fn(q, grad, native.user_data)
            )["median_s"]
    return out


def time_model(name: str, timeout: float = 900.0) -> dict:
    """Return the cold and warm processes' timings of model ``name`` and the ratios."""
    import stage2

    args = ["--child", name]
    cold, warm = stage2.cold_and_warm(args, [*args, "--calls"], timeout, Path(__file__))
    out: dict = {"cold": cold, "warm": warm}
    if "error" not in cold and "error" not in warm:
        pymc_cold, pymc_warm = PYMC_QUOTED[name]
        out["ratio_cold_over_pymc_quoted"] = cold["total_s"] / pymc_cold
        out["ratio_warm_over_pymc_quoted"] = warm["total_s"] / pymc_warm
        out["ratio_warm_without_backend_import_over_pymc_quoted"] = (
            warm["total_s"] - warm["backend_import_s"]
        ) / pymc_warm
    return out


def run_model_compile(models: tuple[str, ...] = ("M1", "M2", "M3", "M4")) -> dict:
    """Return :func:`time_model` of each model."""
    return {name: time_model(name) for name in models}


def format_table(results: dict) -> str:
    """Return one line per model: cold and warm totals (s) and the ratios to PyMC."""
    lines = ["model layer: first line -> compiled logp+grad (s); kiln / PyMC 6.4 (quoted)"]
    for name, res in results.items():
        if "ratio_cold_over_pymc_quoted" not in res:
            lines.append(f"  {name}: {res.get('cold', {}).get('error') or res.get('warm')}")
            continue
        c, w = res["cold"], res["warm"]
        lines.append(
            f"  {name}: cold {c['total_s']:.2f} (build {c['build_s']:.2f}, compile "
            f"{c['compile_s']:.2f}, first call {c['first_call_s']:.2f}) "
            f"{res['ratio_cold_over_pymc_quoted']:.2f}x; warm {w['total_s']:.3f} "
            f"{res['ratio_warm_over_pymc_quoted']:.3f}x (importing the backend "
            f"{w['backend_import_s']:.3f} of it; without: "
            f"{res['ratio_warm_without_backend_import_over_pymc_quoted']:.3f}x); per call "
            f"{w['per_call_s'] * 1e6:.1f} us (native {w.get('native_per_call_s', 0) * 1e6:.2f})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=["M1", "M2", "M3", "M4"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(_child(args.child, args.calls)))
        return
    results = run_model_compile(tuple(args.models))
    print(json.dumps(results, indent=2) if args.json else format_table(results))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
