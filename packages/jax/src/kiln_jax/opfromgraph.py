"""OpFromGraph on JAX: its inner graph traced inline, with the same node functions.

The inner graph becomes part of the one traced program (XLA sees through it); the
inner inputs that must be known when tracing (a reshape inside, say) make the
corresponding outer inputs static too.
"""

from __future__ import annotations

from typing import Any

from kiln_graph import Apply, OpFromGraph
from kiln_jax._funcify import JaxImpl, jax_funcify, static_inputs
from kiln_jax._graph import JaxGraph


@jax_funcify.register(OpFromGraph)
def jax_funcify_OpFromGraph(op: OpFromGraph, node: Apply) -> JaxImpl:  # noqa: N802
    """Trace the inner graph on the outer values."""
    inner = JaxGraph(op.inner_inputs, op.inner_outputs)
    multiple = len(op.inner_outputs) > 1

    def opfromgraph(*args: Any) -> Any:
        results = inner(args)
        return tuple(results) if multiple else results[0]

    return static_inputs(opfromgraph, *inner.static_roots())
