"""The Model: names, dims, observed data, Data, deterministics, potentials, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import kiln
import kiln as kl
import kiln_compile
from kiln_compile import available_linkers
from kiln_graph import KilnTypeError, KilnValueError

VM = kl.Mode(linker="vm")
Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]


def eight_schools() -> kl.Model:
    with kl.Model(coords={"school": list("ABCDEFGH")}) as m:
        mu = kl.Normal("mu", 0, 5)
        tau = kl.HalfCauchy("tau", 5)
        z = kl.Normal("z", 0, 1, dims="school")
        theta = kl.Deterministic("theta", mu + tau * z, dims="school")
        kl.Normal("y", theta, SIGMA, observed=Y, dims="school")
    return m


def test_variables_values_and_dims():
    m = eight_schools()
    assert [v.name for v in m.free_variables] == ["mu", "tau", "z"]
    assert [v.name for v in m.value_vars] == ["mu", "tau_log__", "z"]
    assert m["z"].type.shape == (8,) and m["theta"].type.shape == (8,)
    assert m.named_dims["z"] == ("school",) and "theta" in m and "nope" not in m
    assert m.coords["school"] == tuple("ABCDEFGH")


def test_logp_equals_scipy_and_the_flat_vector_protocol():
    m = eight_schools()
    cm = m.logp_dlogp_function(mode=VM)
    assert cm.ndim == 10 and [b.name for b in cm.layout] == ["mu", "tau_log__", "z"]
    x = cm.initial_point(seed=3)
    mu, log_tau, z = x[0], x[1], x[2:]
    tau = np.exp(log_tau)
    ref = (
        stats.norm(0, 5).logpdf(mu)
        + stats.halfcauchy(scale=5).logpdf(tau)
        + log_tau
        + stats.norm().logpdf(z).sum()
        + stats.norm(mu + tau * z, SIGMA).logpdf(Y).sum()
    )
    logp, grad = cm.logp_dlogp(x)
    assert logp == pytest.approx(ref, rel=1e-12)
    assert cm.logp(x) == pytest.approx(ref, rel=1e-12)
    assert grad.flags.c_contiguous and grad.shape == (10,)
    eps = 1e-6
    fd = [(cm.logp(x + eps * e) - cm.logp(x - eps * e)) / (2 * eps) for e in np.eye(10)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)
    out = cm.expand(x)
    assert list(out) == ["mu", "tau", "z", "theta"] == cm.out_names
    np.testing.assert_allclose(out["theta"], mu + tau * z)
    assert out["tau"] == pytest.approx(tau)
    assert cm.dims["theta"] == ("school",) and cm.coords["school"] == tuple("ABCDEFGH")
    point = cm.array_to_point(x)
    np.testing.assert_array_equal(cm.point_to_array(point), x)
    assert m.compile_logp(mode=VM)(point) == pytest.approx(ref, rel=1e-12)
    np.testing.assert_allclose(m.compile_dlogp(mode=VM)(point), grad, rtol=1e-10)


def test_initial_points_are_support_points_and_reproducibly_jittered():
    m = eight_schools()
    start = m.initial_point()
    assert start["mu"] == 0.0 and start["tau_log__"] == pytest.approx(np.log(5.0))
    a, b = m.initial_point(jitter=True, seed=1), m.initial_point(jitter=True, seed=1)
    np.testing.assert_array_equal(a["z"], b["z"])
    assert np.all(np.abs(a["z"]) <= 1) and not np.array_equal(a["z"], start["z"])
    cm = m.logp_dlogp_function(mode=VM)
    np.testing.assert_array_equal(cm.initial_point(7), cm.initial_point(7))


def test_initval_overrides_the_support_point():
    with kl.Model() as m:
        kl.HalfNormal("s", 1.0, initval=3.0)
    assert m.initial_point()["s_log__"] == pytest.approx(np.log(3.0))


def test_point_logps_names_the_variable_that_breaks_the_density():
    m = eight_schools()
    logps = m.point_logps()
    assert set(logps) == {"mu", "tau", "z", "y"} and all(np.isfinite(list(logps.values())))
    with kl.Model() as bad:
        s = kl.HalfNormal("s", 1.0)
        kl.Uniform("u", 0.0, s, observed=np.array([2.0]))  # outside (0, s=1) at the start
    logps = bad.point_logps()
    assert logps["u"] == -np.inf and np.isfinite(logps["s"])


def test_potential_and_deterministic():
    with kl.Model() as m:
        a = kl.Normal("a", 0, 1)
        kl.Potential("pull", -2.0 * a**2)
        kl.Deterministic("a2", a * 2)
    f = m.compile_logp(mode=VM)
    assert f({"a": np.array(0.5)}) == pytest.approx(stats.norm().logpdf(0.5) - 0.5)
    cm = m.logp_dlogp_function(mode=VM)
    assert cm.expand(np.array([0.5]))["a2"] == 1.0


def test_mixtures_logp_against_scipy():
    y = np.array([-1.0, 0.2, 3.1, 2.5])
    with kl.Model() as m:
        w = kl.Dirichlet("w", np.ones(2))
        mu = kl.Normal("mu", 0, 5, shape=2, transform=kl.transforms.ordered, initval=[-1.0, 1.0])
        s = kl.HalfNormal("s", 2)
        kl.NormalMixture("y", w, mu, s, observed=y)
        kl.Mixture("z", w, [kl.Normal.dist(0, 1), kl.Normal.dist(5, 1)])
    point = {
        "w_simplex__": np.array([0.3]),
        "mu_ordered__": np.array([-1.0, np.log(2.0)]),
        "s_log__": np.array(0.1),
        "z": np.array(0.7),
    }
    wv = np.exp([0.3, 0.0]) / np.exp([0.3, 0.0]).sum()
    muv, sv = np.array([-1.0, 1.0]), np.exp(0.1)
    ref = stats.dirichlet(np.ones(2)).logpdf(wv) + stats.norm(0, 5).logpdf(muv).sum()
    ref += stats.halfnorm(scale=2).logpdf(sv)
    ref += logsumexp(np.log(wv) + stats.norm(muv, sv).logpdf(y[:, None]), axis=1).sum()
    ref += logsumexp(np.log(wv) + stats.norm([0, 5], 1).logpdf(0.7))
    assert m.compile_logp(jacobian=False, mode=VM)(point) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixture_of_distributions_drawn_by_graphs(backend: str) -> None:
    """Components may be any univariate distribution: Gumbel and SkewNormal are graphs."""
    y = np.array([-1.5, 0.2, 2.9, 6.0])
    comps = [kl.Gumbel.dist(0.5, 1.5), kl.SkewNormal.dist(3.0, 1.2, alpha=-2.0)]
    with kl.Model() as m:
        w = kl.Dirichlet("w", np.ones(2))
        kl.Mixture("y", w, comps, observed=y)
    wv = np.array([0.4, 0.6])
    point = {"w_simplex__": np.array([np.log(0.4 / 0.6)])}
    lp = m.compile_logp(jacobian=False, mode=kiln.Mode(linker=backend))(point)
    dens = np.stack([stats.gumbel_r(0.5, 1.5).logpdf(y), stats.skewnorm(-2.0, 3.0, 1.2).logpdf(y)])
    ref = (
        stats.dirichlet(np.ones(2)).logpdf(wv) + logsumexp(np.log(wv)[:, None] + dens, axis=0).sum()
    )
    assert lp == pytest.approx(ref, rel=1e-10)
    # Draws: 20,000 of the mixture against its CDF (KS), each component drawn anew.
    draws = kl.draw(
        kl.Mixture.dist(wv, comps, size=20_000), random_seed=3, mode=kiln.Mode(linker=backend)
    )
    mixture = (0.4, stats.gumbel_r(0.5, 1.5)), (0.6, stats.skewnorm(-2.0, 3.0, 1.2))
    assert stats.kstest(draws, lambda x: sum(p * d.cdf(x) for p, d in mixture)).pvalue > 1e-3


def test_custom_dist_logp():
    with kl.Model() as m:
        a = kl.Normal("a", 0, 1)
        kl.CustomDist(
            "c", a, logp=lambda v, loc: -0.5 * (v - loc) ** 2, observed=np.array([1.0, 2.0])
        )
    f = m.compile_logp(mode=VM)
    assert f({"a": np.array(0.5)}) == pytest.approx(stats.norm().logpdf(0.5) - 0.5 * (0.25 + 2.25))


def test_set_data_changes_values_without_recompiling():
    x_data = np.linspace(0.0, 1.0, 5)
    with kl.Model() as m:
        x = kl.Data("x", x_data, dims="obs")
        a = kl.Normal("a", 0, 10)
        b = kl.Normal("b", 0, 10)
        kl.Deterministic("mu", a + b * x, dims="obs")
    cm = m.logp_dlogp_function(mode=VM)
    point = np.array([1.0, 2.0])
    np.testing.assert_allclose(cm.expand(point)["mu"], 1 + 2 * x_data)
    misses = kiln_compile.function_memo_stats.misses
    kl.set_data({"x": np.arange(3.0)}, model=m)
    np.testing.assert_allclose(cm.expand(point)["mu"], [1.0, 3.0, 5.0])
    assert kiln_compile.function_memo_stats.misses == misses  # nothing compiled again
    frozen = kl.freeze_dims_and_data(m)
    assert frozen.dim_lengths["obs"] == 3
    np.testing.assert_allclose(
        frozen.logp_dlogp_function(mode=VM).expand(point)["mu"], [1.0, 3.0, 5.0]
    )


def test_compiling_the_same_model_twice_compiles_once():
    eight_schools().logp_dlogp_function(mode=VM)
    misses = kiln_compile.function_memo_stats.misses
    eight_schools().logp_dlogp_function(mode=VM)
    assert kiln_compile.function_memo_stats.misses == misses


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: kl.Normal("x", 0, 1), kl.ModelError, "no model on the context stack"),
        (
            lambda: _in_model(lambda: (kl.Normal("x", 0, 1), kl.Normal("x", 0, 1))),
            kl.ModelError,
            "already has",
        ),
        (
            lambda: _in_model(lambda: kl.Normal("x", 0, 1, dims="nope")),
            kl.ModelError,
            "unknown dim 'nope'",
        ),
        (
            lambda: _in_model(lambda: kl.Poisson("k", 3.0, observed=[1, -2])),
            KilnValueError,
            "k: observed values must be non-negative",
        ),
        (
            lambda: _in_model(
                lambda: kl.MvNormal("y", np.zeros(2), np.eye(2), observed=[[1.0, np.nan]])
            ),
            kl.ModelError,
            "y: the observed data holds 1 missing",
        ),
        (lambda: _in_model(lambda: kl.Normal("y", np.zeros(3), 1, dims="d2")), Exception, "y:"),
        (
            lambda: _in_model(lambda: kl.Normal("y", 0, -1.0)),
            KilnValueError,
            "y: normal: sigma must be > 0",
        ),
        (
            lambda: _in_model(lambda: kl.Normal("y", 0, 1, bogus=2)),
            KilnTypeError,
            "unknown parameter 'bogus'",
        ),
        (
            lambda: _in_model(lambda: kl.Bernoulli("b", p=0.5, logit_p=0.1)),
            KilnTypeError,
            "exactly one",
        ),
        (lambda: _in_model(lambda: kl.Data("d", [1.0, np.nan])), KilnValueError, "NaN"),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_variable(build, error, match):
    with pytest.raises(error, match=match):
        build()


def _in_model(fn):
    with kl.Model(coords={"d2": [0, 1]}):
        fn()


def test_a_model_with_no_free_variables_cannot_be_sampled():
    with kl.Model() as m:
        kl.Normal("y", 0, 1, observed=[0.1])
    with pytest.raises(kl.ModelError, match="no free variables"):
        m.logp_dlogp_function(mode=VM)


def test_dist_outside_a_model_is_an_unnamed_draw():
    x = kl.Normal.dist(1.0, 2.0, size=3)
    assert x.type.shape == (3,)
    logp = kl.function([], kl.logp(x, np.array([1.0, 2.0, 3.0])), mode=VM)()
    np.testing.assert_allclose(logp, stats.norm(1, 2).logpdf([1.0, 2.0, 3.0]))


def test_an_initial_point_off_the_transform_is_a_clear_error():
    with kl.Model() as m:
        kl.Normal("mu", 0, 2, shape=2, transform=kl.transforms.ordered)
    with pytest.raises(kl.ModelError, match="mu: its initial value .* give initval"):
        m.initial_point()
