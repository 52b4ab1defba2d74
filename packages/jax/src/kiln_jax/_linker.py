"""The JAX linker: the whole rewritten graph traced into one ``jax.jit`` function.

Stage 2 for JAX. :class:`JaxLinker` builds the node functions of the graph once
(:class:`~kiln_jax._graph.JaxGraph`) and returns a :class:`JaxThunk`, which jit-compiles
the traced graph at its first call (XLA compiles it; JAX's persistent compilation
cache, under kiln's cache root, keeps the executable across processes:
:mod:`kiln_jax._cache`).

Inputs. Every input of the function graph is an argument of the jitted function,
shared variables included, so a new value of a Data variable with the same shape
runs the same executable (no recompilation; a new shape retraces, as in JAX). Inputs
that decide a shape (:meth:`JaxGraph.static_roots`) are passed as values known when
tracing instead: each new value of such an input compiles a new executable. Random
generators become JAX keys (:mod:`kiln_jax.random`).

float64. JAX computes in 32 bits unless its ``jax_enable_x64`` flag is on. kiln never
sets that flag: a graph with a 64-bit value (float64, int64, ...) is traced and called
inside ``jax.enable_x64(True)``, JAX's scoped switch, and the flag is as the user left
it after the call.

Errors. An error while tracing (an Op that JAX cannot compute, a shape it refuses)
keeps its type and gets a note naming the node and the backend, as on the VM; a
missing implementation is a :class:`~kiln_jax._funcify.NoJaxImplementation` when
linking.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from kiln_compile import FunctionGraph, LinkerDoc, Profile
from kiln_graph import KilnValueError, RandomGeneratorType, TensorType, Variable
from kiln_jax._cache import enable_compilation_cache
from kiln_jax._graph import BACKEND, JaxGraph
from kiln_jax.random import as_key, key_data
from kiln_random import RandomVariable

_WIDE = frozenset({"float64", "int64", "uint64", "complex128"})


def needs_x64(fgraph: FunctionGraph) -> bool:
    """Whether a tensor of ``fgraph`` (an input, constant or result) has a 64-bit dtype."""
    variables: list[Variable] = list(fgraph.inputs)
    for node in fgraph.nodes:
        variables.extend(node.inputs)
        variables.extend(node.outputs)
    return any(isinstance(v.type, TensorType) and v.type.dtype in _WIDE for v in variables)


def x64_scope(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """Return ``jax.enable_x64(True)`` when ``enabled``, else a context that does nothing."""
    return jax.enable_x64(True) if enabled else contextlib.nullcontext()


def _generator_origin(v: Variable, inputs: dict[Variable, int]) -> int:
    """Return the position of the input generator that the generator ``v`` derives from."""
    while v not in inputs:
        if v.owner is None or not isinstance(v.owner.op, RandomVariable):
            raise KilnValueError(f"the generator {v!r} does not derive from an input generator")
        v = v.owner.inputs[0]
    return inputs[v]


class JaxThunk:
    """The callable a Function runs: a list of input values in, a list of outputs out.

    Attributes
    ----------
    x64
        Whether the graph needs JAX's float64 switch.
    static
        Positions of the inputs passed as values known when tracing.
    traces
        How many times the graph was traced (each trace is one XLA compilation).
    stage2
        What :attr:`kiln_compile.Profile.stage2` shows: the cache directory, ``x64``,
        ``static`` and ``traces``.
    """

    def __init__(self, fgraph: FunctionGraph, graph: JaxGraph, cache_dir: str | None) -> None:
        self.fgraph = fgraph
        self.graph = graph
        self.x64 = needs_x64(fgraph)
        self.static = graph.static_roots()
        self.traces = 0
        positions = {v: i for i, v in enumerate(fgraph.inputs)}
        self._generators = [
            i for i, v in enumerate(fgraph.inputs) if isinstance(v.type, RandomGeneratorType)
        ]
        # Each output: ("tensor", dtype) or ("generator", origin input, advanced?).
        self._outputs: list[tuple[str, Any, bool]] = []
        for v in fgraph.outputs:
            if isinstance(v.type, RandomGeneratorType):
                origin = _generator_origin(v, positions)
                self._outputs.append(("generator", origin, v is not fgraph.inputs[origin]))
            else:
                self._outputs.append(("tensor", v.type.dtype, False))  # type: ignore[attr-defined]
        self._jitted: dict[bytes, Callable[..., Any]] = {}
        self.stage2: dict[str, Any] = {
            "cache_dir": cache_dir,
            "x64": self.x64,
            "static": list(self.static),
        }

    def fn(self, values: Sequence[Any]) -> list[Any]:
        """Return the graph's outputs from one value per input: the pure JAX function.

        ``values`` are JAX or NumPy arrays (random generators as typed JAX keys, see
        :func:`kiln_jax.random.as_key`); the outputs are JAX arrays of the graph's
        dtypes (generators as keys). Traceable: it can be jitted, vmapped and
        differentiated. It runs inside ``jax.enable_x64(True)`` when :attr:`x64`;
        call it in that scope too, so that float64 inputs reach it as float64.
        """
        with x64_scope(self.x64):
            outs = self.graph(values)
            return [
                jax.numpy.asarray(o).astype(spec[1]) if spec[0] == "tensor" else o
                for o, spec in zip(outs, self._outputs, strict=True)
            ]

    def _tensor_outputs(self, values: Sequence[Any]) -> tuple[Any, ...]:
        outs = self.fn(values)
        return tuple(o for o, spec in zip(outs, self._outputs, strict=True) if spec[0] == "tensor")

    def _compiled(self, static: dict[int, np.ndarray]) -> Callable[..., Any]:
        key = b"".join(
            f"{i}:{v.dtype.str}:{v.shape}:".encode() + v.tobytes() for i, v in static.items()
        )
        found = self._jitted.get(key)
        if found is not None:
            return found
        n = len(self.fgraph.inputs)
        generators = set(self._generators)

        def traced(*dynamic: Any) -> tuple[Any, ...]:
            self.traces += 1
            self.stage2["traces"] = self.traces
            it = iter(dynamic)
            values = [static[i] if i in static else next(it) for i in range(n)]
            for i in generators:
                values[i] = as_key(values[i])
            return self._tensor_outputs(values)

        found = self._jitted[key] = jax.jit(traced)
        return found

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        args = list(values)
        advanced: dict[int, np.random.Generator] = {}
        for i in self._generators:
            args[i], advanced[i] = key_data(args[i])
        static = {i: np.asarray(args[i]) for i in self.static}
        compiled = self._compiled(static)
        dynamic = [a for i, a in enumerate(args) if i not in static]
        with x64_scope(self.x64):
            try:
                tensors = compiled(*dynamic)
            except Exception as exc:
                if not any(BACKEND in note for note in getattr(exc, "__notes__", ())):
                    exc.add_note(f"while running the function compiled by backend {BACKEND!r}")
                raise
        it = iter(tensors)
        results: list[Any] = []
        for kind, what, moved in self._outputs:
            if kind == "tensor":
                results.append(np.array(next(it)))
            else:
                results.append(advanced[what] if moved else values[what])
        return results


class JaxLinker:
    """Link a function graph into one ``jax.jit``-compiled function.

    Stage 1 for JAX runs without the ``inplace`` phase (XLA's buffers are immutable;
    XLA assigns buffers itself) and without ``fusion`` (XLA fuses elementwise and
    reduction code itself; kiln's Composites would only hide the ops from it). No
    JAX-only rewrite is registered under the ``jax`` tag: shape arithmetic is folded
    when tracing, and XLA does common subexpressions, fusion and layout.
    """

    name = "jax"
    #: Tags of JAX-only rewrites (none registered so far; see the class docstring).
    rewrite_tags: tuple[str, ...] = ("jax",)
    #: The phases that mean nothing to XLA.
    excluded_rewrites: tuple[str, ...] = ("inplace", "fusion")
    doc = LinkerDoc(
        compiles="the whole graph traced into one function and compiled by XLA "
        "(`jax.jit`) on the first call; float64 scoped to kiln's calls",
        system_compiler="no (XLA ships with jaxlib)",
        cache="`jax/`: JAX's persistent compilation cache (XLA executables)",
        note="For numpyro and blackjax, whose samplers call the log-density inside "
        "XLA, and for accelerators; a larger per-call overhead than Numba from Python.",
    )

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> JaxThunk:
        """Return the callable computing ``fgraph`` (compiled by XLA at its first call).

        Raises
        ------
        NoJaxImplementation
            If an Op of the graph has no JAX implementation.
        KilnValueError
            If a value JAX must know when tracing (a shape) depends on a random draw.
        """
        cache_dir = enable_compilation_cache()
        thunk = JaxThunk(fgraph, JaxGraph(fgraph.inputs, fgraph.outputs), cache_dir)
        if profile is not None:
            profile.stage2 = thunk.stage2
        return thunk
