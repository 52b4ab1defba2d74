"""Cross-package: a hand-built model log density, its gradient, compiled and called."""

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln.tensor as kt


def _normal_logp(x, mu, sigma):
    return -0.5 * kt.square((x - mu) / sigma) - kt.log(sigma) - 0.5 * np.log(2 * np.pi)


@pytest.fixture
def regression():
    rng = np.random.default_rng(42)
    X = rng.normal(size=(50, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(scale=0.3, size=50)
    data_X = kt.shared(X, name="X")
    data_y = kt.shared(y, name="y")
    beta = kt.vector("beta", shape=(3,))
    log_sigma = kt.scalar("log_sigma")
    sigma = kt.exp(log_sigma)
    logp = (
        kt.sum(_normal_logp(beta, 0.0, 10.0))
        + _normal_logp(sigma, 0.0, 1.0)
        + log_sigma
        + kt.sum(_normal_logp(data_y, kt.dot(data_X, beta), sigma))
    )
    return beta, log_sigma, logp, data_X, data_y, X, y


def _reference(beta, log_sigma, X, y):
    sigma = np.exp(log_sigma)
    return (
        stats.norm(0, 10).logpdf(beta).sum()
        + stats.norm(0, 1).logpdf(sigma)
        + log_sigma
        + stats.norm(X @ beta, sigma).logpdf(y).sum()
    )


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "FAST_RUN"])
def test_logp_and_gradient_match_scipy(regression, mode):
    beta, log_sigma, logp, _, _, X, y = regression
    grads = kiln.grad(logp, [beta, log_sigma])
    f = kiln.function([beta, log_sigma], [logp, *grads], mode=mode)
    b0, s0 = np.array([0.5, -1.0, 0.2]), -0.3
    value, g_beta, g_sigma = f(b0, s0)
    np.testing.assert_allclose(value, _reference(b0, s0, X, y), rtol=1e-12)
    eps = 1e-6
    fd_beta = [
        (_reference(b0 + eps * e, s0, X, y) - _reference(b0 - eps * e, s0, X, y)) / (2 * eps)
        for e in np.eye(3)
    ]
    fd_sigma = (_reference(b0, s0 + eps, X, y) - _reference(b0, s0 - eps, X, y)) / (2 * eps)
    np.testing.assert_allclose(g_beta, fd_beta, rtol=1e-6)
    np.testing.assert_allclose(g_sigma, fd_sigma, rtol=1e-6)


def test_changing_shared_data_needs_no_recompile(regression):
    beta, log_sigma, logp, data_X, data_y, X, y = regression
    f = kiln.function([beta, log_sigma], logp, mode="FAST_COMPILE")
    b0 = np.zeros(3)
    data_X.set_value(X[:20])
    data_y.set_value(y[:20])
    np.testing.assert_allclose(f(b0, 0.0), _reference(b0, 0.0, X[:20], y[:20]), rtol=1e-12)


def test_hessian_of_quadratic():
    x = kt.vector("x", shape=(3,))
    A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    cost = 0.5 * kt.dot(x, kt.dot(kt.constant(A), x))
    h = kiln.function([x], kiln.hessian(cost, x), mode="FAST_COMPILE")
    np.testing.assert_allclose(h(np.ones(3)), A, rtol=1e-12)
