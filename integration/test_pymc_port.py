"""PyMC models ported by renaming ``pm.`` to ``kl.``, sampled, against exact posteriors.

Each model below is written as a PyMC user writes it (``pm.math``, ``pm.Censored``,
``pm.ZeroInflatedPoisson``, ...), with ``pm`` renamed to ``kl`` and nothing else. Each
comes with its posterior computed independently of kiln: by quadrature on a grid of the
parameters (the likelihood from SciPy's densities, summed over the data), or in closed
form where the model is conjugate. ``kl.sample`` (kiln's NUTS on the Numba backend,
and the steps PyMC assigns to discrete variables) must give, for every checked quantity,
the posterior mean within 4 Monte Carlo standard errors (bulk ESS of this run), the sd
within 15%, R-hat below 1.01 and no divergences.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arviz_stats import ess, rhat
from scipy import special, stats

import kiln as kl

GALLERY = Path(__file__).resolve().parents[2] / "shared" / "reference" / "gallery"
SEED = 20261203


@dataclasses.dataclass
class Port:
    """A ported model and the exact posterior moments of some of its quantities.

    ``reference`` maps a quantity's name to ``(mean, sd)``; ``quantity`` (optional)
    computes a quantity from the posterior draws (default: the variable of that name).
    """

    model: kl.Model
    reference: dict[str, tuple[float, float]]
    quantity: dict[str, Callable[[Any], np.ndarray]] = dataclasses.field(default_factory=dict)
    sample_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_divergences: int = 0


PORTS: dict[str, Callable[[], Port]] = {}


def port(fn: Callable[[], Port]) -> Callable[[], Port]:
    """Register a ported model (its name is the function's)."""
    PORTS[fn.__name__] = fn
    return fn


def grid_moments(
    log_post: Callable[..., np.ndarray], *axes: np.ndarray
) -> list[tuple[float, float]]:
    """Return the posterior ``(mean, sd)`` along each axis of a grid of the parameters.

    ``log_post(*mesh)`` is the unnormalised log posterior at every grid point (arrays of
    the grid's shape). The axes are evenly spaced and wide enough that the posterior
    is negligible at their ends (checked: the mass of the outer 2% of each axis is below 1e-6).
    """
    mesh = np.meshgrid(*axes, indexing="ij")
    with np.errstate(all="ignore"):
        lp = np.asarray(log_post(*mesh), dtype="float64")
    lp = np.where(np.isfinite(lp), lp, -np.inf)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    out = []
    for i, m in enumerate(mesh):
        marginal = w.sum(axis=tuple(j for j in range(w.ndim) if j != i))
        edge = max(1, len(marginal) // 50)
        assert marginal[:edge].sum() + marginal[-edge:].sum() < 1e-6, f"axis {i} too narrow"
        mean = float((w * m).sum())
        out.append((mean, float(np.sqrt((w * (m - mean) ** 2).sum()))))
    return out


def _loglik(logpdf: Callable[..., np.ndarray], data: np.ndarray, *mesh: np.ndarray) -> np.ndarray:
    """Return the sum over ``data`` of ``logpdf(data, *params)`` at every grid point."""
    total = np.zeros(mesh[0].shape)
    for x in np.asarray(data).ravel():
        total = total + logpdf(x, *mesh)
    return total


# --- the ported models ---------------------------------------------------------------


@port
def censored_normal() -> Port:
    """Measurements capped at an instrument's limit (PyMC's censored-data example)."""
    rng = np.random.default_rng(1)
    y = np.clip(rng.normal(1.0, 1.0, 150), None, 1.5)
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 10.0)
        kl.Censored("y", kl.Normal.dist(mu, 1.0), lower=None, upper=1.5, observed=y)

    def log_post(m: np.ndarray) -> np.ndarray:
        cap = y == 1.5
        lp = stats.norm.logpdf(m, 0.0, 10.0) + cap.sum() * stats.norm.logsf(1.5, m, 1.0)
        return lp + _loglik(lambda x, m: stats.norm.logpdf(x, m, 1.0), y[~cap], m)

    ((mean, sd),) = grid_moments(log_post, np.linspace(0.3, 1.8, 1501))
    return Port(model, {"mu": (mean, sd)})


@port
def truncated_normal() -> Port:
    """Positive measurements: a normal truncated at 0, location and scale unknown."""
    rng = np.random.default_rng(2)
    y = stats.truncnorm.rvs(-1.0, np.inf, loc=1.0, scale=1.0, size=300, random_state=rng)
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 5.0)
        sigma = kl.HalfNormal("sigma", 2.0)
        kl.Truncated("y", kl.Normal.dist(mu, sigma), lower=0.0, observed=y)

    def log_post(m: np.ndarray, s: np.ndarray) -> np.ndarray:
        prior = stats.norm.logpdf(m, 0.0, 5.0) + stats.halfnorm.logpdf(s, scale=2.0)
        lik = _loglik(lambda x, m, s: stats.norm.logpdf(x, m, s), y, m, s)
        return prior + lik - len(y) * stats.norm.logsf(0.0, m, s)

    (mu_ref, sigma_ref) = grid_moments(
        log_post, np.linspace(-1.0, 1.6, 651), np.linspace(0.6, 1.8, 481)
    )
    return Port(model, {"mu": mu_ref, "sigma": sigma_ref})


