"""The benchmark models M1-M4 as kiln graphs: log density and gradient, built by hand.

The math is that of ``bench_models.py`` (see its docstring), written the way PyMC
writes it, so that kiln's Stage 1 and PyTensor's rewriting see the same graphs:

- one input per free variable, in the order PyMC creates them (its ``value_vars``);
  positive scales are sampled on the log scale (``<name>_log__``), the value is
  ``exp`` of it and the log-Jacobian of that transform (the value itself) is added;
- the log densities are PyMC's naive textbook forms, with their normalizing constants:
  Normal ``-0.5 * ((x - mu) / sigma) ** 2 - log(sigma) - 0.5 * log(2 pi)``,
  HalfNormal ``-0.5 * (x / sigma) ** 2 + log(sqrt(2 / pi)) - log(sigma)``,
  HalfCauchy ``log(2) - log(pi) - log(beta) - log(1 + (x / beta) ** 2)``, the half
  distributions guarded by ``switch(x >= 0, logp, -inf)`` as PyMC does, and Bernoulli
  with ``logit_p = eta`` as ``y * eta - log(1 + exp(eta))``: the rewriter is expected to
  stabilize and simplify these;
- observed data and integer index vectors are constants, as in the frozen graph PyMC
  compiles by default (not shared variables as ``pm.Data`` would make them);
- each free variable's term is summed, then the terms are added in PyMC's order
  (free variables, then observed ones).

``build(name)`` returns fresh inputs and ``[logp, *grads]``; every call builds a new
graph (the inputs are new variables), so rewriting it is never a memo hit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import kiln
import kiln.tensor as kt
from bench_models import data_m1, data_m2, data_m3, data_m4

Tensor = Any  # a kiln TensorVariable or a Python/NumPy number

MODELS = ("M1", "M2", "M3", "M4")


def normal_logp(x: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """Return the elementwise Normal(mu, sigma) log density of ``x``."""
    return -0.5 * ((x - mu) / sigma) ** 2 - kt.log(sigma) - 0.5 * math.log(2 * math.pi)


def halfnormal_logp(x: Tensor, sigma: Tensor) -> Tensor:
    """Return the elementwise HalfNormal(sigma) log density of ``x`` (``-inf`` below 0)."""
    res = -0.5 * (x / sigma) ** 2 + math.log(math.sqrt(2.0 / math.pi)) - kt.log(sigma)
    return kt.switch(x >= 0, res, -np.inf)


def halfcauchy_logp(x: Tensor, beta: Tensor) -> Tensor:
    """Return the elementwise HalfCauchy(beta) log density of ``x`` (``-inf`` below 0)."""
    res = math.log(2.0) - math.log(math.pi) - kt.log(beta) - kt.log(1 + (x / beta) ** 2)
    return kt.switch(x >= 0, res, -np.inf)


def bernoulli_logit_logp(y: Tensor, eta: Tensor) -> Tensor:
    """Return the elementwise Bernoulli(logit_p=eta) log probability of ``y`` in {0, 1}."""
    return y * eta - kt.log(1 + kt.exp(eta))


def _log_scale(name: str, shape: tuple[int, ...] = ()) -> tuple[Tensor, Tensor]:
    """Return a fresh unconstrained input ``<name>_log__`` and the positive value exp(it)."""
    value = kt.scalar(f"{name}_log__") if not shape else kt.vector(f"{name}_log__", shape=shape)
    return value, kt.exp(value)


@functools.cache
def _data(name: str) -> dict:
    return {"M1": data_m1, "M2": data_m2, "M3": data_m3, "M4": data_m4}[name]()


def logp_m1() -> tuple[list, Tensor]:
    """Return the inputs and log density of M1 (eight schools, non-centered)."""
    d = _data("M1")
    mu = kt.scalar("mu")
    tau_log, tau = _log_scale("tau")
    theta_tilde = kt.vector("theta_tilde", shape=(8,))
    theta = mu + tau * theta_tilde
    terms = [
        normal_logp(mu, 0.0, 5.0),
        halfcauchy_logp(tau, 5.0) + tau_log,
        kt.sum(normal_logp(theta_tilde, 0.0, 1.0)),
        kt.sum(normal_logp(kt.constant(d["y"]), theta, kt.constant(d["sigma"]))),
    ]
    return [mu, tau_log, theta_tilde], _add(terms)


def logp_m2() -> tuple[list, Tensor]:
    """Return the inputs and log density of M2 (radon-like varying intercept and slope)."""
    d = _data("M2")
    k = d["n_groups"]
    mu_a = kt.scalar("mu_a")
    sigma_a_log, sigma_a = _log_scale("sigma_a")
    mu_b = kt.scalar("mu_b")
    sigma_b_log, sigma_b = _log_scale("sigma_b")
    z_a = kt.vector("z_a", shape=(k,))
    z_b = kt.vector("z_b", shape=(k,))
    sigma_y_log, sigma_y = _log_scale("sigma_y")
    a = mu_a + sigma_a * z_a
    b = mu_b + sigma_b * z_b
    idx = kt.constant(d["idx"])
    mean = a[idx] + b[idx] * kt.constant(d["x"])
    terms = [
        normal_logp(mu_a, 0.0, 10.0),
        halfnormal_logp(sigma_a, 5.0) + sigma_a_log,
        normal_logp(mu_b, 0.0, 10.0),
        halfnormal_logp(sigma_b, 5.0) + sigma_b_log,
        kt.sum(normal_logp(z_a, 0.0, 1.0)),
        kt.sum(normal_logp(z_b, 0.0, 1.0)),
        halfnormal_logp(sigma_y, 5.0) + sigma_y_log,
        kt.sum(normal_logp(kt.constant(d["y"]), mean, sigma_y)),
    ]
    inputs = [mu_a, sigma_a_log, mu_b, sigma_b_log, z_a, z_b, sigma_y_log]
    return inputs, _add(terms)


def logp_m3() -> tuple[list, Tensor]:
    """Return the inputs and log density of M3 (logistic regression, N=10,000, D=20)."""
    d = _data("M3")
    alpha = kt.scalar("alpha")
    beta = kt.vector("beta", shape=(d["X"].shape[1],))
    eta = alpha + kt.dot(kt.constant(d["X"]), beta)
    terms = [
        normal_logp(alpha, 0.0, 1.0),
        kt.sum(normal_logp(beta, 0.0, 1.0)),
        kt.sum(bernoulli_logit_logp(kt.constant(d["y"]), eta)),
    ]
    return [alpha, beta], _add(terms)


def logp_m4() -> tuple[list, Tensor]:
    """Return the inputs and log density of M4 (20 chained groups, a wide graph)."""
    d = _data("M4")
    inputs: list = []
    priors: list = []
    observed: list = []
    mu_prev: Tensor = 0.0
    for g, group in enumerate(d["groups"]):
        mu = kt.scalar(f"mu_{g}")
        sigma_log, sigma = _log_scale(f"sigma_{g}")
        offset = kt.vector(f"offset_{g}", shape=(d["n_members"],))
        theta = mu + sigma * offset
        inputs += [mu, sigma_log, offset]
        priors += [
            normal_logp(mu, 0.5 * mu_prev, 1.0),
            halfnormal_logp(sigma, 1.0) + sigma_log,
            kt.sum(normal_logp(offset, 0.0, 1.0)),
        ]
        observed.append(
            kt.sum(normal_logp(kt.constant(group["y"]), theta[kt.constant(group["idx"])], 1.0))
        )
        mu_prev = mu
    return inputs, _add(priors + observed)


def _add(terms: list[Tensor]) -> Tensor:
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


LOGP: dict[str, Callable[[], tuple[list, Tensor]]] = {
    "M1": logp_m1,
    "M2": logp_m2,
    "M3": logp_m3,
    "M4": logp_m4,
}


def build(name: str) -> tuple[list, list]:
    """Return fresh inputs of model ``name`` and its outputs ``[logp, *dlogp/dinput]``.

    Examples
    --------
    >>> inputs, outputs = build("M1")  # doctest: +SKIP
    >>> len(inputs), len(outputs)  # doctest: +SKIP
    (3, 4)
    """
    if name not in LOGP:
        raise ValueError(f"unknown benchmark model {name!r}; expected one of {MODELS}")
    inputs, logp = LOGP[name]()
    return inputs, [logp, *kiln.grad(logp, inputs)]


def ndim(name: str) -> int:
    """Return the number of unconstrained dimensions of model ``name``."""
    inputs, _ = LOGP[name]()
    return sum(int(np.prod(v.type.shape)) for v in inputs)
