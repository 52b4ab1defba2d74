"""The benchmark models M1-M4 written with kiln's model layer (``import kiln as kl``).

The same math and data as ``bench_models.py`` (and ``pymc_models.py``, PyMC's side):
``build(name)`` returns a new ``kl.Model``. Data are constants (observed arrays), as
in the frozen graphs PyMC compiles by default.
"""

from __future__ import annotations

import functools

import kiln as kl
from bench_models import data_lkj, data_m1, data_m2, data_m3, data_m4

MODELS = ("M1", "M2", "M3", "M4")
#: The size argument of each model's data generator (``cost_growth.py`` scales it).
SIZE_ARG = {"M2": "n_obs", "M3": "n", "M4": "n_groups"}


@functools.cache
def data(name: str, size: int | None = None) -> dict:
    """Return model ``name``'s data (``size``: rows of M2, M3; groups of M4), cached."""
    make = {"M1": data_m1, "M2": data_m2, "M3": data_m3, "M4": data_m4}[name]
    return make() if size is None else make(**{SIZE_ARG[name]: size})


def model_m1() -> kl.Model:
    """Eight schools, non-centered."""
    d = data("M1")
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_tilde = kl.Normal("theta_tilde", 0.0, 1.0, shape=8)
        theta = kl.Deterministic("theta", mu + tau * theta_tilde)
        kl.Normal("y", theta, d["sigma"], observed=d["y"])
    return m


def model_m2(n_obs: int | None = None) -> kl.Model:
    """Radon-like varying intercept and slope, non-centered (``n_obs`` rows, default 919)."""
    d = data("M2", n_obs)
    k = d["n_groups"]
    with kl.Model() as m:
        mu_a = kl.Normal("mu_a", 0.0, 10.0)
        sigma_a = kl.HalfNormal("sigma_a", 5.0)
        mu_b = kl.Normal("mu_b", 0.0, 10.0)
        sigma_b = kl.HalfNormal("sigma_b", 5.0)
        z_a = kl.Normal("z_a", 0.0, 1.0, shape=k)
        z_b = kl.Normal("z_b", 0.0, 1.0, shape=k)
        a = mu_a + sigma_a * z_a
        b = mu_b + sigma_b * z_b
        sigma_y = kl.HalfNormal("sigma_y", 5.0)
        kl.Normal("y", a[d["idx"]] + b[d["idx"]] * d["x"], sigma_y, observed=d["y"])
    return m


def model_m3(n: int | None = None) -> kl.Model:
    """Logistic regression, N = 10,000 (or ``n``) rows, D = 20."""
    d = data("M3", n)
    with kl.Model() as m:
        alpha = kl.Normal("alpha", 0.0, 1.0)
        beta = kl.Normal("beta", 0.0, 1.0, shape=d["X"].shape[1])
        kl.Bernoulli("y", logit_p=alpha + kl.tensor.dot(d["X"], beta), observed=d["y"])
    return m


def model_m4(n_groups: int | None = None) -> kl.Model:
    """Twenty (or ``n_groups``) chained groups, 3 free variables each: a wide graph."""
    d = data("M4", n_groups)
    with kl.Model() as m:
        mu_prev = 0.0
        for g, group in enumerate(d["groups"]):
            mu = kl.Normal(f"mu_{g}", 0.5 * mu_prev, 1.0)
            sigma = kl.HalfNormal(f"sigma_{g}", 1.0)
            offset = kl.Normal(f"offset_{g}", 0.0, 1.0, shape=d["n_members"])
            theta = mu + sigma * offset
            kl.Normal(f"y_{g}", theta[group["idx"]], 1.0, observed=group["y"])
            mu_prev = mu
    return m


def model_lkj() -> kl.Model:
    """Return the LKJ model (``bench_models``' docstring): a Cholesky-factored covariance."""
    d = data_lkj()
    with kl.Model() as m:
        sd_dist = kl.Exponential.dist(1.0, shape=3)
        chol, _, _ = kl.LKJCholeskyCov("chol", n=3, eta=2.0, sd_dist=sd_dist, compute_corr=True)
        mu = kl.Normal("mu", 0.0, 1.0, shape=3)
        kl.MvNormal("y", mu, chol=chol, observed=d["y"])
    return m


def build(name: str) -> kl.Model:
    """Return a new model ``name`` (M1-M4, or LKJ)."""
    builders = {"M1": model_m1, "M2": model_m2, "M3": model_m3, "M4": model_m4, "LKJ": model_lkj}
    return builders[name]()
