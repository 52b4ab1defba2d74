"""Every distribution's logp and logcdf against SciPy, on every installed backend.

One table: each case is a distribution, a grid of parameter rows and of values (their
product is evaluated), and its SciPy reference. The values include the edges of the
support: -inf outside it, finite at a boundary where SciPy is finite (Exponential at 0,
Beta(1, 1) at 0, Poisson at 0 with mu = 0). Parameters and values are function inputs
(not constants), so the rewrites cannot fold them away.

All the cases are compiled into ONE function per backend (one LLVM compile for Numba);
each test then checks one case. The tolerance is rtol 1e-10 in float64 unless a case
says why it is looser.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

import kiln
import kiln_model as km
from kiln_compile import available_linkers
from kiln_graph import tensor as kt
from kiln_model import Distribution

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]
RTOL = 1e-10
INF = np.inf


@dataclasses.dataclass(frozen=True)
class Case:
    """``dist.dist(**dict(zip(names, row)))`` at each value, for each row of ``grid``.

    ``logp(value, *row)`` and ``logcdf(value, *row)`` are the references (scalars of
    one row and one value; vector rows and values for multivariate cases). ``logcdf``
    None: the class has no closed-form CDF.
    """

    id: str
    dist: type[Distribution]
    names: tuple[str, ...]
    grid: Sequence[tuple[Any, ...]]
    values: Sequence[Any]
    logp: Callable[..., float]
    logcdf: Callable[..., float] | None = None
    rtol: float = RTOL
    atol: float = 0.0
    #: Only these (row index, value index) pairs (default: the whole product).
    pairs: Sequence[tuple[int, int]] | None = None

    def points(self) -> list[tuple[tuple[Any, ...], Any]]:
        if self.pairs is not None:
            return [(self.grid[i], self.values[j]) for i, j in self.pairs]
        return list(itertools.product(self.grid, self.values))

    def columns(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Return the batched parameter columns and values (one row per point)."""
        pts = self.points()
        cols = [np.array([row[i] for row, _ in pts]) for i in range(len(self.names))]
        return cols, np.array([v for _, v in pts])

    def reference(self, kind: str) -> np.ndarray:
        ref = self.logp if kind == "logp" else self.logcdf
        assert ref is not None
        with np.errstate(all="ignore"):
            return np.array([ref(v, *row) for row, v in self.points()], dtype="float64")


def _expit(x: float) -> float:
    return float(special.expit(x))


def _via_sf(dist: Any) -> Callable[..., float]:
    """``dist.logcdf``, or ``log1p(-dist.sf)`` where the CDF is near 1.

    SciPy's discrete ``logcdf`` is ``log(cdf)``, which rounds to 0 in the upper tail
    (Geometric(0.3) at 1000: -1e-155) and loses digits near 1 (Bernoulli(1e-12) at 0).
    """

    def ref(x: Any, *params: Any) -> float:
        sf = float(dist.sf(x, *params))
        return float(np.log1p(-sf)) if sf < 0.5 else float(dist.logcdf(x, *params))

    return ref


def _frozen_logcdf(dist: Any, x: float) -> float:
    """``log CDF`` of a frozen SciPy distribution: ``log1p(-sf)`` where the CDF is near 1."""
    sf = float(dist.sf(x))
    return float(np.log1p(-sf)) if sf < 0.5 else float(dist.logcdf(x))


def _half_t_logcdf(x: float, nu: float, sigma: float) -> float:
    """Return log P(|T| <= x / sigma): SciPy's betainc(1/2, nu/2, z^2 / (nu + z^2)) or t.sf."""
    if x <= 0:
        return -INF
    z = x / sigma
    tail = 2.0 * float(stats.t.sf(z, nu))
    if tail < 0.5:
        return float(np.log1p(-tail))
    return float(np.log(special.betainc(0.5, nu / 2, z * z / (nu + z * z))))


def _tails(dist: Any) -> list[float]:
    """Return the points where the CDF of ``dist`` is 1e-20 and 1 - 1e-12."""
    return [float(dist.ppf(1e-20)), float(dist.isf(1e-12))]


def _half_t_logp(x: float, nu: float, sigma: float) -> float:
    """SciPy has no half Student t: log(2 t.pdf(x / sigma) / sigma) on x >= 0."""
    return np.log(2.0) + stats.t.logpdf(x, nu, scale=sigma) if x >= 0 else -INF


def _bernoulli_logit_logp(k: int, logit: float) -> float:
    """Return log sigmoid(+-logit), exact in both tails (SciPy would use p = expit(logit))."""
    if k not in (0, 1):
        return -INF
    return -float(np.logaddexp(0.0, -logit if k == 1 else logit))


def _binomial_logit_logp(k: int, n: int, logit: float) -> float:
    """Return the binomial log-pmf, log p and log(1 - p) from the logit (exact in the tails)."""
    if k < 0 or k > n:
        return -INF
    log_p, log_q = -np.logaddexp(0.0, -logit), -np.logaddexp(0.0, logit)
    log_choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return float(log_choose + k * log_p + (n - k) * log_q)


def _mvn_logp(x: np.ndarray, mu: np.ndarray, cov: np.ndarray) -> float:
    return float(stats.multivariate_normal.logpdf(x, mu, cov))


def _mvn_chol_logp(x: np.ndarray, mu: np.ndarray, chol: np.ndarray) -> float:
    return _mvn_logp(x, mu, chol @ chol.T)


def _dirichlet_logp(x: np.ndarray, a: np.ndarray) -> float:
    if np.any(x < 0) or abs(x.sum() - 1.0) > 1e-12:
        return -INF
    return float(stats.dirichlet.logpdf(x, a))


def _categorical_logp(k: int, p: np.ndarray) -> float:
    if k < 0 or k >= len(p):
        return -INF
    return float(np.log(p[k] / p.sum()))


def _multinomial_logp(x: np.ndarray, n: int, p: np.ndarray) -> float:
    if np.any(x < 0) or x.sum() != n:
        return -INF
    return float(stats.multinomial.logpmf(x, n, p))


def _invalid(
    id: str, dist: type[Distribution], names: tuple[str, ...], grid: Any, values: Any
) -> Case:
    """Parameters outside their domain: the log-density is -inf (SciPy would give NaN)."""
    return Case(id, dist, names, grid, values, lambda *_: -INF)


_L = np.array([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 2.0]])
_COV = _L @ _L.T
_P3 = np.array([0.2, 0.5, 0.3])

