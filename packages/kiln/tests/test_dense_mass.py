"""A dense mass matrix: kl.sample(init="adapt_full") (PyMC's name), and kiln's default.

kiln's NUTS adapts one by default where the warm-up finds a correlated Gaussian posterior.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln as kl
from kiln._arguments import init_options
from kiln_graph import KilnValueError

# A regression on an uncentred predictor: intercept and slope are correlated about -0.99.
X = np.linspace(10.0, 20.0, 30)
Y = 2.0 + 0.5 * X + np.random.default_rng(0).normal(size=30)
PRIOR_SD = 100.0


def _posterior() -> tuple[np.ndarray, np.ndarray]:
    """Return the exact Gaussian posterior of (a, b): mean and covariance (sigma is 1)."""
    design = np.column_stack([np.ones_like(X), X])
    precision = design.T @ design + np.eye(2) / PRIOR_SD**2
    cov = np.linalg.inv(precision)
    return cov @ design.T @ Y, cov


def _sample(**kwargs):
    with kl.Model():
        a = kl.Normal("a", 0.0, PRIOR_SD)
        b = kl.Normal("b", 0.0, PRIOR_SD)
        kl.Normal("y", a + b * X, 1.0, observed=Y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kl.SamplingWarning)
            return kl.sample(
                **{"draws": 1000, "tune": 1000, "chains": 2, "progressbar": False, **kwargs}
            )


@pytest.mark.parametrize("init", ["auto", "jitter+adapt_full", "adapt_full"])
def test_a_dense_mass_matrix_samples_a_correlated_posterior(init):
    idata = _sample(init=init, random_seed=2)
    assert idata.attrs["nuts_metric"] == "dense"  # by default too: a Gaussian posterior
    post = idata["posterior"]
    draws = np.column_stack([post["a"].values.ravel(), post["b"].values.ravel()])
    mean, cov = _posterior()
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * sd / np.sqrt(draws.shape[0] / 2))
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.1)
    assert np.corrcoef(draws, rowvar=False)[0, 1] == pytest.approx(
        cov[0, 1] / (sd[0] * sd[1]), abs=0.01
    )
    assert not idata["sample_stats"]["diverging"].values.any()


def test_a_dense_mass_matrix_takes_fewer_steps_than_a_diagonal_one_here():
    full = _sample(init="jitter+adapt_full", random_seed=3)["sample_stats"]["n_steps"].mean()
    diag = _sample(init="jitter+adapt_diag", random_seed=3)["sample_stats"]["n_steps"].mean()
    # 3.1-3.5x fewer on one machine, 2.8x on another (chains follow the log-density's
    # last bits, which differ between CPUs)
    assert 2 * float(full) < float(diag), (float(full), float(diag))


def test_the_result_says_which_mass_matrix_kilns_nuts_adapted():
    assert _sample(init="adapt_diag", draws=100, tune=100).attrs["nuts_metric"] == "diag"
    assert _sample(init="adapt_full", draws=100, tune=100).attrs["nuts_metric"] == "dense"


def test_adapt_full_sets_each_engines_dense_option():
    assert init_options("adapt_full", "kiln", None, False) == {"metric": "dense"}
    assert init_options("jitter+adapt_full", "numpyro", {"x": 1}, False) == {
        "x": 1,
        "dense_mass": True,
    }
    assert init_options("adapt_full", "blackjax", None, False) == {"dense_mass": True}
    assert init_options("jitter+adapt_diag", "kiln", {"x": 1}, False) == {"x": 1, "metric": "diag"}
    assert init_options("adapt_diag", "numpyro", None, False) == {"dense_mass": False}
    assert init_options("adapt_diag", "nutpie", None, False) == {}
    assert init_options("adapt_diag", "kiln", None, True) == {}  # step methods: diagonal
    assert init_options("auto", "kiln", {"x": 1}, False) == {"x": 1}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"nuts_sampler": "nutpie"}, r"init='adapt_full': .*nuts_sampler='nutpie' adapts"),
        (
            {"nuts_sampler_kwargs": {"metric": "diag"}},
            r"init='adapt_full' asks for a dense .* metric='diag'",
        ),
        (
            {"nuts_sampler_kwargs": {"adaptation": "grad"}},
            r"nuts_sampler_kwargs: adaptation: metric='dense' adapts over Stan's windows",
        ),
        ({"step": "metropolis"}, r"init='adapt_full': .*step methods adapts"),
    ],
)
def test_what_cannot_adapt_a_dense_mass_matrix_says_so_before_compiling(kwargs, match):
    with kl.Model():
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("y", mu, 1.0, observed=Y)
        if kwargs.pop("step", None):
            kwargs["step"] = kl.Metropolis([mu])
        with pytest.raises(KilnValueError, match=match):
            kl.sample(init="adapt_full", progressbar=False, **kwargs)
