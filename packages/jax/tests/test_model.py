"""The JAX path of a compiled model (logp_jax, expand_jax) and kl.sample on the JAX backend."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import kiln as kl
import kiln_model as km
from kiln_compile import Mode
from kiln_graph import KilnValueError

JAX = Mode(linker="jax")


def _regression() -> tuple[km.Model, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 2))
    y = x @ np.array([1.0, -2.0]) + rng.normal(size=30)
    with km.Model() as model:
        data = km.Data("X", x)
        beta = km.Normal("beta", 0.0, 1.0, shape=2)
        sigma = km.HalfNormal("sigma", 1.0)
        mu = km.Deterministic("mu", data @ beta)
        km.Normal("y", mu, sigma, observed=y)
    return model, x, y


@pytest.fixture(scope="module")
def regression() -> tuple[km.Model, km.CompiledModel, np.ndarray]:
    model, x, _ = _regression()
    return model, model.logp_dlogp_function(mode=JAX), x


def test_grad_of_logp_jax_matches_logp_dlogp(regression):
    _, m, _ = regression
    for seed in range(3):
        x = m.initial_point(seed)
        logp, dlogp = m.logp_dlogp(x)
        with jax.enable_x64(True):
            value = m.logp_jax(x)
            grad = jax.grad(m.logp_jax)(x)
        assert value.dtype == np.float64 and grad.dtype == np.float64
        np.testing.assert_allclose(float(value), logp, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(grad), dlogp, rtol=1e-10, atol=1e-10)
    assert not jax.config.jax_enable_x64


def test_logp_jax_and_expand_jax_vmap_and_jit(regression):
    _, m, x_data = regression
    points = np.stack([m.initial_point(s) for s in range(4)])
    with jax.enable_x64(True):
        logps = jax.jit(jax.vmap(m.logp_jax))(points)
        expanded = jax.jit(jax.vmap(m.expand_jax))(points)
        assert list(m.expand_jax(points[0])) == m.out_names  # ordered like out_names
    assert set(expanded) == set(m.out_names)  # (a pytree: jit returns dicts key-sorted)
    for k, point in enumerate(points):
        np.testing.assert_allclose(float(logps[k]), m.logp_dlogp(point)[0], rtol=1e-12)
        host = m.expand(point)
        for name in m.out_names:
            np.testing.assert_allclose(np.asarray(expanded[name][k]), host[name], rtol=1e-12)
    beta = np.asarray(expanded["beta"][0])
    np.testing.assert_allclose(np.asarray(expanded["mu"][0]), x_data @ beta, rtol=1e-12)


def test_logp_jax_reads_the_data_when_it_is_called():
    model, x, _ = _regression()
    m = model.logp_dlogp_function(mode=JAX)
    point = m.initial_point(1)
    with jax.enable_x64(True):
        before = float(m.logp_jax(point))
        with model:
            km.set_data({"X": x * 2})
        after = float(m.logp_jax(point))
    assert after != before
    np.testing.assert_allclose(after, m.logp_dlogp(point)[0], rtol=1e-12)


def test_the_jax_path_needs_the_jax_backend():
    model, _, _ = _regression()
    m = model.logp_dlogp_function(mode=Mode(linker="vm"))
    with pytest.raises(KilnValueError, match="need the JAX backend"):
        m.logp_jax(m.initial_point(0))


def test_kiln_nuts_samples_on_the_jax_backend():
    """kl.sample(backend='jax'): kiln's NUTS through the host logp_dlogp; a conjugate mean."""
    rng = np.random.default_rng(5)
    y = rng.normal(1.5, 1.0, size=50)
    with km.Model():
        mu = km.Normal("mu", 0.0, 10.0)
        km.Normal("y", mu, 1.0, observed=y)
        idata = kl.sample(
            draws=800, tune=300, chains=2, cores=2, random_seed=3, backend="jax", progressbar=False
        )
    post_var = 1.0 / (1.0 / 100.0 + len(y))
    post_mean = post_var * y.sum()
    draws = idata.posterior["mu"].values.ravel()
    assert idata.attrs["backend"] == "jax" and idata.attrs["nuts_sampler"] == "kiln"
    assert abs(draws.mean() - post_mean) < 5 * np.sqrt(post_var / 300)
    assert abs(draws.std() - np.sqrt(post_var)) < 0.3 * np.sqrt(post_var)
