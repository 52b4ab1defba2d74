"""kl.sample(executor=...): chains as tasks of Dask distributed or a futures executor.

The Dask tests run a real ``LocalCluster`` of two worker processes, each with its own
kiln cache (as two machines would have): the draws must equal a local run's to the
bit, also when a worker is killed mid-chain or starts with a cold cache.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import kiln as kl
import kiln_samplers as ks
from kiln._distributed import ChainTask, sample_chain_task
from kiln_graph import KilnTypeError
from kiln_model import VersionMismatchError, load_package

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools() -> kl.Model:
    with kl.Model(coords={"school": list("ABCDEFGH")}) as model:
        y = kl.Data("y_obs", Y, dims="school")
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        z = kl.Normal("z", 0.0, 1.0, dims="school")
        theta = kl.Deterministic("theta", mu + tau * z, dims="school")
        kl.Normal("y", theta, SIGMA, observed=y, dims="school")
    return model


def _sample(model: kl.Model, backend: str = "numba", **kwargs):
    """Sample on the default backend of users (the tests' default is the VM)."""
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", ks.SamplingWarning)
        return kl.sample(random_seed=11, progressbar=False, backend=backend, **kwargs)


def assert_same_draws(a, b) -> None:
    for group in ("posterior", "sample_stats"):
        assert set(a[group].data_vars) == set(b[group].data_vars)
        for name in a[group].data_vars:
            np.testing.assert_array_equal(a[group][name].values, b[group][name].values)


@pytest.fixture(scope="module")
def local_run():
    return _sample(eight_schools(), draws=200, tune=300, chains=4)


# --- concurrent.futures ------------------------------------------------------------------


def test_process_pool_chains_draw_what_local_chains_draw(local_run):
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        idata = _sample(eight_schools(), draws=200, tune=300, chains=4, executor=pool)
    assert_same_draws(local_run, idata)
    assert idata.attrs["executor"] == "FuturesAdapter"
    workers = idata.attrs["chain_workers"].split(", ")
    assert len(workers) == 4 and all(w.split(":")[1] != str(os.getpid()) for w in workers)
    assert idata["posterior"]["theta"].dims == ("chain", "draw", "school")


def _mixed_model() -> kl.Model:
    """Return a model with a discrete variable (Metropolis) beside a continuous one (NUTS)."""
    with kl.Model() as model:
        p = kl.Beta("p", 2.0, 2.0)
        k = kl.Binomial("k", 10, p)
        kl.Normal("y", k, 1.0, observed=np.array([6.2, 5.1, 7.3]))
    return model


@pytest.mark.parametrize(
    "step",
    [
        None,  # the assigned compound: NUTS on p, Metropolis on k
        lambda m: [kl.Slice([m["p"]]), kl.Metropolis([m["k"]])],
        lambda m: [kl.DEMetropolisZ([m["p"]]), kl.Metropolis([m["k"]])],
        # a population step: its chains in one task
        lambda m: [kl.DEMetropolis([m["p"]]), kl.Metropolis([m["k"]])],
    ],
    ids=["compound", "slice", "demetropolisz", "demetropolis-population"],
)
def test_step_method_chains_on_a_process_pool_draw_what_local_chains_draw(step):
    def run(**kwargs):
        model = _mixed_model()
        chosen = step(model) if step is not None else None
        return _sample(model, draws=150, tune=100, chains=3, step=chosen, **kwargs)

    local = run()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        remote = run(executor=pool)
    assert_same_draws(local, remote)
    assert remote.attrs["step"] == local.attrs["step"]
    assert remote.attrs["executor"] == "FuturesAdapter"
    workers = remote.attrs["chain_workers"].split(", ")
    assert len(workers) == 3 and all(w.split(":")[1] != str(os.getpid()) for w in workers)
    assert set(np.unique(remote["posterior"]["k"].values)) <= set(range(11))


class _FailingChains(concurrent.futures.ThreadPoolExecutor):
    """Runs tasks in threads, except that the tasks of ``failing`` chains raise."""

    def __init__(self, failing: set[int], hang: set[int] = frozenset()) -> None:
        super().__init__(2)
        self.failing, self.hang, self.submitted = failing, hang, []
        self.futures: dict[int, concurrent.futures.Future] = {}

    def submit(self, fn, task, *args, **kwargs):
        self.submitted.append(task.chain)
        if task.chain in self.hang:
            future: concurrent.futures.Future = concurrent.futures.Future()  # never finishes
        elif task.chain in self.failing:

            def boom(task: ChainTask):
                raise RuntimeError(f"worker lost its disk (chain {task.chain})")

            future = super().submit(boom, task)
        else:
            future = super().submit(fn, task, *args, **kwargs)
        self.futures[task.chain] = future
        return future


def test_a_chain_that_keeps_failing_names_itself_and_keeps_the_others(local_run):
    with _FailingChains({2}) as executor, pytest.raises(kl.ChainsFailedError) as info:
        _sample(eight_schools(), draws=200, tune=300, chains=4, executor=executor)
    assert executor.submitted.count(2) == 3  # the first try and two retries
    error = info.value
    assert set(error.failures) == {2} and "chain 2: RuntimeError: worker lost its disk" in str(
        error
    )
    idata = error.idata
    assert idata["posterior"].sizes["chain"] == 3
    for kept, chain in enumerate((0, 1, 3)):
        np.testing.assert_array_equal(
            idata["posterior"]["mu"].values[kept], local_run["posterior"]["mu"].values[chain]
        )


def test_ctrl_c_cancels_the_running_chains_and_returns_the_finished_ones(local_run):
    main = threading.main_thread().ident
    with _FailingChains(set(), hang={1, 2, 3}) as executor:

        def fire() -> None:  # once chain 0 is done and the others are running
            while 0 not in executor.futures or not executor.futures[0].done():
                time.sleep(0.01)
            time.sleep(0.3)
            signal.pthread_kill(main, signal.SIGINT)

        threading.Thread(target=fire, daemon=True).start()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = _sample(eight_schools(), draws=200, tune=300, chains=4, executor=executor)
    assert idata.attrs["interrupted"] == 1
    assert idata["posterior"].sizes["chain"] == 1
    np.testing.assert_array_equal(
        idata["posterior"]["mu"].values[0], local_run["posterior"]["mu"].values[0]
    )
    assert [w for w in caught if issubclass(w.category, ks.SamplingInterrupted)]


def test_a_bad_executor_is_refused_before_compiling():
    with eight_schools(), pytest.raises(KilnTypeError, match="executor: expected a dask"):
        kl.sample(executor="localhost:8786", progressbar=False)


# --- nutpie and the JAX engines: a chain per task -------------------------------------------


def _engine_run(engine: str, executor, **kwargs):
    backend = "jax" if engine in ("numpyro", "blackjax") else "numba"
    return _sample(
        eight_schools(),
        backend=backend,
        nuts_sampler=engine,
        draws=400,
        tune=400,
        chains=2,
        executor=executor,
        **kwargs,
    )


def _check_eight_schools_posterior(idata) -> None:
    """Check mu (non-centred eight schools: mean 4.4, sd 3.3) within 5 MCSEs."""
    mu = idata["posterior"]["mu"].values
    assert mu.shape == (2, 400) and not np.array_equal(mu[0], mu[1])
    mcse = 3.3 / np.sqrt(mu.size / 4)  # a conservative ESS of a quarter of the draws
    assert abs(mu.mean() - 4.4) < 5 * mcse, mu.mean()
    assert 2.5 < mu.std() < 4.2, mu.std()
    assert int(idata["sample_stats"]["diverging"].sum()) < 20


@pytest.mark.parametrize("engine", ["nutpie", "numpyro"])
def test_engine_chains_draw_the_same_on_a_process_pool_as_in_this_process(engine):
    """Chain c is the engine's one-chain run with chain c's seed, wherever it runs."""
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed")
    with concurrent.futures.ThreadPoolExecutor(1) as here:
        local = _engine_run(engine, here)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        remote = _engine_run(engine, pool)
    assert_same_draws(local, remote)
    workers = remote.attrs["chain_workers"].split(", ")
    assert len(workers) == 2 and all(w.split(":")[1] != str(os.getpid()) for w in workers)
    assert remote["posterior"]["theta"].dims == ("chain", "draw", "school")
    _check_eight_schools_posterior(remote)


# --- Dask distributed ----------------------------------------------------------------------

distributed = pytest.importorskip("distributed")


def _use_cache_dir(path: str) -> str:
    kl.config.cache_dir = path
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Yield a client of a LocalCluster of two worker processes, each with its own cache."""
    import cloudpickle

    # The workers cannot import this test module: its helpers travel by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local,
        distributed.Client(local) as client,
    ):
        for k, worker in enumerate(sorted(client.scheduler_info()["workers"])):
            path = str(tmp_path_factory.mktemp(f"worker{k}-cache"))
            client.run(_use_cache_dir, path, workers=[worker])
        yield client


def test_dask_chains_draw_what_local_chains_draw(cluster, local_run):
    idata = _sample(eight_schools(), draws=200, tune=300, chains=4, executor=cluster)
    assert_same_draws(local_run, idata)
    assert idata.attrs["executor"] == "DaskAdapter"
    assert idata.attrs["nuts_kernel"] == "c"  # the compiled kernel ran on the workers


def _report_every(seconds: float) -> None:
    import kiln._executor_dask

    kiln._executor_dask.REPORT_EVERY_S = seconds


def test_the_progress_bars_move_with_the_workers_events(cluster, monkeypatch):
    """Each chain's bar advances on the events its worker logs, before the chain ends."""
    calls: list[tuple[int, int]] = []

    class Recorded(ks.Progress):
        def advance(self, chain: int, n: int, divergences: int = 0) -> None:
            calls.append((chain, n))
            super().advance(chain, n, divergences)

    monkeypatch.setattr(ks, "Progress", Recorded)
    cluster.run(_report_every, 0.0)  # every report of run_chain becomes an event
    try:
        _sample(eight_schools(), draws=3000, tune=500, chains=2, executor=cluster)
    finally:
        cluster.run(_report_every, 0.25)
    for chain in (0, 1):
        steps = [n for c, n in calls if c == chain]
        assert len(steps) > 2, steps  # events while the chain ran, not one final jump
        assert sum(steps) >= 3500 and max(steps) < 3500


def test_step_method_chains_on_dask_draw_what_local_chains_draw(cluster):
    local = _sample(_mixed_model(), draws=150, tune=100, chains=2)
    remote = _sample(_mixed_model(), draws=150, tune=100, chains=2, executor=cluster)
    assert_same_draws(local, remote)
    assert remote.attrs["executor"] == "DaskAdapter" and "Metropolis" in remote.attrs["step"]


@pytest.mark.skipif(importlib.util.find_spec("nutpie") is None, reason="nutpie not installed")
def test_nutpie_chains_on_dask_draw_what_they_draw_in_this_process(cluster):
    with concurrent.futures.ThreadPoolExecutor(1) as here:
        local = _engine_run("nutpie", here)
    remote = _engine_run("nutpie", cluster)
    assert_same_draws(local, remote)
    assert remote.attrs["executor"] == "DaskAdapter"
    _check_eight_schools_posterior(remote)


@pytest.mark.skipif(importlib.util.find_spec("kiln_c") is None, reason="kiln_c not installed")
def test_dask_chains_on_the_c_backend_draw_what_local_chains_draw(cluster):
    local = _sample(eight_schools(), backend="c", draws=100, tune=200, chains=2)
    idata = _sample(eight_schools(), backend="c", draws=100, tune=200, chains=2, executor=cluster)
    assert_same_draws(local, idata)
    assert idata.attrs["backend"] == "c"


def test_a_worker_killed_mid_chain_is_replaced_and_the_draws_are_the_same(cluster):
    model = eight_schools()
    n = 400_000  # about a second of sampling per chain: the kill lands mid-chain
    clean = _sample(model, draws=n, tune=300, chains=2)
    pids = cluster.run(os.getpid)
    killed: dict[str, int] = {}

    def kill_a_worker_mid_chain() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = sorted(
                w
                for w, keys in cluster.processing().items()
                if any(str(k).startswith("kiln-chain-") for k in keys)
            )
            if busy:
                time.sleep(0.2)  # into the chain (the workers hold the model already)
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed["pid"] = pids[busy[0]]
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_a_worker_mid_chain, daemon=True)
    watcher.start()
    idata = _sample(model, draws=n, tune=300, chains=2, executor=cluster)
    watcher.join()
    assert killed, "no chain task was seen running"
    # Every chain finished on a living worker (the killed one's chain ran again).
    assert str(killed["pid"]) not in [
        w.split(":")[1] for w in idata.attrs["chain_workers"].split(", ")
    ]
    assert_same_draws(clean, idata)
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker


