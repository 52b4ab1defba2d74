"""Sampling efficiency against nutpie (issue #26, part 2): ESS per gradient and ESS/s.

For every posteriordb reference (``integration/posteriordb``) and M1-M3, three
engines: kiln's NUTS (``kl.sample``), nutpie through kiln
(``kl.sample(nuts_sampler="nutpie")``) and nutpie through PyMC
(``pm.sample(nuts_sampler="nutpie")``, where PyMC is installed: ``nox -s
peer_sampling``'s environment). Each engine runs in a new process per model, on
the same data and ``tune=1000, draws=1000, chains=2, cores=2, random_seed=1``, twice:
the first run fills the caches, the second is timed (``warm``).

Per run: ``min_ess_bulk`` (the smallest bulk ESS over every element of the
posterior's variables, ArviZ's), ``gradients`` (the leapfrog steps of the kept
draws: the sum of ``n_steps``, so every engine is counted the same way; tuning is
not counted), ``ess_per_gradient`` (their quotient), ``wall_s`` (the ``sample``
call, the model built: compiling on warm caches, tuning, drawing, the results),
``ess_per_s``, ``divergences`` and ``tuning_draws``. ``ratios``: kiln's NUTS over
nutpie through kiln in ESS per gradient (the issue's target: at least 1 on every
reference) and kiln's NUTS over nutpie through PyMC in ESS/s (target: at least 2).

PyMC's posteriordb models are kiln's file run with PyMC: ``integration/posteriordb/
models.py`` is executed with ``kl`` bound to PyMC (plus ``transforms``) and ``kt`` to
``pytensor.tensor`` (plus ``cholesky``): kiln's model layer takes PyMC's names, so the
same source builds both. M1-M3 are ``pymc_models.py``'s, as in ``peer_sampling.py``.

``--adaptation stan|grad`` picks the warm-up of kiln's NUTS (``NutsSettings.adaptation``,
given as ``nuts_sampler_kwargs``; default: kiln's default) and ``--init`` kiln's
``kl.sample(init=...)`` (``jitter+adapt_full``: its dense mass matrix; nutpie's engines
keep their default); ``--engines`` runs some of the engines only (``--engines kiln`` to
compare kiln's warm-ups). ``--seeds N`` times N runs per engine and model (``random_seed``
1..N, after the run that fills the caches) and reports their medians: one seed's min
bulk ESS moves by 10-30% between seeds, as much as the engines differ.

Run: ``python benchmarks/sampling_efficiency.py [--models ...] [--engines ...]
[--adaptation ...] [--seeds N] [--output FILE]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
POSTERIORDB = ROOT / "integration" / "posteriordb"
BENCH_MODELS = ("M1", "M2", "M3")
ENGINES = ("kiln", "nutpie", "pymc_nutpie")
SETTINGS = {"tune": 1000, "draws": 1000, "chains": 2, "cores": 2, "random_seed": 1}


def _references() -> list[str]:
    return sorted(p.stem for p in (POSTERIORDB / "data").glob("*.json"))


def _pymc_namespaces() -> tuple[Any, Any]:
    """Return PyMC and PyTensor under the names the model files use (``kl``, ``kt``)."""
    import pymc as pm
    import pytensor.tensor as pt

    kl = types.SimpleNamespace(**{k: getattr(pm, k) for k in dir(pm) if not k.startswith("_")})
    kl.transforms = pm.distributions.transforms
    kt = types.SimpleNamespace(**{k: getattr(pt, k) for k in dir(pt) if not k.startswith("_")})
    kt.cholesky = pt.linalg.cholesky
    return kl, kt


def _load(path: Path, name: str, pymc: bool) -> Any:
    """Import the model file ``path``; with ``pymc``, its ``kl``/``kt`` are PyMC's."""
    source = path.read_text()
    if pymc:
        kl, kt = _pymc_namespaces()
        source = source.replace("import kiln as kl\n", "").replace("import kiln.tensor as kt\n", "")
        module = types.ModuleType(name)
        module.__dict__.update(kl=kl, kt=kt, __file__=str(path))
        sys.modules[name] = module
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _build(model: str, pymc: bool) -> Any:
    sys.path.insert(0, str(HERE))
    if model in BENCH_MODELS:
        if pymc:
            import pymc_models

            return getattr(pymc_models, f"model_{model.lower()}")()
        import kiln_model_defs

        return kiln_model_defs.build(model)
    return _load(POSTERIORDB / "models.py", "efficiency_models", pymc).build(model)


def _summary(idata: Any, wall: float, tune: int) -> dict:
    from arviz_stats import ess

    posterior, stats = idata["posterior"], idata["sample_stats"]
    result = ess(posterior)
    min_ess = min(float(v.values.min()) for v in result.data_vars.values())
    steps = "n_steps" if "n_steps" in stats else "tree_size"
    gradients = int(stats[steps].values.sum())
    return {
        "wall_s": wall,
        "min_ess_bulk": min_ess,
        "gradients": gradients,
        "ess_per_gradient": min_ess / gradients,
        "ess_per_s": min_ess / wall,
        "divergences": int(stats["diverging"].values.sum()),
        "tuning_draws": tune,
    }


