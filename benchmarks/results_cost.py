"""The cost of kl.sample's results next to its sampling (issue #21, item 3).

For M1 and M2 (``kiln_model_defs.py``), one new process runs
``kl.sample(tune=1000, draws=10_000, chains=2, cores=2)`` once to fill the caches, then
``REPEATS`` times on a warm cache, and reports the medians over those runs of
``wall_s`` (the call), ``compile_s`` (``compile_time``), ``sampling_s``
(``sampling_time``), ``outside_s`` (the rest: the batched expand of the draws, the
DataTree, the diagnostics, the data groups) and ``ratio_outside_over_sampling``, whose
target is <= 0.1 at 10^4 draws per chain; ``ratios`` lists every run's ratio (a shared
machine is noisy: their spread says how much).
Run alone: ``python benchmarks/results_cost.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("M1", "M2")
DRAWS = 10_000
#: Warm runs timed per model (their medians are reported).
REPEATS = 5
#: The issue's target for ``ratio_outside_over_sampling``.
TARGET = 0.1


def _child(name: str) -> dict:
    import kiln as kl
    import kiln_model_defs

    runs = []
    for _ in range(1 + REPEATS):
        model = kiln_model_defs.build(name)
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            idata = kl.sample(
                tune=1000, draws=DRAWS, chains=2, cores=2, random_seed=1, progressbar=False
            )
            wall = time.perf_counter() - t0
        compile_s, sampling = idata.attrs["compile_time"], idata.attrs["sampling_time"]
        runs.append((wall, compile_s, sampling, wall - compile_s - sampling))
    warm = np.array(runs[1:])
    ratios = warm[:, 3] / warm[:, 2]
    wall, compile_s, sampling, outside = np.median(warm, axis=0).tolist()
    return {
        "draws_per_chain": DRAWS,
        "repeats": REPEATS,
        "wall_s": wall,
        "compile_s": compile_s,
        "sampling_s": sampling,
        "outside_s": outside,
        "ratio_outside_over_sampling": float(np.median(ratios)),
        "ratios": [round(float(r), 4) for r in ratios],
        "first_call_wall_s": runs[0][0],
    }


def time_model(name: str, timeout: float = 900.0) -> dict:
    """Return :func:`_child` of ``name``, run in a new process."""
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__)), "--child", name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_results_cost(models: tuple[str, ...] = MODELS) -> dict:
    """Return :func:`time_model` of each model and the target."""
    return {"target_ratio": TARGET, "models": {name: time_model(name) for name in models}}


def format_table(results: dict) -> str:
    """Return one line per model."""
    lines = [
        f"kl.sample results cost (draws={DRAWS}, chains=2, warm, median of {REPEATS}): "
        f"outside / sampling (target <= {results['target_ratio']})"
    ]
    for name, res in results["models"].items():
        if "error" in res:
            lines.append(f"  {name}: {res['error']}")
            continue
        lines.append(
            f"  {name}: sampling {res['sampling_s']:.3f} s, outside {res['outside_s']:.3f} s, "
            f"ratio {res['ratio_outside_over_sampling']:.3f} "
            f"(runs {min(res['ratios']):.3f}-{max(res['ratios']):.3f})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(_child(args.child)))
        return
    results = run_results_cost(tuple(args.models))
    print(json.dumps(results, indent=2) if args.json else format_table(results))


if __name__ == "__main__":
    main()
