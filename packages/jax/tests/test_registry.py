"""Every Op of kiln_graph and kiln_random, and every scalar op, has a JAX implementation."""

from __future__ import annotations

import pytest

import kiln_random as kr
from kiln_compile.testing import graph_op_classes, graph_scalar_op_classes
from kiln_graph import Op
from kiln_jax import NoJaxImplementation, has_jax_implementation, jax_funcify


def test_every_op_has_a_jax_implementation():
    """Each concrete Op class of kiln_graph and kiln_random is registered with jax_funcify."""
    classes = graph_op_classes()
    assert len(classes) > 50  # the walk sees both packages
    missing = [f"{c.__module__}.{c.__qualname__}" for c in classes if not has_jax_implementation(c)]
    assert not missing, f"Ops without a JAX implementation: {missing}"


def test_every_scalar_op_has_a_jax_function():
    """Each ScalarOp of kiln_graph (``_math``'s, Composite, ScalarConstant, Cast)."""
    classes = graph_scalar_op_classes()
    assert len(classes) > 55
    missing = [c.__qualname__ for c in classes if not has_jax_implementation(c)]
    assert not missing, f"scalar ops without a JAX function: {missing}"


def test_every_distribution_draws_on_jax():
    """Every random variable of kiln_random.OPS has its JAX draw registered."""
    missing = [name for name, op in kr.OPS.items() if not has_jax_implementation(type(op))]
    assert not missing, f"distributions without a JAX draw: {missing}"


def test_a_missing_implementation_names_the_op_and_the_backend():
    class Mystery(Op):
        def make_node(self, x):  # pragma: no cover - never built
            raise NotImplementedError

    assert not has_jax_implementation(Mystery)
    with pytest.raises(NoJaxImplementation, match="JAX backend has no implementation of Mystery"):
        jax_funcify(Mystery(), None)
