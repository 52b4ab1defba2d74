"""kl.sample(nuts_sampler="nutpie"): both paths, kiln's layout, seeds, errors.

The root conftest makes the VM the default linker: ``backend="numba"`` names the
pointer path (C callbacks), ``backend="vm"`` the Python path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln as kl
from kiln_graph import KilnValueError

pytest.importorskip("nutpie")

Y = np.array([0.3, -0.2, 1.1, 0.4, 0.9])


def _model() -> kl.Model:
    with kl.Model(coords={"obs": range(5)}) as m:
        x = kl.Data("x", np.linspace(0, 1, 5), dims="obs")
        mu = kl.Normal("mu", 0.0, 1.0)
        sigma = kl.HalfNormal("sigma", 1.0)
        kl.Deterministic("mean", mu + 0.0 * x, dims="obs")
        kl.Deterministic("above", mu > 0.0)
        kl.Normal("y", mu, sigma, observed=Y, dims="obs")
    return m


def _sample(model: kl.Model | None = None, **kwargs):
    with model or _model(), warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)  # short chains: low ESS
        args = {"draws": 200, "tune": 200, "chains": 2, "progressbar": False}
        return kl.sample(**{"nuts_sampler": "nutpie", **args, **kwargs})


@pytest.mark.parametrize(("backend", "path"), [("numba", "pointers"), ("vm", "python")])
def test_the_layout_of_kilns_own_nuts(backend, path):
    idata = _sample(random_seed=1, backend=backend)
    reference = _sample(random_seed=1, backend=backend, nuts_sampler="kiln", draws=20, tune=20)
    assert idata.attrs["nutpie_path"] == path and idata.attrs["backend"] == backend
    assert idata.attrs["nuts_sampler"] == "nutpie" and idata.attrs["nutpie_version"]
    assert set(idata.children) == set(reference.children)
    post, ref = idata["posterior"], reference["posterior"]
    assert list(post.data_vars) == list(ref.data_vars) == ["mu", "sigma", "mean", "above"]
    for name in post.data_vars:
        assert post[name].dims == ref[name].dims and post[name].dtype == ref[name].dtype
    assert post["mean"].dims == ("chain", "draw", "obs") and post["mu"].shape == (2, 200)
    assert list(post["obs"].values) == list(range(5))
    stats, ref_stats = idata["sample_stats"], reference["sample_stats"]
    assert set(ref_stats.data_vars) <= set(stats.data_vars)
    for name in ref_stats.data_vars:
        assert stats[name].dtype == ref_stats[name].dtype, name
    assert bool((post["sigma"] > 0).all())
    np.testing.assert_array_equal(post["above"].values, post["mu"].values > 0)
    assert idata.attrs["sampling_time"] > 0 and idata.attrs["compile_time"] > 0
    np.testing.assert_array_equal(idata["observed_data"]["y"].values, Y)


@pytest.mark.parametrize("backend", ["numba", "vm"])
def test_the_same_seed_gives_the_same_draws(backend):
    a = _sample(random_seed=7, backend=backend, cores=1)
    b = _sample(random_seed=7, backend=backend, cores=2)
    c = _sample(random_seed=8, backend=backend)
    np.testing.assert_array_equal(a["posterior"]["mu"].values, b["posterior"]["mu"].values)
    assert not np.array_equal(a["posterior"]["mu"].values, c["posterior"]["mu"].values)


def test_both_paths_draw_the_same_posterior():
    """Not the same chains: the Numba and VM log-densities differ in their last bits."""
    a = _sample(random_seed=3, backend="numba")["posterior"]["mu"].values
    b = _sample(random_seed=3, backend="vm")["posterior"]["mu"].values
    assert abs(a.mean() - b.mean()) < 0.2 and abs(a.std() / b.std() - 1) < 0.3


def test_log_likelihood_and_set_data():
    idata = _sample(random_seed=2, backend="numba", idata_kwargs={"log_likelihood": True})
    assert idata["log_likelihood"]["y"].shape == (2, 200, 5)
    with kl.Model() as m:
        x = kl.Data("x", np.arange(3.0))
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Deterministic("shift", mu + x)
    before = _sample(m, random_seed=2, backend="numba")["posterior"]
    np.testing.assert_allclose(
        before["shift"].values, before["mu"].values[..., None] + np.arange(3.0)
    )
    with m:
        kl.set_data({"x": np.arange(3.0) + 100.0})
    after = _sample(m, random_seed=2, backend="numba")["posterior"]
    np.testing.assert_allclose(
        after["shift"].values, after["mu"].values[..., None] + np.arange(3.0) + 100.0
    )


def test_nuts_sampler_kwargs_reach_nutpie():
    idata = _sample(random_seed=1, backend="numba", nuts_sampler_kwargs={"max_treedepth": 2})
    assert int(idata["sample_stats"]["tree_depth"].max()) <= 2


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"bogus": 1}, r"unknown keys \['bogus'\]"),
        ({"chains": 3}, r"kl.sample's own arguments.*chains -> kl.sample\(chains"),
        ({"sampler": "mclmc"}, "cannot be given"),
    ],
)
def test_bad_nuts_sampler_kwargs_are_clear_errors(options, match):
    with pytest.raises(KilnValueError, match=match):
        _sample(backend="numba", nuts_sampler_kwargs=options)
