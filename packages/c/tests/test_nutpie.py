"""``kl.sample(backend="c", nuts_sampler="nutpie")``: nutpie on the C library's native ABI."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz_stats import ess

import kiln as kl

pytest.importorskip("nutpie")

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _sample(backend: str) -> object:
    with kl.Model():
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_tilde = kl.Normal("theta_tilde", 0.0, 1.0, shape=8)
        kl.Deterministic("theta", mu + tau * theta_tilde)
        kl.Normal("y", mu + tau * theta_tilde, SIGMA, observed=Y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kl.SamplingWarning)
            return kl.sample(
                draws=1000, tune=1000, chains=2, random_seed=2, progressbar=False,
                backend=backend, nuts_sampler="nutpie",
            )  # fmt: skip


def test_eight_schools_under_nutpie_on_c_matches_numba() -> None:
    """Posterior means of mu, tau and theta agree with Numba's within Monte Carlo error."""
    on_c = _sample("c")
    on_numba = _sample("numba")
    for name in ("mu", "tau", "theta"):
        a = np.asarray(on_c.posterior[name].values, float)  # type: ignore[attr-defined]
        b = np.asarray(on_numba.posterior[name].values, float)  # type: ignore[attr-defined]
        a = a.reshape(a.shape[0], a.shape[1], -1)
        b = b.reshape(b.shape[0], b.shape[1], -1)
        for k in range(a.shape[2]):
            ea = float(ess(a[..., k], chain_axis=0, draw_axis=1))
            eb = float(ess(b[..., k], chain_axis=0, draw_axis=1))
            assert min(ea, eb) > 50, (name, k, ea, eb)
            err = np.hypot(a[..., k].std() / np.sqrt(ea), b[..., k].std() / np.sqrt(eb))
            assert abs(a[..., k].mean() - b[..., k].mean()) < 4 * err, (name, k)
