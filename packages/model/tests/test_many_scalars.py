"""Models written as many scalar variables in a loop (issue #21, item 3).

They compile on the default backend, their log-density and gradient equal a
vectorized NumPy / SciPy reference, and what they compile to grows linearly.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln as kl
from kiln_compile import available_linkers

N = 120  # about 2,000 generated lines: split into several chunk functions


def _model(n: int, coefs: np.ndarray, observed: float) -> kl.Model:
    with kl.Model() as m:
        scales = [kl.HalfNormal(f"s{i}", 1.0) for i in range(n // 2)]
        xs = [kl.Normal(f"x{i}", 0.0, s) for i, s in enumerate(scales)]
        kl.Normal("y", sum(x * c for x, c in zip(xs, coefs, strict=True)), 1.0, observed=observed)
    return m


def _reference(q: np.ndarray, coefs: np.ndarray, observed: float) -> float:
    """Return the joint log-density of the unconstrained vector [log s_0, ..., x_0, ...]."""
    half = q.size // 2
    log_s, x = q[:half], q[half:]
    s = np.exp(log_s)
    return float(
        np.sum(stats.halfnorm.logpdf(s) + log_s)
        + np.sum(stats.norm.logpdf(x, 0.0, s))
        + stats.norm.logpdf(observed, np.dot(x, coefs), 1.0)
    )


def _reference_grad(q: np.ndarray, coefs: np.ndarray, observed: float) -> np.ndarray:
    half = q.size // 2
    log_s, x = q[:half], q[half:]
    s = np.exp(log_s)
    resid = observed - np.dot(x, coefs)
    d_log_s = -(s**2) + x**2 / s**2  # HalfNormal, the log Jacobian (+1), Normal (-1)
    d_x = -x / s**2 + resid * coefs
    return np.concatenate([d_log_s, d_x])


def test_a_model_of_many_scalars_matches_a_vectorized_reference():
    rng = np.random.default_rng(0)
    coefs = rng.normal(size=N // 2)
    linker = "numba" if "numba" in available_linkers() else "vm"  # kiln's default backend
    compiled = _model(N, coefs, 0.7).logp_dlogp_function(mode=kl.Mode(linker=linker))
    assert compiled.function.linker == linker
    names = [b.name for b in compiled.layout]
    half = N // 2
    # The HalfNormal scales come first (log-transformed), then the normals.
    assert names[:2] == ["s0_log__", "s1_log__"] and names[half] == "x0"
    for seed in range(3):
        q = np.random.default_rng(seed).normal(size=N) * 0.5
        logp, grad = compiled.logp_dlogp(q)
        np.testing.assert_allclose(logp, _reference(q, coefs, 0.7), rtol=1e-10)
        np.testing.assert_allclose(grad, _reference_grad(q, coefs, 0.7), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("linker", ["vm"])
def test_what_a_scalar_model_compiles_to_grows_linearly(linker):
    counts = []
    for n in (100, 200):
        coefs = np.linspace(-1.0, 1.0, n // 2)
        compiled = _model(n, coefs, 0.2).logp_dlogp_function(mode=kl.Mode(linker=linker))
        counts.append(len(compiled.function.fgraph.nodes))
    assert counts[1] <= 2.2 * counts[0]


def test_expand_draws_of_many_scalars():
    coefs = np.ones(20)
    linker = "numba" if "numba" in available_linkers() else "vm"
    compiled = _model(40, coefs, 0.0).logp_dlogp_function(mode=kl.Mode(linker=linker))
    qs = np.random.default_rng(1).normal(size=(4, 40))
    out = compiled.expand_draws(qs)
    np.testing.assert_allclose(out["s3"], np.exp(qs[:, 3]))
    np.testing.assert_array_equal(out["x5"], qs[:, 25])
