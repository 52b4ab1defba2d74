"""The fast paths of the diagnostics against ArviZ and against the exact computation.

``rhat_ess`` (split chains as a view, one inverse FFT of the chains' mean power, the
normal scores of the ranks computed once and tie runs patched) against ArviZ's
per-element functions on long chains; ``check_diagnostics`` reading a ``Trace`` (no
xarray) against reading its DataTree; and ``exact_extremes=False`` (what ``kl.sample``
asks for: only the elements the screen picks are computed on every draw) giving the
same warnings, at the same thresholds, as the exact values of every element.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz_stats.base import array_stats

from kiln_samplers import Trace, check_diagnostics, to_datatree
from kiln_samplers._diagnostics import rhat_ess
from kiln_samplers._results import SCREEN_DRAWS


def _arviz(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's rank R-hat and bulk ESS of each element of ``samples`` (chain, draw, k)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 on a constant element
        cols = [samples[:, :, i] for i in range(samples.shape[2])]
        return (
            np.array([array_stats.rhat(c, chain_axis=0, draw_axis=1) for c in cols]),
            np.array([array_stats.ess(c, chain_axis=0, draw_axis=1) for c in cols]),
        )


def _ar1(rng: np.random.Generator, chains: int, draws: int, phi: np.ndarray) -> np.ndarray:
    noise = rng.normal(size=(chains, draws, phi.size)) * np.sqrt(1 - phi**2)
    x = np.empty_like(noise)
    x[:, 0] = rng.normal(size=(chains, phi.size))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize("draws", [10_000, 10_001])  # an even split (a view), an odd one
def test_long_chains_equal_arviz_to_1e12(draws: int) -> None:
    rng = np.random.default_rng(draws)
    x = _ar1(rng, 2, draws, np.array([0.0, 0.5, 0.95, -0.5, 0.99, 0.3]))
    x[1, :, 1] += 0.1  # chains apart: R-hat above 1
    x[..., 3] = np.round(x[..., 3] * 3)  # ties everywhere (a discrete variable)
    x[..., 5] = np.exp(4 * x[..., 5])  # heavy tail: the folded ranks decide R-hat
    rhat, ess = rhat_ess(x)
    ref_rhat, ref_ess = _arviz(x)
    np.testing.assert_allclose(rhat, ref_rhat, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ess, ref_ess, rtol=1e-12, atol=0)


def test_float32_and_integer_draws_equal_arviz() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 2_001, 2)).astype(np.float32)
    counts = rng.poisson(2.0, size=(3, 2_001, 2))  # ties in the draws and when folded
    for samples in (x, counts):
        rhat, ess = rhat_ess(samples)
        ref_rhat, ref_ess = _arviz(samples.astype(float))
        np.testing.assert_allclose(rhat, ref_rhat, rtol=1e-12, atol=0)
        np.testing.assert_allclose(ess, ref_ess, rtol=1e-12, atol=0)


def _trace(posterior: dict[str, np.ndarray], diverging: np.ndarray | None = None) -> Trace:
    chains, draws = next(iter(posterior.values())).shape[:2]
    stats = {
        "diverging": np.zeros((chains, draws), bool) if diverging is None else diverging,
        "tree_depth": np.full((chains, draws), 3, np.int64),
    }
    return Trace(posterior, stats, np.empty((chains, draws, 0)), 1.0, 100, False)


def _check(source, **kwargs) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = check_diagnostics(source, max_treedepth=10, **kwargs)
    return report, [str(w.message) for w in caught]


def test_a_trace_gives_the_report_of_its_datatree() -> None:
    rng = np.random.default_rng(4)
    diverging = rng.random((2, 5_000)) < 0.01
    trace = _trace(
        {"a": rng.normal(size=(2, 5_000)), "b": _ar1(rng, 2, 5_000, np.full(3, 0.999))},
        diverging,
    )
    from_trace, said = _check(trace)
    from_tree, said_tree = _check(to_datatree(trace))
    assert said == said_tree and from_trace == from_tree
    assert from_trace["divergences"] == diverging.sum() > 0
    assert len(said) == 3 and said == from_trace["messages"]  # divergences, R-hat, ESS


def _cases() -> list[tuple[str, dict[str, np.ndarray]]]:
    """Posteriors of 2 chains x 10^4 draws around each threshold."""
    rng = np.random.default_rng(7)
    cases = [("good", {"x": rng.normal(size=(2, 10_000, 30))})]
    for shift in (0.05, 0.2, 0.26, 0.28, 0.3, 0.4):  # R-hat from 1.001 to about 1.02
        x = rng.normal(size=(2, 10_000, 3))
        x[1, :, 0] += shift
        cases.append((f"apart {shift}", {"x": x}))
    for phi in (0.95, 0.97, 0.975, 0.98, 0.99, 0.998):  # bulk ESS from ~500 down to ~6
        sticky = _ar1(rng, 2, 10_000, np.full(2, phi))
        cases.append((f"ar {phi}", {"ok": rng.normal(size=(2, 10_000)), "sticky": sticky}))
    return cases


@pytest.mark.parametrize(("name", "posterior"), _cases(), ids=[c[0] for c in _cases()])
def test_only_the_picked_elements_exact_gives_the_same_warnings(name, posterior) -> None:
    exact_report, exact_said = _check(_trace(posterior))
    report, said = _check(_trace(posterior), exact_extremes=False)
    assert said == exact_said, name
    # The warnings' thresholds, on the exact values of every element, every draw.
    rhat, ess = rhat_ess(np.concatenate([v.reshape(2, 10_000, -1) for v in posterior.values()], 2))
    assert any("rhat statistic" in s for s in said) == (rhat.max() > 1.01)
    assert any("effective sample size" in s for s in said) == (ess.min() < 200)
    assert report["screened_draws"] == exact_report["screened_draws"] == SCREEN_DRAWS
    if rhat.max() > 1.01:  # what a warning says is an exact value
        assert report["max_rhat"] == pytest.approx(rhat.max(), rel=1e-12)
    if ess.min() < 200:
        assert report["min_ess_bulk"] == pytest.approx(ess.min(), rel=1e-12)
