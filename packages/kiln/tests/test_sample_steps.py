"""kl.sample with step methods: assignment, discrete latents against exact marginals, errors."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from arviz_stats import ess
from scipy import stats

import kiln as kl
from kiln_graph import KilnTypeError, KilnValueError

Y = 1.5
P_Z = 0.3
SHIFT = 2.0


def _switch() -> kl.Model:
    """Return z ~ Bernoulli(0.3) switching the mean of y ~ N(mu + 2 z, 1); mu ~ N(0, 1)."""
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        z = kl.Bernoulli("z", P_Z)
        kl.Normal("y", mu + SHIFT * z, 1.0, observed=Y)
    return m


def _p_switch() -> float:
    w = np.array([1 - P_Z, P_Z]) * stats.norm.pdf(Y, [0.0, SHIFT], np.sqrt(2.0))
    return float(w[1] / w.sum())


W = np.array([0.5, 0.3, 0.2])
M = np.array([-1.0, 0.5, 2.0])


def _mixture() -> kl.Model:
    """Return a mixture's assignment c of one point y ~ N(mu + M[c], 1); mu ~ N(0, 1)."""
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        c = kl.Categorical("c", p=W)
        kl.Normal("y", mu + kl.tensor.as_tensor(M)[c], 1.0, observed=0.8)
    return m


def _p_mixture() -> np.ndarray:
    post = W * stats.norm.pdf(0.8, M, np.sqrt(2.0))
    return post / post.sum()  # type: ignore[no-any-return]


def _sample(model: kl.Model, **kwargs):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)  # short chains: low ESS
        options = {"draws": 500, "tune": 300, "chains": 2, "progressbar": False}
        return kl.sample(**{**options, **kwargs})


def _within_mc_error(x: np.ndarray, p: float) -> None:
    e = float(ess(x.astype(float), chain_axis=0, draw_axis=1))
    assert abs(x.mean() - p) < 4 * np.sqrt(p * (1 - p) / e), (x.mean(), p, e)


def test_a_bernoulli_latent_just_works_and_matches_its_marginal(capsys):
    idata = _sample(_switch(), draws=1000, random_seed=1, backend="numba", progressbar=True)
    assert "CompoundStep\n>NUTS: [mu]\n>BinaryMetropolis: [z]" in capsys.readouterr().err
    z = idata["posterior"]["z"]
    assert z.dtype == np.int64 and z.shape == (2, 1000)
    _within_mc_error(z.values, _p_switch())
    names = set(idata["sample_stats"].data_vars)
    assert {"diverging", "step_size", "tree_depth", "accept", "accepted", "tune"} <= names
    assert idata.attrs["step"].startswith("CompoundStep")


@pytest.mark.parametrize("proposal", ["proportional", "uniform"])
def test_a_categorical_latent_matches_its_marginal(proposal):
    step = kl.CategoricalGibbsMetropolis(["c"], proposal=proposal)
    idata = _sample(
        _mixture(), draws=1000, random_seed=2, step=[kl.Slice(["mu"]), step], backend="numba"
    )
    c = idata["posterior"]["c"].values
    for k, p in enumerate(_p_mixture()):
        _within_mc_error(c == k, float(p))


@pytest.mark.parametrize(
    "step",
    [kl.Metropolis, kl.Slice, kl.DEMetropolisZ, kl.DEMetropolis],
)
def test_each_gradient_free_step_on_a_conjugate_normal_mean(step):
    """Check mu | y ~ N(sum(y) / 5, 1 / sqrt(5)) for mu ~ N(0, 1), y_i ~ N(mu, 1), n = 4."""
    y = np.array([0.5, 1.2, 0.3, 0.9])
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("y", mu, 1.0, observed=y)
    with m:
        method = step([mu]) if step is not kl.DEMetropolis else step()
    idata = _sample(m, draws=1500, tune=1000, chains=4, random_seed=3, step=method, backend="numba")
    x = idata["posterior"]["mu"].values
    e = float(ess(x, chain_axis=0, draw_axis=1))
    sd = 1 / np.sqrt(5)
    assert e > 300
    assert abs(x.mean() - y.sum() / 5) < 4 * sd / np.sqrt(e)
    assert abs(x.std() / sd - 1) < 0.1


