"""Draws of the derived discrete distributions against their pmf, on every backend.

The log-probabilities are checked against SciPy in test_logp.py (the one table); here
20,000 draws of each class (fixed seeds) are binned and compared with the pmf by a
chi-square test, on the Python VM and on Numba: every backend draws from the same
distribution. All the draws of one backend are one compiled function. The continuous
hurdles (a point mass at 0) are checked by their share of zeros and a KS test of the
rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_compile import available_linkers
from kiln_graph import KilnValueError, RandomGeneratorType, SharedVariable, graph_inputs
from kiln_graph import tensor as kt

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]
N = 20_000
P_MIN = 1e-3  # the chance a correct sampler fails one test


def _logistic_cdf(z: np.ndarray) -> np.ndarray:
    return special.expit(z)


def _ordered_pmf(cdf: Callable[[np.ndarray], np.ndarray], eta: float, cut: np.ndarray) -> Any:
    f = np.concatenate([[0.0], cdf(cut - eta), [1.0]])
    return lambda k: np.diff(f)[k]


def _discrete_weibull_pmf(q: float, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda k: q ** (k**beta) - q ** ((k + 1.0) ** beta)


def _zero_inflated(psi: float, base: Callable[[np.ndarray], np.ndarray]) -> Any:
    return lambda k: (1.0 - psi) * (k == 0) + psi * base(k)


def _hurdle_poisson_pmf(psi: float, mu: float) -> Callable[[np.ndarray], np.ndarray]:
    truncated = lambda k: np.where(k > 0, stats.poisson.pmf(k, mu) / -np.expm1(-mu), 0.0)  # noqa: E731
    return lambda k: np.where(k == 0, 1.0 - psi, psi * truncated(k))


@dataclasses.dataclass(frozen=True)
class DrawCase:
    """``N`` draws of ``rv()`` binned over ``support`` (integers) against ``pmf``."""

    id: str
    rv: Callable[[Any], Any]  # rng -> draw of size N
    pmf: Callable[[np.ndarray], np.ndarray]
    support: range


DRAW_CASES = [
    DrawCase(
        "discrete_uniform",
        lambda r: km.DiscreteUniform.dist(-2, 7, size=N, rng=r),
        lambda k: stats.randint.pmf(k, -2, 8),
        range(-2, 8),
    ),
    DrawCase(
        "betabinomial",
        lambda r: km.BetaBinomial.dist(2.0, 3.0, 10, size=N, rng=r),
        lambda k: stats.betabinom.pmf(k, 10, 2.0, 3.0),
        range(11),
    ),
    DrawCase(
        "discrete_weibull",
        lambda r: km.DiscreteWeibull.dist(0.8, 1.3, size=N, rng=r),
        _discrete_weibull_pmf(0.8, 1.3),
        range(60),
    ),
    DrawCase(
        "zero_inflated_poisson",
        lambda r: km.ZeroInflatedPoisson.dist(0.6, 3.0, size=N, rng=r),
        _zero_inflated(0.6, lambda k: stats.poisson.pmf(k, 3.0)),
        range(40),
    ),
    DrawCase(
        "zero_inflated_binomial",
        lambda r: km.ZeroInflatedBinomial.dist(0.7, 8, 0.4, size=N, rng=r),
        _zero_inflated(0.7, lambda k: stats.binom.pmf(k, 8, 0.4)),
        range(9),
    ),
    DrawCase(
        "zero_inflated_negative_binomial",
        lambda r: km.ZeroInflatedNegativeBinomial.dist(0.5, 4.0, 2.0, size=N, rng=r),
        _zero_inflated(0.5, lambda k: stats.nbinom.pmf(k, 2.0, 2.0 / 6.0)),
        range(200),
    ),
    DrawCase(
        "hurdle_poisson",
        lambda r: km.HurdlePoisson.dist(0.7, 2.5, size=N, rng=r),
        _hurdle_poisson_pmf(0.7, 2.5),
        range(40),
    ),
    DrawCase(
        "hurdle_poisson_small_mu",  # the zero-truncated part is nearly always 1
        lambda r: km.HurdlePoisson.dist(0.4, 0.05, size=N, rng=r),
        _hurdle_poisson_pmf(0.4, 0.05),
        range(10),
    ),
    DrawCase(
        "ordered_logistic",
        lambda r: km.OrderedLogistic.dist(0.4, np.array([-1.5, 0.0, 2.0]), size=N, rng=r),
        _ordered_pmf(_logistic_cdf, 0.4, np.array([-1.5, 0.0, 2.0])),
        range(4),
    ),
    DrawCase(
        "ordered_probit",
        lambda r: km.OrderedProbit.dist(-0.3, np.array([-1.0, 0.2, 0.9]), 0.8, size=N, rng=r),
        _ordered_pmf(lambda z: stats.norm.cdf(z / 0.8), -0.3, np.array([-1.0, 0.2, 0.9])),
        range(4),
    ),
]


def _seed(outputs: list[Any], seed: int) -> None:
    """Seed every generator the draws use (each draw of a class has its own)."""
    gens = [
        v
        for v in graph_inputs(outputs)
        if isinstance(v, SharedVariable) and isinstance(v.type, RandomGeneratorType)
    ]
    for g, child in zip(gens, np.random.SeedSequence(seed).spawn(len(gens)), strict=True):
        g.set_value(np.random.default_rng(child), borrow=True)


def _hurdle_continuous() -> dict[str, tuple[Any, float, Any]]:
    """Return the continuous hurdles: (draw, psi, SciPy law of the non-zero draws)."""
    return {
        "hurdle_gamma": (
            km.HurdleGamma.dist(0.6, 2.0, 1.5, size=N),
            0.6,
            stats.gamma(2.0, 0, 1 / 1.5),
        ),
        "hurdle_lognormal": (
            km.HurdleLogNormal.dist(0.3, 0.5, 0.8, size=N),
            0.3,
            stats.lognorm(0.8, scale=np.exp(0.5)),
        ),
    }


def _draw_all(backend: str) -> dict[str, np.ndarray]:
    rvs = {c.id: c.rv(kr.rng(i)) for i, c in enumerate(DRAW_CASES)}
    rvs["batched_zip"] = km.ZeroInflatedPoisson.dist(0.5, np.array([1.0, 6.0]), size=(N, 2))
    rvs["diracdelta"] = km.DiracDelta.dist(3, size=50)
    rvs |= {k: v[0] for k, v in _hurdle_continuous().items()}
    outs = list(rvs.values())
    _seed(outs, 20_261_203)
    f = kiln.function([], outs, mode=kiln.Mode(linker=backend))
    return dict(zip(rvs, f(), strict=True))


@pytest.fixture(scope="module", params=BACKENDS)
def draws(request: pytest.FixtureRequest) -> tuple[str, dict[str, np.ndarray]]:
    return request.param, _draw_all(request.param)


def _chi_square_pvalue(
    x: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], support: range
) -> float:
    """Return the chi-square p-value of the counts of ``x`` against ``N pmf``.

    Classes with an expected count under 5 are pooled with their neighbour (from the
    right); the mass beyond ``support`` is one more class.
    """
    ks = np.arange(support.start, support.stop)
    observed = np.array([np.sum(x == k) for k in ks] + [np.sum(x >= support.stop)], float)
    probs = np.asarray(pmf(ks), float)
    expected = np.append(probs, max(1.0 - probs.sum(), 0.0)) * x.size
    obs_bins, exp_bins, o, e = [], [], 0.0, 0.0
    for oi, ei in zip(observed, expected, strict=True):
        o, e = o + oi, e + ei
        if e >= 5.0:
            obs_bins.append(o)
            exp_bins.append(e)
            o, e = 0.0, 0.0
    obs_bins[-1] += o
    exp_bins[-1] += e
    exp_arr = np.array(exp_bins) * (x.size / np.sum(exp_bins))  # renormalize the rounding
    return float(stats.chisquare(obs_bins, exp_arr).pvalue)


@pytest.mark.parametrize("case", DRAW_CASES, ids=lambda c: c.id)
def test_draw_frequencies_match_the_pmf(
    draws: tuple[str, dict[str, np.ndarray]], case: DrawCase
) -> None:
    backend, values = draws
    x = values[case.id]
    assert x.shape == (N,) and x.dtype.kind == "i", (backend, x.shape, x.dtype)
    assert x.min() >= case.support.start, f"{case.id} on {backend}: a draw below the support"
    p = _chi_square_pvalue(x, case.pmf, case.support)
    assert p > P_MIN, f"{case.id} on {backend}: chi-square p-value {p:.2e}"


def test_batched_zero_inflation_is_per_element(draws: tuple[str, dict[str, np.ndarray]]) -> None:
    """Each element has its own zero-inflation coin: P(both 0) = P(0) P(0) per column."""
    backend, values = draws
    x = values["batched_zip"]
    assert x.shape == (N, 2)
    for j, mu in enumerate((1.0, 6.0)):
        pmf = _zero_inflated(0.5, lambda k, mu=mu: stats.poisson.pmf(k, mu))
        assert _chi_square_pvalue(x[:, j], pmf, range(30)) > P_MIN, (backend, j)
    p0 = [0.5 + 0.5 * np.exp(-1.0), 0.5 + 0.5 * np.exp(-6.0)]
    both = np.sum((x[:, 0] == 0) & (x[:, 1] == 0))
    assert stats.binomtest(int(both), N, p0[0] * p0[1]).pvalue > P_MIN, backend


def test_diracdelta_draws_its_constant(draws: tuple[str, dict[str, np.ndarray]]) -> None:
    backend, values = draws
    np.testing.assert_array_equal(values["diracdelta"], np.full(50, 3), err_msg=backend)


@pytest.mark.parametrize("name", ["hurdle_gamma", "hurdle_lognormal"])
def test_continuous_hurdle_draws(draws: tuple[str, dict[str, np.ndarray]], name: str) -> None:
    """The share of zeros is 1 - psi (binomial test); the non-zero draws follow the base."""
    backend, values = draws
    _, psi, law = _hurdle_continuous()[name]
    x = values[name]
    assert np.all(x >= 0), backend
    zeros = int(np.sum(x == 0))
    assert stats.binomtest(zeros, N, 1.0 - psi).pvalue > P_MIN, (backend, zeros)
    assert stats.kstest(x[x > 0], law.cdf).pvalue > P_MIN, backend


def test_bad_psi() -> None:
    with pytest.raises(
        KilnValueError, match=r"ZeroInflatedPoisson: psi must be in \[0, 1\], got psi=1.5"
    ):
        km.ZeroInflatedPoisson.dist(psi=1.5, mu=1.0)


def test_compiled_blocks_have_the_declared_bounds() -> None:
    """A free variable's block bounds come from its parameters where they are constant."""
    with km.Model() as m:
        km.DiscreteUniform("s", 0, 100)
        km.DiscreteUniform("t", -3, np.array([4, 9]))
        lo = km.Normal("lo", 0.0, 1.0)
        km.DiscreteUniform("moving", 0, kt.cast(kt.floor(lo), "int64") + 10)
        km.OrderedLogistic("o", 0.3, np.array([-1.0, 0.0, 1.0]))
        km.OrderedProbit("op", 0.3, np.array([-1.0, 1.0]), 2.0)
        km.BetaBinomial("bb", 2.0, 3.0, 12)
        km.ZeroInflatedBinomial("zib", 0.5, 7, 0.3)
        km.ZeroInflatedPoisson("zip", 0.5, 3.0)
    cm = m.logp_dlogp_function(discrete=True)
    got = {b.name: (b.support, b.lower, b.upper) for b in cm.layout if b.discrete}
    assert got == {
        "s": ("integer", 0.0, 100.0),
        "t": ("integer", -3.0, 9.0),
        "moving": ("integer", -np.inf, np.inf),  # depends on a free variable
        "o": ("ordinal", 0.0, 3.0),
        "op": ("ordinal", 0.0, 2.0),
        "bb": ("nonnegative_integer", 0.0, 12.0),
        "zib": ("nonnegative_integer", 0.0, 7.0),
        "zip": ("nonnegative_integer", 0.0, np.inf),
    }


