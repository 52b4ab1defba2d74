"""Random draws per call: kiln on Numba against NumPy's own Generator.

Two workloads (issue target: the scalar case at most 1.2x NumPy):

- ``normal_1e6``: 10^6 standard normals per call. kiln: a compiled function of
  ``kr.normal(0, 1, size=10**6)`` (the generator copied once per call, then advanced);
  NumPy: ``rng.normal(0, 1, 10**6)`` called in a plain Python loop.
- ``mvnormal_1e4x5``: 10^4 five-dimensional multivariate normals per call, each with its
  own mean and covariance (a batch). kiln: ``kr.multivariate_normal(mu, cov)`` with
  ``mu`` (10^4, 5) and ``cov`` (10^4, 5, 5) inputs; NumPy: ``rng.multivariate_normal``
  in a Python loop over the batch (its API takes one covariance), and the same math
  vectorized by hand (batched Cholesky, then ``mu + L z``).

Each timing is the median of ``repeats`` blocks; the VM (the reference backend) is
timed too. Run alone: ``python benchmarks/random_draws.py``; ``nox -s bench`` runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

import kiln
import kiln.tensor as kt
import kiln_random as kr


def _median_s(fn: Callable[[], object], repeats: int, number: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def _normal(backend: str) -> Callable[[], object]:
    f = kiln.function(
        [], kr.normal(0.0, 1.0, size=10**6, rng=kr.rng(0)), mode=kiln.Mode(linker=backend)
    )
    return f


def _mvnormal(backend: str) -> tuple[Callable[..., object], np.ndarray, np.ndarray]:
    mu, cov = kt.matrix("mu"), kt.tensor("cov", shape=(None, None, None))
    f = kiln.function(
        [mu, cov],
        kr.multivariate_normal(mu, cov, rng=kr.rng(0)),
        mode=kiln.Mode(linker=backend),
        trust_input=True,
    )
    rng = np.random.default_rng(1)
    a = rng.normal(size=(10**4, 5, 5))
    covs = a @ a.transpose(0, 2, 1) + 5 * np.eye(5)
    return f, rng.normal(size=(10**4, 5)), covs


def run_random(repeats: int = 7) -> dict:
    """Return the medians (seconds per call) and the ratios kiln / NumPy."""
    gen = np.random.default_rng(0)
    out: dict = {"normal_1e6": {}, "mvnormal_1e4x5": {}}
    out["normal_1e6"]["numpy_s"] = _median_s(lambda: gen.normal(0.0, 1.0, 10**6), repeats, 5)
    for backend in ("numba", "vm"):
        out["normal_1e6"][f"kiln_{backend}_s"] = _median_s(_normal(backend), repeats, 5)

    f, mu, covs = _mvnormal("numba")
    block = out["mvnormal_1e4x5"]
    block["kiln_numba_s"] = _median_s(lambda: f(mu, covs), repeats, 3)

    def numpy_loop() -> object:
        return [gen.multivariate_normal(m, c) for m, c in zip(mu, covs, strict=True)]

    def numpy_vectorized() -> object:
        chol = np.linalg.cholesky(covs)
        z = gen.standard_normal(mu.shape)
        return mu + np.einsum("bij,bj->bi", chol, z)

    block["numpy_loop_s"] = _median_s(numpy_loop, max(3, repeats // 2), 1)
    block["numpy_vectorized_s"] = _median_s(numpy_vectorized, repeats, 3)
    fv, _, _ = _mvnormal("vm")
    block["kiln_vm_s"] = _median_s(lambda: fv(mu, covs), max(3, repeats // 2), 1)
    out["ratios"] = {
        "normal_numba_over_numpy": out["normal_1e6"]["kiln_numba_s"] / out["normal_1e6"]["numpy_s"],
        "mvnormal_numba_over_numpy_loop": block["kiln_numba_s"] / block["numpy_loop_s"],
        "mvnormal_numba_over_numpy_vectorized": block["kiln_numba_s"] / block["numpy_vectorized_s"],
    }
    return out


def format_table(report: dict) -> str:
    """Return the results as a few printable lines (milliseconds per call)."""
    lines = ["random draws (ms per call, medians):"]
    for name in ("normal_1e6", "mvnormal_1e4x5"):
        cells = ", ".join(f"{k[:-2]} {v * 1e3:.2f}" for k, v in report[name].items())
        lines.append(f"  {name}: {cells}")
    lines += [f"  {k}: {v:.2f}x" for k, v in report["ratios"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    report = run_random(args.repeats)
    print(json.dumps(report, indent=2) if args.json else format_table(report))


if __name__ == "__main__":
    main()