CASES = [
    Case(
        "normal",
        km.Normal,
        ("mu", "sigma"),
        [(0.0, 1.0), (1.5, 2.0), (-3.0, 0.1), (2.0, 30.0)],
        [-50.0, -5.0, -1.0, 0.0, 0.5, 3.0, 8.0, 50.0],
        lambda x, mu, s: stats.norm.logpdf(x, mu, s),
        lambda x, mu, s: stats.norm.logcdf(x, mu, s),
    ),
    Case(
        "halfnormal",
        km.HalfNormal,
        ("sigma",),
        [(0.5,), (1.0,), (3.0,)],
        [-1.0, 0.0, 1e-6, 0.3, 1.0, 5.0, 12.0],
        lambda x, s: stats.halfnorm.logpdf(x, scale=s),
        lambda x, s: stats.halfnorm.logcdf(x, scale=s),
    ),
    Case(
        "lognormal",
        km.LogNormal,
        ("mu", "sigma"),
        [(0.0, 1.0), (0.3, 0.5), (-2.0, 2.0)],
        [-1.0, 0.0, 1e-8, 0.2, 1.0, 3.0, 100.0],
        lambda x, mu, s: stats.lognorm.logpdf(x, s, scale=np.exp(mu)),
        lambda x, mu, s: stats.lognorm.logcdf(x, s, scale=np.exp(mu)),
    ),
    Case(
        "uniform",
        km.Uniform,
        ("lower", "upper"),
        [(0.0, 1.0), (-1.0, 3.0), (2.0, 2.5)],
        [-2.0, -1.0, 0.0, 0.2, 1.0, 2.0, 2.25, 2.5, 3.0, 4.0],
        lambda x, lo, hi: stats.uniform.logpdf(x, lo, hi - lo),
        lambda x, lo, hi: stats.uniform.logcdf(x, lo, hi - lo),
    ),
    Case(
        "flat",
        km.Flat,
        (),
        [()],
        [-1e10, -1.0, 0.0, 3.0, 1e300],
        lambda x: 0.0,
    ),
    Case(
        "halfflat",
        km.HalfFlat,
        (),
        [()],
        # The support is (0, inf): 0 itself has no density (as the "positive" support).
        [-1.0, 0.0, 1e-300, 3.0, 1e300],
        lambda x: 0.0 if x > 0 else -INF,
    ),
    Case(
        "exponential",
        km.Exponential,
        ("lam",),
        [(0.5,), (1.0,), (4.0,)],
        [-1.0, 0.0, 1e-10, 0.3, 2.0, 50.0],
        lambda x, lam: stats.expon.logpdf(x, scale=1.0 / lam),
        lambda x, lam: stats.expon.logcdf(x, scale=1.0 / lam),
    ),
    Case(
        "gamma",
        km.Gamma,
        ("alpha", "beta"),
        [(0.5, 1.0), (1.0, 2.0), (2.5, 1.5), (30.0, 0.2)],
        [-1.0, 0.0, 1e-8, 0.5, 2.0, 10.0, 200.0],
        lambda x, a, b: stats.gamma.logpdf(x, a, scale=1.0 / b),
        lambda x, a, b: _frozen_logcdf(stats.gamma(a, scale=1.0 / b), x),
    ),
    Case(
        "gamma_tails",
        km.Gamma,
        ("alpha", "beta"),
        [(2.5, 1.5), (300.0, 2.0)],
        _tails(stats.gamma(2.5, scale=1 / 1.5)) + _tails(stats.gamma(300.0, scale=0.5)),
        lambda x, a, b: stats.gamma.logpdf(x, a, scale=1.0 / b),
        lambda x, a, b: _frozen_logcdf(stats.gamma(a, scale=1.0 / b), x),
        pairs=[(0, 0), (0, 1), (1, 2), (1, 3)],
    ),
    Case(
        "beta",
        km.Beta,
        ("alpha", "beta"),
        [(1.0, 1.0), (0.5, 0.5), (2.0, 5.0), (1.0, 3.0), (4.0, 1.0), (30.0, 0.7)],
        [-0.1, 0.0, 1e-9, 0.3, 0.5, 0.99, 1.0, 1.2],
        lambda x, a, b: stats.beta.logpdf(x, a, b),
        lambda x, a, b: _frozen_logcdf(stats.beta(a, b), x),
    ),
    Case(
        "beta_tails",
        km.Beta,
        ("alpha", "beta"),
        [(2.0, 5.0), (0.5, 0.5), (300.0, 400.0)],
        _tails(stats.beta(2.0, 5.0)) + _tails(stats.beta(0.5, 0.5)) + _tails(stats.beta(300, 400)),
        lambda x, a, b: stats.beta.logpdf(x, a, b),
        lambda x, a, b: _frozen_logcdf(stats.beta(a, b), x),
        pairs=[(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5)],
    ),
    Case(
        "inverse_gamma",
        km.InverseGamma,
        ("alpha", "beta"),
        [(1.0, 1.0), (3.0, 0.5), (6.0, 2.0)],
        [-1.0, 0.0, 1e-3, 0.2, 1.0, 10.0, 1e5],
        lambda x, a, b: stats.invgamma.logpdf(x, a, scale=b),
        lambda x, a, b: _frozen_logcdf(stats.invgamma(a, scale=b), x),
    ),
    Case(
        "inverse_gamma_tails",
        km.InverseGamma,
        ("alpha", "beta"),
        [(3.0, 0.5)],
        _tails(stats.invgamma(3.0, scale=0.5)),
        lambda x, a, b: stats.invgamma.logpdf(x, a, scale=b),
        lambda x, a, b: _frozen_logcdf(stats.invgamma(a, scale=b), x),
    ),
    Case(
        "studentt",
        km.StudentT,
        ("nu", "mu", "sigma"),
        [(1.0, 0.0, 1.0), (3.0, 1.0, 2.0), (30.0, -1.0, 0.5), (1e6, 0.0, 1.0)],
        [-1e5, -3.0, 0.0, 0.7, 4.0, 1e3],
        lambda x, nu, mu, s: stats.t.logpdf(x, nu, mu, s),
        lambda x, nu, mu, s: _frozen_logcdf(stats.t(nu, mu, s), x),
        # nu = 1e6: gammaln(nu + 1/2) - gammaln(nu/2) cancels ~13 digits of 1e7 down to
        # -0.35: 1e-9 relative is what any float64 formula of gammaln differences keeps.
        rtol=1e-8,
    ),
    Case(
        "halfstudentt",
        km.HalfStudentT,
        ("nu", "sigma"),
        [(1.0, 1.0), (3.0, 2.0), (30.0, 0.5)],
        [-1.0, 0.0, 0.7, 4.0, 1e3],
        _half_t_logp,
        _half_t_logcdf,
    ),
    Case(
        "studentt_tails",
        km.StudentT,
        ("nu", "mu", "sigma"),
        [(3.0, 1.0, 2.0), (30.0, -1.0, 0.5)],
        _tails(stats.t(3.0, 1.0, 2.0)) + _tails(stats.t(30.0, -1.0, 0.5)),
        lambda x, nu, mu, s: stats.t.logpdf(x, nu, mu, s),
        lambda x, nu, mu, s: _frozen_logcdf(stats.t(nu, mu, s), x),
        pairs=[(0, 0), (0, 1), (1, 2), (1, 3)],
    ),
    Case(
        "cauchy",
        km.Cauchy,
        ("alpha", "beta"),
        [(0.0, 1.0), (1.0, 2.0), (-3.0, 0.1)],
        [-1e10, -10.0, -1.0, 0.0, 0.5, 3.0, 1e3, 1e10],
        lambda x, a, b: stats.cauchy.logpdf(x, a, b),
        lambda x, a, b: stats.cauchy.logcdf(x, a, b),
    ),
    Case(
        "halfcauchy",
        km.HalfCauchy,
        ("beta",),
        [(0.5,), (1.0,), (5.0,)],
        [-1.0, 0.0, 1e-10, 0.5, 3.0, 1e3, 1e10],
        lambda x, b: stats.halfcauchy.logpdf(x, scale=b),
        lambda x, b: stats.halfcauchy.logcdf(x, scale=b),
    ),
    Case(
        "laplace",
        km.Laplace,
        ("mu", "b"),
        [(0.0, 1.0), (1.0, 2.0), (-3.0, 0.1)],
        [-50.0, -3.0, -1.0, 0.0, 1e-3, 1.0, 3.0, 50.0],
        lambda x, mu, b: stats.laplace.logpdf(x, mu, b),
        lambda x, mu, b: stats.laplace.logcdf(x, mu, b),
    ),
    Case(
        "logistic",
        km.Logistic,
        ("mu", "s"),
        [(0.0, 1.0), (1.0, 2.0), (-3.0, 0.1)],
        [-800.0, -30.0, -1.0, 0.0, 0.5, 3.0, 40.0, 800.0],
        lambda x, mu, s: stats.logistic.logpdf(x, mu, s),
        lambda x, mu, s: stats.logistic.logcdf(x, mu, s),
    ),
    Case(
        "weibull",
        km.Weibull,
        ("alpha", "beta"),
        [(0.5, 1.0), (1.0, 2.0), (1.5, 2.0), (5.0, 0.5)],
        [-1.0, 0.0, 1e-8, 0.3, 1.0, 2.0, 10.0],
        lambda x, a, b: stats.weibull_min.logpdf(x, a, scale=b),
        lambda x, a, b: stats.weibull_min.logcdf(x, a, scale=b),
    ),
    Case(
        "truncated_normal",
        km.TruncatedNormal,
        ("mu", "sigma", "lower", "upper"),
        [
            (1.0, 2.0, -1.0, 4.0),
            (0.0, 1.0, 5.0, INF),  # the upper tail: Phi(-5) is all the mass
            (0.0, 1.0, -INF, -6.0),
            (0.0, 1.0, 2.0, 2.1),  # narrow
            (0.0, 1.0, -0.5, 0.5),
            (0.5, 3.0, -INF, INF),
            (-1.0, 0.5, 0.0, INF),
        ],
        [-INF, -10.0, -6.5, -6.0, -1.0, -0.2, 0.0, 2.0, 2.05, 2.1, 4.0, 5.0, 5.5, 9.0, INF],
        lambda x, mu, s, lo, hi: stats.truncnorm.logpdf(x, (lo - mu) / s, (hi - mu) / s, mu, s),
        lambda x, mu, s, lo, hi: stats.truncnorm.logcdf(x, (lo - mu) / s, (hi - mu) / s, mu, s),
        # The normalizing mass log(Phi(b) - Phi(a)) of the narrow case loses ~3 digits to
        # the difference of two close CDFs (SciPy computes it another way).
        rtol=1e-9,
    ),
    Case(
        "bernoulli",
        km.Bernoulli,
        ("p",),
        [(0.0,), (0.3,), (1.0,), (1e-12,)],
        [-1, 0, 1, 2],
        lambda k, p: stats.bernoulli.logpmf(k, p),
        _via_sf(stats.bernoulli),
    ),
    Case(
        "bernoulli_logit",
        km.Bernoulli,
        ("logit_p",),
        [(-40.0,), (-2.0,), (0.0,), (0.7,), (40.0,)],
        [-1, 0, 1, 2],
        _bernoulli_logit_logp,
        lambda k, logit: -INF if k < 0 else (-np.logaddexp(0.0, logit) if k < 1 else 0.0),
    ),
    Case(
        "binomial",
        km.Binomial,
        ("n", "p"),
        [(10, 0.3), (1, 0.5), (0, 0.4), (10, 0.0), (10, 1.0), (50, 1e-6)],
        [-1, 0, 1, 3, 10, 11],
        lambda k, n, p: stats.binom.logpmf(k, n, p),
        _via_sf(stats.binom),
    ),
    Case(
        "binomial_logit",
        km.Binomial,
        ("n", "logit_p"),
        [(10, -40.0), (10, -0.8), (5, 0.0), (10, 2.0), (10, 40.0)],
        [-1, 0, 1, 3, 10, 11],
        _binomial_logit_logp,
    ),
    Case(
        "poisson",
        km.Poisson,
        ("mu",),
        [(0.0,), (1e-8,), (4.5,), (1000.0,)],
        [-1, 0, 1, 5, 1000],
        lambda k, mu: stats.poisson.logpmf(k, mu),
        _via_sf(stats.poisson),
    ),
    Case(
        "poisson_tails",
        km.Poisson,
        ("mu",),
        [(4.5,), (1000.0,)],
        [0, 30, 700, 1230],  # CDFs 1e-2, 1 - 3e-16 (mu 4.5); 7e-24, 1 - 1e-12 (mu 1000)
        lambda k, mu: stats.poisson.logpmf(k, mu),
        _via_sf(stats.poisson),
    ),
    Case(
        "negative_binomial",
        km.NegativeBinomial,
        ("mu", "alpha"),
        [(1.0, 1.0), (4.5, 2.0), (0.5, 100.0), (30.0, 0.2)],
        [-1, 0, 1, 5, 50],
        lambda k, mu, a: stats.nbinom.logpmf(k, a, a / (mu + a)),
        lambda k, mu, a: _via_sf(stats.nbinom)(k, a, a / (mu + a)),
    ),
    Case(
        "negative_binomial_np",
        km.NegativeBinomial,
        ("n", "p"),
        [(1.0, 0.5), (3.0, 0.4), (0.5, 1.0), (20.0, 0.9)],
        [-1, 0, 1, 5, 50],
        lambda k, n, p: stats.nbinom.logpmf(k, n, p),
        _via_sf(stats.nbinom),
    ),
    Case(
        "geometric",
        km.Geometric,
        ("p",),
        [(1.0,), (0.3,), (1e-3,)],
        [-1, 0, 1, 2, 10, 1000],
        lambda k, p: stats.geom.logpmf(k, p),
        _via_sf(stats.geom),
    ),
    Case(
        "categorical",
        km.Categorical,
        ("p",),
        [
            (_P3,),
            (np.array([0.0, 1.0, 0.0]),),
            (np.array([2.0, 1.0, 1.0]),),
        ],  # the last unnormalized
        [-1, 0, 1, 2, 3],
        _categorical_logp,
    ),
    Case(
        "categorical_logit",
        km.Categorical,
        ("logit_p",),
        [(np.array([0.0, 1.0, -2.0]),), (np.array([30.0, -30.0, 0.0]),)],
        [-1, 0, 1, 2, 3],
        lambda k, logit: special.log_softmax(logit)[k] if 0 <= k < len(logit) else -INF,
    ),
    Case(
        "dirichlet",
        km.Dirichlet,
        ("a",),
        [(np.array([1.0, 1.0, 1.0]),), (np.array([1.0, 2.0, 3.0]),), (np.array([0.5, 4.0, 1.0]),)],
        [
            np.array([0.2, 0.3, 0.5]),
            np.array([0.0, 0.4, 0.6]),  # on the boundary: finite where alpha_0 = 1
            np.array([1e-8, 0.5, 0.5 - 1e-8]),
            np.array([0.5, 0.6, -0.1]),  # off the simplex
            np.array([0.5, 0.6, 0.1]),  # does not sum to 1
        ],
        _dirichlet_logp,
        # SciPy rejects a boundary value where its alpha is not 1: compare only those.
        pairs=[(i, j) for i in range(3) for j in range(5) if not (j == 1 and i > 0)],
    ),
    Case(
        "multinomial",
        km.Multinomial,
        ("n", "p"),
        [(10, _P3), (3, np.array([0.0, 1.0, 0.0])), (4, np.array([2.0, 1.0, 1.0]))],
        [
            np.array([2, 5, 3]),
            np.array([0, 3, 0]),
            np.array([4, 0, 0]),
            np.array([1, 2, 1]),
            np.array([-1, 6, 5]),
        ],
        # SciPy wants p normalized; the class normalizes it.
        lambda x, n, p: _multinomial_logp(x, n, p / p.sum()),
    ),
    Case(
        "mvnormal",
        km.MvNormal,
        ("mu", "cov"),
        [(np.zeros(3), np.eye(3)), (np.array([1.0, -1.0, 0.5]), _COV)],
        [np.zeros(3), np.array([0.3, -2.0, 1.0]), np.array([10.0, 5.0, -20.0])],
        _mvn_logp,
    ),
    Case(
        "mvnormal_chol",
        km.MvNormal,
        ("mu", "chol"),
        [(np.zeros(3), np.eye(3)), (np.array([1.0, -1.0, 0.5]), _L)],
        [np.zeros(3), np.array([0.3, -2.0, 1.0]), np.array([10.0, 5.0, -20.0])],
        _mvn_chol_logp,
    ),
    _invalid("normal_invalid", km.Normal, ("mu", "sigma"), [(0.0, 0.0), (0.0, -1.0)], [0.0, 1.0]),
    _invalid("beta_invalid", km.Beta, ("alpha", "beta"), [(0.0, 1.0), (1.0, -2.0)], [0.5]),
    _invalid("exponential_invalid", km.Exponential, ("lam",), [(-1.0,)], [0.0, 1.0]),
    _invalid("poisson_invalid", km.Poisson, ("mu",), [(-1.0,)], [0, 1]),
    _invalid("bernoulli_invalid", km.Bernoulli, ("p",), [(-0.1,), (1.5,)], [0, 1]),
    _invalid("binomial_invalid", km.Binomial, ("n", "p"), [(5, 1.5)], [0, 2]),
    _invalid(
        "dirichlet_invalid",
        km.Dirichlet,
        ("a",),
        [(np.array([1.0, 0.0, 2.0]),)],
        [np.array([0.2, 0.3, 0.5])],
    ),
]


