"""Sampling results as ArviZ data (an xarray ``DataTree``, ArviZ >= 1.0), and warnings."""

from __future__ import annotations

import concurrent.futures
import datetime
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from kiln_samplers._diagnostics import rhat_ess
from kiln_samplers._sample import Trace


class SamplingWarning(UserWarning):
    """A diagnostic a user should look at: divergences, R-hat, low ESS, tree depth."""


class SlowPathWarning(UserWarning):
    """A model cannot take the fast path (the compiled kernel); the warning says why."""


def to_datatree(
    trace: Trace,
    dims: Mapping[str, Any] | None = None,
    coords: Mapping[str, Any] | None = None,
    observed_data: Mapping[str, Any] | None = None,
    constant_data: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> Any:
    """Return the groups ``posterior``, ``sample_stats`` (+ data groups) as a DataTree.

    ArviZ's layout (``arviz_base.from_dict``'s: ``chain`` and ``draw`` first, unnamed
    dims ``<name>_dim_<i>`` with integer coords), built from the stacked arrays with
    xarray directly: one Dataset per group, no per-variable conversion.
    """
    # Imported here: xarray (and pandas) is most of the time of importing this
    # package, which a process that only runs the compiled kernel does not need.
    import xarray

    clean_dims = {k: list(v) for k, v in (dims or {}).items() if v is not None}
    clean_coords = {k: np.asarray(v) for k, v in (coords or {}).items()}
    all_attrs = {
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "creation_library": "kiln",
        "creation_library_language": "Python",
        "sampling_time": trace.sampling_time,
        "tuning_steps": trace.tuning_steps,
        "interrupted": int(trace.interrupted),
        **({"nuts_kernel": trace.kernel} if trace.kernel is not None else {}),
        **({"n_leapfrog": trace.n_leapfrog} if trace.n_leapfrog is not None else {}),
        **(attrs or {}),
    }
    sample = ("chain", "draw")
    groups = {
        "posterior": _dataset(xarray, trace.posterior, clean_dims, clean_coords, sample),
        "sample_stats": _dataset(xarray, trace.sample_stats, clean_dims, clean_coords, sample),
    }
    if observed_data:
        groups["observed_data"] = _dataset(xarray, observed_data, clean_dims, clean_coords, ())
    if constant_data:
        groups["constant_data"] = _dataset(xarray, constant_data, clean_dims, clean_coords, ())
    groups["posterior"].attrs.update(all_attrs)
    tree = xarray.DataTree.from_dict(groups)
    tree.attrs.update(all_attrs)
    return tree


def _dataset(
    xarray: Any,
    values: Mapping[str, Any],
    dims: Mapping[str, list[Any]],
    coords: Mapping[str, np.ndarray],
    sample: tuple[str, ...],
) -> Any:
    """Return one group: each array with ``sample`` dims first, then its own dims."""
    data_vars: dict[str, Any] = {}
    used: dict[str, np.ndarray] = {}
    for name, value in values.items():
        array = np.asarray(value)
        given = [d for d in dims.get(name, []) if d not in sample]
        names = list(sample)
        unnamed = 0
        for axis in range(len(sample), array.ndim):
            k = axis - len(sample)
            if k < len(given) and given[k] is not None:
                names.append(str(given[k]))
            else:
                names.append(f"{name}_dim_{unnamed}")
                unnamed += 1
        if len(given) > array.ndim - len(sample):
            raise ValueError(
                f"{name}: {len(given)} dims given ({given}) for an array of "
                f"{array.ndim - len(sample)} dimension(s) (shape {array.shape[len(sample) :]})"
            )
        for dim, length in zip(names, array.shape, strict=True):
            if dim not in used:
                used[dim] = coords[dim] if dim in coords else np.arange(length)
        data_vars[name] = (names, array)
    return xarray.Dataset(data_vars, coords=used)


#: Draws per chain the R-hat / ESS screen reads (every ``k``-th draw of a longer run).
SCREEN_DRAWS = 1000
#: A screened R-hat above this, or a screened bulk ESS below twice the warning's
#: threshold, sends the element to the exact computation on every draw.
_SCREEN_RHAT = 1.005


def check_diagnostics(idata: Any, max_treedepth: int, warn: bool = True) -> dict[str, Any]:
    """Warn, as PyMC does, about divergences, R-hat > 1.01, low bulk ESS, full trees.

    R-hat and ESS are ArviZ's rank-normalized split R-hat and bulk ESS
    (:mod:`kiln_samplers._diagnostics`). For more than ``2 * SCREEN_DRAWS`` draws per
    chain, every element is first screened on ``SCREEN_DRAWS`` evenly spaced draws per
    chain; the elements whose screen comes near a threshold (R-hat above 1.005, bulk ESS
    below twice the warning's threshold), and the one the screen ranks worst for each,
    are computed exactly on every draw. Thinning lowers ESS, so an element the screen
    passes would pass on every draw. The report's ``max_rhat`` and ``min_ess_bulk`` are
    the exact values of the elements computed exactly (those that decide the
    warnings), and ``screened_draws`` the draws per chain of the screen (None: none).
    """
    stats = idata["sample_stats"]
    # Gradient-free steps have no divergences nor trees (their stats differ from NUTS's).
    n_div = int(stats["diverging"].sum()) if "diverging" in stats else 0
    chains, draws = idata["posterior"].sizes["chain"], idata["posterior"].sizes["draw"]
    report: dict[str, Any] = {"divergences": n_div}
    messages = []
    if n_div:
        messages.append(
            f"There were {n_div} divergences after tuning. Increase target_accept or "
            "reparameterize."
        )
    at_max = int((stats["tree_depth"] >= max_treedepth).sum()) if "tree_depth" in stats else 0
    if at_max > 0.05 * chains * draws:
        messages.append(
            f"{at_max} draws reached the maximum tree depth ({max_treedepth}); increase "
            "max_treedepth, reparameterize, or check the posterior's geometry."
        )
    if chains > 1 and draws >= 4:
        arrays = [v.values for v in idata["posterior"].data_vars.values()]
        rhat, ess, screened = _screened_rhat_ess(arrays, min_ess=100 * chains)
        max_rhat = float(np.nanmax(rhat, initial=-np.inf)) if rhat.size else np.nan
        min_ess = float(np.nanmin(ess, initial=np.inf)) if ess.size else np.nan
        max_rhat = max_rhat if np.isfinite(max_rhat) else float("nan")  # no finite R-hat
        min_ess = min_ess if np.isfinite(min_ess) else float("nan")
        report.update(max_rhat=max_rhat, min_ess_bulk=min_ess, screened_draws=screened)
        if max_rhat > 1.01:
            messages.append(
                f"The rhat statistic is larger than 1.01 for some parameters (max "
                f"{max_rhat:.3f}); the chains have not mixed."
            )
        if min_ess < 100 * chains:
            messages.append(
                f"The effective sample size per chain is smaller than 100 for some "
                f"parameters (min bulk ESS {min_ess:.0f} over {chains} chains)."
            )
    if warn:
        for message in messages:
            warnings.warn(message, SamplingWarning, stacklevel=3)
    return report


def _screened_rhat_ess(
    arrays: list[np.ndarray], min_ess: float
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Return exact R-hat and bulk ESS of the elements that decide the warnings.

    Every element of the ``(chain, draw, ...)`` arrays when the run is short; otherwise
    those a screen on ``SCREEN_DRAWS`` draws per chain picks (see :func:`check_diagnostics`).
    Also returns the screen's draws per chain (None: no screen).
    """
    if not arrays:
        return np.empty(0), np.empty(0), None
    chains, draws = arrays[0].shape[:2]
    rows = np.concatenate([np.reshape(a, (chains, draws, -1)) for a in arrays], axis=2)
    step = draws // SCREEN_DRAWS
    if step < 2:
        rhat, ess = _rhat_ess_rows(rows)
        return rhat, ess, None
    thin = np.ascontiguousarray(rows[:, ::step][:, :SCREEN_DRAWS])
    rhat_s, ess_s = _rhat_ess_rows(thin)
    with np.errstate(invalid="ignore"):
        suspect = (rhat_s > _SCREEN_RHAT) | (ess_s < 2 * min_ess) | np.isnan(rhat_s)
    picked = set(np.flatnonzero(suspect).tolist())
    for values, worst in ((rhat_s, np.nanargmax), (ess_s, np.nanargmin)):
        if np.isfinite(values).any():
            picked.add(int(worst(values)))
    index = np.array(sorted(picked), dtype=np.intp)
    rhat, ess = _rhat_ess_rows(np.ascontiguousarray(rows[:, :, index]))
    return rhat, ess, thin.shape[1]


def _rhat_ess_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`rhat_ess` of the elements of one ``(chain, draw, k)`` array.

    Split in two halves computed in two threads (NumPy's sorts and FFTs release the GIL).
    """
    half = rows.shape[2] // 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if half < 8:
            return rhat_ess(rows)
        parts = [rows[..., :half], rows[..., half:]]
        with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
            done = list(pool.map(rhat_ess, parts))
    return np.concatenate([done[0][0], done[1][0]]), np.concatenate([done[0][1], done[1][1]])
