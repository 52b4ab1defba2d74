"""The posteriordb reference posteriors of ``data/`` written as kiln models.

Each ``build_<model>(data) -> kl.Model`` takes the posteriordb data dict (the
``"data"`` entry of the posterior's JSON file, unchanged) and returns the model that
the file's ``"description"`` states. ``POSTERIORS`` maps each posterior name (the JSON
file's stem, ``<data name>-<model name>``) to its builder; :func:`load_posterior` reads
a file and :func:`build` builds a posterior by name.

Naming: a posteriordb parameter ``theta[j]`` (1-based) is element ``j - 1`` of the
kiln variable ``theta`` (a free variable or a ``Deterministic``); scalars keep their
names. Parameters that posteriordb stores as derived quantities (``theta`` of the
non-centred eight schools, ``f`` of ``gp_pois_regr``) are Deterministics here; the
latent variables behind them (``theta_trans``, ``f_tilde``) are free.

Flat priors are ``kl.Flat`` / ``kl.HalfFlat`` (no log-density term; the log-Jacobian
of the log transform still applies on the unconstrained scale).

``low_dim_gauss_mix`` uses ``kl.NormalMixture``; ``build_low_dim_gauss_mix_potential``
writes the same density as a ``kl.Potential`` of a logsumexp, as a cross-check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import kiln as kl
import kiln.tensor as kt

DATA_DIR = Path(__file__).resolve().parent / "data"


def load_posterior(name: str) -> dict[str, Any]:
    """Return the parsed JSON file of the posterior ``name`` (description, data, reference)."""
    path = DATA_DIR / f"{name}.json"
    if not path.exists():
        raise KeyError(f"no posterior {name!r}; known: {sorted(POSTERIORS)}")
    with path.open() as f:
        return json.load(f)


def build(name: str, data: Mapping[str, Any] | None = None) -> kl.Model:
    """Return the kiln model of the posterior ``name`` (on its own data by default)."""
    if name not in POSTERIORS:
        raise KeyError(f"no posterior {name!r}; known: {sorted(POSTERIORS)}")
    if data is None:
        data = load_posterior(name)["data"]
    return POSTERIORS[name](data)


_INDEXED = re.compile(r"^(?P<base>[A-Za-z_][A-Za-z0-9_]*)\[(?P<index>[0-9, ]+)\]$")


def split_name(param: str) -> tuple[str, tuple[int, ...]]:
    """Return ``(variable, 0-based index)`` of a posteriordb name.

    ``"theta[3]" -> ("theta", (2,))``; ``"mu" -> ("mu", ())``.
    """
    m = _INDEXED.match(param)
    if m is None:
        return param, ()
    return m["base"], tuple(int(i) - 1 for i in m["index"].split(","))


def reference_values(
    reference: Mapping[str, Mapping[str, float]], stat: str = "mean"
) -> dict[str, np.ndarray]:
    """Return ``{variable: array}`` of one statistic of a posteriordb ``reference`` dict."""
    entries: dict[str, dict[tuple[int, ...], float]] = {}
    for param, stats in reference.items():
        base, index = split_name(param)
        entries.setdefault(base, {})[index] = float(stats[stat])
    out = {}
    for base, values in entries.items():
        if list(values) == [()]:
            out[base] = np.asarray(values[()])
            continue
        shape = tuple(max(ix[k] for ix in values) + 1 for k in range(len(next(iter(values)))))
        arr = np.full(shape, np.nan)
        for ix, v in values.items():
            arr[ix] = v
        if np.isnan(arr).any():
            raise ValueError(f"reference: some elements of {base!r} are missing")
        out[base] = arr
    return out


def _vec(data: Mapping[str, Any], key: str, dtype: str = "float64") -> np.ndarray:
    return np.asarray(data[key], dtype=dtype)


# --- eight schools ----------------------------------------------------------------------


def build_eight_schools_centered(data: Mapping[str, Any]) -> kl.Model:
    """Eight schools, centred: theta[j] ~ Normal(mu, tau); y[j] ~ Normal(theta[j], sigma[j])."""
    y, sigma = _vec(data, "y"), _vec(data, "sigma")
    with kl.Model(coords={"school": list(range(1, int(data["J"]) + 1))}) as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta = kl.Normal("theta", mu, tau, dims="school")
        kl.Normal("y", theta, sigma, observed=y, dims="school")
    return m


def build_eight_schools_noncentered(data: Mapping[str, Any]) -> kl.Model:
    """Eight schools, non-centred: theta = mu + tau * theta_trans, theta_trans ~ Normal(0, 1)."""
    y, sigma = _vec(data, "y"), _vec(data, "sigma")
    with kl.Model(coords={"school": list(range(1, int(data["J"]) + 1))}) as m:
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        theta_trans = kl.Normal("theta_trans", 0.0, 1.0, dims="school")
        theta = kl.Deterministic("theta", mu + tau * theta_trans, dims="school")
        kl.Normal("y", theta, sigma, observed=y, dims="school")
    return m


# --- ARM-book regressions ---------------------------------------------------------------


def build_kidscore_momiq(data: Mapping[str, Any]) -> kl.Model:
    """kid_score ~ Normal(beta[1] + beta[2] * mom_iq, sigma); flat beta, sigma ~ HalfCauchy(2.5)."""
    with kl.Model() as m:
        mom_iq = kl.Data("mom_iq", _vec(data, "mom_iq"))
        beta = kl.Flat("beta", shape=2)
        sigma = kl.HalfCauchy("sigma", 2.5)
        kl.Normal("kid_score", beta[0] + beta[1] * mom_iq, sigma, observed=_vec(data, "kid_score"))
    return m


def build_kidscore_mom_work(data: Mapping[str, Any]) -> kl.Model:
    """kid_score on the dummies of mom_work (levels 2, 3, 4; level 1 the baseline); all flat."""
    work = np.asarray(data["mom_work"], dtype=np.int64)
    dummies = np.stack([(work == k).astype("float64") for k in (2, 3, 4)], axis=1)
    with kl.Model() as m:
        beta = kl.Flat("beta", shape=4)
        sigma = kl.HalfFlat("sigma")
        mean = beta[0] + kt.dot(dummies, beta[1:])
        kl.Normal("kid_score", mean, sigma, observed=_vec(data, "kid_score"))
    return m


def build_earn_height(data: Mapping[str, Any]) -> kl.Model:
    """Earnings: earn ~ Normal(beta[1] + beta[2] * height, sigma); all flat (badly scaled)."""
    with kl.Model() as m:
        beta = kl.Flat("beta", shape=2)
        sigma = kl.HalfFlat("sigma")
        mean = beta[0] + beta[1] * _vec(data, "height")
        kl.Normal("earn", mean, sigma, observed=_vec(data, "earn"))
    return m


def build_logmesquite(data: Mapping[str, Any]) -> kl.Model:
    """log(weight) on an intercept, five log predictors and group; all flat."""
    columns = ["diam1", "diam2", "canopy_height", "total_height", "density"]
    X = np.column_stack(
        [np.ones(int(data["N"]))] + [np.log(_vec(data, c)) for c in columns] + [_vec(data, "group")]
    )
    with kl.Model() as m:
        beta = kl.Flat("beta", shape=7)
        sigma = kl.HalfFlat("sigma")
        kl.Normal("log_weight", kt.dot(X, beta), sigma, observed=np.log(_vec(data, "weight")))
    return m


# --- other regressions ------------------------------------------------------------------


def build_kilpisjarvi(data: Mapping[str, Any]) -> kl.Model:
    """Kilpisjarvi: y ~ Normal(alpha + beta * x, sigma); informative normal priors, flat sigma."""
    with kl.Model() as m:
        alpha = kl.Normal("alpha", float(data["pmualpha"]), float(data["psalpha"]))
        beta = kl.Normal("beta", float(data["pmubeta"]), float(data["psbeta"]))
        sigma = kl.HalfFlat("sigma")
        kl.Normal("y", alpha + beta * _vec(data, "x"), sigma, observed=_vec(data, "y"))
    return m


def build_blr(data: Mapping[str, Any]) -> kl.Model:
    """Regression: y ~ Normal(X @ beta, sigma); beta ~ Normal(0, 10), sigma ~ HalfNormal(10)."""
    X = np.asarray(data["X"], dtype="float64")
    with kl.Model(coords={"predictor": list(range(1, int(data["D"]) + 1))}) as m:
        beta = kl.Normal("beta", 0.0, 10.0, dims="predictor")
        sigma = kl.HalfNormal("sigma", 10.0)
        kl.Normal("y", kt.dot(X, beta), sigma, observed=_vec(data, "y"))
    return m


# --- mixture ----------------------------------------------------------------------------


def _gauss_mix_priors() -> tuple[Any, Any, Any]:
    mu = kl.Normal(
        "mu", 0.0, 2.0, dims="component", transform=kl.transforms.ordered, initval=[-1.0, 1.0]
    )
    sigma = kl.HalfNormal("sigma", 2.0, dims="component")
    theta = kl.Beta("theta", 5.0, 5.0)
    return mu, sigma, theta


def build_low_dim_gauss_mix(data: Mapping[str, Any]) -> kl.Model:
    """Two-component normal mixture with ordered means and a (0, 1) weight.

    mu[k] ~ Normal(0, 2) (ordered: mu[1] < mu[2]), sigma[k] ~ HalfNormal(2),
    theta ~ Beta(5, 5); y[n] ~ theta * Normal(mu[1], sigma[1]) + (1 - theta) *
    Normal(mu[2], sigma[2]), through ``kl.NormalMixture``.
    """
    y = _vec(data, "y")
    with kl.Model(coords={"component": [1, 2]}) as m:
        mu, sigma, theta = _gauss_mix_priors()
        kl.NormalMixture("y", kt.stack([theta, 1.0 - theta]), mu, sigma, observed=y)
    return m


def build_low_dim_gauss_mix_potential(data: Mapping[str, Any]) -> kl.Model:
    """``low_dim_gauss_mix`` with its likelihood written out as a ``kl.Potential``.

    ``sum(logaddexp(log theta + logN(y | mu[1], sigma[1]), log(1 - theta) +
    logN(y | mu[2], sigma[2])))``: the same density as :func:`build_low_dim_gauss_mix`
    without ``kl.NormalMixture`` (a cross-check of it; not in ``POSTERIORS``).
    """
    y = _vec(data, "y")
    with kl.Model(coords={"component": [1, 2]}) as m:
        mu, sigma, theta = _gauss_mix_priors()
        log_lik = kt.logaddexp(
            kt.log(theta) + kl.logp(kl.Normal.dist(mu[0], sigma[0]), y),
            kt.log1p(-theta) + kl.logp(kl.Normal.dist(mu[1], sigma[1]), y),
        )
        kl.Potential("y", kt.sum(log_lik))
    return m


# --- Gaussian process -------------------------------------------------------------------


def build_gp_pois_regr(data: Mapping[str, Any]) -> kl.Model:
    """Poisson counts, latent GP: f = cholesky(C(rho, alpha)) @ f_tilde; k ~ Poisson(exp(f))."""
    x = _vec(data, "x")
    n = x.shape[0]
    # constants, not ndarrays: `ndarray / tensor` would make NumPy loop over the elements
    sq_dist = kt.constant((x[:, None] - x[None, :]) ** 2)
    jitter = kt.constant(1e-10 * np.eye(n))
    with kl.Model(coords={"obs": list(range(1, n + 1))}) as m:
        rho = kl.Gamma("rho", 25.0, 4.0)
        alpha = kl.HalfNormal("alpha", 2.0)
        f_tilde = kl.Normal("f_tilde", 0.0, 1.0, dims="obs")
        cov = kt.square(alpha) * kt.exp(-sq_dist / (2.0 * kt.square(rho))) + jitter
        chol = kt.cholesky(cov)
        f = kl.Deterministic("f", kt.dot(chol, f_tilde), dims="obs")
        kl.Poisson("k", kt.exp(f), observed=np.asarray(data["k"], dtype=np.int64), dims="obs")
    return m


POSTERIORS: dict[str, Callable[[Mapping[str, Any]], kl.Model]] = {
    "earnings-earn_height": build_earn_height,
    "eight_schools-eight_schools_centered": build_eight_schools_centered,
    "eight_schools-eight_schools_noncentered": build_eight_schools_noncentered,
    "gp_pois_regr-gp_pois_regr": build_gp_pois_regr,
    "kidiq-kidscore_momiq": build_kidscore_momiq,
    "kidiq_with_mom_work-kidscore_mom_work": build_kidscore_mom_work,
    "kilpisjarvi_mod-kilpisjarvi": build_kilpisjarvi,
    "low_dim_gauss_mix-low_dim_gauss_mix": build_low_dim_gauss_mix,
    "mesquite-logmesquite": build_logmesquite,
    "sblrc-blr": build_blr,
}
