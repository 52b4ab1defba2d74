"""The shared conformance table on the C backend: every Op of kiln_graph vs the VM.

Values of every family in float64 and float32 (dtypes, shapes, values) and the
gradients of every case that has one (rewritten, fused gradient graphs on C against
the unrewritten ones on the VM). Ops without C code run their ``perform`` through the
C backend's callback, so every case passes through the generated file; the warning
that names them is expected here. Each group builds one C file.
"""

from __future__ import annotations

import warnings

import pytest

from kiln_c import FallbackWarning
from kiln_compile.testing import FAMILIES, conformance_cases, conformance_groups, run_conformance

BACKEND = "c"
CASES = conformance_cases(list(FAMILIES))
GROUPS = conformance_groups(CASES)


@pytest.mark.parametrize("group", list(GROUPS))
def test_values_and_gradients(group: str) -> None:
    """Every case of the group: the VM's dtypes, shapes and values; then gradients."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        report = run_conformance(BACKEND, GROUPS[group])
    report.check()


def test_the_table_covers_gradients() -> None:
    """The run above checks gradients (a check of the selection itself)."""
    assert sum(c.grad for c in CASES) > 100
