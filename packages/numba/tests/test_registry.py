"""Every Op of kiln_graph has a Numba implementation; every scalar op a Numba template."""

from __future__ import annotations

from kiln_compile.testing import graph_op_classes, graph_scalar_op_classes
from kiln_graph import Composite, Elemwise, ScalarConstant
from kiln_graph import _math as m
from kiln_graph._elemwise import Cast
from kiln_graph._reduce import CAReduce
from kiln_numba import has_numba_implementation


def test_the_walk_finds_kiln_graphs_ops():
    """The walk over Op subclasses sees every family (a check of the walk itself)."""
    names = {c.__name__ for c in graph_op_classes()}
    assert {"Elemwise", "DimShuffle", "CAReduce", "Reshape", "Subtensor", "Blockwise"} <= names
    assert {"OpFromGraph", "Cholesky", "AdvancedIncSubtensor", "FusedReduce", "Eye"} <= names
    assert Elemwise in graph_op_classes() and CAReduce in graph_op_classes()


def test_every_op_has_a_numba_implementation():
    """Each concrete Op class defined in kiln_graph is registered with numba_funcify."""
    missing = [
        f"{c.__module__}.{c.__qualname__}"
        for c in graph_op_classes()
        if not has_numba_implementation(c)
    ]
    assert not missing, f"Ops without a Numba implementation (object mode): {missing}"


def test_every_scalar_op_has_a_template():
    """Each ScalarOp of kiln_graph is registered with numba_funcify.

    (A Composite's program is written op by op, by ``composite_statements``.)
    """
    classes = graph_scalar_op_classes()
    in_math = {c for c in vars(m).values() if isinstance(c, type) and c in classes}
    assert {Composite, ScalarConstant, Cast} <= set(classes)
    assert len(in_math) >= 55  # the walk sees the whole table of _math
    missing = [
        c.__qualname__ for c in classes if c is not Composite and not has_numba_implementation(c)
    ]
    assert not missing, f"scalar ops without a Numba template: {missing}"


def test_the_walk_finds_the_random_variables():
    """kiln_random's distributions are Ops every backend implements."""
    names = {c.__name__ for c in graph_op_classes()}
    assert {"NormalRV", "DirichletRV", "MultivariateNormalRV", "CategoricalRV"} <= names
