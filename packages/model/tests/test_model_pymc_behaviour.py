"""Model-layer behaviours PyMC users rely on.

Imputation of missing observed values (NaN or masked), dims taken from observed data,
Deterministic/Potential with dims, ``set_data`` with new coords, ``Model.debug`` and
``Model.point_logps``; log-densities against SciPy.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import kiln as kl
from kiln_graph import KilnValueError
from kiln_graph import tensor as kt

VM = kl.Mode(linker="vm")


def _quiet(build):
    """Run ``build`` with the imputation warning silenced; return what it returns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.ImputationWarning)
        return build()


# --- imputation -----------------------------------------------------------------------------


def _normal_with_missing() -> tuple[kl.Model, np.ndarray]:
    data = np.array([0.5, np.nan, 1.2, np.nan, -0.3, 2.0])
    sigma = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])  # a full-shape parameter: indexed

    def build() -> kl.Model:
        with kl.Model(coords={"obs": list("abcdef")}) as m:
            mu = kl.Normal("mu", 0.0, 10.0)
            kl.Normal("y", mu, sigma, observed=data, dims="obs")
        return m

    return _quiet(build), data


def test_imputation_splits_the_variable_as_pymc_does():
    m, data = _normal_with_missing()
    assert [v.name for v in m.free_variables] == ["mu", "y_unobserved"]
    assert [v.name for v in m.observed_variables] == ["y_observed"]
    assert list(m.deterministics) == ["y"]
    assert m["y_unobserved"].type.shape == (2,) and m["y_observed"].type.shape == (4,)
    assert m.named_dims["y"] == ("obs",)
    np.testing.assert_array_equal(m.variables["y_observed"].value.data, data[~np.isnan(data)])


def test_imputation_logp_equals_scipy_and_the_joined_value():
    m, data = _normal_with_missing()
    sigma = np.arange(1.0, 7.0)
    miss = np.isnan(data)
    cm = m.logp_dlogp_function(mode=VM)
    x = np.array([0.3, 0.1, -2.5])  # mu, then the two missing entries
    full = data.copy()
    full[miss] = x[1:]
    ref = stats.norm(0, 10).logpdf(0.3) + stats.norm(0.3, sigma).logpdf(full).sum()
    assert cm.logp(x) == pytest.approx(ref, rel=1e-12)
    out = cm.expand(x)
    np.testing.assert_allclose(out["y"], full)
    terms = m.point_logps({"mu": 0.3, "y_unobserved": x[1:]}, round_vals=10)
    assert terms["y_unobserved"] == pytest.approx(
        stats.norm(0.3, sigma[miss]).logpdf(x[1:]).sum(), abs=1e-9
    )
    assert terms["y_observed"] == pytest.approx(
        stats.norm(0.3, sigma[~miss]).logpdf(data[~miss]).sum(), abs=1e-9
    )


def test_imputation_of_a_matrix_with_a_broadcast_parameter_and_a_transform():
    data = np.array([[1.0, np.nan, 2.0], [np.nan, 0.5, 3.0]])
    beta = np.array([1.0, 2.0, 0.5])  # broadcasts along the rows

    def build() -> kl.Model:
        with kl.Model() as m:
            kl.Gamma("g", alpha=2.0, beta=beta, observed=data)
        return m

    m = _quiet(build)
    info = m.variables["g_unobserved"]
    assert info.value.name == "g_unobserved_log__"  # the default transform of Gamma
    cm = m.logp_dlogp_function(mode=VM, jacobian=False)
    z = np.array([0.2, -0.4])  # unconstrained, in row-major order of the missing entries
    full = data.copy()
    full[np.isnan(data)] = np.exp(z)
    ref = stats.gamma(2.0, scale=1 / np.broadcast_to(beta, data.shape)).logpdf(full).sum()
    assert cm.logp(z) == pytest.approx(ref, rel=1e-12)
    np.testing.assert_allclose(cm.expand(z)["g"], full)


def test_imputation_of_a_masked_array_of_counts():
    data = np.ma.masked_array([3, 0, 7, 2], mask=[False, True, False, True])
    lam = np.array([2.0, 3.0, 4.0, 5.0])

    def build() -> kl.Model:
        with kl.Model() as m:
            kl.Poisson("k", lam, observed=data)
        return m

    m = _quiet(build)
    assert m["k_unobserved"].dtype == "int64" and m["k_unobserved"].type.shape == (2,)
    f = m.compile_logp(mode=VM)
    got = f({"k_unobserved": np.array([1, 4])})
    ref = stats.poisson(lam).logpmf([3, 1, 7, 4]).sum()
    assert got == pytest.approx(ref, rel=1e-12)


