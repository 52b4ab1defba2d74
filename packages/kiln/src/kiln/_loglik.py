"""``kl.compute_log_likelihood`` and ``kl.compute_deterministics`` over a posterior.

Both compile the model's expressions once as a function of the free variables'
constrained values, batched over every posterior draw (:mod:`kiln._batched`), and
return xarray data with the sample dims ``(chain, draw)`` and the model's dims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kiln._batched import as_dataset, draws_dataset, posterior_function, stacked_draws
from kiln._predictive import _names_list, _posterior
from kiln._sampling import _mode
from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model import Model, modelcontext

__all__ = ["compute_deterministics", "compute_log_likelihood"]

_SAMPLE_DIMS = ("chain", "draw")


def _checked_names(var_names: Any, valid: list[str], what: str) -> list[str]:
    names = _names_list(var_names)
    if names is None:
        return valid
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise KilnValueError(f"var_names: {unknown} are not {what} of the model; valid: {valid}")
    return names


def _observed_terms(m: Model, names: Sequence[str]) -> list[TensorVariable]:
    """Return each observed variable's elementwise log-density, in terms of the draws."""
    terms = []
    for name in names:
        info = m.variables[name]
        value = info.value
        if value.dtype != info.rv.dtype:
            value = kt.cast(value, info.rv.dtype)
        terms.append(kt.as_tensor(info.distribution.logp(value, *info.params)))
    return terms


def compute_log_likelihood(
    idata: Any,
    var_names: Sequence[str] | None = None,
    model: Model | None = None,
    extend_inferencedata: bool = True,
    *,
    backend: str | None = None,
    compile_kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """Compute the elementwise log-likelihood of the observed variables at every draw.

    Parameters
    ----------
    idata
        An ArviZ ``DataTree`` with a ``posterior`` group (from :func:`kiln.sample`).
    var_names
        The observed variables (default: all of them).
    model
        The model (default: the one of the ``with`` block).
    extend_inferencedata
        Add the group ``log_likelihood`` to ``idata`` (replacing one there) and return
        ``idata``; with False, return the group as an xarray ``Dataset``.
    backend, compile_kwargs
        As for :func:`kiln.sample` (default: the default backend).

    Returns
    -------
    ``idata``, or the ``Dataset``: one variable per observed variable with dims
    ``(chain, draw, *its dims)``, the log-density of each observation at each draw
    (a multivariate variable's core dimensions summed).

    Examples
    --------
    >>> with model:  # doctest: +SKIP
    ...     idata = kl.sample()
    ...     kl.compute_log_likelihood(idata)
    """
    if not isinstance(extend_inferencedata, bool):
        raise KilnTypeError(
            f"extend_inferencedata: expected a bool, got {type(extend_inferencedata).__name__}"
        )
    m = modelcontext(model)
    post = _posterior(idata)
    observed = [v.name for v in m.observed_variables]
    if not observed:
        raise KilnValueError("the model has no observed variables: there is no likelihood")
    names = _checked_names(var_names, observed, "observed variables")
    f = posterior_function(m, _observed_terms(m, names), _mode(backend, compile_kwargs))
    values, shape = stacked_draws(post, f.names, _SAMPLE_DIMS)
    arrays = dict(zip(names, f(values, int(shape[0] * shape[1])), strict=True))
    dataset = draws_dataset(m, arrays, post, _SAMPLE_DIMS, shape)
    if not extend_inferencedata:
        return dataset
    import xarray as xr  # pandas: half of `import kiln`, so on use

    idata["log_likelihood"] = xr.DataTree(dataset=dataset)
    return idata


def compute_deterministics(
    dataset: Any,
    var_names: Sequence[str] | None = None,
    model: Model | None = None,
    merge_dataset: bool = False,
    *,
    sample_dims: Sequence[str] = _SAMPLE_DIMS,
    backend: str | None = None,
    compile_kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """Recompute the model's deterministics from the free variables of a posterior.

    Parameters
    ----------
    dataset
        An xarray ``Dataset`` (or a DataTree group, e.g. ``idata.posterior``) holding
        the free variables' constrained values with the dims ``sample_dims``.
    var_names
        The deterministics to compute (default: all of them).
    model
        The model (default: the one of the ``with`` block).
    merge_dataset
        Return ``dataset`` with the deterministics added (replacing those there)
        instead of a Dataset of the deterministics alone.
    sample_dims
        The dims of the draws (default ``("chain", "draw")``).
    backend, compile_kwargs
        As for :func:`kiln.sample` (default: the default backend).

    Returns
    -------
    An xarray ``Dataset``: each deterministic with dims ``(*sample_dims, *its dims)``.
    Deterministics of Data take the Data's current values (after ``kl.set_data``).

    Examples
    --------
    >>> with model:  # doctest: +SKIP
    ...     dets = kl.compute_deterministics(idata.posterior)
    """
    if not isinstance(merge_dataset, bool):
        raise KilnTypeError(f"merge_dataset: expected a bool, got {type(merge_dataset).__name__}")
    if isinstance(sample_dims, str):
        sample_dims = (sample_dims,)
    m = modelcontext(model)
    data = as_dataset(dataset, "dataset")
    valid = list(m.deterministics)
    if not valid:
        raise KilnValueError("the model has no deterministics")
    names = _checked_names(var_names, valid, "deterministics")
    f = posterior_function(m, [m.deterministics[n] for n in names], _mode(backend, compile_kwargs))
    values, shape = stacked_draws(data, f.names, sample_dims)
    draws = 1
    for n in shape:
        draws *= n
    arrays = dict(zip(names, f(values, draws), strict=True))
    out = draws_dataset(m, arrays, data, sample_dims, shape)
    if merge_dataset:
        return data.drop_vars([n for n in names if n in data.data_vars]).merge(out)
    return out
