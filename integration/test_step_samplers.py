"""kl.sample with gradient-free and compound steps against exact or reference posteriors.

- A change point: counts ``y_t ~ Poisson(e if t < s else l)`` with Gamma priors on the
  rates and a uniform categorical ``s``; kl.sample's automatic assignment (NUTS for the
  rates, CategoricalGibbsMetropolis for ``s``) against the exact marginal of ``s`` and
  the rates' exact posterior means (Gamma-Poisson conjugacy, summed over ``s``).
- posteriordb's ``kidiq-kidscore_momiq`` (3 parameters, strongly correlated): the
  differential-evolution steps, means within 4 Monte Carlo standard errors (bulk ESS of
  this run and the reference's 10,000 draws), sds within 15%, R-hat.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arviz_stats import ess, rhat
from scipy import special

import kiln as kl

Y = np.array([4, 5, 4, 1, 0, 4, 3, 4, 0, 6, 3, 3, 1, 1, 0, 1, 0, 1, 0, 0])
A, B = 2.0, 1.0  # Gamma(shape, rate) priors of both rates


def _change_point_exact() -> tuple[np.ndarray, float, float]:
    """Return P(s | y) for s = 0..T-1, and E[e | y], E[l | y]."""
    t = len(Y)
    logw, mean_e, mean_l = np.empty(t), np.empty(t), np.empty(t)
    for s in range(t):
        n1, s1 = s, Y[:s].sum()
        n2, s2 = t - s, Y[s:].sum()
        logw[s] = sum(
            special.gammaln(A + k) - (A + k) * np.log(B + n) for n, k in ((n1, s1), (n2, s2))
        )
        mean_e[s] = (A + s1) / (B + n1)
        mean_l[s] = (A + s2) / (B + n2)
    p = np.exp(logw - logw.max())
    p /= p.sum()
    return p, float(p @ mean_e), float(p @ mean_l)


def test_a_change_point_against_its_exact_marginal() -> None:
    t = len(Y)
    with kl.Model() as m:
        s = kl.Categorical("s", p=np.ones(t) / t)
        e = kl.Gamma("e", alpha=A, beta=B)
        rate_l = kl.Gamma("l", alpha=A, beta=B)
        rate = kl.tensor.switch(kl.tensor.arange(t) < s, e, rate_l)
        kl.Poisson("y", rate, observed=Y)
    with m, warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)
        idata = kl.sample(draws=800, tune=400, chains=2, random_seed=11, backend="numba",
                          progressbar=False)  # fmt: skip
    assert idata.attrs["step"] == "CompoundStep\n>NUTS: [e, l]\n>CategoricalGibbsMetropolis: [s]"
    p, mean_e, mean_l = _change_point_exact()
    post = idata["posterior"]
    draws = post["s"].values
    n_eff = float(ess(draws.astype(float), chain_axis=0, draw_axis=1))
    freq = np.bincount(draws.ravel(), minlength=t) / draws.size
    tol = 4 * np.sqrt(p * (1 - p) / n_eff) + 1e-3
    assert np.all(np.abs(freq - p) < tol), np.c_[freq, p, tol]
    for name, exact in (("e", mean_e), ("l", mean_l)):
        x = post[name].values
        e_n = float(ess(x, chain_axis=0, draw_axis=1))
        assert abs(x.mean() - exact) < 4 * x.std() / np.sqrt(e_n), (name, x.mean(), exact)
        assert float(rhat(x, chain_axis=0, draw_axis=1)) < 1.02


def _load_models() -> Any:
    name = "kiln_integration_posteriordb_models"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent / "posteriordb" / "models.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.parametrize(("step", "chains"), [("DEMetropolis", 8), ("DEMetropolisZ", 4)])
def test_differential_evolution_on_a_posteriordb_reference(step: str, chains: int) -> None:
    """DEMetropolis's population needs about 2 d chains or more (ter Braak 2006)."""
    pdb = _load_models()
    name = "kidiq-kidscore_momiq"
    reference = pdb.load_posterior(name)["reference"]
    model = pdb.build(name)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", kl.SamplingWarning)
        idata = kl.sample(draws=10000, tune=5000, chains=chains, random_seed=12, backend="numba",
                          step=getattr(kl, step)(), progressbar=False)  # fmt: skip
    post = idata["posterior"]
    failures = []
    for param, ref in reference.items():
        var, index = pdb.split_name(param)
        x = post[var].values.reshape(*post[var].shape[:2], -1)[..., index[0] if index else 0]
        e = float(ess(x, chain_axis=0, draw_axis=1))
        r = float(rhat(x, chain_axis=0, draw_axis=1))
        tol = 4 * ref["sd"] * np.sqrt(1 / e + 1 / 10000)
        if abs(x.mean() - ref["mean"]) >= tol:
            failures.append(
                f"{param}: mean {x.mean():.4g}, reference {ref['mean']:.4g} +- {tol:.2g}"
            )
        if abs(x.std(ddof=1) / ref["sd"] - 1) >= 0.15:
            failures.append(f"{param}: sd {x.std(ddof=1):.4g}, reference {ref['sd']:.4g}")
        if r >= 1.05 or e < 200:
            failures.append(f"{param}: R-hat {r:.3f}, bulk ESS {e:.0f}")
    assert not failures, "\n".join(failures)
