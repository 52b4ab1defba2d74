"""Imputation of missing observed values: NaN or masked entries of ``observed=``.

A variable whose observed data has missing entries is split in two, as PyMC does:
``<name>_observed``, an observed variable of the present entries, and
``<name>_unobserved``, a free variable of the missing ones (sampled with the
distribution's default transform), both with the parameters taken at their positions;
``<name>`` is then a Deterministic joining them in the data's shape. An
:class:`ImputationWarning` says how many values are imputed and under which name.

The split needs an elementwise distribution (no core dimensions) whose log-density is
its own class's, with parameters that broadcast against the data; anything else is a
:class:`ModelError` naming the variable.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, SharedVariable, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model._errors import ModelError
from kiln_model._model import Deterministic, Model


class ImputationWarning(UserWarning):
    """Missing (NaN or masked) observed values are imputed: sampled as a free variable."""


def missing_mask(name: str, observed: Any) -> np.ndarray | None:
    """Return the boolean mask of the missing entries of ``observed``, or None if none.

    Missing entries are NaN or masked (a ``numpy.ma.MaskedArray``). A Data (shared)
    variable holding NaN is refused: its values may change with ``set_data``, so the
    positions to impute are not fixed.
    """
    if isinstance(observed, SharedVariable):
        value = np.asarray(observed.get_value(borrow=True))
        if value.dtype.kind == "f" and np.isnan(value).any():
            raise ModelError(
                f"{name}: the observed Data {observed.name!r} holds NaN; missing values can be "
                "imputed only in observed arrays (their positions must be fixed): pass the "
                "array itself as observed=, or drop the missing entries from the Data"
            )
        return None
    if isinstance(observed, Variable):
        return None  # refused, with its own message, by the observed-data check
    if isinstance(observed, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(observed)
        data = np.asarray(observed.data)
    else:
        data = np.asarray(observed)
        mask = np.zeros(data.shape, dtype=bool)
    if data.dtype.kind == "f":
        mask = mask | np.isnan(data)
    return mask if mask.any() else None


def impute(
    cls: Any,
    model: Model,
    name: str,
    observed: Any,
    mask: np.ndarray,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dims: tuple[str, ...] | None,
    shape: Any,
    free_options: dict[str, Any],
) -> TensorVariable:
    """Register ``name`` of ``model`` as observed and imputed parts joined by a Deterministic.

    ``cls`` is the distribution; ``args`` and ``kwargs`` the user's parameters, indexed
    here to each part's positions; ``mask`` marks the missing entries of ``observed``;
    ``dims`` or ``shape`` (if given) must fit the data; ``free_options`` (``initval``,
    ``transform``) go to the free part. Returns the joined variable (all values
    missing: the free variable ``name`` itself).
    """
    full = model.prefixed(name)
    data = np.asarray(observed.data if isinstance(observed, np.ma.MaskedArray) else observed)
    shape_t = data.shape
    _check_shape(model, full, dims, shape, shape_t)
    if cls.core_ndim():
        raise ModelError(
            f"{full}: the observed data holds {int(mask.sum())} missing (NaN or masked) "
            f"value(s), but {cls.__name__} is multivariate; kiln imputes missing values of "
            "elementwise (univariate) distributions only: drop the rows with missing values"
        )
    try:
        probe = cls.dist(*args, shape=shape_t, **kwargs)
    except (KilnValueError, KilnTypeError) as exc:
        raise type(exc)(f"{full}: {exc}") from exc
    dist, _ = cls.density_of(probe)
    if dist is not cls:
        raise ModelError(
            f"{full}: the observed data holds {int(mask.sum())} missing (NaN or masked) "
            f"value(s), but {cls.__name__} is built from other distributions, whose "
            "parameters cannot be split between the observed and the missing entries; "
            "drop the missing values"
        )
    missing = np.flatnonzero(mask)
    present = np.flatnonzero(~mask)
    warnings.warn(
        f"{full}: {missing.size} of {mask.size} observed values are missing (NaN or masked) "
        f"and are imputed: sampled as the free variable {full}_unobserved; {full} joins them "
        f"with the observed values ({full}_observed)",
        ImputationWarning,
        stacklevel=3,
    )
    if present.size == 0:
        where = {"dims": dims} if dims is not None else {"shape": shape_t}
        return cls(name, *args, **where, **free_options, **kwargs, model=model)

    def at(index: np.ndarray) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (
            tuple(_indexed(full, i, a, shape_t, index) for i, a in enumerate(args)),
            {k: _indexed(full, k, v, shape_t, index) for k, v in kwargs.items()},
        )

    miss_args, miss_kwargs = at(missing)
    options = dict(free_options)
    initval = options.get("initval")
    if initval is not None and not isinstance(initval, Variable):
        options["initval"] = _indexed(full, "initval", initval, shape_t, missing)
    unobserved = cls(
        f"{name}_unobserved",
        *miss_args,
        shape=(missing.size,),
        **options,
        **miss_kwargs,
        model=model,
    )
    obs_args, obs_kwargs = at(present)
    values = data.reshape(-1)[present]
    observed_rv = cls(
        f"{name}_observed",
        *obs_args,
        shape=(present.size,),
        observed=values,
        **obs_kwargs,
        model=model,
    )
    joined = kt.zeros((mask.size,), dtype=probe.dtype)
    joined = kt.set_subtensor(joined[kt.constant(missing)], unobserved)
    joined = kt.set_subtensor(joined[kt.constant(present)], observed_rv)
    return Deterministic(name, kt.reshape(joined, shape_t), dims=dims, model=model)


def _check_shape(
    model: Model, full: str, dims: tuple[str, ...] | None, shape: Any, data_shape: tuple[int, ...]
) -> None:
    """Raise unless ``dims`` / ``shape`` (where given) fit the observed data's shape."""
    if dims is not None and shape is not None:
        raise ModelError(f"{full}: give dims or shape, not both")
    if shape is not None:
        given = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        if given != data_shape:
            raise ModelError(
                f"{full}: shape {given} does not fit the observed data's shape {data_shape}"
            )
    if dims is not None:
        lengths = model.shape_from_dims(dims, full)
        if len(lengths) != len(data_shape) or any(
            isinstance(n, int | np.integer) and n != k
            for n, k in zip(lengths, data_shape, strict=False)
        ):
            raise ModelError(
                f"{full}: dims {dims} have lengths {lengths}, the observed data has shape "
                f"{data_shape}"
            )


