"""The vectorized R-hat and bulk ESS against ArviZ's per-element implementation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz_stats.base import array_stats
from scipy import stats

from kiln_samplers import _c_nuts, _diagnostics
from kiln_samplers._diagnostics import average_ranks, rhat_ess
from kiln_samplers._results import SCREEN_DRAWS, _screened_rhat_ess


def _ar1(rng: np.random.Generator, chains: int, draws: int, phi: np.ndarray) -> np.ndarray:
    """AR(1) chains shaped (chain, draw, k): ``phi`` < 0 gives antithetic draws (ESS > N)."""
    x = np.empty((chains, draws, phi.size))
    x[:, 0] = rng.normal(size=(chains, phi.size))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=(chains, phi.size))
    return x


def _arviz(samples: np.ndarray, which: str) -> np.ndarray:
    """ArviZ's value of each element of ``samples`` (chain, draw, k)."""
    fn = array_stats.rhat if which == "rhat" else array_stats.ess
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 on the constant element
        return np.array(
            [fn(samples[:, :, i], chain_axis=0, draw_axis=1) for i in range(samples.shape[2])]
        )


@pytest.fixture(params=["numpy", "c"])
def passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the diagnostics in NumPy, then with the C library."""
    if request.param == "numpy":
        monkeypatch.setattr(_diagnostics, "_native_library", lambda: None)
    elif _c_nuts.library() is None:
        pytest.skip(f"no C library: {_c_nuts._state.error}")
    else:
        monkeypatch.setattr(_diagnostics, "_native_library", _c_nuts.library)
    return str(request.param)


@pytest.mark.parametrize(("chains", "draws"), [(2, 1000), (4, 301), (3, 9), (1, 200)])
def test_rhat_and_ess_equal_arviz(chains: int, draws: int, passes: str) -> None:
    rng = np.random.default_rng(chains * draws)
    phi = np.array([0.0, 0.3, 0.9, 0.99, -0.3, -0.7])
    x = _ar1(rng, chains, draws, phi)
    # offset chains (bad mixing), a heavy tail, ties, and a constant element
    x[0, :, 1] += 3.0
    x[..., 2] = np.exp(3 * x[..., 2])
    x[..., 3] = np.round(x[..., 3])
    x[..., 5] = 1.5
    rhat, ess = rhat_ess(x)
    np.testing.assert_allclose(ess, _arviz(x, "ess"), rtol=1e-10)
    if chains == 1:
        assert np.isnan(rhat).all()
    else:
        np.testing.assert_allclose(rhat, _arviz(x, "rhat"), rtol=1e-12)


def test_elements_with_nan_or_too_few_draws_are_nan(passes: str) -> None:
    x = np.random.default_rng(0).normal(size=(2, 50, 3))
    x[1, 7, 1] = np.nan
    r, e = rhat_ess(x)
    assert np.isnan(r[1]) and np.isnan(e[1])
    assert np.isfinite(r[[0, 2]]).all() and np.isfinite(e[[0, 2]]).all()
    assert np.isnan(rhat_ess(x[:, :3])[1]).all()


def test_the_c_library_computes_what_numpy_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _c_nuts.library()
    if lib is None:
        pytest.skip(f"no C library: {_c_nuts._state.error}")
    rng = np.random.default_rng(3)
    phi = np.array([0.0, 0.5, -0.6, 0.995])  # the last needs more than _MAX_LAG lags
    cases = [
        _ar1(rng, 2, 2000, phi),
        _ar1(rng, 4, 777, phi),  # odd draws: a middle draw dropped
        _ar1(rng, 1, 300, phi),
        np.round(_ar1(rng, 3, 400, phi)),  # ties, in the bulk and around the median
        rng.standard_cauchy(size=(2, 501, 3)),
        np.full((2, 40, 2), 2.5),  # constant
        rng.normal(size=(2, 4, 3)),  # the fewest draws
        _ar1(rng, 2, 300, phi)[:, ::-2],  # a view with negative strides
        rng.normal(size=(2, 300)) * 1e-300,  # subnormal differences
        1.0 + rng.normal(size=(2, 300, 2)) * 1e-13,  # closer than the radix sort's bits
        rng.normal(size=(2, 2000, 60)),  # two threads, half the elements each
    ]
    cases[2][0, 5, 1] = np.nan
    for x in cases:
        monkeypatch.setattr(_diagnostics, "_native_library", lambda: None)
        expected = rhat_ess(x)
        monkeypatch.setattr(_diagnostics, "_native_library", lambda: lib)
        got = rhat_ess(x)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    # the element of AR(0.995) is left to NumPy (statuses: exact, exact, exact, left)
    assert _diagnostics.start_screened_rhat_ess([cases[0]])()[2].tolist() == [1, 1, 1, 2]


@pytest.mark.parametrize("exact_extremes", [False, True])
def test_the_c_screen_is_the_numpy_screen(
    monkeypatch: pytest.MonkeyPatch, exact_extremes: bool
) -> None:
    lib = _c_nuts.library()
    if lib is None:
        pytest.skip(f"no C library: {_c_nuts._state.error}")
    rng = np.random.default_rng(4)
    phi = np.linspace(-0.5, 0.95, 12)
    x = _ar1(rng, 2, 5 * SCREEN_DRAWS + 3, phi)
    x[1, :, :3] += np.array([0.02, 0.05, 0.5])  # R-hat near and above the threshold
    arrays = [x[..., :4], x[..., 4], np.ascontiguousarray(x[..., 5:])]
    monkeypatch.setattr(_diagnostics, "_native_library", lambda: None)
    expected = _screened_rhat_ess(arrays, 400.0, exact_extremes)
    monkeypatch.setattr(_diagnostics, "_native_library", lambda: lib)
    got = _screened_rhat_ess(arrays, 400.0, exact_extremes)
    assert got[2] == expected[2] == SCREEN_DRAWS
    assert got[0].shape == expected[0].shape
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)


def test_trailing_shape_is_kept_and_bad_input_named() -> None:
    x = np.random.default_rng(1).normal(size=(2, 100, 3, 4))
    assert [a.shape for a in rhat_ess(x)] == [(3, 4), (3, 4)]
    assert [a.shape for a in rhat_ess(x[..., 0, 0])] == [(), ()]
    with pytest.raises(ValueError, match="samples"):
        rhat_ess(np.zeros(5))


def test_average_ranks_equal_scipy() -> None:
    rng = np.random.default_rng(2)
    values = np.round(rng.normal(size=(200, 5)) * np.array([0.1, 1, 3, 10, 1e6]))
    values[:, 4] = 7.0  # one tie over the whole column
    np.testing.assert_array_equal(
        average_ranks(values.T), stats.rankdata(values.T, method="average", axis=-1)
    )


def _idata(posterior: dict[str, np.ndarray]):
    """Return a DataTree of ``posterior`` (chain, draw, ...) arrays, empty sample_stats."""
    import xarray

    chains, draws = next(iter(posterior.values())).shape[:2]
    stats_ = xarray.Dataset({"diverging": (("chain", "draw"), np.zeros((chains, draws), bool))})
    post = xarray.Dataset({k: (("chain", "draw", f"{k}_dim"), v) for k, v in posterior.items()})
    return xarray.DataTree.from_dict({"posterior": post, "sample_stats": stats_})


def _autoregressive(rng, rho: float, chains: int, draws: int, k: int) -> np.ndarray:
    out = np.empty((chains, draws, k))
    out[:, 0] = rng.normal(size=(chains, k))
    noise = rng.normal(size=(chains, draws, k)) * np.sqrt(1 - rho**2)
    for t in range(1, draws):
        out[:, t] = rho * out[:, t - 1] + noise[:, t]
    return out


def test_screened_diagnostics_are_exact_where_they_decide(passes: str) -> None:
    """10^4 draws per chain: a screen, then exact values on every draw for what decides."""
    from kiln_samplers import check_diagnostics

    rng = np.random.default_rng(5)
    good = rng.normal(size=(2, 10_000, 40))
    sticky = _autoregressive(rng, 0.995, 2, 10_000, 1)  # low ESS
    apart = rng.normal(size=(2, 10_000, 1)) + np.array([0.0, 0.3])[:, None, None]  # R-hat
    idata = _idata({"good": good, "sticky": sticky, "apart": apart})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = check_diagnostics(idata, max_treedepth=10)
    text = " ".join(str(w.message) for w in caught)
    assert "rhat statistic is larger" in text and "effective sample size" in text
    assert report["screened_draws"] == SCREEN_DRAWS
    exact_r, exact_e = rhat_ess(np.concatenate([good, sticky, apart], axis=2))
    assert report["max_rhat"] == exact_r.max()  # the exact value, on every draw
    assert report["min_ess_bulk"] == exact_e.min()


def test_a_screen_that_passes_everything_warns_nothing(passes: str) -> None:
    from kiln_samplers import check_diagnostics

    rng = np.random.default_rng(6)
    good = rng.normal(size=(4, 5_000, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_diagnostics(_idata({"good": good}), max_treedepth=10)
    exact_r, exact_e = rhat_ess(good)
    assert report["screened_draws"] == SCREEN_DRAWS
    assert report["max_rhat"] <= exact_r.max() and report["max_rhat"] < 1.01
    assert report["min_ess_bulk"] >= exact_e.min() and report["min_ess_bulk"] > 400


def test_var_names_limit_the_convergence_checks_to_those_variables(passes: str) -> None:
    """kl.sample checks the free variables only, as PyMC does."""
    from kiln_samplers import check_diagnostics

    rng = np.random.default_rng(7)
    good = rng.normal(size=(2, 500, 3))
    apart = rng.normal(size=(2, 500, 1)) + np.array([0.0, 1.0])[:, None, None]
    idata = _idata({"good": good, "apart": apart})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        everything = check_diagnostics(idata, max_treedepth=10)
    assert everything["max_rhat"] == rhat_ess(apart)[0].max() > 1.01
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_diagnostics(idata, max_treedepth=10, var_names=["good"])
    assert report["max_rhat"] == rhat_ess(good)[0].max() < 1.01
    with pytest.raises(KeyError, match=r"\['nope'\] are not in the posterior"):
        check_diagnostics(idata, max_treedepth=10, var_names=["nope"])


def test_the_screen_sends_borderline_rhats_to_the_exact_computation(passes: str) -> None:
    """The screen's R-hat is an estimate: its margin keeps borderline elements exact.

    2 chains of 10^4 iid draws, shifted apart so that the exact R-hat of about 180 of
    300 elements is just above 1.01. With a screen threshold of 1.005, 5 of them passed
    the screen (their warning lost), at 1.003 two; at 1.002 one (screened 1.0009,
    exact 1.0106: thinning to a tenth leaves two chains' means that much noise).
    """
    from kiln_samplers._results import _screened_rhat_ess

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 10_000, 300))
    x[1] += 0.25
    exact, _ = rhat_ess(x)
    rhat, _, screened = _screened_rhat_ess([x], 200, exact_extremes=False)
    warns = exact > 1.01
    assert screened == SCREEN_DRAWS and warns.sum() > 100
    computed = np.isclose(rhat[warns], exact[warns], rtol=1e-12, atol=0.0)
    assert np.count_nonzero(~computed) <= 0.01 * warns.sum()


def test_a_check_started_in_another_thread_reports_and_warns_as_the_check(passes: str) -> None:
    """kl.sample's check runs beside the DataTree's construction: the same report."""
    from kiln_samplers import SamplingWarning, check_diagnostics, start_check_diagnostics

    rng = np.random.default_rng(8)
    good = rng.normal(size=(2, 5_000, 20))
    apart = rng.normal(size=(2, 5_000, 1)) + np.array([0.0, 0.5])[:, None, None]
    idata = _idata({"good": good, "apart": apart})
    expected = check_diagnostics(idata, max_treedepth=10, warn=False, exact_extremes=False)
    finish = start_check_diagnostics(idata, max_treedepth=10, exact_extremes=False)
    with pytest.warns(SamplingWarning) as caught:
        report = finish()
    assert [str(w.message) for w in caught] == expected["messages"]
    assert any("rhat statistic is larger" in m for m in expected["messages"])
    assert report == expected and report["max_rhat"] > 1.01
    with pytest.raises(KeyError, match=r"\['nope'\] are not in the posterior"):
        start_check_diagnostics(idata, max_treedepth=10, var_names=["nope"])
