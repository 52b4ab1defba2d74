"""Sampling results as ArviZ data (an xarray ``DataTree``, ArviZ >= 1.0), and warnings."""

from __future__ import annotations

import concurrent.futures
import datetime
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kiln_samplers import _xarray_internals
from kiln_samplers._diagnostics import (
    EXACT,
    SCREENED,
    PendingRhatEss,
    rhat_ess,
    scratch,
    start_screened_rhat_ess,
)
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
        **({"nuts_metric": trace.metric} if trace.metric is not None else {}),
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
    return _xarray_internals.datatree(xarray, groups, all_attrs)


def _dataset(
    xarray: Any,
    values: Mapping[str, Any],
    dims: Mapping[str, list[Any]],
    coords: Mapping[str, np.ndarray],
    sample: tuple[str, ...],
) -> Any:
    """Return one group: each array with ``sample`` dims first, then its own dims."""
    data_vars: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
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
        data_vars[name] = (tuple(names), array)
    return _xarray_internals.dataset(xarray, data_vars, used)


#: Draws per chain the R-hat / ESS screen reads (every ``k``-th draw of a longer run).
SCREEN_DRAWS = 1000
#: A screened R-hat above this, or a screened bulk ESS below twice the warning's
#: threshold, sends the element to the exact computation on every draw. The screen's
#: R-hat is an estimate from fewer draws, not a bound: with 2 chains of 10^4 iid draws
#: shifted so that the exact R-hat is just above 1.01, the screen's R-hat was 0.004
#: from it (sd) and, rarely, 0.01 below. Of 3,900 such elements (2 and 3 chains, also
#: autocorrelated), a threshold of 1.005 passed 78 (their warning lost), 1.003 passed
#: 5, 1.002 passed 1; at 1.002, 8% of converged iid elements (28% of AR(0.9) ones) go
#: to the exact computation. A screen of 500 draws per chain lost more at every
#: threshold. Exact R-hat for every element costs more than M1's sampling (13 ms).
_SCREEN_RHAT = 1.002


