"""kl.sample end to end on M1-M3 (issue #7): wall time, ESS, ESS per second.

For each model (``kiln_model_defs.py``), two new processes on one cache folder that
starts empty (``stage2.run_child``), ``cold`` then ``warm``; each runs
``kl.sample(tune=1000, draws=1000, chains=2, cores=2)`` with the defaults (Numba
backend, kiln's NUTS) and reports ``wall_s`` (model construction to the returned
data; imports excluded, but the Numba backend's import, which a process pays at its first
compile, included and also reported as ``backend_import_s``), ``to_first_draw_s``
(``compile_time``: the model's compile and its native log-density), ``sampling_s``,
``min_ess_bulk``, ``ess_per_s`` (min bulk ESS over ``wall_s``) and ``divergences``.

PyMC 6.4 on this kind of machine (issue #7), wall seconds (to first draw + sampling):
M1 pymc 6.4 (2.1 + 2.6), nutpie 7.7 (7.6 + 0.1); M2 pymc 12.1 (3.8 + 6.1), nutpie 11.1
(10.8 + 0.26); M3 pymc 25.0 (3.5 + 18.8), nutpie 21.7 (10.1 + 12.4). Targets: kiln's
wall time at most 0.3x the best PyMC option cold, 0.1x warm; ESS/s at least 3x.
Run alone: ``python benchmarks/sampling.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The best PyMC option's wall seconds quoted by issue #7 (nutpie on M2 and M3, pymc on M1).
PYMC_BEST_WALL = {"M1": 6.4, "M2": 11.1, "M3": 21.7}


def _child(name: str, sampler: str = "kiln") -> dict:
    import arviz_stats

    import kiln as kl
    import kiln_model_defs
    import stage2

    backend_import = stage2.import_backend() if sampler in ("kiln", "nutpie") else 0.0
    t0 = time.perf_counter()
    model = kiln_model_defs.build(name)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = kl.sample(
            tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
            nuts_sampler=sampler,
        )  # fmt: skip
    wall = time.perf_counter() - t0 + backend_import
    ess = arviz_stats.ess(idata["posterior"])
    min_ess = min(float(v.values.min()) for v in ess.data_vars.values())
    return {
        "wall_s": wall,
        "backend_import_s": backend_import,
        "to_first_draw_s": idata.attrs["compile_time"],
        "sampling_s": idata.attrs["sampling_time"],
        "min_ess_bulk": min_ess,
        "ess_per_s": min_ess / wall,
        "divergences": int(idata["sample_stats"]["diverging"].sum()),
    }


def time_model(name: str, timeout: float = 900.0, sampler: str = "kiln") -> dict:
    """Return the cold and warm runs of ``name`` and the ratios to PyMC's best option.

    ``sampler`` is ``kl.sample``'s ``nuts_sampler`` (the ratios only for kiln's own).
    """
    import stage2

    args = ["--child", name, "--sampler", sampler]
    cold, warm = stage2.cold_and_warm(args, args, timeout, Path(__file__))
    out: dict = {"cold": cold, "warm": warm}
    if sampler == "kiln" and "error" not in cold and "error" not in warm:
        best = PYMC_BEST_WALL[name]
        out["ratio_cold_wall_over_pymc_best"] = cold["wall_s"] / best
        out["ratio_warm_wall_over_pymc_best"] = warm["wall_s"] / best
    return out


def run_sampling(models: tuple[str, ...] = ("M1", "M2", "M3")) -> dict:
    """Return :func:`time_model` of each model."""
    return {name: time_model(name) for name in models}


def format_table(results: dict) -> str:
    """Return one line per model."""
    lines = ["kl.sample (tune=1000, draws=1000, chains=2): wall s; kiln / PyMC's best (quoted)"]
    for name, res in results.items():
        if "ratio_cold_wall_over_pymc_best" not in res:
            lines.append(f"  {name}: {res}")
            continue
        c, w = res["cold"], res["warm"]
        lines.append(
            f"  {name}: cold {c['wall_s']:.2f} ({c['to_first_draw_s']:.2f} + "
            f"{c['sampling_s']:.2f}) {res['ratio_cold_wall_over_pymc_best']:.2f}x; warm "
            f"{w['wall_s']:.2f} ({w['to_first_draw_s']:.2f} + {w['sampling_s']:.2f}) "
            f"{res['ratio_warm_wall_over_pymc_best']:.2f}x; min ESS {w['min_ess_bulk']:.0f}, "
            f"ESS/s {w['ess_per_s']:.0f}, divergences {w['divergences']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sampler", default="kiln", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", default=["M1", "M2", "M3"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        print(json.dumps(_child(args.child, args.sampler)))
        return
    results = run_sampling(tuple(args.models))
    print(json.dumps(results, indent=2) if args.json else format_table(results))


if __name__ == "__main__":
    main()
