"""The utilities PyMC users call, against closed forms and SciPy.

kl.draw, kl.find_MAP, kl.compute_log_likelihood, kl.compute_deterministics, kl.icdf and
kl.model_to_graphviz.
"""

from __future__ import annotations

import re
import sys

import arviz_base
import numpy as np
import pytest
from scipy import optimize, special, stats

import kiln as kl
from kiln._batched import posterior_function
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph import tensor as kt

#: The backend every function here compiles on: the default one (Numba).
MODE = None
COMPILE = {"mode": MODE} if MODE else None


def _posterior(rng: np.random.Generator, **shapes: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {n: rng.normal(size=(2, 6, *s)) for n, s in shapes.items()}


# --- draw -------------------------------------------------------------------------------------


def test_draw_moments_and_shapes():
    n = 4000
    x = kl.draw(kl.Normal.dist(1.0, 2.0, size=3), draws=n, random_seed=1, mode=MODE)
    assert x.shape == (n, 3)
    # mean within 4 standard errors; the sd's standard error is about sd / sqrt(2n)
    assert np.all(np.abs(x.mean(0) - 1.0) < 4 * 2.0 / np.sqrt(n))
    assert np.all(np.abs(x.std(0) - 2.0) < 4 * 2.0 / np.sqrt(2 * n))
    g = kl.draw(kl.Gamma.dist(3.0, 2.0), draws=n, random_seed=2, mode=MODE)
    assert g.shape == (n,)
    assert stats.kstest(g, stats.gamma(3.0, scale=0.5).cdf).pvalue > 1e-3
    one = kl.draw(kl.Normal.dist(0.0, 1.0, size=3), random_seed=3, mode=MODE)
    assert one.shape == (3,)


def test_draw_list_seeds_and_model_variables():
    with kl.Model():
        mu = kl.Normal("mu", 0.0, 1.0)
        x = kl.Normal("x", mu, 1.0)
    a, b = kl.draw([mu, x], draws=4000, random_seed=5, mode=MODE)
    assert a.shape == b.shape == (4000,)
    # x = mu + N(0, 1): var(x) = 2, cov(mu, x) = 1
    assert abs(np.var(b) - 2.0) < 4 * 2.0 * np.sqrt(2 / 4000)
    assert abs(np.cov(a, b)[0, 1] - 1.0) < 0.15
    again = kl.draw([mu, x], draws=4000, random_seed=5, mode=MODE)
    np.testing.assert_array_equal(again[1], b)
    other = kl.draw(x, draws=10, random_seed=6, mode=MODE)
    assert not np.allclose(other, b[:10])


def test_draw_bad_input():
    rv = kl.Normal.dist(0.0, 1.0)
    with pytest.raises(KilnValueError, match="draws"):
        kl.draw(rv, draws=0)
    with pytest.raises(KilnTypeError, match="vars"):
        kl.draw("mu")
    with pytest.raises(KilnValueError, match="empty"):
        kl.draw([])


# --- find_MAP ---------------------------------------------------------------------------------


def test_find_map_normal_normal():
    y = np.array([0.3, 1.2, -0.4, 2.0, 0.9])
    m0, s0, sigma = 0.5, 2.0, 0.8
    with kl.Model() as m:
        mu = kl.Normal("mu", m0, s0)
        kl.Deterministic("two_mu", 2.0 * mu)
        kl.Normal("y", mu, sigma, observed=y)
    point, raw = kl.find_MAP(model=m, progressbar=False, return_raw=True, compile_kwargs=COMPILE)
    precision = 1 / s0**2 + len(y) / sigma**2
    mode = (m0 / s0**2 + y.sum() / sigma**2) / precision
    assert abs(point["mu"] - mode) < 1e-5
    assert abs(point["two_mu"] - 2 * mode) < 2e-5
    assert raw.success
    assert set(point) == {"mu", "two_mu"}


def test_find_map_beta_binomial_constrained_mode():
    a, b, n, k = 2.5, 4.0, 20, 7
    with kl.Model() as m:
        p = kl.Beta("p", a, b)
        kl.Binomial("k", n, p, observed=k)
    point = kl.find_MAP(model=m, progressbar=False, compile_kwargs=COMPILE)
    mode = (a + k - 1) / (a + b + n - 2)  # of the density of p, not of logit(p)
    assert abs(point["p"] - mode) < 1e-5
    assert abs(point["p_logodds__"] - special.logit(point["p"])) < 1e-12
    assert "p_logodds__" not in kl.find_MAP(
        model=m, progressbar=False, include_transformed=False, compile_kwargs=COMPILE
    )


def test_find_map_start_vars_progress_and_errors(capsys):
    y = np.array([1.0, 2.0, 3.0])
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 10.0)
        s = kl.HalfNormal("s", 5.0)
        kl.Normal("y", mu, s, observed=y)
    # s fixed at its start: the mode of mu is then the normal-normal one with sigma = 2
    point = kl.find_MAP(
        start={"s": 2.0}, vars=[mu], model=m, progressbar=True, compile_kwargs=COMPILE
    )
    assert "find_MAP" in capsys.readouterr().err
    assert abs(point["s"] - 2.0) < 1e-12
    mode = (y.sum() / 4.0) / (1 / 100 + 3 / 4.0)
    assert abs(point["mu"] - mode) < 1e-5
    # the same start on the sampling scale
    again = kl.find_MAP(
        start={"s_log__": np.log(2.0)},
        vars=["mu"],
        model=m,
        progressbar=False,
        compile_kwargs=COMPILE,
    )
    assert abs(again["mu"] - point["mu"]) < 1e-8
    with pytest.raises(KilnValueError, match="nope"):
        kl.find_MAP(start={"nope": 1.0}, model=m, progressbar=False)
    with pytest.raises(KilnValueError, match="vars"):
        kl.find_MAP(vars=["y"], model=m, progressbar=False)
    with pytest.warns(UserWarning, match="maxeval"):
        kl.find_MAP(model=m, maxeval=2, progressbar=False, compile_kwargs=COMPILE)


