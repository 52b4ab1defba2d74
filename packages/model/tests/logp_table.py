"""The table of ``test_logp.py``: its ``Case`` and the basic distributions' rows.

Each case is a distribution, a grid of parameter rows and of values (their product is
evaluated) and its SciPy reference; the derived distributions' rows are in
``logp_table_derived.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import special, stats

import kiln_model as km
from kiln_model import Distribution

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
