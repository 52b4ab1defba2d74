"""The posteriordb posteriors written with kiln (posteriordb/models.py) against their statements.

For every posterior of ``posteriordb/data/``:

- the model builds; its free variables and deterministics cover the reference's
  parameters with the same shapes (posteriordb's 1-based ``theta[j]`` is element
  ``j - 1`` of ``theta``), the free variables that the reference lacks are exactly the
  documented latent ones, and the unconstrained dimension is the file's
  ``n_free_parameters``;
- at fixed points (the reference posterior means and 5% quantiles, mapped by hand to
  the unconstrained space) the model's log-density equals a NumPy/SciPy statement of
  the model's log-density, log-Jacobians included (``compile_logp`` and the flat-vector
  ``CompiledModel.logp``), and ``expand`` maps the point back to the reference values;
- the gradient of ``logp_dlogp`` equals central finite differences of that NumPy/SciPy
  log-density.

The VM backend runs these, except for two posteriors on Numba (``NUMBA``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

import kiln

_HERE = Path(__file__).resolve().parent


def _load_models() -> Any:
    name = "kiln_integration_posteriordb_models"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HERE / "posteriordb" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pdb = _load_models()

VM = kiln.Mode(linker="vm")
NUMBA = {"eight_schools-eight_schools_noncentered", "gp_pois_regr-gp_pois_regr"}
NAMES = sorted(pdb.POSTERIORS)

#: Free variables that posteriordb's reference does not store (it stores a derived one).
LATENT = {
    "eight_schools-eight_schools_noncentered": {"theta_trans"},
    "gp_pois_regr-gp_pois_regr": {"f_tilde"},
}


def _mode(name: str) -> kiln.Mode:
    return kiln.Mode(linker="numba") if name in NUMBA else VM


# --- the hand-written log-densities -----------------------------------------------------
#
# For each posterior: ``to_point(data, values) -> point`` maps constrained values (the
# reference's variables) to the unconstrained point ``{value name: value}``, by hand; and
# ``logp(data, point) -> float`` is the model's log-density on the unconstrained space,
# log-Jacobians included, in NumPy/SciPy.


def _arr(data: dict, key: str) -> np.ndarray:
    return np.asarray(data[key], dtype="float64")


def _normal(x: Any, mu: Any, sigma: Any) -> float:
    return float(np.sum(stats.norm(mu, sigma).logpdf(x)))


def _halfnormal(x: Any, sigma: float) -> float:
    return float(np.sum(stats.halfnorm(scale=sigma).logpdf(x)))


def _halfcauchy(x: Any, beta: float) -> float:
    return float(np.sum(stats.halfcauchy(scale=beta).logpdf(x)))


def _regression_point(values: dict) -> dict:
    return {"beta": values["beta"], "sigma_log__": np.log(values["sigma"])}


def _eight_schools_centered_point(data: dict, v: dict) -> dict:
    return {"mu": v["mu"], "tau_log__": np.log(v["tau"]), "theta": v["theta"]}


def _eight_schools_centered_logp(data: dict, p: dict) -> float:
    mu, u, theta = p["mu"], p["tau_log__"], p["theta"]
    tau = np.exp(u)
    return (
        _normal(mu, 0, 5)
        + _halfcauchy(tau, 5)
        + u
        + _normal(theta, mu, tau)
        + _normal(_arr(data, "y"), theta, _arr(data, "sigma"))
    )


def _eight_schools_noncentered_point(data: dict, v: dict) -> dict:
    trans = (v["theta"] - v["mu"]) / v["tau"]
    return {"mu": v["mu"], "tau_log__": np.log(v["tau"]), "theta_trans": trans}


def _eight_schools_noncentered_logp(data: dict, p: dict) -> float:
    mu, u, trans = p["mu"], p["tau_log__"], p["theta_trans"]
    tau = np.exp(u)
    theta = mu + tau * trans
    return (
        _normal(mu, 0, 5)
        + _halfcauchy(tau, 5)
        + u
        + _normal(trans, 0, 1)
        + _normal(_arr(data, "y"), theta, _arr(data, "sigma"))
    )


def _kidscore_momiq_logp(data: dict, p: dict) -> float:
    beta, u = p["beta"], p["sigma_log__"]
    sigma = np.exp(u)
    mean = beta[0] + beta[1] * _arr(data, "mom_iq")
    return _halfcauchy(sigma, 2.5) + u + _normal(_arr(data, "kid_score"), mean, sigma)


def _kidscore_mom_work_logp(data: dict, p: dict) -> float:
    beta, u = p["beta"], p["sigma_log__"]
    work = np.asarray(data["mom_work"])
    mean = beta[0] + beta[1] * (work == 2) + beta[2] * (work == 3) + beta[3] * (work == 4)
    return u + _normal(_arr(data, "kid_score"), mean, np.exp(u))


def _earn_height_logp(data: dict, p: dict) -> float:
    beta, u = p["beta"], p["sigma_log__"]
    mean = beta[0] + beta[1] * _arr(data, "height")
    return u + _normal(_arr(data, "earn"), mean, np.exp(u))


def _logmesquite_logp(data: dict, p: dict) -> float:
    b, u = p["beta"], p["sigma_log__"]
    lg = {k: np.log(_arr(data, k)) for k in ("diam1", "diam2", "canopy_height", "total_height")}
    mean = (
        b[0]
        + b[1] * lg["diam1"]
        + b[2] * lg["diam2"]
        + b[3] * lg["canopy_height"]
        + b[4] * lg["total_height"]
        + b[5] * np.log(_arr(data, "density"))
        + b[6] * _arr(data, "group")
    )
    return u + _normal(np.log(_arr(data, "weight")), mean, np.exp(u))


def _kilpisjarvi_point(data: dict, v: dict) -> dict:
    return {"alpha": v["alpha"], "beta": v["beta"], "sigma_log__": np.log(v["sigma"])}


def _kilpisjarvi_logp(data: dict, p: dict) -> float:
    alpha, beta, u = p["alpha"], p["beta"], p["sigma_log__"]
    return (
        _normal(alpha, data["pmualpha"], data["psalpha"])
        + _normal(beta, data["pmubeta"], data["psbeta"])
        + u
        + _normal(_arr(data, "y"), alpha + beta * _arr(data, "x"), np.exp(u))
    )


def _blr_logp(data: dict, p: dict) -> float:
    beta, u = p["beta"], p["sigma_log__"]
    sigma = np.exp(u)
    X = np.asarray(data["X"], dtype="float64")
    prior = _normal(beta, 0, 10) + _halfnormal(sigma, 10) + u
    return prior + _normal(_arr(data, "y"), X @ beta, sigma)


def _gauss_mix_point(data: dict, v: dict) -> dict:
    mu = v["mu"]
    return {
        "mu_ordered__": np.array([mu[0], np.log(mu[1] - mu[0])]),
        "sigma_log__": np.log(v["sigma"]),
        "theta_logodds__": special.logit(v["theta"]),
    }


def _gauss_mix_logp(data: dict, p: dict) -> float:
    y_mu, v, w = p["mu_ordered__"], p["sigma_log__"], p["theta_logodds__"]
    mu = np.array([y_mu[0], y_mu[0] + np.exp(y_mu[1])])
    sigma = np.exp(v)
    theta = special.expit(w)
    y = _arr(data, "y")
    lik = special.logsumexp(
        [
            np.log(theta) + stats.norm(mu[0], sigma[0]).logpdf(y),
            np.log1p(-theta) + stats.norm(mu[1], sigma[1]).logpdf(y),
        ],
        axis=0,
    )
    return (
        _normal(mu, 0, 2)
        + y_mu[1]
        + _halfnormal(sigma, 2)
        + np.sum(v)
        + float(stats.beta(5, 5).logpdf(theta))
        + np.log(theta)
        + np.log1p(-theta)
        + float(np.sum(lik))
    )


def _gp_chol(data: dict, rho: float, alpha: float) -> np.ndarray:
    x = _arr(data, "x")
    cov = alpha**2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * rho**2))
    return np.linalg.cholesky(cov + 1e-10 * np.eye(x.size))


def _gp_point(data: dict, v: dict) -> dict:
    chol = _gp_chol(data, v["rho"], v["alpha"])
    return {
        "rho_log__": np.log(v["rho"]),
        "alpha_log__": np.log(v["alpha"]),
        "f_tilde": np.linalg.solve(chol, v["f"]),
    }


def _gp_logp(data: dict, p: dict) -> float:
    a, b, f_tilde = p["rho_log__"], p["alpha_log__"], p["f_tilde"]
    rho, alpha = np.exp(a), np.exp(b)
    f = _gp_chol(data, rho, alpha) @ f_tilde
    k = np.asarray(data["k"])
    return (
        float(stats.gamma(25, scale=1 / 4).logpdf(rho))
        + a
        + _halfnormal(alpha, 2)
        + b
        + _normal(f_tilde, 0, 1)
        + float(np.sum(stats.poisson(np.exp(f)).logpmf(k)))
    )


def _regression(logp: Callable) -> tuple[Callable, Callable]:
    return (lambda data, v: _regression_point(v)), logp


REFERENCE: dict[str, tuple[Callable, Callable]] = {
    "earnings-earn_height": _regression(_earn_height_logp),
    "eight_schools-eight_schools_centered": (
        _eight_schools_centered_point,
        _eight_schools_centered_logp,
    ),
    "eight_schools-eight_schools_noncentered": (
        _eight_schools_noncentered_point,
        _eight_schools_noncentered_logp,
    ),
    "gp_pois_regr-gp_pois_regr": (_gp_point, _gp_logp),
    "kidiq-kidscore_momiq": _regression(_kidscore_momiq_logp),
    "kidiq_with_mom_work-kidscore_mom_work": _regression(_kidscore_mom_work_logp),
    "kilpisjarvi_mod-kilpisjarvi": (_kilpisjarvi_point, _kilpisjarvi_logp),
    "low_dim_gauss_mix-low_dim_gauss_mix": (_gauss_mix_point, _gauss_mix_logp),
    "mesquite-logmesquite": _regression(_logmesquite_logp),
    "sblrc-blr": _regression(_blr_logp),
}


# --- fixtures ---------------------------------------------------------------------------


class Case:
    """One posterior: its file, its kiln model and the compiled flat-vector model."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.posterior = pdb.load_posterior(name)
        self.data = self.posterior["data"]
        self.model = pdb.build(name, self.data)
        self.compiled = self.model.logp_dlogp_function(mode=_mode(name), jitter=False)
        self.to_point, self.ref_logp = REFERENCE[name]

    def reference(self, stat: str) -> dict[str, np.ndarray]:
        return pdb.reference_values(self.posterior["reference"], stat)

    def point(self, stat: str) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in self.to_point(self.data, self.reference(stat)).items()}