def test_find_map_discrete_needs_a_gradient_free_method():
    with kl.Model() as m:
        p = kl.Beta("p", 2.0, 2.0)
        z = kl.Bernoulli("z", p)
    with pytest.raises(KilnValueError, match=r"\['z'\].*Powell"):
        kl.find_MAP(model=m, progressbar=False)
    with m:
        kl.Normal("y", z * 2.0, 1.0, observed=[1.9, 2.2])
    point = kl.find_MAP(model=m, method="Powell", progressbar=False, compile_kwargs=COMPILE)
    # z = 1 explains y; then p's mode under Beta(2, 2) and one success is (2 + 1 - 1) / 3
    assert point["z"] == 1 and point["z"].dtype.kind == "i"
    assert abs(point["p"] - 2.0 / 3.0) < 1e-5


# --- compute_log_likelihood -------------------------------------------------------------------


def test_compute_log_likelihood_against_scipy():
    rng = np.random.default_rng(0)
    y = np.array([0.3, 1.2, -0.4, 2.0])
    x = np.array([0.0, 1.0, 2.0])
    counts = np.array([1, 4, 9])
    with kl.Model(coords={"obs": list("abcd")}) as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        s = kl.HalfNormal("s", 1.0)
        xd = kl.Data("x", x)
        kl.Normal("y", mu, s, observed=y, dims="obs")
        kl.Poisson("c", kt.exp(mu + 0.5 * xd), observed=counts)
    post = _posterior(rng, mu=())
    post["s"] = np.exp(rng.normal(size=(2, 6)))
    idata = arviz_base.from_dict({"posterior": post})
    out = kl.compute_log_likelihood(idata, model=m, compile_kwargs=COMPILE)
    assert out is idata
    ll = idata["log_likelihood"]
    assert ll["y"].dims == ("chain", "draw", "obs")
    assert list(ll["obs"].values) == list("abcd")
    want_y = stats.norm.logpdf(y, post["mu"][..., None], post["s"][..., None])
    np.testing.assert_allclose(ll["y"].values, want_y, rtol=1e-10)
    rate = np.exp(post["mu"][..., None] + 0.5 * x)
    np.testing.assert_allclose(ll["c"].values, stats.poisson.logpmf(counts, rate), rtol=1e-10)
    only = kl.compute_log_likelihood(
        idata, var_names=["c"], model=m, extend_inferencedata=False, compile_kwargs=COMPILE
    )
    assert list(only.data_vars) == ["c"]
    with pytest.raises(KilnValueError, match="observed variables"):
        kl.compute_log_likelihood(idata, var_names=["mu"], model=m)
    with pytest.raises(KilnTypeError, match="DataTree"):
        kl.compute_log_likelihood(post, model=m)


