"""Prior and posterior predictive sampling: forward draws of a model, as ArviZ groups.

Both compile ONE forward function of the model's random draws (``kiln.function``,
which threads each shared generator through the draws and advances it per call) and
call it once per draw:

* :func:`sample_prior_predictive`: no inputs; outputs the draws of the free and
  observed variables and the deterministics. Groups ``prior`` (free variables and
  deterministics), ``prior_predictive`` (observed variables) and ``observed_data``.
* :func:`sample_posterior_predictive`: each free variable's draw is replaced by an
  input, fed with the posterior's values draw by draw; outputs the draws of the
  observed variables. Group ``posterior_predictive`` (or ``predictions``).

Data are shared variables, read at each call: after ``kl.set_data`` the same
compiled function draws at the new data (an observed variable whose size comes from
a dim bound to a Data variable's length follows it).

Seeds: each shared generator the function draws from is set, for the run, from
``np.random.SeedSequence(random_seed).spawn(n)`` (in the order the graph first uses
them) and put back afterwards, so a seed gives the same draws every time.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kiln._arguments import check_predictive_arguments
from kiln._sampling import _data_groups, _mode
from kiln_compile import function
from kiln_graph import (
    KilnTypeError,
    KilnValueError,
    RandomGeneratorType,
    ShapeMismatchError,
    SharedVariable,
    TensorVariable,
    Variable,
    graph_inputs,
    graph_replace,
)
from kiln_graph import tensor as kt
from kiln_model import Model, modelcontext
from kiln_samplers import progress_bar

__all__ = ["sample_posterior_predictive", "sample_prior_predictive"]


# --- helpers --------------------------------------------------------------------------------


def _names_list(var_names: Any) -> list[str] | None:
    if var_names is None:
        return None
    if isinstance(var_names, str):
        return [var_names]
    if not isinstance(var_names, Sequence) or not all(isinstance(n, str) for n in var_names):
        raise KilnTypeError(f"var_names: expected a list of variable names, got {var_names!r}")
    return list(dict.fromkeys(var_names))


def _check_names(names: list[str], valid: list[str], what: str) -> None:
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise KilnValueError(
            f"var_names: {unknown} are not {what} of the model; valid names: {valid}"
        )


def _generators(outputs: Sequence[Variable]) -> list[SharedVariable]:
    return [
        v
        for v in graph_inputs(list(outputs))
        if isinstance(v, SharedVariable) and isinstance(v.type, RandomGeneratorType)
    ]


class _Seeded:
    """Context: seed ``generators`` from ``random_seed``; put their states back at exit."""

    def __init__(self, generators: list[SharedVariable], random_seed: Any) -> None:
        self.generators = generators
        if isinstance(random_seed, np.random.Generator):
            random_seed = random_seed.integers(2**63)
        if isinstance(random_seed, np.random.SeedSequence):
            self.seq = random_seed
        else:
            try:
                self.seq = np.random.SeedSequence(random_seed)
            except (TypeError, ValueError) as exc:
                raise KilnTypeError(
                    f"random_seed: expected None, an int or a SeedSequence, got {random_seed!r}"
                ) from exc
        self.saved: list[Any] = []

    def __enter__(self) -> None:
        self.saved = [g.get_value(borrow=True) for g in self.generators]  # type: ignore[attr-defined]
        children = self.seq.spawn(len(self.generators))
        for g, child in zip(self.generators, children, strict=True):
            g.set_value(np.random.default_rng(child), borrow=True)  # type: ignore[attr-defined]

    def __exit__(self, *exc: Any) -> None:
        for g, value in zip(self.generators, self.saved, strict=True):
            g.set_value(value, borrow=True)  # type: ignore[attr-defined]


def _coords_for(
    model: Model, dims: Mapping[str, list[str]], *groups: tuple[Mapping[str, Any], int]
) -> dict[str, Any]:
    """Return the model's coords of the dims used, where their lengths fit every use.

    ``groups`` are ``(arrays, number of leading sample dims)``. A dim whose length
    followed ``set_data`` away from its labels gets ArviZ's default integer labels.
    """
    fits: dict[str, bool] = {}
    for arrays, skip in groups:
        for name, value in arrays.items():
            shape = np.shape(value)[skip:]
            for d, n in zip(dims.get(name, ()), shape, strict=False):
                labels = model.coords.get(d)
                fits[d] = fits.get(d, True) and labels is not None and len(labels) == n
    return {d: list(model.coords[d]) for d, ok in fits.items() if ok}


def _dims_of(model: Model, names: Sequence[str]) -> dict[str, list[str]]:
    dims = {}
    for n in names:
        d = model.named_dims.get(n)
        if d is not None:
            dims[n] = list(d)
    return dims


def _attach(idata: Any, tree: Any, groups: Sequence[str], replace: Sequence[str]) -> Any:
    """Add ``groups`` of ``tree`` to ``idata`` (those in ``replace`` even if present)."""
    for g in groups:
        if g in tree.children and (g in replace or g not in idata.children):
            idata[g] = tree[g]
    return idata


# --- prior predictive -----------------------------------------------------------------------


def sample_prior_predictive(
    draws: int = 500,
    var_names: Sequence[str] | None = None,
    random_seed: Any = None,
    model: Model | None = None,
    *,
    idata: Any = None,
    backend: str | None = None,
    compile_kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """Draw from the prior of ``model`` (the one of the ``with`` block) and its predictive.

    Parameters
    ----------
    draws
        Number of draws.
    var_names
        Names of the free variables, observed variables and deterministics to draw
        (default: all of them).
    random_seed
        An int, a ``np.random.SeedSequence`` or None (fresh entropy).
    idata
        An ArviZ ``DataTree`` to add the groups to (its ``prior`` and
        ``prior_predictive`` are replaced); by default a new one.
    backend, compile_kwargs
        As for :func:`kiln.sample` (default: the default backend).

    Returns
    -------
    A ``DataTree`` with the groups ``prior`` (free variables and deterministics),
    ``prior_predictive`` (observed variables), ``observed_data`` and ``constant_data``,
    sample dims ``(chain=1, draw)``, the model's dims and coords.

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 1)
    ...     y = kl.Normal("y", mu, 1, observed=[0.1, -0.3])
    ...     prior = kl.sample_prior_predictive(1000, random_seed=1)
    """
    check_predictive_arguments(
        random_seed=random_seed,
        backend=backend,
        compile_kwargs=compile_kwargs,
        var_names=var_names,
        model=model,
        draws=draws,
    )
    m = modelcontext(model)
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise KilnValueError(f"draws: expected a positive int, got {draws!r}")
    mode = _mode(backend, compile_kwargs)
    free = [v.name for v in m.free_variables]
    observed = [v.name for v in m.observed_variables]
    dets = list(m.deterministics)
    valid = [*free, *observed, *dets]
    names = _names_list(var_names)
    if names is None:
        names = valid
    else:
        _check_names(names, valid, "free variables, observed variables or deterministics")
    if not names:
        raise KilnValueError("the model has no variables to draw")
    if m.potentials:
        warnings.warn(
            f"sample_prior_predictive: the model's Potentials {list(m.potentials)} do not "
            "change forward draws; the prior is drawn as if they were absent",
            UserWarning,
            stacklevel=2,
        )
    outputs = [m[n] for n in names]
    f = function([], outputs, mode=mode)
    collected: list[list[np.ndarray]] = [[] for _ in names]
    with _Seeded(_generators(outputs), random_seed):
        for _ in range(int(draws)):
            values = f()
            values = values if isinstance(values, list) else [values]
            for store, v in zip(collected, values, strict=True):
                store.append(np.array(v))
    arrays = {n: np.stack(c)[None] for n, c in zip(names, collected, strict=True)}
    groups: dict[str, dict[str, np.ndarray]] = {}
    prior = {n: a for n, a in arrays.items() if n not in observed}
    predictive = {n: a for n, a in arrays.items() if n in observed}
    if prior:
        groups["prior"] = prior
    if predictive:
        groups["prior_predictive"] = predictive
    obs_data, const_data = _data_groups(m)
    if obs_data:
        groups["observed_data"] = obs_data
    if const_data:
        groups["constant_data"] = const_data
    dims = _dims_of(m, [*names, *obs_data, *const_data])
    coords = _coords_for(m, dims, (arrays, 2), (obs_data, 0), (const_data, 0))
    import arviz_base  # xarray and pandas: half of `import kiln`, so on use

    tree = arviz_base.from_dict(groups, dims=dims, coords=coords)
    if idata is None:
        return tree
    return _attach(idata, tree, list(groups), replace=["prior", "prior_predictive"])


# --- posterior predictive -------------------------------------------------------------------


def _posterior(idata: Any) -> Any:
    children = getattr(idata, "children", None)
    if children is None:
        raise KilnTypeError(
            f"idata: expected an ArviZ DataTree (from kl.sample), got {type(idata).__name__}"
        )
    if "posterior" not in children:
        raise KilnValueError(
            f"idata has no posterior group (its groups: {list(children)}); pass the result "
            "of kl.sample"
        )
    post = idata["posterior"].to_dataset()
    for d in ("chain", "draw"):
        if d not in post.dims:
            raise KilnValueError(f"idata: the posterior has no {d!r} dimension")
    return post


def _shape_error(
    m: Model, names: Sequence[str], outputs: Sequence[Variable], exc: Exception
) -> KilnValueError:
    """Explain a shape mismatch of a draw (typically after ``set_data``)."""
    data = set(m.data.values())
    fixed = []
    for n, out in zip(names, outputs, strict=True):
        shape = getattr(out.type, "shape", None)
        if (
            n in m.variables
            and shape is not None
            and None not in shape
            and any(v in data for v in graph_inputs([out]))
        ):
            fixed.append(f"{n} (fixed shape {tuple(shape)})")
    shapes = {n: np.shape(v.get_value(borrow=True)) for n, v in m.data.items()}  # type: ignore[attr-defined]
    hint = (
        f"{', '.join(fixed)} cannot follow new data: its size comes from constant observed "
        "data or fixed coords. Give its observed data as kl.Data with the dims of the data "
        "it follows (dims with no coords take their length from the data), and set_data "
        "it too (e.g. with zeros of the new length)"
        if fixed
        else "set_data every Data the observed variables' shapes follow to the same length "
        "(an observed kl.Data too, e.g. with zeros of the new length)"
    )
    return KilnValueError(
        f"posterior predictive: the draws' shapes do not fit the current data ({exc}). "
        f"{hint}. Data shapes now: {shapes}"
    )


def sample_posterior_predictive(
    idata: Any,
    var_names: Sequence[str] | None = None,
    random_seed: Any = None,
    predictions: bool = False,
    model: Model | None = None,
    progressbar: bool = True,
    *,
    extend_inferencedata: bool = True,
    backend: str | None = None,
    compile_kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """Draw the observed variables of ``model`` once per posterior draw of ``idata``.

    Parameters
    ----------
    idata
        An ArviZ ``DataTree`` with a ``posterior`` group (from :func:`kiln.sample`)
        holding the free variables' constrained values, dims ``(chain, draw, ...)``.
    var_names
        Observed variables and deterministics to draw (default: the observed
        variables); deterministics are recomputed (e.g. at new data); free variables
        named are copied from the posterior, or drawn given the posterior's values when
        it has none of them (a ``gp.conditional`` added after sampling), as in PyMC.
    random_seed
        An int, a ``np.random.SeedSequence`` or None (fresh entropy).
    predictions
        Store the draws in the group ``predictions`` (and the current Data in
        ``predictions_constant_data``) instead of ``posterior_predictive``: for
        out-of-sample prediction after ``kl.set_data``.
    progressbar
        Show a progress bar (tqdm).
    extend_inferencedata
        Add the group(s) to ``idata`` (replacing existing ones) and return it; with
        False, return a new ``DataTree`` holding only them.
    backend, compile_kwargs
        As for :func:`kiln.sample`.

    Examples
    --------
    >>> with model:  # doctest: +SKIP
    ...     idata = kl.sample()
    ...     kl.sample_posterior_predictive(idata, random_seed=1)
    ...     kl.set_data({"x": x_new})
    ...     kl.sample_posterior_predictive(idata, predictions=True)
    """
    check_predictive_arguments(
        random_seed=random_seed,
        backend=backend,
        compile_kwargs=compile_kwargs,
        var_names=var_names,
        model=model,
        flags={
            "predictions": predictions,
            "progressbar": progressbar,
            "extend_inferencedata": extend_inferencedata,
        },
    )
    post = _posterior(idata)
    m = modelcontext(model)
    mode = _mode(backend, compile_kwargs)
    free = {v.name: v for v in m.free_variables}
    names = _predictive_names(m, var_names, free)
    # A free variable the posterior lacks (a GP's conditional added after sampling) is
    # drawn given the others, as PyMC does; the others named are copied.
    held = {str(n) for n in post.data_vars}
    resampled = {n for n in names if n in free and n not in held}
    drawn = [n for n in names if n not in free or n in resampled]
    copied = [n for n in names if n in free and n not in resampled]

    inputs = {
        name: kt.tensor(name, dtype=info.rv.dtype, shape=info.rv.type.shape)
        for name, info in free.items()
        if name not in resampled
    }
    replace: dict[Variable, Variable] = {
        info.rv: inputs[name] for name, info in free.items() if name not in resampled
    }
    outputs: list[TensorVariable] = []
    if drawn:
        outputs = list(graph_replace([m[n] for n in drawn], replace, strict=False))  # type: ignore[arg-type]
    roots = set(graph_inputs(outputs)) if outputs else set()
    needed = [n for n, v in inputs.items() if v in roots]
    values = _posterior_values(post, inputs, needed, copied, names)

    results: dict[str, np.ndarray] = {n: values[n] for n in copied}
    if outputs:
        f = function([inputs[n] for n in needed], outputs, mode=mode)
        shape = (post.sizes["chain"], post.sizes["draw"])
        draws = _draw_per_point(
            f, m, drawn, outputs, [values[n] for n in needed], shape, random_seed, progressbar
        )
        results.update(zip(drawn, draws, strict=True))
    results = {n: results[n] for n in names}
    group = "predictions" if predictions else "posterior_predictive"
    tree, groups = _predictive_tree(m, post, group, results, names, predictions)
    if not extend_inferencedata:
        return tree
    return _attach(idata, tree, list(groups), replace=[group, "predictions_constant_data"])


def _predictive_names(m: Model, var_names: Sequence[str] | None, free: dict[str, Any]) -> list[str]:
    """Return the variables to draw or copy: ``var_names``, checked, or the observed ones."""
    observed = [v.name for v in m.observed_variables]
    valid = [*observed, *m.deterministics, *free]
    names = _names_list(var_names)
    if names is None:
        if not observed:
            raise KilnValueError(
                "the model has no observed variables; name deterministics to compute in "
                f"var_names (valid: {valid})"
            )
        names = observed
    else:
        _check_names(names, valid, "observed variables, deterministics or free variables")
    if not names:
        raise KilnValueError("var_names: no variables to draw")
    return names


def _posterior_values(
    post: Any,
    inputs: dict[str, TensorVariable],
    needed: list[str],
    copied: list[str],
    names: list[str],
) -> dict[str, np.ndarray]:
    """Return the posterior's ``(chain, draw, ...)`` values of ``needed`` and ``copied``.

    The values of ``needed`` (the inputs of the drawn variables) are checked against the
    model's shapes and given its dtypes.
    """
    missing = [n for n in [*needed, *copied] if n not in post.data_vars]
    if missing:
        raise KilnValueError(
            f"the posterior has no values of {missing} (needed for {names}); it holds "
            f"{sorted(map(str, post.data_vars))}"
        )
    values = {}
    for n in [*needed, *copied]:
        arr = post[n].transpose("chain", "draw", ...).values
        if n in needed:
            want = inputs[n].type
            core = arr.shape[2:]
            if len(core) != want.ndim or any(
                s is not None and s != c for s, c in zip(want.shape, core, strict=True)
            ):
                raise KilnValueError(
                    f"the posterior of {n!r} has shape {core} per draw; the model's variable "
                    f"has shape {tuple(want.shape)}"
                )
            arr = np.ascontiguousarray(arr, dtype=want.dtype)
        values[n] = arr
    return values


def _draw_per_point(
    f: Any,
    m: Model,
    drawn: list[str],
    outputs: list[TensorVariable],
    points: list[np.ndarray],
    shape: tuple[int, int],
    random_seed: Any,
    progressbar: bool,
) -> list[np.ndarray]:
    """Call ``f`` at every posterior point; return each output's ``(chain, draw, ...)`` draws."""
    chains, ndraws = shape
    collected: list[list[np.ndarray]] = [[] for _ in drawn]
    with (
        _Seeded(_generators(outputs), random_seed),
        progress_bar(chains * ndraws, "posterior predictive", enabled=progressbar) as bar,
    ):
        for c in range(chains):
            for d in range(ndraws):
                try:
                    out = f(*[p[c, d] for p in points])
                except ShapeMismatchError as exc:
                    raise _shape_error(m, drawn, outputs, exc) from exc
                for store, v in zip(collected, out, strict=True):
                    store.append(np.array(v))
                bar.update()
    out = []
    for store in collected:
        arr = np.stack(store)
        out.append(arr.reshape(chains, ndraws, *arr.shape[1:]))
    return out


def _predictive_tree(
    m: Model,
    post: Any,
    group: str,
    results: dict[str, np.ndarray],
    names: list[str],
    predictions: bool,
) -> tuple[Any, dict[str, dict[str, np.ndarray]]]:
    """Return the ``DataTree`` of the draws (with the data beside them) and its groups."""
    groups: dict[str, dict[str, np.ndarray]] = {group: results}
    const: dict[str, np.ndarray] = {}
    if predictions:
        const = {n: np.asarray(v.get_value()) for n, v in m.data.items()}  # type: ignore[attr-defined]
        if const:
            groups["predictions_constant_data"] = const
    else:
        obs_data, _ = _data_groups(m)
        if obs_data:
            groups["observed_data"] = obs_data
            const = obs_data
    dims = _dims_of(m, [*names, *const])
    coords = _coords_for(m, dims, (results, 2), (const, 0))
    coords["chain"] = post["chain"].values
    coords["draw"] = post["draw"].values
    import arviz_base  # xarray and pandas: half of `import kiln`, so on use

    tree = arviz_base.from_dict(
        groups, dims=dims, coords=coords, pred_dims=dims, pred_coords=coords
    )
    return tree, groups
