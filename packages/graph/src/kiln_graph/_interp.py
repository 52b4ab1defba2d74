"""A linear program over a graph: the reference way to run Ops' ``perform``.

The Python VM linker and Ops with inner graphs evaluate graphs through
:class:`Program`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kiln_graph._errors import KilnValueError
from kiln_graph._node import Apply, Constant, Variable
from kiln_graph._traversal import schedule


class MissingInputError(KilnValueError):
    """A graph depends on a root variable that was not listed as an input."""


Step = tuple[Callable[..., None], Apply, tuple[int, ...], tuple[int, ...]]


class Program:
    """The nodes computing ``outputs`` from ``inputs``, in order, over numbered slots.

    Calling it with one value per input runs each node's ``perform`` and returns the
    outputs' values. An error raised by an Op gets a note naming the node and
    ``backend``.
    """

    def __init__(
        self, inputs: Sequence[Variable], outputs: Sequence[Variable], backend: str = "vm"
    ) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.backend = backend
        self.nodes = schedule(self.outputs, stop_at=self.inputs)
        slot: dict[Variable, int] = {}
        template: list[Any] = []

        def slot_of(v: Variable) -> int:
            if v not in slot:
                slot[v] = len(template)
                template.append(None)
            return slot[v]

        for v in self.inputs:
            if v in slot:
                raise KilnValueError(f"inputs: {v!r} is listed twice")
            slot_of(v)
        steps: list[Step] = []
        for node in self.nodes:
            for v in node.inputs:
                if v not in slot and v.owner is None:
                    if isinstance(v, Constant):
                        template[slot_of(v)] = v.data
                    else:
                        raise MissingInputError(
                            f"the outputs depend on {v!r} ({v.type}), which is not an input; "
                            "add it to the inputs (or give it a value with givens)"
                        )
            ins = tuple(slot_of(v) for v in node.inputs)
            outs = tuple(slot_of(v) for v in node.outputs)
            steps.append((node.op.perform, node, ins, outs))
        for v in self.outputs:
            if v not in slot:
                if isinstance(v, Constant):
                    template[slot_of(v)] = v.data
                else:
                    raise MissingInputError(f"output {v!r} is a root variable that is not an input")
        self._n_inputs = len(self.inputs)
        self._template = template
        self._steps = steps
        self._out_slots = tuple(slot[v] for v in self.outputs)

    def _storage(self, values: Sequence[Any]) -> list[Any]:
        if len(values) != self._n_inputs:
            raise KilnValueError(
                f"expected {self._n_inputs} input value(s) (for {list(self.inputs)}), "
                f"got {len(values)}"
            )
        storage = list(self._template)
        storage[: self._n_inputs] = values
        return storage

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        storage = self._storage(values)
        for perform, node, ins, outs in self._steps:
            results: list[Any] = [None] * len(outs)
            try:
                perform(node, [storage[i] for i in ins], results)
            except Exception as exc:
                exc.add_note(f"while computing {node} on backend {self.backend!r}")
                raise
            for s, r in zip(outs, results, strict=True):
                storage[s] = r
        return [storage[i] for i in self._out_slots]

    def run_timed(self, values: Sequence[Any], record: Callable[[Apply, float], None]) -> list[Any]:
        """Like calling the program, also passing each node and its seconds to ``record``."""
        storage = self._storage(values)
        for perform, node, ins, outs in self._steps:
            results: list[Any] = [None] * len(outs)
            start = time.perf_counter()
            try:
                perform(node, [storage[i] for i in ins], results)
            except Exception as exc:
                exc.add_note(f"while computing {node} on backend {self.backend!r}")
                raise
            record(node, time.perf_counter() - start)
            for s, r in zip(outs, results, strict=True):
                storage[s] = r
        return [storage[i] for i in self._out_slots]