def test_a_cold_worker_and_a_warm_worker_draw_the_same(cluster, local_run, tmp_path):
    cluster.restart()  # new worker processes: no model in memory, the default (warm) cache
    cold = sorted(cluster.scheduler_info()["workers"])[0]
    cluster.run(_use_cache_dir, str(tmp_path / "cold"), workers=[cold])
    cold_pid = cluster.run(os.getpid, workers=[cold])[cold]
    idata = _sample(eight_schools(), draws=200, tune=300, chains=4, executor=cluster)
    assert_same_draws(local_run, idata)
    ran_cold = any(w.endswith(f":{cold_pid}") for w in idata.attrs["chain_workers"].split(", "))
    # The cold worker built the model into its own, empty cache.
    assert (tmp_path / "cold").is_dir() == ran_cold


def test_a_version_mismatch_between_client_and_worker_is_a_clear_error(cluster):
    with eight_schools() as model:
        compiled = model.logp_dlogp_function()
    package = compiled.package()
    other = dataclasses.replace(package, versions={**package.versions, "numpy": "1.0.0"})
    future = cluster.submit(load_package, other, pure=False)
    with pytest.raises(VersionMismatchError, match=r"numpy 1\.0\.0 on the client but 2\.\S+ in"):
        future.result()
    task = ChainTask(other, 0, np.random.SeedSequence(1), 10, 10, ks.NutsSettings(), "t", None)
    with pytest.raises(VersionMismatchError, match="install the same versions"):
        cluster.submit(sample_chain_task, task, pure=False).result()
