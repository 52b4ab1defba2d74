"""kl.gp.HSGPPeriodic against SciPy's Bessel functions and the exact Periodic covariance.

Also the options of kl.gp.HSGP that test_gp.py leaves out (``drop_first``,
``parametrization="centered"``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import special

import kiln as kl
import kiln_samplers as ks
from kiln_compile import available_linkers
from kiln_graph import KilnTypeError, KilnValueError
from kiln_graph import tensor as kt
from kiln_graph.testing import verify_grad
from kiln_model.gp._hsgp_periodic import ive_by_quadrature

cov = kl.gp.cov
VM = kl.Mode(linker="vm")


def _periodic(x: np.ndarray, period: float, ls: float) -> np.ndarray:
    """Return the exact Periodic covariance of the points ``x`` (a vector), in NumPy."""
    s = np.sin(np.pi * (x[:, None] - x[None, :]) / period) / ls
    return np.exp(-0.5 * s**2)


def _linearized_cov(m: int, ls: float, period: float, scale: float, x: np.ndarray) -> np.ndarray:
    gp = kl.gp.HSGPPeriodic(m, scale, cov_func=cov.Periodic(1, period=period, ls=ls))
    (phi_cos, phi_sin), psd = gp.prior_linearized(x[:, None])
    c, s, p = kl.draw([phi_cos, phi_sin, psd])
    assert c.shape == s.shape == (len(x), m) and p.shape == (m,)
    return c @ np.diag(p**2) @ c.T + s @ np.diag(p**2) @ s.T  # type: ignore[no-any-return]


# --- the Bessel functions -----------------------------------------------------------


@pytest.mark.parametrize("a", [0.01, 0.5, 6.25, 100.0])
def test_the_quadrature_gives_scipys_ive(a: float) -> None:
    """Relative 1e-10 where ``ive`` is not tiny; the rest is rounding (1e-16 absolute).

    A coefficient far below 1 is a cancelling sum of terms of order ``1 / N``, so its
    absolute error is what float64 gives; ``ive(4, 0.01) = 2.6e-11`` is only good to
    about 1e-6 relative, which is harmless (it is squared into a covariance of order 1).
    """
    m = 40
    got = kl.draw(ive_by_quadrature(m, a))
    want = special.ive(np.arange(m), a)
    assert got.shape == (m,)
    big = want > 1e-5
    np.testing.assert_allclose(got[big], want[big], rtol=1e-10, atol=0)
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-15)


def test_the_amplitudes_are_the_square_roots_of_the_series_coefficients() -> None:
    scale, ls, m = 1.7, 0.4, 25
    gp = kl.gp.HSGPPeriodic(m, scale, cov_func=cov.Periodic(1, period=3.0, ls=ls))
    _, psd = gp.prior_linearized(np.linspace(0, 1, 5)[:, None])
    c = np.where(np.arange(m) == 0, 1.0, 2.0)
    want = scale * np.sqrt(c * special.ive(np.arange(m), 1 / (4 * ls**2)))
    got = kl.draw(psd)
    # the square root turns the quadrature's 1e-16 absolute error into 1e-16 / (2 psd)
    np.testing.assert_allclose(got**2, want**2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got[want > 1e-3], want[want > 1e-3], rtol=1e-10)
    orders = [0, 3, 7]
    approx = cov.Periodic(1, period=3.0, ls=ls).power_spectral_density_approx(orders)
    np.testing.assert_allclose(kl.draw(approx), got[orders] / scale, rtol=1e-12)


# --- the covariance -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ls", "m", "tol"), [(0.5, (5, 30), (1e-3, 1e-12)), (0.2, (8, 40), (0.05, 1e-11))]
)
def test_the_basis_approaches_the_exact_periodic_covariance(ls, m, tol) -> None:
    """Over 100 points and 3.5 periods: the error falls with m, to rounding at large m."""
    x = np.linspace(-1.0, 6.0, 100)
    period, scale = 2.0, 1.3
    exact = scale**2 * _periodic(x, period, ls)
    errors = [np.abs(_linearized_cov(k, ls, period, scale, x) - exact).max() for k in m]
    assert errors[0] < tol[0] and errors[1] < tol[1] and errors[1] < errors[0] / 1e3, errors


def test_the_prior_variance_is_the_kernels() -> None:
    """Forward draws of ``f``: the variance ``scale**2`` and the covariance at a lag.

    PyMC's HSGPPeriodic gives a prior variance of about 0.32 here (``ls = 0.7``, scale 1).
    """
    x = np.array([0.0, 0.4, 1.1])
    with kl.Model():
        gp = kl.gp.HSGPPeriodic(20, cov_func=cov.Periodic(1, period=1.5, ls=0.7))
        f = gp.prior("f", X=x[:, None])
    draws = kl.draw(f, draws=20000, random_seed=3)
    want = _periodic(x, 1.5, 0.7)
    # 20,000 draws: the standard error of a covariance of order 1 is about 0.01
    np.testing.assert_allclose(np.cov(draws.T), want, atol=0.05)


# --- gradients ----------------------------------------------------------------------


@pytest.mark.parametrize(("ls", "m"), [(0.1, 30), (0.7, 8), (5.0, 4)])
def test_the_amplitudes_gradient_in_ls_matches_finite_differences(ls: float, m: int) -> None:
    """Small ``ls`` (``a = 25``, many orders), a mid one and a large one (``a = 0.01``).

    Each ``m`` keeps every coefficient above 1e-9: below that a coefficient is the
    quadrature's rounding noise (1e-16) and the square root's derivative,
    ``dq / (2 sqrt(q))``, turns it into noise of its own that finite differences cannot
    follow (harmless in a model: it multiplies an amplitude of 1e-8 or less).
    """
    weights = np.random.default_rng(2).normal(size=m)

    def build(ls_var: kt.TensorVariable) -> kt.TensorVariable:
        gp = kl.gp.HSGPPeriodic(m, 1.3, cov_func=cov.Periodic(1, period=2.0, ls=ls_var))
        _, psd = gp.prior_linearized(np.linspace(0, 1, 3)[:, None])
        return kt.sum(psd * weights)

    verify_grad(build, [np.asarray(ls)], eps=1e-5, rtol=1e-6, atol=1e-9)

    # and against SciPy: d ive(j, a) / da = (ive(j-1, a) + ive(j+1, a)) / 2 - ive(j, a)
    ls_var = kt.scalar("ls", dtype="float64")
    g = kl.function([ls_var], kl.grad(build(ls_var), ls_var), mode=VM)(ls)
    j, a = np.arange(m), 1 / (4 * ls**2)
    c = np.where(j == 0, 1.0, 2.0)
    dive = (special.ive(j - 1, a) + special.ive(j + 1, a)) / 2 - special.ive(j, a)
    dpsd = 1.3 * c * dive / (2 * np.sqrt(c * special.ive(j, a))) * (-1 / (2 * ls**3))
    np.testing.assert_allclose(g, (weights * dpsd).sum(), rtol=1e-7)


def test_the_gradient_stays_finite_where_coefficients_round_to_zero() -> None:
    """``ls = 5`` with 30 orders: most coefficients are rounding noise, some negative."""
    ls_var = kt.scalar("ls", dtype="float64")
    gp = kl.gp.HSGPPeriodic(30, cov_func=cov.Periodic(1, period=2.0, ls=ls_var))
    _, psd = gp.prior_linearized(np.linspace(0, 1, 3)[:, None])
    f = kl.function([ls_var], [psd, kl.grad(kt.sum(psd), ls_var)], mode=VM)
    for ls in (5.0, 20.0):
        value, grad = f(ls)
        assert np.all(np.isfinite(value)) and np.all(value >= 1e-9 - 1e-24)
        assert np.isfinite(grad)


@pytest.mark.skipif("jax" not in available_linkers(), reason="JAX is not installed")
def test_the_amplitudes_and_their_gradient_on_jax_match_the_vm() -> None:
    ls_var = kt.scalar("ls", dtype="float64")
    gp = kl.gp.HSGPPeriodic(25, 1.1, cov_func=cov.Periodic(1, period=2.0, ls=ls_var))
    (phi_cos, phi_sin), psd = gp.prior_linearized(np.linspace(0, 5, 30)[:, None])
    # psd**2: the square root would magnify the rounding of coefficients near 0
    outs = [phi_cos, phi_sin, psd**2, kl.grad(kt.sum(psd**1.5), ls_var)]
    vm = kl.function([ls_var], outs, mode=VM)
    jax = kl.function([ls_var], outs, mode=kl.Mode(linker="jax"))
    for ls in (0.15, 0.8, 4.0):
        for got, want in zip(jax(ls), vm(ls), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13)


def test_a_periodic_models_logp_and_gradient_agree_on_every_backend() -> None:
    """Up to rounding: orders past about 8 have coefficients of rounding size (1e-17).

    Their square roots, near the floor's 1e-9, differ between backends by about 1e-9,
    and so ``f`` and the log density (a sum over 40 points) a little more than usual.
    """
    x = np.linspace(0, 6, 40)[:, None]
    with kl.Model() as model:
        ls = kl.Gamma("ls", 4.0, 4.0)
        scale = kl.HalfNormal("scale", 1.0)
        gp = kl.gp.HSGPPeriodic(12, scale, cov_func=cov.Periodic(1, period=2.0, ls=ls))
        f = gp.prior("f", X=x)
        kl.Normal("y", f, 0.3, observed=np.sin(np.pi * x[:, 0]))
    point = model.initial_point()
    point = {k: v + 0.1 * np.arange(np.size(v)).reshape(np.shape(v)) for k, v in point.items()}
    logp_vm = model.compile_logp(mode=VM)(point)
    dlogp_vm = model.compile_dlogp(mode=VM)(point)
    for backend in [b for b in ("numba", "jax", "c") if b in available_linkers()]:
        mode = kl.Mode(linker=backend)
        np.testing.assert_allclose(model.compile_logp(mode=mode)(point), logp_vm, rtol=1e-9)
        np.testing.assert_allclose(model.compile_dlogp(mode=mode)(point), dlogp_vm, rtol=1e-7)


# --- sampling -----------------------------------------------------------------------


def test_a_periodic_hsgp_samples_and_extrapolates_by_periods() -> None:
    """Y = sin(2 pi x / period) + noise: the fitted f, and f one period later is the same."""
    rng = np.random.default_rng(11)
    period = 2.5
    x = np.sort(rng.uniform(0, 7.5, 200))
    truth = np.sin(2 * np.pi * x / period)
    y = truth + 0.3 * rng.normal(size=200)
    xnew = np.linspace(0, period, 7)
    with kl.Model() as model:
        ls = kl.Gamma("ls", 4.0, 4.0)
        scale = kl.HalfNormal("scale", 1.5)
        gp = kl.gp.HSGPPeriodic(m=12, scale=scale, cov_func=cov.Periodic(1, period, ls=ls))
        f = gp.prior("f", X=x[:, None])
        kl.Normal("y", f, 0.3, observed=y)
        gp.conditional("f_later", x[:, None] + period)
        gp.conditional("f_new", xnew[:, None])
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", ks.SamplingWarning)
        idata = kl.sample(
            draws=300, tune=300, chains=2, random_seed=4, progressbar=False, backend="numba"
        )
    post = idata["posterior"]
    assert post["f_hsgp_coeffs"].shape == (2, 300, 23)
    assert int(idata["sample_stats"]["diverging"].sum()) == 0
    f_draws = post["f"].values
    # about 0.05 expected: noise 0.3 over 200 points, a few effective parameters
    assert np.sqrt(np.mean((f_draws.mean(axis=(0, 1)) - truth) ** 2)) < 0.08
    # exactly periodic: every draw of f one period later is that draw of f
    np.testing.assert_allclose(post["f_later"].values, f_draws, atol=1e-9)
    new = post["f_new"].values
    np.testing.assert_allclose(new.mean(axis=(0, 1)), np.sin(2 * np.pi * xnew / period), atol=0.15)
    # each draw of the conditional, from that draw's coefficients, ls and scale in NumPy
    beta = post["f_hsgp_coeffs"].values.reshape(-1, 23)
    ls_d, scale_d = post["ls"].values.ravel(), post["scale"].values.ravel()
    j = np.arange(12)
    c = np.where(j == 0, 1.0, 2.0)
    amp = scale_d[:, None] * np.sqrt(c * special.ive(j, 1 / (4 * ls_d[:, None] ** 2)))
    angle = 2 * np.pi * (xnew - (x.max() + x.min()) / 2)[:, None] / period * j
    want = (amp * beta[:, :12]) @ np.cos(angle).T + (amp[:, 1:] * beta[:, 12:]) @ np.sin(
        angle[:, 1:]
    ).T
    # up to the high orders' amplitudes, which are rounding noise near 1e-9 (seen: 5e-8)
    np.testing.assert_allclose(new.reshape(-1, 7), want, atol=1e-6)


# --- bad inputs ---------------------------------------------------------------------


def test_bad_arguments_are_named() -> None:
    k = cov.Periodic(1, period=1.0, ls=1.0)
    with pytest.raises(KilnTypeError, match=r"m: expected a positive int .* got float 10.0"):
        kl.gp.HSGPPeriodic(10.0, cov_func=k)  # type: ignore[arg-type]
    with pytest.raises(KilnTypeError, match="m: expected a positive int"):
        kl.gp.HSGPPeriodic([10], cov_func=k)  # type: ignore[arg-type]
    with pytest.raises(KilnValueError, match="m: expected a positive int .* got 0"):
        kl.gp.HSGPPeriodic(0, cov_func=k)
    with pytest.raises(KilnTypeError, match="cov_func: expected a kl.gp.cov.Periodic, got Prod"):
        kl.gp.HSGPPeriodic(10, cov_func=2.0 * k)  # type: ignore[arg-type]
    with pytest.raises(KilnTypeError, match="cov_func: expected a kl.gp.cov.Periodic, got ExpQuad"):
        kl.gp.HSGPPeriodic(10, cov_func=cov.ExpQuad(1, ls=1.0))  # type: ignore[arg-type]
    with pytest.raises(KilnTypeError, match="cov_func: expected a covariance"):
        kl.gp.HSGPPeriodic(10, cov_func=np.eye(2))  # type: ignore[arg-type]
    with pytest.raises(KilnValueError, match=r"cov_func: .*one active input dimension, got 2"):
        kl.gp.HSGPPeriodic(10, cov_func=cov.Periodic(2, period=1.0, ls=[1.0, 1.0]))
    with pytest.raises(KilnValueError, match="cov_func: expected one length scale"):
        kl.gp.HSGPPeriodic(
            10, cov_func=cov.Periodic(2, period=1.0, ls=[1.0, 1.0], active_dims=[1])
        ).prior_linearized(np.ones((3, 2)))
    with kl.Model(), pytest.raises(KilnValueError, match=r"f_new: call prior\(...\) before"):
        kl.gp.HSGPPeriodic(10, cov_func=k).conditional("f_new", np.ones((3, 1)))
    with pytest.raises(KilnValueError, match="fewer than input_dim"):
        kl.gp.HSGPPeriodic(10, cov_func=cov.Periodic(2, 1.0, ls=1.0, active_dims=[1])).prior(
            "f", np.ones((3, 1))
        )
    with pytest.raises(KilnValueError, match="J: expected non-negative orders"):
        k.power_spectral_density_approx([-1, 2])
    with pytest.raises(KilnTypeError, match="J: expected a non-empty vector of ints"):
        k.power_spectral_density_approx([0.5])


def test_one_active_column_of_several_is_read() -> None:
    x = np.column_stack([np.linspace(0, 3, 20), np.linspace(-2, 9, 20)])
    k = cov.Periodic(2, period=1.7, ls=[0.6], active_dims=[1])
    got = _cov_of(kl.gp.HSGPPeriodic(30, cov_func=k), x)
    np.testing.assert_allclose(got, _periodic(x[:, 1], 1.7, 0.6), atol=1e-12)


def test_dims_name_f_and_the_coefficients() -> None:
    x = np.linspace(0, 4, 10)[:, None]
    coords = {"obs": np.arange(10), "basis": np.arange(9)}
    with kl.Model(coords=coords) as model:
        gp = kl.gp.HSGPPeriodic(5, cov_func=cov.Periodic(1, period=2.0, ls=0.8))
        gp.prior("f", X=x, dims="obs", hsgp_coeffs_dims="basis")
    assert model.named_dims["f"] == ("obs",)
    assert model.named_dims["f_hsgp_coeffs"] == ("basis",)
    assert kl.draw(model["f_hsgp_coeffs"]).shape == (9,)


def _cov_of(gp: kl.gp.HSGPPeriodic, x: np.ndarray) -> np.ndarray:
    (phi_cos, phi_sin), psd = gp.prior_linearized(x)
    c, s, p = kl.draw([phi_cos, phi_sin, psd])
    return c @ np.diag(p**2) @ c.T + s @ np.diag(p**2) @ s.T  # type: ignore[no-any-return]


# --- HSGP's drop_first and parametrization ------------------------------------------


def test_hsgp_drop_first_leaves_out_the_first_basis_function() -> None:
    x = np.linspace(-2, 3, 25)[:, None]
    k = 1.5 * cov.Matern52(1, ls=0.7)
    full = kl.draw(list(kl.gp.HSGP(m=[15], c=1.8, cov_func=k).prior_linearized(x)))
    dropped = kl.draw(
        list(kl.gp.HSGP(m=[15], c=1.8, drop_first=True, cov_func=k).prior_linearized(x))
    )
    assert full[0].shape == (25, 15) and dropped[0].shape == (25, 14)
    assert full[1].shape == (15,) and dropped[1].shape == (14,)
    np.testing.assert_array_equal(dropped[0], full[0][:, 1:])
    np.testing.assert_array_equal(dropped[1], full[1][1:])
    with kl.Model() as model:
        gp = kl.gp.HSGP(m=[15], c=1.8, drop_first=True, cov_func=k)
        f = gp.prior("f", X=x)
        f_new = gp.conditional("f_new", x)
    assert model["f_hsgp_coeffs"].type.shape == (14,)
    f_draw, new_draw = kl.draw([f, f_new], random_seed=1)
    np.testing.assert_allclose(new_draw, f_draw, rtol=1e-12, atol=1e-12)


def _exact_hsgp_posterior_mean(phi: np.ndarray, sqrt_psd: np.ndarray, y: np.ndarray, sigma: float):
    """Return the posterior mean of ``phi @ beta``, ``beta ~ N(0, diag(psd))``, given y."""
    prior = np.diag(sqrt_psd**2)
    precision = np.linalg.inv(prior) + phi.T @ phi / sigma**2
    return phi @ np.linalg.solve(precision, phi.T @ y / sigma**2)


def test_hsgp_centered_and_noncentered_give_the_same_posterior() -> None:
    """Fixed hyperparameters: both against the Gaussian posterior in closed form."""
    rng = np.random.default_rng(6)
    x = np.sort(rng.uniform(0, 5, 30))[:, None]
    y = np.sin(1.5 * x[:, 0]) + 0.3 * rng.normal(size=30)
    k = 1.2**2 * cov.ExpQuad(1, ls=0.9)
    phi, sqrt_psd = kl.draw(list(kl.gp.HSGP(m=[12], c=1.5, cov_func=k).prior_linearized(x)))
    want = _exact_hsgp_posterior_mean(phi, sqrt_psd, y, 0.3)
    means, sds = {}, {}
    for parametrization in ("noncentered", "centered"):
        with kl.Model() as model:
            gp = kl.gp.HSGP(m=[12], c=1.5, parametrization=parametrization, cov_func=k)
            f = gp.prior("f", X=x)
            kl.Normal("y", f, 0.3, observed=y)
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore", ks.SamplingWarning)
            idata = kl.sample(
                draws=500, tune=300, chains=2, random_seed=9, progressbar=False, backend="numba"
            )
        draws = idata["posterior"]["f"].values.reshape(-1, 30)
        means[parametrization], sds[parametrization] = draws.mean(0), draws.std(0)
        # 5 Monte Carlo standard errors at an effective size of 300 draws
        assert np.all(
            np.abs(means[parametrization] - want) < 5 * sds[parametrization] / np.sqrt(300)
        )
    np.testing.assert_allclose(means["centered"], means["noncentered"], atol=0.05)
    np.testing.assert_allclose(sds["centered"], sds["noncentered"], rtol=0.2)