def _indexed(full: str, which: Any, param: Any, shape: tuple[int, ...], index: np.ndarray) -> Any:
    """Return ``param`` broadcast to the data's ``shape``, flattened, at ``index``.

    The parameters were checked to broadcast by drawing the whole variable once; an
    ``initval`` was not.
    """
    if param is None or isinstance(param, str | bool):
        return param
    if isinstance(param, Variable):
        tensor = kt.as_tensor(param)
        if tensor.ndim == 0:
            return param
        flat = kt.reshape(kt.broadcast_to(tensor, shape), (-1,))
        return flat[kt.constant(index)]
    try:
        value = np.asarray(param)
    except Exception:  # noqa: BLE001 (not array-like: reported below)
        value = None
    if value is None or value.dtype.kind not in "biuf":
        raise ModelError(
            f"{full}: missing observed values are imputed by splitting the parameters between "
            f"the observed and the missing entries, but parameter {which!r} is {param!r}, "
            "not an array; drop the missing values"
        )
    if value.ndim == 0:
        return param
    try:
        return np.broadcast_to(value, shape).reshape(-1)[index]
    except ValueError:
        raise _unsplittable(full, which, value.shape, shape) from None


def _unsplittable(full: str, which: Any, got: tuple[Any, ...], shape: tuple[int, ...]) -> Exception:
    what = "initval" if which == "initval" else f"parameter {which!r}"
    return ModelError(
        f"{full}: to impute the missing observed values, {what} (shape {got}) must "
        f"broadcast against the observed data (shape {shape}); it does not"
    )
