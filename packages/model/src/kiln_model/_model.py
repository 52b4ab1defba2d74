"""``Model``: a context that names random variables, data, deterministics and potentials.

Inside ``with Model() as m:``, a distribution called with a name registers a variable:
free (sampled, with a value variable on the unconstrained space) or observed (its
value is data). ``m`` then builds the joint log-density (:mod:`kiln_model._logprob`)
and compiles it (:mod:`kiln_model._compiled`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from kiln_compile import function
from kiln_graph import (
    KilnTypeError,
    KilnValueError,
    SharedVariable,
    TensorVariable,
    Variable,
    graph_replace,
)
from kiln_graph import tensor as kt
from kiln_model._compiled import CompiledModel, compile_point_function, initial_point
from kiln_model._debug import debug_model
from kiln_model._errors import ModelError
from kiln_model._logprob import build_logp, nan_is_outside
from kiln_model._transforms import ChainTransform, IntervalTransform, Transform
from kiln_model._validate import check_data_lengths, check_finite
from kiln_rewrite import stabilize_graph, stable_grad

_context = threading.local()


@dataclasses.dataclass
class VariableInfo:
    """What the model knows of one random variable.

    ``rv`` is its random draw (an output of a RandomVariable node), ``distribution``
    the distribution class that gives its log-density; ``value`` is the value variable
    (unconstrained when ``transform`` is set) of a free variable, or the observed data
    (a constant or a shared Data variable) of an observed one.
    """

    name: str
    rv: TensorVariable
    distribution: Any
    value: TensorVariable
    transform: Transform | None
    observed: bool
    dims: tuple[str, ...] | None
    initval: Any = None
    #: The parameters ``distribution.logp(value, *params)`` takes (draws of other
    #: variables among them are replaced by their values in the log-density).
    params: list[Variable] = dataclasses.field(default_factory=list)


class Model:
    """A probabilistic model: named random variables, data, deterministics, potentials.

    Parameters
    ----------
    coords
        ``{dim name: labels}``: the length of each named dimension (and its labels in
        the results).
    name
        A prefix for the names of this model's variables (``"name::var"``), or "".

    Examples
    --------
    >>> import kiln as kl  # doctest: +SKIP
    >>> with kl.Model(coords={"school": list("ABCDEFGH")}) as m:  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 5)
    ...     z = kl.Normal("z", 0, 1, dims="school")
    """

    def __init__(self, coords: Mapping[str, Sequence[Any]] | None = None, name: str = "") -> None:
        if not isinstance(name, str):
            raise KilnTypeError(f"name: expected a str, got {type(name).__name__}")
        self.name = name
        self.coords: dict[str, tuple[Any, ...]] = {}
        #: The length of each dim: an int (coords) or a symbolic int64 scalar (Data).
        self.dim_lengths: dict[str, Any] = {}
        self.variables: dict[str, VariableInfo] = {}
        self.deterministics: dict[str, TensorVariable] = {}
        self.potentials: dict[str, TensorVariable] = {}
        self.data: dict[str, SharedVariable] = {}
        self.named_dims: dict[str, tuple[str, ...] | None] = {}
        for dim, labels in (coords or {}).items():
            self.add_coord(dim, labels)

    # --- context ---------------------------------------------------------------------------

    def __enter__(self) -> Model:
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    @staticmethod
    def get_context(error_if_none: bool = True) -> Model | None:
        """Return the innermost model of the ``with`` blocks being run."""
        stack = _stack()
        if stack:
            return stack[-1]
        if error_if_none:
            raise ModelError(
                "no model on the context stack: create variables inside `with kl.Model():`, "
                "or use the distribution's .dist(...) for an unnamed random variable"
            )
        return None

    # --- coords and dims ---------------------------------------------------------------------

    def add_coord(self, dim: str, labels: Sequence[Any] | None = None, length: Any = None) -> None:
        """Add the dimension ``dim`` with ``labels`` (or only a ``length``)."""
        if not isinstance(dim, str) or not dim:
            raise ModelError(f"coords: dimension names must be non-empty strings, got {dim!r}")
        if dim in self.dim_lengths:
            raise ModelError(f"coords: the dimension {dim!r} is already defined")
        if labels is not None:
            if isinstance(labels, str) or not hasattr(labels, "__len__"):
                raise ModelError(f"coords[{dim!r}]: expected a sequence of labels, got {labels!r}")
            self.coords[dim] = tuple(np.asarray(labels).tolist())
            self.dim_lengths[dim] = len(labels)
        elif length is not None:
            self.dim_lengths[dim] = length
        else:
            raise ModelError(f"add_coord({dim!r}): give labels or a length")

    def shape_from_dims(self, dims: Sequence[str], what: str) -> tuple[Any, ...]:
        """Return the lengths of ``dims`` (ints or int64 scalar variables)."""
        out = []
        for d in dims:
            if d not in self.dim_lengths:
                known = sorted(self.dim_lengths)
                raise ModelError(f"{what}: unknown dim {d!r}; the model's dims are {known}")
            out.append(self.dim_lengths[d])
        return tuple(out)

    # --- registering ---------------------------------------------------------------------------

    def prefixed(self, name: str) -> str:
        """Return ``name`` with this model's prefix."""
        return f"{self.name}::{name}" if self.name else name

    def check_new_name(self, name: Any) -> str:
        """Return the full name for a new variable called ``name``; raise if it is taken."""
        if not isinstance(name, str) or not name:
            raise ModelError(f"name: expected a non-empty str, got {name!r}")
        full = self.prefixed(name)
        if full in self.named_dims:
            raise ModelError(f"the model already has a variable named {full!r}")
        return full

    def register(self, info: VariableInfo) -> None:
        """Add a random variable."""
        self.variables[info.name] = info
        self.named_dims[info.name] = info.dims
        info.rv.name = info.name

    def add_deterministic(
        self, name: str, value: TensorVariable, dims: tuple[str, ...] | None
    ) -> None:
        """Add a named deterministic expression."""
        self.deterministics[name] = value
        self.named_dims[name] = dims

    def add_potential(
        self, name: str, value: TensorVariable, dims: tuple[str, ...] | None = None
    ) -> None:
        """Add a term to the joint log-density."""
        self.potentials[name] = value
        self.named_dims[name] = dims

    def add_data(self, name: str, var: SharedVariable, dims: tuple[str, ...] | None) -> None:
        """Add a Data variable."""
        self.data[name] = var
        self.named_dims[name] = dims

    # --- views ---------------------------------------------------------------------------------

    @property
    def free_variables(self) -> list[VariableInfo]:
        """The free (sampled) random variables, in the order they were created."""
        return [v for v in self.variables.values() if not v.observed]

    @property
    def observed_variables(self) -> list[VariableInfo]:
        """The observed random variables, in the order they were created."""
        return [v for v in self.variables.values() if v.observed]

    @property
    def free_rvs(self) -> list[TensorVariable]:
        """The random draws of the free variables."""
        return [v.rv for v in self.free_variables]

    @property
    def value_vars(self) -> list[TensorVariable]:
        """The value variables of the free variables (unconstrained where transformed)."""
        return [v.value for v in self.free_variables]

    # --- log-density and compiled functions ----------------------------------------------

    def logp(self, jacobian: bool = True, sum: bool = True) -> Any:  # noqa: A002
        """Return the joint log-density as a graph of the value variables.

        ``sum=False`` returns ``{variable name: its elementwise term}`` instead.
        """
        graph = build_logp(self)
        if sum:
            return graph.total(jacobian)
        terms = dict(graph.terms)
        if jacobian:
            for name, jac in graph.jacobians.items():
                terms[name] = terms[name] + jac
        return terms

    def initial_point(self, jitter: bool = False, seed: Any = None) -> dict[str, np.ndarray]:
        """Return ``{value name: unconstrained value}``: support points, optionally jittered."""
        return initial_point(self, jitter=jitter, seed=seed)

    def compile_logp(self, jacobian: bool = True, mode: Any = None) -> Any:
        """Return ``f(point) -> logp``; ``point`` maps value names to values."""
        f = compile_point_function(
            self, [nan_is_outside(build_logp(self).total(jacobian))], mode=mode
        )
        return lambda point=None: float(f(point)[0])

    def compile_dlogp(self, jacobian: bool = True, mode: Any = None) -> Any:
        """Return ``f(point) -> gradient``, flat, in the order of the value variables."""
        _, grads = stable_grad(build_logp(self).total(jacobian), self.value_vars)
        f = compile_point_function(self, list(grads), mode=mode)
        return lambda point=None: np.concatenate([np.ravel(g) for g in f(point)])

    def logp_dlogp_function(
        self, mode: Any = None, jacobian: bool = True, jitter: bool = True, discrete: bool = False
    ) -> CompiledModel:
        """Return the model compiled over one flat vector (what samplers consume).

        ``discrete=True`` carries discrete free variables too (for gradient-free steps).
        """
        return CompiledModel(self, mode=mode, jacobian=jacobian, jitter=jitter, discrete=discrete)

    def point_logps(
        self, point: Mapping[str, Any] | None = None, round_vals: int = 2
    ) -> dict[str, float]:
        """Return each variable's log-density at ``point`` (default: the initial point).

        The way to find the variable that makes the joint log-density -inf or NaN.
        """
        terms = self.logp(sum=False)
        names = list(terms)
        # Stabilized as the compiled log-density is, so that the terms agree with it.
        sums = stabilize_graph([kt.sum(terms[n]) for n in names], self.value_vars)
        f = compile_point_function(self, [kt.as_tensor(v) for v in sums], mode="FAST_COMPILE")
        values = f(point)
        return {n: round(float(v), round_vals) for n, v in zip(names, values, strict=True)}

    def debug(
        self, point: Mapping[str, Any] | None = None, fn: str = "logp", verbose: bool = False
    ) -> dict[str, str]:
        """Name the variables whose log-density, gradient or forward draws are not finite.

        Parameters
        ----------
        point
            ``{value name: unconstrained value}`` (default: the initial point); unused
            with ``fn="random"``.
        fn
            ``"logp"``: each variable's (and Potential's) log-density at ``point``;
            ``"dlogp"``: the gradient for each free variable; ``"random"``: one forward
            draw of every variable (and the deterministics).
        verbose
            Also print the finite terms.

        Returns
        -------
        ``{name: why}`` for each term that is not finite (empty when all are): for a
        variable, the parameters that break their constraints, a value outside the
        support, and the first entry where it fails with the value and parameters
        there. The same report is printed.

        Examples
        --------
        >>> with kl.Model() as m:  # doctest: +SKIP
        ...     s = kl.Normal("s", 0, 1)
        ...     kl.Normal("y", 0, s, observed=[1.0])
        >>> m.debug()  # doctest: +SKIP
        y: its log-density is -inf (observed, Normal); the parameters break ...
        """
        return debug_model(self, point, fn, verbose)

    def __getitem__(self, name: str) -> Variable:
        full = name if name in self.named_dims else self.prefixed(name)
        if full in self.variables:
            return self.variables[full].rv
        if full in self.deterministics:
            return self.deterministics[full]
        if full in self.potentials:
            return self.potentials[full]
        if full in self.data:
            return self.data[full]
        raise KeyError(
            f"the model has no variable named {name!r}; it has {sorted(self.named_dims)}"
        )

    def __contains__(self, name: str) -> bool:
        return name in self.named_dims or self.prefixed(name) in self.named_dims

    def __repr__(self) -> str:
        free = ", ".join(v.name for v in self.free_variables)
        obs = ", ".join(v.name for v in self.observed_variables)
        return f"Model(free=[{free}], observed=[{obs}], deterministics={list(self.deterministics)})"


