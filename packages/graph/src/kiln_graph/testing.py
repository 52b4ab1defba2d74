"""Test helpers: evaluate a graph, check gradients by finite differences, check shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kiln_graph import _math, _reduce
from kiln_graph._basic import as_tensor, constant, tensor
from kiln_graph._errors import GradientError
from kiln_graph._grad import grad
from kiln_graph._interp import Program
from kiln_graph._node import Variable, as_variable_list
from kiln_graph._shape_infer import infer_shape
from kiln_graph._traversal import graph_inputs
from kiln_graph._types import TensorType


def evaluate(outputs: Variable | Sequence[Variable], givens: Mapping[Variable, Any]) -> Any:
    """Compute ``outputs`` with the reference interpreter, given a value per root input.

    Shared variables not in ``givens`` use their current value.
    """
    single = isinstance(outputs, Variable)
    outs = as_variable_list(outputs)
    inputs = list(givens)
    values = [
        v.type.filter(givens[v], name=repr(v)) if isinstance(v.type, TensorType) else givens[v]
        for v in inputs
    ]
    for v in graph_inputs(outs):
        if v not in givens and hasattr(v, "get_value"):
            inputs.append(v)
            values.append(v.get_value(borrow=True))  # type: ignore[attr-defined]
    result = Program(inputs, outs)(values)
    return result[0] if single else result


def verify_grad(
    fn: Callable[..., Variable],
    pt: Sequence[Any],
    eps: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    rng: np.random.Generator | int | None = 0,
) -> None:
    """Check the symbolic gradient of ``fn`` at point ``pt`` against finite differences.

    ``fn`` takes one symbolic input per array in ``pt`` and returns a tensor. The check
    projects the output onto a random direction (so non-scalar outputs work) and
    compares the gradient of that scalar with central differences.

    Raises
    ------
    AssertionError
        If the gradients differ beyond the tolerances.
    """
    rng = np.random.default_rng(rng)
    arrays = [
        np.asarray(
            p,
            dtype=np.result_type(np.asarray(p).dtype, np.float64)
            if np.asarray(p).dtype.kind in "biu"
            else np.asarray(p).dtype,
        )
        for p in pt
    ]
    dtype = np.result_type(*arrays)
    if eps is None:
        eps = 1e-7 if dtype == np.float64 else 3e-3
    if rtol is None:
        rtol = 1e-4 if dtype == np.float64 else 5e-2
    if atol is None:
        atol = 1e-6 if dtype == np.float64 else 5e-2
    inputs = [tensor(f"pt{i}", dtype=a.dtype, shape=a.shape) for i, a in enumerate(arrays)]
    out = as_tensor(fn(*inputs))
    if out.dtype not in ("float16", "float32", "float64"):
        raise GradientError(f"verify_grad: fn must return a float tensor, got {out.dtype}")
    out_value = evaluate(out, dict(zip(inputs, arrays, strict=True)))
    projection = rng.normal(size=np.shape(out_value)).astype(out.dtype)
    cost = _reduce.sum(_math.mul(out, constant(projection)))
    grads = grad(cost, inputs, disconnected_inputs="ignore")
    symbolic = evaluate(grads, dict(zip(inputs, arrays, strict=True)))
    cost_fn = Program(inputs, [cost])

    def f(values: list[np.ndarray]) -> float:
        return float(cost_fn(values)[0])

    for i, a in enumerate(arrays):
        numeric = np.zeros(a.shape, dtype=np.float64)
        for idx in np.ndindex(*a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            numeric[idx] = (f(plus) - f(minus)) / (2 * eps)
        np.testing.assert_allclose(
            symbolic[i],
            numeric,
            rtol=rtol,
            atol=atol,
            err_msg=f"verify_grad: gradient w.r.t. input {i} differs from finite differences",
        )


def check_infer_shape(
    outputs: Variable | Sequence[Variable], givens: Mapping[Variable, Any]
) -> None:
    """Assert that each output's inferred symbolic shape equals its computed shape."""
    outs = as_variable_list(outputs)
    values = evaluate(outs, givens)
    shapes = infer_shape(outs)
    for out, value, shp in zip(outs, values, shapes, strict=True):
        assert shp is not None
        computed = tuple(int(s) for s in evaluate(list(shp), givens)) if shp else ()
        assert computed == np.shape(value), (
            f"infer_shape of {out!r} gives {computed}, computed value has {np.shape(value)}"
        )
        static = out.type.shape  # type: ignore[attr-defined]
        for s, n in zip(static, np.shape(value), strict=True):
            assert s is None or s == n, (
                f"static shape {static} of {out!r} vs value {np.shape(value)}"
            )
