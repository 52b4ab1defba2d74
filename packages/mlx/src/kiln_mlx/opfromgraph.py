"""OpFromGraph on MLX: its inner graph traced inline, with the same node functions.

The inner graph becomes part of the one traced program; the inner inputs that must be
known when tracing make the corresponding outer inputs static too.
"""

from __future__ import annotations

from typing import Any

from kiln_graph import Apply, OpFromGraph
from kiln_mlx._funcify import MlxImpl, mlx_funcify, static_inputs
from kiln_mlx._graph import MlxGraph


@mlx_funcify.register(OpFromGraph)
def mlx_funcify_OpFromGraph(op: OpFromGraph, node: Apply) -> MlxImpl:  # noqa: N802
    """Trace the inner graph on the outer values."""
    inner = MlxGraph(op.inner_inputs, op.inner_outputs)
    multiple = len(op.inner_outputs) > 1

    def opfromgraph(*args: Any) -> Any:
        results = inner(args)
        return tuple(results) if multiple else results[0]

    return static_inputs(opfromgraph, *inner.static_roots())
