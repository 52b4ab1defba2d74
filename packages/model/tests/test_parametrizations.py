"""PyMC's alternative parametrizations: each gives the log-density of its base form.

Every alternative is checked against SciPy at the converted parameters (computed here
in NumPy) and against the base form built by kiln; bad combinations raise naming the
distribution, as PyMC does.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
from kiln_graph import KilnTypeError, KilnValueError

X_REAL = np.array([-1.5, 0.3, 2.0])
X_POS = np.array([0.2, 1.3, 4.0])
X_UNIT = np.array([0.05, 0.3, 0.8])


def _logp(rv, x):
    return kiln.function([], [km.logp(rv, x)], mode=kiln.Mode(linker="vm"))()[0]


def _gamma_ab(mu, sigma):
    return mu**2 / sigma**2, mu / sigma**2


def _beta_ab_sd(mu, sigma):
    kappa = mu * (1 - mu) / sigma**2 - 1
    return mu * kappa, (1 - mu) * kappa


def _invgamma_ab(mu, sigma):
    alpha = 2 + mu**2 / sigma**2
    return alpha, mu * (alpha - 1)


a_g, b_g = _gamma_ab(2.0, 1.5)
a_b, b_b = _beta_ab_sd(0.3, 0.15)
a_i, b_i = _invgamma_ab(1.5, 0.8)

#: (alternative draw, base draw, SciPy reference, values)
CASES = {
    "normal_tau": (
        km.Normal.dist(1.0, tau=4.0),
        km.Normal.dist(1.0, 0.5),
        stats.norm(1.0, 0.5),
        X_REAL,
    ),
    "halfnormal_tau": (
        km.HalfNormal.dist(tau=0.25),
        km.HalfNormal.dist(2.0),
        stats.halfnorm(scale=2.0),
        X_POS,
    ),
    "lognormal_tau": (
        km.LogNormal.dist(0.2, tau=16.0),
        km.LogNormal.dist(0.2, 0.25),
        stats.lognorm(0.25, scale=np.exp(0.2)),
        X_POS,
    ),
    "truncatednormal_tau": (
        km.TruncatedNormal.dist(0.5, tau=1 / 9, lower=-1.0, upper=3.0),
        km.TruncatedNormal.dist(0.5, 3.0, lower=-1.0, upper=3.0),
        stats.truncnorm(-0.5, 2.5 / 3, loc=0.5, scale=3.0),
        np.array([-0.5, 0.3, 2.9]),
    ),
    "studentt_lam": (
        km.StudentT.dist(4.0, 1.0, lam=0.25),
        km.StudentT.dist(4.0, 1.0, 2.0),
        stats.t(4.0, 1.0, 2.0),
        X_REAL,
    ),
    "halfstudentt_lam": (
        km.HalfStudentT.dist(5.0, lam=1 / 9),
        km.HalfStudentT.dist(5.0, 3.0),
        None,  # 2 * t(5, 0, 3) on x >= 0 (below)
        X_POS,
    ),
    "gamma_mu_sigma": (
        km.Gamma.dist(mu=2.0, sigma=1.5),
        km.Gamma.dist(a_g, b_g),
        stats.gamma(a_g, scale=1 / b_g),
        X_POS,
    ),
    "beta_mu_sigma": (
        km.Beta.dist(mu=0.3, sigma=0.15),
        km.Beta.dist(a_b, b_b),
        stats.beta(a_b, b_b),
        X_UNIT,
    ),
    "beta_mu_nu": (
        km.Beta.dist(mu=0.3, nu=12.0),
        km.Beta.dist(3.6, 8.4),
        stats.beta(3.6, 8.4),
        X_UNIT,
    ),
    "invgamma_mu_sigma": (
        km.InverseGamma.dist(mu=1.5, sigma=0.8),
        km.InverseGamma.dist(a_i, b_i),
        stats.invgamma(a_i, scale=b_i),
        X_POS,
    ),
    "skewnormal_tau": (
        km.SkewNormal.dist(0.5, tau=0.25, alpha=2.0),
        km.SkewNormal.dist(0.5, 2.0, 2.0),
        stats.skewnorm(2.0, 0.5, 2.0),
        X_REAL,
    ),
    "logitnormal_tau": (
        km.LogitNormal.dist(0.2, tau=4.0),
        km.LogitNormal.dist(0.2, 0.5),
        None,
        X_UNIT,
    ),
    "skewstudentt_lam": (
        km.SkewStudentT.dist(2.0, 3.0, 0.5, lam=0.25),
        km.SkewStudentT.dist(2.0, 3.0, 0.5, 2.0),
        stats.jf_skew_t(2.0, 3.0, loc=0.5, scale=2.0),
        X_REAL,
    ),
    "exponential_scale": (
        km.Exponential.dist(scale=2.5),
        km.Exponential.dist(0.4),
        stats.expon(scale=2.5),
        X_POS,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_alternative_equals_base_and_scipy(case):
    alt, base, ref, x = CASES[case]
    got = _logp(alt, x)
    np.testing.assert_allclose(got, _logp(base, x), rtol=1e-12)
    if case == "halfstudentt_lam":
        expected = np.log(2 * stats.t(5.0, 0.0, 3.0).pdf(x))
    elif case == "logitnormal_tau":
        lx = np.log(x) - np.log1p(-x)
        expected = stats.norm(0.2, 0.5).logpdf(lx) - np.log(x) - np.log1p(-x)
    else:
        expected = ref.logpdf(x)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_hurdle_lognormal_tau():
    x = np.array([0.0, 0.4, 2.0])
    got = _logp(km.HurdleLogNormal.dist(0.7, 0.1, tau=4.0), x)
    np.testing.assert_allclose(got, _logp(km.HurdleLogNormal.dist(0.7, 0.1, 0.5), x), rtol=1e-12)
    expected = np.where(
        x == 0, np.log(0.3), np.log(0.7) + stats.lognorm(0.5, scale=np.exp(0.1)).logpdf(x)
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_scipy_moments_of_converted_parameters():
    """The moment forms have the asked mean and standard deviation."""
    for ref, mu, sd in [
        (stats.gamma(a_g, scale=1 / b_g), 2.0, 1.5),
        (stats.beta(a_b, b_b), 0.3, 0.15),
        (stats.invgamma(a_i, scale=b_i), 1.5, 0.8),
    ]:
        np.testing.assert_allclose([ref.mean(), ref.std()], [mu, sd], rtol=1e-12)


def test_symbolic_parameters_convert_in_the_graph():
    tau = kiln.tensor.scalar("tau", dtype="float64")
    rv = km.Normal.dist(0.0, tau=tau)
    f = kiln.function([tau], [km.logp(rv, 0.7)], mode=kiln.Mode(linker="vm"))
    np.testing.assert_allclose(f(9.0)[0], stats.norm(0, 1 / 3).logpdf(0.7), rtol=1e-12)


def test_defaults_when_neither_is_given():
    np.testing.assert_allclose(_logp(km.Normal.dist(), X_REAL), stats.norm.logpdf(X_REAL))
    np.testing.assert_allclose(
        _logp(km.StudentT.dist(3.0), X_REAL), stats.t(3.0).logpdf(X_REAL), rtol=1e-12
    )
    np.testing.assert_allclose(_logp(km.Exponential.dist(), X_POS), stats.expon.logpdf(X_POS))
    np.testing.assert_allclose(
        _logp(km.InverseGamma.dist(3.0), X_POS), stats.invgamma(3.0).logpdf(X_POS), rtol=1e-12
    )


def test_model_variables_take_alternatives():
    with km.Model():
        g = km.Gamma("g", mu=2.0, sigma=1.5)
        y = km.Normal("y", 0.0, tau=4.0, observed=X_REAL)
    np.testing.assert_allclose(_logp(g, X_POS), stats.gamma(a_g, scale=1 / b_g).logpdf(X_POS))
    np.testing.assert_allclose(_logp(y, X_REAL), stats.norm(0, 0.5).logpdf(X_REAL), rtol=1e-12)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: km.Normal.dist(0.0, sigma=1.0, tau=2.0), r"Normal: can't pass both tau and sigma"),
        (lambda: km.HalfNormal.dist(sigma=1.0, tau=2.0), r"HalfNormal: can't pass both tau"),
        (lambda: km.LogNormal.dist(0.0, 1.0, 2.0), r"LogNormal: can't pass both tau and sigma"),
        (
            lambda: km.TruncatedNormal.dist(0.0, 1.0, tau=1.0, lower=0.0),
            r"TruncatedNormal: can't pass both tau",
        ),
        (lambda: km.StudentT.dist(3.0, 0.0, 1.0, lam=2.0), r"StudentT: can't pass both lam"),
        (lambda: km.HalfStudentT.dist(3.0, sigma=1.0, lam=2.0), r"HalfStudentT: can't pass both"),
        (lambda: km.Gamma.dist(2.0, mu=1.0, sigma=1.0), r"Gamma: can't pass both \(mu, sigma\)"),
        (lambda: km.Gamma.dist(mu=1.0), r"Gamma: incompatible parametrization: mu given without"),
        (lambda: km.Beta.dist(mu=0.5, sigma=0.1, nu=3.0), r"Beta: incompatible parametrization"),
        (lambda: km.Beta.dist(mu=0.5), r"Beta: incompatible parametrization: mu given without"),
        (lambda: km.Beta.dist(2.0, 3.0, mu=0.5, nu=3.0), r"Beta: can't pass both \(mu, nu\)"),
        (lambda: km.InverseGamma.dist(sigma=1.0), r"InverseGamma: incompatible parametrization"),
        (
            lambda: km.Exponential.dist(1.0, scale=2.0),
            r"Exponential: can't pass both scale and lam",
        ),
        (lambda: km.Normal.dist(0.0, tau=-1.0), r"Normal: tau must be > 0, got tau=-1"),
        (lambda: km.Exponential.dist(scale=0.0), r"Exponential: scale must be > 0"),
        (lambda: km.Beta.dist(mu=0.5, sigma=0.6), r"Beta: sigma must be < sqrt"),
        (lambda: km.Beta.dist(mu=1.5, nu=2.0), r"Beta: mu must be in \(0, 1\)"),
        (lambda: km.Gamma.dist(mu=1.0, sigma=-1.0), r"Gamma: sigma must be > 0"),
        (lambda: km.SkewNormal.dist(0.0, 1.0, 2.0, 4.0), r"SkewNormal: can't pass both tau"),
        (lambda: km.HurdleLogNormal.dist(0.5, 0.0, 1.0, 4.0), r"HurdleLogNormal: can't pass"),
        (lambda: km.LogitNormal.dist(0.0, 1.0, 4.0), r"LogitNormal: can't pass both tau"),
        (lambda: km.SkewStudentT.dist(1.0, 1.0, 0.0, 1.0, 4.0), r"SkewStudentT: can't pass"),
    ],
)
def test_bad_combinations_raise_naming_the_class(make, pattern):
    with pytest.raises(KilnValueError, match=pattern):
        make()


def test_neither_form_names_the_other():
    with pytest.raises(KilnTypeError, match=r"Gamma: missing parameter\(s\) \['alpha', 'beta'\]"):
        km.Gamma.dist()
    with pytest.raises(KilnTypeError, match=r"or give \(mu, sigma\) or \(mu, nu\)"):
        km.Beta.dist()


def test_errors_inside_a_model_name_the_variable():
    with km.Model(), pytest.raises(KilnValueError, match=r"x: Normal: can't pass both tau"):
        km.Normal("x", 0.0, 1.0, 2.0)
