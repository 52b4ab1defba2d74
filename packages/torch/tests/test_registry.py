"""Every Op of kiln_graph and kiln_random, and every scalar op, has a torch implementation."""

from __future__ import annotations

import pytest

import kiln_random as kr
from kiln_compile.testing import graph_op_classes, graph_scalar_op_classes
from kiln_graph import Op
from kiln_random import RandomVariable
from kiln_torch import NoTorchImplementation, has_torch_implementation, torch_funcify
from kiln_torch.scalar import HOST_OPS


def test_every_op_has_a_torch_implementation():
    classes = graph_op_classes()
    assert len(classes) > 50  # the walk sees both packages
    missing = [c.__qualname__ for c in classes if not has_torch_implementation(c)]
    assert not missing, f"Ops without a torch implementation: {missing}"


def test_every_scalar_op_has_a_torch_function_few_on_the_host():
    classes = graph_scalar_op_classes()
    assert len(classes) > 55
    missing = [c.__qualname__ for c in classes if not has_torch_implementation(c)]
    assert not missing, f"scalar ops without a torch function: {missing}"
    assert len(HOST_OPS) <= 5  # only what torch lacks: betainc and the parameter derivatives


def test_every_distribution_has_its_own_torch_sampler():
    """No distribution of kiln_random.OPS falls back to its NumPy draw on the host."""
    fallback = torch_funcify.dispatch(RandomVariable)
    missing = [name for name, op in kr.OPS.items() if torch_funcify.dispatch(type(op)) is fallback]
    assert not missing, f"distributions without a torch sampler: {missing}"


def test_a_missing_implementation_names_the_op_and_the_backend():
    class Mystery(Op):
        def make_node(self, x):  # pragma: no cover - never built
            raise NotImplementedError

    assert not has_torch_implementation(Mystery)
    with pytest.raises(
        NoTorchImplementation, match="torch backend has no implementation of Mystery"
    ):
        torch_funcify(Mystery(), None)
