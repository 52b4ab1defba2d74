"""The shared conformance table on the torch backend: every Op of kiln_graph vs the VM.

Values of every family in float64 and float32 (dtypes, shapes and values), and the
gradients of every case that has one (rewritten gradient graphs on torch against the
unrewritten ones on the VM). The ``random`` family is left out: it checks that a
backend draws the VM's NumPy stream, and torch draws its own (the distributions are
checked against SciPy in ``test_random.py``). The ops torch has no function for
compute on the host with one ``HostComputationWarning`` each (``test_linker.py``).
"""

from __future__ import annotations

import pytest

from kiln_compile.testing import (
    FAMILIES,
    conformance_cases,
    conformance_groups,
    run_conformance,
)

BACKEND = "torch"
TORCH_FAMILIES = [f for f in FAMILIES if f != "random"]
CASES = conformance_cases(TORCH_FAMILIES)
GROUPS = conformance_groups(CASES)


@pytest.mark.filterwarnings("ignore::kiln_torch.HostComputationWarning")
@pytest.mark.parametrize("group", list(GROUPS))
def test_values_and_gradients(group: str) -> None:
    """Every case of the group: the VM's dtypes, shapes and values; then gradients."""
    report = run_conformance(BACKEND, GROUPS[group])
    report.check()


def test_the_table_covers_gradients() -> None:
    """The run above checks gradients (a check of the selection itself)."""
    assert sum(c.grad for c in CASES) > 100
