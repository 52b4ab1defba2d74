"""New continuous distributions and HyperGeometric against SciPy (or NumPy references).

LogitNormal, Triangular, AsymmetricLaplace, Wald, SkewStudentT, Rice, VonMises and
Interpolated: logp and logcdf on vm and numba, KS tests of 20,000 draws, finite-difference
gradients of logp; the Bessel ops' gradients and values.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy import integrate, special, stats

import kiln
import kiln_compile
import kiln_model as km
import kiln_random as kr
from kiln_graph import KilnValueError, grad
from kiln_graph import tensor as kt

BACKENDS = [b for b in ("vm", "numba") if b in kiln_compile.available_linkers()]
N = 20_000


def _logitnorm_logpdf(x, mu, sigma):
    with np.errstate(all="ignore"):
        lx = np.log(x) - np.log1p(-x)
        out = stats.norm(mu, sigma).logpdf(lx) - np.log(x) - np.log1p(-x)
    return np.where((x > 0) & (x < 1), out, -np.inf)


def _logitnorm_logcdf(x, mu, sigma):
    with np.errstate(all="ignore"):
        inside = stats.norm(mu, sigma).logcdf(np.log(x) - np.log1p(-x))
    return np.where(x <= 0, -np.inf, np.where(x >= 1, 0.0, inside))


class _Ref:
    """A reference built from NumPy functions (logpdf, logcdf, cdf)."""

    def __init__(self, logpdf, logcdf=None):
        self.logpdf, self.logcdf = logpdf, logcdf

    def cdf(self, x):
        return np.exp(self.logcdf(x))


XP = np.array([0.0, 1.0, 2.5, 3.0, 4.0])
FP = np.array([0.0, 2.0, 1.0, 1.0, 0.5])
_Z = np.trapezoid(FP, XP)


def _interp_logpdf(x):
    with np.errstate(divide="ignore"):
        out = np.log(np.interp(x, XP, FP)) - np.log(_Z)
    return np.where((x >= XP[0]) & (x <= XP[-1]), out, -np.inf)


def _interp_logcdf(x):
    mass = [
        integrate.quad(lambda t: np.interp(t, XP, FP), XP[0], min(v, XP[-1]), points=XP)[0]
        if v > XP[0]
        else 0.0
        for v in np.atleast_1d(x)
    ]
    with np.errstate(divide="ignore"):
        return np.log(np.array(mass) / _Z)


#: (id, class, parameters, reference, values, has logcdf)
CASES = [
    (
        "logitnormal",
        km.LogitNormal,
        (0.3, 0.8),
        _Ref(lambda x: _logitnorm_logpdf(x, 0.3, 0.8), lambda x: _logitnorm_logcdf(x, 0.3, 0.8)),
        [-0.1, 1e-6, 0.2, 0.6, 0.999, 1.2],
        True,
    ),
    (
        "triangular",
        km.Triangular,
        (-1.0, 0.5, 2.0),
        stats.triang(0.5, loc=-1.0, scale=3.0),
        [-1.5, -0.9, 0.2, 0.5, 1.7, 2.5],
        True,
    ),
    (
        "triangular_mode_at_lower",
        km.Triangular,
        (0.0, 0.0, 2.0),
        stats.triang(0.0, loc=0.0, scale=2.0),
        [-0.5, 0.0, 0.3, 1.9, 2.0, 3.0],
        True,
    ),
    (
        "asymmetric_laplace",
        km.AsymmetricLaplace,
        (1.5, 0.6, 0.4),
        stats.laplace_asymmetric(0.6, loc=0.4, scale=1 / 1.5),
        [-30.0, -1.0, 0.3, 0.4, 2.0, 30.0],
        True,
    ),
    (
        "wald",
        km.Wald,
        (1.5, 2.0, None, 0.0),
        stats.invgauss(1.5 / 2.0, scale=2.0),
        [-1.0, 0.0, 1e-3, 0.4, 1.5, 6.0, 40.0],
        True,
    ),
    (
        "wald_shifted",
        km.Wald,
        (0.7, 5.0, None, -1.0),
        stats.invgauss(0.7 / 5.0, loc=-1.0, scale=5.0),
        [-1.5, -0.8, 0.0, 2.0],
        True,
    ),
    (
        "skew_student_t",
        km.SkewStudentT,
        (2.0, 5.0, 0.5, 1.5),
        stats.jf_skew_t(2.0, 5.0, loc=0.5, scale=1.5),
        [-1e4, -20.0, -2.0, 0.5, 3.0, 50.0, 1e3],
        True,
    ),
    (
        "rice",
        km.Rice,
        (2.0, 0.8),
        stats.rice(2.0 / 0.8, scale=0.8),
        [-1.0, 0.0, 1e-3, 1.0, 2.0, 4.0, 9.0],
        False,
    ),
    (
        "rice_far",
        km.Rice,
        (300.0, 1.0),
        stats.rice(300.0, scale=1.0),
        [295.0, 300.0, 304.0],
        False,
    ),
    (
        "vonmises",
        km.VonMises,
        (0.5, 2.0),
        stats.vonmises(2.0, loc=0.5),
        [-4.0, -np.pi, -1.0, 0.5, 3.0, np.pi, 3.5],
        False,
    ),
    (
        "vonmises_large_kappa",
        km.VonMises,
        (-0.2, 800.0),
        stats.vonmises(800.0, loc=-0.2),
        [-0.3, -0.2, -0.1],
        False,
    ),
    (
        "interpolated",
        km.Interpolated,
        (XP, FP),
        _Ref(_interp_logpdf, _interp_logcdf),
        [-1.0, 0.0, 0.5, 1.0, 2.7, 3.5, 4.0, 5.0],
        True,
    ),
]

IDS = [c[0] for c in CASES]


def _dist(cls, params, **kwargs):
    if cls is km.Wald:
        mu, lam, _, alpha = params
        return cls.dist(mu, lam, alpha=alpha, **kwargs)
    return cls.dist(*params, **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_logp_and_logcdf_against_reference(case, backend):
    _, cls, params, ref, values, has_logcdf = case
    x = np.array(values)
    rv = _dist(cls, params)
    outs = [km.logp(rv, x)] + ([km.logcdf(rv, x)] if has_logcdf else [])
    got = kiln.function([], outs, mode=kiln.Mode(linker=backend))()
    expected = ref.logpdf(x)
    if cls is km.VonMises:  # SciPy's density is periodic; kiln's lives on [-pi, pi]
        expected = np.where(np.abs(x) <= np.pi, expected, -np.inf)
    np.testing.assert_allclose(got[0], expected, rtol=1e-9, atol=1e-12)
    if has_logcdf:
        np.testing.assert_allclose(got[1], ref.logcdf(x), rtol=1e-8, atol=1e-12)


def _ks_reference(case_id, cls, params, ref):
    if cls is km.Interpolated:
        return lambda v: np.exp(_interp_logcdf(v))
    return ref.cdf


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_draws_ks(case):
    case_id, cls, params, ref, _, _ = case
    rv = _dist(cls, params, size=N, rng=kr.rng(11))
    draws = kiln.function([], rv, mode=kiln.Mode(linker=BACKENDS[-1]))()
    assert draws.shape == (N,)
    if cls is km.VonMises:  # SciPy's CDF starts at loc - pi: compare the centred angle
        mu, kappa = params
        assert np.all(np.abs(draws) <= np.pi)
        draws, cdf = np.mod(draws - mu + np.pi, 2 * np.pi) - np.pi, stats.vonmises(kappa).cdf
    else:
        cdf = _ks_reference(case_id, cls, params, ref)
    assert stats.kstest(draws, cdf).pvalue > 1e-3


Q = np.array([-0.1, 0.0, 1e-9, 0.1, 0.5, 0.9, 1 - 1e-9, 1.0, 1.1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_icdf_against_reference(backend):
    inside = (Q >= 0) & (Q <= 1)
    tri, ald = km.Triangular.dist(-1.0, 0.5, 2.0), km.AsymmetricLaplace.dist(1.5, 0.6, 0.4)
    ln, it = km.LogitNormal.dist(0.3, 0.8), km.Interpolated.dist(XP, FP)
    f = kiln.function(
        [], [km.icdf(rv, Q) for rv in (tri, ald, ln, it)], mode=kiln.Mode(linker=backend)
    )
    got = f()
    np.testing.assert_allclose(got[0], stats.triang(0.5, loc=-1.0, scale=3.0).ppf(Q), rtol=1e-12)
    ref = stats.laplace_asymmetric(0.6, loc=0.4, scale=1 / 1.5).ppf(Q)
    np.testing.assert_allclose(got[1], ref, rtol=1e-10)
    # erfinv(2q - 1) keeps ~8 digits at q = 1e-9 (as Normal's icdf): 2q - 1 rounds.
    np.testing.assert_allclose(got[2], special.expit(stats.norm(0.3, 0.8).ppf(Q)), rtol=1e-8)
    assert np.all(np.isnan(got[3][~inside]))
    cdf = np.exp(_interp_logcdf(got[3][inside]))
    np.testing.assert_allclose(cdf, Q[inside], rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize(("mu", "lam"), [(1.0, 1e-3), (1.0, 1e8), (1e-4, 1.0)])
def test_wald_draws_at_extreme_shapes(mu, lam):
    """The Michael-Schucany-Haas root keeps its digits when lam / mu is tiny or huge."""
    draws = kiln.function([], km.Wald.dist(mu, lam, size=N, rng=kr.rng(5)))()
    assert np.all(np.isfinite(draws)) and np.all(draws > 0)
    assert stats.kstest(draws, stats.invgauss(mu / lam, scale=lam).cdf).pvalue > 1e-3


def _fd_check(make_logp, point, eps=1e-6, rtol=1e-5):
    """Compare kiln's gradient of ``make_logp(*scalars)`` with central differences."""
    xs = [kt.scalar(f"p{i}", dtype="float64") for i in range(len(point))]
    lp = make_logp(*xs)
    f = kiln.function(xs, [lp, *grad(lp, xs)], mode=kiln.Mode(linker="vm"))
    got = np.array(f(*point)[1:])
    fd = []
    for i in range(len(point)):
        up, dn = list(point), list(point)
        up[i] += eps
        dn[i] -= eps
        fd.append((f(*up)[0] - f(*dn)[0]) / (2 * eps))
    np.testing.assert_allclose(got, fd, rtol=rtol, atol=1e-7)