def test_the_imputation_warning_is_given_once_and_says_what():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kl.Model():
            kl.Normal("y", 0.0, 1.0, observed=[1.0, np.nan, np.nan, 2.0])
    mine = [w for w in caught if issubclass(w.category, kl.ImputationWarning)]
    assert len(mine) == 1
    assert issubclass(kl.ImputationWarning, UserWarning)
    assert "2 of 4" in str(mine[0].message) and "y_unobserved" in str(mine[0].message)
    assert mine[0].filename == __file__  # points at the user's line


def test_all_values_missing_is_a_free_variable():
    def build() -> kl.Model:
        with kl.Model() as m:
            kl.Normal("y", 0.0, 1.0, observed=[np.nan, np.nan])
        return m

    m = _quiet(build)
    assert [v.name for v in m.free_variables] == ["y"] and not m.observed_variables
    assert m["y"].type.shape == (2,)


def test_no_missing_values_gives_no_split_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", kl.ImputationWarning)
        with kl.Model() as m:
            kl.Normal("y", 0.0, 1.0, observed=np.ma.masked_array([1.0, 2.0], mask=False))
    assert [v.name for v in m.observed_variables] == ["y"]


def _shared_with_nan() -> None:
    with kl.Model():
        kl.Normal("y", 0.0, 1.0, observed=kt.shared(np.array([1.0, np.nan]), name="d"))


def _in_model(build):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kl.ImputationWarning)
            with kl.Model(coords={"obs": [1, 2, 3]}):
                build()

    return run


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (_shared_with_nan, r"^y: the observed Data 'd' holds NaN; missing values can be imputed"),
        (
            _in_model(lambda: kl.MvNormal("y", np.zeros(2), np.eye(2), observed=[[np.nan, 1.0]])),
            r"^y: the observed data holds 1 missing .* MvNormal is multivariate",
        ),
        (
            _in_model(
                lambda: kl.Mixture(
                    "y",
                    w=[0.5, 0.5],
                    comp_dists=[kl.Normal.dist(0, 1), kl.Normal.dist(3, 1)],
                    observed=[1.0, np.nan],
                )
            ),
            r"^y: .* Mixture is built from other distributions",
        ),
        (
            _in_model(lambda: kl.Normal("y", 0.0, 1.0, observed=[1.0, np.nan], shape=3)),
            r"^y: shape \(3,\) does not fit the observed data's shape \(2,\)",
        ),
        (
            _in_model(lambda: kl.Normal("y", 0.0, 1.0, observed=[1.0, np.nan], dims="obs")),
            r"^y: dims \('obs',\) have lengths \(3,\), the observed data has shape \(2,\)",
        ),
    ],
)
def test_imputation_bad_input(build, match):
    with pytest.raises(kl.ModelError, match=match):
        build()


def test_imputation_parameters_that_do_not_broadcast():
    build = _in_model(lambda: kl.Normal("y", np.zeros(3), 1.0, observed=[1.0, np.nan]))
    with pytest.raises(KilnValueError, match=r"^y: normal: parameter 'mu' has batch shape \(3,\)"):
        build()
    mu = kt.vector("mu", shape=(3,))  # a symbolic parameter of the wrong length
    build = _in_model(lambda: kl.Normal("y", mu[None, None], 1.0, observed=[1.0, np.nan]))
    with pytest.raises(KilnValueError, match=r"^y: "):
        build()


# --- dims taken from observed data ----------------------------------------------------------


def test_dims_of_an_observed_variable_without_coords_take_the_data_length():
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        kl.Normal("y", mu, 1.0, observed=np.arange(5.0), dims="obs")
        z = kl.Normal("z", 0.0, 1.0, dims="obs")  # a later variable along the same dim
        kl.Deterministic("w", z + mu, dims="obs")
    assert m.dim_lengths["obs"] == 5 and "obs" not in m.coords
    assert m["z"].type.shape == (5,) and m.named_dims["y"] == ("obs",)
    with kl.Model() as m2:
        d = kl.Data("yd", np.zeros((2, 3)))
        kl.Normal("y", 0.0, 1.0, observed=d, dims=("row", "col"))
    kl.set_data({"yd": np.zeros((4, 3))}, model=m2)
    assert [int(kl.function([], kt.as_tensor(m2.dim_lengths[d]))()) for d in ("row", "col")] == [
        4,
        3,
    ]


