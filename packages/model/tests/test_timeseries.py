"""Time series: logp against NumPy/SciPy, draws' moments, gradients, shapes, bad input.

One small model (an AR(1) with unknown rho) is sampled and checked against its posterior.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import kiln
import kiln_model as km
import kiln_random as kr
from kiln_compile import available_linkers
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph import tensor as kt
from kiln_model._affine_scan import affine_scan

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]


def _compile(inputs, outputs, backend):  # type: ignore[no-untyped-def]
    return kiln.function(inputs, outputs, mode=kiln.Mode(linker=backend))


def _value(shape: tuple[int, ...]):  # type: ignore[no-untyped-def]
    return kt.tensor("value", dtype="float64", shape=shape)


# --- references ------------------------------------------------------------------------------


def _ar_reference(x: np.ndarray, rho: np.ndarray, sigma: float, constant: bool, init) -> float:  # type: ignore[no-untyped-def]
    p = len(rho) - int(constant)
    c = rho[0] if constant else 0.0
    lags = rho[1:] if constant else rho
    total = float(np.sum(init.logpdf(x[:p])))
    for t in range(p, len(x)):
        mean = c + sum(lags[i] * x[t - 1 - i] for i in range(p))
        total += stats.norm(mean, sigma).logpdf(x[t])
    return total


def _garch_reference(r: np.ndarray, omega: float, alpha: float, beta: float, vol: float) -> float:
    var, total = vol**2, 0.0
    for t in range(len(r)):
        if t:
            var = omega + alpha * r[t - 1] ** 2 + beta * var
        total += stats.norm(0.0, np.sqrt(var)).logpdf(r[t])
    return total


# --- the affine scan -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_affine_scan_matches_the_sequential_recursion(n: int) -> None:
    rng = np.random.default_rng(n)
    a, c, s0 = rng.uniform(-1.2, 1.2, (3, n)), rng.normal(size=(3, n)), rng.normal(size=3)
    ta, tc, ts = _value((3, n)), kt.tensor("c", dtype="float64", shape=(3, n)), kt.vector("s0")
    got = _compile([ta, tc, ts], affine_scan(ta, tc, ts), "vm")(a, c, s0)
    s, want = s0.copy(), np.empty((3, n))
    for t in range(n):
        s = a[:, t] * s + c[:, t]
        want[:, t] = s
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    am, cm, s0m = (
        rng.normal(size=(2, n, 3, 3)) * 0.5,
        rng.normal(size=(2, n, 3)),
        rng.normal(size=(2, 3)),
    )
    tam = kt.tensor("am", dtype="float64", shape=(2, n, 3, 3))
    tcm = kt.tensor("cm", dtype="float64", shape=(2, n, 3))
    tsm = kt.tensor("sm", dtype="float64", shape=(2, 3))
    got = _compile([tam, tcm, tsm], affine_scan(tam, tcm, tsm, matrix=True), "vm")(am, cm, s0m)
    s, want = s0m.copy(), np.empty((2, n, 3))
    for t in range(n):
        s = np.einsum("bij,bj->bi", am[:, t], s) + cm[:, t]
        want[:, t] = s
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# --- log-densities ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_gaussian_random_walk_logp(backend: str) -> None:
    mu, sigma = kt.vector("mu"), kt.scalar("sigma")
    rv = km.GaussianRandomWalk.dist(mu, sigma, init_dist=km.Normal.dist(1.0, 2.0), steps=6)
    value = _value((3, 7))
    f = _compile([mu, sigma, value], km.logp(rv, value), backend)
    x = np.random.default_rng(0).normal(size=(3, 7)) * 3
    m = np.array([-0.5, 0.0, 0.7])
    want = stats.norm(1.0, 2.0).logpdf(x[:, 0]) + np.sum(
        stats.norm(m[:, None], 1.3).logpdf(np.diff(x, axis=-1)), axis=-1
    )
    np.testing.assert_allclose(f(m, 1.3, x), want, rtol=1e-12)
    assert np.all(np.isneginf(f(m, -1.0, x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_walk_with_student_t_innovations_logp(backend: str) -> None:
    rv = km.RandomWalk.dist(
        innovation_dist=km.StudentT.dist(nu=4.0, mu=0.2, sigma=0.5),
        init_dist=km.Laplace.dist(0.0, 1.5),
        steps=9,
    )
    value = _value((10,))
    x = np.cumsum(np.random.default_rng(1).standard_t(4, size=10))
    want = stats.laplace(0.0, 1.5).logpdf(x[0]) + stats.t(4, 0.2, 0.5).logpdf(np.diff(x)).sum()
    np.testing.assert_allclose(_compile([value], km.logp(rv, value), backend)(x), want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mv_gaussian_random_walk_logp(backend: str) -> None:
    cov = np.array([[1.0, 0.4, 0.1], [0.4, 0.8, -0.2], [0.1, -0.2, 0.5]])
    mu = np.array([0.1, -0.3, 0.0])
    x = np.random.default_rng(2).normal(size=(2, 6, 3))
    init = stats.multivariate_normal(np.zeros(3), 2.0 * np.eye(3))
    want = init.logpdf(x[:, 0]) + np.sum(
        stats.multivariate_normal(mu, cov).logpdf(np.diff(x, axis=1)), axis=-1
    )
    value = _value((2, 6, 3))
    for kwargs in ({"cov": cov}, {"chol": np.linalg.cholesky(cov)}, {"tau": np.linalg.inv(cov)}):
        rv = km.MvGaussianRandomWalk.dist(
            mu,
            init_dist=km.MvNormal.dist(np.zeros(3), 2.0 * np.eye(3)),
            steps=5,
            size=(2,),
            **kwargs,
        )
        got = _compile([value], km.logp(rv, value), backend)(x)
        np.testing.assert_allclose(got, want, rtol=1e-10)
    upper = km.MvGaussianRandomWalk.dist(
        mu,
        chol=np.linalg.cholesky(cov).T,
        lower=False,
        init_dist=km.Normal.dist(0, 1, size=3),
        steps=5,
    )
    want0 = stats.norm(0, 1).logpdf(x[0, 0]).sum() + np.sum(
        stats.multivariate_normal(mu, cov).logpdf(np.diff(x[0], axis=0))
    )
    value0 = _value((6, 3))
    got = _compile([value0], km.logp(upper, value0), backend)(x[0])
    np.testing.assert_allclose(got, want0, rtol=1e-10)


# --- MvStudentTRandomWalk --------------------------------------------------------------------

_T_COV = np.array([[1.0, 0.4, 0.1], [0.4, 0.8, -0.2], [0.1, -0.2, 0.5]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_mv_student_t_random_walk_logp(backend: str) -> None:
    nu = np.array([3.0, 7.5])
    mu = np.array([0.1, -0.3, 0.0])
    x = np.cumsum(np.random.default_rng(5).standard_t(4.0, size=(2, 6, 3)), axis=1)
    init = stats.multivariate_normal(np.zeros(3), 2.0 * np.eye(3))
    want = init.logpdf(x[:, 0]) + np.array(
        [
            np.sum(stats.multivariate_t(mu, _T_COV, df=nu[b]).logpdf(np.diff(x[b], axis=0)))
            for b in range(2)
        ]
    )
    value = _value((2, 6, 3))
    chol = np.linalg.cholesky(_T_COV)
    forms = (
        {"scale": _T_COV},
        {"cov": _T_COV},
        {"chol": chol},
        {"chol": chol.T, "lower": False},
        {"tau": np.linalg.inv(_T_COV)},
    )
    for kwargs in forms:
        rv = km.MvStudentTRandomWalk.dist(
            nu=nu,
            mu=mu,
            init_dist=km.MvNormal.dist(np.zeros(3), 2.0 * np.eye(3)),
            steps=5,
            **kwargs,
        )
        assert rv.type.shape == (2, 6, 3)
        got = _compile([value], km.logp(rv, value), backend)(x)
        np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=str(sorted(kwargs)))
    scalar_init = km.MvStudentTRandomWalk.dist(
        nu=4.0, mu=mu, scale=_T_COV, init_dist=km.Normal.dist(0, 1), steps=5
    )
    want0 = stats.norm(0, 1).logpdf(x[0, 0]).sum() + np.sum(
        stats.multivariate_t(mu, _T_COV, df=4.0).logpdf(np.diff(x[0], axis=0))
    )
    value0 = _value((6, 3))
    got0 = _compile([value0], km.logp(scalar_init, value0), backend)(x[0])
    np.testing.assert_allclose(got0, want0, rtol=1e-10)


def test_mv_student_t_random_walk_gradient_and_model() -> None:
    x = np.cumsum(np.random.default_rng(6).normal(size=(7, 3)), axis=0)
    nu, s = kt.scalar("nu"), kt.scalar("s")
    rv = km.MvStudentTRandomWalk.dist(
        nu, np.zeros(3), scale=s * _T_COV, init_dist=km.Normal.dist(0, 1), steps=6
    )
    _check_gradient([nu, s], km.logp(rv, x), [3.5, 1.3])
    _check_gradient([nu, s], km.logp(rv, x), [0.4, 0.2])
    with km.Model() as model:
        km.MvStudentTRandomWalk(
            "w",
            nu=5.0,
            mu=np.zeros(3),
            chol=np.linalg.cholesky(_T_COV),
            init_dist=km.Normal.dist(0, 1),
            observed=x,
        )
        km.MvStudentTRandomWalk(
            "v",
            4.0,
            np.array([1.0, -1.0]),
            cov=np.eye(2),
            init_dist=km.Normal.dist(0, 1),
            steps=2,
        )
    want = stats.norm(0, 1).logpdf(x[0]).sum() + np.sum(
        stats.multivariate_t(np.zeros(3), _T_COV, df=5.0).logpdf(np.diff(x, axis=0))
    )
    np.testing.assert_allclose(model.point_logps(round_vals=10)["w"], want, rtol=1e-9)
    np.testing.assert_allclose(
        model.initial_point()["v"], np.array([[0, 0], [1, -1], [2, -2]], dtype=float)
    )
    with pytest.raises(KilnTypeError, match="exactly one of scale, cov, tau and chol"):
        km.MvStudentTRandomWalk.dist(4.0, np.zeros(2), scale=np.eye(2), cov=np.eye(2), steps=3)
    with pytest.raises(KilnTypeError, match="missing parameter"):
        km.MvStudentTRandomWalk.dist(mu=np.zeros(2), scale=np.eye(2), steps=3)
    with pytest.raises(KilnValueError, match="nu must be > 0"):
        km.MvStudentTRandomWalk.dist(
            -1.0, np.zeros(2), scale=np.eye(2), init_dist=km.Normal.dist(), steps=3
        )
    with pytest.raises(KilnValueError, match="positive definite"):
        km.MvStudentTRandomWalk.dist(
            4.0, np.zeros(2), scale=-np.eye(2), init_dist=km.Normal.dist(), steps=3
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_walk_of_vectors_logp_and_shape(backend: str) -> None:
    cov = np.array([[1.0, -0.3], [-0.3, 0.6]])
    mu = np.array([0.5, 0.0])
    rv = km.RandomWalk.dist(
        innovation_dist=km.MvNormal.dist(mu, cov), init_dist=km.Normal.dist(0.0, 3.0), steps=7
    )
    assert rv.type.shape == (8, 2)
    value = _value((8, 2))
    x = np.random.default_rng(8).normal(size=(8, 2))
    want = stats.norm(0, 3).logpdf(x[0]).sum() + np.sum(
        stats.multivariate_normal(mu, cov).logpdf(np.diff(x, axis=0))
    )
    got = _compile([value], km.logp(rv, value), backend)(x)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    with km.Model() as model:
        km.RandomWalk(
            "w",
            innovation_dist=km.MvNormal.dist(mu, cov),
            init_dist=km.Normal.dist(0.0, 3.0),
            observed=x,
        )
        km.RandomWalk(
            "v",
            innovation_dist=km.MvNormal.dist(mu, cov),
            init_dist=km.Normal.dist(),
            shape=(3, 5, 2),
        )
    np.testing.assert_allclose(model.point_logps(round_vals=10)["w"], want, rtol=1e-9)
    np.testing.assert_allclose(
        model.initial_point()["v"], np.broadcast_to(np.arange(5)[:, None] * mu, (3, 5, 2))
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("rho", "constant"), [([0.6], False), ([0.3, 0.5, -0.2], True), ([0.4, -0.3, 0.2], False)]
)
def test_ar_logp(backend: str, rho: list[float], constant: bool) -> None:
    rho_t = kt.vector("rho")
    rho_np = np.array(rho)
    p = len(rho) - int(constant)
    rv = km.AR.dist(
        rho_t, sigma=0.7, constant=constant, ar_order=p, init_dist=km.Normal.dist(0.5, 2.0), steps=8
    )
    value = _value((8 + p,))
    x = np.random.default_rng(3).normal(size=8 + p)
    got = _compile([rho_t, value], km.logp(rv, value), backend)(rho_np, x)
    want = _ar_reference(x, rho_np, 0.7, constant, stats.norm(0.5, 2.0))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_ar_tau_and_vector_init_logp() -> None:
    rv = km.AR.dist(
        np.array([0.5, -0.25]),
        tau=4.0,
        init_dist=km.MvNormal.dist(np.zeros(2), np.array([[1.0, 0.5], [0.5, 1.0]])),
        steps=5,
    )
    value = _value((7,))
    x = np.random.default_rng(4).normal(size=7)
    got = _compile([value], km.logp(rv, value), "vm")(x)
    init = stats.multivariate_normal(np.zeros(2), [[1.0, 0.5], [0.5, 1.0]])
    want = _ar_reference(x, np.array([0.5, -0.25]), 0.5, False, stats.norm(0, 1))
    want += init.logpdf(x[:2]) - stats.norm(0, 1).logpdf(x[:2]).sum()
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_garch11_logp(backend: str) -> None:
    omega, alpha, beta = kt.scalar("omega"), kt.scalar("alpha"), kt.scalar("beta")
    rv = km.GARCH11.dist(omega, alpha, beta, 0.4, steps=39, size=(2,))
    value = _value((2, 40))
    f = _compile([omega, alpha, beta, value], km.logp(rv, value), backend)
    r = np.random.default_rng(5).normal(size=(2, 40)) * 0.8
    for params in [(0.1, 0.2, 0.7), (0.05, 0.0, 0.9), (0.3, 0.5, 0.0)]:
        want = [_garch_reference(r[i], *params, 0.4) for i in range(2)]
        np.testing.assert_allclose(f(*params, r), want, rtol=1e-12)
    assert np.all(np.isneginf(f(-0.1, 0.2, 0.7, r)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_euler_maruyama_logp(backend: str) -> None:
    theta = kt.scalar("theta")

    def ou(x, th):  # type: ignore[no-untyped-def]
        return -th * x, 0.3 + 0.1 * kt.square(x)

    rv = km.EulerMaruyama.dist(0.05, ou, (theta,), init_dist=km.Normal.dist(0.0, 1.0), steps=20)
    value = _value((21,))
    x = np.random.default_rng(6).normal(size=21)
    got = _compile([theta, value], km.logp(rv, value), backend)(1.7, x)
    prev = x[:-1]
    want = stats.norm(0, 1).logpdf(x[0]) + np.sum(
        stats.norm(prev - 0.05 * 1.7 * prev, np.sqrt(0.05) * (0.3 + 0.1 * prev**2)).logpdf(x[1:])
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --- gradients -------------------------------------------------------------------------------


def _check_gradient(params: list, logp, point: list[float]) -> None:  # type: ignore[no-untyped-def]
    f = kiln.function(params, [logp, *kiln.grad(logp, params)], mode=kiln.Mode(linker="vm"))
    _, *grads = f(*point)
    for i in range(len(point)):
        h = 1e-6
        up, down = list(point), list(point)
        up[i] += h
        down[i] -= h
        fd = (f(*up)[0] - f(*down)[0]) / (2 * h)
        np.testing.assert_allclose(grads[i], fd, rtol=1e-6, atol=1e-6)


def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(7)
    mu, sigma = kt.scalar("mu"), kt.scalar("sigma")
    grw = km.GaussianRandomWalk.dist(mu, sigma, init_dist=km.Normal.dist(0, 1), steps=9)
    _check_gradient([mu, sigma], km.logp(grw, np.cumsum(rng.normal(size=10))), [0.3, 1.4])

    r1, r2, c = kt.scalar("r1"), kt.scalar("r2"), kt.scalar("c")
    ar = km.AR.dist(
        kt.stack([c, r1, r2]), sigma=0.8, constant=True, init_dist=km.Normal.dist(), steps=12
    )
    _check_gradient([c, r1, r2], km.logp(ar, rng.normal(size=14)), [0.2, 0.5, -0.3])

    omega, alpha, beta = kt.scalar("omega"), kt.scalar("alpha"), kt.scalar("beta")
    garch = km.GARCH11.dist(omega, alpha, beta, 0.5, steps=29)
    r = rng.normal(size=30)
    _check_gradient([omega, alpha, beta], km.logp(garch, r), [0.1, 0.3, 0.6])
    _check_gradient([omega, alpha, beta], km.logp(garch, r), [0.2, 0.01, 0.98])


# --- draws -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_gaussian_random_walk_draws_variance_grows_linearly(backend: str) -> None:
    n = 4000
    rv = km.GaussianRandomWalk.dist(
        0.5, 2.0, init_dist=km.Normal.dist(1.0, 1.0), steps=10, size=(n,), rng=kiln.random.rng(11)
    )
    x = _compile([], rv, backend)()
    t = np.arange(11)
    var_want = 1.0 + 4.0 * t
    # Monte Carlo standard errors of the mean and variance of n normal draws
    assert np.all(np.abs(x.mean(0) - (1.0 + 0.5 * t)) < 5 * np.sqrt(var_want / n))
    assert np.all(np.abs(x.var(0) - var_want) < 5 * var_want * np.sqrt(2 / n))
    np.testing.assert_allclose(np.diff(x, axis=1).std(), 2.0, rtol=0.03)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ar1_draws_keep_the_stationary_variance(backend: str) -> None:
    n, rho, sigma = 4000, 0.8, 0.6
    sd = sigma / np.sqrt(1 - rho**2)
    rv = km.AR.dist(
        [rho],
        sigma=sigma,
        init_dist=km.Normal.dist(0, sd),
        steps=30,
        size=(n,),
        rng=kiln.random.rng(3),
    )
    x = _compile([], rv, backend)()
    assert x.shape == (n, 31)
    assert np.all(np.abs(x.var(0) - sd**2) < 5 * sd**2 * np.sqrt(2 / n))
    lag1 = np.mean(x[:, 1:] * x[:, :-1]) / np.mean(x**2)
    assert abs(lag1 - rho) < 0.02


@pytest.mark.parametrize("backend", BACKENDS)
def test_ar2_draws_follow_the_recursion(backend: str) -> None:
    rv = km.AR.dist(
        [1.0, 0.5, -0.3],
        sigma=0.1,
        constant=True,
        init_dist=km.Normal.dist(),
        steps=50,
        size=(2000,),
        rng=kiln.random.rng(5),
    )
    x = _compile([], rv, backend)()
    resid = x[:, 2:] - (1.0 + 0.5 * x[:, 1:-1] - 0.3 * x[:, :-2])
    assert abs(resid.mean()) < 5 * 0.1 / np.sqrt(resid.size)
    np.testing.assert_allclose(resid.std(), 0.1, rtol=0.02)
    # the stationary mean c / (1 - sum rho) is reached
    np.testing.assert_allclose(x[:, -1].mean(), 1.0 / 0.8, atol=0.02)


@pytest.mark.parametrize("backend", BACKENDS)
def test_garch11_draws_keep_the_unconditional_variance(backend: str) -> None:
    n, omega, alpha, beta = 20000, 0.1, 0.2, 0.7
    uncond = omega / (1 - alpha - beta)
    rv = km.GARCH11.dist(
        omega, alpha, beta, np.sqrt(uncond), steps=20, size=(n,), rng=kiln.random.rng(9)
    )
    r = _compile([], rv, backend)()
    # E[r_t^2] stays omega / (1 - alpha - beta) from a start at that variance; the fourth
    # moment of a GARCH(1,1) bounds the Monte Carlo error of the mean of r_t^2.
    kurt = 3 * (1 - (alpha + beta) ** 2) / (1 - (alpha + beta) ** 2 - 2 * alpha**2)
    se = uncond * np.sqrt((kurt - 1) / n)
    assert np.all(np.abs((r**2).mean(0) - uncond) < 6 * se)
    # volatility clustering: squared returns are positively autocorrelated
    sq = r[:, 5:] ** 2 - uncond
    assert np.mean(sq[:, 1:] * sq[:, :-1]) > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_mv_gaussian_random_walk_draws_covariance(backend: str) -> None:
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    rv = km.MvGaussianRandomWalk.dist(
        np.array([0.2, -0.1]),
        cov=cov,
        init_dist=km.Normal.dist(0, 1, size=2),
        steps=8,
        size=(5000,),
        rng=kiln.random.rng(2),
    )
    x = _compile([], rv, backend)()
    assert x.shape == (5000, 9, 2)
    total = x[:, -1] - x[:, 0]
    np.testing.assert_allclose(total.mean(0), 8 * np.array([0.2, -0.1]), atol=0.15)
    np.testing.assert_allclose(np.cov(total.T), 8 * cov, rtol=0.08, atol=0.3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mv_student_t_random_walk_draws(backend: str) -> None:
    nu, mu, cov, n, steps = 6.0, np.array([0.2, -0.1]), np.array([[1.0, 0.6], [0.6, 2.0]]), 5000, 8
    rv = km.MvStudentTRandomWalk.dist(
        nu,
        mu,
        scale=cov,
        init_dist=km.Normal.dist(0, 1, size=2),
        steps=steps,
        size=(n,),
        rng=kiln.random.rng(4),
    )
    x = _compile([], rv, backend)()
    assert x.shape == (n, steps + 1, 2)
    total = x[:, -1] - x[:, 0]
    # the sum of 8 independent t steps: mean 8 mu, covariance 8 nu / (nu - 2) scale
    se = np.sqrt(steps * nu / (nu - 2) * np.diag(cov) / n)
    np.testing.assert_array_less(np.abs(total.mean(0) - steps * mu), 5 * se)
    np.testing.assert_allclose(np.cov(total.T), steps * nu / (nu - 2) * cov, rtol=0.1, atol=0.3)
    # each step's component is Student-t(nu, mu_i, sqrt(scale_ii)); steps are independent
    moves = np.diff(x, axis=1)
    for i in range(2):
        ref = stats.t(nu, mu[i], np.sqrt(cov[i, i]))
        assert stats.kstest(moves[..., i].ravel(), ref.cdf).pvalue > 1e-3


@pytest.mark.skipif("jax" not in available_linkers(), reason="kiln-jax is not installed")
def test_draws_on_jax_have_the_same_moments() -> None:
    n = 4000
    walk = km.GaussianRandomWalk.dist(
        0.5, 2.0, init_dist=km.Normal.dist(1.0, 1.0), steps=10, size=(n,), rng=kiln.random.rng(1)
    )
    ar = km.AR.dist(
        [1.0, 0.5, -0.3],
        sigma=0.1,
        constant=True,
        init_dist=km.Normal.dist(),
        steps=30,
        size=(n,),
        rng=kiln.random.rng(2),
    )
    garch = km.GARCH11.dist(0.1, 0.2, 0.7, 1.0, steps=10, size=(n,), rng=kiln.random.rng(3))
    x, y, r = _compile([], [walk, ar, garch], "jax")()
    var = 1.0 + 4.0 * np.arange(11)
    assert np.all(np.abs(x.var(0) - var) < 5 * var * np.sqrt(2 / n))
    resid = y[:, 2:] - (1.0 + 0.5 * y[:, 1:-1] - 0.3 * y[:, :-2])
    np.testing.assert_allclose(resid.std(), 0.1, rtol=0.02)
    kurt = 3 * (1 - 0.81) / (1 - 0.81 - 2 * 0.04)
    assert np.all(np.abs((r**2).mean(0) - 1.0) < 6 * np.sqrt((kurt - 1) / n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_euler_maruyama_draws_follow_the_discretised_ou_process(backend: str) -> None:
    # x_{t+1} = a x_t + sigma sqrt(dt) z, a = 1 - theta dt; x_0 ~ Normal(0, 1):
    # Var x_t = a^(2t) + sigma^2 dt (1 - a^(2t)) / (1 - a^2), Cov(x_{t+1}, x_t) = a Var x_t.
    theta, sigma, dt, steps, n = 1.5, 0.8, 0.1, 30, 20_000
    rv = km.EulerMaruyama.dist(
        dt,
        lambda x, th, s: (-th * x, s),
        (theta, sigma),
        init_dist=km.Normal.dist(0.0, 1.0),
        steps=steps,
        size=n,
        rng=kr.rng(7),
    )
    x = _compile([], rv, backend)()
    assert x.shape == (n, steps + 1)
    a = 1.0 - theta * dt
    for t in (1, 10, steps):
        var = a ** (2 * t) + sigma**2 * dt * (1 - a ** (2 * t)) / (1 - a**2)
        assert abs(x[:, t].mean()) < 5 * np.sqrt(var / n)
        assert abs(x[:, t].var() / var - 1) < 5 * np.sqrt(2 / n)
    var = a ** (2 * (steps - 1)) + sigma**2 * dt * (1 - a ** (2 * (steps - 1))) / (1 - a**2)
    cov = np.mean(x[:, steps] * x[:, steps - 1])
    assert abs(cov / (a * var) - 1) < 5 * np.sqrt(2 / n)


# --- shapes ----------------------------------------------------------------------------------


def test_shapes_from_steps_shape_dims_and_observed() -> None:
    init = km.Normal.dist(0, 1)
    with km.Model(coords={"series": ["a", "b"], "time": range(12)}) as model:
        a = km.GaussianRandomWalk("a", sigma=1.0, init_dist=init, dims=("series", "time"))
        b = km.AR("b", [0.3, 0.2], init_dist=init, shape=(3, 10))
        c = km.GARCH11("c", 0.1, 0.1, 0.8, 0.3, observed=np.zeros((4, 7)))
        d = km.MvGaussianRandomWalk("d", np.zeros(2), cov=np.eye(2), init_dist=init, steps=4)
        e = km.EulerMaruyama(
            "e", 0.1, lambda x, k: (-k * x, 1.0), (1.0,), init_dist=init, dims=("time",)
        )
        f = km.AR("f", np.zeros((2, 3)), constant=True, init_dist=init, observed=np.zeros((2, 9)))
    assert a.type.shape == (2, 12)
    assert b.type.shape == (3, 10)
    assert c.type.shape == (4, 7)
    assert d.type.shape == (5, 2)
    assert e.type.shape == (12,)
    assert f.type.shape == (2, 9)
    point = model.initial_point()
    assert point["a"].shape == (2, 12) and point["d"].shape == (5, 2)
    assert np.isfinite(model.compile_logp()(point))
    assert all(info.transform is None for info in model.free_variables)


def test_default_init_dist_warns_as_pymc() -> None:
    with pytest.warns(UserWarning, match="init_dist"):
        rv = km.GaussianRandomWalk.dist(steps=3)
    value = _value((4,))
    x = np.array([10.0, 11.0, 10.5, 12.0])
    want = stats.norm(0, 100).logpdf(x[0]) + stats.norm(0, 1).logpdf(np.diff(x)).sum()
    np.testing.assert_allclose(_compile([value], km.logp(rv, value), "vm")(x), want, rtol=1e-12)
    with pytest.warns(UserWarning, match="init_dist"):
        km.AR.dist([0.5], steps=3)


def test_support_points() -> None:
    with km.Model() as model:
        km.GaussianRandomWalk("w", mu=0.5, init_dist=km.Normal.dist(2.0, 1.0), steps=4)
        km.AR("x", [0.5], init_dist=km.Normal.dist(3.0, 1.0), steps=3)
        km.MvGaussianRandomWalk(
            "y", np.array([1.0, -1.0]), cov=np.eye(2), init_dist=km.Normal.dist(0, 1), steps=2
        )
        point = model.initial_point()
    np.testing.assert_allclose(point["w"], 2.0 + 0.5 * np.arange(5))
    np.testing.assert_allclose(point["x"], np.full(4, 3.0))
    np.testing.assert_allclose(point["y"], np.array([[0, 0], [1, -1], [2, -2]], dtype=float))


# --- bad input -------------------------------------------------------------------------------


def test_bad_input_is_named() -> None:
    init = km.Normal.dist()
    with pytest.raises(KilnValueError, match="steps"):
        km.GaussianRandomWalk.dist(init_dist=init)
    with pytest.raises(KilnValueError, match="steps"):
        km.GaussianRandomWalk.dist(init_dist=init, steps=0)
    with pytest.raises(KilnValueError, match="length 5"):
        km.GaussianRandomWalk.dist(init_dist=init, steps=3, shape=(5,))
    with km.Model():
        named = km.Normal("named", 0, 1)
        with pytest.raises(KilnValueError, match="named"):
            km.GaussianRandomWalk("w", init_dist=named, steps=3)
        with pytest.raises(KilnValueError, match="steps"):
            km.GaussianRandomWalk("v", init_dist=init)
    with pytest.raises(KilnTypeError, match="init_dist"):
        km.GaussianRandomWalk.dist(init_dist=np.zeros(3), steps=3)
    with pytest.raises(KilnValueError, match="sigma"):
        km.GaussianRandomWalk.dist(sigma=-1.0, init_dist=init, steps=3)
    with pytest.raises(KilnValueError, match="rho's last axis has length 3"):
        km.AR.dist([0.1, 0.2, 0.3], ar_order=1, init_dist=init, steps=4)
    with pytest.raises(KilnValueError, match="AR order must be >= 1"):
        km.AR.dist([0.5], constant=True, init_dist=init, steps=4)
    with pytest.raises(KilnValueError, match="ar_order"):
        km.AR.dist(kt.vector("rho"), init_dist=init, steps=4)
    with pytest.raises(KilnValueError, match="needs 2 initial values"):
        km.AR.dist([0.1, 0.2], init_dist=km.MvNormal.dist(np.zeros(3), np.eye(3)), steps=4)
    with pytest.raises(KilnTypeError, match="sigma or tau"):
        km.AR.dist([0.5], sigma=1.0, tau=1.0, init_dist=init, steps=4)
    with pytest.raises(KilnTypeError, match="exactly one of cov, tau and chol"):
        km.MvGaussianRandomWalk.dist(np.zeros(2), cov=np.eye(2), chol=np.eye(2), steps=3)
    with pytest.raises(KilnTypeError, match="RandomWalk: innovation_dist"):
        km.RandomWalk.dist(innovation_dist=np.zeros(2), init_dist=init, steps=3)
    with pytest.raises(KilnValueError, match="RandomWalk: init_dist: expected a distribution"):
        km.RandomWalk.dist(
            innovation_dist=km.Normal.dist(),
            init_dist=km.MvNormal.dist(np.zeros(2), np.eye(2)),
            steps=3,
        )
    with pytest.raises(KilnValueError, match="positive definite"):
        km.MvGaussianRandomWalk.dist(np.zeros(2), cov=-np.eye(2), init_dist=init, steps=3)
    with pytest.raises(KilnValueError, match="alpha_1 must be >= 0"):
        km.GARCH11.dist(0.1, -0.2, 0.5, 0.1, steps=3)
    with pytest.raises(KilnTypeError, match="drift, diffusion"):
        km.EulerMaruyama.dist(0.1, lambda x: -x, (), init_dist=init, steps=3)
    with pytest.raises(KilnValueError, match="batch shape"):
        km.GaussianRandomWalk.dist(init_dist=km.Normal.dist(np.zeros(3)), steps=3, size=(2,))


# --- sampling --------------------------------------------------------------------------------


def test_ar1_posterior_mean_of_rho() -> None:
    rng = np.random.default_rng(0)
    rho_true, n = 0.6, 200
    x = np.empty(n)
    x[0] = rng.normal(0, 1 / np.sqrt(1 - rho_true**2))
    for t in range(1, n):
        x[t] = rho_true * x[t - 1] + rng.normal()
    # With sigma known and a flat prior, the conditional likelihood is Normal in rho
    rho_hat = np.sum(x[1:] * x[:-1]) / np.sum(x[:-1] ** 2)
    post_sd = 1 / np.sqrt(np.sum(x[:-1] ** 2))
    with km.Model():
        rho = km.Uniform("rho", -1.0, 1.0)
        km.AR("x", [rho], sigma=1.0, init_dist=km.Normal.dist(0, 10), observed=x)
        idata = kiln.sample(
            draws=500, tune=500, chains=2, progressbar=False, backend="numba", random_seed=3
        )
    post = idata.posterior["rho"].values
    assert abs(post.mean() - rho_hat) < 0.25 * post_sd
    assert abs(post.std() - post_sd) < 0.15 * post_sd
    assert abs(rho_hat - rho_true) < 4 * post_sd
    assert int(idata.sample_stats["diverging"].sum()) == 0


def test_euler_maruyama_drift_posterior() -> None:
    # An Ornstein-Uhlenbeck path observed on a grid: with the diffusion known, the
    # Euler-Maruyama likelihood is Normal in theta, so the posterior is closed-form.
    rng = np.random.default_rng(4)
    dt, theta_true, g, n = 0.1, 1.5, 0.4, 300
    x = np.empty(n)
    x[0] = 1.0
    for t in range(1, n):
        x[t] = x[t - 1] - dt * theta_true * x[t - 1] + np.sqrt(dt) * g * rng.normal()
    prev, step = x[:-1], np.diff(x)
    theta_hat = -np.sum(step * prev) / (dt * np.sum(prev**2))
    post_sd = g / np.sqrt(dt * np.sum(prev**2))
    with km.Model():
        theta = km.Normal("theta", 0.0, 100.0)
        km.EulerMaruyama(
            "x",
            dt,
            lambda v, th: (-th * v, g),
            (theta,),
            init_dist=km.Normal.dist(0, 5),
            observed=x,
        )
        idata = kiln.sample(
            draws=500, tune=500, chains=2, progressbar=False, backend="numba", random_seed=5
        )
    post = idata.posterior["theta"].values
    assert abs(post.mean() - theta_hat) < 0.25 * post_sd
    assert abs(post.std() - post_sd) < 0.15 * post_sd
