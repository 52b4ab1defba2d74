"""Conformance helpers: compare a backend with the Python VM, one graph or the whole table.

- :func:`compare_with_vm`: compile one graph on a backend and on the VM, compare.
- :func:`run_conformance`: run the shared conformance table (every Op of kiln_graph,
  float64 and float32, values and gradients) on a backend; :func:`conformance_cases`
  selects cases, :func:`conformance_groups` splits them into the groups that compile
  as one function each (one pytest test per group, say).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

import kiln_graph
import kiln_random
from kiln_compile._conformance import CaseGraph as CaseGraph
from kiln_compile._conformance import CaseResult as CaseResult
from kiln_compile._conformance import ConformanceCase as ConformanceCase
from kiln_compile._conformance import ConformanceReport as ConformanceReport
from kiln_compile._conformance import groups, run_cases
from kiln_compile._conformance_cases import FAMILIES as FAMILIES
from kiln_compile._conformance_cases import conformance_cases as conformance_cases
from kiln_compile._function import function
from kiln_compile._mode import Mode
from kiln_graph import Op, ScalarOp, Variable


def run_conformance(
    backend: str,
    cases: Iterable[ConformanceCase] | None = None,
    gradients: bool = True,
    values: bool = True,
) -> ConformanceReport:
    """Run the conformance ``cases`` (default: all) on ``backend`` against the VM.

    Each group of cases compiles into a few functions on the backend; every case's
    outputs are compared with the unrewritten graph on the Python VM (dtype, shape,
    values), then its gradients (see :func:`kiln_compile._conformance.run_cases`);
    ``values`` / ``gradients`` turn either part off. Returns per-case results;
    ``report.check()`` raises listing the failures.

    Examples
    --------
    >>> run_conformance("numba", conformance_cases(["reduce"])).check()  # doctest: +SKIP
    """
    selected = conformance_cases() if cases is None else cases
    return run_cases(backend, selected, gradients=gradients, values=values)


def conformance_groups(
    cases: Iterable[ConformanceCase] | None = None,
) -> dict[str, list[ConformanceCase]]:
    """Return ``cases`` (default: all) by group: ``{"elemwise[float64]": [...], ...}``.

    Examples
    --------
    >>> @pytest.mark.parametrize("group", conformance_groups())  # doctest: +SKIP
    ... def test_conformance(group):
    ...     run_conformance("numba", conformance_groups()[group]).check()
    """
    return groups(conformance_cases() if cases is None else cases)


#: The packages whose Ops every backend implements.
OP_PACKAGES = (kiln_graph, kiln_random)


def _subclasses(base: type) -> list[type]:
    """Return every subclass of ``base`` defined in :data:`OP_PACKAGES` (all imported)."""
    for package in OP_PACKAGES:
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(info.name)
    seen: set[type] = set()
    stack: list[type] = [base]
    while stack:
        subclasses: list[type] = stack.pop().__subclasses__()
        for sub in subclasses:
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    names = {p.__name__ for p in OP_PACKAGES}
    found = [c for c in seen if c.__module__.split(".")[0] in names]
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def graph_op_classes() -> list[type[Op]]:
    """Return every concrete Op class of kiln_graph and kiln_random (those a graph can hold).

    All of their modules are imported first; an Op is concrete when it is not
    abstract and has a ``make_node`` (its own or a parent's) other than ``Op``'s.

    Examples
    --------
    >>> [c.__name__ for c in graph_op_classes()][:3]  # doctest: +SKIP
    ['AdvancedIncSubtensor', 'AdvancedIncSubtensor1', 'AdvancedSubtensor']
    """
    return [
        c
        for c in _subclasses(Op)
        if not inspect.isabstract(c) and getattr(c, "make_node", None) is not Op.make_node
    ]


def graph_scalar_op_classes() -> list[type[ScalarOp]]:
    """Return every ScalarOp class of kiln_graph: ``_math``'s, Composite, ScalarConstant, Cast."""
    return _subclasses(ScalarOp)


def compare_with_vm(
    inputs: Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    values: Sequence[Any],
    backend: str | Mode,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[Any]:
    """Compile on ``backend`` and on the Python VM, call both with ``values``, compare.

    Checks that every output has the same dtype and shape on both, and that values
    agree within ``rtol``/``atol`` (defaults depend on the dtype). Returns the
    backend's outputs.

    Any backend package can use it in its tests:

    >>> compare_with_vm([x], kt.exp(x), [np.ones(3)], backend="numba")  # doctest: +SKIP
    """
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    mode = backend if isinstance(backend, Mode) else Mode(linker=backend)
    reference = function(list(inputs), outs, mode=Mode(linker="vm"))(*values)
    result = function(list(inputs), outs, mode=mode)(*values)
    for i, (ref, res) in enumerate(zip(reference, result, strict=True)):
        ref_a, res_a = np.asarray(ref), np.asarray(res)
        assert res_a.dtype == ref_a.dtype, (
            f"output {i}: dtype {res_a.dtype} on {backend!r}, {ref_a.dtype} on the VM"
        )
        assert res_a.shape == ref_a.shape, (
            f"output {i}: shape {res_a.shape} on {backend!r}, {ref_a.shape} on the VM"
        )
        if ref_a.dtype.kind in "fc":
            tol = 1e-5 if ref_a.dtype.itemsize <= 4 else 1e-10
            np.testing.assert_allclose(
                res_a,
                ref_a,
                rtol=rtol if rtol is not None else tol,
                atol=atol if atol is not None else tol,
                err_msg=f"output {i} differs between {backend!r} and the VM",
            )
        else:
            np.testing.assert_array_equal(res_a, ref_a, err_msg=f"output {i} differs")
    return list(result)
