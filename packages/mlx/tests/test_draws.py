"""The MLX draws with fixed numbers of steps (kiln_mlx._draws): moments and KS tests.

They run eagerly (the linker does so for these draws, with an EagerWarning): their
unrolled rejection rounds are more than ``mx.compile`` can afford.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

import kiln_random as kr
from kiln_compile import Mode, function
from kiln_mlx import EagerWarning

N = 20000
MLX = Mode(linker="mlx")


def _draw(rv: Any) -> np.ndarray:
    with pytest.warns(EagerWarning, match="eagerly"):
        f = function([], rv, mode=MLX)
    return np.asarray(f())


def _moments(x: np.ndarray, mean: Any, var: Any) -> None:
    """Sample mean within 5 standard errors, variance within 10%."""
    mean, var = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    se = np.sqrt(var / len(x))
    assert np.all(np.abs(x.mean(axis=0) - mean) < 5 * se), (x.mean(axis=0), mean)
    np.testing.assert_allclose(x.var(axis=0), var, rtol=0.1)


@pytest.mark.parametrize(
    ("make", "mean", "var"),
    [
        (lambda r: kr.poisson(3.0, size=(N,), rng=r), 3.0, 3.0),
        (lambda r: kr.poisson(40.0, size=(N,), rng=r), 40.0, 40.0),
        (lambda r: kr.binomial(20, 0.3, size=(N,), rng=r), 6.0, 4.2),
        (lambda r: kr.binomial(1000, 0.7, size=(N,), rng=r), 700.0, 210.0),
        (lambda r: kr.negative_binomial(5.0, 0.3, size=(N,), rng=r), 5 * 0.7 / 0.3, 5 * 0.7 / 0.09),
        (lambda r: kr.hypergeometric(50, 20, 10, size=(N,), rng=r), 4.0, 10 * 0.24 * 40 / 49),
        (
            lambda r: kr.multinomial(10, np.array([0.2, 0.3, 0.5]), size=(N,), rng=r),
            [2.0, 3.0, 5.0],
            [1.6, 2.1, 2.5],
        ),
    ],
)
def test_counts_have_their_moments(make: Any, mean: Any, var: Any) -> None:
    x = _draw(make(kr.rng(3)))
    assert x.dtype == np.int64
    _moments(x, mean, var)


def test_poisson_draws_follow_the_pmf() -> None:
    """Chi-square of the counts 0..9 (the inversion branch) and the PTRS branch's mean."""
    x = _draw(kr.poisson(np.array([2.5, 25.0]), size=(N, 2), rng=kr.rng(4)))
    counts = np.bincount(x[:, 0], minlength=10)[:10]
    expected = stats.poisson(2.5).pmf(np.arange(10)) * N
    assert stats.chisquare(counts, expected, sum_check=False).pvalue > 1e-3
    assert stats.kstest(x[:, 1] + 0.5, stats.norm(25.5, 5.0).cdf).statistic < 0.08


def test_multinomial_rows_sum_to_n() -> None:
    p = np.array([0.1, 0.6, 0.3])
    x = _draw(kr.multinomial(np.array([7, 30]), p, size=(100, 2), rng=kr.rng(5)))
    np.testing.assert_array_equal(x.sum(axis=-1), np.broadcast_to([7, 30], (100, 2)))
    assert x.min() >= 0


@pytest.mark.parametrize(
    ("make", "dist"),
    [
        (lambda r: kr.vonmises(0.5, 2.0, size=(N,), rng=r), stats.vonmises(2.0, loc=0.5)),
        (lambda r: kr.vonmises(0.0, 0.1, size=(N,), rng=r), stats.vonmises(0.1)),
        (
            lambda r: kr.truncated_normal(0.0, 1.0, -1.0, 2.0, size=(N,), rng=r),
            stats.truncnorm(-1.0, 2.0),
        ),
        (
            lambda r: kr.truncated_normal(1.0, 2.0, 17.0, 19.0, size=(N,), rng=r),
            stats.truncnorm(8.0, 9.0, loc=1.0, scale=2.0),
        ),
        (
            lambda r: kr.truncated_normal(0.0, 1.0, -60.0, -50.0, size=(N,), rng=r),
            stats.truncnorm(-60.0, -50.0),
        ),
    ],
)
def test_continuous_draws_follow_their_distribution(make: Any, dist: Any) -> None:
    assert stats.kstest(_draw(make(kr.rng(11))), dist.cdf).pvalue > 1e-3
