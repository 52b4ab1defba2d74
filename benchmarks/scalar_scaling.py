"""Compile time of models written with many scalar random variables (issue #21, item 3).

Users write models as scalars in a loop::

    with kl.Model():
        xs = [kl.Normal(f"x{i}", 0, 1) for i in range(n)]
        kl.Normal("y", sum(x * c for x, c in zip(xs, cs)), 1, observed=data)

For each variant (``normal``: that model; ``halfnormal``: ``x_i ~ Normal(0, s_i)``
with ``s_i ~ HalfNormal``, ``n`` variables in all; ``regression``: a linear regression
on 50 rows written with ``n`` scalar coefficients; ``hierarchical``: ``x_i ~ Normal(mu,
tau)`` and one observed scalar ``y_i ~ Normal(x_i, 1)`` each, ``n`` free variables in
all) and each ``n``, one new process on
a cache folder that starts empty (``stage2.run_child``: the cold cache) first compiles,
calls and samples the same variant at ``n = 3`` (``fixed_s``: kiln's own kernels,
compiled once per cache; ``--no-warmup`` leaves them in the timed phases), then times:

- ``build_s``: the ``with kl.Model()`` block;
- ``graph_s``: ``logp_dlogp_function()`` outside ``function()`` (initial point, the
  log-density graph, the value-variable replacement, the gradient);
- ``prepare_s``, ``rewrite_s`` (Stage 1), ``link_s`` (Stage 2: code generation): the
  compiled function's profile (``compile_times``);
- ``first_call_s``: the first call, where Numba types and LLVM compiles the code;
- ``sample_s``: ``kl.sample(draws=100, tune=100, chains=1)`` after all that (the
  compiled model is reused within the process, so it is mostly sampling);
- ``runtime_warnings``: RuntimeWarnings raised during all of it; ``nodes`` (prepared
  and rewritten node counts).

``growth`` gives, per variant and phase, the ratio of seconds between consecutive sizes
over the ratio of the sizes: about 1 for linear growth, 2 for quadratic. A size that
times out stops the larger ones of its variant. Run alone:
``python benchmarks/scalar_scaling.py [--sizes 50 100 200] [--variants normal]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VARIANTS = ("normal", "halfnormal", "regression", "hierarchical")
SIZES = (50, 100, 200, 400, 800, 1600, 2000)
#: run.py's smaller set, cheap enough for ``nox -s bench``.
QUICK_SIZES = (100, 200, 400, 800, 2000)
PHASES = ("build_s", "graph_s", "rewrite_s", "link_s", "first_call_s", "sample_s")
ROWS = 50


def build(variant: str, n: int) -> object:
    """Return a new ``kl.Model`` of ``variant`` with about ``n`` scalar free variables."""
    import kiln as kl

    rng = np.random.default_rng(0)
    with kl.Model() as model:
        if variant == "normal":
            cs = rng.normal(size=n)
            xs = [kl.Normal(f"x{i}", 0.0, 1.0) for i in range(n)]
            kl.Normal("y", sum(x * c for x, c in zip(xs, cs, strict=True)), 1.0, observed=1.5)
        elif variant == "halfnormal":
            half = n // 2
            cs = rng.normal(size=half)
            scales = [kl.HalfNormal(f"s{i}", 1.0) for i in range(half)]
            xs = [kl.Normal(f"x{i}", 0.0, s) for i, s in enumerate(scales)]
            kl.Normal("y", sum(x * c for x, c in zip(xs, cs, strict=True)), 1.0, observed=0.5)
        elif variant == "regression":
            X = rng.normal(size=(ROWS, n - 1))
            y = X @ rng.normal(size=n - 1) * 0.1 + rng.normal(size=ROWS)
            coefs = [kl.Normal(f"b{i}", 0.0, 1.0) for i in range(n - 2)]
            intercept = kl.Normal("a", 0.0, 5.0)
            mu = intercept + sum(b * X[:, i] for i, b in enumerate(coefs))
            sigma = kl.HalfNormal("sigma", 1.0)
            kl.Normal("y", mu, sigma, observed=y)
        elif variant == "hierarchical":
            mu = kl.Normal("mu", 0.0, 5.0)
            tau = kl.HalfNormal("tau", 1.0)
            data = rng.normal(1.0, 2.0, size=n - 2)
            for i in range(n - 2):
                x = kl.Normal(f"x{i}", mu, tau)
                kl.Normal(f"y{i}", x, 1.0, observed=data[i])
        else:
            raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    return model


def _child(variant: str, n: int, sample: bool, warmup: bool) -> dict:
    import kiln as kl
    import stage2
    from kiln_compile import config

    backend_import = stage2.import_backend()
    config.profile = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        if warmup:  # the same variant at n = 3: kiln's own kernels, compiled once
            small = build(variant, 3)
            tiny = small.logp_dlogp_function()  # type: ignore[attr-defined]
            tiny.logp_dlogp(tiny.initial_point(seed=0))
            if sample:
                with small:  # type: ignore[attr-defined]
                    kl.sample(draws=10, tune=10, chains=1, random_seed=1, progressbar=False)
        t0, fixed = time.perf_counter(), time.perf_counter() - t0
        model = build(variant, n)
        t1 = time.perf_counter()
        compiled = model.logp_dlogp_function()  # type: ignore[attr-defined]
        t2 = time.perf_counter()
        x = compiled.initial_point(seed=0)
        compiled.logp_dlogp(x)
        t3 = time.perf_counter()
        prof = compiled.function.profile
        times = dict(prof.compile_times)
        out = {
            "n": n,
            "ndim": compiled.ndim,
            "build_s": t1 - t0,
            "graph_s": t2 - t1 - sum(times.values()),
            "prepare_s": times.get("prepare", 0.0),
            "rewrite_s": times.get("rewrite", 0.0),
            "link_s": times.get("link", 0.0),
            "first_call_s": t3 - t2,
            "backend_import_s": backend_import,
            "fixed_s": fixed,
            "nodes": dict(prof.nodes),
            "rewrite_phases_s": dict(prof.rewrites.phase_times),
        }
        if sample:
            t4 = time.perf_counter()
            with model:  # type: ignore[attr-defined]
                kl.sample(draws=100, tune=100, chains=1, random_seed=1, progressbar=False)
            out["sample_s"] = time.perf_counter() - t4
        out["total_s"] = time.perf_counter() - t0
    out["runtime_warnings"] = sum(issubclass(w.category, RuntimeWarning) for w in caught)
    return out


def time_size(
    variant: str, n: int, sample: bool = True, warmup: bool = True, timeout: float = 600.0
) -> dict:
    """Return :func:`_child` of ``variant`` at size ``n``, in a new process, cold cache."""
    import stage2

    args = ["--child", variant, str(n)] + ([] if sample else ["--no-sample"])
    args += [] if warmup else ["--no-warmup"]
    with tempfile.TemporaryDirectory(prefix="kiln-scalars-") as cache_dir:
        return stage2.run_child(args, cache_dir, timeout, Path(__file__))


def _growth(rows: list[dict]) -> dict:
    """Per phase: log(seconds ratio) / log(size ratio) between consecutive sizes."""
    out: dict[str, list[float | None]] = {}
    ok = [r for r in rows if "error" not in r]
    for phase in (*PHASES, "total_s"):
        slopes: list[float | None] = []
        for a, b in zip(ok, ok[1:], strict=False):
            if phase in a and phase in b and a[phase] > 0.02 and b[phase] > 0:
                slopes.append(float(np.log(b[phase] / a[phase]) / np.log(b["n"] / a["n"])))
            else:
                slopes.append(None)
        out[phase] = slopes
    return out


def run_scalar_scaling(
    variants: tuple[str, ...] = VARIANTS,
    sizes: tuple[int, ...] = QUICK_SIZES,
    sample: bool = True,
    warmup: bool = True,
    timeout: float = 600.0,
) -> dict:
    """Return the timings of each variant at each size, and their growth exponents."""
    results: dict = {}
    for variant in variants:
        rows = []
        for n in sizes:
            row = time_size(variant, n, sample, warmup, timeout)
            row.setdefault("n", n)
            rows.append(row)
            if "error" in row:
                break
        results[variant] = {"sizes": rows, "growth": _growth(rows)}
    return results


def format_table(results: dict) -> str:
    """Return one line per variant and size: seconds per phase."""
    head = "  " + f"{'n':>6}" + "".join(f"{p[:-2]:>12}" for p in (*PHASES, "total_s"))
    lines = ["scalar models: seconds per phase (cold cache, new process)"]
    for variant, res in results.items():
        lines.append(f" {variant}")
        lines.append(head + f"{'warnings':>10}")
        for row in res["sizes"]:
            if "error" in row:
                lines.append(f"  {row['n']:>6}  {row['error']}")
                continue
            cells = "".join(
                f"{row[p]:12.2f}" if p in row else f"{'-':>12}" for p in (*PHASES, "total_s")
            )
            lines.append(f"  {row['n']:>6}{cells}{row['runtime_warnings']:>10}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--no-sample", action="store_true", help="skip the short kl.sample")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument(
        "--no-warmup", action="store_true", help="time kiln's own kernels' compile too"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(HERE))
        flags = (not args.no_sample, not args.no_warmup)
        print(json.dumps(_child(*args.child[:1], int(args.child[1]), *flags)))
        return
    results = run_scalar_scaling(
        tuple(args.variants),
        tuple(args.sizes),
        not args.no_sample,
        not args.no_warmup,
        args.timeout,
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(format_table(results))


if __name__ == "__main__":
    main()