@port
def zero_inflated_counts() -> Port:
    """Port counts with excess zeros (PyMC's zero-inflated Poisson)."""
    rng = np.random.default_rng(3)
    y = np.where(rng.random(200) < 0.3, 0, rng.poisson(2.5, 200))
    with kl.Model() as model:
        psi = kl.Beta("psi", 1.0, 1.0)
        mu = kl.Gamma("mu", 2.0, 0.5)
        kl.ZeroInflatedPoisson("y", psi=psi, mu=mu, observed=y)

    zeros, positive = int((y == 0).sum()), y[y > 0]

    def log_post(p: np.ndarray, m: np.ndarray) -> np.ndarray:
        prior = stats.gamma.logpdf(m, 2.0, scale=2.0)
        lik0 = zeros * np.log((1 - p) + p * np.exp(-m))
        lik = _loglik(lambda k, p, m: np.log(p) + stats.poisson.logpmf(k, m), positive, p, m)
        return prior + lik0 + lik

    psi_ref, mu_ref = grid_moments(
        log_post, np.linspace(0.45, 0.95, 501), np.linspace(1.6, 3.6, 401)
    )
    return Port(model, {"psi": psi_ref, "mu": mu_ref})


@port
def logistic_with_pm_math() -> Port:
    """Port a logistic regression written with ``pm.math.invlogit`` and ``pm.math.dot``."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(150, 1))
    y = rng.random(150) < special.expit(-0.5 + 1.2 * x[:, 0])
    with kl.Model() as model:
        alpha = kl.Normal("alpha", 0.0, 2.0)
        beta = kl.Normal("beta", 0.0, 2.0, shape=1)
        p = kl.Deterministic("p", kl.math.invlogit(alpha + kl.math.dot(x, beta)))
        kl.Bernoulli("y", p=p, observed=y.astype("int64"))

    def log_post(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        prior = stats.norm.logpdf(a, 0, 2) + stats.norm.logpdf(b, 0, 2)
        lik = np.zeros(a.shape)
        for xi, yi in zip(x[:, 0], y, strict=True):
            eta = a + b * xi
            lik += -np.logaddexp(0.0, -eta) if yi else -np.logaddexp(0.0, eta)
        return prior + lik

    alpha_ref, beta_ref = grid_moments(
        log_post, np.linspace(-2.0, 0.6, 521), np.linspace(0.0, 2.8, 561)
    )
    return Port(
        model,
        {"alpha": alpha_ref, "beta": beta_ref},
        quantity={"beta": lambda post: post["beta"].values[..., 0]},
    )


@port
def gumbel_extremes() -> Port:
    """Annual maxima with a Gumbel likelihood (location and scale unknown)."""
    rng = np.random.default_rng(5)
    y = stats.gumbel_r.rvs(10.0, 2.0, size=80, random_state=rng)
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 20.0)
        beta = kl.HalfNormal("beta", 5.0)
        kl.Gumbel("y", mu=mu, beta=beta, observed=y)

    def log_post(m: np.ndarray, b: np.ndarray) -> np.ndarray:
        prior = stats.norm.logpdf(m, 0, 20) + stats.halfnorm.logpdf(b, scale=5)
        return prior + _loglik(lambda x, m, b: stats.gumbel_r.logpdf(x, m, b), y, m, b)

    mu_ref, beta_ref = grid_moments(
        log_post, np.linspace(8.0, 12.0, 401), np.linspace(1.2, 3.6, 481)
    )
    return Port(model, {"mu": mu_ref, "beta": beta_ref})


@port
def rat_tumours_beta_binomial() -> Port:
    """Port the rat tumour hierarchy of BDA3 chapter 5 with a BetaBinomial likelihood.

    The prior ``p(a, b) ~ (a + b)^(-5/2)`` is written as PyMC users write it: HalfFlat
    variables and a Potential. Checked on BDA's coordinates ``log(a / b)`` and
    ``log(a + b)`` (the posterior of ``a`` and ``b`` themselves is heavy-tailed).
    """
    data = np.genfromtxt(GALLERY / "rat_tumors.csv", delimiter=",", names=True)
    y, n = data["y"].astype("int64"), data["n"].astype("int64")
    with kl.Model() as model:
        ab = kl.HalfFlat("ab", shape=2)
        kl.Potential("p(a, b)", -2.5 * kl.math.log(kl.math.sum(ab)))
        kl.BetaBinomial("y", alpha=ab[0], beta=ab[1], n=n, observed=y)

    def log_post(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        # u = log(a / b), v = log(a + b); the Jacobian of (a, b) -> (u, v) is a b.
        a = np.exp(v) * special.expit(u)
        b = np.exp(v) - a
        lik = sum(
            special.betaln(a + yi, b + ni - yi) - special.betaln(a, b)
            for yi, ni in zip(y, n, strict=True)
        )
        return -2.5 * v + np.log(a) + np.log(b) + lik

    u_ref, v_ref = grid_moments(log_post, np.linspace(-2.6, -1.0, 321), np.linspace(0.2, 6.8, 661))

    def ab_of(post: Any) -> np.ndarray:
        return post["ab"].values

    return Port(
        model,
        {"log(a/b)": u_ref, "log(a+b)": v_ref},
        quantity={
            "log(a/b)": lambda post: np.log(ab_of(post)[..., 0] / ab_of(post)[..., 1]),
            "log(a+b)": lambda post: np.log(ab_of(post).sum(axis=-1)),
        },
        sample_kwargs={"target_accept": 0.95},
    )


@port
def normal_precision_conjugate() -> Port:
    """Port a normal likelihood written with PyMC's precision ``tau`` (conjugate Gamma)."""
    rng = np.random.default_rng(6)
    y = rng.normal(0.0, 0.7, 60)
    with kl.Model() as model:
        tau = kl.Gamma("tau", alpha=2.0, beta=1.0)
        kl.Normal("y", mu=0.0, tau=tau, observed=y)
    # Gamma(2, 1) prior, Normal(0, 1 / sqrt(tau)) likelihood: Gamma(2 + n / 2, 1 + sum y^2 / 2).
    post = stats.gamma(2.0 + len(y) / 2, scale=1.0 / (1.0 + 0.5 * np.sum(y**2)))
    return Port(model, {"tau": (float(post.mean()), float(post.std()))})


