"""Specialize phase: replace general ops by cheaper special cases.

Powers by small constants become square / sqrt / reciprocal / products, ``x * -1``
becomes ``-x``, the sum of an elementwise product of two vectors becomes a dot product,
factors that are constant along the summed axes move out of a sum, and ``softplus(x)``
next to ``sigmoid(x)`` (a log-likelihood and its gradient) share one ``exp``. Each rule keeps
the original's dtype and broadcasting; the ones that change rounding (``x ** 3`` as
``square(x) * x``) stay within a few units in the last place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, DimShuffle, Elemwise, Variable, graph_replace, toposort
from kiln_graph import tensor as kt
from kiln_graph.ops import CAReduce
from kiln_graph.scalar import (
    FLOAT_DTYPES,
    Add,
    Mul,
    Neg,
    Pow,
    Sigmoid,
    Softplus,
    Square,
    Sub,
    Switch,
    TrueDivide,
)
from kiln_rewrite._db import register_global, register_local
from kiln_rewrite._patterns import E, PVar, register_pattern, scalar_constant

# --- x ** c for small constants c --------------------------------------------------------------


def _power_rule(
    exponent: float, build: Callable[[Variable], Variable], identity: str, name: str
) -> None:
    """Register ``x ** exponent -> build(x)``.

    ``x`` is first cast to the dtype of ``x ** exponent``. Negative and fractional
    exponents apply to float results only (NumPy refuses integers to negative powers).
    The rule does not fire where the exponent broadcasts ``x`` to a larger shape.
    """

    def where(x: Any, p: Variable) -> bool:
        if scalar_constant(p) != exponent:
            return False
        out = kt.pow(x, p)
        if out.type.broadcastable != x.type.broadcastable:
            return False
        return float(exponent).is_integer() and exponent > 0 or out.dtype in FLOAT_DTYPES

    def rebuild(x: Variable, p: Variable) -> Variable:
        return build(kt.cast(x, kt.pow(x, p).dtype))

    register_pattern(
        "specialize",
        E(Pow)(PVar("x"), PVar("p")),
        rebuild,
        "fast_run",
        identity=identity,
        name=name,
        where=where,
    )


def _cube(x: Variable) -> Variable:
    return kt.mul(kt.square(x), x)


_power_rule(2, kt.square, "x ** 2 -> square(x)", "local_pow_square")
_power_rule(3, _cube, "x ** 3 -> square(x) * x", "local_pow_cube")
_power_rule(4, lambda x: kt.square(kt.square(x)), "x ** 4 -> square(square(x))", "local_pow_4")
_power_rule(0.5, kt.sqrt, "x ** 0.5 -> sqrt(x)", "local_pow_sqrt")
_power_rule(
    -0.5, lambda x: kt.reciprocal(kt.sqrt(x)), "x ** -0.5 -> 1 / sqrt(x)", "local_pow_rsqrt"
)
_power_rule(-1, kt.reciprocal, "x ** -1 -> reciprocal(x)", "local_pow_reciprocal")
_power_rule(
    -2, lambda x: kt.reciprocal(kt.square(x)), "x ** -2 -> 1 / square(x)", "local_pow_neg_2"
)
_power_rule(
    -3, lambda x: kt.reciprocal(_cube(x)), "x ** -3 -> 1 / (square(x) * x)", "local_pow_neg_3"
)
_power_rule(
    -4,
    lambda x: kt.reciprocal(kt.square(kt.square(x))),
    "x ** -4 -> 1 / square(square(x))",
    "local_pow_neg_4",
)


# --- x * -1 ------------------------------------------------------------------------------------


@register_local("specialize", "fast_run", identity="x * -1 -> -x", tracks=[Mul])
def local_mul_minus_one(node: Apply) -> Variable | None:
    """Rewrite a product with a factor ``-1`` into the negation of the other factors."""
    rest = [i for i in node.inputs if scalar_constant(i) != -1]
    n_minus = len(node.inputs) - len(rest)
    if n_minus == 0 or not rest:
        return None
    out: Any = node.outputs[0]
    dtype = out.type.dtype
    if dtype == "bool" or dtype.startswith("uint"):
        return None
    rest = [kt.cast(r, dtype) for r in rest]
    prod: Any = rest[0] if len(rest) == 1 else kt.mul(*rest)
    if prod.type.broadcastable != out.type.broadcastable:
        return None  # the -1 broadcasts the other factors
    if n_minus % 2 == 0:
        return prod
    inner = prod.owner
    if inner is not None and isinstance(inner.op, Elemwise) and isinstance(inner.op.scalar_op, Neg):
        return inner.inputs[0]  # -(-y) -> y
    return kt.neg(prod)


@register_local(
    "specialize",
    "fast_run",
    identity="x / s -> x * (1 / s) for a float s broadcast over x: one division, then products",
    tracks=[TrueDivide],
)
def local_div_by_broadcast_to_mul(node: Apply) -> Variable | None:
    """Divide once: ``x / s``, ``s`` a scalar broadcast over ``x``, becomes ``x * (1 / s)``.

    A division costs a compiled loop many times a product (which also vectorizes);
    the result differs from the quotient by at most a unit in the last place or so.
    A constant ``s`` is left alone (folding ``1 / 10`` would round it first).
    """
    x, s = node.inputs
    out: Any = node.outputs[0]
    if out.type.dtype not in FLOAT_DTYPES or isinstance(s, Constant):
        return None
    if not all(s.type.broadcastable) or all(x.type.broadcastable):  # type: ignore[attr-defined]
        return None
    if s.type.dtype != out.type.dtype or x.type.dtype != out.type.dtype:  # type: ignore[attr-defined]
        return None
    ds = s.owner
    if ds is not None and isinstance(ds.op, DimShuffle) and ds.inputs[0].type.ndim == 0:  # type: ignore[attr-defined]
        inv = kt.dimshuffle(kt.reciprocal(ds.inputs[0]), ds.op.new_order)  # 1 / s on the scalar
    else:
        inv = kt.reciprocal(s)
    res = kt.mul(x, inv)
    if res.type != out.type:
        return None
    return res


# --- sum of products ---------------------------------------------------------------------------


def _float_sum_of(
    node: Apply, scalar_op: type, same_dtype: bool = True
) -> tuple[Any, tuple[int, ...]] | None:
    """Return ``(inner node, axes)`` of a float ``sum(op(...), axes)`` of ``scalar_op``.

    ``same_dtype``: the summed values have the sum's dtype (no cast inside the sum).
    """
    op = node.op
    if not (isinstance(op, CAReduce) and op.kind == "sum"):
        return None
    (arg,) = node.inputs
    inner = arg.owner
    if (
        inner is None
        or not isinstance(inner.op, Elemwise)
        or not isinstance(inner.op.scalar_op, scalar_op)
    ):
        return None
    dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    if dtype not in FLOAT_DTYPES or (same_dtype and arg.type.dtype != dtype):  # type: ignore[attr-defined]
        return None
    return inner, op.axis


def _sum_of_mul(node: Apply) -> list[Any] | None:
    """Return the factors of ``sum(mul(...))`` with a float result, else ``None``."""
    found = _float_sum_of(node, Mul, same_dtype=False)
    return None if found is None else list(found[0].inputs)


#: The dtypes a dot product of vectors goes to BLAS in.
_BLAS_DTYPES = ("float32", "float64")


@register_local(
    "specialize",
    "fast_run",
    identity="sum(x * y) -> dot(x, y) for float vectors x, y of the same length and dtype",
    tracks=[CAReduce],
)
def local_sum_mul_to_dot(node: Apply) -> Variable | None:
    """Rewrite the sum of the product of two vectors (no broadcasting) into a dot product."""
    factors = _sum_of_mul(node)
    if factors is None or len(factors) != 2:
        return None
    x, y = factors
    if x.type.ndim != 1 or any(f.type.broadcastable[0] for f in factors):
        return None
    out: Any = node.outputs[0]
    # Only a product BLAS computes as it is: of two vectors of the result's float dtype.
    # Integer, boolean or mixed factors would be cast to a copy at every call; as a
    # sum of products they fuse into one loop that reads them as they are.
    if {x.type.dtype, y.type.dtype} != {out.type.dtype} or out.type.dtype not in _BLAS_DTYPES:
        return None
    return kt.dot(x, y)


def _along(x: Any, axes: tuple[int, ...]) -> bool:
    """Whether ``x`` is broadcast along every one of ``axes`` (constant along them)."""
    return all(x.type.broadcastable[d] for d in axes)


def _count(lengths: list[int | None], dtype: str) -> Variable | None:
    """Return the number of summed elements as a ``dtype`` constant (None: not static)."""
    known = [n for n in lengths if n is not None]
    if len(known) < len(lengths):
        return None
    return kt.constant(np.asarray(np.prod(known, dtype=np.int64), dtype=dtype))


def _drop_axes(c: Any, axes: tuple[int, ...]) -> Variable:
    """Return ``c`` without its (broadcastable) dimensions ``axes``, merging DimShuffles."""
    ndim = c.type.ndim
    kept = [d for d in range(ndim) if d not in axes]
    if c.owner is not None and isinstance(c.owner.op, DimShuffle):
        order = c.owner.op.new_order
        return kt.dimshuffle(c.owner.inputs[0], [order[d] for d in kept])
    return kt.dimshuffle(c, kept)


@register_local(
    "specialize",
    "fast_run",
    identity="sum(x * c, axes) -> c * sum(x, axes) where c is broadcast along axes",
    tracks=[CAReduce],
)
def local_sum_mul_broadcast_factor(node: Apply) -> Variable | None:
    """Move the factors that are constant along the summed axes out of the sum."""
    factors = _sum_of_mul(node)
    if factors is None or not isinstance(node.op, CAReduce):
        return None
    axes = node.op.axis
    outside = [f for f in factors if _along(f, axes)]
    inside = [f for f in factors if f not in outside]
    if not outside or not inside:
        return None
    out: Any = node.outputs[0]
    dtype = out.type.dtype
    prod = inside[0] if len(inside) == 1 else kt.mul(*inside)
    summed = kt.sum(kt.cast(prod, dtype), axis=axes)
    result = kt.mul(*[_drop_axes(f, axes) for f in outside], summed)
    if result.type.broadcastable != out.type.broadcastable or result.dtype != dtype:
        return None
    return result


@register_local(
    "specialize",
    "fast_run",
    identity="sum(x + c, axes) -> sum(x, axes) + n * c (also x - c, c - x) where c is "
    "broadcast along axes and n is the number of summed elements",
    tracks=[CAReduce],
)
def local_sum_broadcast_term(node: Apply) -> Variable | None:
    """Take the terms that are constant along the summed axes out of a sum, times n.

    A log-likelihood sums ``-0.5 * r**2 - log(sigma) - c`` over observations; what is
    left inside is the sum of squares (a one-pass reduction other terms can share).
    """
    op = node.op
    if not (isinstance(op, CAReduce) and op.kind == "sum"):
        return None
    (arg,) = node.inputs
    inner = arg.owner
    if inner is None or not isinstance(inner.op, Elemwise):
        return None
    scalar = inner.op.scalar_op
    if not isinstance(scalar, Add | Sub):
        return None
    out: Any = node.outputs[0]
    dtype = out.type.dtype
    axes = op.axis
    lengths = [arg.type.shape[d] for d in axes]  # type: ignore[attr-defined]
    if dtype not in FLOAT_DTYPES or any(n is None for n in lengths) or arg.type.dtype != dtype:  # type: ignore[attr-defined]
        return None
    outside = [_along(t, axes) for t in inner.inputs]
    if all(outside) or not any(outside):
        return None
    count = _count(lengths, dtype)

    def summed(terms: list[Variable]) -> Variable:
        return kt.sum(terms[0] if len(terms) == 1 else kt.add(*terms), axis=axes)

    def times_n(terms: list[Variable]) -> Variable:
        dropped = [_drop_axes(t, axes) for t in terms]
        return kt.mul(count, dropped[0] if len(dropped) == 1 else kt.add(*dropped))

    terms = list(inner.inputs)
    if isinstance(scalar, Add):
        inside = [t for t, o in zip(terms, outside, strict=True) if not o]
        rest = [t for t, o in zip(terms, outside, strict=True) if o]
        result = kt.add(summed(inside), times_n(rest))
    elif outside[1]:
        result = kt.sub(summed([terms[0]]), times_n([terms[1]]))
    else:
        result = kt.sub(times_n([terms[0]]), summed([terms[1]]))
    if result.type != out.type:
        return None
    return result


@register_local(
    "specialize",
    "fast_run",
    identity="sum(switch(c, x, y), axes) -> switch(c, sum(x, axes), sum(y, axes)) where c "
    "is broadcast along axes (a branch broadcast along them sums to n * it, n > 0)",
    tracks=[CAReduce],
)
def local_sum_switch_of_broadcast_condition(node: Apply) -> Variable | None:
    """Take a condition that is constant along the summed axes out of a sum.

    A log-likelihood checks its parameters once (``switch(sigma > 0, logp, -inf)``,
    broadcast over the observations): outside the sum, the sum of the terms is left to
    the rules that take constants out of sums, down to one sum of squares.
    """
    found = _float_sum_of(node, Switch)
    if found is None:
        return None
    inner, axes = found
    cond, *branches = inner.inputs
    out: Any = node.outputs[0]
    dtype = out.type.dtype
    if not _along(cond, axes) or any(b.type.dtype != dtype for b in branches):
        return None
    lengths = [inner.outputs[0].type.shape[d] for d in axes]
    count = _count(lengths, dtype) if 0 not in lengths else None  # 0 * inf is not 0
    summed = []
    for b in branches:
        if _along(b, axes):
            if count is None:  # n * b needs n, and n > 0 (0 * inf is not the empty sum)
                return None
            summed.append(kt.mul(count, _drop_axes(b, axes)))
        elif any(b.type.broadcastable[d] for d in axes):
            return None  # broadcast along some summed axes only
        else:
            summed.append(kt.sum(b, axis=axes))
    result = kt.switch(_drop_axes(cond, axes), *summed)
    if result.type != out.type:
        return None
    return result


@register_local(
    "specialize", "fast_run", identity="sum(-x, axes) -> -sum(x, axes)", tracks=[CAReduce]
)
def local_sum_neg(node: Apply) -> Variable | None:
    """Negate the sum rather than each term (the same value to the bit)."""
    found = _float_sum_of(node, Neg)
    if found is None:
        return None
    inner, axes = found
    result = kt.neg(kt.sum(inner.inputs[0], axis=axes))
    return result if result.type == node.outputs[0].type else None


@register_local(
    "specialize",
    "fast_run",
    identity="sum(square(x * c), axes) -> square(c) * sum(square(x), axes) where c is "
    "broadcast along axes",
    tracks=[CAReduce],
)
def local_sum_square_of_broadcast_factor(node: Apply) -> Variable | None:
    """Take a factor that is constant along the summed axes out of a sum of squares.

    ``sum(((y - mu) / sigma) ** 2)`` leaves ``sum((y - mu) ** 2)``, the same sum that
    the gradient takes: one reduction. Within a few units in the last place, except
    where ``x ** 2`` overflows and ``(x * c) ** 2`` does not (``|x|`` above 1e154 in
    float64, 1e19 in float32).
    """
    found = _float_sum_of(node, Square)
    if found is None:
        return None
    inner, axes = found
    (base,) = inner.inputs
    product = base.owner
    if product is None or not isinstance(product.op, Elemwise):
        return None
    if not isinstance(product.op.scalar_op, Mul):
        return None
    factors = list(product.inputs)
    outside = [f for f in factors if _along(f, axes)]
    inside = [f for f in factors if not _along(f, axes)]
    if not outside or not inside:
        return None
    out: Any = node.outputs[0]
    dtype = out.type.dtype
    if any(f.type.dtype != dtype for f in factors):
        return None
    kept = inside[0] if len(inside) == 1 else kt.mul(*inside)
    dropped = [_drop_axes(f, axes) for f in outside]
    scale = dropped[0] if len(dropped) == 1 else kt.mul(*dropped)
    result = kt.mul(kt.square(scale), kt.sum(kt.square(kept), axis=axes))
    if result.type != out.type:
        return None
    return result


# --- softplus and sigmoid of one variable ----------------------------------------------------


def _softplus_and_sigmoid(x: Variable) -> tuple[Variable, Variable]:
    """Return ``softplus(x)`` and ``sigmoid(x)`` written over one ``e = exp(-|x|)``.

    The same formulas as the ops' own stable kernels: ``max(x, 0) + log1p(e)``, and
    ``1 / (1 + e)`` for ``x >= 0``, ``e / (1 + e)`` below.
    """
    dtype = x.type.dtype  # type: ignore[attr-defined]
    zero, one = kt.constant(np.asarray(0, dtype)), kt.constant(np.asarray(1, dtype))
    e = kt.exp(kt.neg(kt.abs(x)))
    softplus = kt.add(kt.maximum(x, zero), kt.log1p(e))
    sigmoid = kt.true_divide(kt.switch(kt.ge(x, zero), one, e), kt.add(one, e))
    return softplus, sigmoid


@register_global(
    "specialize",
    "fast_run",
    identity="softplus(x), sigmoid(x) -> max(x, 0) + log1p(e), switch(x >= 0, 1, e) / (1 + e) "
    "with one e = exp(-|x|), where the graph has both",
)
def share_softplus_sigmoid_exp(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Compute one exponential where a graph takes both softplus and sigmoid of a variable.

    A Bernoulli-logit log-likelihood has ``softplus(eta)`` and its gradient
    ``sigmoid(eta)``: each evaluates ``exp`` once per element, the most expensive part
    of a logistic regression's evaluation. Values are unchanged (the same formulas).
    """
    by_input: dict[Variable, dict[type, list[Variable]]] = {}
    for node in toposort(outputs):
        op = node.op
        if isinstance(op, Elemwise) and isinstance(op.scalar_op, Softplus | Sigmoid):
            (x,) = node.inputs
            if node.outputs[0].type == x.type and x.type.dtype in FLOAT_DTYPES:  # type: ignore[attr-defined]
                kinds = by_input.setdefault(x, {})
                kinds.setdefault(type(op.scalar_op), []).append(node.outputs[0])
    replace: dict[Variable, Variable] = {}
    for x, kinds in by_input.items():
        if len(kinds) < 2:
            continue
        softplus, sigmoid = _softplus_and_sigmoid(x)
        if softplus.type != x.type or sigmoid.type != x.type:
            continue
        replace.update({v: softplus for v in kinds[Softplus]})
        replace.update({v: sigmoid for v in kinds[Sigmoid]})
    if not replace:
        return outputs
    return graph_replace(outputs, replace)  # type: ignore[return-value]


__all__: list[Any] = []
