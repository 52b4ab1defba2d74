"""kiln.sample next to PyMC's samplers on M1-M3, in one run (issue #7's comparison).

Each sampler runs ``tune=1000, draws=1000, chains=2, cores=2`` in new processes on one
cache folder that starts empty, ``cold`` then ``warm`` (``stage2.run_child``):
kiln's side is ``sampling.py``'s child; PyMC's is ``pm.sample`` with
``nuts_sampler="pymc"`` (and ``"nutpie"`` when nutpie is importable) on the same
models and data (``pymc_models.py``). Each reports wall seconds (model construction to
the returned data, imports excluded), min bulk ESS and ESS per second; ``ratios``
compare kiln with PyMC's best option of this run. Run by ``nox -s peer_sampling``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child_pymc(name: str, sampler: str) -> dict:
    import arviz_stats
    import pymc as pm

    import pymc_models

    t0 = time.perf_counter()
    model = {"M1": pymc_models.model_m1, "M2": pymc_models.model_m2, "M3": pymc_models.model_m3}[
        name
    ]()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
            nuts_sampler=sampler, compute_convergence_checks=False,
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


def compare(name: str, timeout: float = 900.0) -> dict:
    """Return kiln's and PyMC's cold and warm runs of model ``name``, and the ratios."""
    import sampling
    import stage2

    out: dict = {"kiln": sampling.time_model(name, timeout)}
    samplers = ["pymc"] + (["nutpie"] if importlib.util.find_spec("nutpie") else [])
    for sampler in samplers:
        args = ["--child", name, "--sampler", sampler]
        cold, warm = stage2.cold_and_warm(args, args, timeout, Path(__file__))
        out[sampler] = {"cold": cold, "warm": warm}
    ratios: dict = {}
    kiln = out["kiln"]
    for phase in ("cold", "warm"):
        others = [out[s][phase] for s in samplers if "wall_s" in out[s][phase]]
        if "wall_s" not in kiln[phase] or not others:
            continue
        ratios[f"{phase}_wall_over_best"] = kiln[phase]["wall_s"] / min(o["wall_s"] for o in others)
        ratios[f"{phase}_ess_per_s_over_best"] = kiln[phase]["ess_per_s"] / max(
            o["ess_per_s"] for o in others
        )
    out["ratios"] = ratios
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sampler", default="pymc", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=["M1", "M2", "M3"])
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(_child_pymc(args.child, args.sampler)))
        return
    sys.path.insert(0, str(HERE))
    results = {name: compare(name) for name in args.models}
    text = json.dumps(results, indent=2)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    for name, res in results.items():
        print(name, {k: round(v, 3) for k, v in res["ratios"].items()})


if __name__ == "__main__":
    main()
