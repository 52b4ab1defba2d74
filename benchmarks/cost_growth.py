"""How cost grows with model size and data size (issue #26, part 3).

**Compile time against model size.** Two families of models, each at three sizes, in
new processes on one cache folder that starts empty (``stage2.run_child``): ``cold``
then ``warm``, kiln (the model layer, Numba backend) and PyMC/PyTensor (its default
Numba mode) side by side in the same run:

- ``M4``: M4's pattern (``kiln_model_defs.model_m4`` / ``pymc_models.model_m4``) with
  20, 100 and 500 chained groups: 60, 300 and 1500 free variables (120, 600, 3000
  unconstrained dims);
- ``scalars``: ``scalar_scaling.build("normal", n)`` (``pymc_models.model_scalars`` on
  PyMC's side), ``n`` = 200, 800, 2000 scalar random variables written in a Python loop.

Each process times ``build_s`` (the model block), ``graph_s`` (log density and
gradient graphs), ``stage1_s`` (kiln's profile ``rewrite``, PyTensor's
``rewriting_time``), ``stage2_s`` (``link`` / ``linker_time`` plus the first call, where
Numba compiles or loads its cache) and ``total_s`` (all of it, plus kiln's backend
import, ``backend_import_s``; imports otherwise excluded), and its peak RSS. ``growth``
gives the exponents ``log(t2 / t1) / log(n2 / n1)`` between consecutive sizes (1:
linear; 2: quadratic). A cold process that times out stops the larger sizes of its side.

**Per call and sampling against data size.** M3 (logistic regression, D = 20) at
N = 10^3 .. 10^6 rows and M2 (radon-like, 85 groups) at 10^3 .. 10^6 rows, synthetic
data of ``bench_models.py`` with its fixed seeds, each size in one new process (cold
cache): kiln's Numba compile, the native ``logp_grad`` that kiln's NUTS calls timed in
alternating blocks against the hand-written ``@njit`` floor (``njit_models.py``:
``ratio_per_call_over_floor``), both with BLAS on one thread (the floor's loops are
single-threaded; M3's ``X @ beta`` would otherwise take OpenBLAS's threads, which
``kl.sample`` limits to the CPUs per running chain), ``kl.sample(chains=1)``
(``sampling_s``, gradient evaluations, ``sampling_over_grads``: sampling seconds over
gradients times the per-call time), peak RSS (``getrusage``) after sampling against the
RSS after the imports and the data's bytes (``overhead_mb``: what is neither; it should
not grow with N), then kiln's JAX backend (``backend="jax"``) timed against the floor
the same way.

Targets (``TARGETS``): growth exponent <= 1; M4 at 1500 variables cold <= 0.2x PyMC; 800
scalars build + cold compile < 20 s; 2000 scalars finish; per call <= 1.2x the floor.

Run by ``nox -s peer_sampling`` (PyMC installed), or alone:
``python benchmarks/cost_growth.py [--quick] [--output FILE] [--no-compile] [--no-data]
[--families M4 scalars] [--timeout SECONDS] [--repeats K]`` (without PyMC the PyMC side is skipped;
each process may take ``TIMEOUT_S``, as PyMC's cold M4 at 1,500 variables needs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import resource
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: Model family -> sizes (M4: groups of 3 free variables; scalars: random variables).
COMPILE_SIZES = {"M4": (20, 100, 500), "scalars": (200, 800, 2000)}
QUICK_COMPILE_SIZES = {"M4": (10, 20), "scalars": (50, 100)}
DATA_SIZES = (10**3, 10**4, 10**5, 10**6)
QUICK_DATA_SIZES = (10**3, 10**4)
DATA_MODELS = ("M3", "M2")
#: Seconds each process may take: PyMC's cold compile of M4 at 1,500 free variables
#: takes more than 10 minutes here.
TIMEOUT_S = 1800.0
#: M4's free variables per group (mu, sigma, offset).
M4_VARS_PER_GROUP = 3
#: The floor's inputs in order, by value-variable name (``njit_models``' signatures).
FLOOR_INPUTS = {
    "M2": ("mu_a", "sigma_a_log__", "mu_b", "sigma_b_log__", "z_a", "z_b", "sigma_y_log__"),
    "M3": ("alpha", "beta"),
}
TARGETS = {
    "growth_exponent_max": 1.0,
    "m4_1500_cold_over_pymc_max": 0.2,
    "scalars_800_cold_total_max_s": 20.0,
    "per_call_over_floor_max": 1.2,
}


def growth(sizes: Sequence[float], seconds: Sequence[float | None]) -> list[float | None]:
    """Return ``log(t[i+1] / t[i]) / log(n[i+1] / n[i])`` for consecutive sizes.

    About 1 for linear growth, 2 for quadratic; None where a time is missing or not
    positive.

    Examples
    --------
    >>> growth([10, 100, 1000], [1.0, 10.0, 1000.0])
    [1.0, 2.0]
    """
    if len(sizes) != len(seconds):
        raise ValueError(f"growth: {len(sizes)} sizes but {len(seconds)} times")
    out: list[float | None] = []
    for i in range(len(sizes) - 1):
        (n1, t1), (n2, t2) = (sizes[i], seconds[i]), (sizes[i + 1], seconds[i + 1])
        if t1 is None or t2 is None or t1 <= 0 or t2 <= 0 or n1 == n2:
            out.append(None)
        else:
            out.append(round(math.log(t2 / t1) / math.log(n2 / n1), 3))
    return out


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def _kiln_model(family: str, size: int) -> object:
    if family == "M4":
        import kiln_model_defs

        return kiln_model_defs.model_m4(size)
    import scalar_scaling

    return scalar_scaling.build("normal", size)


def _child_compile_kiln(family: str, size: int) -> dict:
    import stage2
    from kiln_compile import config

    backend_import = stage2.import_backend()
    config.profile = True
    t0 = time.perf_counter()
    model = _kiln_model(family, size)
    t1 = time.perf_counter()
    compiled = model.logp_dlogp_function()  # type: ignore[attr-defined]
    t2 = time.perf_counter()
    x = compiled.initial_point(seed=0)
    compiled.logp_dlogp(x)
    t3 = time.perf_counter()
    prof = compiled.function.profile
    times = dict(prof.compile_times)
    link = times.get("link", 0.0)
    return {
        "ndim": compiled.ndim,
        "build_s": t1 - t0,
        "graph_s": t2 - t1 - sum(times.values()),
        "prepare_s": times.get("prepare", 0.0),
        "stage1_s": times.get("rewrite", 0.0),
        "link_s": link,
        "first_call_s": t3 - t2,
        "stage2_s": link + t3 - t2,
        "backend_import_s": backend_import,
        "total_s": t3 - t0 + backend_import,
        "cache": prof.cache,
        "nodes": dict(prof.nodes),
        "peak_rss_mb": _peak_rss_bytes() / 2**20,
    }


def _child_compile_pymc(family: str, size: int) -> dict:
    import pymc
    import pytensor

    import pymc_models

    t0 = time.perf_counter()
    if family == "M4":
        model = pymc_models.model_m4(size)
    else:
        model = pymc_models.model_scalars(size)
    t1 = time.perf_counter()
    inputs = list(model.value_vars)
    logp = model.logp()
    outputs = [logp, *pytensor.grad(logp, inputs)]
    t2 = time.perf_counter()
    f = pymc.pytensorf.compile(inputs, outputs, profile=True)
    f.trust_input = True
    t3 = time.perf_counter()
    start = model.initial_point()
    point = [np.asarray(start[v.name], dtype=v.type.dtype) for v in inputs]
    t3b = time.perf_counter()
    f(*point)
    t4 = time.perf_counter()
    prof = f.profile
    return {
        "ndim": int(sum(p.size for p in point)),
        "build_s": t1 - t0,
        "graph_s": t2 - t1,
        "stage1_s": prof.rewriting_time,
        "link_s": prof.linker_time,
        "first_call_s": t4 - t3b,
        "stage2_s": prof.linker_time + (t4 - t3b),
        "function_s": t3 - t2,
        "total_s": t4 - t0 - (t3b - t3),
        "peak_rss_mb": _peak_rss_bytes() / 2**20,
    }


def _floor_inputs(name: str, compiled: object, x: np.ndarray) -> list[np.ndarray]:
    """Return ``x`` split into the floor's inputs (0-d arrays for scalars)."""
    layout = compiled.layout  # type: ignore[attr-defined]
    parts = {b.name: x[b.slice].reshape(b.shape) for b in layout}
    return [np.array(parts[v], order="C") for v in FLOOR_INPUTS[name]]