# -- derived distributions (SymbolicDistribution): their own block ------------------------


def _log1mexp(d: float) -> float:
    """Return ``log(1 - exp(d))`` for ``d <= 0``, exact at both ends (Maechler's split)."""
    return float(np.log(-np.expm1(d)) if d > -np.log(2.0) else np.log1p(-np.exp(d)))


def _log_diff(a: float, b: float) -> float:
    """Return ``log(exp(a) - exp(b))`` for ``a >= b`` (-inf where they are equal)."""
    return -INF if a == b else a + _log1mexp(b - a)


def _exgaussian_logcdf(x: float, mu: float, sigma: float, nu: float) -> float:
    """``log(Phi(z) - exp((mu - x) / nu + sigma^2 / (2 nu^2)) Phi(z - sigma / nu))``.

    In logs (SciPy's ``exponnorm.logcdf`` is ``log(cdf)``: -inf below ~ -40 sigma).
    """
    z = (x - mu) / sigma
    shift = (mu - x) / nu + sigma**2 / (2.0 * nu**2) + special.log_ndtr(z - sigma / nu)
    return _log_diff(float(special.log_ndtr(z)), float(shift))


def _moyal_logp(x: float, mu: float, sigma: float) -> float:
    """Return the Moyal log-density (SciPy's ``moyal.logpdf`` is ``log(pdf)``: -inf in tails)."""
    z = (x - mu) / sigma
    return float(-0.5 * (z + np.exp(-z)) - np.log(sigma) - 0.5 * np.log(2.0 * np.pi))


