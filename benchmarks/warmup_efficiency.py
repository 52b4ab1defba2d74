"""ESS per gradient of kiln's NUTS under each warm-up schedule, over several seeds.

For every posteriordb reference and M1-M3 (as ``sampling_efficiency.py`` builds them)
and each warm-up of :data:`WARMUPS` (``"default"``: kiln's default, ``metric="auto"``;
``"stan"`` and ``"grad"``, ``NutsSettings.adaptation`` of the diagonal metric;
``"dense"``, ``metric="dense"``: what ``init="adapt_full"`` runs; ``"nutpie"``:
nutpie's own sampler, ``kl.sample(nuts_sampler="nutpie")``), one process per model and
schedule runs ``kl.sample`` with ``sampling_efficiency.SETTINGS`` once per seed and
prints one JSON line per run (``sampling_efficiency._summary``'s fields plus model,
adaptation, seed and the mass matrix kiln's NUTS adapted). ESS per gradient does not
depend on the machine's load, so a busy machine measures it as well as a quiet one;
its run-to-run spread is large (often +-20%), hence the seeds. ``--output`` writes the
runs, their means per model and schedule, and nutpie's ESS per gradient from
``--nutpie`` (an efficiency JSON of ``sampling_efficiency.py``) where nutpie's warm-up
did not run.

Run: ``python benchmarks/warmup_efficiency.py [--models ...] [--warmups default stan
grad dense nutpie] [--seeds 1 2 3 4 5] [--nutpie FILE] [--output FILE]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The warm-ups compared: kiln's NUTS options (``nuts_sampler_kwargs``) of each, and
#: nutpie's own (``nuts_sampler="nutpie"``, its defaults) as the reference.
WARMUPS: dict[str, dict] = {
    "default": {},
    "stan": {"adaptation": "stan", "metric": "diag"},
    "grad": {"adaptation": "grad"},
    "dense": {"metric": "dense"},
    "nutpie": {},
}


def _child(model: str, adaptation: str, seeds: list[int]) -> None:
    sys.path.insert(0, str(HERE))
    import kiln as kl
    import sampling_efficiency as se

    for seed in seeds:
        built = se._build(model, False)
        with built, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            idata = kl.sample(
                progressbar=False, nuts_sampler_kwargs=WARMUPS[adaptation],
                nuts_sampler="nutpie" if adaptation == "nutpie" else "kiln",
                **{**se.SETTINGS, "random_seed": seed},
            )  # fmt: skip
            run = se._summary(idata, time.perf_counter() - start, se.SETTINGS["tune"])
        metric = idata.attrs.get("nuts_metric")
        print(
            json.dumps(
                {"model": model, "adaptation": adaptation, "seed": seed, "metric": metric, **run}
            )
        )


def _means(runs: list[dict], nutpie: dict) -> dict:
    out: dict = {}
    for run in runs:
        row = out.setdefault(run["model"], {})
        cell = row.setdefault(run["adaptation"], {"ess_per_gradient": [], "divergences": []})
        cell["ess_per_gradient"].append(run["ess_per_gradient"])
        cell["divergences"].append(run["divergences"])
    for model, row in out.items():
        for cell in row.values():
            cell["mean_ess_per_gradient"] = sum(cell["ess_per_gradient"]) / len(
                cell["ess_per_gradient"]
            )
        reference = nutpie.get(model, {}).get("nutpie", {})
        if "ess_per_gradient" in reference and "nutpie" not in row:  # one run of nutpie's
            row["nutpie"] = {k: reference[k] for k in ("ess_per_gradient", "divergences")}
    return out


def main() -> None:
    sys.path.insert(0, str(HERE))
    import sampling_efficiency as se

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=[*se._references(), *se.BENCH_MODELS])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--warmups", nargs="+", choices=list(WARMUPS), default=list(WARMUPS))
    parser.add_argument("--nutpie", type=Path)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.child:
        _child(*args.child, args.seeds)
        return
    runs = []
    for model in args.models:
        for adaptation in args.warmups:
            command = [sys.executable, __file__, "--child", model, adaptation, "--seeds"]
            proc = subprocess.run(
                [*command, *map(str, args.seeds)], capture_output=True, text=True, check=False
            )
            for line in proc.stdout.splitlines():
                if line.startswith("{"):
                    runs.append(json.loads(line))
                    print(line, flush=True)
            if proc.returncode:
                print(f"{model} / {adaptation}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
    if args.output:
        nutpie = json.loads(args.nutpie.read_text()) if args.nutpie else {}
        result = {"settings": se.SETTINGS, "seeds": args.seeds, "runs": runs}
        result["means"] = _means(runs, nutpie)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
