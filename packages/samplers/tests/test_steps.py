"""kiln's gradient-free steps and compound steps on hand-written log-densities (no graphs).

References: a correlated Gaussian (means, sds), a Poisson pmf (an integer entry), and
two models with a discrete latent whose marginal posterior is exact: a Bernoulli
switch of a normal mean, and a three-component mixture's assignment of one point.
Means are checked within 4 Monte Carlo standard errors from the run's bulk ESS.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from arviz_stats import ess, rhat
from scipy import special, stats

import kiln_samplers as ks
from kiln_samplers._progress import Progress
from kiln_samplers._steps import tune_scaling

MU = np.array([1.0, -2.0])
SD = np.array([1.0, 0.5])
RHO = 0.5
COV = np.array([[SD[0] ** 2, RHO * SD[0] * SD[1]], [RHO * SD[0] * SD[1], SD[1] ** 2]])
PREC = np.linalg.inv(COV)


class Model:
    """The protocol of a compiled model around ``logp(x)`` (gradient by ``grad``)."""

    out_names = ["x"]
    dims = {"x": None}
    coords: dict = {}

    def __init__(self, logp, ndim, grad=None, discrete=None, start=None):
        self._logp, self._grad, self.ndim = logp, grad, ndim
        self.discrete_mask = np.zeros(ndim, bool) if discrete is None else np.asarray(discrete)
        self._start = np.zeros(ndim) if start is None else np.asarray(start, float)
        self.calls = 0

    def logp(self, x):
        self.calls += 1
        return self._logp(x)

    def logp_dlogp(self, x):
        return self._logp(x), self._grad(x)

    def expand(self, x):
        return {"x": x.copy()}

    def initial_point(self, seed=None):
        noise = np.random.default_rng(seed).uniform(-1, 1, self.ndim)
        return self._start + np.where(self.discrete_mask, 0.0, noise)


def gaussian() -> Model:
    def logp(x):
        d = x - MU
        return -0.5 * float(d @ PREC @ d)

    return Model(logp, 2, grad=lambda x: -PREC @ (x - MU))


def _sample(model, step, chains=4, draws=1000, tune=500, seed=1, **kwargs):
    return ks.sample_steps(
        model, step, draws=draws, tune=tune, chains=chains, random_seed=seed, progressbar=False,
        **kwargs,
    )  # fmt: skip


def _check_mean(draws, mean, sd, max_rhat=1.02):
    """Means within 4 MCSE (bulk ESS of this run), R-hat below ``max_rhat``."""
    e = np.atleast_1d(ess(draws, chain_axis=0, draw_axis=1))
    r = np.atleast_1d(rhat(draws, chain_axis=0, draw_axis=1))
    got = draws.reshape(-1, *draws.shape[2:]).mean(0)
    assert np.all(np.abs(got - mean) < 4 * np.asarray(sd) / np.sqrt(e)), (got, mean, e)
    assert np.all(r < max_rhat), r
    return e


@pytest.mark.parametrize(
    "step",
    [
        ks.Metropolis(),
        ks.Slice(),
        ks.DEMetropolis(),
        ks.DEMetropolisZ(),
        ks.CompoundStep([ks.Slice([0]), ks.Metropolis([1])]),
    ],
    ids=["metropolis", "slice", "demetropolis", "demetropolisz", "compound"],
)
def test_a_correlated_gaussian(step):
    trace = _sample(gaussian(), step, draws=1500, tune=1000)
    x = trace.posterior["x"]
    e = _check_mean(x, MU, SD)
    assert e.min() > 200
    flat = x.reshape(-1, 2)
    np.testing.assert_allclose(flat.std(0), SD, rtol=0.12)
    np.testing.assert_allclose(np.corrcoef(flat.T)[0, 1], RHO, atol=0.08)


def test_metropolis_tunes_its_scale_and_reports_its_stats():
    wide = Model(lambda x: -0.5 * float(x @ x) / 100.0**2, 1)
    trace = _sample(wide, ks.Metropolis(tune_interval=50), chains=2, draws=300, tune=1000)
    stats_ = trace.sample_stats
    assert set(stats_) == {"accept", "accepted", "scaling", "tune"}
    assert stats_["accepted"].dtype == bool and stats_["accept"].shape == (2, 300)
    assert not stats_["tune"].any()
    assert np.all(stats_["scaling"] > 20)  # from 1 towards the target's scale (100)
    assert np.all(stats_["scaling"] == stats_["scaling"][:, :1])  # fixed after warm-up
    assert 0.1 < stats_["accepted"].mean() < 0.7
    assert tune_scaling(1.0, 0.0) == 0.1 and tune_scaling(1.0, 0.99) == 10.0
    assert tune_scaling(1.0, 0.3) == 1.0


def test_metropolis_rounds_jumps_of_integer_entries():
    lam = 3.0

    def logp(x):
        k = x[0]
        return k * np.log(lam) - lam - special.gammaln(k + 1) if k >= 0 else -np.inf

    model = Model(logp, 1, discrete=[True], start=[3.0])
    trace = _sample(model, ks.Metropolis(), draws=2000, tune=500)
    x = trace.posterior["x"][..., 0]
    assert np.all(x == np.round(x))
    _check_mean(x, lam, np.sqrt(lam))
    assert abs(x.var() - lam) < 0.5


def _bernoulli_switch():
    """Return a Bernoulli switch z of a normal mean (y ~ N(mu + 2 z, 1)) and P(z = 1 | y)."""
    y, p, shift = 1.5, 0.3, 2.0

    def logp(x):
        mu, z = x
        if z not in (0.0, 1.0):
            return -np.inf
        return np.log(p if z else 1 - p) - 0.5 * mu**2 - 0.5 * (y - mu - shift * z) ** 2

    def grad(x):
        mu, z = x
        return np.array([-mu + (y - mu - shift * z), 0.0])

    w = np.array([1 - p, p]) * stats.norm.pdf(y, [0.0, shift], np.sqrt(2.0))
    return Model(logp, 2, grad=grad, discrete=[False, True]), w[1] / w.sum()


def test_nuts_and_binary_metropolis_match_the_exact_marginal():
    model, p1 = _bernoulli_switch()
    trace = _sample(model, [ks.NUTS([0]), ks.BinaryMetropolis([1])], chains=2, draws=1000)
    z = trace.posterior["x"][..., 1]
    assert set(np.unique(z)) == {0.0, 1.0}
    _check_mean(z, p1, np.sqrt(p1 * (1 - p1)))
    stats_ = trace.sample_stats
    assert {*ks.STAT_NAMES, "accept", "accepted", "tune"} == set(stats_)
    assert stats_["diverging"].dtype == bool and stats_["tree_depth"].dtype == np.int64
    assert stats_["accept"].shape == (2, 1000)


def _mixture_assignment():
    """Return a mixture's assignment c of one point y ~ N(m[c], s[c]) and P(c | y)."""
    w, m, s, y = (
        np.array([0.5, 0.3, 0.2]),
        np.array([-1.0, 0.5, 2.0]),
        np.array([1.0, 0.7, 0.5]),
        0.8,
    )

    log_w = np.log(w)

    def logp(x):
        mu, c = x[0], x[1]
        if c not in (0.0, 1.0, 2.0):  # outside the support
            return -np.inf
        k = int(c)
        return log_w[k] - 0.5 * ((y - m[k]) / s[k]) ** 2 - np.log(s[k]) - 0.5 * mu**2

    post = w * stats.norm.pdf(y, m, s)
    return Model(
        logp, 2, grad=lambda x: np.array([-x[0], 0.0]), discrete=[False, True]
    ), post / post.sum()