def check_diagnostics(
    idata: Any,
    max_treedepth: int,
    warn: bool = True,
    exact_extremes: bool = True,
    var_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Warn, as PyMC does, about divergences, R-hat > 1.01, low bulk ESS, full trees.

    ``idata`` is a DataTree of :func:`to_datatree` (groups ``posterior`` and
    ``sample_stats``) or the :class:`Trace` it is built from (the same numbers, read
    without xarray). R-hat and ESS are ArviZ's rank-normalized split R-hat and bulk ESS
    (:mod:`kiln_samplers._diagnostics`). For at least ``2 * SCREEN_DRAWS`` draws per
    chain, every element is first screened on ``SCREEN_DRAWS`` evenly spaced draws per
    chain; the elements whose screen comes near a threshold (R-hat above 1.002, bulk
    ESS below twice the warning's threshold, or NaN) are computed exactly on every
    draw, and only exact values give a warning. Thinning lowers ESS, so an element the
    screen passes would pass on every draw. The screen's R-hat is an estimate, hence
    its margin; an element whose exact R-hat is within about 0.003 above 1.01 can still
    pass it, rarely (2 of 4,100 such elements in the measurements of ``_SCREEN_RHAT``).

    Returns a report: ``divergences``, ``messages`` (the warnings' texts, given as
    :class:`SamplingWarning` when ``warn``) and, for more than one chain, ``max_rhat``,
    ``min_ess_bulk`` and ``screened_draws`` (the screen's draws per chain; None: no
    screen, every value exact). With ``exact_extremes`` the element the screen ranks
    worst for R-hat and the one for ESS are computed exactly too, so that ``max_rhat``
    and ``min_ess_bulk`` are exact values; without it (what ``kl.sample``, which shows
    only the warnings, asks for) the elements the screen passes keep their screened
    values in the report, and the report's extremes are exact whenever they warn.

    ``var_names`` limits R-hat and ESS to those posterior variables (default: all);
    ``kl.sample`` passes the free variables, as PyMC's convergence checks do (a
    deterministic is a function of them).
    """
    posterior, stats = _checked_arrays(idata, var_names)
    report = _diagnose(posterior, stats, max_treedepth, exact_extremes)
    if warn:
        for message in report["messages"]:
            warnings.warn(message, SamplingWarning, stacklevel=3)
    return report


def start_check_diagnostics(
    idata: Any,
    max_treedepth: int,
    exact_extremes: bool = True,
    var_names: Sequence[str] | None = None,
) -> Callable[[], dict[str, Any]]:
    """Start :func:`check_diagnostics`; return the function that finishes it.

    The returned function waits for the check, warns as :func:`check_diagnostics` does
    (in its caller's thread) and returns the report. Where this process has loaded the
    C library, R-hat and ESS are computed in threads of it that never take the GIL, so
    the caller's thread works meanwhile (``kl.sample`` builds the DataTree, on the
    otherwise idle second core); otherwise when the returned function is called. The
    arguments are checked now.
    """
    posterior, stats = _checked_arrays(idata, var_names)
    arrays = [np.asarray(v) for v in posterior.values()]
    chains = arrays[0].shape[0] if arrays else 0
    started = _start_native(arrays, 100 * chains, exact_extremes) if chains > 1 else None

    def finish() -> dict[str, Any]:
        native = started() if started is not None else None
        report = _diagnose(posterior, stats, max_treedepth, exact_extremes, native)
        for message in report["messages"]:
            warnings.warn(message, SamplingWarning, stacklevel=3)
        return report

    return finish


def _checked_arrays(
    idata: Any, var_names: Sequence[str] | None
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Return the posterior (``var_names`` of it) and statistics arrays of ``idata``."""
    if isinstance(idata, Trace):
        posterior, stats = dict(idata.posterior), dict(idata.sample_stats)
    else:
        posterior = {k: v.values for k, v in idata["posterior"].data_vars.items()}
        stats = {k: v.values for k, v in idata["sample_stats"].data_vars.items()}
    if var_names is not None:
        missing = sorted(set(var_names) - set(posterior))
        if missing:
            raise KeyError(f"var_names: {missing} are not in the posterior ({sorted(posterior)})")
        posterior = {k: posterior[k] for k in var_names}
    return posterior, stats


def _diagnose(
    posterior: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
    max_treedepth: int,
    exact_extremes: bool,
    native: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Return :func:`check_diagnostics`'s report of the ``(chain, draw, ...)`` arrays.

    ``native``: the C library's R-hat, ESS and status of the posterior's elements, when
    :func:`_start_native` computed them already.
    """
    # Gradient-free steps have no divergences nor trees (their stats differ from NUTS's).
    n_div = int(np.count_nonzero(stats["diverging"])) if "diverging" in stats else 0
    arrays = [np.asarray(v) for v in posterior.values()]
    chains, draws = arrays[0].shape[:2] if arrays else (0, 0)
    messages: list[str] = []
    report: dict[str, Any] = {"divergences": n_div, "messages": messages}
    if n_div:
        messages.append(
            f"There were {n_div} divergences after tuning. Increase target_accept or "
            "reparameterize."
        )
    at_max = (
        int(np.count_nonzero(stats["tree_depth"] >= max_treedepth)) if "tree_depth" in stats else 0
    )
    if at_max > 0.05 * chains * draws:
        messages.append(
            f"{at_max} draws reached the maximum tree depth ({max_treedepth}); increase "
            "max_treedepth, reparameterize, or check the posterior's geometry."
        )
    if chains > 1 and draws >= 4:
        rhat, ess, screened = _screened_rhat_ess(arrays, 100 * chains, exact_extremes, native)
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
    return report


def _columns(arrays: list[np.ndarray], chains: int, draws: int) -> list[np.ndarray]:
    """Return each ``(chain, draw, ...)`` array as ``(chain, draw, k)`` (views where possible)."""
    return [np.reshape(a, (chains, draws, -1)) for a in arrays]


def _element_rows(parts: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Return the ``(chain, draw, k_i)`` ``parts`` side by side as one ``(chain, draw, k)``.

    A transposed view of a contiguous ``(k, chain, draw)`` float array (``out``'s memory
    when given: a flat array of that size): the layout :func:`rhat_ess` works in.
    """
    chains, draws = parts[0].shape[:2]
    shape = (sum(p.shape[2] for p in parts), chains, draws)
    rows = np.empty(shape) if out is None else out.reshape(shape)
    at = 0
    for part in parts:
        rows[at : at + part.shape[2]] = part.transpose(2, 0, 1)
        at += part.shape[2]
    return rows.transpose(1, 2, 0)


def _start_native(
    arrays: list[np.ndarray], min_ess: float, exact_extremes: bool
) -> PendingRhatEss | None:
    """Start :func:`_screened_rhat_ess`'s work in the C library (None: not loaded)."""
    if not arrays or arrays[0].shape[1] < 4:
        return None
    chains, draws = arrays[0].shape[:2]
    step = draws // SCREEN_DRAWS
    return start_screened_rhat_ess(
        _columns(arrays, chains, draws), step, SCREEN_DRAWS, _SCREEN_RHAT, 2 * min_ess,
        extremes=exact_extremes,
    )  # fmt: skip


def _screened_rhat_ess(
    arrays: list[np.ndarray],
    min_ess: float,
    exact_extremes: bool = True,
    native: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Return R-hat and bulk ESS of every element: exact where they decide the warnings.

    Every element exactly when the run is short; otherwise the screen's values, replaced
    by the exact ones for the elements the screen picks (see :func:`check_diagnostics`).
    Also returns the screen's draws per chain (None: no screen). With ``exact_extremes``
    only the exact values are returned (the picked elements'). By the C library when it
    is loaded (:func:`kiln_samplers._diagnostics.start_screened_rhat_ess`; ``native``:
    its result, computed already), by NumPy otherwise.
    """
    if not arrays:
        return np.empty(0), np.empty(0), None
    chains, draws = arrays[0].shape[:2]
    columns = _columns(arrays, chains, draws)
    step = draws // SCREEN_DRAWS
    screened = SCREEN_DRAWS if step >= 2 else None
    if native is None:
        started = _start_native(arrays, min_ess, exact_extremes)
        native = started() if started is not None else None
    if native is not None:
        rhat, ess, status = native
        left = np.flatnonzero(status > EXACT)
        if left.size:  # (their ESS needs NumPy's transforms)
            rhat[left], ess[left] = _rhat_ess_rows(_gather(columns, left))
        if exact_extremes:
            exact = status != SCREENED
            return rhat[exact], ess[exact], screened
        return rhat, ess, screened
    if step < 2:
        rhat, ess = _rhat_ess_rows(_element_rows(columns))
        return rhat, ess, None
    size = sum(c.shape[2] for c in columns) * chains * SCREEN_DRAWS
    with scratch("screen", size) as out:
        thin = _element_rows([c[:, ::step][:, :SCREEN_DRAWS] for c in columns], out)
        rhat_s, ess_s = _rhat_ess_rows(thin)
    with np.errstate(invalid="ignore"):
        suspect = (rhat_s > _SCREEN_RHAT) | (ess_s < 2 * min_ess) | np.isnan(rhat_s)
    picked = set(np.flatnonzero(suspect).tolist())
    if exact_extremes:
        for values, worst in ((rhat_s, np.nanargmax), (ess_s, np.nanargmin)):
            if np.isfinite(values).any():
                picked.add(int(worst(values)))
    index = np.array(sorted(picked), dtype=np.intp)
    if index.size:
        rhat, ess = _rhat_ess_rows(_gather(columns, index))
    else:
        rhat, ess = np.empty(0), np.empty(0)
    if exact_extremes:
        return rhat, ess, screened
    rhat_s[index], ess_s[index] = rhat, ess
    return rhat_s, ess_s, screened


def _gather(columns: list[np.ndarray], index: np.ndarray) -> np.ndarray:
    """Return the elements ``index`` (of all columns side by side) as one array."""
    sizes = np.array([c.shape[2] for c in columns])
    ends = np.cumsum(sizes)
    parts = []
    for i in index.tolist():
        a = int(np.searchsorted(ends, i, side="right"))
        parts.append(columns[a][:, :, i - (ends[a] - sizes[a]), None])
    return _element_rows(parts)


def _rhat_ess_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`rhat_ess` of the elements of one ``(chain, draw, k)`` array.

    Split in two halves computed in two threads (NumPy's sorts and FFTs release the GIL)
    when there are many elements. Quiet (0/0 of constant elements gives NaN, as in
    ArviZ) through NumPy's error state, which is per thread, rather than the warnings
    filters, which are the process's (other threads of the caller's keep theirs).
    """
    if rows.shape[2] * rows.shape[1] < _THREADED_VALUES:
        return _quiet_rhat_ess(rows)
    half = rows.shape[2] // 2
    parts = [rows[..., :half], rows[..., half:]]
    with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
        done = list(pool.map(_quiet_rhat_ess, parts))
    return np.concatenate([done[0][0], done[1][0]]), np.concatenate([done[0][1], done[1][1]])


def _quiet_rhat_ess(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return rhat_ess(rows)  # type: ignore[no-any-return]


#: Elements x draws per chain above which :func:`_rhat_ess_rows` uses two threads.
_THREADED_VALUES = 50_000