_CASES: dict[str, Case] = {}


@pytest.fixture(params=NAMES)
def case(request: pytest.FixtureRequest) -> Case:
    name = request.param
    if name not in _CASES:
        _CASES[name] = Case(name)
    return _CASES[name]


# --- tests ------------------------------------------------------------------------------


def test_registry_covers_every_data_file():
    files = {p.stem for p in (pdb.DATA_DIR).glob("*.json")}
    assert files == set(pdb.POSTERIORS) == set(REFERENCE)
    assert (pdb.DATA_DIR / "README.md").exists()


def test_split_name():
    assert pdb.split_name("theta[3]") == ("theta", (2,))
    assert pdb.split_name("sigma") == ("sigma", ())
    assert pdb.split_name("L[2,1]") == ("L", (1, 0))


def test_free_variables_match_the_reference(case: Case):
    model, compiled = case.model, case.compiled
    ref = case.reference("mean")
    free = {v.name for v in model.free_variables}
    named = free | set(model.deterministics)
    missing = set(ref) - named
    assert not missing, f"{case.name}: reference parameters without a model variable: {missing}"
    assert free - set(ref) == LATENT.get(case.name, set())
    assert not model.potentials
    values = compiled.expand(compiled.initial_point())
    for base, arr in ref.items():
        assert values[base].shape == arr.shape, (case.name, base)
    assert compiled.ndim == case.posterior["n_free_parameters"]
    # only the documented data: observed variables carry no free dimension
    assert all(v.observed for v in model.variables.values() if v.name not in free)