@pytest.mark.parametrize("proposal", ["proportional", "uniform"])
def test_categorical_gibbs_matches_the_exact_assignment_probabilities(proposal):
    model, probs = _mixture_assignment()
    step = [ks.Slice([0]), ks.CategoricalGibbsMetropolis([1], n_categories=3, proposal=proposal)]
    trace = _sample(model, step, draws=1500)
    c = trace.posterior["x"][..., 1]
    for k in range(3):
        _check_mean((c == k).astype(float), probs[k], np.sqrt(probs[k] * (1 - probs[k])))
    accept = trace.sample_stats["accept"]
    assert np.all(accept == 1.0) if proposal == "proportional" else accept.mean() < 1.0


def test_the_same_seed_gives_the_same_draws_whatever_the_cores():
    model, _ = _bernoulli_switch()
    step = [ks.Metropolis([0]), ks.BinaryMetropolis([1])]
    a = _sample(model, step, chains=3, draws=100, tune=100, seed=5, cores=1)
    b = _sample(model, step, chains=3, draws=100, tune=100, seed=5, cores=3)
    np.testing.assert_array_equal(a.unconstrained, b.unconstrained)
    c = _sample(model, step, chains=3, draws=100, tune=100, seed=6, cores=1)
    assert not np.array_equal(a.unconstrained, c.unconstrained)
    d = _sample(gaussian(), ks.DEMetropolis(), chains=4, draws=50, tune=50, seed=5)
    e = _sample(gaussian(), ks.DEMetropolis(), chains=4, draws=50, tune=50, seed=5)
    np.testing.assert_array_equal(d.unconstrained, e.unconstrained)


def test_a_stat_several_steps_report_gets_a_step_axis():
    trace = _sample(gaussian(), [ks.Metropolis([0]), ks.Metropolis([1])], draws=20, tune=20)
    assert trace.sample_stats["accept"].shape == (4, 20, 2)
    assert trace.sample_stats["accepted"].dtype == bool


def test_a_stop_request_returns_what_was_drawn():
    stop = threading.Event()

    class Stopper(Progress):
        def updater(self, chain):
            def update(n, stats, tuning):
                if not tuning:
                    stop.set()

            return update

    seeds = ks.chain_seeds(1, 1)
    steps = [ks.Slice().bind(gaussian())]
    progress = Stopper(1, 600, enabled=False)
    out = ks.run_step_chains(gaussian(), steps, [0], seeds, 500, 100, progress, stop, chunk=50)
    assert out[0].warmup_done and out[0].n_done == 50
    assert out[0].draws.shape == (50, 2) and out[0].stats[0].shape == (50, 2)


def test_bad_input_is_a_clear_error():
    model, _ = _bernoulli_switch()
    with pytest.raises(ValueError, match="given to two steps"):
        _sample(model, [ks.Metropolis([0, 1]), ks.BinaryMetropolis([1])])
    with pytest.raises(ValueError, match=r"entries \[1\] have no step"):
        _sample(model, ks.Slice([0]))
    with pytest.raises(ValueError, match="continuous values only"):
        _sample(model, [ks.Slice([0, 1])])
    with pytest.raises(ValueError, match="chains >= 3"):
        _sample(gaussian(), ks.DEMetropolis(), chains=2)
    with pytest.raises(ValueError, match="scaling"):
        ks.Metropolis(scaling=-1.0)
    with pytest.raises(ValueError, match="proposal"):
        ks.CategoricalGibbsMetropolis(proposal="nope")
    with pytest.raises(ValueError, match="indices"):
        ks.Metropolis([0, 0])
    with pytest.raises(TypeError, match="step"):
        _sample(model, "Metropolis")
    with pytest.raises(ValueError, match="draws"):
        _sample(model, [ks.NUTS([0]), ks.BinaryMetropolis([1])], draws=0)
