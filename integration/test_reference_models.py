"""Three reference models written with kiln's model layer, against NumPy/SciPy.

- eight schools, non-centred (``bench_models.data_m1``);
- a radon-style hierarchical regression with varying intercepts and slopes,
  non-centred (``data_m2``: 85 groups, 919 rows), its predictors as ``kl.Data``;
- a logistic regression (``data_m3`` shrunk to N = 500, D = 20), ``Bernoulli(logit_p)``.

Each is checked at fixed points of the unconstrained space: the log-density
(``compile_logp`` and the flat-vector ``CompiledModel``) against a hand-written
NumPy/SciPy log-density with the log-Jacobians, and the gradient of ``logp_dlogp``
against central finite differences of that hand-written density. VM backend.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

import kiln
import kiln as kl
import kiln.tensor as kt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_models import data_m1, data_m2, data_m3  # noqa: E402

VM = kiln.Mode(linker="vm")
N_LOGISTIC = 500


# --- the models -------------------------------------------------------------------------


def eight_schools() -> kl.Model:
    d = data_m1()
    with kl.Model(coords={"school": list("ABCDEFGH")}) as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_tilde = kl.Normal("theta_tilde", 0.0, 1.0, dims="school")
        theta = kl.Deterministic("theta", mu + tau * theta_tilde, dims="school")
        kl.Normal("y", theta, d["sigma"], observed=d["y"], dims="school")
    return m


def radon() -> kl.Model:
    d = data_m2()
    with kl.Model(coords={"county": list(range(d["n_groups"]))}) as m:
        idx = kl.Data("county_idx", d["idx"], dims="obs")
        x = kl.Data("floor", d["x"], dims="obs")
        mu_a = kl.Normal("mu_a", 0.0, 10.0)
        sigma_a = kl.HalfNormal("sigma_a", 5.0)
        mu_b = kl.Normal("mu_b", 0.0, 10.0)
        sigma_b = kl.HalfNormal("sigma_b", 5.0)
        z_a = kl.Normal("z_a", 0.0, 1.0, dims="county")
        z_b = kl.Normal("z_b", 0.0, 1.0, dims="county")
        a = kl.Deterministic("a", mu_a + sigma_a * z_a, dims="county")
        b = kl.Deterministic("b", mu_b + sigma_b * z_b, dims="county")
        sigma_y = kl.HalfNormal("sigma_y", 5.0)
        kl.Normal("y", a[idx] + b[idx] * x, sigma_y, observed=d["y"], dims="obs")
    return m


def _logistic_data() -> dict[str, np.ndarray]:
    d = data_m3()
    return {"X": d["X"][:N_LOGISTIC], "y": d["y"][:N_LOGISTIC]}


def logistic() -> kl.Model:
    d = _logistic_data()
    with kl.Model(coords={"predictor": list(range(d["X"].shape[1]))}) as m:
        X = kl.Data("X", d["X"], dims=("obs", "predictor"))
        y = kl.Data("y_obs", d["y"], dims="obs")
        alpha = kl.Normal("alpha", 0.0, 1.0)
        beta = kl.Normal("beta", 0.0, 1.0, dims="predictor")
        kl.Bernoulli("y", logit_p=alpha + kt.dot(X, beta), observed=y, dims="obs")
    return m


# --- the hand-written log-densities (unconstrained points) ------------------------------


def _norm(x: Any, mu: Any, sigma: Any) -> float:
    return float(np.sum(stats.norm(mu, sigma).logpdf(x)))


def eight_schools_logp(p: dict[str, np.ndarray]) -> float:
    d = data_m1()
    mu, u, tt = p["mu"], p["tau_log__"], p["theta_tilde"]
    tau = np.exp(u)
    return (
        _norm(mu, 0, 5)
        + float(stats.halfcauchy(scale=5).logpdf(tau))
        + u
        + _norm(tt, 0, 1)
        + _norm(d["y"], mu + tau * tt, d["sigma"])
    )


def radon_logp(p: dict[str, np.ndarray]) -> float:
    d = data_m2()
    total = 0.0
    scales = {}
    for name in ("sigma_a", "sigma_b", "sigma_y"):
        u = p[f"{name}_log__"]
        scales[name] = np.exp(u)
        total += float(stats.halfnorm(scale=5).logpdf(scales[name])) + u
    a = p["mu_a"] + scales["sigma_a"] * p["z_a"]
    b = p["mu_b"] + scales["sigma_b"] * p["z_b"]
    mean = a[d["idx"]] + b[d["idx"]] * d["x"]
    return (
        total
        + _norm(p["mu_a"], 0, 10)
        + _norm(p["mu_b"], 0, 10)
        + _norm(p["z_a"], 0, 1)
        + _norm(p["z_b"], 0, 1)
        + _norm(d["y"], mean, scales["sigma_y"])
    )


def logistic_logp(p: dict[str, np.ndarray], data: dict[str, np.ndarray] | None = None) -> float:
    d = _logistic_data() if data is None else data
    eta = p["alpha"] + d["X"] @ p["beta"]
    lik = float(np.sum(stats.bernoulli(special.expit(eta)).logpmf(d["y"])))
    return _norm(p["alpha"], 0, 1) + _norm(p["beta"], 0, 1) + lik


MODELS: dict[str, tuple[Callable[[], kl.Model], Callable[[dict], float]]] = {
    "eight_schools": (eight_schools, eight_schools_logp),
    "radon": (radon, radon_logp),
    "logistic": (logistic, logistic_logp),
}

_BUILT: dict[str, Any] = {}


def _built(name: str) -> tuple[kl.Model, Any, Callable[[dict], float]]:
    if name not in _BUILT:
        build, ref = MODELS[name]
        model = build()
        _BUILT[name] = (model, model.logp_dlogp_function(mode=VM, jitter=False), ref)
    return _BUILT[name]


def _points(compiled: Any) -> list[np.ndarray]:
    """Return the initial point and two seeded points around it (unconstrained)."""
    x0 = compiled.initial_point()
    rng = np.random.default_rng(20240501)
    return [x0, *(x0 + rng.uniform(-1.0, 1.0, size=x0.shape) for _ in range(2))]


# --- tests ------------------------------------------------------------------------------


def test_layouts():
    layouts = {name: [(b.name, b.shape) for b in _built(name)[1].layout] for name in MODELS}
    assert layouts["eight_schools"] == [("mu", ()), ("tau_log__", ()), ("theta_tilde", (8,))]
    assert layouts["radon"] == [
        ("mu_a", ()),
        ("sigma_a_log__", ()),
        ("mu_b", ()),
        ("sigma_b_log__", ()),
        ("z_a", (85,)),
        ("z_b", (85,)),
        ("sigma_y_log__", ()),
    ]
    assert layouts["logistic"] == [("alpha", ()), ("beta", (20,))]
    assert [_built(n)[1].ndim for n in MODELS] == [10, 175, 21]


@pytest.mark.parametrize("name", list(MODELS))
def test_logp_matches_numpy(name: str):
    model, compiled, ref = _built(name)
    f = model.compile_logp(mode=VM)
    for x in _points(compiled):
        point = compiled.array_to_point(x)
        expected = ref(point)
        np.testing.assert_allclose(f(point), expected, rtol=1e-10)
        np.testing.assert_allclose(compiled.logp(x), expected, rtol=1e-10)
        np.testing.assert_allclose(compiled.logp_dlogp(x)[0], expected, rtol=1e-10)


@pytest.mark.parametrize("name", list(MODELS))
def test_gradient_matches_finite_differences(name: str):
    _, compiled, ref = _built(name)
    h = 1e-6
    for x in _points(compiled)[1:]:
        _, grad = compiled.logp_dlogp(x)
        assert grad.shape == (compiled.ndim,) and grad.flags.c_contiguous
        fd = np.empty_like(x)
        for i in range(x.size):
            e = np.zeros_like(x)
            e[i] = h
            up = ref(compiled.array_to_point(x + e))
            down = ref(compiled.array_to_point(x - e))
            fd[i] = (up - down) / (2 * h)
        scale = max(1.0, float(np.max(np.abs(fd))))
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * scale)


def test_deterministics_of_expand():
    _, compiled, _ = _built("radon")
    x = _points(compiled)[1]
    p = compiled.array_to_point(x)
    values = compiled.expand(x)
    np.testing.assert_allclose(values["sigma_a"], np.exp(p["sigma_a_log__"]), rtol=1e-14)
    np.testing.assert_allclose(
        values["a"], p["mu_a"] + np.exp(p["sigma_a_log__"]) * p["z_a"], rtol=1e-13
    )
    np.testing.assert_allclose(
        values["b"], p["mu_b"] + np.exp(p["sigma_b_log__"]) * p["z_b"], rtol=1e-13
    )
    _, compiled8, _ = _built("eight_schools")
    x8 = _points(compiled8)[2]
    p8 = compiled8.array_to_point(x8)
    theta = compiled8.expand(x8)["theta"]
    np.testing.assert_allclose(theta, p8["mu"] + np.exp(p8["tau_log__"]) * p8["theta_tilde"])


def test_logistic_set_data_changes_the_density():
    """set_data to other rows of data_m3 (another N): the same compiled model, new density."""
    model = logistic()
    compiled = model.logp_dlogp_function(mode=VM, jitter=False)
    x = _points(compiled)[1]
    p = compiled.array_to_point(x)
    np.testing.assert_allclose(compiled.logp(x), logistic_logp(p), rtol=1e-10)
    d = data_m3()
    other = {"X": d["X"][1000:1300], "y": d["y"][1000:1300]}
    kl.set_data({"X": other["X"], "y_obs": other["y"]}, model=model)
    expected = logistic_logp(p, other)
    np.testing.assert_allclose(compiled.logp(x), expected, rtol=1e-10)
    lp, grad = compiled.logp_dlogp(x)
    np.testing.assert_allclose(lp, expected, rtol=1e-10)
    h = 1e-6
    fd = [
        (
            logistic_logp(compiled.array_to_point(x + h * e), other)
            - logistic_logp(compiled.array_to_point(x - h * e), other)
        )
        / (2 * h)
        for e in np.eye(x.size)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_ndarray_op_tensor_builds_a_graph():
    """`ndarray <op> tensor` calls the tensor's reflected operator (__array_ufunc__ = None)."""
    sq_dist = np.array([[0.0, 4.0], [4.0, 0.0]])
    with kl.Model() as m:
        rho = kl.HalfNormal("rho", 1.0)
        scaled = -sq_dist / (2.0 * kt.square(rho))
        kl.Deterministic("k", kt.exp(scaled))
    assert isinstance(scaled, type(rho))
    compiled = m.logp_dlogp_function(mode=VM, jitter=False)
    np.testing.assert_allclose(compiled.expand(np.zeros(1))["k"], np.exp(-sq_dist / 2.0))
