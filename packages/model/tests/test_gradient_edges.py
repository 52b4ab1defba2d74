"""A finite log-density has a finite gradient equal to central differences, everywhere.

Every distribution (as a free variable through its default transform, and as a
likelihood whose parameters are free) and every transform, at random points and at the
special ones: 0 and +-1, ties of maximum / minimum (a logit of 0, Laplace at its
location), the edges of float64 on the unconstrained scale (+-37, +-710, +-745, +-1e300).
One coordinate moves at a time, the others stay at the initial point. Where the
log-density is finite the gradient must be finite and equal central finite differences;
where it is not, it must be -inf (never NaN or +inf), on every backend alike, and the
Python VM and Numba must agree on the value and the gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import kiln as kl
from kiln_compile import available_linkers
from kiln_graph import tensor as kt

SPECIAL = (0.0, 1.0, -1.0, 0.5, 5.0, -5.0, 37.0, -37.0, 710.0, -710.0, 745.0, -745.0)
HUGE = (1e300, -1e300)
BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]


def free_scalars() -> kl.Model:
    """Return every univariate continuous distribution as a free variable."""
    with kl.Model() as m:
        kl.Normal("normal", 0.3, 2.0)
        kl.HalfNormal("halfnormal", 1.5)
        kl.LogNormal("lognormal", 0.2, 0.7)
        kl.Uniform("uniform", -1.0, 3.0)
        kl.Exponential("exponential", 2.0)
        kl.Gamma("gamma", 2.0, 1.0)
        kl.Gamma("gamma_small", 0.5, 1.0)
        kl.Beta("beta", 2.0, 3.0)
        kl.Beta("beta_small", 0.5, 0.5)
        kl.InverseGamma("invgamma", 3.0, 2.0)
        kl.StudentT("studentt", 4.0, 0.0, 1.0)
        kl.HalfStudentT("halfstudentt", 3.0, 1.0)
        kl.Cauchy("cauchy", 0.0, 1.0)
        kl.HalfCauchy("halfcauchy", 1.0)
        kl.Laplace("laplace", 0.0, 1.0)  # its kink is at the special point 0
        kl.Logistic("logistic", 0.0, 1.0)
        kl.Weibull("weibull", 1.5, 1.0)
        kl.TruncatedNormal("truncnormal", 0.0, 1.0, lower=-1.0, upper=2.0)
        kl.TruncatedNormal("truncnormal_lower", 0.0, 1.0, lower=0.0)
        kl.TruncatedNormal("truncnormal_upper", 0.0, 1.0, upper=1.0)
        kl.Flat("flat")
        kl.HalfFlat("halfflat")
    return m


def free_parameters() -> kl.Model:
    """Return likelihoods whose parameters are Flat free variables."""
    y = np.array([0.5, -0.3, 1.2])
    with kl.Model() as m:
        u = kl.Flat("u")  # a logit, a log-rate or a location
        s = kl.Flat("s")  # a log-scale
        kl.Normal("y_normal", u, kt.exp(s), observed=y)
        kl.Normal("y_normal_fast", 0.0, kt.exp(1000.0 * s), observed=y)
        kl.StudentT("y_t", 3.0, u, kt.exp(s), observed=y)
        kl.Laplace("y_laplace", u, kt.exp(s), observed=[0.0, 0.0, 1.0])
        kl.Logistic("y_logistic", u, kt.exp(s), observed=y)
        kl.Cauchy("y_cauchy", u, kt.exp(s), observed=y)
        kl.Gamma("y_gamma", kt.exp(s), kt.exp(u), observed=[0.5, 2.0])
        kl.Exponential("y_exponential", kt.exp(u), observed=[0.0, 1.5])
        kl.Binomial("y_binomial", 10, logit_p=u, observed=[3, 0, 10])
        kl.Bernoulli("y_bernoulli", logit_p=u, observed=[0, 1, 1])
        kl.Poisson("y_poisson", kt.exp(u), observed=[0, 3])
        kl.Geometric("y_geometric", kt.sigmoid(u), observed=[1, 4])
        kl.NegativeBinomial("y_negbin", mu=kt.exp(u), alpha=kt.exp(s), observed=[0, 5])
        kl.Categorical("y_cat", logit_p=kt.stack([u, s, 0.0 * u]), observed=[0, 1, 2, 2])
        kl.Potential("relu_pair", kt.maximum(u, 0.0) + kt.minimum(u, 0.0) - kt.abs(s))
        kl.Potential("clipped", -kt.square(kt.clip(u, -1.0, 1.0)))
    return m


def free_vectors() -> kl.Model:
    """Return the vector transforms (ordered, simplex, a chain) and multivariate models."""
    cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.8]])
    with kl.Model() as m:
        kl.Normal(
            "ordered", 0.0, 3.0, shape=3, transform=kl.transforms.ordered, initval=[-1.0, 0.0, 1.5]
        )
        kl.Exponential(
            "ordered_positive",
            1.0,
            shape=2,
            transform=kl.transforms.ChainTransform(kl.transforms.log, kl.transforms.ordered),
            initval=[0.5, 2.0],
        )
        w = kl.Dirichlet("dirichlet", [1.0, 2.0, 0.5])
        kl.Multinomial("y_mult", 7, w, observed=[2, 4, 1])
        kl.MvNormal("mvnormal", [0.0, 1.0, -1.0], cov=cov)
        kl.NormalMixture("mixture", w=[0.3, 0.7], mu=[-2.0, 2.0], sigma=[1.0, 0.5])
    return m


def derived_free_scalars() -> kl.Model:
    """Return the derived (SymbolicDistribution) continuous classes as free variables."""
    with kl.Model() as m:
        kl.Gumbel("gumbel", 0.5, 2.0)
        kl.ChiSquared("chisquared", 3.0)
        kl.ChiSquared("chisquared_small", 1.0)  # +inf density at 0: the log transform's edge
        kl.ExGaussian("exgaussian", 0.0, 1.0, 2.0)
        kl.ExGaussian("exgaussian_narrow", 0.0, 0.1, 5.0)
        kl.Pareto("pareto", 3.0, 1.5)
        kl.Kumaraswamy("kumaraswamy", 2.0, 3.0)
        kl.Kumaraswamy("kumaraswamy_small", 0.5, 0.5)
        kl.Moyal("moyal", 0.0, 1.0)
        kl.SkewNormal("skewnormal", 0.0, 1.0, 4.0)
        kl.SkewNormal("skewnormal_left", 0.0, 1.0, -30.0)
    return m


def derived_free_parameters() -> kl.Model:
    """Return likelihoods of the derived classes whose parameters are Flat free variables."""
    y = np.array([0.5, -0.3, 1.2])
    counts = [0, 0, 1, 4]
    with kl.Model() as m:
        u = kl.Flat("u")  # a logit, a log-rate or a location
        s = kl.Flat("s")  # a log-scale
        kl.Gumbel("y_gumbel", u, kt.exp(s), observed=y)
        kl.ChiSquared("y_chisquared", kt.exp(s), observed=[0.5, 3.0])
        kl.ExGaussian("y_exgaussian", u, kt.exp(s), kt.exp(u), observed=y)
        kl.Pareto("y_pareto", kt.exp(s), kt.exp(u), observed=[1.0, 4.0])  # m at the data
        kl.Kumaraswamy("y_kumaraswamy", kt.exp(u), kt.exp(s), observed=[0.1, 0.9])
        kl.Moyal("y_moyal", u, kt.exp(s), observed=y)
        kl.SkewNormal("y_skewnormal", u, kt.exp(s), 3.0 * u, observed=y)
        kl.BetaBinomial("y_betabinomial", kt.exp(u), kt.exp(s), 10, observed=[0, 3, 10])
        kl.DiscreteWeibull("y_discrete_weibull", kt.sigmoid(u), kt.exp(s), observed=counts)
        kl.ZeroInflatedPoisson("y_zip", kt.sigmoid(u), kt.exp(s), observed=counts)
        kl.ZeroInflatedBinomial("y_zib", kt.sigmoid(s), 6, kt.sigmoid(u), observed=counts)
        kl.ZeroInflatedNegativeBinomial(
            "y_zinb", kt.sigmoid(u), kt.exp(u), kt.exp(s), observed=counts
        )
        kl.HurdlePoisson("y_hurdle_poisson", kt.sigmoid(u), kt.exp(s), observed=counts)
        kl.HurdleGamma("y_hurdle_gamma", kt.sigmoid(s), kt.exp(u), kt.exp(s), observed=[0.0, 2.0])
        kl.HurdleLogNormal("y_hurdle_lognormal", kt.sigmoid(u), u, kt.exp(s), observed=[0.0, 2.0])
        cut = kt.stack([u - 1.0, u, u + kt.exp(s)])
        kl.OrderedLogistic("y_ordered_logistic", s, cut, observed=[0, 1, 2, 3])
        kl.OrderedProbit("y_ordered_probit", s, cut, kt.exp(s), observed=[0, 1, 2, 3])
    return m


def zero_means() -> kl.Model:
    """Return count likelihoods whose mean or probability is 0 at a count of 0.

    A Poisson regression's ``rate * exposure`` with an exposure of 0: the term is 0 and
    its gradient 0 (once ``0 * (1 / 0)``, NaN).
    """
    exposure = np.array([0.0, 1.0, 2.5])
    with kl.Model() as m:
        u = kl.Flat("u")
        kl.Poisson("y_poisson", kt.exp(u) * exposure, observed=[0, 1, 3])
        kl.NegativeBinomial("y_negbin", mu=kt.exp(u) * exposure, alpha=2.0, observed=[0, 1, 3])
        share = kt.sigmoid(u) * np.array([0.0, 0.5, 1.0])
        kl.Binomial("y_binomial", 4, share, observed=[0, 1, 4])
        kl.Bernoulli("y_bernoulli", share, observed=[0, 1, 1])
        kl.ZeroInflatedPoisson("y_zip", 0.8, kt.exp(u) * exposure, observed=[0, 0, 2])
    return m


MODELS: dict[str, Callable[[], kl.Model]] = {
    "free_scalars": free_scalars,
    "free_parameters": free_parameters,
    "free_vectors": free_vectors,
    "derived_free_scalars": derived_free_scalars,
    "derived_free_parameters": derived_free_parameters,
    "zero_means": zero_means,
}


def _points(base: np.ndarray, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Return each coordinate at each special value and two random ones, the rest at base."""
    out = []
    for i in range(base.size):
        for v in (*SPECIAL, *HUGE, *rng.normal(0.0, 3.0, size=2)):
            x = base.copy()
            x[i] = v
            out.append((f"x[{i}] = {v:g}", x))
    return out