def _child_data(name: str, rows: int, draws: int) -> dict:
    from threadpoolctl import threadpool_limits

    import kiln as kl
    import kiln_model_defs
    import njit_models
    import stage2
    from kiln_numba import native_logp_grad

    rss_imports = _peak_rss_bytes()
    d = kiln_model_defs.data(name, rows)
    data_bytes = sum(v.nbytes for v in d.values() if isinstance(v, np.ndarray))
    build = {"M2": kiln_model_defs.model_m2, "M3": kiln_model_defs.model_m3}[name]
    t0 = time.perf_counter()
    model = build(rows)
    compiled = model.logp_dlogp_function()
    x = compiled.initial_point(seed=0)
    compiled.logp_dlogp(x)
    out: dict = {
        "rows": rows,
        "ndim": compiled.ndim,
        "data_mb": data_bytes / 2**20,
        "compile_s": time.perf_counter() - t0,
    }
    native = native_logp_grad(compiled.function)
    q = np.ascontiguousarray(x, dtype=np.float64)
    grad = np.empty_like(q)

    def kiln_call() -> object:
        return native.fn(q, grad, native.user_data)

    with threadpool_limits(limits=1, user_api="blas"):
        out["per_call_s"] = stage2.time_calls(kiln_call)["median_s"]
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = kl.sample(
            draws=draws, tune=draws, chains=1, cores=1, random_seed=1, progressbar=False
        )
    steps = idata["sample_stats"]["n_steps"].values
    out["sampling_s"] = float(idata.attrs["sampling_time"])
    out["draws"] = draws
    out["mean_n_steps"] = float(np.mean(steps))
    grads_est = 2 * draws * float(np.mean(steps))  # tuning assumed as long as the draws
    out["sampling_over_grads"] = out["sampling_s"] / (grads_est * out["per_call_s"])
    peak = _peak_rss_bytes()
    out["rss_after_imports_mb"] = rss_imports / 2**20
    out["peak_rss_mb"] = peak / 2**20
    out["overhead_mb"] = (peak - rss_imports - data_bytes) / 2**20

    floor, floor_data = njit_models.jitted(name), njit_models.data_args(name, rows)
    point = _floor_inputs(name, compiled, q)
    floor(*point, *floor_data)
    with threadpool_limits(limits=1, user_api="blas"):
        paired = stage2.time_paired(kiln_call, lambda: floor(*point, *floor_data))
    out["floor"] = {"per_call_s": paired["b_s"], "kiln_per_call_paired_s": paired["a_s"]}
    out["ratio_per_call_over_floor"] = paired["ratio"]
    check = compiled.logp_dlogp(x)
    out["floor_logp_rel_diff"] = abs(float(check[0]) - float(floor(*point, *floor_data)[0])) / abs(
        float(check[0])
    )
    if importlib.util.find_spec("kiln_jax") is not None:
        t1 = time.perf_counter()
        jcompiled = model.logp_dlogp_function(mode=kl.FAST_RUN.with_linker("jax"))
        jcompiled.logp_dlogp(x)
        jax_compile = time.perf_counter() - t1
        paired = stage2.time_paired(
            lambda: jcompiled.logp_dlogp(x), lambda: floor(*point, *floor_data)
        )
        out["jax"] = {"compile_s": jax_compile, "per_call_s": paired["a_s"]}
        out["ratio_jax_over_floor"] = paired["ratio"]
    return out