@pytest.mark.parametrize("stat", ["mean", "q05"])
def test_logp_at_reference_points(case: Case, stat: str):
    point = case.point(stat)
    expected = case.ref_logp(case.data, point)
    assert np.isfinite(expected)
    f = case.model.compile_logp(mode=_mode(case.name))
    np.testing.assert_allclose(f(point), expected, rtol=1e-9)
    x = case.compiled.point_to_array(point)
    np.testing.assert_allclose(case.compiled.logp(x), expected, rtol=1e-9)
    lp, _ = case.compiled.logp_dlogp(x)
    np.testing.assert_allclose(lp, expected, rtol=1e-9)
    # back to the constrained space: the reference values (free and derived)
    values = case.compiled.expand(x)
    for base, arr in case.reference(stat).items():
        np.testing.assert_allclose(values[base], arr, rtol=1e-9, atol=1e-12, err_msg=base)


def test_gradient_against_finite_differences(case: Case):
    compiled = case.compiled
    x0 = compiled.point_to_array(case.point("q05"))

    def ref(x: np.ndarray) -> float:
        return case.ref_logp(case.data, compiled.array_to_point(x))

    _, grad = compiled.logp_dlogp(x0)
    fd = np.empty_like(x0)
    for i in range(x0.size):
        h = 1e-6 * max(1.0, abs(x0[i]))
        e = np.zeros_like(x0)
        e[i] = h
        fd[i] = (ref(x0 + e) - ref(x0 - e)) / (2 * h)
    scale = max(1.0, float(np.max(np.abs(fd))))
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * scale)


def test_gauss_mix_potential_matches_normal_mixture():
    name = "low_dim_gauss_mix-low_dim_gauss_mix"
    case = Case(name)
    potential = pdb.build_low_dim_gauss_mix_potential(case.data)
    compiled = potential.logp_dlogp_function(mode=VM, jitter=False)
    assert [b.name for b in compiled.layout] == [b.name for b in case.compiled.layout]
    for stat in ("mean", "q05"):
        x = case.compiled.point_to_array(case.point(stat))
        lp_a, g_a = case.compiled.logp_dlogp(x)
        lp_b, g_b = compiled.logp_dlogp(x)
        np.testing.assert_allclose(lp_a, lp_b, rtol=1e-12)
        np.testing.assert_allclose(g_a, g_b, rtol=1e-10, atol=1e-10)