@pytest.mark.parametrize("linker", ["vm", "numba"])
def test_beta_binomial_logp_and_gradient_stay_exact_for_huge_alpha_and_beta(linker):
    """Return the Binomial limit at alpha, beta ~ 1e30, and betaln's values where exact.

    There the difference of two betaln values cancels to noise (once a +6e17
    log-density: a spurious mode a sampler under a flat prior found).
    """
    a, b = kt.scalar("a", dtype="float64"), kt.scalar("b", dtype="float64")
    value = np.array([0, 3, 5, 20], dtype="int64")
    rv = km.BetaBinomial.dist(a, b, 20, shape=4)
    logp = kt.sum(km.logp(rv, value))
    f = kiln.function([a, b], [logp, *kiln.grad(logp, [a, b])], mode=kiln.Mode(linker=linker))
    for alpha, beta in [(4.0e30, 4.3e30), (3.0e12, 1.0e9), (2.5e8, 7.0e7)]:
        p = alpha / (alpha + beta)
        want = stats.binom.logpmf(value, 20, p).sum()
        got, da, db = f(alpha, beta)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        # d/d alpha of the Binomial limit: sum(x / alpha - n / (alpha + beta)), to O(1/alpha^2)
        want_da = np.sum(value / alpha - 20 / (alpha + beta))
        want_db = np.sum((20 - value) / beta - 20 / (alpha + beta))
        np.testing.assert_allclose([da, db], [want_da, want_db], rtol=1e-4, atol=1e-12 / alpha)
    import mpmath

    mpmath.mp.dps = 50

    def exact(alpha: float, beta: float) -> float:
        a, b = mpmath.mpf(alpha), mpmath.mpf(beta)
        terms = (
            mpmath.log(mpmath.binomial(20, int(x))) + mpmath.log(mpmath.beta(x + a, 20 - x + b))
            - mpmath.log(mpmath.beta(a, b))
            for x in value
        )  # fmt: skip
        return float(mpmath.fsum(terms))

    # Both sides of the switch to Stirling's series (1e5), and where betaln is exact.
    for alpha, beta in [(0.3, 2.0), (40.0, 7.5), (9.0e4, 1.1e5), (1.2e5, 50.0), (3e9, 2e9)]:
        np.testing.assert_allclose(f(alpha, beta)[0], exact(alpha, beta), rtol=1e-11)


