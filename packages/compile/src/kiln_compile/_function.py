"""``function()``: prepare a graph, rewrite it, link it, and call it with arrays."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from kiln_compile import _memo
from kiln_compile._config import config
from kiln_compile._fgraph import FunctionGraph
from kiln_compile._linkers import Thunk, backend_query, get_linker, resolve_linker_name
from kiln_compile._mode import Mode, get_mode
from kiln_compile._profile import Profile
from kiln_compile._stage1 import rewrite_stage1
from kiln_graph import (
    Apply,
    Constant,
    KilnTypeError,
    KilnValueError,
    RandomGeneratorType,
    SharedVariable,
    TensorType,
    Variable,
    graph_inputs,
    graph_replace,
    toposort,
)
from kiln_graph.helpers import long_lived_objects
from kiln_graph.tensor import as_tensor
from kiln_rewrite import Query


def _as_update_pairs(updates: Any) -> list[tuple[SharedVariable, Variable]]:
    if updates is None:
        return []
    items = list(updates.items()) if isinstance(updates, Mapping) else list(updates)
    pairs = []
    for item in items:
        try:
            target, expr = item
        except (TypeError, ValueError) as exc:
            raise KilnTypeError(
                f"updates: expected a dict or (shared_variable, expression) pairs, got {item!r}"
            ) from exc
        if not isinstance(target, SharedVariable):
            raise KilnTypeError(f"updates: the target {target!r} is not a shared variable")
        if isinstance(target.type, TensorType):
            expr = as_tensor(expr)
            if expr.type.dtype != target.type.dtype or expr.type.ndim != target.type.ndim:
                raise KilnTypeError(
                    f"updates: the new value of {target.name or target!r} has type {expr.type}, "
                    f"expected {target.type} (cast it with kt.cast)"
                )
        elif not isinstance(expr, Variable) or type(expr.type) is not type(target.type):
            raise KilnTypeError(
                f"updates: the new value of {target!r} must have type {target.type}"
            )
        pairs.append((target, expr))
    targets = [t for t, _ in pairs]
    if len(set(targets)) != len(targets):
        raise KilnValueError("updates: a shared variable is updated twice")
    return pairs


def _check_inputs(inputs: Sequence[Any]) -> list[Variable]:
    checked = []
    for i, v in enumerate(inputs):
        if not isinstance(v, Variable):
            raise KilnTypeError(f"inputs[{i}]: expected a symbolic variable, got {v!r}")
        if isinstance(v, Constant):
            raise KilnTypeError(f"inputs[{i}]: {v!r} is a constant, not an input")
        if isinstance(v, SharedVariable):
            raise KilnTypeError(
                f"inputs[{i}]: {v!r} is a shared variable; shared variables are implicit "
                "inputs and must not be listed"
            )
        if v.owner is not None:
            raise KilnTypeError(
                f"inputs[{i}]: {v!r} is computed by {v.owner.op}; inputs must be root variables "
                "(use givens= to substitute an expression)"
            )
        checked.append(v)
    if len(set(checked)) != len(checked):
        raise KilnValueError("inputs: a variable is listed twice")
    return checked


def prepare(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    updates: Any = None,
    givens: Mapping[Variable, Any] | None = None,
    no_default_updates: bool = False,
) -> FunctionGraph:
    """Return the :class:`FunctionGraph` of a function: givens applied, shared inputs added.

    Unless ``no_default_updates``, each shared random generator the graph draws from
    (and ``updates`` does not name) is threaded through its draws and advanced after
    each call (:func:`thread_generators`).
    """
    ins = _check_inputs(inputs)
    outs = [as_tensor(o) if not isinstance(o, Variable) else o for o in outputs]
    pairs = _as_update_pairs(updates)
    all_outs = outs + [e for _, e in pairs]
    if givens:
        replace = {}
        for old, new in givens.items():
            if not isinstance(old, Variable):
                raise KilnTypeError(f"givens: keys must be variables, got {old!r}")
            replace[old] = new if isinstance(new, Variable) else as_tensor(new)
        all_outs = list(graph_replace(all_outs, replace))  # type: ignore[arg-type]
    targets = [t for t, _ in pairs]
    if not no_default_updates:
        all_outs, advanced = thread_generators(all_outs, skip=targets)
        for target, expr in advanced.items():
            targets.append(target)
            all_outs.append(expr)
    shared = _shared_inputs(all_outs)
    for target in targets:
        if target not in shared:
            shared.append(target)
    return FunctionGraph([*ins, *shared], all_outs, len(ins), targets)


def thread_generators(
    outputs: Sequence[Variable], skip: Sequence[Variable] = ()
) -> tuple[list[Variable], dict[SharedVariable, Variable]]:
    """Chain the draws from each shared generator; return the new outputs and updates.

    Every node reading a shared random generator ``r`` (not in ``skip``) directly is
    rewired, in program order, to read the state the previous such node returns (its
    first generator output), so the draws of one function are independent, as
    successive calls of a NumPy generator are; ``r`` is then updated to the last state
    derived from it. Draws from a generator state of the graph (another draw's output)
    keep their input: such a chain is explicit already. Two identical draw expressions
    are one node, hence one draw.
    """
    order = toposort(list(outputs))
    consumers: dict[SharedVariable, list[Apply]] = {}
    for node in order:
        for v in node.inputs:
            if (
                isinstance(v, SharedVariable)
                and isinstance(v.type, RandomGeneratorType)
                and v not in skip
            ):
                consumers.setdefault(v, []).append(node)
    if not consumers:
        return list(outputs), {}
    position = {node: k for r, nodes in consumers.items() for k, node in enumerate(nodes)}
    state: dict[SharedVariable, Variable] = {}  # each generator's latest state
    root_of: dict[Variable, SharedVariable] = {}  # states derived from each generator
    memo: dict[Variable, Variable] = {}
    for node in order:
        inputs = [memo.get(v, v) for v in node.inputs]
        roots = {root_of[v] for v in inputs if v in root_of}
        for i, v in enumerate(node.inputs):
            if v in consumers:
                roots.add(v)  # type: ignore[arg-type]
                if position[node] > 0:
                    inputs[i] = state[v]  # type: ignore[index]
        changed = any(a is not b for a, b in zip(inputs, node.inputs, strict=True))
        new = node.op.make_node(*inputs) if changed else node
        memo.update(zip(node.outputs, new.outputs, strict=True))
        out = next((o for o in new.outputs if isinstance(o.type, RandomGeneratorType)), None)
        if out is not None:
            for root in roots:
                state[root] = out
                root_of[out] = root
    return [memo.get(v, v) for v in outputs], state


def _shared_inputs(outputs: Sequence[Variable]) -> list[SharedVariable]:
    return [v for v in graph_inputs(list(outputs)) if isinstance(v, SharedVariable)]


class Function:
    """A compiled function: call it with one array per input, get arrays back.

    Attributes
    ----------
    fgraph
        The (rewritten) graph it runs.
    mode
        The :class:`Mode` it was compiled with; ``linker`` is the backend's name.
    thunk
        The backend's raw callable: a list of input values (explicit inputs, then
        shared values) in, a list of output values out, with no checks.
    """

    def __init__(
        self,
        fgraph: FunctionGraph,
        thunk: Thunk,
        mode: Mode,
        linker: str,
        single_output: bool,
        trust_input: bool,
        profile: Profile | None,
    ) -> None:
        self.fgraph = fgraph
        self.thunk = thunk
        self.mode = mode
        self.linker = linker
        self.trust_input = trust_input
        self._profile = profile
        self._single = single_output
        self._explicit = fgraph.inputs[: fgraph.n_explicit]
        self._shared = fgraph.inputs[fgraph.n_explicit :]
        self._names = {v.name: i for i, v in enumerate(self._explicit) if v.name}
        self._types = [v.type for v in self._explicit]
        self._labels = [f"input {self._label(i)}" for i in range(len(self._explicit))]
        self._set_direct()

    def _set_direct(self) -> None:
        # Calls that need nothing but the thunk: trusted inputs, no shared values to
        # append, no updates to apply, no timing to record. A thunk may offer a
        # ``direct(*inputs)`` callable after its first call (the Numba linker's C entry),
        # returning the outputs as a list, or NotImplemented to go through the thunk.
        self._direct = self.trust_input and not self._shared and self._profile is None
        self._fast: Any = None
        self._fast_unknown = self._direct  # until a call has asked the thunk for one

    @property
    def profile(self) -> Profile | None:
        """A :class:`Profile` when compiled with ``profile=True``, else None.

        Setting it to None stops the timing of calls (they then take the direct path).
        """
        return self._profile

    @profile.setter
    def profile(self, profile: Profile | None) -> None:
        self._profile = profile
        self._set_direct()

    @property
    def inputs(self) -> tuple[Variable, ...]:
        """The explicit inputs, in call order."""
        return self._explicit

    @property
    def outputs(self) -> tuple[Variable, ...]:
        """The requested outputs as they are computed (after rewriting)."""
        return self.fgraph.outputs[: self.fgraph.n_outputs]

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        n = len(self._explicit)
        if len(args) > n:
            raise KilnTypeError(f"function takes {n} input(s), got {len(args)}")
        values: list[Any] = list(args) + [None] * (n - len(args))
        given = [True] * len(args) + [False] * (n - len(args))
        for key, value in kwargs.items():
            if key not in self._names:
                raise KilnTypeError(
                    f"unknown input name {key!r}; named inputs: {sorted(self._names)}"
                )
            i = self._names[key]
            if given[i]:
                raise KilnTypeError(f"input {key!r} given twice")
            values[i], given[i] = value, True
        missing = [self._label(i) for i, g in enumerate(given) if not g]
        if missing:
            raise KilnTypeError(f"missing value for input(s): {', '.join(missing)}")
        if not self.trust_input:
            values = [
                t.filter(val, name=label)
                for t, label, val in zip(self._types, self._labels, values, strict=True)
            ]
        return values

    def _label(self, i: int) -> str:
        v = self._explicit[i]
        return f"{i} ({v.name!r})" if v.name else str(i)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast  # set only while calls are direct
        if fast is not None and not kwargs:
            try:
                results = fast(*args)
            except Exception:  # noqa: BLE001 (the thunk's call raises it as kiln names it)
                results = NotImplemented
            if results is not NotImplemented:
                return results[0] if self._single else results
        if self._direct and not kwargs:
            results = self.thunk(args)
            if self._fast_unknown:  # a thunk offers it by the end of its first call, or never
                self._fast = getattr(self.thunk, "direct", None)
                self._fast_unknown = False
            return results[0] if self._single else results
        values = self._bind(args, kwargs) if (kwargs or not self.trust_input) else list(args)
        values.extend(s.get_value(borrow=True) for s in self._shared)  # type: ignore[attr-defined]
        if self.profile is not None:
            start = time.perf_counter()
            results = self.thunk(values)
            self.profile.record_call(time.perf_counter() - start)
        else:
            results = self.thunk(values)
        n_out = self.fgraph.n_outputs
        for target, value in zip(self.fgraph.update_targets, results[n_out:], strict=True):
            target.set_value(value, borrow=True)  # type: ignore[attr-defined]
        if self._single:
            return results[0]
        return results[:n_out]


def _describe(mode: Mode) -> str:
    """Return a short description of ``mode`` for profiles."""
    if mode.name:
        return mode.name
    if mode.rewrites is None:
        return "no rewrites"
    q = mode.rewrites
    text = "+".join(sorted(q.include))
    if q.exclude:
        text += " -" + " -".join(sorted(q.exclude))
    return text


def linker_name_of(mode: Any = None, warn: bool = False) -> str:
    """Return the name of the linker that :func:`function` uses for ``mode``.

    A mode whose linker is ``"auto"`` takes ``config.linker``; ``"auto"`` there resolves
    to Numba when it is installed, else to the Python VM (warning once when ``warn``).
    """
    the_mode = get_mode(mode)
    requested = config.linker if the_mode.linker == "auto" else the_mode.linker
    return resolve_linker_name(requested, warn=warn)


def rewrite_cached(
    inputs: Sequence[Variable], outputs: Sequence[Variable], query: Query
) -> list[Variable]:
    """Return ``outputs`` rewritten by ``query``, through the Stage-1 cache.

    The same cache as a compiled function's Stage 1 (keyed by the graph, the query and
    the rewriting code): a graph rewritten once is loaded, not rewritten, in a later
    process. For a graph that is rewritten before it is built further, such as a
    log-density stabilized before it is differentiated (``kiln_rewrite.stable_grad``).
    """
    fgraph = prepare(inputs, outputs, no_default_updates=True)
    return list(rewrite_stage1(fgraph, query, None).outputs)


def function(
    inputs: Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    mode: Mode | str | None = None,
    updates: Any = None,
    givens: Mapping[Variable, Any] | None = None,
    profile: bool = False,
    trust_input: bool = False,
    no_default_updates: bool = False,
) -> Function:
    """Compile ``outputs`` as a function of ``inputs``.

    Parameters
    ----------
    inputs
        Root variables, in the order the function takes them. Shared variables are
        implicit inputs and must not be listed.
    outputs
        A variable (the function returns one array) or a list (it returns a list).
    mode
        A :class:`Mode`, ``"FAST_RUN"`` (default: all rewrites, the default backend) or
        ``"FAST_COMPILE"`` (few rewrites, the Python VM).
    updates
        ``{shared_variable: new_value_expression}``, applied after each call.
    givens
        ``{variable: replacement}`` substituted in the graph before compiling.
    profile
        Record compile and call timings in ``Function.profile`` (also on for every
        function when ``config.profile`` is set); ``f.profile.summary()`` prints them.
    trust_input
        Skip the checks and conversions of the inputs (for hot loops). With no shared
        variables and no profile, calls then go to the thunk directly, or to a
        compiled entry it offers (the Numba linker's shared library, after the first
        call), which checks only the inputs' types.
    no_default_updates
        Leave the shared random generators as they are: each draw reads its generator's
        stored state, and calls repeat the same draws (by default the draws of one
        generator are chained and it advances after each call, so calls give new draws).

    Examples
    --------
    >>> x = kt.vector("x")  # doctest: +SKIP
    >>> f = function([x], kt.exp(x).sum())  # doctest: +SKIP
    >>> f([0.0, 1.0])  # doctest: +SKIP
    array(3.71828183)
    """
    with long_lived_objects():
        if isinstance(inputs, Variable):
            raise KilnTypeError("inputs: expected a list of variables, got a single variable")
        # Anything but a list or tuple is one output (prepare() converts non-variables).
        single = not isinstance(outputs, list | tuple)
        outs: list[Any] = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        the_mode = get_mode(mode)
        prof = Profile(mode=_describe(the_mode)) if (profile or config.profile) else None
        t0 = time.perf_counter()
        fgraph = prepare(list(inputs), outs, updates, givens, no_default_updates)
        t1 = time.perf_counter()
        prepared = fgraph
        linker_name = linker_name_of(the_mode, warn=config.warn_fallback)
        linker = get_linker(linker_name)
        # Loading the backend (importing its package, once per process) is Stage-2 time.
        load_linker = time.perf_counter() - t1
        query = backend_query(the_mode.rewrites, linker) if the_mode.rewrites is not None else None
        key = (prepared.digest, linker_name, query.key() if query is not None else None)
        found = _memo.lookup(key, prepared) if config.memo else None
        if found is not None:
            fgraph, thunk = found
            t2 = t3 = time.perf_counter()
            if prof is not None:
                prof.cache = "memo"
                prof.stage2 = {"cache": "memo"}
        else:
            if query is not None:
                fgraph = rewrite_stage1(fgraph, query, prof)
            t2 = time.perf_counter()
            thunk = linker.link(fgraph, prof)
            t3 = time.perf_counter()
            if config.memo:
                _memo.store(key, fgraph, thunk)
        if prof is not None:
            prof.compile_times.update(
                {
                    "prepare": t1 - t0,
                    "rewrite": t2 - t1 - load_linker,
                    "link": t3 - t2 + load_linker,
                }
            )
            prof.nodes.update({"prepared": len(prepared.nodes), "rewritten": len(fgraph.nodes)})
            prof.linker = linker_name
        return Function(fgraph, thunk, the_mode, linker_name, single, trust_input, prof)
