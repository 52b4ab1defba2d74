"""Generate one module-level Python function computing a kiln graph with torch.

:class:`TorchProgram` writes the source of a function ``program(i0, i1, ...)``, one
line per node (``v3 = f2(v1, c0)  # Elemwise{exp}(x)``), compiles it as a module of
its own (registered in ``linecache``, so tracebacks and ``inspect`` show the lines)
and binds the names it calls: the nodes' ``torch_funcify`` functions and the graph's
constants. Module-level code rather than nested closures: one flat function is what
``torch.compile`` (TorchDynamo) traces best, with no closure cells to guard on.

Host values. A value that only shapes and constants decide (the result of ``Shape``
or ``ShapeI``, a constant, and any value computed only from such values, random draws
excepted) is computed on the host in NumPy by the Op's reference ``perform``, as the VM
computes it: shape arithmetic never becomes a chain of tiny torch calls, and a reshape
or a slice gets the Python ints it needs. Where a host value reaches a node that
computes on tensors, the line converts it once (``to_device``).

Errors. An exception raised while the program runs gets a note naming the node (and
the backend), found from the traceback's line in the generated source, as the VM's
notes name the node that failed.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, KilnValueError, Variable, schedule
from kiln_random import RandomVariable
from kiln_torch._funcify import TorchImpl, torch_funcify

BACKEND = "torch"
_COUNTER = itertools.count()


def annotate(exc: BaseException, node: Apply) -> None:
    """Add a note naming ``node`` and the torch backend to ``exc`` (as the VM does)."""
    if not any(BACKEND in note for note in getattr(exc, "__notes__", ())):
        exc.add_note(f"while computing {node} on backend {BACKEND!r}")


def perform_on_host(node: Apply) -> TorchImpl:
    """Return ``f(*numpy values)`` computing ``node`` with the Op's reference ``perform``."""
    dtypes = [o.type.dtype for o in node.outputs]  # type: ignore[attr-defined]
    single = len(node.outputs) == 1

    def host(*args: Any) -> Any:
        results: list[Any] = [None] * len(dtypes)
        with np.errstate(all="ignore"):
            node.op.perform(node, list(args), results)
        out = [np.asarray(r, dtype=d) for r, d in zip(results, dtypes, strict=True)]
        return out[0] if single else tuple(out)

    return host


class TorchProgram:
    """The generated function computing ``outputs`` from ``inputs``, and what it calls.

    Attributes
    ----------
    source
        The generated Python source (one line per node).
    filename
        The name the source is registered under in ``linecache``.
    host_outputs
        For each output, whether it is a host (NumPy) value rather than a tensor.
    constants
        The constants the program uses on the device, by global name (NumPy values:
        :meth:`bind` turns them into tensors on a device).

    Raises
    ------
    NoTorchImplementation
        If an Op of the graph has no torch implementation (the message names it).
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.nodes: list[Apply] = schedule(list(self.outputs), stop_at=list(self.inputs))
        self.filename = f"<kiln_torch program {next(_COUNTER)}>"
        self.constants: dict[str, np.ndarray] = {}
        self._functions: dict[str, Any] = {}
        self._line_nodes: dict[int, Apply] = {}
        self.source = self._generate()
        self.host_outputs = [self._is_host(v) for v in self.outputs]

    def _is_host(self, v: Variable) -> bool:
        return v in self._host or isinstance(v, Constant)

    def _generate(self) -> str:
        names: dict[Variable, str] = {v: f"i{k}" for k, v in enumerate(self.inputs)}
        device_names: dict[Variable, str] = {}
        host_constants: dict[int, str] = {}
        self._host: set[Variable] = set()
        lines = [f"def program({', '.join(names[v] for v in self.inputs)}):"]
        counter = itertools.count()

        # Values of nodes computed only from constants: computed once, here.
        folded: dict[Variable, np.ndarray] = {}

        def constant_value(v: Variable) -> Any:
            return v.data if isinstance(v, Constant) else folded[v]  # type: ignore[attr-defined]

        def is_constant(v: Variable) -> bool:
            return isinstance(v, Constant) or v in folded

        def host_name(v: Variable) -> str:
            if is_constant(v):
                key = id(v)
                if key not in host_constants:
                    host_constants[key] = f"n{len(host_constants)}"
                    self._functions[host_constants[key]] = constant_value(v)
                return host_constants[key]
            return names[v]

        def device_name(v: Variable, node: Apply) -> str:
            if v in device_names:
                return device_names[v]
            if is_constant(v):
                name = f"c{len(self.constants)}"
                self.constants[name] = np.asarray(constant_value(v))
            elif v in self._host:
                name = f"t{next(counter)}"
                lines.append(f"    {name} = to_device({names[v]}, {_dtype_literal(v)})")
                self._line_nodes[len(lines)] = node
            else:
                return names[v]
            device_names[v] = name
            return name

        for k, node in enumerate(self.nodes):
            args_host = all(is_constant(v) or v in self._host for v in node.inputs)
            on_host = args_host and not isinstance(node.op, RandomVariable)
            if on_host and all(is_constant(v) for v in node.inputs):
                values = perform_on_host(node)(*(constant_value(v) for v in node.inputs))
                values = values if len(node.outputs) > 1 else (values,)
                folded.update(zip(node.outputs, values, strict=True))
                self._host.update(node.outputs)
                continue
            if on_host:
                fn = perform_on_host(node)
                args = [host_name(v) for v in node.inputs]
            else:
                try:
                    fn = torch_funcify(node.op, node)
                except Exception as exc:
                    annotate(exc, node)
                    raise
                host_positions = set(getattr(fn, "host_inputs", ()))
                args = [
                    host_name(v)
                    if i in host_positions and (is_constant(v) or v in self._host)
                    else device_name(v, node)
                    for i, v in enumerate(node.inputs)
                ]
            fname = f"f{k}"
            self._functions[fname] = fn
            outs = []
            for o in node.outputs:
                names[o] = f"v{next(counter)}"
                outs.append(names[o])
            if on_host or getattr(fn, "shape_only", False):
                self._host.update(node.outputs)
            target = outs[0] if len(outs) == 1 else ", ".join(outs)
            comment = str(node).replace("\n", " ")[:120]
            lines.append(f"    {target} = {fname}({', '.join(args)})  # {comment}")
            self._line_nodes[len(lines)] = node
        results = []
        for v in self.outputs:
            if v in names:
                results.append(names[v])
            elif is_constant(v):
                results.append(host_name(v))
            else:
                raise KilnValueError(f"output {v!r} is neither an input nor computed by the graph")
        lines.append(f"    return [{', '.join(results)}]")
        return "\n".join(lines) + "\n"

    def bind(self, namespace: dict[str, Any]) -> Any:
        """Return the generated ``program`` function, its globals ``namespace`` updated.

        ``namespace`` holds the device-specific names: ``to_device`` and the device
        constants ``c0, c1, ...`` (see :attr:`constants`).
        """
        scope = {**self._functions, **namespace}
        code = compile(self.source, self.filename, "exec")
        linecache.cache[self.filename] = (
            len(self.source),
            None,
            self.source.splitlines(keepends=True),
            self.filename,
        )
        exec(code, scope)  # noqa: S102
        return scope["program"]

    def failed_node(self, tb: TracebackType | None) -> Apply | None:
        """Return the node whose line of the program raised, from the traceback ``tb``."""
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename:
                node = self._line_nodes.get(tb.tb_lineno, node)
            tb = tb.tb_next
        return node


def _dtype_literal(v: Variable) -> str:
    return repr(getattr(v.type, "dtype", None))
