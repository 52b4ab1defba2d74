"""The vectorized R-hat and bulk ESS against ArviZ's per-element implementation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz_stats.base import array_stats
from scipy import stats

from kiln_samplers._diagnostics import average_ranks, rhat_ess


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


@pytest.mark.parametrize(("chains", "draws"), [(2, 1000), (4, 301), (3, 9), (1, 200)])
def test_rhat_and_ess_equal_arviz(chains: int, draws: int) -> None:
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


def test_elements_with_nan_or_too_few_draws_are_nan() -> None:
    x = np.random.default_rng(0).normal(size=(2, 50, 3))
    x[1, 7, 1] = np.nan
    r, e = rhat_ess(x)
    assert np.isnan(r[1]) and np.isnan(e[1])
    assert np.isfinite(r[[0, 2]]).all() and np.isfinite(e[[0, 2]]).all()
    assert np.isnan(rhat_ess(x[:, :3])[1]).all()


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
