"""Gaussian processes (issue #27): kl.gp next to PyMC's pm.gp, compile and sampling wall.

Models (one input dimension, ``y = sin(x) + 0.5 cos(2.5 x)`` plus noise, Matern52 with
``ls``, ``eta`` and ``sigma`` free): a ``Marginal`` GP at n = 100, 500 and 2,000 and an
``HSGP`` (m = 40, c = 1.3, a Normal likelihood) at n = 2,000 and 20,000. Each runs in a
new process on a cache folder that starts empty, twice (cold, then warm), with
``chains=2``: kiln (``kl.sample``, default Numba backend and kiln's NUTS) and, where it
is installed, PyMC (``pm.sample``, its default sampler). Reported: wall seconds of the
call, the sampler's own sampling seconds, and their difference (compile and setup).
The Marginal GP at n = 2,000 costs a 2,000 x 2,000 Cholesky factor per gradient, so it
runs a few draws only (``DRAWS``). Run alone: ``python benchmarks/gp.py``; ``nox -s
peer_sampling`` runs it with PyMC installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: (kind, n) -> (tune, draws) per chain.
DRAWS = {
    ("marginal", 100): (300, 300),
    ("marginal", 500): (100, 100),
    ("marginal", 2000): (10, 10),
    ("hsgp", 2000): (300, 300),
    ("hsgp", 20000): (200, 200),
}
TIMEOUT_S = 1800.0


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    x = np.sort(rng.uniform(0, 10, n))[:, None]
    return x, np.sin(x[:, 0]) + 0.5 * np.cos(2.5 * x[:, 0]) + 0.3 * rng.normal(size=n)


def _child_kiln(kind: str, n: int) -> dict:
    import kiln as kl

    x, y = _data(n)
    tune, draws = DRAWS[(kind, n)]
    start = time.perf_counter()
    with kl.Model():
        ls = kl.Gamma("ls", 3.0, 2.0)
        eta = kl.HalfNormal("eta", 2.0)
        sigma = kl.HalfNormal("sigma", 1.0)
        k = eta**2 * kl.gp.cov.Matern52(1, ls=ls)
        if kind == "marginal":
            kl.gp.Marginal(cov_func=k).marginal_likelihood("y", X=x, y=y, sigma=sigma)
        else:
            f = kl.gp.HSGP(m=[40], c=1.3, cov_func=k).prior("f", X=x)
            kl.Normal("y", f, sigma, observed=y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = kl.sample(tune=tune, draws=draws, chains=2, random_seed=1, progressbar=False)
    wall = time.perf_counter() - start
    sampling = float(idata.attrs["sampling_time"])
    return {"wall_s": wall, "sampling_s": sampling, "setup_s": wall - sampling}


def _child_pymc(kind: str, n: int) -> dict:
    import pymc as pm

    x, y = _data(n)
    tune, draws = DRAWS[(kind, n)]
    start = time.perf_counter()
    with pm.Model():
        ls = pm.Gamma("ls", 3.0, 2.0)
        eta = pm.HalfNormal("eta", 2.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        k = eta**2 * pm.gp.cov.Matern52(1, ls=ls)
        if kind == "marginal":
            pm.gp.Marginal(cov_func=k).marginal_likelihood("y", X=x, y=y, sigma=sigma)
        else:
            f = pm.gp.HSGP(m=[40], c=1.3, cov_func=k).prior("f", X=x)
            pm.Normal("y", f, sigma, observed=y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(
                tune=tune, draws=draws, chains=2, cores=2, random_seed=1, progressbar=False
            )
    wall = time.perf_counter() - start
    sampling = float(idata.posterior.attrs["sampling_time"])
    return {"wall_s": wall, "sampling_s": sampling, "setup_s": wall - sampling}


def run_gp(configs: list[tuple[str, int]] | None = None) -> dict:
    """Return kiln's (and PyMC's, if installed) cold and warm runs of every config."""
    import stage2

    tools = ["kiln"] + (["pymc"] if importlib.util.find_spec("pymc") else [])
    out: dict = {}
    for kind, n in configs or list(DRAWS):
        key = f"{kind}-{n}"
        out[key] = {"tune_draws": DRAWS[(kind, n)]}
        for tool in tools:
            args = ["--child", tool, kind, str(n)]
            cold, warm = stage2.cold_and_warm(args, args, TIMEOUT_S, Path(__file__))
            out[key][tool] = {"cold": cold, "warm": warm}
        if "pymc" in out[key] and all("wall_s" in out[key][t]["warm"] for t in tools):
            for when in ("cold", "warm"):
                out[key][f"ratio_{when}_wall_kiln_over_pymc"] = (
                    out[key]["kiln"][when]["wall_s"] / out[key]["pymc"][when]["wall_s"]
                )
    return out


def format_table(results: dict) -> str:
    """Return one line per config and tool."""
    lines = ["GP models (chains=2; seconds: wall, of which sampling; cold then warm)"]
    for key, res in results.items():
        for tool in ("kiln", "pymc"):
            if tool not in res:
                continue
            cells = []
            for when in ("cold", "warm"):
                r = res[tool][when]
                cells.append(
                    f"{when} {r['wall_s']:.2f} ({r['sampling_s']:.2f})"
                    if "wall_s" in r
                    else f"{when} {r.get('error')}"
                )
            lines.append(
                f"  {key:14s} {tool:5s} tune/draws {res['tune_draws']}: " + ", ".join(cells)
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path)
    parser.add_argument(
        "--configs", nargs="+", help="kind-n pairs to run (default: all), e.g. hsgp-2000"
    )
    args = parser.parse_args()
    if args.child:
        tool, kind, n = args.child
        sys.path.insert(0, str(HERE))
        fn = _child_kiln if tool == "kiln" else _child_pymc
        print(json.dumps(fn(kind, int(n))))
        return
    configs = None
    if args.configs:
        configs = [(c.split("-")[0], int(c.split("-")[1])) for c in args.configs]
    results = run_gp(configs)
    if args.output:
        args.output.write_text(json.dumps(results, indent=2))
    print(format_table(results))


if __name__ == "__main__":
    main()
