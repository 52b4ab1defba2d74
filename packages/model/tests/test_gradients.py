"""Gradients of model log-densities against central finite differences.

One small model per family: continuous scalars (every univariate continuous
distribution as a free variable, through its default transform), a hierarchical model,
discrete observed data (with p and logit_p, a free NegativeBinomial alpha), a Dirichlet
free variable and MvNormal (free mean, a Cholesky factor built from free scales, a
free MvNormal vector). ``logp_dlogp_function`` gives the gradient; ``.logp`` of the
same compiled model the differences. On the Python VM (the backends are checked
against it elsewhere), at jittered initial points with fixed seeds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import kiln as kl
from kiln_compile import available_linkers
from kiln_graph import tensor as kt

VM = kl.Mode(linker="vm")
H = 1e-5  # central differences: truncation ~ H^2 |f'''|, rounding ~ eps |f| / H


def continuous_scalars() -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.5, 2.0)
        sigma = kl.HalfNormal("sigma", 1.5)
        kl.LogNormal("ln", mu, sigma)
        kl.Uniform("u", -1.0, 3.0)
        kl.Exponential("e", 2.0)
        kl.Gamma("g", 2.5, 1.5)
        kl.Beta("b", 2.0, 3.0)
        kl.InverseGamma("ig", 3.0, 2.0)
        nu = kl.Gamma("nu", 4.0, 0.5)
        kl.StudentT("t", nu, mu, sigma)
        kl.HalfStudentT("ht", nu, sigma)
        kl.Cauchy("c", mu, sigma)
        kl.HalfCauchy("hc", sigma)
        kl.Laplace("lap", mu, sigma)
        kl.Logistic("logis", mu, sigma)
        kl.Weibull("w", 1.5, sigma)
        kl.TruncatedNormal("tn", mu, sigma, lower=-1.0, upper=2.0)
        kl.TruncatedNormal("tn_lower", mu, sigma, lower=0.0)  # upper = inf
        kl.TruncatedNormal("tn_upper", mu, sigma, upper=1.0)  # lower = -inf
        kl.TruncatedNormal("tn_far", mu, sigma, lower=-1.0, upper=80.0)  # Phi(b) rounds to 1
        kl.TruncatedNormal("tn_tail", mu, 0.3, lower=4.0, upper=5.0)  # mass ~ 1e-24
        kl.Normal("y", mu, sigma, observed=[0.3, -1.2, 2.0])
        kl.Flat("flat")
        kl.HalfFlat("halfflat")
        # Censored observations: log-CDFs and log-survivals, the far tails included.
        for name, d in [
            ("normal", kl.Normal.dist(mu, sigma)),
            ("logistic", kl.Logistic.dist(mu, sigma)),
            ("cauchy", kl.Cauchy.dist(mu, sigma)),
            ("laplace", kl.Laplace.dist(mu, sigma)),
        ]:
            kl.Potential(f"censored_{name}", kl.logcdf(d, np.array([-30.0, -2.0, 0.4, 3.0, 30.0])))
        for name, d in [
            ("weibull", kl.Weibull.dist(1.5, sigma)),
            ("halfnormal", kl.HalfNormal.dist(sigma)),
            ("halfcauchy", kl.HalfCauchy.dist(sigma)),
            ("lognormal", kl.LogNormal.dist(mu, sigma)),
            ("exponential", kl.Exponential.dist(sigma)),
        ]:
            kl.Potential(f"censored_{name}", kl.logcdf(d, np.array([1e-3, 0.1, 2.0, 20.0])))
    return m


def hierarchical() -> kl.Model:
    """Eight schools (non-centered) with a radon-like varying slope."""
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    s = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    x = np.linspace(-1.0, 1.0, 8)
    with kl.Model(coords={"school": list("ABCDEFGH")}) as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        z = kl.Normal("z", 0.0, 1.0, dims="school")
        beta_mu = kl.Normal("beta_mu", 0.0, 1.0)
        beta_sd = kl.Exponential("beta_sd", 1.0)
        beta = kl.Normal("beta", beta_mu, beta_sd, dims="school")  # centered
        kl.Normal("y", mu + tau * z + beta * x, s, observed=y, dims="school")
    return m


def discrete_observed() -> kl.Model:
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    with kl.Model() as m:
        a = kl.Normal("a", 0.0, 1.0)
        b = kl.Normal("b", 0.0, 1.0, shape=2)
        kl.Poisson("counts", kt.exp(a + b[0] * x), observed=[0, 1, 3, 2, 7])
        kl.Binomial("succ", 10, logit_p=a + b[1] * x, observed=[1, 3, 5, 6, 10])
        kl.Bernoulli("flip", logit_p=b[0] - x, observed=[0, 0, 1, 1, 1])
        p = kl.Beta("p", 2.0, 2.0)
        kl.Bernoulli("coin", p=p, observed=[1, 0, 1])
        kl.Binomial("trials", 4, p=p, observed=[0, 2, 4])
        kl.Geometric("wait", p, observed=[1, 3, 2])
        alpha = kl.Gamma("alpha", 2.0, 1.0)
        kl.NegativeBinomial("nb", mu=kt.exp(a), alpha=alpha, observed=[0, 4, 1, 9])
        n = kl.HalfNormal("n", 5.0)
        kl.NegativeBinomial("nb_np", n=n, p=p, observed=[3, 0, 2])
    return m


def dirichlet_free() -> kl.Model:
    with kl.Model() as m:
        w = kl.Dirichlet("w", [1.0, 2.0, 3.0, 0.5])
        kl.Categorical("cat", p=w, observed=[0, 1, 1, 2, 3, 2, 2])
        kl.Multinomial("mult", 12, w, observed=[[2, 4, 5, 1], [0, 6, 3, 3]])
        conc = kl.Gamma("conc", 2.0, 0.5)
        kl.Dirichlet("v", conc * w, shape=(2, 4))  # batched, its parameter a free variable
    return m


def mvnormal() -> kl.Model:
    corr_chol = np.linalg.cholesky(np.array([[1.0, 0.3, -0.2], [0.3, 1.0, 0.4], [-0.2, 0.4, 1.0]]))
    data = np.array([[0.1, -0.4, 1.2], [1.0, 0.2, -0.3], [-0.7, 0.5, 0.9], [0.4, 0.4, 0.0]])
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 2.0, shape=3)
        sd = kl.HalfNormal("sd", 1.0, shape=3)
        chol = kt.expand_dims(sd, -1) * corr_chol  # diag(sd) @ L
        kl.MvNormal("obs", mu, chol=chol, observed=data)
        cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.8]])
        kl.MvNormal("x", mu, cov=cov)  # a free MvNormal vector
        kl.MvNormal("xs", mu, cov=cov * sd[0], shape=(2, 3))  # batched
    return m


def derived() -> kl.Model:
    """Return the derived (SymbolicDistribution) classes: free variables, likelihoods."""
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.5, 1.0)
        sigma = kl.HalfNormal("sigma", 1.5)
        psi = kl.Beta("psi", 2.0, 2.0)
        kl.Gumbel("gumbel", mu, sigma)
        kl.ChiSquared("chi2", 3.0)
        kl.ExGaussian("exg", mu, sigma, 2.0)
        kl.Pareto("pareto", 3.0, 1.5)
        kl.Kumaraswamy("kuma", 2.0, 3.0)
        kl.Moyal("moyal", mu, sigma)
        kl.SkewNormal("skew", mu, sigma, 3.0)
        y = np.array([0.3, 1.2, 2.5])
        kl.Gumbel("y_gumbel", mu, sigma, observed=y)
        kl.ChiSquared("y_chi2", sigma + 1.0, observed=y)
        kl.ExGaussian("y_exg", mu, sigma, sigma + 0.5, observed=y)
        kl.Pareto("y_pareto", sigma + 0.5, 0.2, observed=y)
        kl.Kumaraswamy("y_kuma", sigma + 0.5, psi + 1.0, observed=[0.1, 0.5, 0.9])
        kl.Moyal("y_moyal", mu, sigma, observed=y)
        kl.SkewNormal("y_skew", mu, sigma, 5.0 * mu, observed=y)
        counts = [0, 0, 1, 3, 7]
        kl.BetaBinomial("y_bb", sigma + 0.5, psi + 0.5, 10, observed=[0, 3, 10])
        kl.DiscreteWeibull("y_dw", psi, sigma + 0.5, observed=counts)
        kl.ZeroInflatedPoisson("y_zip", psi, kt.exp(mu), observed=counts)
        kl.ZeroInflatedBinomial("y_zib", psi, 10, kt.sigmoid(mu), observed=counts)
        kl.ZeroInflatedNegativeBinomial("y_zinb", psi, kt.exp(mu), sigma, observed=counts)
        kl.ZeroInflatedNegativeBinomial("y_zinb_np", psi, n=sigma, p=0.4, observed=counts)
        kl.HurdlePoisson("y_hp", psi, kt.exp(mu), observed=counts)
        kl.HurdleGamma("y_hg", psi, sigma + 0.5, kt.exp(mu), observed=[0.0, 0.4, 2.0])
        kl.HurdleGamma("y_hg_mu", psi, mu=kt.exp(mu), sigma=sigma, observed=[0.0, 1.5])
        kl.HurdleLogNormal("y_hln", psi, mu, sigma, observed=[0.0, 0.4, 2.0])
        cut = kl.Normal(
            "cut",
            0.0,
            3.0,
            shape=3,
            transform=kl.distributions.transforms.ordered,
            initval=[-1.0, 0.0, 1.5],
        )
        classes = [0, 1, 1, 2, 3, 3]
        kl.OrderedLogistic("y_ol", mu, cut, observed=classes)
        kl.OrderedProbit("y_op", mu, cut, sigma, observed=classes)
    return m


MODELS: dict[str, Callable[[], kl.Model]] = {
    "continuous_scalars": continuous_scalars,
    "hierarchical": hierarchical,
    "discrete_observed": discrete_observed,
    "dirichlet_free": dirichlet_free,
    "mvnormal": mvnormal,
    "derived": derived,
}


def _finite_differences(f: Callable[[np.ndarray], float], x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = H
        out[i] = (f(x + e) - f(x - e)) / (2 * H)
    return out


BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]


@pytest.mark.parametrize("build", MODELS.values(), ids=list(MODELS))
def test_gradient_matches_finite_differences(build: Callable[[], kl.Model]) -> None:
    _check_gradient(build().logp_dlogp_function(mode=VM))


@pytest.mark.skipif("numba" not in BACKENDS, reason="kiln-numba is not installed")
def test_gradient_on_numba() -> None:
    """The default backend: one model (each model is two LLVM compiles)."""
    _check_gradient(hierarchical().logp_dlogp_function(mode=kl.Mode(linker="numba")))


def _check_gradient(cm: kl.CompiledModel) -> None:
    for seed in (0, 1):
        x = cm.initial_point(seed)
        logp, grad = cm.logp_dlogp(x)
        assert np.isfinite(logp) and np.all(np.isfinite(grad)), (seed, logp, grad)
        assert logp == pytest.approx(cm.logp(x), rel=1e-13)
        fd = _finite_differences(cm.logp, x)
        names = [b.name for b in cm.layout for _ in range(b.slice.stop - b.slice.start)]
        bad = [
            f"  {n}[{i}]: grad {g!r}, finite differences {d!r}"
            for i, (n, g, d) in enumerate(zip(names, grad, fd, strict=True))
            if not np.isclose(g, d, rtol=1e-6, atol=1e-6)
        ]
        assert not bad, f"seed {seed}:\n" + "\n".join(bad)