def test_compute_log_likelihood_multivariate_and_prefixed_names():
    cov = np.array([[1.0, 0.3], [0.3, 2.0]])
    y = np.array([[0.1, 0.5], [1.0, -1.0], [0.3, 0.2]])
    with kl.Model(coords={"obs": range(3), "k": ["a", "b"]}, name="outer") as m:
        mu = kl.Normal("mu", 0.0, 1.0, dims="k")
        kl.MvNormal("y", mu, cov=cov, observed=y, dims=("obs", "k"))
    post = {"outer::mu": np.random.default_rng(3).normal(size=(2, 3, 2))}
    idata = arviz_base.from_dict({"posterior": post})
    ll = kl.compute_log_likelihood(
        idata, model=m, extend_inferencedata=False, compile_kwargs=COMPILE
    )
    assert ll["outer::y"].dims == ("chain", "draw", "obs")  # the core dim is summed
    want = [
        [stats.multivariate_normal(post["outer::mu"][c, d], cov).logpdf(y) for d in range(3)]
        for c in range(2)
    ]
    np.testing.assert_allclose(ll["outer::y"].values, want, rtol=1e-10)


def test_log_likelihood_is_batched_over_draws():
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        xd = kl.Data("x", np.arange(3.0))
        kl.Normal("y", mu * xd, 1.0, observed=np.ones(3))
    info = m.observed_variables[0]
    term = info.distribution.logp(info.value, *info.params)
    f = posterior_function(m, [term], MODE)
    assert f.problem is None
    assert f.names == ["mu"]


@pytest.mark.filterwarnings("ignore::kiln.SamplingWarning")  # a short run
def test_compute_log_likelihood_equals_sample_log_likelihood():
    y = np.array([0.5, -0.2, 1.1])
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("y", mu, 1.0, observed=y)
        idata = kl.sample(
            draws=20,
            tune=20,
            chains=1,
            random_seed=1,
            backend="vm",
            progressbar=False,
            idata_kwargs={"log_likelihood": True},
        )
    from_sample = idata["log_likelihood"]["y"].values
    computed = kl.compute_log_likelihood(idata, model=m, extend_inferencedata=False)
    np.testing.assert_allclose(computed["y"].values, from_sample, rtol=1e-12)


# --- compute_deterministics -------------------------------------------------------------------


def test_compute_deterministics_against_numpy_and_posterior():
    rng = np.random.default_rng(1)
    with kl.Model(coords={"g": ["a", "b", "c"]}) as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        s = kl.HalfNormal("s", 1.0)
        z = kl.Normal("z", 0.0, 1.0, dims="g")
        kl.Deterministic("theta", mu + s * z, dims="g")
        kl.Deterministic("s2", s**2)
    post = _posterior(rng, mu=(), z=(3,))
    post["s"] = np.exp(rng.normal(size=(2, 6)))
    ds = arviz_base.from_dict({"posterior": post}, dims={"z": ["g"]})["posterior"].to_dataset()
    out = kl.compute_deterministics(ds, model=m, compile_kwargs=COMPILE)
    assert out["theta"].dims == ("chain", "draw", "g")
    want = post["mu"][..., None] + post["s"][..., None] * post["z"]
    np.testing.assert_allclose(out["theta"].values, want, rtol=1e-12)
    np.testing.assert_allclose(out["s2"].values, post["s"] ** 2, rtol=1e-12)
    merged = kl.compute_deterministics(
        ds, var_names=["s2"], model=m, merge_dataset=True, compile_kwargs=COMPILE
    )
    assert {"mu", "s", "z", "s2"} <= set(merged.data_vars)
    assert "theta" not in merged.data_vars
    with pytest.raises(KilnValueError, match="deterministics"):
        kl.compute_deterministics(ds, var_names=["mu"], model=m)


