"""The shared conformance table on the Numba backend: every Op of kiln_graph vs the VM.

Numba compiles each loop of a generated function (tens of milliseconds each), so the
default run is bounded: float64 values of the core table (every Op, every scalar op,
each family), float32 values of every elementwise case (dtype handling), and the
gradients of a few cases per family (fused, rewritten gradient graphs against the
unrewritten ones on the VM). ``KILN_CONFORMANCE=full`` runs the whole table: both
dtypes, every row, values and gradients (a few minutes).
"""

from __future__ import annotations

import os

import pytest

from kiln_compile.testing import (
    ConformanceCase,
    conformance_cases,
    conformance_groups,
    run_conformance,
)

BACKEND = "numba"
FULL = os.environ.get("KILN_CONFORMANCE", "") == "full"

#: Gradients checked by default: cases whose gradient graphs use each family's Ops.
GRADIENT_CASES = {
    "elemwise/betaln[float64]",
    "elemwise/polygamma[float64]",
    "elemwise/logaddexp[float64]",
    "reduce/prod_all[float64]",
    "join/split[float64]",
    "subtensor/set_inc_advanced1[float64]",
    "linalg/cholesky_tri[float64]",
    "linalg/solve_triangular[float64]",
    "blockwise/vectorize[float64]",
    "opfromgraph/nested[float64]",
    "nnet/log_softmax[float64]",
    "fusion/inplace[float64]",
}


def _value_cases() -> list[ConformanceCase]:
    if FULL:
        return conformance_cases()
    return conformance_cases(dtypes=["float64"], core=True) + conformance_cases(
        ["elemwise"], dtypes=["float32"]
    )


VALUE_GROUPS = conformance_groups(_value_cases())


@pytest.mark.parametrize("group", list(VALUE_GROUPS))
def test_values(group: str) -> None:
    """Every case of the group: the same dtypes, shapes and values as the VM."""
    run_conformance(BACKEND, VALUE_GROUPS[group], gradients=FULL).check()


@pytest.mark.skipif(FULL, reason="the full run checks every gradient in test_values")
def test_gradients() -> None:
    """Gradients of a projection of the outputs, rewritten and fused, match the VM's."""
    cases = [c for c in conformance_cases(dtypes=["float64"]) if c.name in GRADIENT_CASES]
    assert {c.name for c in cases} == GRADIENT_CASES
    report = run_conformance(BACKEND, cases, values=False)
    report.check()
    assert all(r.grad_checked for r in report.results)