@port
def student_t_with_lam() -> Port:
    """Port a robust location model written with StudentT's precision ``lam``."""
    rng = np.random.default_rng(7)
    y = 2.0 + 0.5 * rng.standard_t(4.0, 80)
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 10.0)
        kl.StudentT("y", nu=4.0, mu=mu, lam=4.0, observed=y)

    def log_post(m: np.ndarray) -> np.ndarray:
        lik = _loglik(lambda x, m: stats.t.logpdf(x, 4.0, m, 0.5), y, m)
        return stats.norm.logpdf(m, 0.0, 10.0) + lik

    ((mean, sd),) = grid_moments(log_post, np.linspace(1.5, 2.6, 1101))
    return Port(model, {"mu": (mean, sd)})


@port
def imputed_normal() -> Port:
    """Port a model whose observed data has NaNs: PyMC imputes them as free variables."""
    rng = np.random.default_rng(8)
    y = rng.normal(1.0, 1.0, 40)
    y[[3, 17, 30]] = np.nan
    with kl.Model() as model, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ImputationWarning
        mu = kl.Normal("mu", 0.0, 10.0)
        kl.Normal("y", mu, 1.0, observed=y)
    # Conjugate: mu | y_obs ~ Normal(m, v); a missing value ~ Normal(m, 1 + v).
    seen = y[~np.isnan(y)]
    v = 1.0 / (1.0 / 100.0 + len(seen))
    m = v * seen.sum()
    return Port(
        model,
        {"mu": (m, np.sqrt(v)), "y_unobserved[0]": (m, np.sqrt(1.0 + v))},
        quantity={"y_unobserved[0]": lambda post: post["y_unobserved"].values[..., 0]},
    )


