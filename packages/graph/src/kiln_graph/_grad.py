"""Reverse-mode automatic differentiation: grad, jacobian, hessian."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

from kiln_graph import _alloc, _getitem, _join, _math, _reduce
from kiln_graph._basic import as_tensor
from kiln_graph._errors import (
    DisconnectedInputError,
    GradientError,
    KilnTypeError,
    KilnValueError,
)
from kiln_graph._node import TensorVariable, Variable, as_variable_list
from kiln_graph._traversal import toposort
from kiln_graph._types import FLOAT_DTYPES, TensorType


def grad(
    cost: Variable,
    wrt: Variable | Sequence[Variable],
    known_grads: dict[Variable, Variable] | None = None,
    disconnected_inputs: Literal["raise", "warn", "ignore"] = "raise",
) -> Any:
    """Return the gradient of the scalar ``cost`` with respect to ``wrt``.

    ``wrt`` is one variable (one gradient is returned) or a list (a list is returned).
    A variable the cost does not depend on raises :class:`DisconnectedInputError`
    unless ``disconnected_inputs`` is ``"warn"`` or ``"ignore"``, which give zeros.

    Examples
    --------
    >>> x = kt.vector("x")  # doctest: +SKIP
    >>> g = grad(kt.sum(x**2), x)  # 2 * x  # doctest: +SKIP
    """
    single = isinstance(wrt, Variable)
    wrt_list = as_variable_list(wrt)
    if not wrt_list:
        raise KilnTypeError("wrt: expected a variable or a non-empty list of variables")
    if disconnected_inputs not in ("raise", "warn", "ignore"):
        raise KilnValueError(
            "disconnected_inputs: expected 'raise', 'warn' or 'ignore', "
            f"got {disconnected_inputs!r}"
        )
    cost_t: TensorVariable | None = None
    if cost is not None:
        cost_t = as_tensor(cost)
        if cost_t.ndim != 0:
            raise GradientError(
                f"cost: grad needs a scalar cost, got a {cost_t.ndim}-d tensor "
                f"(shape {cost_t.type.shape}); reduce it (e.g. kt.sum) or use kt.jacobian"
            )
        if cost_t.dtype not in FLOAT_DTYPES:
            raise GradientError(f"cost: expected a float cost, got dtype {cost_t.dtype}")
    for i, w in enumerate(wrt_list):
        if not isinstance(w, Variable) or not isinstance(w.type, TensorType):
            raise KilnTypeError(f"wrt[{i}]: expected a tensor variable, got {w!r}")
        if w.type.dtype not in FLOAT_DTYPES:
            raise GradientError(
                f"wrt[{i}]: cannot differentiate with respect to {w!r} of dtype {w.type.dtype}"
            )
    grads: dict[Variable, Variable] = {}
    if cost_t is not None:
        grads[cost_t] = _alloc.ones_like(cost_t)
    for v, g in (known_grads or {}).items():
        grads[v] = as_tensor(g)
    if not grads:
        raise GradientError("grad: give a cost or known_grads")
    roots = list(grads)
    wrt_set = set(wrt_list)
    order = toposort(roots, stop_at=wrt_set)
    # Only nodes on a path from wrt to the cost need a gradient.
    connected: set[Variable] = set(wrt_list)
    for node in order:
        if any(i in connected for i in node.inputs):
            connected.update(node.outputs)
    for node in reversed(order):
        if not any(o in grads for o in node.outputs):
            continue
        if not any(i in connected for i in node.inputs):
            continue
        out_grads = [grads[o] if o in grads else _zeros_for(o) for o in node.outputs]
        try:
            in_grads = node.op.L_op(node.inputs, node.outputs, out_grads)  # type: ignore[arg-type]
        except NotImplementedError as exc:
            raise GradientError(f"{node.op} has no gradient: {exc}") from exc
        if len(in_grads) != len(node.inputs):
            raise GradientError(
                f"{node.op}.L_op returned {len(in_grads)} gradients for {len(node.inputs)} inputs"
            )
        for x, g_in in zip(node.inputs, in_grads, strict=True):
            if g_in is None or x not in connected:
                continue
            g = _as_input_grad(as_tensor(g_in), x)
            prev = grads.get(x)
            grads[x] = g if prev is None else _math.add(prev, g)
    result = []
    for i, w in enumerate(wrt_list):
        g_w = grads.get(w)
        if g_w is None:
            if disconnected_inputs == "raise":
                raise DisconnectedInputError(
                    f"wrt[{i}]: the cost does not depend on {w!r}; pass "
                    "disconnected_inputs='ignore' to get zeros"
                )
            if disconnected_inputs == "warn":
                warnings.warn(
                    f"grad: the cost does not depend on {w!r}; its gradient is zero",
                    stacklevel=2,
                )
            g_w = _alloc.zeros_like(w)
        result.append(g_w)
    return result[0] if single else result


def _as_input_grad(g: TensorVariable, x: Variable) -> TensorVariable:
    """Sum an op's gradient for ``x`` to x's type: an op may return it at the broadcast shape.

    Elemwise, Alloc and the index updates return the gradient of the output; summing it
    over the dimensions ``x`` was broadcast along (and casting to x's dtype) happens here,
    once, for every op.
    """
    xt = x.type
    if not isinstance(xt, TensorType) or g.ndim < xt.ndim:
        return g
    if g.ndim == xt.ndim and g.type.broadcastable == xt.broadcastable and g.dtype == xt.dtype:
        return g
    return _reduce.unbroadcast_to(g, x)  # type: ignore[return-value]


def _zeros_for(v: Variable) -> Variable | None:
    """Return the gradient of an output the cost does not use: zeros, or None (non-tensor)."""
    if isinstance(v.type, TensorType):
        return _alloc.zeros_like(v)
    return None  # a random generator state: nothing to differentiate


def jacobian(expression: Variable, wrt: Variable | Sequence[Variable]) -> Any:
    """Return d expression / d wrt for a vector (or scalar) ``expression``.

    The result has shape ``expression.shape + wrt.shape``. The length of
    ``expression`` must be known statically.
    """
    expr = as_tensor(expression)
    single = isinstance(wrt, Variable)
    wrt_list = as_variable_list(wrt)
    if expr.ndim == 0:
        res = grad(expr, wrt_list)
        return res[0] if single else res
    if expr.ndim != 1:
        raise GradientError(f"jacobian: expected a vector expression, got {expr.ndim}-d")
    n = expr.type.shape[0]
    if n is None:
        raise GradientError(
            "jacobian: the expression's length must be known statically "
            "(give the input a static shape)"
        )
    rows = [
        grad(_getitem.getitem(expr, i), wrt_list, disconnected_inputs="ignore") for i in range(n)
    ]
    out = [_join.stack([r[k] for r in rows]) for k in range(len(wrt_list))]
    return out[0] if single else out


def hessian(cost: Variable, wrt: Variable | Sequence[Variable]) -> Any:
    """Return the matrix of second derivatives of the scalar ``cost`` w.r.t. vector ``wrt``."""
    single = isinstance(wrt, Variable)
    wrt_list = as_variable_list(wrt)
    out = []
    for w in wrt_list:
        g = grad(cost, w)
        out.append(jacobian(g, w))
    return out[0] if single else out
