"""``kl.sample(backend="c")`` of an MvNormal model: Cholesky in C, on the native path."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats as st
from arviz_stats import ess

import kiln as kl

S = np.array([[1.0, 0.5, 0.2], [0.5, 2.0, 0.3], [0.2, 0.3, 1.5]])
Y = np.random.default_rng(7).multivariate_normal(np.zeros(3), 2.0**2 * S, size=20)


def test_the_posterior_of_a_covariance_scale_matches_a_grid() -> None:
    """The posterior mean of a covariance's scale ``sd`` against quadrature on a grid.

    ``sd ~ HalfNormal(3)``, ``y ~ MvNormal(0, sd**2 S)``.

    The log-density and gradient (Cholesky, triangular solves, Blockwise) are all C, so
    sampling takes the native path: no SlowPathWarning.
    """
    with kl.Model(), warnings.catch_warnings():
        sd = kl.HalfNormal("sd", 3.0)
        kl.MvNormal("y", mu=np.zeros(3), cov=sd**2 * S, observed=Y)
        warnings.simplefilter("ignore", kl.SamplingWarning)
        warnings.simplefilter("error", kl.SlowPathWarning)
        idata = kl.sample(
            draws=1000, tune=1000, chains=2, random_seed=3, progressbar=False, backend="c"
        )
    draws = np.asarray(idata.posterior["sd"]).ravel()
    grid = np.linspace(0.5, 5.0, 4001)
    logp = st.halfnorm(scale=3.0).logpdf(grid) + np.array(
        [st.multivariate_normal(np.zeros(3), s**2 * S).logpdf(Y).sum() for s in grid]
    )
    w = np.exp(logp - logp.max())
    mean = np.sum(w * grid) / np.sum(w)
    sd_post = np.sqrt(np.sum(w * (grid - mean) ** 2) / np.sum(w))
    n_eff = float(ess(np.asarray(idata.posterior["sd"])))
    assert abs(draws.mean() - mean) < 4 * sd_post / np.sqrt(n_eff)
