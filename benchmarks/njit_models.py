"""Hand-written Numba log density + gradient of M1, M2, M3, and a ``jax.jit`` M3.

The per-call baselines of the Numba benchmark (``stage2.py``): what a careful person
writes by hand for the math of ``kiln_models.py`` (same inputs, same data, the same
normalizing constants), with the gradient derived analytically and computed in the same
loops as the log density. Each function takes the model's inputs in kiln's order (0-d
arrays for scalars, as kiln's compiled functions take them), then the data arrays, and
returns ``(logp, *grads)`` with one gradient per input (floats for scalar inputs).

``call(name)`` returns a Python callable ``f(*inputs) -> (logp, *grads)`` with the data
bound; ``jax_m3()`` returns the ``jax.jit`` value-and-gradient of M3 when JAX is
importable, else None. The values are checked against kiln's graphs in
``integration/test_njit_models.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from bench_models import data_m1, data_m2, data_m3

MODELS = ("M1", "M2", "M3")
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_SQRT_2_OVER_PI = math.log(math.sqrt(2.0 / math.pi))
_LOG_2_OVER_PI = math.log(2.0) - math.log(math.pi)


@njit(cache=False, fastmath=False)
def logp_dlogp_m1(mu_, tau_log_, theta_tilde, y, sigma):  # type: ignore[no-untyped-def]
    """Return M1's log density and its gradient (``mu``, ``tau_log__``, ``theta_tilde``)."""
    mu = mu_[()]
    tau_log = tau_log_[()]
    tau = math.exp(tau_log)
    n = theta_tilde.shape[0]
    # mu ~ Normal(0, 5); tau ~ HalfCauchy(5) (+ log-Jacobian tau_log)
    logp = -0.5 * (mu / 5.0) ** 2 - math.log(5.0) - _HALF_LOG_2PI
    u = tau / 5.0
    logp += _LOG_2_OVER_PI - math.log(5.0) - math.log1p(u * u) + tau_log
    d_mu = -mu / 25.0
    d_tau = -2.0 * u / 5.0 / (1.0 + u * u)
    d_tt = np.empty(n)
    for i in range(n):
        t = theta_tilde[i]
        s = sigma[i]
        r = (y[i] - (mu + tau * t)) / s
        logp += -0.5 * t * t - _HALF_LOG_2PI - 0.5 * r * r - math.log(s) - _HALF_LOG_2PI
        g = r / s  # d/dtheta of the observed term
        d_mu += g
        d_tau += g * t
        d_tt[i] = -t + g * tau
    return logp, d_mu, d_tau * tau + 1.0, d_tt


@njit(cache=False, fastmath=False)
def logp_dlogp_m2(mu_a_, sa_log_, mu_b_, sb_log_, z_a, z_b, sy_log_, idx, x, y):  # type: ignore[no-untyped-def]
    """Return M2's log density and its gradient, in kiln's input order."""
    mu_a, sa_log, mu_b, sb_log, sy_log = mu_a_[()], sa_log_[()], mu_b_[()], sb_log_[()], sy_log_[()]
    sa, sb, sy = math.exp(sa_log), math.exp(sb_log), math.exp(sy_log)
    k = z_a.shape[0]
    logp = 2.0 * (-math.log(10.0) - _HALF_LOG_2PI) - 0.5 * ((mu_a / 10.0) ** 2 + (mu_b / 10.0) ** 2)
    for s, s_log in ((sa, sa_log), (sb, sb_log), (sy, sy_log)):
        logp += -0.5 * (s / 5.0) ** 2 + _LOG_SQRT_2_OVER_PI - math.log(5.0) + s_log
    ga = np.zeros(k)  # d/da of the observed term, per group
    gb = np.zeros(k)
    a = np.empty(k)
    b = np.empty(k)
    for j in range(k):
        logp += -0.5 * (z_a[j] * z_a[j] + z_b[j] * z_b[j]) - 2.0 * _HALF_LOG_2PI
        a[j] = mu_a + sa * z_a[j]
        b[j] = mu_b + sb * z_b[j]
    inv_var = 1.0 / (sy * sy)
    sq = 0.0
    for i in range(y.shape[0]):
        j = idx[i]
        e = y[i] - (a[j] + b[j] * x[i])
        sq += e * e
        g = e * inv_var
        ga[j] += g
        gb[j] += g * x[i]
    n = y.shape[0]
    logp += -0.5 * sq * inv_var - n * (sy_log + _HALF_LOG_2PI)
    d_za = np.empty(k)
    d_zb = np.empty(k)
    d_mu_a = -mu_a / 100.0
    d_mu_b = -mu_b / 100.0
    d_sa = -sa / 25.0
    d_sb = -sb / 25.0
    for j in range(k):
        d_mu_a += ga[j]
        d_mu_b += gb[j]
        d_sa += ga[j] * z_a[j]
        d_sb += gb[j] * z_b[j]
        d_za[j] = -z_a[j] + sa * ga[j]
        d_zb[j] = -z_b[j] + sb * gb[j]
    d_sy_log = sq * inv_var - n - sy * sy / 25.0 + 1.0
    return logp, d_mu_a, d_sa * sa + 1.0, d_mu_b, d_sb * sb + 1.0, d_za, d_zb, d_sy_log


