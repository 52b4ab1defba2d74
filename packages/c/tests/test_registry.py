"""Every Op and scalar op has C code or is listed as running through ``perform``."""

from __future__ import annotations

from kiln_c import THROUGH_PERFORM, has_c_implementation
from kiln_compile.testing import graph_op_classes, graph_scalar_op_classes
from kiln_graph import Composite


def _classes() -> list[type]:
    return [*graph_op_classes(), *(c for c in graph_scalar_op_classes() if c is not Composite)]


def test_the_walk_sees_every_family() -> None:
    """The walk finds Ops of each family and the scalar ops (a check of the walk itself)."""
    names = {c.__name__ for c in _classes()}
    assert {"Elemwise", "CAReduce", "Subtensor", "MatMul", "NormalRV", "Exp", "Digamma"} <= names


def test_each_class_has_c_code_or_is_listed() -> None:
    """No Op silently lacks C code: those without it are listed in ``THROUGH_PERFORM``."""
    missing = sorted(
        c.__name__
        for c in _classes()
        if not has_c_implementation(c) and c.__name__ not in THROUGH_PERFORM
    )
    assert not missing, f"Ops with neither C code nor a THROUGH_PERFORM entry: {missing}"


def test_the_list_names_only_classes_without_c_code() -> None:
    """An entry of ``THROUGH_PERFORM`` is an existing class that has no C code."""
    by_name = {c.__name__: c for c in _classes()}
    stale = sorted(
        n for n in THROUGH_PERFORM if n not in by_name or has_c_implementation(by_name[n])
    )
    assert not stale, f"THROUGH_PERFORM entries to remove: {stale}"