def median_run(runs: Sequence[dict]) -> dict:
    """Return one process's fields from ``runs`` of the same measurement: numbers as medians.

    A field that is a number in every run is their median; any other is the first run's.
    ``total_s_runs`` lists each run's ``total_s``. One run is returned as it is, and a
    failed one (``error``) in its place.

    Examples
    --------
    >>> median_run([{"total_s": 3.0, "cache": "miss"}, {"total_s": 1.0, "cache": "miss"},
    ...             {"total_s": 2.0, "cache": "miss"}])
    {'total_s': 2.0, 'cache': 'miss', 'total_s_runs': [3.0, 1.0, 2.0]}
    """
    failed = [r for r in runs if "error" in r]
    if len(runs) == 1 or failed:
        return failed[0] if failed else runs[0]
    out: dict = {}
    for key, value in runs[0].items():
        values = [r.get(key) for r in runs]
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        out[key] = statistics.median(values) if numbers else value  # type: ignore[type-var]
    out["total_s_runs"] = [r.get("total_s") for r in runs]
    return out


def _compile_side(
    lib: str, family: str, sizes: Sequence[int], timeout: float, repeats: int = 1
) -> list[dict]:
    """Cold and warm processes of ``lib`` (kiln / pymc) at each size; stop after a failure.

    ``repeats`` pairs of a cold and a warm process per size, each pair on a new cache
    folder: the row holds their medians (:func:`median_run`).
    """
    import stage2

    rows = []
    for size in sizes:
        args = ["--child-compile", lib, family, str(size)]
        colds, warms = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory(prefix="kiln-growth-") as cache_dir:
                cold = stage2.run_child(args, cache_dir, timeout, Path(__file__))
                warm = (
                    stage2.run_child(args, cache_dir, timeout, Path(__file__))
                    if "error" not in cold
                    else {"error": "skipped: the cold process failed"}
                )
            colds.append(cold)
            warms.append(warm)
            total = cold.get("total_s", cold.get("error"))
            print(f"  {lib} {family} {size}: cold {total}", flush=True)
            if "error" in cold:
                break
        cold, warm = median_run(colds), median_run(warms)
        rows.append({"size": size, "cold": cold, "warm": warm})
        if "error" in cold:
            break
    return rows


