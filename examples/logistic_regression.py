"""Logistic regression, N = 10,000 rows, D = 20 predictors (the benchmark's data).

Prints an ArviZ summary, compile and sampling times. Run:
``python examples/logistic_regression.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from arviz_stats import summary

import kiln as kl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_models import data_m3  # noqa: E402


def build() -> kl.Model:
    """Return the logistic regression on the benchmark data."""
    d = data_m3()
    n, k = d["X"].shape
    with kl.Model(coords={"predictor": range(k)}) as model:
        X = kl.Data("X", d["X"], dims=("obs", "predictor"))
        alpha = kl.Normal("alpha", 0.0, 1.0)
        beta = kl.Normal("beta", 0.0, 1.0, dims="predictor")
        kl.Bernoulli("y", logit_p=alpha + kl.tensor.dot(X, beta), observed=d["y"], dims="obs")
    return model


def main() -> None:
    with build():
        idata = kl.sample(random_seed=2026)
    print(summary(idata, var_names=["alpha", "beta"]).round(3).to_string())
    print(
        f"compile time {idata.attrs['compile_time']:.2f} s, sampling time "
        f"{idata.attrs['sampling_time']:.2f} s ({idata.attrs['backend']} backend)"
    )


if __name__ == "__main__":
    main()
