"""The MLX linker: the whole rewritten graph traced into one ``mx.compile`` function.

Stage 2 for MLX. :class:`MlxLinker` builds the node functions of the graph once
(:class:`~kiln_mlx._graph.MlxGraph`) and returns an :class:`MlxThunk`, which traces the
graph into one function and compiles it with ``mx.compile`` at its first call (MLX
fuses elementwise code into C++ kernels that the system's C++ compiler builds; they
are kept under kiln's cache root: :mod:`kiln_mlx._cache`).

Inputs. Every input of the function graph is an argument of the compiled function,
shared variables included, so a new value of a Data variable with the same shape
runs the same program (a new shape retraces). Inputs that decide a shape
(:meth:`MlxGraph.static_roots`) are passed as values known when tracing: each new
value of such an input traces a new program. Random generators become MLX keys
(:mod:`kiln_mlx.random`).

float64. MLX computes float64 on the CPU only, and silently makes float32 arrays of
float64 NumPy arrays and Python floats: every array kiln_mlx makes names its dtype
(:mod:`kiln_mlx._dtypes`), and the functions MLX computes at float32 accuracy are
kiln's (:mod:`kiln_mlx._float64_math`). :class:`MlxFloat32Linker` (``linker=
"mlx_float32"``) computes the graph's float64 values as float32 on MLX's default
device (the GPU with Metal), what Apple silicon's GPU supports; its outputs keep the
graph's dtypes.

Eager graphs. A graph using the incomplete gamma or beta functions (or their
derivatives), the modified Bessel functions or the draws of :mod:`kiln_mlx._draws`
runs eagerly, with one warning saying why: ``mx.compile`` would build
hundreds of C++ kernels for their unrolled expansions (:data:`kiln_mlx._special.
UNCOMPILABLE`).

Errors. An error while tracing keeps its type and gets a note naming the node and the
backend, as on the VM; an error raised by MLX while running gets a note naming the
backend; a missing implementation is a :class:`~kiln_mlx.NoMlxImplementation` when
linking.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from kiln_compile import FunctionGraph, LinkerDoc, Profile
from kiln_graph import Composite, Elemwise, KilnValueError, RandomGeneratorType, Variable
from kiln_mlx._cache import kernel_folder, kernel_scope, precompile_preamble
from kiln_mlx._draws import UNCOMPILABLE as DRAWS_UNCOMPILABLE
from kiln_mlx._dtypes import as_mx, float32_mode
from kiln_mlx._graph import BACKEND, MlxGraph
from kiln_mlx._special import UNCOMPILABLE
from kiln_mlx.random import key_data
from kiln_random import RandomVariable


class EagerWarning(UserWarning):
    """The MLX linker runs a function eagerly (without ``mx.compile``); the message says why."""


def uncompilable_ops(graph: MlxGraph) -> list[str]:
    """Return the names of the scalar ops of ``graph`` that ``mx.compile`` cannot afford."""
    found: set[str] = set()
    for node in graph.nodes:
        if isinstance(node.op, DRAWS_UNCOMPILABLE):
            found.add(type(node.op).__name__)
        if not isinstance(node.op, Elemwise):
            continue
        scalar = node.op.scalar_op
        steps = [s for s, _ in scalar.steps] if isinstance(scalar, Composite) else [scalar]
        found.update(type(s).__name__ for s in steps if isinstance(s, UNCOMPILABLE))
    return sorted(found)


def _generator_origin(v: Variable, inputs: dict[Variable, int]) -> int:
    """Return the position of the input generator that the generator ``v`` derives from."""
    while v not in inputs:
        if v.owner is None or not isinstance(v.owner.op, RandomVariable):
            raise KilnValueError(f"the generator {v!r} does not derive from an input generator")
        v = v.owner.inputs[0]
    return inputs[v]


class MlxThunk:
    """The callable a Function runs: a list of input values in, a list of outputs out.

    Attributes
    ----------
    float32
        Whether the graph's float64 values are computed as float32.
    compiled
        Whether the traced function is compiled by ``mx.compile`` (else run eagerly).
    static
        Positions of the inputs passed as values known when tracing.
    traces
        How many times the graph was traced.
    stage2
        What :attr:`kiln_compile.Profile.stage2` shows.
    """

    def __init__(
        self,
        fgraph: FunctionGraph,
        graph: MlxGraph,
        kernel_dir: str | None,
        float32: bool,
        compiled: bool,
    ) -> None:
        self.fgraph = fgraph
        self.graph = graph
        self.float32 = float32
        self.compiled = compiled
        self.kernel_dir = kernel_dir
        self.static = graph.static_roots()
        self.traces = 0
        positions = {v: i for i, v in enumerate(fgraph.inputs)}
        self._generators = [
            i for i, v in enumerate(fgraph.inputs) if isinstance(v.type, RandomGeneratorType)
        ]
        self._input_dtypes = [getattr(v.type, "dtype", None) for v in fgraph.inputs]
        # Each output: ("tensor", dtype) or ("generator", origin input, advanced?).
        self._outputs: list[tuple[str, Any, bool]] = []
        for v in fgraph.outputs:
            if isinstance(v.type, RandomGeneratorType):
                origin = _generator_origin(v, positions)
                self._outputs.append(("generator", origin, v is not fgraph.inputs[origin]))
            else:
                self._outputs.append(("tensor", v.type.dtype, False))  # type: ignore[attr-defined]
        self._programs: dict[bytes, Callable[..., Any]] = {}
        self.stage2: dict[str, Any] = {
            "kernel_dir": kernel_dir,
            "float32": float32,
            "compiled": compiled,
            "static": list(self.static),
        }

    def fn(self, values: Sequence[Any]) -> list[Any]:
        """Return the graph's outputs from one value per input: the pure MLX function.

        ``values`` are MLX or NumPy arrays (random generators as MLX keys, see
        :func:`kiln_mlx.random.key_data`); the tensor outputs are MLX arrays (of the
        graph's dtypes, float64 as float32 in float32 mode), generators keys.
        """
        with float32_mode(self.float32):
            outs = self.graph(values)
            return [
                as_mx(o, spec[1]) if spec[0] == "tensor" else o
                for o, spec in zip(outs, self._outputs, strict=True)
            ]

    def _program(self, static: dict[int, np.ndarray]) -> Callable[..., Any]:
        key = b"".join(
            f"{i}:{v.dtype.str}:{v.shape}:".encode() + v.tobytes() for i, v in static.items()
        )
        found = self._programs.get(key)
        if found is not None:
            return found
        n = len(self.fgraph.inputs)

        def traced(*dynamic: Any) -> list[Any]:
            self.traces += 1
            self.stage2["traces"] = self.traces
            it = iter(dynamic)
            values = [static[i] if i in static else next(it) for i in range(n)]
            outs = self.fn(values)
            return [o for o, spec in zip(outs, self._outputs, strict=True) if spec[0] == "tensor"]

        found = self._programs[key] = mx.compile(traced) if self.compiled else traced
        return found

    def _argument(self, i: int, value: Any) -> Any:
        dtype = self._input_dtypes[i]
        with float32_mode(self.float32):
            return as_mx(value, dtype)

    def _failing_node(self, args: list[Any], static: dict[int, np.ndarray]) -> str:
        """Return the note naming the node whose evaluation fails (found by rerunning eagerly)."""
        values = [
            static[i] if i in static else a if i in self._generators else self._argument(i, a)
            for i, a in enumerate(args)
        ]
        try:
            with float32_mode(self.float32):
                mx.eval([o for o in self.graph(values, locate=True) if isinstance(o, mx.array)])
        except Exception as again:  # noqa: BLE001 - only its note is wanted
            notes = [n for n in getattr(again, "__notes__", ()) if n.startswith("while computing")]
            if notes:
                return notes[0]
        return "(node not found: the error did not recur when run node by node)"

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        args = list(values)
        advanced: dict[int, np.random.Generator] = {}
        for i in self._generators:
            data, advanced[i] = key_data(args[i])
            args[i] = mx.array(data, dtype=mx.uint32)
        static = {i: np.asarray(args[i]) for i in self.static}
        program = self._program(static)
        dynamic = [
            a if i in self._generators else self._argument(i, a)
            for i, a in enumerate(args)
            if i not in static
        ]
        with kernel_scope(self.kernel_dir):
            try:
                tensors = program(*dynamic)
                mx.eval(tensors)
            except Exception as exc:
                if not any(BACKEND in note for note in getattr(exc, "__notes__", ())):
                    exc.add_note(self._failing_node(args, static))
                    exc.add_note(f"while running the function compiled by backend {BACKEND!r}")
                raise
        it = iter(tensors)
        results: list[Any] = []
        for kind, what, moved in self._outputs:
            if kind == "tensor":
                results.append(np.asarray(next(it)).astype(what, copy=False))
            else:
                results.append(advanced[what] if moved else values[what])
        return results


class MlxLinker:
    """Link a function graph into one ``mx.compile``-compiled MLX function (float64, CPU).

    Stage 1 for MLX runs without the ``inplace`` phase (MLX arrays are immutable values
    in a traced program) and without ``fusion`` (``mx.compile`` fuses elementwise code
    itself; kiln's Composites would only hide the ops from it). No MLX-only rewrite is
    registered under the ``mlx`` tag.
    """

    name = "mlx"
    #: Tags of MLX-only rewrites (none registered so far).
    rewrite_tags: tuple[str, ...] = ("mlx",)
    #: The phases that mean nothing to MLX.
    excluded_rewrites: tuple[str, ...] = ("inplace", "fusion")
    #: Whether float64 is computed as float32 (:class:`MlxFloat32Linker`).
    float32 = False
    #: Whether the traced function goes through ``mx.compile`` (False: run eagerly).
    compile = True
    doc = LinkerDoc(
        compiles="the whole graph traced into one function and compiled by `mx.compile` "
        "(fused C++ kernels on the CPU) on the first call; float64 on the CPU, with "
        "kiln's float64 exp/sin/cos/erf/lgamma/digamma (MLX's are float32-accurate); "
        "`mlx_float32`: float64 computed as float32, on Metal where present",
        system_compiler="yes: a C++ compiler for `mx.compile` on the CPU (g++)",
        cache="`mlx/`: MLX's compiled CPU kernels (C++ sources and shared libraries) "
        "and the precompiled preamble they include (50 MB, built once in about 2 s)",
        note="For Apple silicon's GPU (`mlx_float32`) and CUDA builds of MLX; on a "
        "Linux CPU it is slower than Numba and JAX per call.",
    )

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> MlxThunk:
        """Return the callable computing ``fgraph`` (compiled by MLX at its first call).

        Raises
        ------
        NoMlxImplementation
            If an Op of the graph has no MLX implementation.
        KilnValueError
            If a value MLX must know when tracing (a shape) depends on a random draw.
        """
        with float32_mode(self.float32):
            graph = MlxGraph(fgraph.inputs, fgraph.outputs)
        compiled = self.compile
        heavy = uncompilable_ops(graph) if compiled else []
        if heavy:
            warnings.warn(
                f"kiln: the MLX backend runs this function eagerly (without mx.compile): "
                f"{', '.join(heavy)} unroll into thousands of operations that mx.compile "
                "would build into hundreds of C++ kernels (minutes of g++)",
                EagerWarning,
                stacklevel=2,
            )
            compiled = False
        folder = kernel_folder()
        if compiled:
            precompile_preamble(folder)
        thunk = MlxThunk(fgraph, graph, folder, self.float32, compiled)
        if profile is not None:
            profile.stage2 = thunk.stage2
        return thunk


class MlxFloat32Linker(MlxLinker):
    """The MLX linker computing the graph's float64 values as float32 (``"mlx_float32"``).

    What MLX's GPU backends (Metal) support: results are float32-accurate, returned in
    the graph's dtypes.
    """

    name = "mlx_float32"
    float32 = True