@port
def random_walk_trend() -> Port:
    """Port a latent Gaussian random walk observed with noise (exact: a Gaussian posterior)."""
    rng = np.random.default_rng(9)
    steps, walk_sd, noise_sd = 29, 0.3, 0.5
    truth = np.cumsum(rng.normal(0.0, walk_sd, steps + 1))
    y = truth + rng.normal(0.0, noise_sd, steps + 1)
    with kl.Model(coords={"t": np.arange(steps + 1)}) as model:
        x = kl.GaussianRandomWalk(
            "x", mu=0.0, sigma=walk_sd, init_dist=kl.Normal.dist(0.0, 10.0), dims="t"
        )
        kl.Normal("y", mu=x, sigma=noise_sd, observed=y, dims="t")
    # Prior precision: x_0 ~ N(0, 10^2), x_t - x_{t-1} ~ N(0, walk_sd^2).
    n = steps + 1
    d = np.eye(n) - np.eye(n, k=-1)
    scale = np.full(n, 1.0 / walk_sd)
    scale[0] = 1.0 / 10.0
    d[0] = np.eye(n)[0]
    prec = (d * scale[:, None] ** 2).T @ d + np.eye(n) / noise_sd**2
    cov = np.linalg.inv(prec)
    mean = cov @ (y / noise_sd**2)
    picks = {"x[0]": 0, "x[15]": 15, "x[29]": 29}
    return Port(
        model,
        {k: (float(mean[i]), float(np.sqrt(cov[i, i]))) for k, i in picks.items()},
        quantity={k: (lambda post, i=i: post["x"].values[..., i]) for k, i in picks.items()},
    )


@port
def autoregressive_order_one() -> Port:
    """Port an AR(1) series with an unknown coefficient (``pm.AR`` with ``rho=[rho]``)."""
    rng = np.random.default_rng(10)
    y = np.zeros(150)
    for t in range(1, len(y)):
        y[t] = 0.5 * y[t - 1] + rng.normal()
    with kl.Model() as model:
        rho = kl.Uniform("rho", -1.0, 1.0)
        kl.AR("y", rho=[rho], sigma=1.0, init_dist=kl.Normal.dist(0.0, 1.0), observed=y)

    def log_post(r: np.ndarray) -> np.ndarray:
        return sum(stats.norm.logpdf(y[t] - r * y[t - 1]) for t in range(1, len(y)))

    ((mean, sd),) = grid_moments(log_post, np.linspace(-0.1, 0.99, 1091))
    return Port(model, {"rho": (mean, sd)})


@port
def lkj_covariance() -> Port:
    """Port a bivariate normal with an ``LKJCholeskyCov`` prior (``compute_corr=True``)."""
    rng = np.random.default_rng(11)
    sd, r = np.array([1.0, 2.0]), 0.5
    cov = np.outer(sd, sd) * np.array([[1.0, r], [r, 1.0]])
    x = rng.multivariate_normal(np.zeros(2), cov, size=100)
    with kl.Model() as model:
        chol, corr, stds = kl.LKJCholeskyCov(
            "chol", n=2, eta=2.0, sd_dist=kl.Exponential.dist(1.0, shape=2), compute_corr=True
        )
        kl.MvNormal("obs", mu=np.zeros(2), chol=chol, observed=x)

    scatter = x.T @ x

    def log_post(s1: np.ndarray, s2: np.ndarray, rho: np.ndarray) -> np.ndarray:
        # Exponential(1) scales, LKJ(2) on the correlation: density (1 - rho^2)^(eta - 1).
        prior = -s1 - s2 + np.log1p(-(rho**2))
        det = (s1 * s2) ** 2 * (1 - rho**2)
        quad = (
            scatter[0, 0] * s2**2 + scatter[1, 1] * s1**2 - 2 * scatter[0, 1] * rho * s1 * s2
        ) / det
        return prior - 0.5 * len(x) * np.log(det) - 0.5 * quad

    s1_ref, s2_ref, rho_ref = grid_moments(
        log_post,
        np.linspace(0.6, 1.45, 171),
        np.linspace(1.3, 3.0, 171),
        np.linspace(-0.05, 0.85, 181),
    )
    return Port(
        model,
        {"sd[0]": s1_ref, "sd[1]": s2_ref, "corr": rho_ref},
        quantity={
            "sd[0]": lambda post: post["chol_stds"].values[..., 0],
            "sd[1]": lambda post: post["chol_stds"].values[..., 1],
            "corr": lambda post: post["chol_corr"].values[..., 0, 1],
        },
    )


@port
def von_mises_direction() -> Port:
    """Port a mean direction of angles with a VonMises likelihood."""
    rng = np.random.default_rng(12)
    y = stats.vonmises.rvs(2.0, loc=1.0, size=50, random_state=rng)
    with kl.Model() as model:
        mu = kl.Uniform("mu", -np.pi, np.pi)
        kl.VonMises("y", mu=mu, kappa=2.0, observed=y)

    def log_post(m: np.ndarray) -> np.ndarray:
        return _loglik(lambda x, m: stats.vonmises.logpdf(x, 2.0, loc=m), y, m)

    ((mean, sd),) = grid_moments(log_post, np.linspace(0.3, 1.7, 1401))
    return Port(model, {"mu": (mean, sd)})