@pytest.mark.filterwarnings("ignore::kiln.SamplingWarning")  # a short run
def test_compute_deterministics_equal_the_posterior_ones():
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        s = kl.HalfNormal("s", 1.0)
        kl.Deterministic("ratio", mu / s)
        kl.Normal("y", mu, s, observed=[0.1, 0.4, -0.3])
        idata = kl.sample(
            draws=20, tune=20, chains=2, random_seed=2, backend="vm", progressbar=False
        )
    out = kl.compute_deterministics(idata["posterior"], model=m)
    np.testing.assert_allclose(out["ratio"].values, idata["posterior"]["ratio"].values, rtol=1e-12)


# --- icdf -------------------------------------------------------------------------------------


def _kumaraswamy_ppf(q: np.ndarray, a: float, b: float) -> np.ndarray:
    """Return the root of the CDF ``1 - (1 - x^a)^b = q`` (Brent's method, not kiln's)."""

    def root(qi: float) -> float:
        return optimize.brentq(lambda x: 1 - (1 - x**a) ** b - qi, 0.0, 1.0, xtol=1e-15)

    return np.array([root(qi) for qi in q])


CONTINUOUS = [
    (kl.Normal, (1.0, 2.0), stats.norm(1.0, 2.0).ppf),
    (kl.HalfNormal, (1.5,), stats.halfnorm(scale=1.5).ppf),
    (kl.LogNormal, (0.3, 0.7), stats.lognorm(0.7, scale=np.exp(0.3)).ppf),
    (kl.Uniform, (-1.0, 3.0), stats.uniform(-1.0, 4.0).ppf),
    (kl.Exponential, (2.0,), stats.expon(scale=0.5).ppf),
    (kl.Cauchy, (1.0, 2.0), stats.cauchy(1.0, 2.0).ppf),
    (kl.HalfCauchy, (2.0,), stats.halfcauchy(scale=2.0).ppf),
    (kl.Laplace, (1.0, 2.0), stats.laplace(1.0, 2.0).ppf),
    (kl.Logistic, (1.0, 2.0), stats.logistic(1.0, 2.0).ppf),
    (kl.Weibull, (1.5, 2.0), stats.weibull_min(1.5, scale=2.0).ppf),
    (kl.Gumbel, (1.0, 2.0), stats.gumbel_r(1.0, 2.0).ppf),
    (kl.Pareto, (3.0, 2.0), stats.pareto(3.0, scale=2.0).ppf),
    (kl.Kumaraswamy, (2.0, 3.0), lambda q: _kumaraswamy_ppf(q, 2.0, 3.0)),
]
DISCRETE = [
    (kl.Bernoulli, (0.3,), stats.bernoulli(0.3).ppf),
    (kl.Geometric, (0.3,), stats.geom(0.3).ppf),
    (kl.DiscreteUniform, (2, 7), stats.randint(2, 8).ppf),
]
Q = np.array([1e-6, 0.01, 0.2, 0.5, 0.7, 0.8, 0.99, 1 - 1e-6])


def test_icdf_against_scipy_ppf_and_the_cdf():
    outputs, names = [], []
    for dist, params, _ in CONTINUOUS + DISCRETE:
        outputs.append(kl.icdf(dist.dist(*params), Q))
        names.append(dist.__name__)
    # icdf(cdf(x)) = x, with the CDF from kiln's own logcdf
    x_of = {}
    for dist, params, ppf in CONTINUOUS:
        x = ppf(np.array([0.05, 0.3, 0.6, 0.95]))
        rv = dist.dist(*params)
        outputs.append(kl.icdf(rv, kt.exp(kl.logcdf(rv, x))))
        x_of[dist.__name__] = x
    values = kl.function([], outputs, mode=MODE)()
    got = dict(zip(names, values[: len(names)], strict=True))
    for dist, _, ppf in CONTINUOUS:
        np.testing.assert_allclose(got[dist.__name__], ppf(Q), rtol=1e-8, err_msg=dist.__name__)
    for dist, _, ppf in DISCRETE:
        np.testing.assert_array_equal(got[dist.__name__], ppf(Q), err_msg=dist.__name__)
        assert got[dist.__name__].dtype == np.float64
    for (dist, _, _), back in zip(CONTINUOUS, values[len(names) :], strict=True):
        np.testing.assert_allclose(back, x_of[dist.__name__], rtol=1e-8, err_msg=dist.__name__)


