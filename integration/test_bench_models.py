"""The benchmark models M1-M4 (benchmarks/kiln_models.py) against SciPy.

The log density against SciPy, the gradient against finite differences of that
reference, before and after Stage-1 rewriting.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

import kiln
from kiln_rewrite import FAST_RUN_QUERY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_models import data_m1, data_m2, data_m3, data_m4  # noqa: E402
from kiln_models import MODELS, build, ndim  # noqa: E402


def _ref_m1(mu, tau_log, theta_tilde):
    d = data_m1()
    tau = np.exp(tau_log)
    return (
        stats.norm(0, 5).logpdf(mu)
        + stats.halfcauchy(scale=5).logpdf(tau)
        + tau_log
        + stats.norm(0, 1).logpdf(theta_tilde).sum()
        + stats.norm(mu + tau * theta_tilde, d["sigma"]).logpdf(d["y"]).sum()
    )


def _ref_m2(mu_a, sigma_a_log, mu_b, sigma_b_log, z_a, z_b, sigma_y_log):
    d = data_m2()
    sigma_a, sigma_b, sigma_y = np.exp([sigma_a_log, sigma_b_log, sigma_y_log])
    a = mu_a + sigma_a * z_a
    b = mu_b + sigma_b * z_b
    half = stats.halfnorm(scale=5)
    return (
        stats.norm(0, 10).logpdf(mu_a)
        + half.logpdf(sigma_a)
        + sigma_a_log
        + stats.norm(0, 10).logpdf(mu_b)
        + half.logpdf(sigma_b)
        + sigma_b_log
        + stats.norm(0, 1).logpdf(z_a).sum()
        + stats.norm(0, 1).logpdf(z_b).sum()
        + half.logpdf(sigma_y)
        + sigma_y_log
        + stats.norm(a[d["idx"]] + b[d["idx"]] * d["x"], sigma_y).logpdf(d["y"]).sum()
    )


def _ref_m3(alpha, beta):
    d = data_m3()
    p = special.expit(alpha + d["X"] @ beta)
    return (
        stats.norm(0, 1).logpdf(alpha)
        + stats.norm(0, 1).logpdf(beta).sum()
        + stats.bernoulli(p).logpmf(d["y"]).sum()
    )


def _ref_m4(*values):
    d = data_m4()
    total, mu_prev = 0.0, 0.0
    for g, group in enumerate(d["groups"]):
        mu, sigma_log, offset = values[3 * g : 3 * g + 3]
        sigma = np.exp(sigma_log)
        theta = mu + sigma * offset
        total += (
            stats.norm(0.5 * mu_prev, 1).logpdf(mu)
            + stats.halfnorm(scale=1).logpdf(sigma)
            + sigma_log
            + stats.norm(0, 1).logpdf(offset).sum()
            + stats.norm(theta[group["idx"]], 1).logpdf(group["y"]).sum()
        )
        mu_prev = mu
    return total


REFERENCE = {"M1": _ref_m1, "M2": _ref_m2, "M3": _ref_m3, "M4": _ref_m4}
NDIM = {"M1": 10, "M2": 175, "M3": 21, "M4": 120}
MODES = {
    "FAST_COMPILE": "FAST_COMPILE",
    "FAST_RUN": kiln.Mode(FAST_RUN_QUERY, linker="vm"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", MODELS)
def test_logp_matches_scipy_and_gradient_matches_finite_differences(name, mode):
    inputs, outputs = build(name)
    f = kiln.function(inputs, outputs, mode=MODES[mode])
    rng = np.random.default_rng(7)
    point = [rng.normal(scale=0.5, size=v.type.shape) for v in inputs]
    logp, *grads = f(*point)
    ref = REFERENCE[name]
    np.testing.assert_allclose(logp, ref(*point), rtol=1e-11)
    # The gradient along one random direction, against a central difference of SciPy's.
    direction = [rng.normal(size=v.type.shape) for v in inputs]
    eps = 1e-5
    plus = ref(*[p + eps * u for p, u in zip(point, direction, strict=True)])
    minus = ref(*[p - eps * u for p, u in zip(point, direction, strict=True)])
    along = sum(np.sum(g * u) for g, u in zip(grads, direction, strict=True))
    np.testing.assert_allclose(along, (plus - minus) / (2 * eps), rtol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_unconstrained_dimensions(name):
    assert ndim(name) == NDIM[name]
