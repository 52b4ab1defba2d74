"""Trace a kiln graph with JAX: each node's ``jax_funcify`` function, in program order.

:class:`JaxGraph` holds the nodes between some inputs and outputs and one JAX function
per node (built once, so a missing implementation is an error when linking). Calling
it with one value per input returns the outputs' values; under ``jax.jit`` the values
are tracers and the call traces the whole graph into one XLA program.

Values known when tracing. A node whose inputs are all NumPy values (constants, the
static shapes of traced arrays, values computed from them, inputs the linker passes
as static) is computed by the Op's NumPy ``perform`` at trace time, exactly as the VM
computes it: shape arithmetic never reaches XLA, and a reshape or a slice gets the
Python ints JAX needs. :meth:`JaxGraph.static_roots` says which inputs must be known
when tracing: those that the static inputs of some node (:func:`static_inputs`)
depend on, through any op but a shape read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, KilnValueError, Variable, schedule
from kiln_jax._funcify import JaxImpl, jax_funcify
from kiln_random import RandomVariable

BACKEND = "jax"


def is_known(value: Any) -> bool:
    """Whether ``value`` is known when tracing (a NumPy value, not a JAX array or tracer)."""
    return isinstance(value, np.ndarray | np.generic)


def annotate(exc: BaseException, node: Apply) -> None:
    """Add a note naming ``node`` and the JAX backend to ``exc`` (as the VM does)."""
    exc.add_note(f"while computing {node} on backend {BACKEND!r}")


class JaxGraph:
    """The JAX functions of the nodes computing ``outputs`` from ``inputs``.

    Raises
    ------
    NoJaxImplementation
        If an Op of the graph has no JAX implementation (the message names it).
    """

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.nodes: list[Apply] = schedule(list(self.outputs), stop_at=list(self.inputs))
        self.impls: list[JaxImpl] = []
        for node in self.nodes:
            try:
                self.impls.append(jax_funcify(node.op, node))
            except Exception as exc:
                annotate(exc, node)
                raise

    def static_roots(self) -> list[int]:
        """Return the positions of the inputs that must be known when tracing.

        Raises
        ------
        KilnValueError
            If a value that must be known when tracing depends on a random draw.
        """
        need: set[Variable] = set()
        for node, impl in zip(reversed(self.nodes), reversed(self.impls), strict=True):
            for i in getattr(impl, "static_inputs", ()):
                need.add(node.inputs[i])
            if getattr(impl, "shape_only", False) or not need.intersection(node.outputs):
                continue
            if isinstance(node.op, RandomVariable):
                raise KilnValueError(
                    f"the JAX backend needs a value that depends on the draw {node.outputs[1]!r} "
                    "when it traces the function (it decides a shape); JAX's shapes are "
                    "static, so the graph cannot be compiled with JAX"
                )
            need.update(node.inputs)
        return [i for i, v in enumerate(self.inputs) if v in need]

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        """Return the outputs' values from one value per input (JAX or NumPy arrays)."""
        env: dict[Variable, Any] = dict(zip(self.inputs, values, strict=True))

        def value(v: Variable) -> Any:
            if v in env:
                return env[v]
            if isinstance(v, Constant):
                return v.data
            raise KilnValueError(f"{v!r} is neither an input nor computed by the graph")

        for node, impl in zip(self.nodes, self.impls, strict=True):
            args = [value(v) for v in node.inputs]
            try:
                if all(is_known(a) for a in args) and not isinstance(node.op, RandomVariable):
                    results = _perform(node, args)
                else:
                    out = impl(*args)
                    results = list(out) if len(node.outputs) > 1 else [out]
            except Exception as exc:
                annotate(exc, node)
                raise
            env.update(zip(node.outputs, results, strict=True))
        return [value(v) for v in self.outputs]


def _perform(node: Apply, args: list[Any]) -> list[Any]:
    """Compute ``node`` from NumPy values with the Op's reference ``perform``."""
    results: list[Any] = [None] * len(node.outputs)
    with np.errstate(all="ignore"):
        node.op.perform(node, args, results)
    return [
        np.asarray(r, dtype=o.type.dtype)  # type: ignore[attr-defined]
        for r, o in zip(results, node.outputs, strict=True)
    ]
