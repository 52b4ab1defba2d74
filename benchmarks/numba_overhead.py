"""Per-call overhead of a Numba-compiled kiln function, layer by layer.

For a few tiny graphs (one output; three outputs; one with array constants), each
compiled on Numba with ``trust_input=True``, times in one process (median of blocks of
calls, ``timeit``):

- ``function``: ``f(*inputs)``, the :class:`kiln_compile.Function` call;
- ``function_checked``: the same function compiled without ``trust_input`` (inputs
  checked and converted);
- ``thunk``: ``f.thunk(inputs)``, the linker's callable;
- ``raw``: ``f.thunk.jit_fn(*inputs, *f.thunk.constants)``, the njit dispatcher;
- ``empty_function``: an empty ``@njit`` function of the same parameters returning a
  tuple of the same length, called through the same Function and thunk (the kiln
  layers' cost without kiln's computation);
- ``empty_raw``: that empty function's dispatcher called directly.

``layers_ns`` (``function - raw``) is what the Function and thunk add to a call;
``function - empty_function`` is kiln's computation itself. Run from the repository
root: ``python benchmarks/numba_overhead.py`` (``--json`` prints JSON). The machine is
shared and noisy: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np


def per_call_ns(fn: Callable[[], Any], number: int = 20000, repeat: int = 7) -> float:
    """Return the best (over ``repeat`` blocks) nanoseconds per call of ``fn``."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def graphs() -> dict[str, tuple[list[Any], list[Any], list[np.ndarray]]]:
    """Return the tiny graphs: ``name -> (inputs, outputs, values)``."""
    import kiln.tensor as kt

    x = kt.vector("x", shape=(3,))
    y = kt.vector("y", shape=(3,))
    c = kt.constant(np.linspace(0.0, 1.0, 3))
    one = np.ones(3)
    return {
        "one_output": ([x], [kt.exp(x) * 2.0], [one]),
        "three_outputs": ([x, y], [x + y, x * y, kt.sum(x)], [one, one]),
        "constants": ([x], [kt.exp(x) * c + c[::-1]], [one]),
    }


def empty_like(n_params: int, n_outputs: int) -> Any:
    """Return an njit function of ``n_params`` parameters returning ``n_outputs`` of them."""
    from numba import njit

    params = ", ".join(f"a{i}" for i in range(n_params))
    outs = "".join(f"a{i % n_params}, " for i in range(n_outputs))
    namespace: dict[str, Any] = {}
    exec(f"def empty({params}):\n    return ({outs})\n", namespace)
    return njit(namespace["empty"])


def measure_graph(
    inputs: list[Any], outputs: list[Any], values: list[np.ndarray]
) -> dict[str, float]:
    """Return the per-call nanoseconds of each layer for one graph."""
    import kiln

    mode = kiln.Mode(linker="numba")
    f = kiln.function(inputs, outputs, mode=mode, trust_input=True)
    checked = kiln.function(inputs, outputs, mode=mode)
    thunk = f.thunk
    consts = tuple(thunk.constants)
    jit_fn = thunk.jit_fn
    row = {
        "function": per_call_ns(lambda: f(*values)),
        "function_checked": per_call_ns(lambda: checked(*values)),
        "thunk": per_call_ns(lambda: thunk(values)),
        "raw": per_call_ns(lambda: jit_fn(*values, *consts)),
    }
    empty = empty_like(len(values) + len(consts), len(outputs))
    empty(*values, *consts)
    row["empty_raw"] = per_call_ns(lambda: empty(*values, *consts))
    thunk.jit_fn = empty
    try:
        row["empty_function"] = per_call_ns(lambda: f(*values))
    finally:
        thunk.jit_fn = jit_fn
    row["layers_ns"] = row["function"] - row["raw"]
    return row


def measure() -> dict[str, dict[str, float]]:
    """Return the per-call nanoseconds of each layer, per graph."""
    return {name: measure_graph(*graph) for name, graph in graphs().items()}


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    # Compile into a throw-away cache, never the user's.
    os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-bench-"))
    results = measure()
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    columns = ["function", "function_checked", "thunk", "raw", "empty_function", "empty_raw"]
    print(f"{'ns per call':<15}" + "".join(f"{c:>18}" for c in columns))
    for name, row in results.items():
        print(f"{name:<15}" + "".join(f"{row[c]:18.0f}" for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