def test_icdf_outside_unit_interval_and_missing():
    q = np.array([-0.1, 1.5])
    outs = [kl.icdf(kl.Normal.dist(0.0, 1.0), q), kl.icdf(kl.Geometric.dist(0.4), q)]
    for v in kl.function([], outs, mode="FAST_COMPILE")():
        assert np.all(np.isnan(v))
    with pytest.raises(NotImplementedError, match="Gamma"):
        kl.icdf(kl.Gamma.dist(2.0, 1.0), 0.5)
    with pytest.raises(NotImplementedError, match="ChiSquared"):
        kl.icdf(kl.ChiSquared.dist(3.0), 0.5)


# --- model_to_graphviz ------------------------------------------------------------------------


def _graph_model() -> kl.Model:
    with kl.Model(coords={"obs": range(4), "g": ["a", "b"]}) as m:
        x = kl.Data("x", np.arange(4.0), dims="obs")
        mu = kl.Normal("mu", 0.0, 1.0)
        s = kl.HalfNormal("s", 1.0)
        z = kl.Normal("z", 0.0, 1.0, dims="g")
        theta = kl.Deterministic("theta", mu + s * z, dims="g")
        kl.Normal("y", theta[0] + x, s, observed=np.zeros(4), dims="obs")
        kl.Potential("pen", -(mu**2))
    return m


def _nodes_and_edges(source: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    found = re.findall(r"^\s*(\w+) \[(label=.*?)\]$", source, re.S | re.M)
    nodes = dict(found)
    edges = set(re.findall(r"^\s*(\w+) -> (\w+)$", source, re.M))
    return nodes, edges


def test_model_to_graphviz_structure():
    m = _graph_model()
    graph = kl.model_to_graphviz(m)
    assert type(graph).__name__ == "Digraph"
    nodes, edges = _nodes_and_edges(graph.source)
    assert set(nodes) == {"x", "mu", "s", "z", "theta", "y", "pen"}
    assert "Normal" in nodes["mu"] and "shape=ellipse" in nodes["mu"]
    assert "style=filled" not in nodes["mu"]
    assert "HalfNormal" in nodes["s"]
    assert "fillcolor=gray" in nodes["y"] and "style=filled" in nodes["y"]
    assert "Deterministic" in nodes["theta"] and "shape=box" in nodes["theta"]
    assert "Data" in nodes["x"] and 'style="rounded, filled"' in nodes["x"]
    assert "Potential" in nodes["pen"] and "shape=octagon" in nodes["pen"]
    assert edges == {
        ("mu", "theta"),
        ("s", "theta"),
        ("z", "theta"),
        ("theta", "y"),
        ("x", "y"),
        ("s", "y"),
        ("mu", "pen"),
    }
    plates = dict(re.findall(r'subgraph "cluster(.*?)" \{(.*?)\}', graph.source, re.S))
    assert set(plates) == {"g (2)", "obs (4)"}
    assert {"z", "theta"} == set(re.findall(r"^\s*(\w+) \[", plates["g (2)"], re.M))
    assert {"x", "y"} == set(re.findall(r"^\s*(\w+) \[", plates["obs (4)"], re.M))


def test_model_to_graphviz_var_names_and_errors(monkeypatch):
    m = _graph_model()
    nodes, edges = _nodes_and_edges(kl.model_to_graphviz(m, var_names=["theta"]).source)
    assert set(nodes) == {"mu", "s", "z", "theta"}
    assert ("theta", "y") not in edges
    with pytest.raises(KilnValueError, match="nope"):
        kl.model_to_graphviz(m, var_names=["nope"])
    with pytest.raises(KilnValueError, match="formatting"):
        kl.model_to_graphviz(m, formatting="latex")
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(ImportError, match="pip install graphviz"):
        kl.model_to_graphviz(m)
