"""kl.sample next to PyMC's pm.sample on M1-M3, engine by engine, in one run.

Each engine runs ``tune=1000, draws=1000, chains=2, cores=2`` in new processes on one
cache folder that starts empty (``stage2.run_child``), ``cold`` then ``warm``, once
through kiln (``sampling.py``'s child, ``kl.sample(nuts_sampler=...)``) and once
through PyMC (``pm.sample(nuts_sampler=...)`` on the same models and data,
``pymc_models.py``). The engines: each library's own NUTS (kiln's vs PyMC's), then
nutpie, numpyro and blackjax where installed. Each run reports wall seconds (model
construction to the returned data, imports excluded), min bulk ESS and ESS per
second; ``ratios`` compare kiln with PyMC for the same engine (wall: kiln / PyMC, lower
is better; ESS/s: kiln / PyMC, higher is better) and kiln's own NUTS with PyMC's best
option. PyMC's JAX engines run with JAX's defaults (no persistent compilation cache);
kiln's use JAX's persistent cache under the kiln cache root. PyMC 6.4's blackjax path
fails with blackjax 1.7 (it imports ``blackjax.progress_bar.gen_scan_fn`` and passes
``progress_bar`` to the window adaptation, both gone), so that row records PyMC's error.

``whole_process`` times what a user waits for when running ``python model.py``: a new
interpreter that imports kiln (or PyMC), builds the model, samples it as above with the
library's defaults otherwise, and exits; the wall time of the whole process, measured
by the parent around it (interpreter start and exit included), on a cache folder that
starts empty (``cold``, the median of ``WHOLE_COLD_RUNS``, each on a new folder) and
then on the last one filled (``warm``, the median of ``WHOLE_WARM_RUNS``). kiln's own
NUTS against PyMC's ``pm.sample`` and PyMC driving nutpie; ``ratios`` compare kiln with
the best of the two (the issue's targets: warm at most 0.1, cold at most 0.2).
Two floors, each the median of ``WHOLE_WARM_RUNS`` processes, with their ratios to the
same best: ``imports_floor_s``, a process that only imports numpy and xarray (what
returning a DataTree costs before any model; against the warm best), and
``numba_floor_s``, one that also imports Numba and compiles a small loop (against the
cold best). ``--whole-only`` runs just that part, for every model named
(``--models M1 M2 LKJ``: LKJ is ``bench_models``' LKJ-Cholesky Gaussian, whose first
build compiles the linear-algebra kernels).

Run by ``nox -s peer_sampling``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Cold whole-process runs per library and model, each on a new empty cache folder, and
#: warm runs on the last one's filled folder (the medians are reported).
WHOLE_COLD_RUNS = 3
WHOLE_WARM_RUNS = 3


def _child_pymc(name: str, sampler: str) -> dict:
    import arviz_stats
    import pymc as pm

    import pymc_models

    t0 = time.perf_counter()
    model = {"M1": pymc_models.model_m1, "M2": pymc_models.model_m2, "M3": pymc_models.model_m3}[
        name
    ]()
    # Chains vectorized, as kiln runs them by default (PyMC's default, pmap, needs a
    # device per chain: jax fails on one CPU device).
    options = {}
    if sampler in ("numpyro", "blackjax"):
        options["nuts_sampler_kwargs"] = {"chain_method": "vectorized"}
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
            nuts_sampler=sampler, compute_convergence_checks=False, **options,
        )  # fmt: skip
    wall = time.perf_counter() - t0
    posterior = idata.posterior
    try:
        ess = arviz_stats.ess(posterior)
        min_ess = min(float(v.values.min()) for v in ess.data_vars.values())
    except Exception:  # noqa: BLE001  (an older xarray object: use ArviZ 0.x)
        import arviz

        min_ess = float(min(v.values.min() for v in arviz.ess(idata).data_vars.values()))
    return {"wall_s": wall, "min_ess_bulk": min_ess, "ess_per_s": min_ess / wall}


def _child_whole(engine: str, name: str) -> dict:
    """Do what ``python model.py`` does: import, build ``name``, sample it; nothing more.

    ``engine="imports"`` only imports numpy and xarray, which any library returning its
    draws as an xarray DataTree (or ArviZ's InferenceData) imports: the floor under kiln's
    whole process. ``engine="numba"`` also imports Numba and compiles a three-line loop
    on arrays without a cache: the floor under a cold start on the Numba backend.
    """
    if engine in ("imports", "numba"):
        import numpy as np
        import xarray  # noqa: F401

        if engine == "numba":
            import numba

            @numba.njit(cache=False)
            def loop(x: np.ndarray, g: np.ndarray) -> float:
                total = 0.0
                for i in range(x.shape[0]):
                    total += np.log(x[i])
                    g[i] = 1.0 / x[i]
                return total

            loop(np.ones(3), np.ones(3))
    elif engine == "kiln":
        import kiln as kl
        import kiln_model_defs

        with kiln_model_defs.build(name):
            kl.sample(tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False)
    else:
        import pymc as pm

        import pymc_models

        with getattr(pymc_models, f"model_{name.lower()}")():
            pm.sample(
                tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
                nuts_sampler=engine,
            )  # fmt: skip
    return {"engine": engine}


def whole_process(name: str, timeout: float = 900.0) -> dict:
    """Return the whole-process wall seconds of kiln, PyMC and PyMC+nutpie, and ratios."""
    import stage2

    out: dict = {}
    for engine in ("kiln", "pymc", "nutpie"):
        if engine == "nutpie" and not _installed("nutpie"):
            continue
        args = ["--whole", engine, "--child", name]
        cold: list[dict] = []
        warm: list[dict] = []
        for run in range(WHOLE_COLD_RUNS):
            with tempfile.TemporaryDirectory(prefix="kiln-whole-") as cache_dir:
                cold.append(stage2.run_child(args, cache_dir, timeout, Path(__file__)))
                if run == WHOLE_COLD_RUNS - 1:
                    warm = [
                        stage2.run_child(args, cache_dir, timeout, Path(__file__))
                        for _ in range(WHOLE_WARM_RUNS)
                    ]
        errors = [r["error"] for r in [*cold, *warm] if "error" in r]
        if errors:
            out[engine] = {"error": errors[0]}
            continue
        cold_runs = [r["process_wall_s"] for r in cold]
        runs = [r["process_wall_s"] for r in warm]
        out[engine] = {
            "cold_s": statistics.median(cold_runs),
            "cold_runs_s": cold_runs,
            "warm_s": statistics.median(runs),
            "warm_runs_s": runs,
        }
    for floor in ("imports", "numba"):
        with tempfile.TemporaryDirectory(prefix="kiln-whole-") as cache_dir:
            runs = [
                stage2.run_child(
                    ["--whole", floor, "--child", name], cache_dir, timeout, Path(__file__)
                )
                for _ in range(WHOLE_WARM_RUNS)
            ]
        if not any("error" in r for r in runs):
            out[f"{floor}_floor_s"] = statistics.median(r["process_wall_s"] for r in runs)
    theirs = [out[e] for e in ("pymc", "nutpie") if "cold_s" in out.get(e, {})]
    if "cold_s" in out.get("kiln", {}) and theirs:
        for phase, floor in (("cold", "numba"), ("warm", "imports")):
            best = min(t[f"{phase}_s"] for t in theirs)
            out[f"ratio_{phase}_over_pymc_best"] = out["kiln"][f"{phase}_s"] / best
            if f"{floor}_floor_s" in out:
                out[f"ratio_{floor}_floor_over_pymc_best_{phase}"] = out[f"{floor}_floor_s"] / best
    return out


#: Engine name in kiln -> its name in PyMC.
ENGINES = {"kiln": "pymc", "nutpie": "nutpie", "numpyro": "numpyro", "blackjax": "blackjax"}


def _installed(engine: str) -> bool:
    return engine == "kiln" or importlib.util.find_spec(engine) is not None


def compare(name: str, timeout: float = 900.0, engines: list[str] | None = None) -> dict:
    """Return kiln's and PyMC's cold and warm runs of model ``name`` per engine, and ratios."""
    import sampling
    import stage2

    out: dict = {}
    ratios: dict = {}
    for engine in [e for e in engines or list(ENGINES) if _installed(e)]:
        theirs = ENGINES[engine]
        args = ["--child", name, "--sampler", theirs]
        cold, warm = stage2.cold_and_warm(args, args, timeout, Path(__file__))
        out[engine] = {
            "kiln": sampling.time_model(name, timeout, sampler=engine),
            "pymc": {"cold": cold, "warm": warm},
        }
        for phase in ("cold", "warm"):
            ours, other = out[engine]["kiln"][phase], out[engine]["pymc"][phase]
            if "wall_s" in ours and "wall_s" in other:
                ratios[f"{engine}_{phase}_wall"] = ours["wall_s"] / other["wall_s"]
                ratios[f"{engine}_{phase}_ess_per_s"] = ours["ess_per_s"] / other["ess_per_s"]
    kiln = out.get("kiln", {}).get("kiln", {})
    for phase in ("cold", "warm"):
        others = [r["pymc"][phase] for r in out.values() if "wall_s" in r["pymc"][phase]]
        if "wall_s" not in kiln.get(phase, {}) or not others:
            continue
        ratios[f"kiln_{phase}_wall_over_pymc_best"] = kiln[phase]["wall_s"] / min(
            o["wall_s"] for o in others
        )
        ratios[f"kiln_{phase}_ess_per_s_over_pymc_best"] = kiln[phase]["ess_per_s"] / max(
            o["ess_per_s"] for o in others
        )
    out["ratios"] = ratios
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sampler", default="pymc", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=["M1", "M2", "M3"])
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--output", type=Path)
    parser.add_argument("--whole", help=argparse.SUPPRESS)
    parser.add_argument(
        "--whole-only", action="store_true", help="only the whole-process wall times"
    )
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        if args.whole:
            print(json.dumps(_child_whole(args.whole, args.child)))
        else:
            print(json.dumps(_child_pymc(args.child, args.sampler)))
        return
    sys.path.insert(0, str(HERE))
    results: dict = {}
    for name in args.models:
        results[name] = {} if args.whole_only else compare(name, engines=args.engines)
        if name in ("M1", "M2") or args.whole_only:  # M1, M2: the targets
            results[name]["whole_process"] = whole_process(name)
    text = json.dumps(results, indent=2)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    for name, res in results.items():
        print(name, {k: round(v, 3) for k, v in res.get("ratios", {}).items()})
        whole = res.get("whole_process", {})
        print(name, "whole process", {k: round(v, 3) for k, v in whole.items() if "ratio" in k})


if __name__ == "__main__":
    main()
