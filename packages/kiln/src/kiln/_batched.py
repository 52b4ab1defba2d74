"""Functions of a model's free variables evaluated at many posterior draws in one call.

:func:`posterior_function` compiles expressions of a model (log-likelihood terms,
deterministics) as ONE function of the free variables' constrained values stacked
along a leading axis of draws: the expressions are batched with
``kiln.tensor.vectorize``, as the compiled model's ``expand_draws`` batches the
posterior. Data (shared variables) are unbatched inputs, read at each call. Where a
graph cannot be batched the function evaluates draw by draw, and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_compile import Mode, function
from kiln_graph import (
    Constant,
    KilnTypeError,
    KilnValueError,
    TensorVariable,
    Variable,
    ancestors,
    graph_replace,
)
from kiln_graph import tensor as kt
from kiln_model import Model


class PosteriorFunction:
    """``values -> outputs`` at every draw: see :func:`posterior_function`.

    Attributes
    ----------
    names
        The free variables whose values the function takes, in order.
    problem
        Why the function evaluates draw by draw (None: it is batched).
    """

    def __init__(
        self,
        names: list[str],
        inputs: list[TensorVariable],
        call: Callable[[list[np.ndarray], int], list[np.ndarray]],
        problem: str | None,
    ) -> None:
        self.names = names
        self._inputs = inputs
        self._call = call
        self.problem = problem

    def __call__(self, values: dict[str, np.ndarray], draws: int) -> list[np.ndarray]:
        """Return each output at ``draws`` draws: ``values[name]`` is ``(draws, *shape)``."""
        arrays = []
        for name, var in zip(self.names, self._inputs, strict=True):
            arr = np.asarray(values[name])
            core = arr.shape[1:]
            want = var.type.shape
            if len(core) != len(want) or any(
                s is not None and s != c for s, c in zip(want, core, strict=True)
            ):
                raise KilnValueError(
                    f"the posterior of {name!r} has shape {core} per draw; the model's "
                    f"variable has shape {tuple(want)}"
                )
            arrays.append(np.ascontiguousarray(arr, dtype=var.dtype))
        return self._call(arrays, draws)


def posterior_function(
    model: Model, outputs: Sequence[Variable], mode: Mode | str | None = None
) -> PosteriorFunction:
    """Compile ``outputs`` (expressions of ``model``'s variables) over stacked draws.

    Each free variable's draw in ``outputs`` is replaced by an input holding its
    constrained value; each observed variable's draw by its data. The returned
    function takes ``{free variable name: (draws, *shape) array}`` (only the variables
    the outputs depend on, listed in ``.names``) and returns each output with a leading
    axis of draws.
    """
    free = model.free_variables
    inputs = {
        info.name: kt.tensor(info.name, dtype=info.rv.dtype, shape=info.rv.type.shape)
        for info in free
    }
    replace: dict[Variable, Variable] = {info.rv: inputs[info.name] for info in free}
    for info in model.observed_variables:
        value = info.value
        if value.dtype != info.rv.dtype:
            value = kt.cast(value, info.rv.dtype)
        replace[info.rv] = value
    outs: list[Variable] = list(graph_replace(list(outputs), replace, strict=False))  # type: ignore[arg-type]
    used = set(ancestors(outs))
    names = [n for n, v in inputs.items() if v in used]
    point = [inputs[n] for n in names]
    # Data (shared variables) are the same for every draw: unbatched inputs.
    roots = [
        v
        for v in ancestors(outs)
        if v.owner is None and not isinstance(v, Constant) and v not in point
    ]
    try:
        call = _batched(point, roots, outs, mode)
        problem = None
    except (KilnTypeError, KilnValueError, NotImplementedError) as exc:
        call = _per_draw(point, outs, mode)
        problem = f"{type(exc).__name__}: {exc}"
    return PosteriorFunction(names, point, call, problem)


def _core(prefix: str, k: int, ndim: int) -> str:
    return "(" + ",".join(f"{prefix}{k}_{j}" for j in range(ndim)) + ")"


def _batched(
    point: list[TensorVariable],
    roots: list[Variable],
    outs: list[Variable],
    mode: Mode | str | None,
) -> Callable[[list[np.ndarray], int], list[np.ndarray]]:
    """Return the one-call evaluation of ``outs`` over a leading axis of draws."""
    if not all(isinstance(r, TensorVariable) for r in roots):
        raise KilnTypeError("the expressions depend on a value that is not a tensor")
    n_point = len(point)
    signature = (
        ",".join(
            [_core("i", k, p.ndim) for k, p in enumerate(point)]
            + [_core("r", k, getattr(r, "ndim", 0)) for k, r in enumerate(roots)]
        )
        + "->"
        + ",".join(_core("o", k, getattr(o, "ndim", 0)) for k, o in enumerate(outs))
    )

    def one_draw(*values: Variable) -> list[Variable]:
        swap = dict(zip([*point, *roots], values, strict=True))
        return graph_replace(outs, swap, strict=False)  # type: ignore[return-value]

    stacked = [
        kt.tensor(f"{p.name}_draws", dtype=p.dtype, shape=(None, *p.type.shape)) for p in point
    ]
    batched = kt.vectorize(one_draw, signature)(*stacked, *roots)
    batched = list(batched) if isinstance(batched, list | tuple) else [batched]
    f = function(stacked, batched, mode=mode)

    def call(arrays: list[np.ndarray], draws: int) -> list[np.ndarray]:
        values = f(*arrays)
        values = values if isinstance(values, list) else [values]
        # An output that depends on no free variable is not batched: repeat it per draw.
        return [
            np.asarray(v)
            if n_point and np.ndim(v) == o.ndim + 1  # type: ignore[attr-defined]
            else np.broadcast_to(np.asarray(v), (draws, *np.shape(v))).copy()
            for v, o in zip(values, outs, strict=True)
        ]

    return call


def _per_draw(
    point: list[TensorVariable], outs: list[Variable], mode: Mode | str | None
) -> Callable[[list[np.ndarray], int], list[np.ndarray]]:
    """Return the evaluation of ``outs`` draw by draw (a graph that cannot be batched)."""
    f = function(point, outs, mode=mode)

    def call(arrays: list[np.ndarray], draws: int) -> list[np.ndarray]:
        collected: list[list[np.ndarray]] = [[] for _ in outs]
        for d in range(draws):
            values = f(*[a[d] for a in arrays])
            values = values if isinstance(values, list) else [values]
            for store, v in zip(collected, values, strict=True):
                store.append(np.asarray(v))
        return [np.stack(c) for c in collected]

    return call


def as_dataset(data: Any, what: str) -> Any:
    """Return ``data`` as an xarray ``Dataset`` (a DataTree node is converted)."""
    if hasattr(data, "to_dataset") and hasattr(data, "children"):
        return data.to_dataset()
    if not hasattr(data, "data_vars"):
        raise KilnTypeError(
            f"{what}: expected an xarray Dataset (e.g. idata.posterior), got {type(data).__name__}"
        )
    return data


def stacked_draws(
    dataset: Any, names: Sequence[str], sample_dims: Sequence[str]
) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """Return ``{name: (draws, *shape)}`` of ``names`` in ``dataset`` and its sample shape.

    The sample dims (``("chain", "draw")``) are flattened into one leading axis.
    """
    missing_dims = [d for d in sample_dims if d not in dataset.dims]
    if missing_dims:
        raise KilnValueError(
            f"the dataset has no dimension(s) {missing_dims}; its dims are {list(dataset.dims)} "
            "(give sample_dims=)"
        )
    shape = tuple(int(dataset.sizes[d]) for d in sample_dims)
    missing = [n for n in names if n not in dataset.data_vars]
    if missing:
        raise KilnValueError(
            f"the dataset has no values of {missing}; it holds "
            f"{sorted(map(str, dataset.data_vars))}"
        )
    values = {}
    for n in names:
        arr = dataset[n].transpose(*sample_dims, ...).values
        values[n] = arr.reshape(int(np.prod(shape)), *arr.shape[len(shape) :])
    return values, shape


def draws_dataset(
    model: Model,
    arrays: dict[str, np.ndarray],
    dataset: Any,
    sample_dims: Sequence[str],
    sample_shape: tuple[int, ...],
) -> Any:
    """Return an xarray ``Dataset`` of ``arrays`` (``(draws, ...)``), reshaped to the samples.

    Dims: the sample dims (with ``dataset``'s coords), then the model's dims of each
    variable (where they fit its shape; ArviZ's ``<name>_dim_<i>`` otherwise), with the
    model's coords where their lengths fit.
    """
    import xarray as xr  # pandas: half of `import kiln`, so on use

    coords: dict[str, Any] = {d: dataset[d].values for d in sample_dims if d in dataset.coords}
    variables = {}
    for name, arr in arrays.items():
        arr = arr.reshape(*sample_shape, *arr.shape[1:])
        core = arr.shape[len(sample_shape) :]
        named = model.named_dims.get(name) or ()
        dims = [named[i] if i < len(named) else f"{name}_dim_{i}" for i in range(len(core))]
        for d, n in zip(dims, core, strict=True):
            labels = model.coords.get(d)
            if labels is not None and len(labels) == n:
                coords[d] = list(labels)
        variables[name] = ([*sample_dims, *dims], arr)
    return xr.Dataset(variables, coords=coords)