GRADIENT_CASES = [
    ("logitnormal", lambda v, mu, s: km.logp(km.LogitNormal.dist(mu, s), v), (0.3, 0.2, 0.9)),
    (
        "triangular_left",
        lambda v, lo, c, hi: km.logp(km.Triangular.dist(lo, c, hi), v),
        (0.1, -1.0, 0.5, 2.0),
    ),
    (
        "triangular_right",
        lambda v, lo, c, hi: km.logp(km.Triangular.dist(lo, c, hi), v),
        (1.2, -1.0, 0.5, 2.0),
    ),
    (
        "asymmetric_laplace",
        lambda v, b, k, mu: km.logp(km.AsymmetricLaplace.dist(b, k, mu), v),
        (-0.7, 1.5, 0.6, 0.4),
    ),
    ("wald", lambda v, mu, lam: km.logp(km.Wald.dist(mu, lam), v), (0.8, 1.5, 2.0)),
    (
        "skew_student_t",
        lambda v, a, b, mu, s: km.logp(km.SkewStudentT.dist(a, b, mu, s), v),
        (-1.0, 2.0, 5.0, 0.5, 1.5),
    ),
    ("rice", lambda v, nu, s: km.logp(km.Rice.dist(nu, s), v), (1.7, 2.0, 0.8)),
    ("rice_nu_zero_edge", lambda v, nu, s: km.logp(km.Rice.dist(nu, s), v), (0.9, 1e-3, 1.0)),
    ("vonmises", lambda v, mu, k: km.logp(km.VonMises.dist(mu, k), v), (1.0, 0.5, 2.0)),
    (
        "vonmises_large_kappa",
        lambda v, mu, k: km.logp(km.VonMises.dist(mu, k), v),
        (0.1, 0.0, 60.0),
    ),
    ("interpolated", lambda v: km.logp(km.Interpolated.dist(XP, FP), v), (0.5,)),
    ("interpolated_logcdf", lambda v: km.logcdf(km.Interpolated.dist(XP, FP), v), (2.7,)),
    (
        "asymmetric_laplace_logcdf",
        lambda v, b, k, mu: km.logcdf(km.AsymmetricLaplace.dist(b, k, mu), v),
        (2.0, 1.5, 0.6, 0.4),
    ),
    ("wald_logcdf", lambda v, mu, lam: km.logcdf(km.Wald.dist(mu, lam), v), (0.8, 1.5, 2.0)),
    (
        "skew_student_t_logcdf",
        lambda v, a, b, mu, s: km.logcdf(km.SkewStudentT.dist(a, b, mu, s), v),
        (1.0, 2.0, 5.0, 0.5, 1.5),
    ),
    # Near the edges of the support and of the parameters:
    ("wald_near_0", lambda v, mu, lam: km.logp(km.Wald.dist(mu, lam), v), (0.02, 1.5, 2.0)),
    ("rice_near_0", lambda v, nu, s: km.logp(km.Rice.dist(nu, s), v), (1e-3, 2.0, 0.8)),
    ("rice_far_tail", lambda v, nu, s: km.logp(km.Rice.dist(nu, s), v), (30.0, 2.0, 0.8)),
    (
        "logitnormal_near_1",
        lambda v, mu, s: km.logp(km.LogitNormal.dist(mu, s), v),
        (0.999, 0.2, 0.9),
    ),
    ("vonmises_near_pi", lambda v, mu, k: km.logp(km.VonMises.dist(mu, k), v), (3.1, -0.5, 0.3)),
    (
        "triangular_near_lower",
        lambda v, lo, c, hi: km.logp(km.Triangular.dist(lo, c, hi), v),
        (-0.999, -1.0, 0.5, 2.0),
    ),
    (
        "skew_student_t_far_left",
        lambda v, a, b, mu, s: km.logp(km.SkewStudentT.dist(a, b, mu, s), v),
        (-300.0, 2.0, 5.0, 0.5, 1.5),
    ),
    (
        "interpolated_near_upper",
        lambda v: km.logcdf(km.Interpolated.dist(XP, FP), v),
        (3.999,),
    ),
]


