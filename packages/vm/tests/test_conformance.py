"""The shared conformance table on the Python VM itself.

Values are compared with the same unrewritten graph (trivially equal: this checks that
every case builds and runs); gradients compile with all rewrites against the unrewritten
gradient graph, so the rewrites' effect on every Op's gradient is checked too.
"""

from __future__ import annotations

from kiln_compile.testing import FAMILIES, conformance_cases, run_conformance


def test_conformance_table_on_the_vm() -> None:
    """Every case of the whole table (both dtypes, values and gradients) passes on the VM."""
    cases = conformance_cases()
    assert {c.name.split("/")[0] for c in cases} == set(FAMILIES)
    report = run_conformance("vm", cases)
    report.check()
    assert sum(r.grad_checked for r in report.results) > len(cases) // 2
