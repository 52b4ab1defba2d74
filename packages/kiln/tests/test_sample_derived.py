"""kl.sample of PyMC-style models with the derived distributions, against exact posteriors.

Each model is written as a PyMC user writes it (``pm.`` renamed to ``kl.``). The
references are computed independently with NumPy/SciPy: the change-point posterior by
integrating the rates out (Gamma-Poisson conjugacy), the zero-inflated Poisson one by
quadrature on a grid, the ordered-logistic one by its maximum a posteriori point and
Laplace curvature (NumPy log-likelihood, SciPy optimizer). Posterior means must lie
within 4 Monte Carlo standard errors (posterior sd / sqrt(ESS)) of the reference.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from arviz_stats import ess
from scipy import optimize, special, stats

import kiln as kl

#: shared/ lies beside the repository (as in CI).
COAL = (
    Path(__file__).resolve().parents[4]
    / "shared"
    / "reference"
    / "gallery"
    / "coal_mining_disasters.csv"
)


def _sample(model: kl.Model, **kwargs):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)  # short chains: low ESS
        options = {
            "draws": 1000,
            "tune": 1000,
            "chains": 2,
            "progressbar": False,
            "backend": "numba",
        }
        return kl.sample(**{**options, **kwargs})


def _mc_check(x: np.ndarray, reference: float, sd: float, what: str) -> None:
    """Assert the mean of draws ``x`` (chains, draws) is within 4 MC errors of ``reference``."""
    e = float(ess(np.asarray(x, float), chain_axis=0, draw_axis=1))
    assert e > 50, f"{what}: ESS {e:.0f}"
    err = sd / np.sqrt(e)
    assert abs(x.mean() - reference) < 4 * err, (what, x.mean(), reference, err, e)


# -- change point: a free DiscreteUniform ---------------------------------------------------


def _coal() -> tuple[np.ndarray, np.ndarray]:
    if not COAL.exists():
        pytest.skip(f"the coal-mining data is not at {COAL}")
    table = np.genfromtxt(COAL, delimiter=",", skip_header=1)
    table = table[~np.isnan(table[:, 1])]  # two years have no count: dropped
    return table[:, 0].astype(int), table[:, 1].astype(int)


def _switchpoint_posterior(years: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Return p(s | data) for s = years.min() .. years.max(), the rates integrated out.

    Rates ~ Exponential(1) = Gamma(1, 1), so each segment contributes
    ``Gamma(1 + sum y) / (1 + n)^(1 + sum y)`` (the prod y! cancels).
    """
    grid = np.arange(years.min(), years.max() + 1)
    logp = np.empty(grid.size)
    for i, s in enumerate(grid):
        early = years <= s  # PyMC's gallery: switch(switchpoint >= year, early, late)
        total = 0.0
        for part in (early, ~early):
            k, n = counts[part].sum(), part.sum()
            total += special.gammaln(1.0 + k) - (1.0 + k) * np.log(1.0 + n)
        logp[i] = total
    p = np.exp(logp - logp.max())
    return p / p.sum()  # type: ignore[no-any-return]


def test_change_point_with_a_free_discrete_uniform() -> None:
    years, counts = _coal()
    with kl.Model() as model:
        switchpoint = kl.DiscreteUniform(
            "switchpoint", lower=years.min(), upper=years.max(), initval=1900
        )
        early_rate = kl.Exponential("early_rate", 1.0)
        late_rate = kl.Exponential("late_rate", 1.0)
        rate = kl.math.switch(switchpoint >= years, early_rate, late_rate)
        kl.Poisson("disasters", rate, observed=counts)
    idata = _sample(model, draws=2000, tune=1500, random_seed=11)
    s = idata["posterior"]["switchpoint"].values
    assert s.dtype.kind == "i" and s.min() >= years.min() and s.max() <= years.max()
    post = _switchpoint_posterior(years, counts)
    grid = np.arange(years.min(), years.max() + 1)
    mode = int(grid[np.argmax(post)])
    assert 1885 <= mode <= 1895, mode  # the reference itself: the known answer, ~1890
    values, freq = np.unique(s, return_counts=True)
    assert abs(int(values[np.argmax(freq)]) - mode) <= 2, (values, freq, mode)
    mean = float(np.sum(grid * post))
    sd = float(np.sqrt(np.sum((grid - mean) ** 2 * post)))
    _mc_check(s, mean, sd, "switchpoint")


# -- zero-inflated Poisson likelihood --------------------------------------------------------

PSI, MU = 0.65, 3.5


def _zip_data() -> np.ndarray:
    rng = np.random.default_rng(2026)
    n = 400
    return np.where(rng.random(n) < PSI, rng.poisson(MU, n), 0)