def _central_difference(f: Callable[[np.ndarray], float], x: np.ndarray, i: int) -> float | None:
    """Return the central difference along ``i`` (None where the neighbours are not finite)."""
    for rel in (1e-6, 1e-9):
        h = rel * max(1.0, abs(x[i]))
        e = np.zeros_like(x)
        e[i] = h
        up, down = f(x + e), f(x - e)
        if np.isfinite(up) and np.isfinite(down):
            return (up - down) / (2 * h)
    return None


def _check(cm: kl.CompiledModel, backend: str, name: str) -> dict[str, tuple[float, np.ndarray]]:
    base = cm.initial_point(0)  # jitter=False: the support points
    results: dict[str, tuple[float, np.ndarray]] = {}
    bad: list[str] = []
    for label, x in _points(base, np.random.default_rng(0)):
        with np.errstate(all="ignore"):
            logp, grad = cm.logp_dlogp(x)
        results[label] = (logp, grad)
        i = int(label[2 : label.index("]")])
        where = f"{name} on {backend}, {label} ({cm_names(cm)[i]})"
        if not np.isfinite(logp):
            if logp != -np.inf:
                bad.append(f"{where}: logp is {logp!r}, expected -inf or a finite value")
            continue
        if not np.all(np.isfinite(grad)):
            bad.append(f"{where}: logp {logp!r} is finite but the gradient is {grad!r}")
            continue
        with np.errstate(all="ignore"):
            fd = _central_difference(cm.logp, x, i)
        if fd is not None and not np.isclose(grad[i], fd, rtol=1e-5, atol=1e-6):
            bad.append(f"{where}: gradient {grad[i]!r}, central differences {fd!r}")
    assert not bad, "\n".join(bad[:40]) + (f"\n... {len(bad) - 40} more" if len(bad) > 40 else "")
    return results


def cm_names(cm: kl.CompiledModel) -> list[str]:
    """Return the value-variable name of each coordinate of the flat vector."""
    return [b.name for b in cm.layout for _ in range(b.slice.stop - b.slice.start)]


@pytest.mark.parametrize("build", MODELS.values(), ids=list(MODELS))
def test_finite_logp_has_the_finite_difference_gradient(build: Callable[[], kl.Model]) -> None:
    model = build()
    per_backend = {}
    for backend in BACKENDS:
        cm = model.logp_dlogp_function(mode=kl.Mode(linker=backend), jitter=False)
        per_backend[backend] = _check(cm, backend, build.__name__)
    if len(per_backend) < 2:
        return
    vm, numba = per_backend["vm"], per_backend["numba"]
    bad = []
    for label, (logp, grad) in vm.items():
        logp_n, grad_n = numba[label]
        same_value = logp == logp_n or np.isclose(logp, logp_n, rtol=1e-10, atol=1e-10)
        if not same_value or (np.isfinite(logp) and not np.allclose(grad, grad_n, 1e-8, 1e-10)):
            bad.append(f"{label}: VM ({logp!r}, {grad!r}) but Numba ({logp_n!r}, {grad_n!r})")
    assert not bad, "\n".join(bad[:20])