@pytest.mark.parametrize(
    ("make", "point"), [c[1:] for c in GRADIENT_CASES], ids=[c[0] for c in GRADIENT_CASES]
)
def test_gradients_against_finite_differences(make, point):
    _fd_check(make, point)


@pytest.mark.parametrize("fn", [kt.i0e, kt.i1e, kt.i0, kt.i1], ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [-9.0, -3.0, -1e-3, 0.5, 4.0, 12.0])
def test_bessel_gradients(fn, x):
    _fd_check(lambda v: fn(v), (x,), eps=1e-6, rtol=1e-6)


def test_bessel_values_on_numba_match_scipy():
    x = kt.vector("x", dtype="float64")
    v = np.concatenate([np.linspace(-40.0, 40.0, 161), [0.0, 8.0, -8.0, 700.0, np.inf, np.nan]])
    outs = kiln.function(
        [x], [kt.i0e(x), kt.i1e(x), kt.i0(x), kt.i1(x)], mode=kiln.Mode(linker=BACKENDS[-1])
    )(v)
    with np.errstate(all="ignore"):
        for got, ref in zip(outs, [special.i0e, special.i1e, special.i0, special.i1], strict=True):
            np.testing.assert_allclose(got, ref(v), rtol=1e-14, equal_nan=True)


