"""kiln benchmarks: graph construction, grad, VM per-call overhead, and Stage 1 on M1-M4.

Run with ``nox -s bench`` (or ``python benchmarks/run.py --output FILE``). Each
benchmark is repeated; the JSON result holds every timing and the median, and the
ratios that compare benchmarks measured in this same run (machines are shared and
noisy, so compare ratios within one file, not seconds across files). The Stage-1
benchmarks of the models M1-M4 (``stage1.py``) go under the key ``"stage1"``, the
Numba-backend ones (``stage2.py``: cold / warm compile in new processes, per call
against hand-written ``@njit``, tiny-graph call overhead) under ``"stage2"``, the
random draws against NumPy's Generator (``random_draws.py``) under ``"random"``, and
the model layer's first line -> compiled logp+grad (``model_compile.py``) under
``"model_compile"``, ``kl.sample`` end to end (``sampling.py``) under ``"sampling"``,
the cost of its results next to sampling at 10^4 draws per chain (``results_cost.py``)
under ``"results_cost"``, and the time per leapfrog step of each form of data
(``data_variants.py``) under ``"data_variants"``, and the compile time of models of
100-2,000 scalar variables (``scalar_scaling.py``, logp + gradient only) under
``"scalar_scaling"``, and the C backend next to Numba (``c_backend.py``: cold and warm
compiles, per call against ``@njit`` and kiln-Numba, ``kl.sample`` wall) under
``"c_backend"``, and the PyTorch and MLX backends next to Numba and JAX
(``torch_mlx.py``: cold and warm compiles, per call, ``kl.sample`` wall; a backend not
installed is skipped) under ``"torch_mlx"``, and ``kl.sample`` on a 2-worker Dask
``LocalCluster`` next to ``cores=2`` (``distributed_sampling.py``) under ``"distributed"``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import c_backend
import data_variants
import distributed_sampling
import kiln
import kiln.tensor as kt
import model_compile
import random_draws
import results_cost
import sampling
import scalar_scaling
import stage2
import torch_mlx
from stage1 import format_table, run_stage1


def _time(fn: Callable[[], object], repeats: int, number: int = 1) -> list[float]:
    """Return ``repeats`` timings of ``number`` calls of ``fn``, in seconds per call."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - start) / number)
    return out