def test_dims_from_observed_bad_input():
    with kl.Model(), pytest.raises(kl.ModelError, match=r"^y: 1 dims \('obs',\) for observed"):
        kl.Normal("y", 0.0, 1.0, observed=np.zeros((2, 2)), dims="obs")
    with kl.Model(), pytest.raises(kl.ModelError, match=r"^x: unknown dim 'obs'"):
        kl.Normal("x", 0.0, 1.0, dims="obs")  # a free variable has no data to size it


# --- Deterministic and Potential with dims --------------------------------------------------


def test_deterministic_and_potential_take_dims():
    with kl.Model(coords={"g": ["a", "b", "c"]}) as m:
        x = kl.Normal("x", 0.0, 1.0, dims="g")
        kl.Deterministic("d", 2 * x, dims="g")
        kl.Potential("p", -(x**2), dims="g")
        kl.Potential("q", -kt.sum(x))
    assert m.named_dims["d"] == ("g",) and m.named_dims["p"] == ("g",)
    assert m.named_dims["q"] is None
    cm = m.logp_dlogp_function(mode=VM)
    assert cm.dims["d"] == ("g",)
    xv = np.array([0.1, -0.2, 0.7])
    ref = stats.norm().logpdf(xv).sum() - np.sum(xv**2) - xv.sum()
    assert cm.logp(xv) == pytest.approx(ref, rel=1e-12)
    frozen = kl.freeze_dims_and_data(m)
    assert frozen.named_dims["p"] == ("g",)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda x: kl.Potential("p", x, dims=("g", "g")), r"^p: 2 dims \('g', 'g'\) for a 1-d"),
        (lambda x: kl.Potential("p", x, dims="nope"), r"^p: unknown dim 'nope'"),
        (lambda x: kl.Potential("p", x, dims="h"), r"^p: dim 'h' has length 2, but the value"),
        (lambda x: kl.Deterministic("d", x, dims="h"), r"^d: dim 'h' has length 2, but the value"),
    ],
)
def test_dims_of_deterministic_and_potential_bad_input(build, match):
    with kl.Model(coords={"g": ["a", "b", "c"], "h": [0, 1]}):
        x = kl.Normal("x", 0.0, 1.0, dims="g")
        with pytest.raises(kl.ModelError, match=match):
            build(x)


# --- set_data with new coords ---------------------------------------------------------------


def _regression() -> kl.Model:
    with kl.Model(coords={"obs": ["a", "b", "c"], "g": [0, 1]}) as m:
        x = kl.Data("x", np.array([0.0, 1.0, 2.0]), dims="obs")
        b = kl.Normal("b", 0.0, 1.0)
        kl.Normal("y", b * x, 1.0, observed=np.array([0.1, 0.9, 2.2]), dims="obs")
        kl.Normal("u", 0.0, 1.0, dims="g")
    return m


def test_set_data_with_coords_updates_labels_and_lengths():
    m = _regression()
    assert m["y"].type.shape == (None,)  # its length follows x, the Data along "obs"
    kl.set_data({"x": np.arange(5.0)}, model=m, coords={"obs": list("vwxyz")})
    assert m.coords["obs"] == tuple("vwxyz")
    assert m.data["x"].get_value().shape == (5,)
    kl.set_data({}, model=m, coords={"g": ["p", "q"]})  # same length: relabelled
    assert m.coords["g"] == ("p", "q")


@pytest.mark.parametrize(
    ("new", "coords", "match"),
    [
        ({"x": np.arange(5.0)}, None, r"^set_data: 'x' has length 5 along dim 'obs' .* 3 labels"),
        ({"x": np.arange(5.0)}, {"obs": list("ab")}, r"^set_data: 'x' has length 5 .* 2 labels"),
        ({}, {"obs": list("abcd")}, r"^set_data: coords\['obs'\] has 4 labels, but Data 'x'"),
        ({}, {"g": [1, 2, 3]}, r"^set_data: coords\['g'\] has 3 labels, but dim 'g' has the fixed"),
        ({}, {"nope": [1]}, r"^set_data: coords: the model has no dim 'nope'"),
        ({}, {"obs": "abc"}, r"^set_data: coords\['obs'\]: expected a sequence of labels"),
    ],
)
def test_set_data_with_coords_bad_input(new, coords, match):
    m = _regression()
    with pytest.raises(kl.ModelError, match=match):
        kl.set_data(new, model=m, coords=coords)
    assert m.coords["obs"] == ("a", "b", "c") and m.data["x"].get_value().shape == (3,)


