"""A hierarchical radon-style model: varying intercepts and slopes (non-centred).

The data are the synthetic radon-like data of the benchmarks (85 counties, 919
houses, a floor indicator). Prints an ArviZ summary, compile and sampling times.
Run: ``python examples/radon.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from arviz_stats import summary

import kiln as kl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_models import data_m2  # noqa: E402


def build() -> kl.Model:
    """Return the radon-style model on the benchmark data."""
    d = data_m2()
    with kl.Model(coords={"county": range(d["n_groups"])}) as model:
        county = kl.Data("county", d["idx"], dims="obs")
        floor = kl.Data("floor", d["x"], dims="obs")
        mu_a = kl.Normal("mu_a", 0.0, 10.0)
        sigma_a = kl.HalfNormal("sigma_a", 5.0)
        mu_b = kl.Normal("mu_b", 0.0, 10.0)
        sigma_b = kl.HalfNormal("sigma_b", 5.0)
        z_a = kl.Normal("z_a", 0.0, 1.0, dims="county")
        z_b = kl.Normal("z_b", 0.0, 1.0, dims="county")
        a = kl.Deterministic("a", mu_a + sigma_a * z_a, dims="county")
        b = kl.Deterministic("b", mu_b + sigma_b * z_b, dims="county")
        sigma_y = kl.HalfNormal("sigma_y", 5.0)
        kl.Normal("y", a[county] + b[county] * floor, sigma_y, observed=d["y"], dims="obs")
    return model


def main() -> None:
    with build():
        idata = kl.sample(random_seed=2026)
    names = ["mu_a", "sigma_a", "mu_b", "sigma_b", "sigma_y"]
    print(summary(idata, var_names=names).round(3).to_string())
    print(
        f"compile time {idata.attrs['compile_time']:.2f} s, sampling time "
        f"{idata.attrs['sampling_time']:.2f} s ({idata.attrs['backend']} backend)"
    )


if __name__ == "__main__":
    main()