def _free_vars(family: str, size: int) -> int:
    return size * M4_VARS_PER_GROUP if family == "M4" else size


def run_compile(
    sizes: dict[str, Sequence[int]], timeout: float, pymc: bool, repeats: int = 1
) -> dict[str, dict]:
    """Return, per family, kiln's and PyMC's cold/warm compile at each size, and growth.

    kiln's processes run ``repeats`` times per size (medians); PyMC's once (its cold
    compile of the largest M4 takes many minutes).
    """
    out: dict[str, dict] = {}
    for family, groups in sizes.items():
        free = [_free_vars(family, s) for s in groups]
        sides = {"kiln": _compile_side("kiln", family, groups, timeout, repeats)}
        if pymc:
            sides["pymc"] = _compile_side("pymc", family, groups, timeout)
        res: dict = {"free_variables": free, **sides, "growth": {}, "ratios": []}
        for lib, rows in sides.items():
            for temp in ("cold", "warm"):
                for phase in ("total_s", "stage1_s", "stage2_s"):
                    got = [r[temp].get(phase) for r in rows] + [None] * (len(free) - len(rows))
                    res["growth"][f"{lib}.{temp}.{phase}"] = growth(free, got)
        for i, n in enumerate(free):
            ratio: dict = {"free_variables": n}
            for temp in ("cold", "warm"):
                k = sides["kiln"][i][temp] if i < len(sides["kiln"]) else {}
                p = sides["pymc"][i][temp] if pymc and i < len(sides["pymc"]) else {}
                if "total_s" in k and "total_s" in p:
                    ratio[f"{temp}_kiln_over_pymc"] = k["total_s"] / p["total_s"]
                elif "total_s" in k and "timed out" in str(p.get("error", "")):
                    ratio[f"{temp}_kiln_over_pymc_at_most"] = k["total_s"] / timeout
            res["ratios"].append(ratio)
        out[family] = res
    return out