# --- debug and point_logps ------------------------------------------------------------------


def test_point_logps_equals_scipy():
    with kl.Model() as m:
        mu = kl.Normal("mu", 1.0, 2.0)
        s = kl.HalfNormal("s", 1.5)
        kl.Normal("y", mu, s, observed=[0.3, 1.1, -0.4])
    point = {"mu": 0.4, "s_log__": np.log(0.8)}
    got = m.point_logps(point, round_vals=12)
    assert got["mu"] == pytest.approx(stats.norm(1, 2).logpdf(0.4), abs=1e-11)
    # with the log-Jacobian of s's transform, as the sampler sees it
    ref_s = stats.halfnorm(scale=1.5).logpdf(0.8) + np.log(0.8)
    assert got["s"] == pytest.approx(ref_s, abs=1e-11)
    assert got["y"] == pytest.approx(stats.norm(0.4, 0.8).logpdf([0.3, 1.1, -0.4]).sum(), abs=1e-11)
    assert sum(got.values()) == pytest.approx(m.compile_logp(mode=VM)(point), abs=1e-10)


def test_debug_names_the_variable_and_why(capsys):
    with kl.Model() as m:
        s = kl.Normal("s", 0.0, 1.0)  # 0 at the initial point: an invalid sigma
        kl.Normal("y", 0.0, s, observed=[1.0, 2.0])
        kl.Uniform("u", 0.0, 1.0, observed=[0.5, 1.5])
        kl.Normal("ok", 0.0, 1.0, observed=[0.0])
    report = m.debug()
    assert set(report) == {"y", "u"}
    assert "sigma must be > 0 (sigma=0.0)" in report["y"]
    assert "first at index (1,): value=1.5, lower=0.0, upper=1.0" in report["u"]
    printed = capsys.readouterr().out
    assert "y: its log-density is -inf" in printed and "ok" not in printed
    assert m.debug(point={"s": 1.0}) == {"u": report["u"]}
    grads = m.debug(fn="dlogp")
    assert set(grads) == {"s"}


def test_debug_random_and_a_good_model(capsys):
    with kl.Model() as m:
        x = kl.Normal("x", 0.0, 1.0)
        kl.Gamma("g", alpha=x - 50.0, beta=1.0, observed=[1.0])  # alpha < 0 for any draw
    report = m.debug(fn="random")
    assert list(report) == ["g"] and "shape must be > 0" in report["g"]
    with kl.Model() as good:
        x = kl.Normal("x", 0.0, 1.0)
        kl.Deterministic("e", kt.exp(x))
    capsys.readouterr()
    assert good.debug(verbose=True) == {} and good.debug(fn="random") == {}
    out = capsys.readouterr().out
    assert "log-density of x" in out and "every draw is finite" in out
    with kl.Model() as nan_det:
        x = kl.Normal("x", 0.0, 1.0)
        kl.Deterministic("bad", kt.log(-kt.abs(x) - 1.0))
    assert list(nan_det.debug(fn="random")) == ["bad"]
    with pytest.raises(KilnValueError, match=r"^debug: fn: expected one of"):
        good.debug(fn="grad")


def test_imputation_takes_initval_and_transform_for_the_free_part():
    data = np.array([1.0, np.nan, 2.0, np.nan])

    def build(**options) -> kl.Model:
        with kl.Model() as m:
            kl.HalfNormal("s", 1.0, observed=data, **options)
        return m

    m = _quiet(lambda: build(initval=np.array([9.0, 3.0, 9.0, 5.0])))
    np.testing.assert_allclose(m.initial_point()["s_unobserved_log__"], np.log([3.0, 5.0]))
    m = _quiet(lambda: build(transform=None))
    assert m.variables["s_unobserved"].value.name == "s_unobserved"
    with pytest.raises(kl.ModelError, match=r"^s: .*initval \(shape \(3,\)\) must broadcast"):
        _quiet(lambda: build(initval=np.ones(3)))
