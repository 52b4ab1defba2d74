"""The shared conformance table on the Python VM itself.

Values are compared with the same unrewritten graph (trivially equal: this checks that
every case builds and runs); gradients compile with all rewrites against the unrewritten
gradient graph, so the rewrites' effect on every Op's gradient is checked too.
"""

from __future__ import annotations

from kiln_compile import FAST_RUN, function
from kiln_compile.testing import (
    FAMILIES,
    conformance_cases,
    graph_op_classes,
    graph_scalar_op_classes,
    run_conformance,
)
from kiln_graph import Blockwise, OpFromGraph, ancestors


def test_conformance_table_on_the_vm() -> None:
    """Every case of the whole table (both dtypes, values and gradients) passes on the VM."""
    cases = conformance_cases()
    assert {c.name.split("/")[0] for c in cases} == set(FAMILIES)
    report = run_conformance("vm", cases)
    report.check()
    assert sum(r.grad_checked for r in report.results) > len(cases) // 2


def _ops_in(outputs, ops: set, scalar_ops: set) -> None:
    """Collect the Op classes and scalar op classes of a graph, inner graphs included."""
    for v in ancestors(list(outputs)):
        if v.owner is None:
            continue
        _collect_op(v.owner.op, ops, scalar_ops)


def _collect_op(op, ops: set, scalar_ops: set) -> None:
    ops.add(type(op))
    scalar = getattr(op, "scalar_op", None)
    if scalar is not None:
        _collect_scalar(scalar, scalar_ops)
    if isinstance(op, Blockwise):
        _collect_op(op.core_op, ops, scalar_ops)
    if isinstance(op, OpFromGraph):
        _ops_in(op.inner_outputs, ops, scalar_ops)


def _collect_scalar(op, scalar_ops: set) -> None:
    scalar_ops.add(type(op))
    for step, _ in getattr(op, "steps", ()):
        _collect_scalar(step, scalar_ops)


def test_conformance_table_covers_every_op():
    """The table's graphs (the fusion rows after rewriting) use every Op and scalar op."""
    ops: set = set()
    scalar_ops: set = set()
    for case in conformance_cases(dtypes=["float64"]):
        graph = case.build(case.rng())
        _ops_in(graph.outputs, ops, scalar_ops)
        if case.rewrite:
            f = function(graph.inputs, graph.outputs, mode=FAST_RUN.with_linker("vm"))
            _ops_in(f.outputs, ops, scalar_ops)
    missing = sorted(c.__name__ for c in set(graph_op_classes()) - ops)
    assert not missing, f"Ops no conformance case uses: {missing}"
    missing = sorted(c.__name__ for c in set(graph_scalar_op_classes()) - scalar_ops)
    assert not missing, f"scalar ops no conformance case uses: {missing}"
