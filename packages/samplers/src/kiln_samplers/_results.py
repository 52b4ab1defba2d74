"""Sampling results as ArviZ data (an xarray ``DataTree``, ArviZ >= 1.0), and warnings."""

from __future__ import annotations

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
    """Return the groups ``posterior``, ``sample_stats`` (+ data groups) as a DataTree."""
    # Imported here: arviz_base (xarray, pandas) is most of the time of importing this
    # package, which a process that only runs the compiled kernel does not need.
    import arviz_base

    groups: dict[str, Any] = {"posterior": trace.posterior, "sample_stats": trace.sample_stats}
    if observed_data:
        groups["observed_data"] = dict(observed_data)
    if constant_data:
        groups["constant_data"] = dict(constant_data)
    clean_dims = {k: list(v) for k, v in (dims or {}).items() if v is not None}
    all_attrs = {
        "sampling_time": trace.sampling_time,
        "tuning_steps": trace.tuning_steps,
        "interrupted": int(trace.interrupted),
        **({"nuts_kernel": trace.kernel} if trace.kernel is not None else {}),
        **({"n_leapfrog": trace.n_leapfrog} if trace.n_leapfrog is not None else {}),
        **(attrs or {}),
    }
    clean_coords = {k: list(v) for k, v in (coords or {}).items()}
    tree = arviz_base.from_dict(groups, dims=clean_dims, coords=clean_coords)
    tree.attrs.update(all_attrs)
    tree["posterior"].attrs.update(all_attrs)
    return tree


def check_diagnostics(idata: Any, max_treedepth: int, warn: bool = True) -> dict[str, Any]:
    """Warn, as PyMC does, about divergences, R-hat > 1.01, low bulk ESS, full trees.

    R-hat and ESS are ArviZ's rank-normalized split R-hat and bulk ESS, computed for all
    elements at once (:mod:`kiln_samplers._diagnostics`).
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            both = [rhat_ess(v.values) for v in idata["posterior"].data_vars.values()]
        max_rhat = max((float(np.nanmax(r, initial=-np.inf)) for r, _ in both), default=np.nan)
        min_ess = min((float(np.nanmin(e, initial=np.inf)) for _, e in both), default=np.nan)
        max_rhat = max_rhat if np.isfinite(max_rhat) else float("nan")  # no finite R-hat
        min_ess = min_ess if np.isfinite(min_ess) else float("nan")
        report.update(max_rhat=max_rhat, min_ess_bulk=min_ess)
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