def _mp_skew_t_logpdf(x, a, b, mu, sigma):
    t = mpmath.mpf(x - mu) / sigma
    r = mpmath.sqrt(a + b + t * t)
    c = 2 ** (a + b - 1) * mpmath.beta(a, b) * mpmath.sqrt(a + b) * sigma
    return float(mpmath.log((1 + t / r) ** (a + 0.5) * (1 - t / r) ** (b + 0.5) / c))


def _mp_rice_logpdf(x, nu, sigma):
    x, s2 = mpmath.mpf(x), mpmath.mpf(sigma) ** 2
    return float(
        mpmath.log(
            x / s2 * mpmath.exp(-(x * x + nu * nu) / (2 * s2)) * mpmath.besseli(0, x * nu / s2)
        )
    )


def test_far_tails_against_high_precision():
    """Where SciPy's formulas cancel or underflow, kiln keeps its digits (mpmath reference)."""
    mpmath.mp.dps = 50
    x = np.array([-1e6, -1e4, 1e4, 1e7])
    got = kiln.function([], km.logp(km.SkewStudentT.dist(2.0, 5.0, 0.5, 1.5), x))()
    np.testing.assert_allclose(got, [_mp_skew_t_logpdf(v, 2, 5, 0.5, 1.5) for v in x], rtol=1e-12)
    x = np.array([40.0, 100.0, 1e3])
    got = kiln.function([], km.logp(km.Rice.dist(2.0, 0.8), x))()
    np.testing.assert_allclose(got, [_mp_rice_logpdf(v, 2, 0.8) for v in x], rtol=1e-12)


def test_hypergeometric_logp_and_draws():
    k_values = np.arange(-1, 10)
    rv = km.HyperGeometric.dist(20, 7, 12)
    for backend in BACKENDS:
        got = kiln.function([], km.logp(rv, k_values), mode=kiln.Mode(linker=backend))()
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(got, stats.hypergeom(20, 7, 12).logpmf(k_values), rtol=1e-10)
    draws = kiln.function([], km.HyperGeometric.dist(20, 7, 12, size=N, rng=kr.rng(3)))()
    freq = np.bincount(draws, minlength=8)[:8] / N
    pmf = stats.hypergeom(20, 7, 12).pmf(np.arange(8))
    assert np.all(np.abs(freq - pmf) <= 5 * np.sqrt(pmf * (1 - pmf) / N) + 1e-12)