def _kumaraswamy_logp(x: float, a: float, b: float) -> float:
    if not 0.0 < x < 1.0:
        return -INF
    return float(np.log(a * b) + (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-(x**a)))


def _kumaraswamy_logcdf(x: float, a: float, b: float) -> float:
    if x <= 0.0:
        return -INF
    if x >= 1.0:
        return 0.0
    return float(np.log(-np.expm1(b * np.log1p(-(x**a)))))


def _moyal_logcdf(x: float, mu: float, sigma: float) -> float:
    """``log erfc(exp(-z / 2) / sqrt 2) = log 2 + log Phi(-exp(-z / 2))`` (SciPy's underflows)."""
    return float(np.log(2.0) + special.log_ndtr(-np.exp(-0.5 * (x - mu) / sigma)))


def _discrete_weibull_logp(x: int, q: float, beta: float) -> float:
    if x < 0:
        return -INF
    return _log_diff(x**beta * np.log(q), (x + 1.0) ** beta * np.log(q))


def _discrete_weibull_logcdf(x: int, q: float, beta: float) -> float:
    return -INF if x < 0 else _log1mexp((x + 1.0) ** beta * np.log(q))


def _zero_inflated(base_logpmf: Callable[..., float]) -> Callable[..., float]:
    """``log((1 - psi) [x = 0] + psi base(x))`` from the base's SciPy log-pmf."""

    def ref(x: int, psi: float, *params: float) -> float:
        logp = np.log(psi) + base_logpmf(x, *params) if psi > 0 else -INF
        return float(np.logaddexp(np.log1p(-psi), logp)) if x == 0 else float(logp)

    return ref


def _hurdle(positive_logp: Callable[..., float]) -> Callable[..., float]:
    """``log(1 - psi)`` at 0, ``log(psi) + positive_logp(x)`` above 0, -inf below."""

    def ref(x: float, psi: float, *params: float) -> float:
        if x < 0:
            return -INF
        if x == 0:
            return float(np.log1p(-psi))
        return float(np.log(psi) + positive_logp(x, *params)) if psi > 0 else -INF

    return ref


