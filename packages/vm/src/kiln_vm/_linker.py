"""The Python VM: runs the nodes of a function graph in order through ``Op.perform``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kiln_compile import FunctionGraph, LinkerDoc, Profile
from kiln_graph import Apply, Program


class VMLinker:
    """Link a function graph into a :class:`kiln_graph.Program` over NumPy values."""

    name = "vm"
    rewrite_tags: tuple[str, ...] = ()
    doc = LinkerDoc(
        compiles="nothing: a Python loop calls each node's NumPy `perform` in order",
        system_compiler="no",
        cache="nothing (Stage 1's rewritten graph only)",
        note="The reference every other backend is tested against; links instantly, "
        "calls slowly (Python overhead per node). `FAST_COMPILE` uses it.",
    )

    def link(
        self, fgraph: FunctionGraph, profile: Profile | None = None
    ) -> Callable[[Sequence[Any]], list[Any]]:
        """Return a callable computing ``fgraph.outputs`` from ``fgraph.inputs`` values."""
        program = Program(fgraph.inputs, fgraph.outputs, backend=self.name)
        if profile is None:
            return program

        def record(node: Apply, seconds: float) -> None:
            name = str(node.op)
            profile.op_times[name] += seconds
            profile.op_calls[name] += 1

        def timed(values: Sequence[Any]) -> list[Any]:
            return program.run_timed(values, record)

        return timed