@port
def von_mises_prior_near_pi() -> Port:
    """Port a free VonMises angle centred near pi: the circular transform has no wall there."""
    with kl.Model() as model:
        kl.VonMises("theta", mu=3.0, kappa=2.0)
    grid = np.linspace(-np.pi, np.pi, 20001)
    w = stats.vonmises.pdf(grid, 2.0, loc=3.0)
    w /= w.sum()
    reference = {}
    for key, f in (("cos", np.cos), ("sin", np.sin)):
        mean = float((w * f(grid)).sum())
        reference[key] = (mean, float(np.sqrt((w * (f(grid) - mean) ** 2).sum())))
    return Port(
        model,
        reference,
        quantity={
            "cos": lambda post: np.cos(post["theta"].values),
            "sin": lambda post: np.sin(post["theta"].values),
        },
    )


@port
def censored_poisson_counts() -> Port:
    """Port counts reported as "5 or more": a Poisson censored above (its logcdf: gammaincc)."""
    rng = np.random.default_rng(13)
    y = np.minimum(rng.poisson(3.5, 120), 5)
    with kl.Model() as model:
        mu = kl.Gamma("mu", alpha=2.0, beta=0.5)
        kl.Censored("y", kl.Poisson.dist(mu), lower=None, upper=5, observed=y)

    def log_post(m: np.ndarray) -> np.ndarray:
        capped = int((y == 5).sum())
        lik = _loglik(lambda k, m: stats.poisson.logpmf(k, m), y[y < 5], m)
        return stats.gamma.logpdf(m, 2.0, scale=2.0) + lik + capped * stats.poisson.logsf(4, m)

    ((mean, sd),) = grid_moments(log_post, np.linspace(2.2, 5.2, 1201))
    return Port(model, {"mu": (mean, sd)})


@port
def truncated_gamma_sizes() -> Port:
    """Port sizes seen only between 1 and 6: a Gamma truncated on both sides (gammainc)."""
    rng = np.random.default_rng(14)
    draws = rng.gamma(2.5, 1.0, 2000)
    y = draws[(draws > 1.0) & (draws < 6.0)][:150]
    with kl.Model() as model:
        alpha = kl.Exponential("alpha", 0.5)
        kl.Truncated("y", kl.Gamma.dist(alpha=alpha, beta=1.0), lower=1.0, upper=6.0, observed=y)

    def log_post(a: np.ndarray) -> np.ndarray:
        mass = stats.gamma.cdf(6.0, a) - stats.gamma.cdf(1.0, a)
        lik = _loglik(lambda x, a: stats.gamma.logpdf(x, a), y, a)
        return stats.expon.logpdf(a, scale=2.0) + lik - len(y) * np.log(mass)

    ((mean, sd),) = grid_moments(log_post, np.linspace(1.0, 4.5, 1401))
    return Port(model, {"alpha": (mean, sd)})


# --- the test -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PORTS))
def test_ported_model_matches_its_exact_posterior(name: str) -> None:
    case = PORTS[name]()
    kwargs = {"draws": 1000, "tune": 1000, "chains": 4, **case.sample_kwargs}
    with case.model, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # diagnostics are asserted below
        idata = kl.sample(random_seed=SEED, progressbar=False, backend="numba", **kwargs)
    post = idata["posterior"]
    divergences = int(idata["sample_stats"]["diverging"].sum())
    assert divergences <= case.max_divergences, f"{divergences} divergences"
    failures = []
    for key, (ref_mean, ref_sd) in case.reference.items():
        draws = case.quantity[key](post) if key in case.quantity else post[key].values
        draws = np.asarray(draws)
        assert draws.shape[:2] == (kwargs["chains"], kwargs["draws"]), (key, draws.shape)
        e, r = float(ess(draws, method="bulk")), float(rhat(draws))
        mean, sd = float(draws.mean()), float(draws.std(ddof=1))
        tol = 4 * ref_sd / np.sqrt(e)
        if r >= 1.01:
            failures.append(f"{key}: R-hat {r:.3f}")
        if abs(mean - ref_mean) >= tol:
            failures.append(f"{key}: mean {mean:.4g}, exact {ref_mean:.4g} +- {tol:.2g}")
        if abs(sd / ref_sd - 1) >= 0.15:
            failures.append(f"{key}: sd {sd:.4g}, exact {ref_sd:.4g}")
    assert not failures, f"{name}:\n" + "\n".join(failures)
