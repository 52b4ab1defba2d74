"""numpyro's and blackjax's NUTS through kiln_samplers, on a model written in JAX."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("numpyro")
pytest.importorskip("blackjax")

import jax.numpy as jnp  # noqa: E402

import kiln_samplers as ks  # noqa: E402

MU = np.array([1.0, -2.0, 0.5, 10.0])
SD = np.array([1.0, 0.1, 3.0, 20.0])  # badly scaled: the mass matrix must adapt


class JaxGaussian:
    """An independent normal posterior in the JAX path of the compiled-model protocol."""

    ndim = 4
    out_names = ["x", "first"]

    def logp_jax(self, x):
        z = (x - MU) / SD
        return -0.5 * jnp.sum(z * z)

    def expand_jax(self, x):
        return {"x": x, "first": x[0]}

    def initial_point(self, seed=None):
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


ENGINES = {"numpyro": ks.sample_numpyro, "blackjax": ks.sample_blackjax}


@pytest.fixture(scope="module", params=sorted(ENGINES))
def run(request):
    sampler = ENGINES[request.param]
    trace, compile_time = sampler(
        JaxGaussian(), draws=600, tune=600, chains=2, random_seed=5, progressbar=False
    )
    return request.param, sampler, trace, compile_time


def test_draws_match_the_known_posterior(run):
    _, _, trace, _ = run
    x = trace.posterior["x"]
    assert x.shape == (2, 600, 4) and trace.posterior["first"].shape == (2, 600)
    flat = x.reshape(-1, 4)
    se = SD / np.sqrt(flat.shape[0] / 2)
    assert np.all(np.abs(flat.mean(0) - MU) < 5 * se), flat.mean(0)
    np.testing.assert_allclose(flat.std(0), SD, rtol=0.12)
    np.testing.assert_array_equal(trace.posterior["first"], x[..., 0])


def test_stats_in_kilns_vocabulary(run):
    _, _, trace, compile_time = run
    stats = trace.sample_stats
    assert set(stats) >= {
        "diverging",
        "energy",
        "tree_depth",
        "n_steps",
        "step_size",
        "lp",
        "acceptance_rate",
    }
    assert all(v.shape == (2, 600) for v in stats.values())
    assert stats["diverging"].dtype == bool and not stats["diverging"].any()
    assert 0.6 < stats["acceptance_rate"].mean() < 0.97
    # lp is the log-density of each draw (numpyro's potential energy flipped).
    z = (trace.unconstrained - MU) / SD
    np.testing.assert_allclose(stats["lp"], -0.5 * (z * z).sum(-1), rtol=1e-10, atol=1e-10)
    # Full trees have 2**depth - 1 leapfrog steps: depth bounds the step count.
    assert np.all(stats["n_steps"] <= 2 ** stats["tree_depth"] - 1)
    assert np.all(stats["n_steps"] >= 2 ** (stats["tree_depth"] - 1))
    assert compile_time > 0 and trace.sampling_time > 0


def test_the_same_seed_reproduces_and_x64_stays_scoped(run):
    _, sampler, trace, _ = run
    again, _ = sampler(
        JaxGaussian(), draws=600, tune=600, chains=2, random_seed=5, progressbar=False
    )
    np.testing.assert_array_equal(trace.unconstrained, again.unconstrained)
    assert trace.unconstrained.dtype == np.float64
    assert not jax.config.jax_enable_x64


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_bad_options_are_clear_errors(engine):
    with pytest.raises(ValueError, match="does not take \\['bogus'\\]"):
        ENGINES[engine](JaxGaussian(), draws=5, tune=5, chains=1, options={"bogus": 1})
    with pytest.raises(ValueError, match="chain_method must be one of"):
        ENGINES[engine](JaxGaussian(), draws=5, tune=5, chains=1, options={"chain_method": "x"})


@pytest.mark.parametrize("method", ["sequential", "vectorized"])
def test_every_chain_method_samples_the_posterior(run, method):
    """Threads and a loop run one compiled program per chain: the very same chains.

    Vectorized chains run another program (batched arithmetic rounds differently), so
    their trajectories part after a while; they are checked against the posterior.
    """
    _, sampler, trace, _ = run
    other, _ = sampler(
        JaxGaussian(),
        draws=600,
        tune=600,
        chains=2,
        random_seed=5,
        progressbar=False,
        options={"chain_method": method},
    )
    if method == "sequential":
        np.testing.assert_array_equal(other.unconstrained, trace.unconstrained)
    else:
        flat = other.posterior["x"].reshape(-1, 4)
        assert np.all(np.abs(flat.mean(0) - MU) < 5 * SD / np.sqrt(flat.shape[0] / 2))
