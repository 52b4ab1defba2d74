"""The benchmark models M1-M4 in PyMC, on the data of ``bench_models.py``.

Used by ``peer.py`` (the ``peer`` nox session, which installs PyMC); the kiln versions
of the same math are in ``kiln_models.py``. Observed data and index vectors are NumPy
arrays, so PyMC makes them constants (no ``pm.Data``), as in ``kiln_models.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pymc as pm
import pytensor
from pytensor.graph.basic import Variable

from bench_models import data_lkj, data_m1, data_m2, data_m3, data_m4

MODELS = ("M1", "M2", "M3", "M4")


def model_m1() -> pm.Model:
    """Return M1, eight schools, non-centered."""
    d = data_m1()
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, shape=8)
        theta = mu + tau * theta_tilde
        pm.Normal("y", theta, d["sigma"], observed=d["y"])
    return model


def model_m2() -> pm.Model:
    """Return M2, radon-like varying intercept and slope, non-centered."""
    d = data_m2()
    k = d["n_groups"]
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 5.0)
        mu_b = pm.Normal("mu_b", 0.0, 10.0)
        sigma_b = pm.HalfNormal("sigma_b", 5.0)
        z_a = pm.Normal("z_a", 0.0, 1.0, shape=k)
        z_b = pm.Normal("z_b", 0.0, 1.0, shape=k)
        a = mu_a + sigma_a * z_a
        b = mu_b + sigma_b * z_b
        sigma_y = pm.HalfNormal("sigma_y", 5.0)
        pm.Normal("y", a[d["idx"]] + b[d["idx"]] * d["x"], sigma_y, observed=d["y"])
    return model


def model_m3() -> pm.Model:
    """Return M3, logistic regression with N=10,000 rows and D=20 covariates."""
    d = data_m3()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 1.0)
        beta = pm.Normal("beta", 0.0, 1.0, shape=d["X"].shape[1])
        pm.Bernoulli("y", logit_p=alpha + d["X"] @ beta, observed=d["y"])
    return model


def model_m4(n_groups: int = 20) -> pm.Model:
    """Return M4, 20 (or ``n_groups``) chained groups of 4 members (a wide graph)."""
    d = data_m4(n_groups)
    with pm.Model() as model:
        mu_prev = 0.0
        for g, group in enumerate(d["groups"]):
            mu = pm.Normal(f"mu_{g}", 0.5 * mu_prev, 1.0)
            sigma = pm.HalfNormal(f"sigma_{g}", 1.0)
            offset = pm.Normal(f"offset_{g}", 0.0, 1.0, shape=d["n_members"])
            theta = mu + sigma * offset
            pm.Normal(f"y_{g}", theta[group["idx"]], 1.0, observed=group["y"])
            mu_prev = mu
    return model


def model_scalars(n: int) -> pm.Model:
    """Return ``scalar_scaling.build("normal", n)`` in PyMC: ``n`` scalars in a loop."""
    cs = np.random.default_rng(0).normal(size=n)
    with pm.Model() as model:
        xs = [pm.Normal(f"x{i}", 0.0, 1.0) for i in range(n)]
        pm.Normal("y", sum(x * c for x, c in zip(xs, cs, strict=True)), 1.0, observed=1.5)
    return model


def model_lkj() -> pm.Model:
    """Return the LKJ model (``bench_models``' docstring): a Cholesky-factored covariance."""
    d = data_lkj()
    with pm.Model() as model:
        sd_dist = pm.Exponential.dist(1.0, shape=3)
        chol, _, _ = pm.LKJCholeskyCov("chol", n=3, eta=2.0, sd_dist=sd_dist, compute_corr=True)
        mu = pm.Normal("mu", 0.0, 1.0, shape=3)
        pm.MvNormal("y", mu, chol=chol, observed=d["y"])
    return model


MODEL: dict[str, Callable[[], pm.Model]] = {
    "M1": model_m1,
    "M2": model_m2,
    "M3": model_m3,
    "M4": model_m4,
}


def build(name: str) -> tuple[pm.Model, list[Variable], list[Variable]]:
    """Return model ``name``, its value variables and ``[logp, *dlogp/dvalue]``.

    The value variables are PyMC's unconstrained inputs (``tau_log__`` for a positive
    ``tau``), in the model's order, and the log density includes the Jacobians.
    """
    model = MODEL[name]()
    inputs = list(model.value_vars)
    logp = model.logp()
    return model, inputs, [logp, *pytensor.grad(logp, inputs)]