@pytest.mark.parametrize("linker", ["vm", "numba"])
def test_negative_binomial_logp_and_gradient_stay_exact_for_huge_alpha(linker):
    """Return the Poisson limit at a huge alpha, and the exact values below it.

    Given as (mu, alpha), p = alpha / (mu + alpha) rounds near 1: ``alpha log p`` lost
    ``alpha * 1e-16`` (0.01 at 1e14) and ``gammaln(x + alpha) - gammaln(alpha)`` about
    ``1e-16 alpha log alpha`` (0.3 at 1e14, nonsense at 1e20). The zero-inflated and
    hurdle versions read the same log P(0).
    """
    mu, alpha = kt.scalar("mu", dtype="float64"), kt.scalar("alpha", dtype="float64")
    value = np.array([0, 3, 5, 20], dtype="int64")
    rvs = {
        "nb": km.NegativeBinomial.dist(mu=mu, alpha=alpha, shape=4),
        "zinb": km.ZeroInflatedNegativeBinomial.dist(0.7, mu=mu, alpha=alpha, shape=4),
        "hurdle": km.HurdleNegativeBinomial.dist(0.7, mu=mu, alpha=alpha, shape=4),
    }
    logps = [kt.sum(km.logp(rv, value)) for rv in rvs.values()]
    outputs = [out for logp in logps for out in (logp, *kiln.grad(logp, [mu, alpha]))]
    f = kiln.function([mu, alpha], outputs, mode=kiln.Mode(linker=linker))
    m = 4.5
    pois = stats.poisson.logpmf(value, m)
    limits = {
        "nb": pois.sum(),
        "zinb": np.sum(np.where(value == 0, np.log(0.3 + 0.7 * np.exp(-m)), np.log(0.7) + pois)),
        "hurdle": np.sum(
            np.where(value == 0, np.log(0.3), np.log(0.7) + pois - np.log1p(-np.exp(-m)))
        ),
    }
    for a in (1e10, 1e14, 1e20, 1e30):
        got = np.reshape(f(m, a), (3, 3))
        for (name, want), (logp, d_mu, d_alpha) in zip(limits.items(), got, strict=True):
            np.testing.assert_allclose(logp, want, rtol=1e-7, err_msg=f"{name} at alpha={a}")
            assert np.isfinite(d_mu) and abs(d_alpha) < 1e-3 / a, (name, a, d_mu, d_alpha)
        # d/d mu of the Poisson limit; d/d alpha is O(1 / alpha^2)
        np.testing.assert_allclose(got[0, 1], np.sum(value / m - 1.0), rtol=1e-7)
        want_d_alpha = -np.sum((value - m) ** 2 - value) / (2.0 * a * a)
        np.testing.assert_allclose(got[0, 2], want_d_alpha, rtol=1e-3, atol=1e-13 / a)
    import mpmath

    mpmath.mp.dps = 50

    def exact(mu_: float, alpha_: float) -> float:
        m_, a_ = mpmath.mpf(mu_), mpmath.mpf(alpha_)
        terms = (
            mpmath.loggamma(x + a_) - mpmath.loggamma(a_) - mpmath.loggamma(x + 1)
            + a_ * mpmath.log(a_ / (m_ + a_)) + x * mpmath.log(m_ / (m_ + a_))
            for x in value
        )  # fmt: skip
        return float(mpmath.fsum(terms))

    # Both sides of the switch to Stirling's series (1e5), and where gammaln is exact.
    for mu_, alpha_ in [(4.5, 2.0), (0.3, 40.0), (3.0, 9.0e4), (3.0, 1.2e5), (50.0, 3e9)]:
        np.testing.assert_allclose(f(mu_, alpha_)[0], exact(mu_, alpha_), rtol=1e-11)
    # mu = 0: all mass at 0
    at_zero = kt.sum(km.logp(rvs["nb"], np.zeros(4, "int64")))
    zero = kiln.function([mu, alpha], at_zero, mode=kiln.Mode(linker=linker))
    assert zero(0.0, 2.0) == 0.0
    assert f(0.0, 2.0)[0] == -np.inf
