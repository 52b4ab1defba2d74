"""The shared conformance table on the MLX backend: every Op of kiln_graph vs the VM.

Values of every family in float64 and float32 at the table's own tolerances (never
loosened for MLX), and the gradients of every case that has one. Left out: the
``random`` family only (it checks that a backend draws the VM's NumPy stream; MLX draws
its own, see ``test_random.py``). Every scalar op of kiln_graph has an MLX function;
an op without one raises the error that names it (``test_an_op_without_...``).

The table runs twice: eagerly (``MlxLinker.compile`` off) and through ``mx.compile``
(the default), whose fused kernels the C++ compiler builds, kept in the kiln cache
root (about ten minutes of C++ builds on a cold cache, on this 2-core machine: each
group is a test of its own). The compiled run leaves out the cases of the ops that
always run eagerly
(:data:`kiln_mlx._special.UNCOMPILABLE`: a function with one of them is never given
to ``mx.compile``), so that every function it builds is compiled: an eager fallback
would be an ``EagerWarning``, an error under the tests' warning filter.
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
from kiln_mlx._special import UNCOMPILABLE

BACKEND = "mlx"
MLX_FAMILIES = [f for f in FAMILIES if f != "random"]
CASES = conformance_cases(MLX_FAMILIES)
GROUPS = conformance_groups(CASES)


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MlxLinker, "compile", False)


def _row(name: str) -> str:
    """Return a case's row name: ``<row>`` of ``<family>/<row>[<dtype>]``."""
    return name.split("/", 1)[-1].split("[", 1)[0]


#: The rows of the ops that never go to ``mx.compile``.
_EAGER_ROWS = {op.__name__.lower() for op in UNCOMPILABLE}
COMPILED_GROUPS = conformance_groups([c for c in CASES if _row(c.name) not in _EAGER_ROWS])


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("group", list(GROUPS))
def test_values_and_gradients(group: str) -> None:
    """Every case of the group: the VM's dtypes, shapes and values; then gradients."""
    report = run_conformance(BACKEND, GROUPS[group])
    report.check()


@pytest.mark.parametrize("group", list(COMPILED_GROUPS))
def test_values_and_gradients_through_mx_compile(group: str) -> None:
    """The same checks with every function compiled by ``mx.compile``."""
    assert MlxLinker.compile
    report = run_conformance(BACKEND, COMPILED_GROUPS[group])
    report.check()


def test_the_compiled_table_leaves_out_only_the_eager_ops() -> None:
    compiled = {_row(c.name) for cases in COMPILED_GROUPS.values() for c in cases}
    assert {_row(c.name) for c in CASES} - compiled == _EAGER_ROWS


def test_the_table_covers_gradients_and_every_scalar_op() -> None:
    assert sum(c.grad for c in CASES) > 100
    rows = {_row(c.name) for c in CASES}
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