@njit(cache=False, fastmath=False)
def logp_dlogp_m3(alpha_, beta, X, y):  # type: ignore[no-untyped-def]
    """Return M3's log density and its gradient (``alpha``, ``beta``)."""
    alpha = alpha_[()]
    n, d = X.shape
    logp = -0.5 * alpha * alpha - _HALF_LOG_2PI
    d_beta = np.empty(d)
    for j in range(d):
        logp += -0.5 * beta[j] * beta[j] - _HALF_LOG_2PI
        d_beta[j] = -beta[j]
    d_alpha = -alpha
    for i in range(n):
        eta = alpha
        for j in range(d):
            eta += X[i, j] * beta[j]
        # y * eta - log(1 + exp(eta)), stably; residual y - sigmoid(eta)
        if eta > 0.0:
            e = math.exp(-eta)
            logp += y[i] * eta - eta - math.log1p(e)
            r = y[i] - 1.0 / (1.0 + e)
        else:
            e = math.exp(eta)
            logp += y[i] * eta - math.log1p(e)
            r = y[i] - e / (1.0 + e)
        d_alpha += r
        for j in range(d):
            d_beta[j] += r * X[i, j]
    return logp, d_alpha, d_beta


def data_args(name: str, rows: int | None = None) -> tuple[np.ndarray, ...]:
    """Return the data arrays model ``name``'s hand-written function takes after its inputs.

    ``rows``: M2's or M3's number of rows (the data generator's default if None).
    """
    if name == "M1":
        d = data_m1()
        return d["y"], d["sigma"]
    if name == "M2":
        d = data_m2() if rows is None else data_m2(n_obs=rows)
        return d["idx"], d["x"], d["y"]
    if name == "M3":
        d = data_m3() if rows is None else data_m3(n=rows)
        return np.ascontiguousarray(d["X"]), d["y"].astype(np.float64)
    raise ValueError(f"no hand-written Numba version of {name!r}; expected one of {MODELS}")


_FUNCTIONS: dict[str, Any] = {"M1": logp_dlogp_m1, "M2": logp_dlogp_m2, "M3": logp_dlogp_m3}


def call(name: str) -> Callable[..., tuple]:
    """Return ``f(*inputs) -> (logp, *grads)``: model ``name``'s njit function, data bound."""
    fn = _FUNCTIONS[name]
    data = data_args(name)

    def f(*inputs: Any) -> tuple:
        return fn(*inputs, *data)

    return f


def jitted(name: str) -> Any:
    """Return the raw njit dispatcher of model ``name`` (call it with inputs, then data)."""
    return _FUNCTIONS[name]


def jax_m3() -> Callable[..., Any] | None:
    """Return ``jax.jit`` of M3's ``(logp, (d_alpha, d_beta))``, or None without JAX.

    The data are closed over (constants, as in kiln's graph); float64 is enabled.
    """
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    d = data_m3()
    X, y = jnp.asarray(d["X"]), jnp.asarray(d["y"].astype(np.float64))

    def logp(alpha: Any, beta: Any) -> Any:
        eta = alpha + X @ beta
        prior = -0.5 * alpha**2 - 0.5 * jnp.sum(beta**2) - (1 + beta.shape[0]) * _HALF_LOG_2PI
        return prior + jnp.sum(y * eta - jax.nn.softplus(eta))

    return jax.jit(jax.value_and_grad(logp, argnums=(0, 1)))  # type: ignore[no-any-return]