def _zip_grid_posterior(y: np.ndarray) -> dict[str, tuple[float, float]]:
    """Return the posterior (mean, sd) of psi and mu by quadrature on a fine grid.

    Priors as in the model: psi ~ Beta(1, 1), mu ~ Gamma(2, rate 0.5).
    """
    psi = np.linspace(1e-4, 1 - 1e-4, 801)[:, None]
    mu = np.linspace(1e-3, 12.0, 1201)[None, :]
    zeros, k = np.sum(y == 0), y[y > 0]
    loglik = zeros * np.logaddexp(np.log1p(-psi), np.log(psi) - mu)
    loglik = loglik + k.size * np.log(psi) + k.sum() * np.log(mu) - k.size * mu
    logpost = loglik + stats.gamma.logpdf(mu, 2.0, scale=2.0)
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    out = {}
    for name, g in (("psi", psi), ("mu", mu)):
        m = float(np.sum(w * g))
        out[name] = (m, float(np.sqrt(np.sum(w * (g - m) ** 2))))
    return out


def test_zero_inflated_poisson_likelihood() -> None:
    y = _zip_data()
    with kl.Model() as model:
        psi = kl.Beta("psi", 1.0, 1.0)
        mu = kl.Gamma("mu", 2.0, 0.5)
        kl.ZeroInflatedPoisson("y", psi=psi, mu=mu, observed=y)
    idata = _sample(model, random_seed=12)
    ref = _zip_grid_posterior(y)
    for name, truth in (("psi", PSI), ("mu", MU)):
        mean, sd = ref[name]
        assert abs(mean - truth) < 4 * sd, (name, mean, truth, sd)  # the data: a fair draw
        _mc_check(idata["posterior"][name].values, mean, sd, name)


# -- ordered logistic likelihood -------------------------------------------------------------

BETA, CUTPOINTS = 1.2, np.array([-1.0, 0.5, 2.0])


def _ordinal_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=500)
    latent = BETA * x + rng.logistic(size=x.size)
    return x, np.searchsorted(CUTPOINTS, latent)


def _ordinal_logpost(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Return the log-posterior in (beta, cutpoints): NumPy's logistic CDF, the model's priors."""
    beta, cut = theta[0], theta[1:]
    if np.any(np.diff(cut) <= 0):
        return -np.inf
    edges = np.concatenate([[-np.inf], cut, [np.inf]])
    upper = special.expit(edges[y + 1] - beta * x)
    lower = special.expit(edges[y] - beta * x)
    prior = stats.norm.logpdf(beta, 0.0, 5.0) + stats.norm.logpdf(cut, [-1, 0, 1], 5.0).sum()
    return float(np.sum(np.log(upper - lower)) + prior)


def _laplace(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the MAP point and the sds of the Laplace approximation there."""
    f = lambda t: -_ordinal_logpost(t, x, y)  # noqa: E731
    res = optimize.minimize(
        f,
        np.array([0.0, -1.0, 0.0, 1.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20_000},
    )
    h = 1e-4
    n = res.x.size
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            hess[i, j] = (
                f(res.x + ei + ej) - f(res.x + ei - ej) - f(res.x - ei + ej) + f(res.x - ei - ej)
            ) / (4 * h * h)
    return res.x, np.sqrt(np.diag(np.linalg.inv(hess)))


def test_ordered_logistic_likelihood_with_ordered_cutpoints() -> None:
    x, y = _ordinal_data()
    with kl.Model() as model:
        beta = kl.Normal("beta", 0.0, 5.0)
        cutpoints = kl.Normal(
            "cutpoints",
            mu=[-1.0, 0.0, 1.0],
            sigma=5.0,
            shape=3,
            transform=kl.distributions.transforms.ordered,
        )
        kl.OrderedLogistic("y", eta=beta * x, cutpoints=cutpoints, observed=y)
    idata = _sample(model, random_seed=13)
    cut = idata["posterior"]["cutpoints"].values
    assert np.all(np.diff(cut, axis=-1) > 0)
    mode, sds = _laplace(x, y)
    draws = [idata["posterior"]["beta"].values, *(cut[..., i] for i in range(3))]
    for i, (name, truth) in enumerate(
        zip(["beta", "c0", "c1", "c2"], [BETA, *CUTPOINTS], strict=True)
    ):
        assert abs(mode[i] - truth) < 4 * sds[i], (name, mode[i], truth, sds[i])
        # n = 500: the posterior is near normal, its mean within ~0.1 sd of the mode.
        e = float(ess(draws[i], chain_axis=0, draw_axis=1))
        tol = 4 * sds[i] / np.sqrt(e) + 0.1 * sds[i]
        assert abs(draws[i].mean() - mode[i]) < tol, (name, draws[i].mean(), mode[i], tol)
        assert abs(draws[i].std() / sds[i] - 1) < 0.2, (name, draws[i].std(), sds[i])
