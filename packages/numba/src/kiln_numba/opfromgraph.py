"""OpFromGraph: its inner graph becomes a function of the generated module, called once.

The inner graph is written by the same code generator as the outer graph (nested
OpFromGraphs and Blockwise core ops become functions of their own), once per inner
graph however many nodes apply it. As on the VM, an output never shares memory with an
input or a constant: one that may (an input, a constant, or a view of them) is copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_graph import Apply, Constant, OpFromGraph, Variable, toposort
from kiln_numba._funcify import CodeContext, numba_funcify


def may_view_inputs(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[bool]:
    """For each of ``outputs``, whether it may be (a view of) one of ``inputs`` or a constant.

    Follows the ``view_map`` and ``destroy_map`` the Ops declare.
    """
    aliased: set[Variable] = set(inputs)
    for node in toposort(list(outputs), stop_at=list(inputs)):
        shared = {**node.op.view_map, **node.op.destroy_map}
        for o, ins in shared.items():
            if any(node.inputs[i] in aliased or isinstance(node.inputs[i], Constant) for i in ins):
                aliased.add(node.outputs[o])
    return [v in aliased or isinstance(v, Constant) for v in outputs]


@numba_funcify.register(OpFromGraph)
def numba_funcify_OpFromGraph(op: OpFromGraph, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Call the inner graph's function; copy the outputs that may view an input."""
    call = ctx.call_function(
        f"opfromgraph:{op.graph_digest}", op.inner_inputs, op.inner_outputs, ctx.inputs
    )
    result = ctx.fresh("r")
    ctx.emit(f"{result} = {call}")
    views = may_view_inputs(op.inner_inputs, op.inner_outputs)
    for k, (out, view) in enumerate(zip(ctx.outputs, views, strict=True)):
        ctx.emit(f"{out} = copy({result}[{k}])" if view else f"{out} = {result}[{k}]")
