"""While chains run, BLAS gets the CPUs divided among them, never more than it had."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import kiln_samplers as ks
from kiln_samplers import _threads


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


class _Recording:
    """An independent normal posterior that records BLAS's threads at each gradient."""

    ndim = 3
    out_names = ["x"]
    dims = {"x": None}
    coords: dict = {}

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def logp_dlogp(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if not self.seen:  # threadpool_info reads every loaded library: once is enough
            self.seen = _blas_threads() or {-1}
        return -0.5 * float(x @ x), -x

    def logp(self, x: np.ndarray) -> float:
        return self.logp_dlogp(x)[0]

    def expand(self, x: np.ndarray) -> dict:
        return {"x": x.copy()}

    def initial_point(self, seed: object = None) -> np.ndarray:
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


def test_chain_workers_are_the_cores_asked_or_up_to_four_cpus_never_more_than_chains(monkeypatch):
    monkeypatch.setattr(_threads, "cpu_count", lambda: 8)
    assert _threads.chain_workers(6, None) == 4
    assert _threads.chain_workers(2, None) == 2
    assert _threads.chain_workers(6, 3) == 3
    assert _threads.chain_workers(2, 5) == 2


@pytest.mark.parametrize(
    ("before", "cores", "expected"), [(6, 2, 4), (6, 1, 6), (6, 3, 2), (1, 2, 1), (1, 1, 1)]
)
def test_blas_gets_the_cpus_divided_among_the_chains_never_more_than_it_had(
    monkeypatch, before, cores, expected
):
    """8 CPUs; BLAS at ``before`` threads (1: what a Dask worker's nanny sets)."""
    if not _blas_threads():
        pytest.skip("no BLAS that threadpoolctl controls is loaded")
    monkeypatch.setattr(_threads, "cpu_count", lambda: 8)
    with threadpool_limits(limits=before, user_api="blas"):
        model = _Recording()
        ks.sample_nuts(
            model, draws=5, tune=5, chains=cores, cores=cores, random_seed=1, progressbar=False
        )
        assert model.seen == {expected}
        assert _blas_threads() == {before}  # restored