def _ordered(dist: Any) -> Callable[..., float]:
    """``log(F(c_k - eta) - F(c_{k-1} - eta))`` (``c_{-1} = -inf``, ``c_K = inf``) of ``dist``.

    The difference of the CDFs, or of the survival functions where both CDFs are near 1.
    """

    def ref(k: int, eta: float, cut: np.ndarray, sigma: float = 1.0) -> float:
        if k < 0 or k > len(cut):
            return -INF
        z = np.concatenate([[-INF], (cut - eta) / sigma, [INF]])
        lo, hi = z[k], z[k + 1]
        if lo > 0:
            return _log_diff(float(dist.logsf(lo)), float(dist.logsf(hi)))
        return _log_diff(float(dist.logcdf(hi)), float(dist.logcdf(lo)))

    return ref


def _normal_mixture_logcdf(x: float, w: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> float:
    """``log sum w Phi``, or ``log1p(-sum w sf)`` where the CDF is near 1."""
    sf = float(np.sum(w * stats.norm.sf(x, mu, sigma)))
    if sf < 0.5:
        return float(np.log1p(-sf))
    return float(special.logsumexp(stats.norm.logcdf(x, mu, sigma), b=w))


_CUT = np.array([-1.5, 0.0, 2.0])
_CUT_FAR = np.array([-40.0, 30.0, 35.0])  # classes far in both tails
_CUT_TIED = np.array([0.5, 0.5, 3.0])  # a class of probability 0

DERIVED_CASES = [
    Case(
        "gumbel",
        km.Gumbel,
        ("mu", "beta"),
        [(0.0, 1.0), (0.5, 2.0), (-3.0, 0.1)],
        [-20.0, -3.0, -1.0, 0.0, 0.5, 3.0, 40.0, 700.0],
        lambda x, mu, b: stats.gumbel_r.logpdf(x, mu, b),
        lambda x, mu, b: stats.gumbel_r.logcdf(x, mu, b),
    ),
    Case(
        "chisquared",
        km.ChiSquared,
        ("nu",),
        [(1.0,), (2.0,), (3.0,), (50.0,)],
        [-1.0, 0.0, 1e-8, 0.5, 4.0, 60.0, 500.0],
        lambda x, nu: stats.chi2.logpdf(x, nu),
        lambda x, nu: _frozen_logcdf(stats.chi2(nu), x),
    ),
    Case(
        "exgaussian",
        km.ExGaussian,
        ("mu", "sigma", "nu"),
        [(0.0, 1.0, 1.0), (1.0, 0.7, 2.0), (-2.0, 3.0, 0.2), (0.0, 0.1, 5.0)],
        [-20.0, -3.0, -1.0, 0.0, 0.5, 3.0, 10.0, 80.0],
        lambda x, mu, s, nu: stats.exponnorm.logpdf(x, nu / s, mu, s),
        _exgaussian_logcdf,
        # Where Phi(z) and the shifted term nearly cancel (x well below mu), the difference
        # keeps ~1e-9 relative (both sides compute it in logs, each from rounded terms).
        rtol=1e-8,
    ),
    Case(
        "pareto",
        km.Pareto,
        ("alpha", "m"),
        [(3.0, 2.0), (0.5, 1.0), (10.0, 0.1)],
        [-1.0, 0.0, 0.05, 0.1, 1.0, 1.5, 2.0, 2.5, 100.0, 1e10],
        lambda x, a, m: stats.pareto.logpdf(x, a, scale=m),
        lambda x, a, m: stats.pareto.logcdf(x, a, scale=m),
    ),
    Case(
        "kumaraswamy",
        km.Kumaraswamy,
        ("a", "b"),
        [(2.0, 3.0), (0.5, 0.5), (1.0, 1.0), (5.0, 0.8)],
        [-0.1, 0.0, 1e-9, 0.3, 0.5, 0.99, 1.0, 1.2],
        _kumaraswamy_logp,
        _kumaraswamy_logcdf,
    ),
    Case(
        "moyal",
        km.Moyal,
        ("mu", "sigma"),
        [(0.0, 1.0), (0.3, 1.5), (-2.0, 0.2)],
        [-30.0, -5.0, -1.0, 0.0, 0.3, 4.0, 50.0, 1e3],
        _moyal_logp,
        _moyal_logcdf,
    ),
    Case(
        "skewnormal",
        km.SkewNormal,
        ("mu", "sigma", "alpha"),
        [(0.0, 1.0, 0.0), (0.2, 1.3, 2.0), (-1.0, 0.5, -4.0), (0.0, 2.0, 30.0)],
        [-30.0, -3.0, -1.0, 0.0, 0.5, 3.0, 30.0],
        lambda x, mu, s, a: stats.skewnorm.logpdf(x, a, mu, s),
    ),
    Case(
        "skewnormal_tau",
        km.SkewNormal,
        ("mu", "tau", "alpha"),
        [(0.0, 4.0, 1.0), (1.0, 0.25, -2.0)],
        [-5.0, 0.0, 0.7, 6.0],
        lambda x, mu, tau, a: stats.skewnorm.logpdf(x, a, mu, 1.0 / np.sqrt(tau)),
    ),
    Case(
        "discrete_uniform",
        km.DiscreteUniform,
        ("lower", "upper"),
        [(0, 4), (-3, 3), (5, 5), (0, 100)],
        [-4, -3, -1, 0, 2, 3, 4, 5, 6, 100, 101],
        lambda k, lo, hi: stats.randint.logpmf(k, lo, hi + 1),
        lambda k, lo, hi: stats.randint.logcdf(k, lo, hi + 1),
    ),
    Case(
        "betabinomial",
        km.BetaBinomial,
        ("alpha", "beta", "n"),
        [(2.0, 3.0, 10), (0.5, 0.5, 1), (1.0, 1.0, 0), (30.0, 0.2, 50)],
        [-1, 0, 1, 3, 10, 11, 50, 51],
        lambda k, a, b, n: stats.betabinom.logpmf(k, n, a, b),
    ),
    Case(
        "diracdelta",
        km.DiracDelta,
        ("c",),
        [(0,), (3,), (-2,)],
        [-3, -2, 0, 2, 3, 4],
        lambda k, c: 0.0 if k == c else -INF,
        lambda k, c: 0.0 if k >= c else -INF,
    ),
    Case(
        "diracdelta_float",
        km.DiracDelta,
        ("c",),
        [(0.5,), (-2.25,)],
        [-2.25, 0.0, 0.5, 1.0],
        lambda x, c: 0.0 if x == c else -INF,
        lambda x, c: 0.0 if x >= c else -INF,
    ),
    Case(
        "discrete_weibull",
        km.DiscreteWeibull,
        ("q", "beta"),
        [(0.5, 1.0), (0.9, 0.5), (0.2, 2.5), (0.999, 1.3)],
        [-1, 0, 1, 2, 5, 30, 1000],
        _discrete_weibull_logp,
        _discrete_weibull_logcdf,
    ),
    Case(
        "zero_inflated_poisson",
        km.ZeroInflatedPoisson,
        ("psi", "mu"),
        [(0.7, 3.0), (1.0, 0.5), (0.0, 2.0), (0.3, 0.0), (0.5, 500.0)],
        [-1, 0, 1, 5, 500],
        _zero_inflated(lambda k, mu: stats.poisson.logpmf(k, mu)),
    ),
    Case(
        "zero_inflated_binomial",
        km.ZeroInflatedBinomial,
        ("psi", "n", "p"),
        [(0.7, 10, 0.3), (1.0, 5, 0.5), (0.4, 10, 0.0), (0.4, 10, 1.0), (0.0, 3, 0.2)],
        [-1, 0, 1, 3, 10, 11],
        _zero_inflated(lambda k, n, p: stats.binom.logpmf(k, n, p)),
    ),
    Case(
        "zero_inflated_negative_binomial",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(0.7, 3.0, 2.0), (0.2, 0.5, 100.0), (1.0, 30.0, 0.2)],
        [-1, 0, 1, 5, 50],
        _zero_inflated(lambda k, mu, a: stats.nbinom.logpmf(k, a, a / (mu + a))),
    ),
    Case(
        "zero_inflated_negative_binomial_np",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "n", "p"),
        [(0.7, 3.0, 0.4), (0.5, 1.0, 1.0), (0.9, 20.0, 0.9)],
        [-1, 0, 1, 5, 50],
        _zero_inflated(lambda k, n, p: stats.nbinom.logpmf(k, n, p)),
    ),
    Case(
        "hurdle_poisson",
        km.HurdlePoisson,
        ("psi", "mu"),
        [(0.7, 3.0), (1.0, 0.5), (0.0, 2.0), (0.4, 1e-6), (0.5, 500.0)],
        [-1, 0, 1, 5, 500],
        _hurdle(lambda k, mu: stats.poisson.logpmf(k, mu) - np.log(-np.expm1(-mu))),
    ),
    Case(
        "hurdle_negative_binomial",
        km.HurdleNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(0.7, 3.0, 2.0), (0.0, 2.0, 1.0), (0.4, 1e-4, 5.0), (0.5, 300.0, 0.5)],
        [-1, 0, 1, 5, 500],
        _hurdle(
            lambda k, mu, a: (
                stats.nbinom.logpmf(k, a, a / (mu + a))
                - np.log(-np.expm1(a * np.log(a / (mu + a))))
            )
        ),
    ),
    Case(
        "hurdle_negative_binomial_np",
        km.HurdleNegativeBinomial,
        ("psi", "n", "p"),
        [(0.7, 3.0, 0.4), (1.0, 0.5, 0.9)],
        [0, 1, 5, 40],
        _hurdle(lambda k, n, p: stats.nbinom.logpmf(k, n, p) - np.log(-np.expm1(n * np.log(p)))),
    ),
    Case(
        "hurdle_gamma",
        km.HurdleGamma,
        ("psi", "alpha", "beta"),
        [(0.7, 2.0, 1.5), (1.0, 0.5, 1.0), (0.3, 30.0, 0.2)],
        [-1.0, 0.0, 1e-8, 0.5, 2.0, 200.0],
        _hurdle(lambda x, a, b: stats.gamma.logpdf(x, a, scale=1.0 / b)),
    ),
    Case(
        "hurdle_gamma_mu_sigma",
        km.HurdleGamma,
        ("psi", "mu", "sigma"),
        [(0.6, 2.0, 1.0), (0.9, 0.5, 2.0)],
        [-1.0, 0.0, 0.3, 4.0],
        _hurdle(lambda x, mu, s: stats.gamma.logpdf(x, (mu / s) ** 2, scale=s * s / mu)),
    ),
    Case(
        "hurdle_lognormal",
        km.HurdleLogNormal,
        ("psi", "mu", "sigma"),
        [(0.7, 0.0, 1.0), (0.2, 1.5, 0.3), (1.0, -2.0, 2.0)],
        [-1.0, 0.0, 1e-8, 0.5, 3.0, 100.0],
        _hurdle(lambda x, mu, s: stats.lognorm.logpdf(x, s, scale=np.exp(mu))),
    ),
    Case(
        "hurdle_lognormal_tau",
        km.HurdleLogNormal,
        ("psi", "mu", "tau"),
        [(0.5, 0.3, 4.0)],
        [0.0, 0.5, 3.0],
        _hurdle(lambda x, mu, tau: stats.lognorm.logpdf(x, 1.0 / np.sqrt(tau), scale=np.exp(mu))),
    ),
    Case(
        "ordered_logistic",
        km.OrderedLogistic,
        ("eta", "cutpoints"),
        [(0.0, _CUT), (0.3, _CUT), (-50.0, _CUT), (50.0, _CUT), (0.0, _CUT_FAR), (1.0, _CUT_TIED)],
        [-1, 0, 1, 2, 3, 4],
        _ordered(stats.logistic),
    ),
    Case(
        "ordered_probit",
        km.OrderedProbit,
        ("eta", "cutpoints", "sigma"),
        [
            (0.0, _CUT, 1.0),
            (0.3, _CUT, 2.0),
            (-20.0, _CUT, 1.0),
            (20.0, _CUT, 1.0),
            (0.0, _CUT_FAR, 1.0),
            (1.0, _CUT_TIED, 0.5),
        ],
        [-1, 0, 1, 2, 3, 4],
        _ordered(stats.norm),
    ),
    Case(
        "normal_mixture",
        km.NormalMixture,
        ("w", "mu", "sigma"),
        [
            (np.array([0.3, 0.7]), np.array([-2.0, 2.0]), np.array([1.0, 0.5])),
            (np.array([1.0, 0.0]), np.array([0.0, 50.0]), np.array([1.0, 1.0])),
            (np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([0.1, 10.0])),
        ],
        [-60.0, -2.0, 0.0, 1.0, 2.0, 50.0],
        lambda x, w, mu, s: float(special.logsumexp(stats.norm.logpdf(x, mu, s), b=w)),
        _normal_mixture_logcdf,
        # The class's logcdf is a log-sum-exp of the components' log-CDFs: near CDF = 1 it
        # keeps absolute (not relative) digits, ~1e-16.
        atol=1e-15,
    ),
    _invalid("gumbel_invalid", km.Gumbel, ("mu", "beta"), [(0.0, 0.0), (0.0, -1.0)], [0.0, 1.0]),
    _invalid("chisquared_invalid", km.ChiSquared, ("nu",), [(0.0,), (-1.0,)], [0.5, 2.0]),
    _invalid(
        "exgaussian_invalid",
        km.ExGaussian,
        ("mu", "sigma", "nu"),
        [(0.0, -1.0, 1.0), (0.0, 1.0, 0.0)],
        [0.0, 1.0],
    ),
    _invalid("pareto_invalid", km.Pareto, ("alpha", "m"), [(0.0, 1.0), (2.0, -1.0)], [2.0]),
    _invalid("kumaraswamy_invalid", km.Kumaraswamy, ("a", "b"), [(0.0, 1.0), (1.0, -1.0)], [0.5]),
    _invalid("moyal_invalid", km.Moyal, ("mu", "sigma"), [(0.0, 0.0)], [0.0, 1.0]),
    _invalid(
        "skewnormal_invalid", km.SkewNormal, ("mu", "sigma", "alpha"), [(0.0, -1.0, 1.0)], [0.0]
    ),
    _invalid("discrete_uniform_invalid", km.DiscreteUniform, ("lower", "upper"), [(3, 1)], [1, 2]),
    _invalid(
        "betabinomial_invalid",
        km.BetaBinomial,
        ("alpha", "beta", "n"),
        [(0.0, 1.0, 5), (1.0, -1.0, 5)],
        [0, 2],
    ),
    _invalid(
        "discrete_weibull_invalid",
        km.DiscreteWeibull,
        ("q", "beta"),
        [(0.0, 1.0), (1.0, 1.0), (0.5, 0.0)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_poisson_invalid",
        km.ZeroInflatedPoisson,
        ("psi", "mu"),
        [(1.5, 1.0), (-0.1, 1.0), (0.5, -1.0)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_binomial_invalid",
        km.ZeroInflatedBinomial,
        ("psi", "n", "p"),
        [(1.5, 5, 0.5), (0.5, 5, 1.5)],
        [0, 2],
    ),
    _invalid(
        "zero_inflated_negative_binomial_invalid",
        km.ZeroInflatedNegativeBinomial,
        ("psi", "mu", "alpha"),
        [(1.5, 1.0, 1.0), (0.5, 1.0, -1.0)],
        [0, 2],
    ),
    _invalid(
        "hurdle_poisson_invalid", km.HurdlePoisson, ("psi", "mu"), [(1.5, 1.0), (0.5, 0.0)], [0, 2]
    ),
    _invalid(
        "hurdle_gamma_invalid",
        km.HurdleGamma,
        ("psi", "alpha", "beta"),
        [(1.5, 1.0, 1.0), (0.5, -1.0, 1.0)],
        [0.0, 2.0],
    ),
    _invalid(
        "hurdle_lognormal_invalid",
        km.HurdleLogNormal,
        ("psi", "mu", "sigma"),
        [(-0.5, 0.0, 1.0), (0.5, 0.0, -1.0)],
        [0.0, 2.0],
    ),
    _invalid(
        "ordered_logistic_invalid",
        km.OrderedLogistic,
        ("eta", "cutpoints"),
        [(0.0, np.array([1.0, 0.0, 2.0]))],  # not increasing
        [0, 1, 3],
    ),
    _invalid(
        "ordered_probit_invalid",
        km.OrderedProbit,
        ("eta", "cutpoints", "sigma"),
        [(0.0, np.array([1.0, 0.0, 2.0]), 1.0), (0.0, _CUT, 0.0)],
        [0, 1, 3],
    ),
]
CASES += DERIVED_CASES


def _logitnorm_logpdf(x: float, mu: float, sigma: float) -> float:
    if not 0.0 < x < 1.0:
        return -np.inf
    return stats.norm.logpdf(special.logit(x), mu, sigma) - np.log(x) - np.log1p(-x)


def _logitnorm_logcdf(x: float, mu: float, sigma: float) -> float:
    if x <= 0.0:
        return -np.inf
    return 0.0 if x >= 1.0 else stats.norm.logcdf(special.logit(x), mu, sigma)


def _vonmises_logpdf(x: float, mu: float, kappa: float) -> float:
    return stats.vonmises.logpdf(x, kappa, loc=mu) if abs(x) <= np.pi else -np.inf


#: The distributions of _continuous_more.py and HyperGeometric (Interpolated takes
#: vectors of points: test_continuous_more.py checks it).
MORE_CASES = [
    Case(
        "logitnormal",
        km.LogitNormal,
        ("mu", "sigma"),
        [(0.0, 1.0), (0.3, 0.8), (-2.0, 3.0)],
        [-0.1, 1e-8, 0.2, 0.6, 1 - 1e-8, 1.2],
        _logitnorm_logpdf,
        _logitnorm_logcdf,
    ),
    Case(
        "triangular",
        km.Triangular,
        ("lower", "c", "upper"),
        [(-1.0, 0.5, 2.0), (0.0, 0.0, 2.0), (0.0, 1.0, 1.0)],
        [-1.5, -0.9, 0.0, 0.2, 0.5, 0.99, 1.7, 2.5],
        lambda x, lo, c, hi: stats.triang.logpdf(x, (c - lo) / (hi - lo), lo, hi - lo),
        lambda x, lo, c, hi: stats.triang.logcdf(x, (c - lo) / (hi - lo), lo, hi - lo),
        pairs=[(i, j) for i in range(3) for j in range(8) if not (i == 0 and j == 2)],
    ),
    Case(
        "asymmetric_laplace",
        km.AsymmetricLaplace,
        ("b", "kappa", "mu"),
        [(1.5, 0.6, 0.4), (1.0, 1.0, 0.0), (0.2, 4.0, -3.0)],
        [-60.0, -1.0, 0.3, 0.4, 2.0, 40.0],
        lambda x, b, k, mu: stats.laplace_asymmetric.logpdf(x, k, mu, 1 / b),
        lambda x, b, k, mu: stats.laplace_asymmetric.logcdf(x, k, mu, 1 / b),
    ),
    Case(
        "wald",
        km.Wald,
        ("mu", "lam", "alpha"),
        [(1.5, 2.0, 0.0), (0.7, 5.0, -1.0), (3.0, 0.5, 2.0)],
        [-1.5, 0.0, 1e-3, 0.4, 2.5, 6.0, 40.0],
        lambda x, mu, lam, a: stats.invgauss.logpdf(x, mu / lam, a, lam),
        lambda x, mu, lam, a: stats.invgauss.logcdf(x, mu / lam, a, lam),
        atol=1e-12,
    ),
    Case(
        "skew_student_t",
        km.SkewStudentT,
        ("a", "b", "mu", "sigma"),
        [(2.0, 5.0, 0.5, 1.5), (1.0, 1.0, 0.0, 1.0), (6.0, 0.5, -2.0, 3.0)],
        [-200.0, -20.0, -2.0, 0.5, 3.0, 50.0],
        lambda x, a, b, mu, s: stats.jf_skew_t.logpdf(x, a, b, mu, s),
        lambda x, a, b, mu, s: stats.jf_skew_t.logcdf(x, a, b, mu, s),
        rtol=1e-9,
    ),
    Case(
        "rice",
        km.Rice,
        ("nu", "sigma"),
        [(2.0, 0.8), (0.0, 1.0), (30.0, 2.0)],
        [-1.0, 0.0, 1e-3, 1.0, 2.0, 4.0, 31.0],
        lambda x, nu, s: stats.rice.logpdf(x, nu / s, scale=s),
        rtol=1e-9,
    ),
    Case(
        "vonmises",
        km.VonMises,
        ("mu", "kappa"),
        [(0.5, 2.0), (-3.0, 0.01), (0.0, 500.0)],
        [-4.0, -np.pi, -1.0, 0.0, 0.5, 3.0, np.pi, 3.5],
        _vonmises_logpdf,
        atol=1e-12,
    ),
    Case(
        "hypergeometric",
        km.HyperGeometric,
        ("N", "k", "n"),
        [(20, 7, 12), (10, 0, 5), (50, 50, 7), (1000, 300, 400)],
        [-1, 0, 2, 5, 7, 12, 130],
        lambda x, n_items, k, n: stats.hypergeom.logpmf(x, n_items, k, n),
        atol=1e-12,
    ),
]
CASES += MORE_CASES


def _input(name: str, a: np.ndarray) -> Any:
    return kt.tensor(name, dtype=str(a.dtype), shape=(None,) * a.ndim)


def _has_logcdf(case: Case, rv: Any, value: Any) -> Any:
    """Return the logcdf graph, or None where the class has no closed form."""
    try:
        return km.logcdf(rv, value)
    except NotImplementedError:
        return None


def _build(case: Case) -> tuple[list[Any], list[np.ndarray], dict[str, Any]]:
    """Return the inputs, their values and the outputs (by kind) of one case."""
    cols, values = case.columns()
    params = [_input(f"{case.id}_{n}", c) for n, c in zip(case.names, cols, strict=True)]
    value = _input(f"{case.id}_value", values)
    rv = case.dist.dist(**dict(zip(case.names, params, strict=True)))
    if not case.names:  # a parameterless distribution: one draw per value
        rv = case.dist.dist(shape=(values.shape[0],))
    outs = {"logp": km.logp(rv, value)}
    cdf = _has_logcdf(case, rv, value) if case.logcdf is not None else None
    if cdf is not None:
        outs["logcdf"] = cdf
    return [*params, value], [*cols, values], outs


def _evaluate_all(backend: str) -> dict[tuple[str, str], np.ndarray]:
    inputs, args, keys, outputs = [], [], [], []
    for case in CASES:
        ins, vals, outs = _build(case)
        inputs += ins
        args += vals
        for kind, out in outs.items():
            keys.append((case.id, kind))
            outputs.append(out)
    f = kiln.function(inputs, outputs, mode=kiln.Mode(linker=backend))
    # The branch a switch does not select may compute log(0) or inf - inf: NumPy (the
    # VM) warns of it, though the result is right; the results are what is checked.
    with np.errstate(all="ignore"):
        return dict(zip(keys, f(*args), strict=True))


@pytest.fixture(scope="module", params=BACKENDS)
def results(request: pytest.FixtureRequest) -> tuple[str, dict[tuple[str, str], np.ndarray]]:
    return request.param, _evaluate_all(request.param)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_logp_and_logcdf_match_scipy(
    results: tuple[str, dict[tuple[str, str], np.ndarray]], case: Case
) -> None:
    backend, values = results
    kinds = ["logp"] + (["logcdf"] if case.logcdf is not None else [])
    for kind in kinds:
        got = values[case.id, kind]
        ref = case.reference(kind)
        close = np.isclose(got, ref, rtol=case.rtol, atol=case.atol, equal_nan=True)
        bad = [
            f"  {dict(zip(case.names, row, strict=True))} at {v}: got {g!r}, SciPy {r!r}"
            for (row, v), g, r, ok in zip(case.points(), got, ref, close, strict=True)
            if not ok
        ]
        assert not bad, f"{case.id} {kind} on {backend}:\n" + "\n".join(bad)


#: Exported distributions the table cannot build, each with the reason; every other one
#: has a row. Remove a name when its row is added (a stale entry fails the test below).
NOT_IN_TABLE: dict[str, str] = {
    # Their arguments are distributions (a row is parameter arrays); test_censored.py,
    # test_truncated.py and the mixture / custom-distribution tests check them.
    "Mixture": "takes component distributions as arguments",
    "CustomDist": "takes a user's logp or draw-graph function",
    "Censored": "takes a base distribution (test_censored.py)",
    "Truncated": "takes a base distribution (test_truncated.py)",
    "PolyaGamma": "not implemented: .dist raises NotImplementedError",
    "Interpolated": "takes vectors of points (a row is scalars); test_continuous_more.py",
    **dict.fromkeys(
        (
            "LKJCholeskyCov",
            "LKJCorr",
            "MvStudentT",
            "Wishart",
            "WishartBartlett",
            "MatrixNormal",
            "KroneckerNormal",
            "DirichletMultinomial",
            "OrderedMultinomial",
            "ZeroSumNormal",
            "StickBreakingWeights",
            "CAR",
            "ICAR",
        ),
        "multivariate: core-shaped parameters; test_multivariate_derived.py checks them",
    ),
    **dict.fromkeys(
        (
            "RandomWalk",
            "GaussianRandomWalk",
            "MvGaussianRandomWalk",
            "MvStudentTRandomWalk",
            "AR",
            "GARCH11",
            "EulerMaruyama",
        ),
        "time series: need steps (most an init_dist); test_timeseries.py checks them",
    ),
}


def _exported_distributions() -> set[str]:
    """Return the class names of every Distribution subclass kiln_model exports."""
    classes = [getattr(km, name) for name in dir(km)]
    return {
        c.__name__
        for c in classes
        if isinstance(c, type) and issubclass(c, Distribution) and c is not Distribution
    }


def test_every_distribution_is_in_the_table() -> None:
    """Every exported distribution (SymbolicDistributions included) has a row or a reason."""
    in_table = {case.dist.__name__ for case in CASES}
    missing = _exported_distributions() - in_table - set(NOT_IN_TABLE)
    assert not missing, f"distributions with no row in CASES: {sorted(missing)}"
    stale = in_table & set(NOT_IN_TABLE)
    assert not stale, f"in the table and still in NOT_IN_TABLE (remove them): {sorted(stale)}"


def test_every_implemented_logcdf_is_checked() -> None:
    """A class with a closed-form logcdf has a SciPy reference for it in the table."""
    checked = {case.dist for case in CASES if case.logcdf is not None}
    for case in CASES:
        if case.id.endswith("_invalid"):  # constant invalid parameters do not build a draw
            continue
        cols, _ = case.columns()
        rv = case.dist.dist(**dict(zip(case.names, [c[:1] for c in cols], strict=True)))
        if _has_logcdf(case, rv, kt.vector("v")) is not None:
            assert case.dist in checked, f"{case.id}: logcdf is not compared with SciPy"
