"""kl.sample: arguments, the returned ArviZ data, reproducibility, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln as kl
from kiln_graph import KilnTypeError, KilnValueError

Y = np.array([0.3, -0.2, 1.1, 0.4, 0.9])


def _model() -> kl.Model:
    with kl.Model(coords={"obs": range(5)}) as m:
        x = kl.Data("x", np.linspace(0, 1, 5), dims="obs")
        mu = kl.Normal("mu", 0.0, 1.0)
        sigma = kl.HalfNormal("sigma", 1.0)
        kl.Deterministic("mean", mu + 0.0 * x, dims="obs")
        kl.Normal("y", mu, sigma, observed=Y, dims="obs")
    return m


def _sample(**kwargs):
    with _model(), warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)  # short chains: low ESS
        return kl.sample(**{"draws": 200, "tune": 200, "chains": 2, "progressbar": False, **kwargs})


def test_returns_the_groups_stats_dims_and_times():
    idata = _sample(random_seed=1, backend="numba")
    assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= set(idata.children)
    post = idata["posterior"]
    assert set(post.data_vars) == {"mu", "sigma", "mean"}
    assert post["mean"].dims == ("chain", "draw", "obs") and post["mu"].shape == (2, 200)
    stats = set(idata["sample_stats"].data_vars)
    assert {
        "diverging",
        "energy",
        "energy_error",
        "max_energy_error",
        "tree_depth",
        "n_steps",
        "step_size",
        "step_size_bar",
        "lp",
        "acceptance_rate",
    } <= stats
    np.testing.assert_array_equal(idata["observed_data"]["y"].values, Y)
    assert idata["constant_data"]["x"].shape == (5,)
    assert idata.attrs["sampling_time"] > 0 and idata.attrs["compile_time"] > 0
    assert idata.attrs["backend"] == "numba"
    assert bool((post["sigma"] > 0).all())


def test_the_same_seed_gives_the_same_draws_whatever_the_cores():
    a = _sample(random_seed=7, backend="numba", cores=1)
    b = _sample(random_seed=7, backend="numba", cores=2)
    np.testing.assert_array_equal(a["posterior"]["mu"].values, b["posterior"]["mu"].values)


def test_the_gradient_based_warmup_is_an_option_of_kilns_nuts():
    stan = _sample(random_seed=3, backend="numba")
    grad = _sample(random_seed=3, backend="numba", nuts_sampler_kwargs={"adaptation": "grad"})
    assert not np.array_equal(stan["posterior"]["mu"].values, grad["posterior"]["mu"].values)
    assert abs(float(grad["posterior"]["mu"].mean()) - float(stan["posterior"]["mu"].mean())) < 0.3


def test_another_backend_runs_the_python_loop():
    idata = _sample(random_seed=1, backend="vm", draws=50, tune=50)
    assert idata.attrs["backend"] == "vm" and idata["posterior"]["mu"].shape == (2, 50)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"backend": "numba", "compile_kwargs": {"mode": "FAST_RUN"}}, KilnValueError, "not both"),
        ({"backend": "nope"}, KilnValueError, "not an installed backend"),
        ({"nuts_sampler": "nope"}, KilnValueError, "valid: \\['blackjax', 'kiln'"),
        ({"init": "nope"}, KilnValueError, "init"),
        ({"compile_kwargs": {"bogus": 1}}, KilnTypeError, "bogus"),
        ({"draws": 0}, ValueError, "draws"),
        ({"target_accept": 1.2}, ValueError, "target_accept"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        _sample(**kwargs)


def test_an_engine_whose_package_is_missing_names_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "blackjax" else real(name, *a)
    )
    with pytest.raises(KilnValueError, match="needs the package 'blackjax'"):
        _sample(nuts_sampler="blackjax")


def test_sampling_needs_a_model_with_free_variables():
    with kl.Model():
        kl.Normal("y", 0.0, 1.0, observed=[0.1])
        with pytest.raises(kl.ModelError, match="no free variables"):
            kl.sample(progressbar=False)


def test_log_likelihood_on_request():
    from scipy import stats

    idata = _sample(random_seed=3, backend="numba", idata_kwargs={"log_likelihood": True})
    ll = idata["log_likelihood"]["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (2, 200, 5)
    mu = idata["posterior"]["mu"].values[1, 7]
    sigma = idata["posterior"]["sigma"].values[1, 7]
    np.testing.assert_allclose(ll.values[1, 7], stats.norm(mu, sigma).logpdf(Y), rtol=1e-10)
    with pytest.raises(KilnTypeError, match="idata_kwargs"):
        _sample(idata_kwargs={"nope": True})


def test_sampling_collects_the_oldest_generation_rarely_and_restores_after(monkeypatch):
    import gc

    import kiln._sampling as sampling

    seen: list[int] = []
    to_datatree = sampling._to_datatree

    def recording(*args, **kwargs):
        seen.append(gc.get_threshold()[2])
        return to_datatree(*args, **kwargs)

    monkeypatch.setattr(sampling, "_to_datatree", recording)
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        _sample(random_seed=1, backend="numba")
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*saved)
    assert seen == [100]  # the run and its DataTree: full collections 10x rarer
    assert after == (700, 10, 10)
