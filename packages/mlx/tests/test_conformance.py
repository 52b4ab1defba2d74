"""The shared conformance table on the MLX backend: every Op of kiln_graph vs the VM.

Values of every family in float64 and float32 at the table's own tolerances (never
loosened for MLX), and the gradients of every case that has one. Left out: the
``random`` family only (it checks that a backend draws the VM's NumPy stream; MLX draws
its own, see ``test_random.py``). Every scalar op of kiln_graph has an MLX function;
an op without one raises the error that names it (``test_an_op_without_...``).

The table runs MLX eagerly (``MlxLinker.compile`` off): ``mx.compile`` builds every
fused kernel with the C++ compiler, hundreds of them for the table (over ten minutes
cold); ``test_linker.py`` checks compiled functions against the VM.
"""

from __future__ import annotations

from typing import Any

import pytest

from kiln_compile import Mode, function
from kiln_compile.testing import (
    FAMILIES,
    conformance_cases,
    conformance_groups,
    run_conformance,
)
from kiln_graph import Elemwise, ScalarOp
from kiln_graph import scalar as ks
from kiln_graph import tensor as kt
from kiln_mlx import MlxLinker, NoMlxImplementation, has_mlx_implementation

BACKEND = "mlx"
MLX_FAMILIES = [f for f in FAMILIES if f != "random"]
CASES = conformance_cases(MLX_FAMILIES)
GROUPS = conformance_groups(CASES)


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MlxLinker, "compile", False)


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("group", list(GROUPS))
def test_values_and_gradients(group: str) -> None:
    """Every case of the group: the VM's dtypes, shapes and values; then gradients."""
    report = run_conformance(BACKEND, GROUPS[group])
    report.check()


def test_the_table_covers_gradients_and_every_scalar_op() -> None:
    assert sum(c.grad for c in CASES) > 100
    rows = {c.name.split("/", 1)[-1].split("[", 1)[0] for c in CASES}
    for name in ("gammainc", "gammainccda", "betaincdb", "i0e", "i1"):
        assert name in rows
    scalar_ops = [
        v
        for v in vars(ks).values()
        if isinstance(v, type) and issubclass(v, ScalarOp) and v is not ScalarOp
    ]
    assert len(scalar_ops) > 50
    assert [c.__name__ for c in scalar_ops if not has_mlx_implementation(c)] == []


class _Unknown(ScalarOp):
    """A scalar op kiln_mlx has never heard of."""

    nin = 1

    def impl(self, *inputs: Any, out: Any = None) -> Any:
        return inputs[0]


def test_an_op_without_an_mlx_implementation_raises_a_clear_error() -> None:
    x = kt.vector("x")
    with pytest.raises(NoMlxImplementation, match="MLX backend.*_Unknown"):
        function([x], Elemwise(_Unknown())(x), mode=Mode(linker=BACKEND))