def run_data(models: Sequence[str], sizes: Sequence[int], draws: int, timeout: float) -> dict:
    """Return, per model, one cold process per data size (per call, sampling, memory)."""
    import stage2

    out: dict = {}
    for name in models:
        rows = []
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="kiln-growth-data-") as cache_dir:
                args = ["--child-data", name, str(n), "--draws", str(draws)]
                row = stage2.run_child(args, cache_dir, timeout, Path(__file__))
            row.setdefault("rows", n)
            rows.append(row)
            print(f"  data {name} {n}: {row.get('per_call_s', row.get('error'))}", flush=True)
            if "error" in row:
                break
        ok = [r for r in rows if "error" not in r]
        ns = [r["rows"] for r in ok]
        out[name] = {
            "sizes": rows,
            "growth": {
                key: growth(ns, [r.get(key) for r in ok])
                for key in ("per_call_s", "sampling_s", "peak_rss_mb")
            },
        }
    return out


def summarize(compile_: dict, data: dict) -> dict:
    """Return the headline numbers against :data:`TARGETS` (None where not measured)."""
    s: dict = {}
    for family, res in compile_.items():
        for key in ("kiln.cold.total_s", "kiln.warm.total_s", "pymc.cold.total_s"):
            g = res["growth"].get(key) or []
            s[f"{family}.growth_last.{key}"] = g[-1] if g else None
        last = res["ratios"][-1] if res["ratios"] else {}
        s[f"{family}.largest.cold_kiln_over_pymc"] = last.get(
            "cold_kiln_over_pymc", last.get("cold_kiln_over_pymc_at_most")
        )
    scal = compile_.get("scalars", {})
    for row in scal.get("kiln", []):
        if row["size"] == 800 and "total_s" in row["cold"]:
            s["scalars_800.cold_total_s"] = row["cold"]["total_s"]
        if row["size"] == 2000:
            s["scalars_2000.finished"] = "error" not in row["cold"]
    for name, res in data.items():
        ratios = [r.get("ratio_per_call_over_floor") for r in res["sizes"] if "error" not in r]
        s[f"{name}.max_per_call_over_floor"] = max(ratios) if ratios else None
    return s


