"""Simulation-based calibration of kl.sample on conjugate models (Talts et al., 2018).

For each replication: draw the parameter from its prior, data given it, sample the
posterior, and record the rank of the true value among thinned posterior draws. With
a correct sampler the ranks are uniform; a chi-square test on a coarse histogram
catches a biased or over-/under-dispersed posterior. The data are kl.Data, so every
replication reuses one compiled model (set_data). Seeds are fixed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import kiln as kl

REPLICATIONS = 40
DRAWS = 99  # thinned posterior draws per replication: ranks 0..99
BINS = 5


def _ranks(
    model: kl.Model, var: str, truths: np.ndarray, datasets: list, data_name: str
) -> np.ndarray:
    ranks = []
    for k, (truth, data) in enumerate(zip(truths, datasets, strict=True)):
        kl.set_data({data_name: data}, model=model)
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = kl.sample(
                draws=396, tune=300, chains=1, random_seed=k, progressbar=False, backend="numba"
            )
        draws = idata["posterior"][var].values.ravel()[::4][:DRAWS]
        ranks.append(int(np.sum(draws < truth)))
    return np.array(ranks)


def _uniform_p(ranks: np.ndarray) -> float:
    counts = np.histogram(ranks, bins=BINS, range=(0, DRAWS + 1))[0]
    return float(stats.chisquare(counts).pvalue)


def test_normal_mean_with_known_variance():
    rng = np.random.default_rng(20261201)
    n = 5
    with kl.Model() as model:
        y = kl.Data("y", np.zeros(n))
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("obs", mu, 1.0, observed=y)
    truths = rng.normal(0.0, 1.0, REPLICATIONS)
    datasets = [rng.normal(t, 1.0, n) for t in truths]
    ranks = _ranks(model, "mu", truths, datasets, "y")
    assert _uniform_p(ranks) > 0.001, np.histogram(ranks, bins=BINS, range=(0, DRAWS + 1))[0]


def test_beta_binomial():
    rng = np.random.default_rng(7)
    n = 20
    with kl.Model() as model:
        k = kl.Data("k", np.array([0]))
        p = kl.Beta("p", 2.0, 2.0)
        kl.Binomial("obs", n, p, observed=k)
    truths = rng.beta(2.0, 2.0, REPLICATIONS)
    datasets = [np.array([rng.binomial(n, t)]) for t in truths]
    ranks = _ranks(model, "p", truths, datasets, "k")
    assert _uniform_p(ranks) > 0.001, np.histogram(ranks, bins=BINS, range=(0, DRAWS + 1))[0]


@pytest.mark.parametrize("seed", [1])
def test_the_conjugate_posterior_itself(seed):
    """Beta(2, 2) prior, 13 successes of 20: the posterior is Beta(15, 9)."""
    with kl.Model():
        p = kl.Beta("p", 2.0, 2.0)
        kl.Binomial("k", 20, p, observed=np.array([13]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = kl.sample(random_seed=seed, progressbar=False, backend="numba")
    x = idata["posterior"]["p"].values.ravel()
    ref = stats.beta(15, 9)
    assert abs(x.mean() - ref.mean()) < 4 * ref.std() / np.sqrt(1000)
    assert abs(x.std() / ref.std() - 1) < 0.1
    assert stats.ks_2samp(x[::4], ref.rvs(1000, random_state=0)).pvalue > 1e-3
