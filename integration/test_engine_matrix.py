"""Every backend x NUTS engine on eight schools: one result layout, or a clear error.

kiln's NUTS and nutpie run on any backend (natively on Numba, through the host
``logp_dlogp`` otherwise); numpyro and blackjax need the JAX backend: with no backend
given they pick it, and an explicit other backend is an error that says so. The torch
backend's row is ``test_torch_engine_matrix.py`` (collected by ``nox -s tests_torch``, the
session with torch installed); MLX's is here (``mlx[cpu]`` is in the default session).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kiln as kl
from kiln_graph import KilnValueError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posteriordb_sampling import build  # noqa: E402

BACKENDS = ["vm", "numba", "jax", "mlx"]
#: The packages a backend needs besides kiln's (a missing one skips its cases).
BACKEND_PACKAGES = {
    "jax": ("jax", "kiln_jax"),
    "mlx": ("mlx", "kiln_mlx"),
    "torch": ("torch", "kiln_torch"),
}
ENGINES = ["kiln", "nutpie", "numpyro", "blackjax"]
JAX_ONLY = {"numpyro", "blackjax"}
STATS = {"diverging", "energy", "tree_depth", "n_steps", "step_size", "lp", "acceptance_rate"}
NAME = "eight_schools-eight_schools_noncentered"


def _missing(engine: str, backend: str | None) -> str | None:
    needs = [engine] if engine != "kiln" else []
    needs += BACKEND_PACKAGES.get(backend or "", ())
    if engine in JAX_ONLY:
        needs.append("kiln_jax")
    absent = [p for p in dict.fromkeys(needs) if importlib.util.find_spec(p) is None]
    return f"not installed: {absent}" if absent else None


def _sample(engine: str, backend: str | None, **kwargs: Any) -> Any:
    reason = _missing(engine, backend)
    if reason:
        pytest.skip(reason)
    with build(NAME), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kl.sample(
            draws=300,
            tune=300,
            chains=2,
            random_seed=11,
            progressbar=False,
            backend=backend,
            nuts_sampler=engine,
            target_accept=0.9,
            **kwargs,
        )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("engine", ENGINES)
def test_every_valid_combination_gives_the_same_layout(engine: str, backend: str) -> None:
    check_layout(engine, backend)


def check_layout(engine: str, backend: str) -> None:
    """Sample eight schools with ``engine`` on ``backend``; assert the common layout.

    An engine that needs JAX on another backend must be the clear error instead.
    """
    if engine in JAX_ONLY and backend != "jax":
        if _missing(engine, backend):
            pytest.skip(_missing(engine, backend))
        with build(NAME), pytest.raises(KilnValueError, match="needs the JAX backend"):
            kl.sample(backend=backend, nuts_sampler=engine, progressbar=False)
        return
    idata = _sample(engine, backend)
    assert idata.attrs["backend"] == backend and idata.attrs["nuts_sampler"] == engine
    post = idata["posterior"]
    assert set(post.data_vars) == {"mu", "tau", "theta_trans", "theta"}
    assert post["theta"].dims == ("chain", "draw", "school")
    assert post["mu"].shape == (2, 300)
    stats = idata["sample_stats"]
    assert STATS <= set(stats.data_vars), STATS - set(stats.data_vars)
    assert all(stats[k].shape == (2, 300) for k in STATS)
    assert stats["diverging"].dtype == bool
    assert {"observed_data"} <= set(idata.children)
    # A rough check of the posterior (the reference tests check it closely).
    assert 1.0 < float(post["mu"].mean()) < 8.0
    assert bool((post["tau"] > 0).all())
    assert np.isfinite(stats["lp"].values).all()
    assert idata.attrs["compile_time"] > 0 and idata.attrs["sampling_time"] > 0


@pytest.mark.parametrize("engine", sorted(JAX_ONLY))
def test_a_jax_engine_picks_the_jax_backend_when_none_is_given(engine: str) -> None:
    idata = _sample(engine, None)
    assert idata.attrs["backend"] == "jax"