def test_alternative_parametrizations():
    x = np.array([0.3, 1.2, 3.0])
    wald = stats.invgauss(1.5 / 3.0, scale=3.0).logpdf(x)
    for rv in (
        km.Wald.dist(mu=1.5, phi=2.0),
        km.Wald.dist(lam=3.0, phi=2.0),
        km.Wald.dist(1.5, 3.0),
    ):
        np.testing.assert_allclose(kiln.function([], km.logp(rv, x))(), wald, rtol=1e-12)
    rice = stats.rice(2.5, scale=0.8).logpdf(x)
    got = kiln.function([], km.logp(km.Rice.dist(b=2.5, sigma=0.8), x))()
    np.testing.assert_allclose(got, rice, rtol=1e-12)
    ln = kiln.function([], km.logp(km.LogitNormal.dist(0.3, tau=4.0), [0.2, 0.7]))()
    np.testing.assert_allclose(ln, _logitnorm_logpdf(np.array([0.2, 0.7]), 0.3, 0.5), rtol=1e-12)
    with pytest.raises(KilnValueError, match=r"Wald: can't pass both \(mu, phi\) and lam"):
        km.Wald.dist(1.0, 2.0, 3.0)
    with pytest.raises(KilnValueError, match=r"Rice: can't pass both \(b, sigma\) and nu"):
        km.Rice.dist(1.0, 1.0, 2.0)
    with pytest.raises(KilnValueError, match="Rice: incompatible parametrization: b given"):
        km.Rice.dist(b=1.0)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda: km.Triangular.dist(0.0, 3.0, 2.0), "Triangular: c must be in"),
        (lambda: km.Triangular.dist(2.0, 2.0, 2.0), "Triangular: lower must be < upper"),
        (lambda: km.AsymmetricLaplace.dist(-1.0, 1.0), "AsymmetricLaplace: b must be > 0"),
        (lambda: km.Wald.dist(-1.0, 1.0), "Wald: mu must be > 0"),
        (lambda: km.SkewStudentT.dist(1.0, 0.0), "SkewStudentT: b must be > 0"),
        (lambda: km.Rice.dist(1.0, -1.0), "Rice: sigma must be > 0"),
        (lambda: km.VonMises.dist(0.0, -1.0), "kappa must be > 0"),
        (lambda: km.LogitNormal.dist(0.0, -1.0), "LogitNormal: sigma must be > 0"),
        (lambda: km.Interpolated.dist([0.0, 2.0, 1.0], [1.0, 1.0, 1.0]), "strictly increasing"),
        (lambda: km.Interpolated.dist([0.0, 1.0], [1.0, 1.0, 1.0]), "same length"),
        (lambda: km.Interpolated.dist([[0.0, 1.0]], [[1.0, 1.0]]), "must be a vector"),
        (lambda: km.HyperGeometric.dist(10, 11, 3), "k must be in"),
    ],
)
def test_bad_parameters_raise(make, pattern):
    with pytest.raises(KilnValueError, match=pattern):
        make()


def test_model_variables_sample_inside_their_support():
    """Free variables get their transforms; the compiled model's logp is finite at the start."""
    with km.Model() as m:
        km.Triangular("t", -1.0, 0.0, 2.0)
        km.Wald("w", 1.0, 2.0, alpha=0.5)
        km.VonMises("v", 1.0, 3.0)
        km.Interpolated("i", XP, FP)
        km.LogitNormal("l", 0.0, 1.0)
        km.Rice("r", 1.0, 1.0)
        km.SkewStudentT("s", 2.0, 3.0)
        km.AsymmetricLaplace("a", 1.0, 2.0)
    names = {v.name for v in m.value_vars}
    assert {"t_interval__", "w_interval__", "v_circular__", "i_interval__"} <= names
    assert {"l_logodds__", "r_log__", "s", "a"} <= names
    point = m.initial_point()
    mean = 1.0 / 3.0  # the support point of Triangular(-1, 0, 2), through log-odds
    np.testing.assert_allclose(point["t_interval__"], np.log((mean + 1.0) / (2.0 - mean)))
    lp = m.compile_logp()(point)
    assert np.isfinite(lp)
    dlp = m.compile_dlogp()(point)
    assert np.all(np.isfinite(np.concatenate([np.ravel(g) for g in np.atleast_1d(dlp)])))