def test_explicit_steps_lists_and_compound_steps_agree_by_seed():
    with _switch() as m:
        steps = [kl.Metropolis([m["mu"]], scaling=0.5), kl.BinaryMetropolis([m["z"]])]
    a = _sample(m, random_seed=4, step=steps, cores=1)
    b = _sample(m, random_seed=4, step=kl.CompoundStep(steps), cores=2)
    np.testing.assert_array_equal(a["posterior"]["mu"].values, b["posterior"]["mu"].values)
    stats_ = a["sample_stats"]
    assert stats_["accept"].shape == (2, 500, 2)  # two steps report it: one column each
    assert stats_["scaling"].shape == (2, 500)


def test_nuts_alone_runs_the_compiled_engine():
    with kl.Model() as m:
        kl.Normal("mu", 0.0, 1.0)
    a = _sample(m, random_seed=5, step=kl.NUTS(target_accept=0.9))
    b = _sample(m, random_seed=5, target_accept=0.9)
    np.testing.assert_array_equal(a["posterior"]["mu"].values, b["posterior"]["mu"].values)


def test_the_assignment_goes_to_the_kiln_logger_when_it_has_a_handler(capsys):
    logger = logging.getLogger("kiln")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        _sample(_mixture(), draws=20, tune=20, random_seed=1, progressbar=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert records == ["CompoundStep\n>NUTS: [mu]\n>CategoricalGibbsMetropolis: [c]"]
    assert "CompoundStep" not in capsys.readouterr().err
    _sample(_mixture(), draws=20, tune=20, random_seed=1, progressbar=False)
    assert capsys.readouterr().err == ""


def test_other_discrete_variables_get_metropolis(capsys):
    with kl.Model() as m:
        n = kl.Poisson("n", 3.0)
        kl.Normal("y", n, 2.0, observed=[1.0, 2.5])
    idata = _sample(m, draws=200, tune=200, random_seed=1, progressbar=True)
    assert "Metropolis: [n]" in capsys.readouterr().err
    assert idata["posterior"]["n"].dtype == np.int64 and bool((idata["posterior"]["n"] >= 0).all())


def test_bad_steps_are_clear_errors():
    m = _switch()
    with m:
        mu, z = m["mu"], m["z"]
    other = kl.Model()
    with other:
        stray = kl.Normal("stray", 0.0, 1.0)
    cases = [
        (KilnValueError, "not a free variable", {"step": kl.Metropolis([stray], model=m)}),
        (KilnValueError, "not a free variable", {"step": kl.Metropolis(["nope"], model=m)}),
        (KilnValueError, "given to two", {"step": [kl.Metropolis([mu, z]), kl.Slice([mu])]}),
        (KilnValueError, "Slice cannot sample z", {"step": kl.Slice([z])}),
        (KilnValueError, "BinaryMetropolis cannot sample mu", {"step": kl.BinaryMetropolis([mu])}),
        (KilnValueError, "nuts_sampler='numpyro'", {"nuts_sampler": "numpyro"}),
        (KilnValueError, "chains: DEMetropolis", {"step": kl.DEMetropolis([mu]), "chains": 2}),
        (KilnTypeError, "step: expected", {"step": "Metropolis"}),
        (KilnTypeError, "nuts_sampler_kwargs", {"nuts_sampler_kwargs": {"chunk": 5}}),
    ]
    for error, match, kwargs in cases:
        with pytest.raises(error, match=match):
            _sample(m, **kwargs)
    with pytest.raises(KilnTypeError, match="Metropolis"):
        kl.Metropolis([mu], scalling=2.0)
    with pytest.raises(KilnValueError, match="scaling"):
        kl.Metropolis([mu], scaling=0.0)
