"""One regression model fed its data in every common form: the fast path for each (issue #19).

A varying-intercept model over N = 919 rows and 85 groups (the shape of the radon
model): ``y ~ Normal(a[idx] + b * x, s)``. Each variant changes how a user might pass
the data: int64, int32 or boolean columns, float32, pandas Series and DataFrame
columns (as ``pd.read_csv`` gives them), an int32 index vector, a 0-d Data scale, a
boolean mask through ``kt.where``, observed integer counts (Poisson), and Data whose
length changes through ``kl.set_data`` after compiling. Every one must sample on the
compiled NUTS kernel at about the float64 variant's time per leapfrog step.

``leapfrog_times`` samples each variant and returns what the sampler reports about
itself: the kernel that ran and the seconds per leapfrog step. The integration test
``integration/test_data_variants.py`` asserts on it (a generous bound); ``nox -s bench``
reports it (``data_variants`` in the JSON results). Run alone:
``python benchmarks/data_variants.py``.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

N, GROUPS = 919, 85


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(19)
    idx = rng.integers(0, GROUPS, N)
    floor = rng.integers(0, 2, N)
    y = rng.normal(1.0 + 0.5 * floor, 0.8)
    counts = rng.poisson(np.exp(0.3 + 0.2 * floor))
    return {"idx": idx, "floor": floor, "y": y, "counts": counts}


def build(
    x: Any = None,
    index: Any = None,
    observed: Any = None,
    scale: Any = None,
    mask: Any = None,
    family: str = "normal",
    observed_data: bool = False,
) -> Any:
    """Return the regression model with its data in the forms given (float64 by default)."""
    import kiln as kl
    import kiln.tensor as kt

    d = _data()
    x = d["floor"].astype(float) if x is None else x
    index = d["idx"] if index is None else index
    obs = (d["y"] if family == "normal" else d["counts"]) if observed is None else observed
    with kl.Model() as m:
        a = kl.Normal("a", 0.0, 1.0, shape=GROUPS)
        b = kl.Normal("b", 0.0, 1.0)
        i = kl.Data("idx", index)
        mu = a[i] + b * kl.Data("x", x)
        if scale is not None:
            mu = mu * kl.Data("c", scale)
        if mask is not None:
            mu = kt.where(kl.Data("mask", mask), mu, a[i])
        if observed_data:
            obs = kl.Data("y_obs", obs)
        if family == "normal":
            kl.Normal("y", mu, kl.HalfNormal("s", 1.0), observed=obs)
        else:
            kl.Poisson("y", kt.exp(mu), observed=obs)
    return m


def _pandas_series() -> Any:
    import pandas as pd

    return build(x=pd.Series(_data()["floor"]))


def _pandas_column() -> Any:
    import pandas as pd

    return build(x=pd.DataFrame({"floor": _data()["floor"]})["floor"])


def _set_data_shorter() -> Any:
    """Compiled for 919 rows, then given 600 through ``set_data`` (no recompiling)."""
    import kiln as kl

    d = _data()
    m = build(observed_data=True)
    with m:
        m.logp_dlogp_function()  # compiled for the full data
        kl.set_data({"x": d["floor"][:600].astype(float), "idx": d["idx"][:600]})
        kl.set_data({"y_obs": d["y"][:600]})
    return m


VARIANTS: dict[str, Callable[[], Any]] = {
    "float64": build,
    "int64 column": lambda: build(x=_data()["floor"].astype(np.int64)),
    "int32 column": lambda: build(x=_data()["floor"].astype(np.int32)),
    "bool column": lambda: build(x=_data()["floor"].astype(bool)),
    "float32 column": lambda: build(x=_data()["floor"].astype(np.float32)),
    "pandas Series": _pandas_series,
    "pandas column": _pandas_column,
    "int32 index": lambda: build(index=_data()["idx"].astype(np.int32)),
    "0-d Data": lambda: build(scale=2.0),
    "boolean mask": lambda: build(mask=_data()["floor"] == 1),
    "integer counts": lambda: build(family="poisson"),
    "set_data shorter": _set_data_shorter,
}


def sample_variant(name: str, tune: int = 300, draws: int = 300, seed: int = 1) -> dict[str, Any]:
    """Sample one variant (one chain); return its kernel and seconds per leapfrog step."""
    import kiln as kl

    with warnings.catch_warnings(), VARIANTS[name]():
        warnings.simplefilter("ignore", kl.SamplingWarning)
        idata = kl.sample(
            tune=tune, draws=draws, chains=1, random_seed=seed, progressbar=False, backend="numba"
        )
    attrs = idata.attrs
    return {
        "kernel": attrs["nuts_kernel"],
        "n_leapfrog": int(attrs["n_leapfrog"]),
        "sampling_s": float(attrs["sampling_time"]),
        "leapfrog_s": float(attrs["sampling_time"]) / max(int(attrs["n_leapfrog"]), 1),
    }


def leapfrog_times(
    names: tuple[str, ...] = tuple(VARIANTS), repeats: int = 3, **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """Return, per variant, the median seconds per leapfrog step and its ratio to float64.

    The variants are sampled in turn, ``repeats`` rounds, so that every ratio compares
    runs of one moment of the machine.
    """
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in ("float64", *names)}
    for _ in range(repeats):
        for name in runs:
            runs[name].append(sample_variant(name, **kwargs))
    base = statistics.median(r["leapfrog_s"] for r in runs["float64"])
    out = {}
    for name, rs in runs.items():
        median = statistics.median(r["leapfrog_s"] for r in rs)
        out[name] = {
            "kernel": "+".join(sorted({r["kernel"] for r in rs})),
            "leapfrog_median_s": median,
            "leapfrog_times_s": [r["leapfrog_s"] for r in rs],
            "over_float64": median / base,
        }
    return out


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """Return the per-variant lines of the benchmark report."""
    lines = ["data variants (per leapfrog step, next to float64 data)"]
    for name, r in results.items():
        lines.append(
            f"  {name:<18} {r['kernel']:<7} {r['leapfrog_median_s'] * 1e6:8.2f} us"
            f"  {r['over_float64']:5.2f}x"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(leapfrog_times()))
