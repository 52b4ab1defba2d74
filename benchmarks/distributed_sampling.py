"""kl.sample on a 2-worker Dask LocalCluster next to ``cores=2`` locally (issue #25).

For M2 and M3 (``kiln_model_defs.py``), 8 chains of ``tune=DRAWS, draws=DRAWS``:

- ``local_wall_s``: ``kl.sample(chains=8, cores=2)`` in this process (warm caches);
- ``dask_wall_s``: the same with ``executor=client`` on a ``LocalCluster`` of two
  single-threaded worker processes whose kiln caches are warm (the workers were
  restarted: no model in their memory, so each rebuilds it from its disk cache);
- ``dask_again_wall_s``: once more (the workers hold the model: no rebuild);
- ``overhead_per_chain_s``: worker time not spent sampling, per chain:
  ``(dask_wall_s * workers - sum of the chains' sampling seconds) / chains``
  (shipping, scheduling, rebuilding, gathering), target < 0.3 s;
- ``rebuild_s``: the median seconds a worker took to rebuild the model (first run);
- ``package_bytes``: what each task ships (graph, data, start point).

The draws of the two runs are compared (``same_draws``). Needs ``dask`` and
``distributed`` (``pip install kiln[dask]``); skipped without them.
Run alone: ``python benchmarks/distributed_sampling.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("M2", "M3")
CHAINS = 8
WORKERS = 2
DRAWS = 1000
TARGET_OVERHEAD_S = 0.3


def _sample(name: str, **kwargs: object) -> tuple[object, float]:
    import kiln as kl
    import kiln_model_defs

    with kiln_model_defs.build(name), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        idata = kl.sample(
            draws=DRAWS, tune=DRAWS, chains=CHAINS, random_seed=3, progressbar=False, **kwargs
        )
        return idata, time.perf_counter() - start


def _same_draws(a: object, b: object) -> bool:
    return all(
        np.array_equal(a["posterior"][k].values, b["posterior"][k].values)  # type: ignore[index]
        for k in a["posterior"].data_vars  # type: ignore[index]
    )


def run_distributed(models: tuple[str, ...] = MODELS) -> dict:
    """Return the timings of this module for ``models``."""
    try:
        import distributed
    except ImportError:
        return {"skipped": "dask distributed is not installed (pip install kiln[dask])"}
    sys.path.insert(0, str(HERE))
    out: dict = {"chains": CHAINS, "workers": WORKERS, "draws": DRAWS, "models": {}}
    with (
        distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(sys.path.insert, 0, str(HERE))
        for name in models:
            _sample(name, cores=WORKERS)  # warm this process's caches
            local, local_wall = _sample(name, cores=WORKERS)
            _sample(name, executor=client)  # warm the workers' caches
            client.restart()
            client.run(sys.path.insert, 0, str(HERE))
            first, first_wall = _sample(name, executor=client)
            again, again_wall = _sample(name, executor=client)
            sampling = sum(first.attrs["chain_sampling_s"])  # type: ignore[attr-defined]
            out["models"][name] = {
                "local_wall_s": local_wall,
                "dask_wall_s": first_wall,
                "dask_again_wall_s": again_wall,
                "dask_over_local": first_wall / local_wall,
                "overhead_per_chain_s": (first_wall * WORKERS - sampling) / CHAINS,
                "overhead_per_chain_again_s": (
                    again_wall * WORKERS - sum(again.attrs["chain_sampling_s"])  # type: ignore[attr-defined]
                )
                / CHAINS,
                "rebuild_s": statistics.median(first.attrs["chain_rebuild_s"]),  # type: ignore[attr-defined]
                "package_bytes": first.attrs["package_bytes"],  # type: ignore[attr-defined]
                "same_draws": _same_draws(local, first) and _same_draws(local, again),
            }
    out["target_overhead_per_chain_s"] = TARGET_OVERHEAD_S
    return out


def format_table(results: dict) -> str:
    """Return one line per model."""
    if "skipped" in results:
        return f"distributed: skipped ({results['skipped']})"
    lines = [
        f"kl.sample, {results['chains']} chains on a {results['workers']}-worker Dask "
        f"LocalCluster vs cores={results['workers']} here "
        f"(overhead per chain, target < {results['target_overhead_per_chain_s']} s)"
    ]
    for name, r in results["models"].items():
        lines.append(
            f"  {name}: local {r['local_wall_s']:.2f} s, dask {r['dask_wall_s']:.2f} s "
            f"(again {r['dask_again_wall_s']:.2f} s), overhead/chain "
            f"{r['overhead_per_chain_s']:.3f} s (again {r['overhead_per_chain_again_s']:.3f}), "
            f"rebuild {r['rebuild_s'] * 1e3:.0f} ms, package {r['package_bytes'] / 1e3:.0f} kB, "
            f"same draws {r['same_draws']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run_distributed(tuple(args.models))
    print(json.dumps(results, indent=2) if args.json else format_table(results))


if __name__ == "__main__":
    main()
