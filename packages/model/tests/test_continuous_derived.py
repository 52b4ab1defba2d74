"""Draws of the derived continuous distributions against SciPy, on every backend.

Their logp and logcdf are checked in test_logp.py (the one table); here 20,000 draws
of each class (fixed seeds) are compared with SciPy's CDF by a KS test, on the Python
VM and on Numba, all the draws of one backend in one compiled function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_compile import available_linkers
from kiln_graph import KilnValueError, RandomGeneratorType, SharedVariable, graph_inputs

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]
N = 20_000
P_MIN = 1e-3  # the chance a correct sampler fails one test


def _kumaraswamy_cdf(a: float, b: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: -np.expm1(b * np.log1p(-(np.clip(x, 0.0, 1.0) ** a)))


#: id -> (draw of size N from a seeded generator, the reference CDF)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "gumbel": (lambda r: km.Gumbel.dist(0.5, 2.0, size=N, rng=r), stats.gumbel_r(0.5, 2.0).cdf),
    "chisquared": (lambda r: km.ChiSquared.dist(3.0, size=N, rng=r), stats.chi2(3.0).cdf),
    "chisquared_small": (lambda r: km.ChiSquared.dist(0.5, size=N, rng=r), stats.chi2(0.5).cdf),
    "exgaussian": (
        lambda r: km.ExGaussian.dist(1.0, 0.7, 2.0, size=N, rng=r),
        stats.exponnorm(2.0 / 0.7, 1.0, 0.7).cdf,
    ),
    "pareto": (
        lambda r: km.Pareto.dist(3.0, 2.0, size=N, rng=r),
        stats.pareto(3.0, scale=2.0).cdf,
    ),
    "kumaraswamy": (
        lambda r: km.Kumaraswamy.dist(2.0, 3.0, size=N, rng=r),
        _kumaraswamy_cdf(2.0, 3.0),
    ),
    "kumaraswamy_small": (
        lambda r: km.Kumaraswamy.dist(0.5, 0.7, size=N, rng=r),
        _kumaraswamy_cdf(0.5, 0.7),
    ),
    "moyal": (lambda r: km.Moyal.dist(0.3, 1.5, size=N, rng=r), stats.moyal(0.3, 1.5).cdf),
    "skewnormal": (
        lambda r: km.SkewNormal.dist(0.2, 1.3, 2.0, size=N, rng=r),
        stats.skewnorm(2.0, 0.2, 1.3).cdf,
    ),
    "skewnormal_left": (
        lambda r: km.SkewNormal.dist(0.0, 1.0, -6.0, size=N, rng=r),
        stats.skewnorm(-6.0).cdf,
    ),
}


def _draw_all(backend: str) -> dict[str, np.ndarray]:
    rvs = {name: draw(kr.rng(i)) for i, (name, (draw, _)) in enumerate(CASES.items())}
    # A batch: each element its own draw (no draw repeated by broadcasting).
    rvs["batched_skewnormal"] = km.SkewNormal.dist(0.0, 1.0, np.array([-3.0, 3.0]), size=(N, 2))
    outs = list(rvs.values())
    gens = [
        v
        for v in graph_inputs(outs)
        if isinstance(v, SharedVariable) and isinstance(v.type, RandomGeneratorType)
    ]
    for g, child in zip(gens, np.random.SeedSequence(20_261_203).spawn(len(gens)), strict=True):
        g.set_value(np.random.default_rng(child), borrow=True)
    f = kiln.function([], outs, mode=kiln.Mode(linker=backend))
    return dict(zip(rvs, f(), strict=True))


@pytest.fixture(scope="module", params=BACKENDS)
def draws(request: pytest.FixtureRequest) -> tuple[str, dict[str, np.ndarray]]:
    return request.param, _draw_all(request.param)


@pytest.mark.parametrize("name", list(CASES))
def test_draws_ks(draws: tuple[str, dict[str, np.ndarray]], name: str) -> None:
    backend, values = draws
    x = values[name]
    assert x.shape == (N,) and np.all(np.isfinite(x)), backend
    p = stats.kstest(x, CASES[name][1]).pvalue
    assert p > P_MIN, f"{name} on {backend}: KS p-value {p:.2e}"


def test_batched_draws_are_per_element(draws: tuple[str, dict[str, np.ndarray]]) -> None:
    backend, values = draws
    x = values["batched_skewnormal"]
    assert x.shape == (N, 2)
    for j, alpha in enumerate((-3.0, 3.0)):
        assert stats.kstest(x[:, j], stats.skewnorm(alpha).cdf).pvalue > P_MIN, (backend, j)
    assert abs(stats.pearsonr(x[:, 0], x[:, 1]).statistic) < 4 / np.sqrt(N), backend


def test_bad_parameter_and_polyagamma() -> None:
    with pytest.raises(KilnValueError, match="Gumbel: beta must be > 0"):
        km.Gumbel.dist(0.0, -1.0)
    with pytest.raises(NotImplementedError, match="PolyaGamma"):
        km.PolyaGamma.dist(1.0, 0.0)
