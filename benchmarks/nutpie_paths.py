"""nutpie through kiln: the C-pointer path against the Python-callback path.

One process, one model compiled once on the Numba backend (eight schools,
non-centred, posteriordb's data); ``kiln_samplers.sample_nutpie`` runs it with the
model's C callbacks (``kiln_numba.native_c_pointers``: nutpie's threads call them
without the GIL) and with Python callbacks (``CompiledModel.logp_dlogp`` / ``expand``,
the same compiled code called through Python). Reports the median over ``--repeats``
runs of the sampling time and of the draws per second (all iterations, warm-up
included, over all chains), and the compile time of the callbacks (cold: an empty
cache folder, so LLVM runs).

    .venv/bin/python benchmarks/nutpie_paths.py [--repeats 5] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-nutpie-bench-"))
sys.path.insert(0, str(HERE.parent / "integration" / "posteriordb"))

import models as posteriordb  # noqa: E402

import kiln as kl  # noqa: E402
import kiln_samplers  # noqa: E402
from kiln_numba import native_c_pointers  # noqa: E402

DRAWS, TUNE, CHAINS, CORES = 1000, 1000, 4, 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    model = posteriordb.build("eight_schools-eight_schools_noncentered")
    start = time.perf_counter()
    compiled = model.logp_dlogp_function(mode=kl.FAST_RUN.with_linker("numba"))
    pointers = native_c_pointers(compiled.function, compiled.expand_function)
    compile_s = time.perf_counter() - start
    results: dict[str, object] = {
        "model": "eight_schools-eight_schools_noncentered",
        "draws": DRAWS,
        "tune": TUNE,
        "chains": CHAINS,
        "cores": CORES,
        "compile_s_cold": compile_s,
        "callbacks_cache": pointers.stage2["cache"],
    }
    for path, native in (("pointers", pointers), ("python", None)):
        times = []
        for seed in range(args.repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trace = kiln_samplers.sample_nutpie(
                    compiled, DRAWS, TUNE, CHAINS, CORES, random_seed=seed,
                    native=native, progressbar=False,
                )  # fmt: skip
            times.append(trace.sampling_time)
        median = statistics.median(times)
        results[path] = {
            "sampling_s_median": median,
            "sampling_s": times,
            "draws_per_s": CHAINS * (DRAWS + TUNE) / median,
        }
    a, b = results["pointers"], results["python"]
    results["speedup"] = b["sampling_s_median"] / a["sampling_s_median"]  # type: ignore[index]
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