def build_chain(n_nodes: int) -> tuple[kt.TensorVariable, kt.TensorVariable]:
    """Return a fresh input and an expression of about ``n_nodes`` elementwise nodes over it."""
    x = kt.vector("x")
    y = x
    for i in range(n_nodes // 2):
        y = kt.tanh(y) * (1.0 + 1e-3 * (i % 7)) if i % 2 else kt.sin(y) + x
    return x, kt.sum(y)


def bench_construction(repeats: int) -> dict:
    """Build a 10,000-node expression from a fresh input."""
    times = _time(lambda: build_chain(10_000), repeats)
    return {"median_s": statistics.median(times), "times_s": times}


def bench_grad(repeats: int) -> dict:
    """Reverse-mode gradient of a 10,000-node expression."""
    times = []
    for _ in range(repeats):
        x, cost = build_chain(10_000)
        start = time.perf_counter()
        kiln.grad(cost, x)
        times.append(time.perf_counter() - start)
    return {"median_s": statistics.median(times), "times_s": times}


def bench_vm_call(repeats: int, trust_input: bool) -> dict:
    """Per-call time of a small compiled graph on the VM."""
    x = kt.vector("x")
    f = kiln.function(
        [x], kt.sum(kt.exp(x) * 2.0 + 1.0), mode="FAST_COMPILE", trust_input=trust_input
    )
    value = np.ones(3)
    times = _time(lambda: f(value), repeats, number=2000)
    return {"median_s": statistics.median(times), "times_s": times}


def bench_numpy_call(repeats: int) -> dict:
    """Time the same small computation in plain NumPy, the floor for per-call overhead."""
    value = np.ones(3)
    times = _time(lambda: np.sum(np.exp(value) * 2.0 + 1.0), repeats, number=2000)
    return {"median_s": statistics.median(times), "times_s": times}


def main() -> None:
    """Run the benchmarks and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--no-stage1", action="store_true", help="skip the Stage-1 benchmarks of M1-M4"
    )
    parser.add_argument(
        "--no-stage2", action="store_true", help="skip the Numba-backend benchmarks of M1-M4"
    )
    parser.add_argument(
        "--models", nargs="+", default=list(stage2.MODELS), help="models of the Numba part"
    )
    parser.add_argument("--no-random", action="store_true", help="skip the random-draw benchmarks")
    parser.add_argument(
        "--no-model", action="store_true", help="skip the model-layer compile benchmarks"
    )
    parser.add_argument(
        "--no-sample", action="store_true", help="skip the kl.sample end-to-end benchmarks"
    )
    parser.add_argument(
        "--no-results",
        action="store_true",
        help="skip the cost of kl.sample's results next to sampling (issue #21)",
    )
    parser.add_argument(
        "--no-variants",
        action="store_true",
        help="skip the per-leapfrog times of the data variants (issue #19)",
    )
    parser.add_argument(
        "--no-scalars",
        action="store_true",
        help="skip the compile time of models of many scalars (issue #21)",
    )
    parser.add_argument(
        "--no-c",
        action="store_true",
        help="skip the C backend next to Numba: compiles, calls, kl.sample (issue #23)",
    )
    parser.add_argument(
        "--no-distributed",
        action="store_true",
        help="skip kl.sample on a 2-worker Dask LocalCluster next to cores=2 (issue #25)",
    )
    parser.add_argument(
        "--no-torch-mlx",
        action="store_true",
        help="skip the PyTorch and MLX backends next to Numba and JAX (issue #24)",
    )
    args = parser.parse_args()
    results = {
        "graph_construction_10k_nodes": bench_construction(args.repeats),
        "grad_10k_nodes": bench_grad(args.repeats),
        "vm_call_small_graph": bench_vm_call(args.repeats, trust_input=False),
        "vm_call_small_graph_trust_input": bench_vm_call(args.repeats, trust_input=True),
        "numpy_call_small_graph": bench_numpy_call(args.repeats),
    }
    numpy_median = results["numpy_call_small_graph"]["median_s"]
    ratios = {
        "vm_call_over_numpy": results["vm_call_small_graph"]["median_s"] / numpy_median,
        "vm_call_trust_input_over_numpy": results["vm_call_small_graph_trust_input"]["median_s"]
        / numpy_median,
        "grad_over_construction": results["grad_10k_nodes"]["median_s"]
        / results["graph_construction_10k_nodes"]["median_s"],
    }
    report = {
        "kiln_version": kiln.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeats": args.repeats,
        "results": results,
        "ratios": ratios,
    }
    if not args.no_stage1:
        report["stage1"] = run_stage1(args.repeats)
    if not args.no_stage2:
        report["stage2"] = stage2.run_stage2(args.models)
    if not args.no_random:
        report["random"] = random_draws.run_random(args.repeats)
    if not args.no_model:
        report["model_compile"] = model_compile.run_model_compile(tuple(args.models))
    if not args.no_sample:
        models = tuple(m for m in args.models if m in sampling.PYMC_BEST_WALL)
        report["sampling"] = sampling.run_sampling(models)
    if not args.no_results:
        models = tuple(m for m in args.models if m in results_cost.MODELS)
        report["results_cost"] = results_cost.run_results_cost(models)
    if not args.no_variants:
        report["data_variants"] = data_variants.leapfrog_times()
    if not args.no_scalars:
        report["scalar_scaling"] = scalar_scaling.run_scalar_scaling(
            ("normal", "hierarchical"), scalar_scaling.QUICK_SIZES, sample=False
        )
    if not args.no_c:
        report["c_backend"] = c_backend.run_c_backend(
            tuple(m for m in args.models if m in c_backend.MODELS)
        )
    if not args.no_distributed:
        report["distributed"] = distributed_sampling.run_distributed(
            tuple(m for m in args.models if m in distributed_sampling.MODELS)
        )
    if not args.no_torch_mlx:
        report["torch_mlx"] = torch_mlx.run_torch_mlx(
            tuple(m for m in args.models if m in torch_mlx.MODELS)
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    for name, res in results.items():
        print(f"{name:<36} median {res['median_s'] * 1e6:12.1f} us")
    for name, ratio in ratios.items():
        print(f"{name:<36} {ratio:8.2f}x")
    if "stage1" in report:
        print(format_table(report["stage1"]))
    if "stage2" in report:
        print(stage2.format_table(report["stage2"]))
    if "random" in report:
        print(random_draws.format_table(report["random"]))
    if "model_compile" in report:
        print(model_compile.format_table(report["model_compile"]))
    if "sampling" in report:
        print(sampling.format_table(report["sampling"]))
    if "results_cost" in report:
        print(results_cost.format_table(report["results_cost"]))
    if "data_variants" in report:
        print(data_variants.format_table(report["data_variants"]))
    if "scalar_scaling" in report:
        print(scalar_scaling.format_table(report["scalar_scaling"]))
    if "c_backend" in report:
        print(c_backend.format_table(report["c_backend"]))
    if "distributed" in report:
        print(distributed_sampling.format_table(report["distributed"]))
    if "torch_mlx" in report:
        print(torch_mlx.format_table(report["torch_mlx"]))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
