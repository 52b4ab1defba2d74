"""Numba-backend benchmarks of M1-M4: cold / warm compile in new processes, per call.

For each model (logp + gradient, ``kiln_models.py``), two new Python processes compile it
with ``kiln.function(..., mode=kiln.Mode(FAST_RUN_QUERY, linker="numba"),
profile=True, trust_input=True)`` and call it once, on one cache folder that starts
empty: ``KILN_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` both point into a new temporary
folder, so the first process (``cold``) compiles everything, kiln's Numba runtime
helpers included, and the second (``warm``) finds what the first stored. Each reports:

- ``total_s``: from building the graph to the first call returning (imports excluded,
  except the backend's: ``kiln_numba``, imported once per process at its first compile,
  is imported just before and its time added, ``backend_import_s`` alone; Numba, which
  kiln_numba imports only to compile a function or to load one that has no shared
  library, is timed where that happens);
- ``stage1_s``: the profile's ``rewrite`` (Stage 1 with its cache lookup);
- ``stage2_s``: the profile's ``link`` plus the first call (Numba compiles lazily, at
  the first call, or loads its cached machine code then); ``first_call_s`` alone;
- ``build_s`` (graph + gradient), ``prepare_s``, the Stage-1 ``cache`` outcome, and
  ``object_mode``: the Ops that had no Numba implementation and ran in object mode.

The warm process then times calls: ``per_call_s`` is the median over blocks of calls of
the compiled function (``trust_input=True``, profiling off) on one fixed point, and, in
the same process, the hand-written ``@njit`` function of the model (``njit_models.py``,
M1-M3) and ``jax.jit`` for M3 when JAX is importable. ``ratio_per_call_over_njit``
compares the two (the issue's target is <= 1.2 on M1/M2; M3 <= JAX's time): the median
ratio over pairs of blocks timed alternately (``time_paired``), which a burst of load
on the machine affects less than two medians timed one after the other.

``tiny_call`` measures the per-call overhead: a 3-element graph compiled on Numba,
called through ``Function`` with ``trust_input=True``, against an empty ``@njit``
function called through the same ``Function`` (its thunk's dispatcher swapped), and
both dispatchers called directly.

A model that fails (an Op not yet implemented, a crash) is reported with an ``error``;
the others still run. Run from ``run.py`` (``nox -s bench``) or alone:
``python benchmarks/stage2.py [--models M1 M3]``.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("M1", "M2", "M3", "M4")
CHILD_TIMEOUT_S = 900.0


def time_calls(fn: Callable[[], object], budget_s: float = 0.6, blocks: int = 25) -> dict:
    """Return the median seconds per call of ``fn`` over ``blocks`` blocks of calls.

    The block size is calibrated so that all blocks take about ``budget_s``.
    """
    fn()
    start = time.perf_counter()
    fn()
    one = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(budget_s / blocks / one))
    per_call = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        per_call.append((time.perf_counter() - start) / number)
    return {"median_s": statistics.median(per_call), "calls_per_block": number, "blocks": blocks}


def time_paired(a: Callable[[], object], b: Callable[[], object], blocks: int = 25) -> dict:
    """Time ``a`` and ``b`` in alternating blocks; return each median and the median ratio.

    On a shared machine a burst of load slows neighbouring blocks alike, so the ratio
    of each pair of blocks (``a``'s time per call over ``b``'s) is steadier than the
    ratio of two medians measured one after the other.
    """
    ta, tb = time_calls(a), time_calls(b)  # warm up; blocks of about 24 ms
    na, nb = ta["calls_per_block"], tb["calls_per_block"]
    per_a, per_b = [], []
    for _ in range(blocks):
        for fn, n, out in ((a, na, per_a), (b, nb, per_b)):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - start) / n)
    return {
        "a_s": statistics.median(per_a),
        "b_s": statistics.median(per_b),
        "ratio": statistics.median(x / y for x, y in zip(per_a, per_b, strict=True)),
    }


def fixed_point(shapes: Sequence[tuple[int, ...]], seed: int = 0) -> list[np.ndarray]:
    """Return one float64 array per shape (0-d for scalars), the same in every process."""
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.normal(scale=0.5, size=shape)) for shape in shapes]


def _compile_and_call(
    inputs: list, outputs: list, point: list, linker: str = "numba"
) -> tuple[Any, dict]:
    """Compile on ``linker`` (Numba), call once; return the function and the timings."""
    import kiln
    from kiln_rewrite import FAST_RUN_QUERY

    mode = kiln.Mode(FAST_RUN_QUERY, linker=linker)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = kiln.function(inputs, outputs, mode=mode, profile=True, trust_input=True)
        t1 = time.perf_counter()
        f(*point)
        t2 = time.perf_counter()
    prof = f.profile
    times = dict(prof.compile_times)
    first = prof.first_call_time if prof.first_call_time is not None else t2 - t1
    messages = [str(w.message) for w in caught]
    object_mode = sorted(
        {
            m.split(" has no Numba")[0].removeprefix("kiln: the Op ")
            for m in messages
            if "has no Numba" in m
        }
    )
    f.profile = None  # calls are timed without the profile's bookkeeping
    stage2 = dict(getattr(prof, "stage2", {}) or {})
    # A function loaded from its shared library has no dispatcher yet (asking for one
    # would import Numba).
    shared = stage2.get("loader") == "shared library"
    stats = None if shared else getattr(getattr(f.thunk, "jit_fn", None), "stats", None)
    numba_cache = None
    if stats is not None:  # did Numba load the main function's machine code from its cache?
        numba_cache = {
            "hits": sum(stats.cache_hits.values()),
            "misses": sum(stats.cache_misses.values()),
        }
    return f, {
        "function_s": t1 - t0,
        "first_call_s": first,
        "prepare_s": times.get("prepare"),
        "stage1_s": times.get("rewrite"),
        "link_s": times.get("link"),
        "stage2_s": times.get("link", 0.0) + first,
        "cache": prof.cache,
        "object_mode": object_mode,
        "numba_cache": numba_cache,
        # The linker's own Stage-2 report, where the profile has one (``Profile.stage2``).
        "stage2": stage2,
        "linker": prof.linker,
    }


def import_backend(linker: str = "numba") -> float:
    """Import the backend (kiln_numba, or kiln_<linker>) now; return the seconds it took.

    A process imports it once, at its first compile, whatever it compiles then. The
    children import it before their timed part and add this time back to their totals,
    which report it apart as ``backend_import_s`` (0 where it was already imported).
    """
    import importlib

    start = time.perf_counter()
    importlib.import_module(f"kiln_{linker}")
    return time.perf_counter() - start


def _child_model(name: str, calls: bool, linker: str = "numba") -> dict:
    """Compile model ``name`` in this (new) process; with ``calls``, time calls too."""
    import kiln_models

    backend_import = import_backend(linker)
    t0 = time.perf_counter()
    inputs, outputs = kiln_models.build(name)
    t1 = time.perf_counter()
    point = fixed_point([v.type.shape for v in inputs])
    f, res = _compile_and_call(inputs, outputs, point, linker)
    res["total_s"] = time.perf_counter() - t0 + backend_import
    res["backend_import_s"] = backend_import
    res["build_s"] = t1 - t0
    if not calls:
        return res
    res["per_call_s"] = time_calls(lambda: f(*point))["median_s"]
    consts = tuple(getattr(f.thunk, "constants", ()))
    shared = getattr(f.thunk, "_shared", None)
    if shared is not None:  # the generated function from its shared library, no checks
        res["per_call_raw_shared_library_s"] = time_calls(lambda: shared.fn(*point, *consts))[
            "median_s"
        ]
    jit_fn = getattr(f.thunk, "jit_fn", None)
    if jit_fn is not None:
        res["per_call_raw_dispatcher_s"] = time_calls(lambda: jit_fn(*point, *consts))["median_s"]
    try:
        import njit_models
    except ImportError as exc:  # numba missing: no baseline
        res["njit"] = {"error": f"{type(exc).__name__}: {exc}"}
        return res
    if name in njit_models.MODELS:
        g, data = njit_models.jitted(name), njit_models.data_args(name)
        start = time.perf_counter()
        g(*point, *data)
        res["njit"] = {"compile_s": time.perf_counter() - start}
        paired = time_paired(lambda: f(*point), lambda: g(*point, *data))
        res["njit"]["per_call_s"] = paired["b_s"]
        res["njit"]["kiln_per_call_paired_s"] = paired["a_s"]
        res["ratio_per_call_over_njit"] = paired["ratio"]
    if name == "M3":
        jax_fn = njit_models.jax_m3()
        if jax_fn is not None:
            jax_fn(*point)
            paired = time_paired(
                lambda: f(*point),
                lambda: jax_fn(*point)[0].block_until_ready(),  # type: ignore[misc]
            )
            res["jax"] = {"per_call_s": paired["b_s"], "kiln_per_call_paired_s": paired["a_s"]}
            res["ratio_per_call_over_jax"] = paired["ratio"]
    return res


def _child_tiny() -> dict:
    """Time the per-call overhead of a tiny Numba-compiled graph against an empty njit."""
    from numba import njit

    import kiln.tensor as kt

    x = kt.vector("x", shape=(3,))
    value = np.ones(3)
    f, res = _compile_and_call([x], kt.sum(kt.exp(x) * 2.0 + 1.0), [value])
    out: dict = {"compile": res, "numpy_s": time_calls(lambda: np.sum(np.exp(value) * 2.0 + 1.0))}
    out["kiln_call_s"] = time_calls(lambda: f(value))["median_s"]
    out["numpy_s"] = out["numpy_s"]["median_s"]
    thunk = f.thunk
    if not hasattr(thunk, "jit_fn"):
        out["error"] = f"the thunk {type(thunk).__name__} has no jit_fn"
        return out
    consts = tuple(thunk.constants)
    kiln_fn = thunk.jit_fn
    out["kiln_raw_dispatcher_s"] = time_calls(lambda: kiln_fn(value, *consts))["median_s"]

    # The same parameters as kiln's function (no star-args, whose dispatch costs more).
    params = ", ".join(f"a{i}" for i in range(1 + len(consts)))
    namespace: dict = {}
    exec(f"def empty({params}):\n    return (a0,)\n", namespace)
    empty = njit(cache=False)(namespace["empty"])
    empty(value, *consts)
    out["empty_raw_dispatcher_s"] = time_calls(lambda: empty(value, *consts))["median_s"]
    thunk.jit_fn = empty
    f.profile = None  # the Function forgets the thunk's direct entry, which the swap removed
    out["empty_call_s"] = time_calls(lambda: f(value))["median_s"]
    thunk.jit_fn = kiln_fn
    out["ratio_kiln_over_empty"] = out["kiln_call_s"] / out["empty_call_s"]
    out["interface_overhead_s"] = out["empty_call_s"] - out["empty_raw_dispatcher_s"]
    return out


@functools.cache
def compile_bytecode() -> None:
    """Write the ``.pyc`` files of kiln's packages (editable installs have none yet).

    pip writes them for every installed package; an editable install, or a shell with
    ``PYTHONDONTWRITEBYTECODE`` set, leaves kiln's own modules to be compiled from
    source in each timed child process.
    """
    for src in sorted((HERE.parent / "packages").glob("*/src")):
        compileall.compile_dir(src, quiet=1)
    compileall.compile_dir(HERE, maxlevels=0, quiet=1)
    _warm_imports()


@functools.cache
def _warm_imports() -> None:
    """Import kiln and the Numba backend once in a throwaway process, before any timing.

    The first process of a run otherwise reads Numba's and LLVM's shared libraries from
    disk rather than from the OS's file cache (seen: 1.3 s instead of 0.25 s to import
    the backend), which is no part of compiling a model. It writes to no cache.
    """
    code = "import kiln, kiln_numba, numba"
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, timeout=300)


def run_child(
    args: list[str],
    cache_dir: str,
    timeout: float = CHILD_TIMEOUT_S,
    script: Path | None = None,
) -> dict:
    """Run ``script`` (default: this one) with ``args`` in a new process; return its JSON.

    ``KILN_CACHE_DIR``, ``NUMBA_CACHE_DIR`` and PyTensor's ``base_compiledir`` /
    ``compiledir`` (``PYTENSOR_FLAGS``) point into ``cache_dir``. A failure or a timeout
    gives ``{"error": ...}``.
    """
    compile_bytecode()
    pt_dir = os.path.join(cache_dir, "pytensor")
    pt_flags = f"base_compiledir={pt_dir},compiledir={os.path.join(pt_dir, 'compiledir')}"
    env = dict(
        os.environ,
        KILN_CACHE_DIR=os.path.join(cache_dir, "kiln"),
        NUMBA_CACHE_DIR=os.path.join(cache_dir, "numba"),
        PYTENSOR_FLAGS=",".join(filter(None, [os.environ.get("PYTENSOR_FLAGS"), pt_flags])),
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    )
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(script or Path(__file__).resolve()), *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"error": tail[0][:500]}
    result = json.loads(lines[-1])
    result["process_wall_s"] = wall
    return result


def _folder_files(folder: str) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def cold_and_warm(
    cold_args: list[str], warm_args: list[str], timeout: float, script: Path | None = None
) -> tuple[dict, dict]:
    """Run ``script`` twice in new processes on one cache folder that starts empty."""
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as cache_dir:
        cold = run_child(cold_args, cache_dir, timeout, script)
        warm = run_child(warm_args, cache_dir, timeout, script)
    return cold, warm


def time_model(
    name: str,
    timeout: float = CHILD_TIMEOUT_S,
    script: Path | None = None,
    child: str = "--child",
    linker: str = "numba",
) -> dict:
    """Return model ``name``'s cold and warm compile (new processes, one cache) and calls.

    ``script`` / ``child``: the script and its option that measure one process (this
    script's ``--child`` by default; ``peer.py`` passes its PyTensor one). ``linker``:
    kiln's backend (``numba`` or ``c``; PyTensor's child takes ``c`` as its CVM).
    """
    extra = [] if linker == "numba" else ["--linker", linker]
    with tempfile.TemporaryDirectory(prefix=f"kiln-{linker}-bench-") as cache_dir:
        cold = run_child([child, name, *extra], cache_dir, timeout, script)
        files = _folder_files(cache_dir)
        warm = run_child([child, name, "--calls", *extra], cache_dir, timeout, script)
    out: dict = {"cold": cold, "warm": warm, "cache_files": files}
    if "error" in cold:
        out["error"] = f"cold: {cold['error']}"
    elif "error" in warm:
        out["error"] = f"warm: {warm['error']}"
    else:
        out["warm_over_cold"] = warm["total_s"] / cold["total_s"]
        for key in ("per_call_s", "ratio_per_call_over_njit", "ratio_per_call_over_jax"):
            if key in warm:
                out[key] = warm[key]
    return out


def run_stage2(models: Sequence[str] = MODELS, timeout: float = CHILD_TIMEOUT_S) -> dict:
    """Return the Numba benchmarks of ``models`` and the tiny-graph call overhead."""
    out: dict = {"models": {}}
    for name in models:
        out["models"][name] = time_model(name, timeout)
    with tempfile.TemporaryDirectory(prefix="kiln-numba-bench-") as cache_dir:
        out["tiny_call"] = run_child(["--child", "tiny"], cache_dir, timeout)
    return out


def _ms(seconds: float | None) -> str:
    return "       -" if seconds is None else f"{seconds * 1e3:8.1f}"


def _us(seconds: float | None) -> str:
    return "       -" if seconds is None else f"{seconds * 1e6:8.1f}"


def _ratio(value: float | None) -> str:
    return "     -" if value is None else f"{value:6.2f}"


def format_table(results: dict) -> str:
    """Return a printable table of :func:`run_stage2`'s results."""
    lines = [
        "Numba backend, logp + gradient: compile in new processes (ms; cold = empty caches, "
        "warm = caches kept; s1 / s2 = Stage 1 / Stage 2 incl. first call), per call (us)",
        f"{'model':<6}{'cold':>8}{'s1':>8}{'s2':>8}{'warm':>8}{'s1':>8}{'s2':>8}  "
        f"{'call':>8}{'njit':>8}{'ratio':>6}{'jax':>8}{'ratio':>6}  object mode",
    ]
    for name, r in results.get("models", {}).items():
        if "error" in r:
            lines.append(f"{name:<6} failed: {r['error'][:110]}")
            continue
        c, w = r["cold"], r["warm"]
        line = f"{name:<6}{_ms(c['total_s'])}{_ms(c['stage1_s'])}{_ms(c['stage2_s'])}"
        line += f"{_ms(w['total_s'])}{_ms(w['stage1_s'])}{_ms(w['stage2_s'])}  "
        line += f"{_us(w.get('per_call_s'))}{_us(w.get('njit', {}).get('per_call_s'))}"
        line += f"{_ratio(w.get('ratio_per_call_over_njit'))}"
        line += (
            f"{_us(w.get('jax', {}).get('per_call_s'))}{_ratio(w.get('ratio_per_call_over_jax'))}"
        )
        line += f"  {', '.join(c.get('object_mode', [])) or '-'}"
        lines.append(line)
    tiny = results.get("tiny_call", {})
    if "error" in tiny:
        lines.append(f"tiny graph: failed: {tiny['error'][:110]}")
    elif tiny:
        lines.append(
            f"tiny graph per call (us): kiln {_us(tiny['kiln_call_s']).strip()}, empty njit "
            f"through Function {_us(tiny['empty_call_s']).strip()} "
            f"(ratio {tiny['ratio_kiln_over_empty']:.2f}), raw dispatchers: kiln "
            f"{_us(tiny['kiln_raw_dispatcher_s']).strip()}, empty "
            f"{_us(tiny['empty_raw_dispatcher_s']).strip()}; numpy {_us(tiny['numpy_s']).strip()}"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the Numba benchmarks alone (or one child measurement); print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, help="JSON file to write")
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--timeout", type=float, default=CHILD_TIMEOUT_S)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--linker", default="numba", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "tiny":
            res = _child_tiny()
        else:
            res = _child_model(args.child, args.calls, args.linker)
        print(json.dumps(res, default=str))
        return
    results = run_stage2(args.models, args.timeout)
    print(format_table(results))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"stage2": results}, indent=2))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
