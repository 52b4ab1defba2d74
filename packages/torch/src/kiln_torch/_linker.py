"""The torch linker: a whole graph generated as one Python function over torch tensors.

Stage 2 for PyTorch. :class:`TorchLinker` generates the graph's program once
(:class:`~kiln_torch._program.TorchProgram`: one module-level function, one line per
node) and returns a :class:`TorchThunk`, which runs it.

Execution. By default the program runs eagerly under ``torch.inference_mode()``: kiln's
graph already holds the gradient, so torch's autograd records nothing. With
``kiln_compile.config.torch_compile`` on, the program goes through ``torch.compile``
(inductor) at its first call on a device; inductor's cache lives under kiln's cache
root (:mod:`kiln_torch._cache`). Compiling takes tens of seconds cold and a few
seconds from the cache; a call is then several times cheaper than eager.

Device and dtypes. ``config.torch_device`` (``"cpu"`` by default; ``"cuda"``, ``"mps"``
where torch has them) is read at each call: the program is bound once per device, its
constants copied there. Every tensor keeps the graph's dtype: a float64 graph computes
in float64 (torch's float32 default never applies: every tensor is created with an
explicit dtype).

Inputs. Every input of the function graph is an argument of the program, shared
variables (Data) included: a new value, of any shape, runs the same program. NumPy
values are passed without a copy on the CPU (``torch.from_numpy``); outputs come back
as NumPy arrays. Random generators become ``torch.Generator`` objects
(:mod:`kiln_torch.random`).

Threads. ``config.torch_threads`` sets the threads torch computes a call with, around
each call (torch's own setting is restored after it). Its default ``0`` decides per
graph: a single thread when no input of the call and no constant of the program has
:data:`PARALLEL_ELEMENTS` elements or more, torch's own count otherwise. Torch's worker
threads only pay on large arrays; on the benchmark models (arrays up to 200,000
elements) two threads on two cores were 27x slower per call than one on M3 (its
10,000 x 20 design matrix) and within 8% of it on M1, M2 and M4, in alternating blocks
(``benchmarks/torch_mlx.py``, ``ratio_torch_over_own_threads``). The
count is torch's per Python thread (OpenMP's, checked on torch 2.14; a thread that has
not used torch yet starts from the last count set), so chains run as threads each set
and restore their own.

Errors. An exception from inside torch keeps its type and gets a note naming the node
that failed and the backend, as on the VM; a missing implementation is a
:class:`~kiln_torch._funcify.NoTorchImplementation` when linking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_compile import BackendNotInstalledError, FunctionGraph, LinkerDoc, Profile, config
from kiln_graph import KilnValueError, RandomGeneratorType, TensorType, Variable
from kiln_random import RandomVariable

INSTALL_HINT = "pip install kiln[torch]"
#: The array size (elements) from which ``torch_threads=0`` leaves torch its own thread
#: count; below it a call runs on one thread (see the module docstring).
PARALLEL_ELEMENTS = 1_000_000


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendNotInstalledError(
            f"backend 'torch' needs PyTorch, which cannot be imported ({exc}); "
            f"install it with `{INSTALL_HINT}`"
        ) from exc
    return torch


def _generator_origin(v: Variable, inputs: dict[Variable, int]) -> int:
    """Return the position of the input generator that the generator ``v`` derives from."""
    while v not in inputs:
        if v.owner is None or not isinstance(v.owner.op, RandomVariable):
            raise KilnValueError(f"the generator {v!r} does not derive from an input generator")
        v = v.owner.inputs[0]
    return inputs[v]


class TorchThunk:
    """The callable a Function runs: a list of input values in, a list of outputs out.

    Attributes
    ----------
    program
        The generated program (its source: ``thunk.program.source``).
    stage2
        What :attr:`kiln_compile.Profile.stage2` shows: the device and whether
        ``torch.compile`` was used, per binding.
    """

    def __init__(self, fgraph: FunctionGraph, program: Any) -> None:
        from kiln_torch._convert import torch_dtype

        self.fgraph = fgraph
        self.program = program
        positions = {v: i for i, v in enumerate(fgraph.inputs)}
        self._inputs: list[tuple[bool, Any, str | None]] = []
        for v in fgraph.inputs:
            if isinstance(v.type, RandomGeneratorType):
                self._inputs.append((True, None, None))
            else:
                dtype = v.type.dtype  # type: ignore[attr-defined]
                self._inputs.append((False, torch_dtype(dtype), dtype))
        # Each output: ("tensor", dtype, host?) or ("generator", origin input, advanced?).
        self._outputs: list[tuple[str, Any, bool]] = []
        for v, host in zip(fgraph.outputs, program.host_outputs, strict=True):
            if isinstance(v.type, RandomGeneratorType):
                origin = _generator_origin(v, positions)
                self._outputs.append(("generator", origin, v is not fgraph.inputs[origin]))
            else:
                self._outputs.append(("tensor", v.type.dtype, host))  # type: ignore[attr-defined]
        self._bound: dict[tuple[str, bool], Callable[..., Any]] = {}
        self.stage2: dict[str, Any] = {"bindings": []}
        self._largest_constant = max(
            (int(np.size(c)) for c in program.constants.values()), default=0
        )

    def _threads(self, values: Sequence[Any]) -> int:
        """Return the thread count this call runs with (``config.torch_threads``), or 0.

        0 means torch's own count, left as it is.
        """
        threads = config.torch_threads
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            raise KilnValueError(
                f"torch_threads: expected an integer >= 0 (0: decided per graph), got {threads!r}"
            )
        if threads:
            return threads
        largest = self._largest_constant
        for value, (is_rng, _, _) in zip(values, self._inputs, strict=True):
            if not is_rng:
                largest = max(largest, int(np.size(value)))
        return 1 if largest < PARALLEL_ELEMENTS else 0

    def _runner(self) -> tuple[Any, Callable[..., Any], bool]:
        from kiln_torch._convert import check_device

        compiled = bool(config.torch_compile)
        device = check_device(config.torch_device, self.fgraph)
        key = (str(device), compiled)
        found = self._bound.get(key)
        if found is None:
            found = self._bind(device, compiled)
            self._bound[key] = found
        return device, found, compiled

    def _bind(self, device: Any, compiled: bool) -> Callable[..., Any]:
        import torch

        from kiln_torch._convert import to_device

        def to_dev(value: Any, dtype: str | None) -> Any:
            return to_device(value, dtype, device)

        namespace: dict[str, Any] = {"to_device": to_dev}
        for name, value in self.program.constants.items():
            namespace[name] = to_device(value, str(value.dtype), device)
        fn = self.program.bind(namespace)
        entry: dict[str, Any] = {"device": str(device), "compile": compiled}
        if compiled:
            from kiln_torch._cache import enable_inductor_cache

            entry["cache_dir"] = enable_inductor_cache()
            fn = torch.compile(fn, dynamic=False)
        self.stage2["bindings"].append(entry)
        return fn

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        import torch

        from kiln_torch._convert import to_device, to_numpy
        from kiln_torch.random import torch_generator

        device, fn, compiled = self._runner()
        args: list[Any] = []
        advanced: dict[int, np.random.Generator] = {}
        for i, (value, (is_rng, _, dtype)) in enumerate(zip(values, self._inputs, strict=True)):
            if is_rng:
                gen, advanced[i] = torch_generator(value, device)
                args.append(gen)
            else:
                args.append(to_device(value, dtype, device))
        threads = self._threads(values)
        restore = torch.get_num_threads()
        if threads and threads != restore:
            torch.set_num_threads(threads)
        scope = torch.no_grad() if compiled else torch.inference_mode()
        try:
            with scope:
                outs = fn(*args)
        except Exception as exc:
            node = self.program.failed_node(exc.__traceback__)
            if node is not None:
                from kiln_torch._program import annotate

                annotate(exc, node)
            elif not any("torch" in n for n in getattr(exc, "__notes__", ())):
                exc.add_note("while running the function compiled by backend 'torch'")
            raise
        finally:
            if threads and threads != restore:
                torch.set_num_threads(restore)
        results: list[Any] = []
        for out, (kind, what, flag) in zip(outs, self._outputs, strict=True):
            if kind == "tensor":
                results.append(np.asarray(out, dtype=what) if flag else to_numpy(out, what))
            else:
                results.append(advanced[what] if flag else values[what])
        return results


def _wide(fgraph: FunctionGraph) -> bool:
    variables: list[Variable] = list(fgraph.inputs)
    for node in fgraph.nodes:
        variables.extend(node.outputs)
    return any(
        isinstance(v.type, TensorType) and v.type.dtype in ("float64", "complex128")
        for v in variables
    )


class TorchLinker:
    """Link a function graph into one generated Python function over torch tensors.

    Stage 1 for torch runs without the ``inplace`` phase (kiln's in-place Ops write into
    NumPy buffers; torch tensors of the program are its own) and without ``fusion``
    (a Composite would be evaluated step by step in Python, with no gain eagerly, and
    ``torch.compile``'s inductor fuses elementwise code itself). No torch-only rewrite is
    registered under the ``torch`` tag.

    Settings (``kiln_compile.config``, read at each call): ``torch_device`` (default
    ``"cpu"``), ``torch_compile`` (default off: eager under ``torch.inference_mode``)
    and ``torch_threads`` (default 0: one thread for graphs of small arrays).
    """

    name = "torch"
    #: Tags of torch-only rewrites (none registered so far).
    rewrite_tags: tuple[str, ...] = ("torch",)
    #: The phases that mean nothing to torch (see the class docstring).
    excluded_rewrites: tuple[str, ...] = ("inplace", "fusion")
    doc = LinkerDoc(
        compiles="one Python function generated for the whole graph, run eagerly under "
        "`torch.inference_mode` (`torch.compile` with inductor: `torch_compile=true`); "
        "device `torch_device` (cpu, cuda, mps)",
        system_compiler="no (eager); a C++ compiler for `torch.compile` on the CPU",
        cache="`torch/`: inductor's cache, when `torch_compile` is on",
        note="For GPUs (CUDA, Apple's MPS) and models that live in PyTorch already; on a "
        "CPU each op is a torch call from Python, slower per call than Numba or JAX.",
    )

    def __init__(self) -> None:
        _import_torch()  # a missing torch is the clear error, when the linker is loaded

    def link(self, fgraph: FunctionGraph, profile: Profile | None = None) -> TorchThunk:
        """Return the callable computing ``fgraph`` (the program generated once).

        Raises
        ------
        NoTorchImplementation
            If an Op of the graph has no torch implementation.
        """
        from kiln_torch._program import TorchProgram

        program = TorchProgram(fgraph.inputs, fgraph.outputs)
        thunk = TorchThunk(fgraph, program)
        thunk.stage2["float64"] = _wide(fgraph)
        if profile is not None:
            profile.stage2 = thunk.stage2
        return thunk
