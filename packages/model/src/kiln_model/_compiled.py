"""Compiled model functions: the compiled-model protocol of DESIGN.md, initial points.

:class:`CompiledModel` is what samplers consume: the joint log-density and its gradient
over ONE flat float64 vector of the free variables' unconstrained values (C order, in
the order of ``layout``), the constrained values and deterministics of a point
(``expand``), and initial points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from kiln_compile import (
    Function,
    Mode,
    NativeModel,
    function,
    get_mode,
    native_model,
    rewrite_cached,
)
from kiln_graph import (
    Blockwise,
    Constant,
    KilnTypeError,
    KilnValueError,
    TensorVariable,
    Variable,
    ancestors,
    graph_replace,
)
from kiln_graph import tensor as kt
from kiln_graph.helpers import long_lived_objects
from kiln_model._errors import ModelError
from kiln_model._logprob import LogpGraph, Substitution, build_logp, nan_is_outside
from kiln_model._package import (
    ModelPackage,
    jittered_start,
    package_function,
    pure_jax_outputs,
)
from kiln_model._vectorize import item_of, vectorize_sums
from kiln_rewrite import stable_grad

if TYPE_CHECKING:
    from kiln_model._model import Model


@dataclasses.dataclass(frozen=True)
class Block:
    """One free variable's place in the flat vector.

    A discrete variable (``dtype`` an integer type) is stored in the float64 vector as
    exact integers and rounded back to ``dtype`` in the graph; ``support`` names its
    kind (``"binary"``, ``"categorical"``, ``"nonnegative_integer"``, ...) and
    ``lower`` / ``upper`` bound its values (``upper`` of a categorical one is its number
    of categories minus one). The log-density's gradient is zero on discrete blocks.
    """

    name: str
    shape: tuple[int, ...]
    slice: slice
    dtype: str = "float64"
    support: str = "real"
    lower: float = -np.inf
    upper: float = np.inf

    @property
    def discrete(self) -> bool:
        """Whether the block holds integer values (sampled by gradient-free steps only)."""
        return np.dtype(self.dtype).kind in "iub"


#: The bounds of a discrete support: (lower, upper); categorical's upper is per variable.
_DISCRETE_BOUNDS: dict[str, tuple[float, float]] = {
    "binary": (0.0, 1.0),
    "categorical": (0.0, np.inf),
    "nonnegative_integer": (0.0, np.inf),
    "positive_integer": (1.0, np.inf),
    "counts": (0.0, np.inf),
    "ordinal": (0.0, np.inf),  # upper: the number of cutpoints (``discrete_bounds``)
}


def _initial_point_function(model: Model) -> Function:
    """Compile the support points of the free variables, unconstrained, in model order."""
    sub = Substitution()
    outputs: list[TensorVariable] = []
    for info in model.variables.values():
        if info.observed:
            sub[info.rv] = info.value
            continue
        params = [sub(p) for p in info.params]
        if info.initval is not None:
            point = kt.as_tensor(np.asarray(info.initval, dtype=info.rv.dtype))
            point = kt.broadcast_to(point, sub(kt.shape(info.rv)))
        else:
            point = sub(info.distribution.support_point(info.rv, *params))
        if point.dtype != info.rv.dtype:
            point = kt.cast(point, info.rv.dtype)
        sub[info.rv] = point
        unconstrained = point if info.transform is None else sub(info.transform.forward(point))
        outputs.append(kt.as_tensor(unconstrained))
    return function([], outputs, mode="FAST_COMPILE")


def initial_point(model: Model, jitter: bool = False, seed: Any = None) -> dict[str, np.ndarray]:
    """Return the unconstrained initial value of each free variable, by value-variable name.

    Support points (a central value of each distribution: the mean, median or mode),
    ``initval`` where given; ``jitter`` adds Uniform(-1, 1) noise on the unconstrained
    scale to continuous variables (reproducible with ``seed``).
    """
    free = model.free_variables
    if not free:
        return {}
    values = _initial_point_function(model)()
    values = values if isinstance(values, list) else [values]
    rng = np.random.default_rng(seed)
    out = {}
    for info, value in zip(free, values, strict=True):
        v = np.array(value)
        if v.dtype.kind == "f" and not np.all(np.isfinite(v)):
            raise ModelError(
                f"{info.name}: its initial value on the sampling scale is not finite ({v}); "
                f"the support point may lie on the edge of its transform "
                f"({info.transform!r}, e.g. equal values for an ordered vector): give "
                f"initval=... to {info.name}"
            )
        if jitter and v.dtype.kind == "f":
            v = v + rng.uniform(-1.0, 1.0, size=v.shape)
        out[info.value.name or info.name] = v
    return out


class CompiledModel:
    """A model compiled over one flat vector (the samplers' protocol, see DESIGN.md).

    Attributes
    ----------
    ndim
        Length of the flat vector of unconstrained values.
    layout
        ``[(value name, shape, slice)]`` of each free variable in that vector.
    out_names, out_shapes, dims, coords
        The constrained free variables then the deterministics, as ``expand`` returns
        them; each one's dims (or None) and the model's coords.
    function
        The compiled ``x -> [logp, dlogp]`` (:class:`kiln_compile.Function`).
    discrete_mask
        Boolean ``(ndim,)``: which entries of the vector belong to discrete blocks.

    Parameters
    ----------
    discrete
        Carry discrete free variables (for gradient-free steps): their integer values
        live in the float64 vector, the gradient is zero there, and ``initial_point``
        jitters only the continuous entries. By default a discrete free variable is an
        error (NUTS alone cannot sample it).
    """

    def __init__(
        self,
        model: Model,
        mode: Mode | str | None = None,
        jacobian: bool = True,
        jitter: bool = True,
        discrete: bool = False,
    ) -> None:
        with long_lived_objects():
            free = model.free_variables
            if not free:
                raise ModelError("the model has no free variables: there is nothing to sample")
            for info in free:
                if info.value.dtype not in ("float64", "float32") and not discrete:
                    raise KilnTypeError(
                        f"{info.name} is discrete ({info.rv.dtype}): gradient-based samplers need "
                        "continuous free variables; sample it with a gradient-free step "
                        "(kl.sample(nuts_sampler='kiln') assigns one), or marginalize it out"
                    )
            self.model = model
            self.jitter = jitter
            start = initial_point(model)
            self.layout: list[Block] = []
            offset = 0
            for info in free:
                shape = tuple(int(n) for n in start[str(info.value.name)].shape)
                size = int(np.prod(shape))
                sl = slice(offset, offset + size)
                dtype = str(info.value.dtype)
                if np.dtype(dtype).kind in "iub":
                    support = str(getattr(info.distribution, "support", "integer"))
                    low, high = _DISCRETE_BOUNDS.get(support, (-np.inf, np.inf))
                    block = Block(str(info.value.name), shape, sl, dtype, support, low, high)
                    self.layout.append(block)
                else:
                    self.layout.append(Block(str(info.value.name), shape, sl))
                offset += size
            self.ndim = offset
            self.discrete_mask = np.zeros(self.ndim, dtype=bool)
            for b in self.layout:
                self.discrete_mask[b.slice] = b.discrete
            graph = build_logp(model)
            self.graph = graph
            x = kt.vector("x", shape=(self.ndim,))
            self._x = x
            pieces: dict[Variable, Variable] = {}
            #: The float blocks: a variable whose constrained value is its value variable
            #: (no transform) is a view of the draws in :meth:`expand_draws`.
            self._float_blocks: dict[Variable, Block] = {}
            for info, b in zip(free, self.layout, strict=True):
                piece = kt.reshape(x[b.slice], b.shape) if b.shape else x[b.slice.start]
                if b.discrete:  # integers stored as float64: round back to the value's dtype
                    piece = kt.cast(kt.floor(piece + 0.5), b.dtype)
                else:
                    self._float_blocks[info.value] = b
                pieces[info.value] = piece
            pieces.update(self._group_pieces(graph))
            self._mode = mode
            self._pieces = pieces
            total: Variable = graph_replace(graph.total(jacobian), pieces, strict=False)  # type: ignore[assignment]
            # Sums the user wrote over many scalars become vector sums, before the gradient.
            (total,) = vectorize_sums([total])
            # With discrete blocks the log-density may not depend on x through a float path.
            ignore: Literal["ignore", "raise"] = "ignore" if self.discrete_mask.any() else "raise"
            # The gradient of the stabilized log-density: as finite as the value (an exp that
            # overflows where the value has log(exp(z)) -> z gives no NaN), on every backend.
            stable, dlogp = stable_grad(
                total, x, disconnected_inputs=ignore, rewriter=rewrite_cached
            )
            self._logp_graph = nan_is_outside(stable)
            self.function = function([x], [self._logp_graph, dlogp], mode=mode, trust_input=True)
            self._logp: Function | None = None
            self._expand: Function | None = None
            self._native: dict[bool, NativeModel] = {}
            self._expand_draws: Function | Literal[False, "views"] | None = None
            #: Where each ``out_names`` entry is in ``_expand_draws``'s outputs: (output, item).
            self._expand_items: list[tuple[int, int | None]] = []
            #: Why :meth:`expand_draws` evaluates draw by draw (None: it is batched).
            self.expand_draws_problem: str | None = None
            self._observed_logp: tuple[list[str], Function] | None = None
            names = [*graph.constrained, *graph.deterministics]
            self.out_names = names
            self.dims = {n: model.named_dims.get(n) for n in names}
            self.coords = dict(model.coords)
            self._start = np.concatenate(
                [np.ravel(start[b.name]).astype("float64") for b in self.layout]
            )
            if any(b.support == "categorical" for b in self.layout):
                self._set_categories(free, pieces)
            if any(hasattr(i.distribution, "discrete_bounds") for i in free):
                self._set_declared_bounds(free)

    def _group_pieces(self, graph: LogpGraph) -> dict[Variable, Variable]:
        """Return each free group's stacked values as one slice (or gather) of ``x``.

        The members of a group (:class:`kiln_model._logprob.TermGroup`) are scalars; in
        creation order their entries of ``x`` are evenly spaced (a slice) unless other
        variables were created between them in an irregular pattern (then an index).
        """
        where = {b.name: b for b in self.layout}
        values = {i.name: str(i.value.name) for i in self.model.free_variables}
        out: dict[Variable, Variable] = {}
        for g in graph.groups:
            if not g.free:
                continue
            blocks = [where[values[n]] for n in g.names]
            at = np.array([b.slice.start for b in blocks])
            step = int(at[1] - at[0])
            if step > 0 and np.all(np.diff(at) == step):
                piece = self._x[int(at[0]) : int(at[-1]) + 1 : step]
            else:
                piece = self._x[kt.constant(at.astype("int64"))]
            if blocks[0].discrete:
                piece = kt.cast(kt.floor(piece + 0.5), blocks[0].dtype)
            out[g.stacked] = piece
        return out

    def _set_categories(self, free: list[Any], pieces: dict[Variable, Variable]) -> None:
        """Set ``upper`` of each categorical block: its number of categories minus one."""
        replace: dict[Variable, Variable] = {i.rv: i.value for i in self.model.variables.values()}
        positions: list[int] = []
        counts: list[Any] = []
        for k, (info, b) in enumerate(zip(free, self.layout, strict=True)):
            if b.support == "categorical":
                p = graph_replace(kt.as_tensor(info.params[0]), replace, strict=False)
                positions.append(k)
                counts.append(graph_replace(kt.shape_i(p, -1), pieces, strict=False))
        f = function([self._x], counts, mode="FAST_COMPILE", trust_input=True)
        values = f(self._start)
        for k, n in zip(positions, values if isinstance(values, list) else [values], strict=True):
            self.layout[k] = dataclasses.replace(self.layout[k], upper=float(n) - 1.0)

    def _set_declared_bounds(self, free: list[Any]) -> None:
        """Set the bounds of blocks whose distribution declares ``discrete_bounds``.

        ``discrete_bounds(*params)`` returns the (lower, upper) of the values as graphs
        of the parameters (DiscreteUniform's ``lower``/``upper``, an ordinal's 0 and its
        number of cutpoints). Bounds that depend on free variables stay infinite; the
        block's bounds are the smallest lower and the largest upper of its elements.
        """
        replace: dict[Variable, Variable] = {i.rv: i.value for i in self.model.variables.values()}
        values = {i.value for i in free}
        for k, (info, b) in enumerate(zip(free, self.layout, strict=True)):
            declared = getattr(info.distribution, "discrete_bounds", None)
            if declared is None or not b.discrete:
                continue
            low, high = (
                graph_replace(kt.as_tensor(e), replace, strict=False)
                for e in declared(*info.params)
            )
            if any(v in values for v in ancestors([kt.as_tensor(low), kt.as_tensor(high)])):
                continue  # bounds that move with other free variables: the logp bounds them
            lo, hi = function([], [kt.min(low), kt.max(high)], mode="FAST_COMPILE")()
            self.layout[k] = dataclasses.replace(b, lower=float(lo), upper=float(hi))

    @property
    def has_discrete(self) -> bool:
        """Whether any free variable is discrete (only with ``discrete=True``)."""
        return bool(self.discrete_mask.any())

    @property
    def out_shapes(self) -> list[tuple[int, ...]]:
        """The shape of each ``expand`` output (at the initial point)."""
        return [np.shape(v) for v in self.expand(self._start).values()]

    def _flat(self, x: Any) -> np.ndarray:
        arr = np.ascontiguousarray(x, dtype="float64")
        if arr.shape != (self.ndim,):
            raise KilnValueError(
                f"x: expected a vector of length {self.ndim}, got shape {arr.shape}"
            )
        return arr

    def logp_dlogp(self, x: Any) -> tuple[float, np.ndarray]:
        """Return the log-density at ``x`` and its gradient (a new C-contiguous array)."""
        logp, dlogp = self.function(self._flat(x))
        return float(logp), np.ascontiguousarray(dlogp)

    def _logp_function(self) -> Function:
        """Return the compiled ``x -> logp`` (compiled at first use)."""
        if self._logp is None:
            self._logp = function([self._x], self._logp_graph, mode=self._mode, trust_input=True)
        return self._logp

    def logp(self, x: Any) -> float:
        """Return the log-density at ``x`` (for gradient-free samplers; compiled at first use)."""
        return float(self._logp_function()(self._flat(x)))

    @property
    def expand_function(self) -> Function:
        """The compiled ``x -> [value of each out_names entry]`` (compiled at first use).

        For native paths (kiln_numba's C entry points) that wrap the Function itself.
        """
        if self._expand is None:
            graph = self.graph
            exprs = [*graph.constrained.values(), *graph.deterministics.values()]
            outputs = vectorize_sums(graph_replace(exprs, self._pieces, strict=False))  # type: ignore[arg-type]
            self._expand = function([self._x], outputs, mode=self._mode, trust_input=True)
        return self._expand

    def native(self, expand: bool = True) -> NativeModel:
        """Return the log-density (and expand function) as the native C ABI (cached).

        Parameters
        ----------
        expand
            Also give :attr:`expand_function` (compiled now if it was not): what
            samplers outside Python (nutpie) need for the draws. kiln's C NUTS kernel
            needs the log-density only.

        Returns
        -------
        kiln_compile.NativeModel
            ``logp_cptr`` (and ``expand_cptr``), ``user_data_ptr``, ``keep_alive`` and
            ``refresh()``, from the backend that compiled the model.

        Raises
        ------
        kiln_compile.NativeUnavailable
            If the backend does not provide the native ABI, or cannot for this model
            (the message says why): sample it through :meth:`logp_dlogp` instead.
        """
        cached = self._native.get(expand)
        if cached is None:
            cached = native_model(self.function, self.expand_function if expand else None)
            self._native[expand] = cached
        return cached

    def expand(self, x: Any) -> dict[str, np.ndarray]:
        """Return the constrained free variables and the deterministics at ``x``.

        Compiled at the first use (samplers need it only for their draws).
        """
        values = self.expand_function(self._flat(x))
        values = values if isinstance(values, list) else [values]
        return {n: np.asarray(v) for n, v in zip(self.out_names, values, strict=True)}

    def expand_draws(self, xs: Any) -> dict[str, np.ndarray]:
        """Return :meth:`expand` of every row of ``xs`` (``(draws, ndim)``), stacked.

        One call of the expand graph batched over the draws (``kiln.tensor.vectorize``),
        not one call per draw: the samplers' results of 10^4 draws cost milliseconds.
        Built at the first use, with the model's rewrites, for the Python VM whatever
        the model's backend: each node is one NumPy operation over all the draws at
        once, which links in milliseconds where a compiling backend takes a second or
        more (Numba: 1.2-1.5 s for M1, M2 and M4 on a cold cache) and calls as fast
        (0.1-1 ms for 4,000 draws of M1-M4). A graph that keeps a ``Blockwise`` after
        its rewrites whose Op's ``perform`` does not broadcast (``Op.perform_broadcasts``:
        the VM would call it draw by draw, a Python loop) is compiled by the model's
        backend instead. The values of a variable without a
        transform are views of its columns of ``xs`` (when ``xs`` is a C-contiguous
        float64 array; of a copy otherwise).

        Examples
        --------
        >>> values = compiled.expand_draws(np.zeros((3, compiled.ndim)))  # doctest: +SKIP
        """
        arr = np.ascontiguousarray(xs, dtype="float64")
        if arr.ndim != 2 or arr.shape[1] != self.ndim:
            raise KilnValueError(
                f"xs: expected an array shaped (draws, {self.ndim}), got shape {arr.shape}"
            )
        # A variable without a transform is its columns of ``xs``: a view, not a copy
        # (at 10^4 draws, fresh memory is most of what copying them costs).
        views = {
            name: self._float_blocks[expr]
            for name, expr in self.graph.constrained.items()
            if expr in self._float_blocks
        }
        computed = [n for n in self.out_names if n not in views]
        if self._expand_draws is None and not computed:
            self._expand_draws = "views"  # every value is a view: nothing to compile
        if self._expand_draws is None:
            graph = self.graph
            every = [*graph.constrained.values(), *graph.deterministics.values()]
            exprs = [e for n, e in zip(self.out_names, every, strict=True) if n not in views]
            exprs = vectorize_sums(graph_replace(exprs, self._pieces, strict=False))  # type: ignore[arg-type, assignment]
            outputs, self._expand_items = _fewer_outputs(exprs)  # type: ignore[arg-type]
            cores = ",".join(
                "(" + ",".join(f"d{k}_{j}" for j in range(o.ndim)) + ")"  # type: ignore[attr-defined]
                for k, o in enumerate(outputs)
            )
            x = self._x
            # Data (shared variables) are the same for every draw: unbatched inputs.
            roots = [
                v
                for v in ancestors(outputs)
                if v.owner is None and not isinstance(v, Constant) and v is not x
            ]
            shared = "".join(
                ",(" + ",".join(f"r{i}_{j}" for j in range(getattr(r, "ndim", 0))) + ")"
                for i, r in enumerate(roots)
            )

            def one_draw(point: Variable, *values: Variable) -> list[Variable]:
                swap = {x: point, **dict(zip(roots, values, strict=True))}
                return graph_replace(outputs, swap, strict=False)  # type: ignore[return-value]

            batch = kt.matrix("xs", shape=(None, self.ndim))
            try:
                if not all(isinstance(r, TensorVariable) for r in roots):
                    raise KilnTypeError("the posterior depends on a value that is not a tensor")
                batched = kt.vectorize(one_draw, f"(n){shared}->{cores}")(batch, *roots)
                batched = list(batched) if isinstance(batched, list | tuple) else [batched]
                vm = get_mode(self._mode).with_linker("vm")
                self._expand_draws = function([batch], batched, mode=vm, trust_input=True)
                if any(_loops_on_vm(n.op) for n in self._expand_draws.fgraph.nodes):
                    self._expand_draws = function(
                        [batch], batched, mode=self._mode, trust_input=True
                    )
            except (KilnTypeError, KilnValueError, NotImplementedError) as exc:
                self._expand_draws = False  # draw by draw; the caller may say so
                self.expand_draws_problem = f"{type(exc).__name__}: {exc}"
        if self._expand_draws is False:
            per_draw = [self.expand(x) for x in arr]
            return {n: np.stack([d[n] for d in per_draw]) for n in self.out_names}
        out: dict[str, np.ndarray] = {}
        if self._expand_draws != "views":
            values = self._expand_draws(arr)  # type: ignore[operator]
            values = values if isinstance(values, list) else [values]
            for n, (j, k) in zip(computed, self._expand_items, strict=True):
                out[n] = np.asarray(values[j] if k is None else values[j][:, k])
        for n, b in views.items():
            columns = arr[:, b.slice]
            out[n] = columns.reshape(arr.shape[0], *b.shape) if b.shape else columns[:, 0]
        return {n: out[n] for n in self.out_names}

    def logp_jax(self, x: Any) -> Any:
        """Return the log-density at ``x`` as a JAX scalar: a pure, traceable function.

        For JAX samplers (numpyro, blackjax): ``x`` is the flat float64 vector (a JAX
        array or tracer); ``jax.jit``, ``jax.vmap`` and ``jax.grad`` apply. Only for a
        model compiled on the JAX backend. Call it inside ``jax.enable_x64(True)`` so
        that ``x`` stays float64 (kiln never turns JAX's global x64 flag on). Data
        values are read when it is called (traced).

        Examples
        --------
        >>> m = model.logp_dlogp_function(mode=kiln.Mode(linker="jax"))  # doctest: +SKIP
        >>> with jax.enable_x64(True):  # doctest: +SKIP
        ...     g = jax.grad(m.logp_jax)(m.initial_point())
        """
        return pure_jax_outputs(self._logp_function(), x)[0]

    def expand_jax(self, x: Any) -> dict[str, Any]:
        """Return the constrained free variables and deterministics at ``x`` as JAX arrays.

        Ordered like ``out_names``; pure and traceable, under the conditions of
        :meth:`logp_jax`.
        """
        values = pure_jax_outputs(self.expand_function, x)
        return dict(zip(self.out_names, values, strict=True))

    def observed_logp(self, x: Any) -> dict[str, np.ndarray]:
        """Return each observed variable's pointwise log-likelihood at ``x``.

        Compiled at the first use (for the ``log_likelihood`` group of the results).
        """
        if self._observed_logp is None:
            names = [v.name for v in self.model.observed_variables]
            terms = [self.graph.terms[n] for n in names]
            outputs = graph_replace(terms, self._pieces, strict=False)
            self._observed_logp = (
                names,
                function([self._x], outputs, mode=self._mode, trust_input=True),
            )
        names, f = self._observed_logp
        values = f(self._flat(x)) if names else []
        return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}

    def initial_point(self, seed: Any = None) -> np.ndarray:
        """Return a starting point: support points, jittered when ``jitter`` (by ``seed``)."""
        return jittered_start(self._start, self.discrete_mask, self.jitter, seed)  # type: ignore[no-any-return]

    def package(self) -> ModelPackage:
        """Return the log-density as data, to rebuild in another process (``load_package``).

        What a chain on a worker needs: the rewritten ``x -> [logp, dlogp]`` graph, its
        Data's values, the backend, the start point and the versions (see
        :mod:`kiln_model._package`). No compiled code and no pickled object is in it.

        Examples
        --------
        >>> worker_model = kiln_model.load_package(compiled.package())  # doctest: +SKIP
        """
        return package_function(self.function, self._start, self.discrete_mask, self.jitter)

    def point_to_array(self, point: Mapping[str, Any]) -> np.ndarray:
        """Return the flat vector of a point ``{value name: unconstrained value}``."""
        missing = [b.name for b in self.layout if b.name not in point]
        if missing:
            raise KilnValueError(f"point: missing values for {missing}")
        return np.concatenate(
            [np.ravel(np.asarray(point[b.name], dtype="float64")) for b in self.layout]
        )

    def array_to_point(self, x: Any) -> dict[str, np.ndarray]:
        """Return ``{value name: unconstrained value}`` of the flat vector ``x``."""
        arr = self._flat(x)
        return {
            b.name: np.rint(arr[b.slice]).astype(b.dtype).reshape(b.shape)
            if b.discrete
            else arr[b.slice].reshape(b.shape)
            for b in self.layout
        }


def _fewer_outputs(
    exprs: list[Variable],
) -> tuple[list[Variable], list[tuple[int, int | None]]]:
    """Return outputs computing ``exprs``, items of one vector merged into that vector.

    Scalars of a group (``v[0], v[1], ...`` of its constrained vector) become the one
    output ``v``: a compiled function's build time grows faster than linearly in its
    number of outputs. Also returns, per expression, ``(output, item)`` where it is
    (``item`` None: the whole output).
    """
    outputs: list[Variable] = []
    position: dict[Variable, int] = {}
    where: list[tuple[int, int | None]] = []
    for e in exprs:
        item = item_of(e)
        if item is None:
            where.append((len(outputs), None))
            outputs.append(e)
            continue
        base, k = item
        if base not in position:
            position[base] = len(outputs)
            outputs.append(base)
        where.append((position[base], k))
    return outputs, where


def compile_point_function(
    model: Model, outputs: list[TensorVariable], graph: LogpGraph | None = None, mode: Any = None
) -> Any:
    """Return ``f(point) -> values`` of ``outputs`` (in terms of the value variables)."""
    free = model.free_variables
    inputs = [info.value for info in free]
    f = function(inputs, outputs, mode=mode)

    def call(point: Mapping[str, Any] | None = None) -> Any:
        if point is None:
            point = initial_point(model)
        values = []
        for info in free:
            name = str(info.value.name)
            if name not in point:
                raise KilnValueError(f"point: no value for {name!r}; the point has {sorted(point)}")
            values.append(point[name])
        return f(*values)

    return call


def _loops_on_vm(op: Any) -> bool:
    """Whether the Python VM runs ``op`` one batch element at a time (a Python loop)."""
    return isinstance(op, Blockwise) and not op.core_op.perform_broadcasts