def _stack() -> list[Model]:
    if not hasattr(_context, "stack"):
        _context.stack = []
    return _context.stack


def modelcontext(model: Model | None) -> Model:
    """Return ``model``, or the model of the innermost ``with`` block."""
    if model is not None:
        if not isinstance(model, Model):
            raise KilnTypeError(f"model: expected a kiln Model, got {type(model).__name__}")
        return model
    found = Model.get_context()
    assert found is not None
    return found


def Deterministic(
    name: str, var: Any, dims: Any = None, model: Model | None = None
) -> TensorVariable:  # noqa: N802
    """Register ``var`` (an expression of the model's variables) under ``name``.

    Its value is computed for every draw and stored with the posterior.
    """
    m = modelcontext(model)
    full = m.check_new_name(name)
    value = kt.as_tensor(var)
    dims_t = _checked_dims(m, dims, value, full)
    value.name = full if value.name is None else value.name
    m.add_deterministic(full, value, dims_t)
    return value


def Potential(  # noqa: N802
    name: str, var: Any, model: Model | None = None, dims: Any = None
) -> TensorVariable:
    """Add ``var`` (summed) to the model's joint log-density under ``name``.

    ``dims`` names the dimensions of ``var`` (as PyMC takes them; the model's dims).
    """
    m = modelcontext(model)
    full = m.check_new_name(name)
    value = kt.as_tensor(var)
    dims_t = _checked_dims(m, dims, value, full)
    if value.dtype not in ("float64", "float32"):
        value = kt.cast(value, "float64")
    m.add_potential(full, value, dims_t)
    return value


