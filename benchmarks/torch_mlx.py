"""The PyTorch and MLX backends (issue #24) next to kiln's Numba and JAX backends on M1-M4.

Backends (labels): ``torch`` (eager, ``config.torch_threads`` at its default: one thread
for these models' arrays), ``torch_compile`` (``config.torch_compile``: inductor),
``mlx`` (``mx.compile``), ``numba`` and ``jax``. A backend whose package is not
installed is reported as ``{"skipped": "not installed: ..."}`` and the rest still run
(``nox -s bench`` installs torch; a plain venv may not have it).

For each model, new processes on one cache folder that starts empty
(``stage2.run_child``):

- ``compile``: the logp+gradient graph of ``kiln_models.py`` compiled (``kiln.function``
  and its first call) on each backend, cold (empty cache) then warm (a new process, the
  caches filled); ``compile_s`` excludes the backend's import (``backend_import_s``).
- ``per_call`` (warm caches, one process): the median seconds per call of each backend's
  function on one fixed point (``stage2.time_calls``) and the ratio of each over JAX's;
  eager torch against JAX in alternating blocks (``ratio_torch_over_jax_paired``,
  ``stage2.time_paired``: the issue's bound is 3x on M3), and eager torch on one thread
  (``torch_threads``'s default here) against torch's own thread count
  (``ratio_torch_over_own_threads``), the measurement behind that default.
- ``sample`` (M1-M3): ``kl.sample(backend=...)`` (kiln's NUTS, 2 chains of 1000 + 1000)
  cold and warm, wall seconds from model construction to the returned data, the
  backend's import included; ``torch_compile`` is left out (a compile per function).

Run alone: ``python benchmarks/torch_mlx.py [--models M1 M3] [--no-sample]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

MODELS = ("M1", "M2", "M3", "M4")
SAMPLE_MODELS = ("M1", "M2", "M3")
LABELS = ("torch", "torch_compile", "mlx", "numba", "jax")
SAMPLE_BACKENDS = ("torch", "mlx", "numba", "jax")
#: label -> (linker, the packages it needs)
BACKENDS = {
    "torch": ("torch", ("torch", "kiln_torch")),
    "torch_compile": ("torch", ("torch", "kiln_torch")),
    "mlx": ("mlx", ("mlx", "kiln_mlx")),
    "numba": ("numba", ("numba", "kiln_numba")),
    "jax": ("jax", ("jax", "kiln_jax")),
}
TIMEOUT_S = 900.0


def missing(label: str) -> str | None:
    """Return why backend ``label`` cannot run here (a package not installed), or None."""
    absent = [p for p in BACKENDS[label][1] if importlib.util.find_spec(p) is None]
    return f"not installed: {', '.join(absent)}" if absent else None


def _import_backend(label: str) -> float:
    start = time.perf_counter()
    importlib.import_module(BACKENDS[label][1][1])
    return time.perf_counter() - start


def _settings(label: str) -> dict[str, Any]:
    return {"torch_compile": True} if label == "torch_compile" else {}


def _compile(name: str, label: str) -> tuple[Any, list, dict]:
    import kiln
    import kiln_models
    import stage2
    from kiln_rewrite import FAST_RUN_QUERY

    backend_import = _import_backend(label)
    inputs, outputs = kiln_models.build(name)
    point = stage2.fixed_point([v.type.shape for v in inputs])
    mode = kiln.Mode(FAST_RUN_QUERY, linker=BACKENDS[label][0])
    start = time.perf_counter()
    with warnings.catch_warnings(), kiln.config.change(**_settings(label)):
        warnings.simplefilter("ignore")
        f = kiln.function(inputs, outputs, mode=mode, trust_input=True)
        f(*point)
    return f, point, {"compile_s": time.perf_counter() - start, "backend_import_s": backend_import}


def _child_compile(name: str, label: str) -> dict:
    return _compile(name, label)[2]


def _child_calls(name: str, labels: list[str]) -> dict:
    import kiln
    import stage2

    out: dict = {}
    functions = {label: _compile(name, label)[:2] for label in labels}
    for label, (f, point) in functions.items():
        with kiln.config.change(**_settings(label)):
            out[f"{label}_s"] = stage2.time_calls(lambda f=f, p=point: f(*p))["median_s"]
    if "torch" in functions:
        import torch

        f, point = functions["torch"]
        own = torch.get_num_threads()

        def own_threads() -> None:
            kiln.config.torch_threads = own
            f(*point)
            kiln.config.torch_threads = 0

        paired = stage2.time_paired(lambda: f(*point), own_threads)
        out["torch_own_threads"] = own
        out["torch_own_threads_s"] = paired["b_s"]
        out["ratio_torch_over_own_threads"] = paired["ratio"]
        if "jax" in functions:
            g, point_g = functions["jax"]
            paired = stage2.time_paired(lambda: f(*point), lambda: g(*point_g))
            out["ratio_torch_over_jax_paired"] = paired["ratio"]
    if "jax_s" in out:
        for label in labels:
            out[f"ratio_{label}_over_jax"] = out[f"{label}_s"] / out["jax_s"]
    return out


def _child_sample(name: str, label: str) -> dict:
    import kiln as kl
    import kiln_model_defs

    backend_import = _import_backend(label)
    t0 = time.perf_counter()
    model = kiln_model_defs.build(name)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = kl.sample(
            tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
            backend=BACKENDS[label][0],
        )  # fmt: skip
    return {
        "wall_s": time.perf_counter() - t0 + backend_import,
        "backend_import_s": backend_import,
        "to_first_draw_s": idata.attrs["compile_time"],
        "sampling_s": idata.attrs["sampling_time"],
    }


def compile_model(name: str, labels: tuple[str, ...] = LABELS, timeout: float = TIMEOUT_S) -> dict:
    """Return cold and warm compiles of ``name`` on each backend, and the per-call times."""
    import stage2

    script = Path(__file__)
    out: dict = {}
    present = [label for label in labels if missing(label) is None]
    with tempfile.TemporaryDirectory(prefix="kiln-torch-mlx-bench-") as cache_dir:
        for when in ("cold", "warm"):
            for label in labels:
                reason = missing(label)
                out[f"{label}_{when}"] = (
                    {"skipped": reason}
                    if reason
                    else stage2.run_child(
                        ["--child-compile", name, label], cache_dir, timeout, script
                    )
                )
        out["per_call"] = stage2.run_child(
            ["--child-calls", name, *present], cache_dir, timeout, script
        )
    return out


def sample_model(name: str, timeout: float = TIMEOUT_S) -> dict:
    """Return ``kl.sample`` cold and warm walls of ``name`` on each installed backend."""
    import stage2

    out: dict = {}
    for label in SAMPLE_BACKENDS:
        reason = missing(label)
        if reason:
            out[f"{label}_cold"] = out[f"{label}_warm"] = {"skipped": reason}
            continue
        args = ["--child-sample", name, label]
        out[f"{label}_cold"], out[f"{label}_warm"] = stage2.cold_and_warm(
            args, args, timeout, Path(__file__)
        )
    return out


def run_torch_mlx(models: tuple[str, ...] = MODELS, sample: bool = True) -> dict:
    """Return the compile, per-call and (with ``sample``) sampling results per model."""
    results: dict = {"compile": {m: compile_model(m) for m in models}}
    if sample:
        results["sample"] = {m: sample_model(m) for m in models if m in SAMPLE_MODELS}
    return results


def _cell(res: dict, key: str, scale: float, width: int = 9) -> str:
    if "skipped" in res:
        return f"{'-':>{width}}"
    if key not in res:
        return f"{'err':>{width}}"
    return f"{res[key] * scale:{width}.1f}"


def format_table(results: dict) -> str:
    """Return a printable table of :func:`run_torch_mlx`'s results."""
    lines = ["PyTorch and MLX next to Numba and JAX: compile cold / warm (s), per call (us)"]
    lines.append(f"{'model':<6}{'backend':<15}{'cold':>9}{'warm':>9}{'call':>10}{'/jax':>8}")
    for name, r in results["compile"].items():
        calls = r["per_call"]
        for label in LABELS:
            cold, warm = r[f"{label}_cold"], r[f"{label}_warm"]
            ratio = calls.get(f"ratio_{label}_over_jax")
            call = calls if f"{label}_s" in calls else {"skipped": True}
            lines.append(
                f"{name:<6}{label:<15}{_cell(cold, 'compile_s', 1)}{_cell(warm, 'compile_s', 1)}"
                f"{_cell(call, f'{label}_s', 1e6, 10)}"
                + (f"{ratio:7.2f}x" if ratio is not None else f"{'-':>8}")
            )
        if "torch_own_threads_s" in calls:
            lines.append(
                f"{name:<6}{'torch, ' + str(calls['torch_own_threads']) + ' thr':<15}"
                f"{'':>18}{calls['torch_own_threads_s'] * 1e6:10.1f}"
                f"  paired: torch 1 thr / {calls['torch_own_threads']} thr "
                f"{calls['ratio_torch_over_own_threads']:.2f}x, torch / jax "
                f"{calls.get('ratio_torch_over_jax_paired', float('nan')):.2f}x"
            )
    if "sample" in results:
        lines.append("kl.sample wall (s), cold / warm")
        for name, r in results["sample"].items():
            cells = [
                f"{label} {_cell(r[f'{label}_cold'], 'wall_s', 1, 6)}"
                f"/{_cell(r[f'{label}_warm'], 'wall_s', 1, 5)}"
                for label in SAMPLE_BACKENDS
            ]
            lines.append(f"{name:<6}" + "  ".join(cells))
    return "\n".join(lines)


def main() -> None:
    """Run the children, or (no child option) the whole benchmark, printing a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child-compile", nargs=2, metavar=("MODEL", "BACKEND"))
    parser.add_argument("--child-calls", nargs="+", metavar="MODEL_THEN_BACKENDS")
    parser.add_argument("--child-sample", nargs=2, metavar=("MODEL", "BACKEND"))
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--no-sample", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.child_compile:
        print(json.dumps(_child_compile(*args.child_compile)))
    elif args.child_calls:
        print(json.dumps(_child_calls(args.child_calls[0], args.child_calls[1:])))
    elif args.child_sample:
        print(json.dumps(_child_sample(*args.child_sample)))
    else:
        results = run_torch_mlx(tuple(args.models), sample=not args.no_sample)
        if args.output:
            args.output.write_text(json.dumps(results, indent=2))
        print(format_table(results))


if __name__ == "__main__":
    main()
