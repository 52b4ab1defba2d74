"""Conformance helper: compile an expression on a backend and compare it with the VM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_compile._function import function
from kiln_compile._mode import Mode
from kiln_graph import Variable


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