def _checked_dims(m: Model, dims: Any, value: TensorVariable, what: str) -> tuple[str, ...] | None:
    """Return ``dims`` as a tuple after checking them against ``value`` and the model."""
    dims_t = _as_dims(dims, value.ndim, what)
    if dims_t is None:
        return None
    lengths = m.shape_from_dims(dims_t, what)
    for axis, (d, n, k) in enumerate(zip(dims_t, lengths, value.type.shape, strict=True)):
        if isinstance(n, int) and k is not None and n != k:
            raise ModelError(
                f"{what}: dim {d!r} has length {n}, but the value has {k} along axis {axis}"
            )
    return dims_t


def Data(name: str, value: Any, dims: Any = None, model: Model | None = None) -> SharedVariable:  # noqa: N802
    """Register data as a runtime input of the model's compiled functions.

    ``kl.set_data({name: new_value})`` swaps the value with no recompilation. Its shape
    may change: the dims named here take their lengths from the data (a dim the coords
    define too, once ``set_data`` gives it new labels), for the variables created
    after this Data. NaN and infinities are refused.
    """
    m = modelcontext(model)
    full = m.check_new_name(name)
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise KilnTypeError(f"Data {full!r}: expected numeric data, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise KilnValueError(f"Data {full!r}: the data holds NaN")
    check_finite(f"Data {full!r}", arr, "drop or correct the infinite values")
    dims_t = _as_dims(dims, arr.ndim, full)
    var = kt.shared(arr, name=full)
    if dims_t is not None:
        for i, d in enumerate(dims_t):
            if d not in m.dim_lengths:
                m.add_coord(d, length=kt.shape_i(var, i))
            elif isinstance(m.dim_lengths[d], int):
                if m.dim_lengths[d] != arr.shape[i]:
                    raise ModelError(
                        f"Data {full!r}: dim {d!r} has length {m.dim_lengths[d]} in the coords, "
                        f"but the data has {arr.shape[i]} along axis {i}"
                    )
                # Variables along ``d`` created from now on follow this Data's length, so
                # that ``set_data`` with new coords can change it.
                m.dim_lengths[d] = kt.shape_i(var, i)
    m.add_data(full, var, dims_t)
    return var


def set_data(
    new_data: Mapping[str, Any],
    model: Model | None = None,
    *,
    coords: Mapping[str, Sequence[Any]] | None = None,
) -> None:
    """Replace the values of Data variables (no recompilation), and optionally coords.

    The new values are checked before any is set: numeric, finite, the same number of
    dimensions, and along each dim the length its labels give it (``coords`` replaces
    the labels of the dims it names, so their length may change; a dim with no labels
    may change length freely, but Data set together along it must agree).

    Parameters
    ----------
    new_data
        ``{Data name: new value}``.
    model
        The model (default: the one of the ``with`` block).
    coords
        ``{dim name: new labels}`` for dims whose length follows a Data variable (or
        whose length stays the same); later results are labelled with them.

    Examples
    --------
    >>> with model:  # doctest: +SKIP
    ...     kl.set_data({"x": x_new}, coords={"obs": labels_new})
    ...     kl.sample_posterior_predictive(idata, predictions=True)
    """
    m = modelcontext(model)
    if not isinstance(new_data, Mapping):
        raise KilnTypeError(
            f"set_data: new_data: expected a dict {{Data name: value}}, got "
            f"{type(new_data).__name__}"
        )
    checked: dict[str, np.ndarray] = {}
    for name, value in new_data.items():
        full = name if name in m.data else m.prefixed(name)
        if full not in m.data:
            raise ModelError(
                f"set_data: the model has no Data named {name!r}; it has {sorted(m.data)}"
            )
        checked[full] = _checked_new_value(name, m.data[full], value)
    labels = _checked_new_coords(m, coords)
    _check_labels(m, checked, labels)
    check_data_lengths(m, checked)
    for full, arr in checked.items():
        m.data[full].set_value(arr)
    m.coords.update(labels)


def _checked_new_value(name: str, var: SharedVariable, value: Any) -> np.ndarray:
    """Return ``value`` as the new value of the Data ``var``, after checking it."""
    arr = np.asarray(value)
    old = var.get_value(borrow=True)
    if arr.ndim != old.ndim:
        raise KilnValueError(
            f"set_data: {name!r} has {old.ndim} dimension(s), the new value {arr.ndim}"
        )
    if arr.dtype.kind not in "biuf":
        raise KilnTypeError(
            f"set_data: the new value of {name!r}: expected numeric data, got dtype {arr.dtype}"
        )
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise KilnValueError(f"set_data: the new value of {name!r} holds NaN")
    check_finite(f"set_data: the new value of {name!r}", arr, "drop or correct them")
    if arr.dtype != old.dtype:
        if not np.can_cast(arr.dtype, old.dtype, casting="same_kind"):
            raise KilnTypeError(
                f"set_data: {name!r} holds {old.dtype}; the new value is {arr.dtype}"
            )
        arr = arr.astype(old.dtype)
    return arr


def _checked_new_coords(
    m: Model, coords: Mapping[str, Sequence[Any]] | None
) -> dict[str, tuple[Any, ...]]:
    """Return ``set_data``'s new ``coords`` as label tuples, after checking them."""
    if coords is None:
        return {}
    if not isinstance(coords, Mapping):
        raise KilnTypeError(
            f"set_data: coords: expected a dict {{dim name: labels}}, got {type(coords).__name__}"
        )
    out: dict[str, tuple[Any, ...]] = {}
    for dim, labels in coords.items():
        if dim not in m.dim_lengths:
            raise ModelError(
                f"set_data: coords: the model has no dim {dim!r}; its dims are "
                f"{sorted(m.dim_lengths)}"
            )
        if labels is None or isinstance(labels, str) or not hasattr(labels, "__len__"):
            raise ModelError(
                f"set_data: coords[{dim!r}]: expected a sequence of labels, got {labels!r}"
            )
        new = tuple(np.asarray(labels).tolist())
        fixed = m.dim_lengths[dim]
        if isinstance(fixed, int | np.integer) and len(new) != int(fixed):
            raise ModelError(
                f"set_data: coords[{dim!r}] has {len(new)} labels, but dim {dim!r} has the "
                f"fixed length {fixed}: no Data defines it, so the variables along it were "
                f"sized from coords=. To let its length change, create a kl.Data with "
                f"dims={dim!r} before the variables along it"
            )
        out[dim] = new
    return out


def _check_labels(
    m: Model, new: Mapping[str, np.ndarray], labels: Mapping[str, tuple[Any, ...]]
) -> None:
    """Raise when Data (new values, or current ones along a relabelled dim) misfit labels."""
    counts = {d: len(v) for d, v in m.coords.items()} | {d: len(v) for d, v in labels.items()}
    for full, var in m.data.items():
        dims = m.named_dims.get(full) or ()
        arr = new.get(full)
        if arr is None and not any(d in labels for d in dims):
            continue
        shape = np.shape(var.get_value(borrow=True)) if arr is None else arr.shape
        for axis, d in enumerate(dims):
            if d not in counts or axis >= len(shape) or shape[axis] == counts[d]:
                continue
            if arr is None:
                raise ModelError(
                    f"set_data: coords[{d!r}] has {counts[d]} labels, but Data {full!r} has "
                    f"length {shape[axis]} along it (axis {axis}); set {full!r} too"
                )
            raise ModelError(
                f"set_data: {full!r} has length {shape[axis]} along dim {d!r} (axis {axis}), "
                f"but dim {d!r} has {counts[d]} labels in the model's coords; give data of "
                f"length {counts[d]}, or new labels: set_data(..., coords={{{d!r}: labels}})"
            )


def freeze_dims_and_data(model: Model) -> Model:
    """Return a copy of ``model`` whose Data are constants and dim lengths ints.

    Rewrites see the data (shapes and values) and can simplify more; the copy's
    compiled functions no longer follow ``set_data``.
    """
    replace: dict[Variable, Variable] = {
        var: kt.constant(var.get_value()) for var in model.data.values()
    }

    def sub(x: Any) -> Any:
        return graph_replace(x, replace, strict=False) if isinstance(x, Variable) else x

    frozen = Model(name=model.name)
    frozen.coords = dict(model.coords)
    for dim, length in model.dim_lengths.items():
        if isinstance(length, Variable):
            length = int(function_of_nothing(sub(length)))
        frozen.dim_lengths[dim] = length
    for info in model.variables.values():
        rv = sub(info.rv)
        new = dataclasses.replace(
            info,
            rv=rv,
            params=[sub(p) for p in info.params],
            value=replace.get(info.value, info.value),  # type: ignore[arg-type]
            transform=_frozen_transform(info.transform, sub),
        )
        replace[info.rv] = rv
        frozen.register(new)
    for name, det in model.deterministics.items():
        frozen.add_deterministic(name, sub(det), model.named_dims.get(name))
    for name, pot in model.potentials.items():
        frozen.add_potential(name, sub(pot), model.named_dims.get(name))
    return frozen


def _frozen_transform(t: Transform | None, sub: Any) -> Transform | None:
    """Return ``t`` with the expressions it holds (interval bounds) substituted."""
    if t is None:
        return None
    if isinstance(t, ChainTransform):
        return ChainTransform(*[_frozen_transform(s, sub) or s for s in t.transforms])
    if isinstance(t, IntervalTransform) and type(t) is IntervalTransform:
        return IntervalTransform(sub(t.lower), sub(t.upper))
    return t


def function_of_nothing(x: Variable) -> Any:
    """Return the value of ``x``, an expression of constants only."""
    return function([], x, mode="FAST_COMPILE")()


def _as_dims(dims: Any, ndim: int | None, what: str) -> tuple[str, ...] | None:
    if dims is None:
        return None
    dims_t = (dims,) if isinstance(dims, str) else tuple(dims)
    if not all(isinstance(d, str) for d in dims_t):
        raise ModelError(f"{what}: dims must be strings, got {dims!r}")
    if ndim is not None and len(dims_t) != ndim:
        raise ModelError(f"{what}: {len(dims_t)} dims {dims_t} for a {ndim}-d value")
    return dims_t


def iter_models() -> Iterator[Model]:
    """Yield the models on the context stack, innermost first."""
    yield from reversed(_stack())
