"""The C backend (issue #23) next to kiln's Numba backend on M1-M4.

For each model, new processes on one cache folder that starts empty
(``stage2.run_child``):

- ``compile``: the logp+gradient graph of ``kiln_models.py`` compiled (``kiln.function``
  and its first call) on ``c`` then on ``numba``, cold (empty cache) then warm (a new
  process, the cache filled); ``compile_s`` excludes the backend's import, reported
  apart as ``backend_import_s``. Targets: cold ``c`` at most 0.5x cold ``numba``
  (``ratio_cold_compile_over_numba``); warm ``c`` at most 20 ms on M1-M3.
- ``per_call`` (M1-M3, warm caches): a call of the compiled ``c`` function timed in
  alternating blocks (``stage2.time_paired``) against the hand-written ``@njit`` floor
  (``njit_models.py``) and against kiln's ``numba`` function, with the same inputs.
  Targets: at most 1.2x the floor on M1-M2, at most kiln-Numba's on M3.
- ``sample`` (M1-M3): ``kl.sample(backend=...)`` (kiln's NUTS, 2 chains of 1000 + 1000)
  cold and warm, wall seconds from model construction to the returned data (the
  backend's import included), ``c`` next to ``numba``.

Run alone: ``python benchmarks/c_backend.py [--models M1 M2] [--no-sample]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("M1", "M2", "M3", "M4")
CALL_MODELS = ("M1", "M2", "M3")
SAMPLE_MODELS = ("M1", "M2", "M3")
BACKENDS = ("c", "numba")
TIMEOUT_S = 900.0


def _import_backend(backend: str) -> float:
    start = time.perf_counter()
    if backend == "numba":
        import kiln_numba  # noqa: F401
    else:
        import kiln_c  # noqa: F401
    return time.perf_counter() - start


def _compile(name: str, backend: str) -> tuple[object, list, dict]:
    import kiln
    import kiln_models
    import stage2
    from kiln_rewrite import FAST_RUN_QUERY

    backend_import = _import_backend(backend)
    inputs, outputs = kiln_models.build(name)
    point = stage2.fixed_point([v.type.shape for v in inputs])
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = kiln.function(
            inputs, outputs, mode=kiln.Mode(FAST_RUN_QUERY, linker=backend), trust_input=True
        )
        f(*point)
    return f, point, {"compile_s": time.perf_counter() - start, "backend_import_s": backend_import}


def _child_compile(name: str, backend: str) -> dict:
    return _compile(name, backend)[2]


def _child_calls(name: str) -> dict:
    import njit_models
    import stage2

    c, point, _ = _compile(name, "c")
    numba, _, _ = _compile(name, "numba")
    g, data = njit_models.jitted(name), njit_models.data_args(name)
    g(*point, *data)
    over_njit = stage2.time_paired(lambda: c(*point), lambda: g(*point, *data))  # type: ignore[operator]
    over_numba = stage2.time_paired(lambda: c(*point), lambda: numba(*point))  # type: ignore[operator]
    return {
        "c_s": over_njit["a_s"],
        "njit_s": over_njit["b_s"],
        "numba_s": over_numba["b_s"],
        "ratio_c_over_njit": over_njit["ratio"],
        "ratio_c_over_numba": over_numba["ratio"],
    }


def _child_sample(name: str, backend: str) -> dict:
    import kiln as kl
    import kiln_model_defs

    backend_import = _import_backend(backend)
    t0 = time.perf_counter()
    model = kiln_model_defs.build(name)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = kl.sample(
            tune=1000, draws=1000, chains=2, cores=2, random_seed=1, progressbar=False,
            backend=backend,
        )  # fmt: skip
    return {
        "wall_s": time.perf_counter() - t0 + backend_import,
        "backend_import_s": backend_import,
        "to_first_draw_s": idata.attrs["compile_time"],
        "sampling_s": idata.attrs["sampling_time"],
    }


def _ratio(a: dict, b: dict, key: str) -> float | None:
    if "error" in a or "error" in b:
        return None
    return float(a[key] / b[key])


def compile_model(name: str, timeout: float = TIMEOUT_S) -> dict:
    """Return cold and warm compiles of ``name`` on ``c`` and ``numba``, and calls."""
    import stage2

    script = Path(__file__)
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="kiln-c-bench-") as cache_dir:
        for when in ("cold", "warm"):
            for backend in BACKENDS:
                out[f"{backend}_{when}"] = stage2.run_child(
                    ["--child-compile", name, backend], cache_dir, timeout, script
                )
        if name in CALL_MODELS:
            out["per_call"] = stage2.run_child(["--child-calls", name], cache_dir, timeout, script)
    out["ratio_cold_compile_over_numba"] = _ratio(out["c_cold"], out["numba_cold"], "compile_s")
    out["ratio_warm_compile_over_numba"] = _ratio(out["c_warm"], out["numba_warm"], "compile_s")
    return out


def sample_model(name: str, timeout: float = TIMEOUT_S) -> dict:
    """Return ``kl.sample`` cold and warm on ``c`` and ``numba`` for ``name``."""
    import stage2

    out: dict = {}
    for backend in BACKENDS:
        args = ["--child-sample", name, backend]
        cold, warm = stage2.cold_and_warm(args, args, timeout, Path(__file__))
        out[f"{backend}_cold"], out[f"{backend}_warm"] = cold, warm
    out["ratio_cold_wall_over_numba"] = _ratio(out["c_cold"], out["numba_cold"], "wall_s")
    out["ratio_warm_wall_over_numba"] = _ratio(out["c_warm"], out["numba_warm"], "wall_s")
    return out


def run_c_backend(models: tuple[str, ...] = MODELS, sample: bool = True) -> dict:
    """Return the compile, per-call and (with ``sample``) sampling results per model."""
    results: dict = {"compile": {m: compile_model(m) for m in models}}
    if sample:
        results["sample"] = {m: sample_model(m) for m in models if m in SAMPLE_MODELS}
    return results


def _ms(res: dict, key: str = "compile_s") -> str:
    return f"{res[key] * 1e3:9.1f}" if key in res else f"{'err':>9}"


def _x(value: float | None) -> str:
    return f"{value:7.2f}x" if value is not None else f"{'-':>8}"


def format_table(results: dict) -> str:
    """Return a printable table of :func:`run_c_backend`'s results."""
    lines = [
        "C backend next to Numba (ms; per call in us; ratios c/other)",
        f"{'model':<6}{'c cold':>9}{'nb cold':>9}{'ratio':>8}{'c warm':>9}{'nb warm':>9}"
        f"{'c call':>9}{'njit':>9}{'numba':>9}{'c/njit':>8}{'c/numba':>8}",
    ]
    for name, r in results["compile"].items():
        line = f"{name:<6}{_ms(r['c_cold'])}{_ms(r['numba_cold'])}"
        line += f"{_x(r['ratio_cold_compile_over_numba'])}{_ms(r['c_warm'])}{_ms(r['numba_warm'])}"
        calls = r.get("per_call", {})
        if "c_s" in calls:
            line += "".join(f"{calls[k] * 1e6:9.2f}" for k in ("c_s", "njit_s", "numba_s"))
            line += f"{_x(calls['ratio_c_over_njit'])}{_x(calls['ratio_c_over_numba'])}"
        lines.append(line)
    if "sample" in results:
        lines.append(
            f"kl.sample wall (s): {'model':<6}{'c cold':>9}{'nb cold':>9}{'ratio':>8}"
            f"{'c warm':>9}{'nb warm':>9}{'ratio':>8}"
        )
        for name, r in results["sample"].items():
            walls = [
                f"{r[k]['wall_s']:9.2f}" if "wall_s" in r[k] else f"{'err':>9}"
                for k in ("c_cold", "numba_cold", "c_warm", "numba_warm")
            ]
            lines.append(
                f"{'':<20}{name:<6}{walls[0]}{walls[1]}{_x(r['ratio_cold_wall_over_numba'])}"
                f"{walls[2]}{walls[3]}{_x(r['ratio_warm_wall_over_numba'])}"
            )
    return "\n".join(lines)


def main() -> None:
    """Run the children, or (no child option) the whole benchmark, printing JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child-compile", nargs=2, metavar=("MODEL", "BACKEND"))
    parser.add_argument("--child-calls", metavar="MODEL")
    parser.add_argument("--child-sample", nargs=2, metavar=("MODEL", "BACKEND"))
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--no-sample", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.child_compile:
        print(json.dumps(_child_compile(*args.child_compile)))
    elif args.child_calls:
        print(json.dumps(_child_calls(args.child_calls)))
    elif args.child_sample:
        print(json.dumps(_child_sample(*args.child_sample)))
    else:
        results = run_c_backend(tuple(args.models), sample=not args.no_sample)
        if args.output:
            args.output.write_text(json.dumps(results, indent=2))
        print(format_table(results))


if __name__ == "__main__":
    main()