def _median_summary(runs: list[dict]) -> dict:
    """Return the median of each number over ``runs`` (one per seed), and the runs."""
    import statistics

    if len(runs) == 1:
        return runs[0]
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float)]
    median = {k: statistics.median(r[k] for r in runs) for k in keys}
    return {**median, "seeds": len(runs), "runs": runs}


def _child(
    model: str,
    engine: str,
    adaptation: str | None = None,
    init: str | None = None,
    seeds: int = 1,
) -> dict:
    """Return ``engine``'s runs on ``model`` per seed and their medians.

    Runs in this process: once to fill the caches, then once per seed (``random_seed``
    1, 2, ...).
    """
    pymc = engine == "pymc_nutpie"
    runs = []
    for k in range(seeds + 1):
        settings = {**SETTINGS, "random_seed": max(k, 1)}
        built = _build(model, pymc)
        with built, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            if pymc:
                import pymc as pm

                idata = pm.sample(
                    nuts_sampler="nutpie", progressbar=False, compute_convergence_checks=False,
                    **settings,
                )  # fmt: skip
            else:
                import kiln as kl

                ours = engine == "kiln"
                options = {"adaptation": adaptation} if adaptation and ours else {}
                chosen = {"init": init} if init and ours else {}
                idata = kl.sample(
                    nuts_sampler=engine, progressbar=False, nuts_sampler_kwargs=options,
                    **chosen, **settings,
                )  # fmt: skip
            runs.append(_summary(idata, time.perf_counter() - start, SETTINGS["tune"]))
    return _median_summary(runs[1:])


def _available(engine: str) -> bool:
    needs = {"kiln": [], "nutpie": ["nutpie"], "pymc_nutpie": ["nutpie", "pymc"]}[engine]
    return all(importlib.util.find_spec(p) is not None for p in needs)


def run_efficiency(
    models: list[str],
    timeout: float = 1200.0,
    engines: tuple[str, ...] = ENGINES,
    adaptation: str | None = None,
    init: str | None = None,
    seeds: int = 1,
) -> dict:
    """Return the engines' warm runs on every model, and kiln's ratios to nutpie's.

    With ``seeds`` > 1 each engine's numbers are medians over that many seeds, and the
    ratios are those of the medians.
    """
    import stage2

    out: dict = {"settings": {**SETTINGS, "adaptation": adaptation, "init": init, "seeds": seeds}}
    for model in models:
        row: dict = {}
        with tempfile.TemporaryDirectory(prefix="kiln-efficiency-") as cache:
            for engine in engines:
                if not _available(engine):
                    row[engine] = {"skipped": "not installed"}
                    continue
                extra = ["--adaptation", adaptation] if adaptation else []
                extra += ["--init", init] if init else []
                extra += ["--seeds", str(seeds)]
                row[engine] = stage2.run_child(
                    ["--child", model, "--engine", engine, *extra], cache, timeout, Path(__file__)
                )
        ours, nutpie, pymc = (row.get(e, {}) for e in ENGINES)
        ratios = {}
        if "ess_per_gradient" in ours and "ess_per_gradient" in nutpie:
            ratios["kiln_over_nutpie_ess_per_gradient"] = (
                ours["ess_per_gradient"] / nutpie["ess_per_gradient"]
            )
        if "ess_per_s" in ours and "ess_per_s" in pymc:
            ratios["kiln_over_pymc_nutpie_ess_per_s"] = ours["ess_per_s"] / pymc["ess_per_s"]
        row["ratios"] = ratios
        out[model] = row
    return out


def format_table(results: dict) -> str:
    """Return one line per model and engine."""
    lines = ["model / engine: min bulk ESS, gradients, ESS per gradient, ESS/s, divergences"]
    for model, row in results.items():
        if model == "settings":
            continue
        for engine in ENGINES:
            if engine not in row:
                continue
            r = row[engine]
            if "ess_per_gradient" not in r:
                lines.append(f"  {model} / {engine}: {r.get('error') or r.get('skipped')}")
                continue
            lines.append(
                f"  {model} / {engine}: {r['min_ess_bulk']:.0f}, {r['gradients']}, "
                f"{r['ess_per_gradient']:.4f}, {r['ess_per_s']:.0f}, {r['divergences']}"
            )
        lines.append(
            f"  {model} ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in row["ratios"].items())
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=[*_references(), *BENCH_MODELS])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--adaptation", choices=("stan", "grad"))
    parser.add_argument("--init", choices=("jitter+adapt_diag", "jitter+adapt_full"))
    parser.add_argument("--seeds", type=int, default=1, help="runs per engine (medians)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds: expected a positive number of runs, got {args.seeds}")
    if args.child:
        print(json.dumps(_child(args.child, args.engine, args.adaptation, args.init, args.seeds)))
        return
    sys.path.insert(0, str(HERE))
    results = run_efficiency(
        args.models,
        engines=tuple(args.engines),
        adaptation=args.adaptation,
        init=args.init,
        seeds=args.seeds,
    )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=2))
    print(format_table(results))


if __name__ == "__main__":
    main()
