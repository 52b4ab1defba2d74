"""Every distribution on every installed backend against SciPy: moments and two-sample KS.

One compiled function per backend draws every case (one LLVM compile for Numba); each
test checks one case's draws. Seeds are fixed, so the tests are deterministic; the
tolerances are 5 standard errors (moments) and p > 1e-4 (KS): a wrong distribution
fails them by far at this size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_random as kr
from kiln_compile import available_linkers

N = 20_000
BACKENDS = [b for b in ("vm", "numba", "jax") if b in available_linkers()]


@dataclasses.dataclass(frozen=True)
class Case:
    """A draw of ``size`` N from ``fn(*params)`` and its SciPy reference."""

    id: str
    fn: Callable[..., Any]
    params: tuple[Any, ...]
    ref: Any  # a frozen scipy.stats distribution of one scalar draw (or of a marginal)
    moments: bool = True  # False: the distribution has no variance (Cauchy)
    marginal: int | None = None  # for vector draws: the component compared with ``ref``


def _categorical_ref(p: list[float]) -> Any:
    return stats.rv_discrete(values=(np.arange(len(p)), p))


class _HalfT(stats.rv_continuous):
    """|t(nu)|: SciPy has no half Student t."""

    def _pdf(self, x: Any, nu: Any) -> Any:
        return 2.0 * stats.t.pdf(x, nu)

    def _cdf(self, x: Any, nu: Any) -> Any:
        return 2.0 * stats.t.cdf(x, nu) - 1.0

    def _ppf(self, q: Any, nu: Any) -> Any:
        return stats.t.ppf(0.5 * (q + 1.0), nu)


_half_t = _HalfT(a=0.0, name="halft")

ALPHA = [1.0, 2.0, 3.0]
P3 = [0.2, 0.5, 0.3]
MVN_MU, MVN_COV = [1.0, -1.0], [[2.0, 0.5], [0.5, 1.0]]

CASES = [
    Case("normal", kr.normal, (1.5, 2.0), stats.norm(1.5, 2.0)),
    Case("halfnormal", kr.halfnormal, (2.0,), stats.halfnorm(scale=2.0)),
    Case("lognormal", kr.lognormal, (0.3, 0.5), stats.lognorm(s=0.5, scale=np.exp(0.3))),
    Case("uniform", kr.uniform, (-1.0, 3.0), stats.uniform(-1.0, 4.0)),
    Case("exponential", kr.exponential, (2.0,), stats.expon(scale=2.0)),
    Case("gamma", kr.gamma, (2.5, 1.5), stats.gamma(2.5, scale=1.5)),
    Case("beta", kr.beta, (2.0, 5.0), stats.beta(2.0, 5.0)),
    Case("invgamma", kr.invgamma, (6.0, 2.0), stats.invgamma(6.0, scale=2.0)),
    Case("studentt", kr.studentt, (10.0, 1.0, 2.0), stats.t(10.0, 1.0, 2.0)),
    Case("halfstudentt", kr.halfstudentt, (10.0, 2.0), _half_t(10.0, scale=2.0)),
    Case("cauchy", kr.cauchy, (1.0, 2.0), stats.cauchy(1.0, 2.0), moments=False),
    Case("halfcauchy", kr.halfcauchy, (2.0,), stats.halfcauchy(scale=2.0), moments=False),
    Case("laplace", kr.laplace, (1.0, 2.0), stats.laplace(1.0, 2.0)),
    Case("logistic", kr.logistic, (1.0, 2.0), stats.logistic(1.0, 2.0)),
    Case("weibull", kr.weibull, (1.5, 2.0), stats.weibull_min(1.5, scale=2.0)),
    Case(
        "truncated_normal",
        kr.truncated_normal,
        (1.0, 2.0, -1.0, 4.0),
        stats.truncnorm(-1.0, 1.5, 1.0, 2.0),
    ),
    Case(
        "truncated_normal_upper_tail",
        kr.truncated_normal,
        (0.0, 1.0, 5.0, np.inf),
        stats.truncnorm(5.0, np.inf),
    ),
    Case(
        "truncated_normal_far_lower_tail",
        kr.truncated_normal,
        (0.0, 1.0, -np.inf, -40.0),
        stats.truncnorm(-np.inf, -40.0),
    ),
    Case(
        "truncated_normal_narrow",
        kr.truncated_normal,
        (0.0, 1.0, 2.0, 2.1),
        stats.truncnorm(2.0, 2.1),
    ),
    Case(
        "truncated_normal_wide_holding_zero",
        kr.truncated_normal,
        (0.0, 1.0, -0.5, 0.5),
        stats.truncnorm(-0.5, 0.5),
    ),
    Case("vonmises", kr.vonmises, (0.0, 2.0), stats.vonmises(2.0)),
    Case("vonmises_wide", kr.vonmises, (0.0, 0.05), stats.vonmises(0.05)),
    Case("vonmises_narrow", kr.vonmises, (0.0, 400.0), stats.vonmises(400.0)),
    Case("bernoulli", kr.bernoulli, (0.3,), stats.bernoulli(0.3)),
    Case("binomial", kr.binomial, (10, 0.3), stats.binom(10, 0.3)),
    Case("poisson", kr.poisson, (4.5,), stats.poisson(4.5)),
    Case("negative_binomial", kr.negative_binomial, (3.0, 0.4), stats.nbinom(3.0, 0.4)),
    Case("geometric", kr.geometric, (0.3,), stats.geom(0.3)),
    Case("categorical", kr.categorical, (P3,), _categorical_ref(P3)),
    Case("hypergeometric", kr.hypergeometric, (20, 7, 12), stats.hypergeom(20, 7, 12)),
    *[
        Case(f"dirichlet_{i}", kr.dirichlet, (ALPHA,), stats.beta(a, sum(ALPHA) - a), marginal=i)
        for i, a in enumerate(ALPHA)
    ],
    *[
        Case(f"multinomial_{i}", kr.multinomial, (10, P3), stats.binom(10, p), marginal=i)
        for i, p in enumerate(P3)
    ],
    *[
        Case(
            f"multivariate_normal_{i}",
            kr.multivariate_normal,
            (MVN_MU, MVN_COV),
            stats.norm(MVN_MU[i], np.sqrt(MVN_COV[i][i])),
            marginal=i,
        )
        for i in range(2)
    ],
]


def _draw_all(backend: str) -> dict[str, np.ndarray]:
    r = kr.rng(2026)
    outs = [case.fn(*case.params, size=N, rng=r) for case in CASES]
    f = kiln.function([], outs, mode=kiln.Mode(linker=backend))
    return {case.id: x for case, x in zip(CASES, f(), strict=True)}


@pytest.fixture(scope="module", params=BACKENDS)
def draws(request: pytest.FixtureRequest) -> tuple[str, dict[str, np.ndarray]]:
    return request.param, _draw_all(request.param)


def _sample(case: Case, draws: dict[str, np.ndarray]) -> np.ndarray:
    x = draws[case.id]
    return x[:, case.marginal] if case.marginal is not None else x


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_moments_match_scipy(draws: tuple[str, dict[str, np.ndarray]], case: Case) -> None:
    backend, values = draws
    x = _sample(case, values)
    assert x.shape == (N,), backend
    if not case.moments:
        # No mean or variance: compare the median and the quartiles' spread instead.
        q = np.quantile(x, [0.25, 0.5, 0.75])
        ref = case.ref.ppf([0.25, 0.5, 0.75])
        np.testing.assert_allclose(q, ref, rtol=0.05, atol=0.05 * (ref[2] - ref[0]))
        return
    mean, var, kurt = (float(v) for v in case.ref.stats(moments="mvk"))
    se_mean = np.sqrt(var / N)
    assert abs(x.mean() - mean) < 5 * se_mean, (backend, x.mean(), mean)
    se_var = var * np.sqrt((kurt + 2.0) / N)
    assert abs(x.var() - var) < 5 * se_var, (backend, x.var(), var)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_two_sample_ks_against_scipy(draws: tuple[str, dict[str, np.ndarray]], case: Case) -> None:
    backend, values = draws
    x = _sample(case, values)
    reference = case.ref.rvs(size=N, random_state=np.random.default_rng(7))
    result = stats.ks_2samp(x, reference)
    assert result.pvalue > 1e-4, (backend, case.id, result)
    low, high = case.ref.support()
    if np.issubdtype(x.dtype, np.integer):  # SciPy's discrete supports start below the first value
        low = low + 1 if case.ref.pmf(low) == 0 else low
    assert x.min() >= low and x.max() <= high, (backend, case.id, x.min(), x.max())


def test_multivariate_normal_covariance(draws: tuple[str, dict[str, np.ndarray]]) -> None:
    backend, values = draws
    x = values["multivariate_normal_0"]
    np.testing.assert_allclose(np.cov(x.T), MVN_COV, atol=0.06)


def test_draws_are_on_the_support(draws: tuple[str, dict[str, np.ndarray]]) -> None:
    _, values = draws
    for key in ("dirichlet_0", "multinomial_0"):
        x = values[key]
        total = x.sum(axis=1)
        np.testing.assert_allclose(total, 1.0 if key.startswith("dirichlet") else 10)
    assert values["truncated_normal"].min() >= -1.0 and values["truncated_normal"].max() <= 4.0
    assert values["truncated_normal_far_lower_tail"].max() <= -40.0
    assert values["categorical"].dtype == np.int64 and set(np.unique(values["categorical"])) == {
        0,
        1,
        2,
    }


def test_backends_draw_the_same_stream() -> None:
    """A seed gives identical draws on the VM and on Numba (the same algorithms)."""
    if "numba" not in BACKENDS:
        pytest.skip("kiln-numba is not installed")
    vm, nb = _draw_all("vm"), _draw_all("numba")
    for key in vm:
        # Equal up to the last bit of libm functions (log/exp) that differ between the two.
        np.testing.assert_allclose(nb[key], vm[key], rtol=1e-13, atol=0, err_msg=key)


def test_dirichlet_with_tiny_concentrations_stays_on_the_simplex() -> None:
    for backend in BACKENDS:
        r = kr.rng(3)
        f = kiln.function(
            [], kr.dirichlet([0.01, 0.01, 0.01], size=2000, rng=r), mode=kiln.Mode(linker=backend)
        )
        x = f()
        assert np.all(np.isfinite(x)) and np.all(x >= 0)
        np.testing.assert_allclose(x.sum(axis=1), 1.0)
        # With tiny concentrations almost all mass sits on one component.
        assert np.mean(x.max(axis=1) > 0.99) > 0.8
