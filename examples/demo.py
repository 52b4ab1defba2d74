"""kiln demo: build a log-density graph by hand, differentiate it, compile it, evaluate it.

The model is the eight-schools hierarchical model (non-centred):

    mu ~ Normal(0, 5), tau ~ HalfCauchy(5) (sampled as log_tau), z_j ~ Normal(0, 1),
    y_j ~ Normal(mu + tau * z_j, sigma_j)

The script checks the compiled log density against scipy.stats and its gradient
against finite differences, then prints both.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats

import kiln
import kiln.tensor as kt

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
LOG_2PI = np.log(2 * np.pi)


def normal_logp(x, mu, sigma):
    """Log-density of Normal(mu, sigma) at x, elementwise."""
    return -0.5 * kt.square((x - mu) / sigma) - kt.log(sigma) - 0.5 * LOG_2PI


def build_logp():
    """Return the flat parameter vector and the model's log density (with log-Jacobian)."""
    theta = kt.vector("theta", shape=(10,))
    mu, log_tau, z = theta[0], theta[1], theta[2:]
    tau = kt.exp(log_tau)
    half_cauchy = kt.log(2.0 / (np.pi * 5.0)) - kt.log1p(kt.square(tau / 5.0))
    logp = (
        normal_logp(mu, 0.0, 5.0)
        + half_cauchy
        + log_tau  # log |d tau / d log_tau|
        + kt.sum(normal_logp(z, 0.0, 1.0))
        + kt.sum(normal_logp(kt.constant(Y), mu + tau * z, kt.constant(SIGMA)))
    )
    return theta, logp


def reference_logp(point: np.ndarray) -> float:
    """Compute the same log density with scipy.stats."""
    mu, log_tau, z = point[0], point[1], point[2:]
    tau = np.exp(log_tau)
    return float(
        stats.norm(0, 5).logpdf(mu)
        + stats.halfcauchy(scale=5).logpdf(tau)
        + log_tau
        + stats.norm(0, 1).logpdf(z).sum()
        + stats.norm(mu + tau * z, SIGMA).logpdf(Y).sum()
    )


def main() -> None:
    """Build, differentiate, compile and evaluate the model; check against SciPy."""
    theta, logp = build_logp()
    dlogp = kiln.grad(logp, theta)
    print("The log-density graph (first lines):")
    print("\n".join(kiln.format_graph(logp).splitlines()[:12]) + "\n  ...")

    start = time.perf_counter()
    f = kiln.function([theta], [logp, dlogp], profile=True)  # FAST_RUN: every rewrite
    print(f"\ncompiled on backend {f.linker!r} in {1e3 * (time.perf_counter() - start):.1f} ms")
    print("after Stage 1 (rewriting), the graph that runs:")
    print(kiln.format_graph(f.outputs))

    point = np.random.default_rng(0).normal(size=10)
    value, gradient = f(point)
    expected = reference_logp(point)
    eps = 1e-6
    numeric = np.array(
        [
            (reference_logp(point + eps * e) - reference_logp(point - eps * e)) / (2 * eps)
            for e in np.eye(10)
        ]
    )
    print(f"logp(theta)       = {float(value):.10f}")
    print(f"scipy.stats       = {expected:.10f}")
    print(f"max |grad - finite differences| = {np.max(np.abs(gradient - numeric)):.2e}")
    np.testing.assert_allclose(value, expected, rtol=1e-10)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-6)

    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        f(point)
    per_call = (time.perf_counter() - start) / n
    print(f"{per_call * 1e6:.1f} us per logp+gradient call on {f.linker!r}")
    print(f.profile.summary())
    print("demo OK")


if __name__ == "__main__":
    main()