def format_table(report: dict) -> str:
    """Return the printable tables of a report."""
    lines = ["compile (s; new processes; s1 / s2 = Stage 1 / Stage 2 incl. first call)"]
    lines.append(
        f"{'family':<8}{'vars':>6}{'k cold':>8}{'s1':>7}{'s2':>7}{'k warm':>8}"
        f"{'pm cold':>9}{'s1':>7}{'s2':>7}{'pm warm':>9}{'cold/pm':>9}"
    )
    for family, res in report.get("compile", {}).items():
        for i, n in enumerate(res["free_variables"]):
            k = res["kiln"][i] if i < len(res["kiln"]) else {"cold": {}, "warm": {}}
            p = res.get("pymc", [])
            p = p[i] if i < len(p) else {"cold": {}, "warm": {}}
            r = res["ratios"][i]

            def c(v: object, w: int = 7) -> str:
                return f"{v:{w}.2f}" if isinstance(v, float) else f"{'-':>{w}}"

            lines.append(
                f"{family:<8}{n:>6}{c(k['cold'].get('total_s'), 8)}{c(k['cold'].get('stage1_s'))}"
                f"{c(k['cold'].get('stage2_s'))}{c(k['warm'].get('total_s'), 8)}"
                f"{c(p['cold'].get('total_s'), 9)}{c(p['cold'].get('stage1_s'))}"
                f"{c(p['cold'].get('stage2_s'))}{c(p['warm'].get('total_s'), 9)}"
                f"{c(r.get('cold_kiln_over_pymc', r.get('cold_kiln_over_pymc_at_most')), 9)}"
            )
    lines.append("per call (us) and sampling against rows")
    lines.append(
        f"{'model':<6}{'rows':>9}{'kiln':>11}{'floor':>11}{'ratio':>7}{'jax':>11}{'ratio':>7}"
        f"{'sample s':>9}{'peak MB':>9}{'data MB':>9}{'extra MB':>9}"
    )
    for name, res in report.get("data", {}).items():
        for r in res["sizes"]:
            if "error" in r:
                lines.append(f"{name:<6}{r['rows']:>9}  {r['error'][:90]}")
                continue
            lines.append(
                f"{name:<6}{r['rows']:>9}{r['per_call_s'] * 1e6:11.1f}"
                f"{r['floor']['per_call_s'] * 1e6:11.1f}{r['ratio_per_call_over_floor']:7.2f}"
                f"{r.get('jax', {}).get('per_call_s', math.nan) * 1e6:11.1f}"
                f"{r.get('ratio_jax_over_floor', math.nan):7.2f}{r['sampling_s']:9.2f}"
                f"{r['peak_rss_mb']:9.0f}{r['data_mb']:9.1f}{r['overhead_mb']:9.0f}"
            )
    lines.append(f"summary: {json.dumps(report.get('summary', {}))}")
    return "\n".join(lines)


def main() -> None:
    """Run the benchmark (or one child measurement); print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke check")
    parser.add_argument("--no-compile", action="store_true", help="skip compile vs size")
    parser.add_argument("--no-data", action="store_true", help="skip per call vs data size")
    parser.add_argument("--no-pymc", action="store_true", help="skip PyMC's side")
    parser.add_argument(
        "--families", nargs="+", choices=tuple(COMPILE_SIZES), default=tuple(COMPILE_SIZES),
        help="model families of the compile part (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT_S, help="seconds per process (default %(default)s)"
    )
    parser.add_argument("--draws", type=int, default=None, help="tune = draws of kl.sample")
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="kiln's cold and warm compile processes per size, medians (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--child-compile", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-data", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats: expected 1 or more processes per size, got {args.repeats}")
    draws = args.draws or (50 if args.quick else 250)
    if args.child_compile or args.child_data:
        sys.path.insert(0, str(HERE))
        np.seterr(all="ignore")
        if args.child_compile:
            lib, family, size = args.child_compile
            child = _child_compile_kiln if lib == "kiln" else _child_compile_pymc
            res = child(family, int(size))
        else:
            res = _child_data(args.child_data[0], int(args.child_data[1]), draws)
        print(json.dumps(res, default=str))
        return
    import kiln

    pymc = not args.no_pymc and importlib.util.find_spec("pymc") is not None
    report: dict = {
        "kiln_version": kiln.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "timeout_s": args.timeout,
        "draws": draws,
        "targets": TARGETS,
    }
    if pymc:
        import pymc as pm
        import pytensor

        report["pymc_version"] = pm.__version__
        report["pytensor_version"] = pytensor.__version__
    compile_sizes = QUICK_COMPILE_SIZES if args.quick else COMPILE_SIZES
    compile_sizes = {f: compile_sizes[f] for f in args.families}
    report["repeats"] = args.repeats
    report["compile"] = (
        {} if args.no_compile else run_compile(compile_sizes, args.timeout, pymc, args.repeats)
    )
    if args.output:  # the compile part kept should the data part fail
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2))
    data_sizes = QUICK_DATA_SIZES if args.quick else DATA_SIZES
    report["data"] = (
        {} if args.no_data else run_data(DATA_MODELS, data_sizes, draws, 2 * args.timeout)
    )
    report["summary"] = summarize(report["compile"], report["data"])
    print(format_table(report))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
