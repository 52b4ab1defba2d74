"""Canonicalize: elementwise algebra.

Useless arithmetic (``x + 0``, ``x * 1``, ``--x``, casts to the same dtype, a switch on a
constant condition), flattening of n-ary ``add`` / ``mul`` chains, collecting like terms
and powers, cancelling common factors of a division, and ``exp`` / ``log`` inverses.

Floating-point rules. Nothing here turns ``x - x`` or ``x * 0`` into ``0`` for float
dtypes (wrong for NaN and inf: ``inf - inf`` and ``inf * 0`` are NaN); integer and
boolean dtypes are exact, so there they fold. Reassociating a float sum or product
(flattening, merging constants) may change the last bits, as in PyTensor. Two rules
assume what PyTensor assumes and are documented where they are registered:
``x * y / x -> y`` (ignores ``x`` = 0, inf, NaN) and ``log(exp(x)) -> x``.
``x + 0 -> x`` gives ``-0.0`` for ``x = -0.0`` where the original gives ``+0.0``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from kiln_graph import Apply, Constant, Elemwise, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_graph.ops import Alloc
from kiln_graph.scalar import (
    AND,
    OR,
    Add,
    Cast,
    Exp,
    Expm1,
    Log,
    Log1p,
    Mul,
    Neg,
    Pow,
    Sub,
    Switch,
    TrueDivide,
)
from kiln_rewrite._canonicalize_util import (
    fit_to,
    is_discrete,
    is_left_pad,
    scalar_op_is,
    typed_constant,
)
from kiln_rewrite._db import register_local
from kiln_rewrite._patterns import scalar_constant

#: The most inputs a flattened ``add`` / ``mul`` may get (flattening copies an inner
#: chain into each user, so unbounded flattening could grow a graph quadratically).
MAX_FLAT_ARITY = 64

_CHEAP = ("fast_run", "fast_compile")


def _out(node: Apply) -> TensorVariable:
    """Return the single output of an Elemwise node (always a tensor)."""
    out = node.outputs[0]
    assert isinstance(out, TensorVariable)
    return out


def _elemwise(node: Apply, inputs: Sequence[Variable]) -> Variable:
    """Apply ``node``'s Elemwise op to ``inputs`` (the only input itself when one)."""
    if len(inputs) == 1:
        return inputs[0]
    return node.op(*inputs)  # type: ignore[operator]


# --- useless operations -------------------------------------------------------------------


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="x + 0 -> x, x * 1 -> x (drop every neutral input of an n-ary add / mul)",
    tracks=[Add, Mul],
)
def local_useless_neutral(node: Apply) -> Variable | None:
    """Drop the inputs of an ``add`` (``mul``) that are the constant 0 (1)."""
    neutral = 0 if isinstance(node.op.scalar_op, Add) else 1  # type: ignore[attr-defined]
    keep = [i for i in node.inputs if scalar_constant(i) != neutral]
    if len(keep) == len(node.inputs):
        return None
    return fit_to(_elemwise(node, keep or [node.inputs[0]]), _out(node))


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="x - 0 -> x, x / 1 -> x, x ** 1 -> x, x ** 0 -> 1",
    tracks=[Sub, TrueDivide, Pow],
)
def local_useless_right_neutral(node: Apply) -> Variable | None:
    """Remove a subtraction of 0, a division by 1, a power of 1; ``x ** 0`` is 1."""
    x, y = node.inputs
    value = scalar_constant(y)
    if value is None:
        return None
    scalar = node.op.scalar_op  # type: ignore[attr-defined]
    if isinstance(scalar, Pow) and value == 0:
        # NumPy: x ** 0 == 1 for every x, NaN and inf included.
        return fit_to(typed_constant(1, _out(node).dtype), _out(node))
    if value != (0 if isinstance(scalar, Sub) else 1):
        return None
    return fit_to(x, _out(node))


@register_local("canonicalize", *_CHEAP, identity="-(-x) -> x", tracks=[Neg])
def local_neg_neg(node: Apply) -> Variable | None:
    """Cancel a double negation (exact, also for wrapping integers)."""
    (x,) = node.inputs
    if scalar_op_is(x, Neg):
        return fit_to(x.owner.inputs[0], _out(node))  # type: ignore[union-attr]
    return None


@register_local("canonicalize", *_CHEAP, identity="-(x * -y) -> x * y", tracks=[Neg])
def local_neg_of_negated_product(node: Apply) -> Variable | None:
    """Cancel a negation against the one negated factor of a product (exact).

    Gradients build ``-(-a * b)`` (the derivative of ``-a`` times an outer factor, negated
    again by the chain rule); one product is what is left.
    """
    (p,) = node.inputs
    if not scalar_op_is(p, Mul):
        return None
    factors = list(p.owner.inputs)  # type: ignore[union-attr]
    negated = [k for k, f in enumerate(factors) if scalar_op_is(f, Neg)]
    if len(negated) != 1:
        return None
    k = negated[0]
    factors[k] = factors[k].owner.inputs[0]  # type: ignore[union-attr]
    return fit_to(kt.mul(*factors), _out(node))


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="cast(x, dtype(x)) -> x; cast(cast(x, a), b) -> cast(x, b) if x -> a is exact",
    tracks=[Cast],
)
def local_useless_cast(node: Apply) -> Variable | None:
    """Remove a cast to the dtype ``x`` already has, and merge a lossless double cast."""
    x = kt.as_tensor(node.inputs[0])
    out = _out(node)
    if x.dtype == out.dtype:
        return x
    if x.owner is not None and scalar_op_is(x, Cast):
        inner = kt.as_tensor(x.owner.inputs[0])
        if _exact_same_kind(inner.dtype, x.dtype):
            return kt.cast(inner, out.dtype)
    return None


def _exact_same_kind(src: str, dst: str) -> bool:
    """Whether casting ``src`` to ``dst`` keeps every value and stays in its kind.

    Then ``cast(cast(x, dst), b)`` converts the very same number as ``cast(x, b)``
    (integers wrap, floats round, the same way from either). Booleans (0 and 1) cast
    exactly to anything.
    """
    if src == "bool":
        return True
    kind = np.dtype(src).kind.replace("u", "i")
    return kind == np.dtype(dst).kind.replace("u", "i") and np.can_cast(src, dst, "safe")


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="switch(True, a, b) -> a, switch(False, a, b) -> b, switch(c, a, a) -> a "
    "(broadcast to the output's shape)",
    tracks=[Switch],
)
def local_useless_switch(node: Apply) -> Variable | None:
    """Pick the branch of a switch whose condition is constant, or whose branches agree."""
    cond, a, b = node.inputs
    if a is b:
        return fit_to(a, _out(node))
    value = scalar_constant(cond)
    if value is None:
        return None
    return fit_to(a if value else b, _out(node))


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="x & True -> x, x & False -> False, x | False -> x, x | True -> True, "
    "x & x -> x, x | x -> x (boolean x; broadcast to the output's shape)",
    tracks=[AND, OR],
)
def local_useless_logical(node: Apply) -> Variable | None:
    """Drop the constant operand of a logical and/or (masks of ``bound`` on known data)."""
    a, b = node.inputs
    if kt.as_tensor(a).dtype != "bool" or kt.as_tensor(b).dtype != "bool":
        return None
    out = _out(node)
    if a is b:
        return fit_to(a, out)
    absorbing = not isinstance(node.op.scalar_op, AND)  # type: ignore[attr-defined]
    for const, other in ((a, b), (b, a)):
        value = scalar_constant(const)
        if value is None:
            continue
        return fit_to(const if bool(value) == absorbing else other, out)
    return None


# --- n-ary chains, like terms, powers --------------------------------------------------


@register_local(
    "canonicalize",
    "fast_run",
    identity="add(add(a, b), c) -> add(a, b, c), mul(mul(a, b), c) -> mul(a, b, c) "
    "(inner node of the same dtype)",
    tracks=[Add, Mul],
)
def local_flatten_add_mul(node: Apply) -> Variable | None:
    """Merge nested ``add`` (or ``mul``) nodes of the same dtype into one n-ary node.

    Kiln's broadcasting is static (a dimension broadcasts where its static length is
    1), so ``a + b + c`` broadcasts exactly like ``(a + b) + c``; a DimShuffle that only
    pads dimensions on the left (what Elemwise inserts) is looked through. An inner
    node of another dtype (``int8 + int8`` inside a float64 sum) is kept: its wrapping
    or rounding belongs to its own dtype.
    """
    op_class = type(node.op.scalar_op)  # type: ignore[attr-defined]
    out = _out(node)
    flat: list[Variable] = []
    changed = False
    for i in node.inputs:
        inner = i.owner.inputs[0] if is_left_pad(i) else i  # type: ignore[union-attr]
        if scalar_op_is(inner, op_class) and kt.as_tensor(inner).dtype == out.dtype:
            flat.extend(inner.owner.inputs)  # type: ignore[union-attr]
            changed = True
        else:
            flat.append(i)
    if not changed or len(flat) > MAX_FLAT_ARITY:
        return None
    return fit_to(node.op(*flat), out)  # type: ignore[operator]


def _fold_constants(
    node: Apply, inputs: list[Variable], ufunc: np.ufunc
) -> tuple[list[Variable], bool]:
    """Fold the constant inputs of an n-ary node into one, at the first one's place."""
    consts = [i for i in inputs if isinstance(i, Constant)]
    if len(consts) < 2:
        return inputs, False
    dtype = np.result_type(*(c.dtype for c in consts))
    with np.errstate(all="ignore"):
        value = functools.reduce(ufunc, [c.data.astype(dtype) for c in consts])
    folded = kt.constant(np.asarray(value, dtype=dtype))
    first = inputs.index(consts[0])
    rest = [i for i in inputs if not isinstance(i, Constant)]
    rest.insert(first, folded)
    return rest, True


def _group(
    inputs: list[Variable], split: Callable[[Variable], tuple[object, Variable]]
) -> dict[Variable, list[tuple[object, Variable]]]:
    """Group ``inputs`` by the base ``split`` finds: ``{base: [(value, input), ...]}``."""
    groups: dict[Variable, list[tuple[object, Variable]]] = {}
    for i in inputs:
        value, base = split(i)
        groups.setdefault(base, []).append((value, i))
    return groups


def _add_term(v: Variable) -> tuple[object, Variable]:
    """Split a term of a sum into ``(coefficient, base)``: ``3 * x``, ``-x``, ``x``."""
    if scalar_op_is(v, Neg):
        return -1, v.owner.inputs[0]  # type: ignore[union-attr]
    if scalar_op_is(v, Mul) and len(v.owner.inputs) == 2:  # type: ignore[union-attr]
        a, b = v.owner.inputs  # type: ignore[union-attr]
        for c, base in ((a, b), (b, a)):
            value = scalar_constant(c)
            if value is not None and scalar_constant(base) is None:
                return value, base
    return 1, v


@register_local(
    "canonicalize",
    "fast_run",
    identity="x + x -> 2 * x, 2*x + 3*x -> 5*x, c1 + x + c2 -> x + (c1 + c2); "
    "x + (-x) -> 0 for integer dtypes only",
    tracks=[Add],
)
def local_collect_add(node: Apply) -> Variable | None:
    """Collect like terms of a sum and merge its constants.

    Terms ``c * x`` and ``-x`` with the same ``x`` add their coefficients. For floats a
    group whose coefficients cancel is left alone (``x - x`` is NaN for x = inf or NaN);
    for integers it vanishes. Booleans (``+`` is "or") and unsigned integers are left
    alone.
    """
    out = _out(node)
    dtype = out.dtype  # type: ignore[attr-defined]
    if dtype == "bool" or dtype.startswith("uint") or dtype.startswith("complex"):
        return None
    inputs, changed = _fold_constants(node, list(node.inputs), np.add)
    groups = _group(inputs, _add_term)
    if not changed and len(groups) == len(inputs):
        return None
    terms: list[Variable] = []
    for base, members in groups.items():
        total = sum(coef for coef, _ in members)  # type: ignore[misc]
        if len(members) == 1 or (total == 0 and not is_discrete(dtype)):
            terms.extend(i for _, i in members)
            continue
        changed = True
        if total == 0:
            continue
        b = kt.cast(base, dtype)
        terms.append(
            b if total == 1 else kt.neg(b) if total == -1 else typed_constant(total, dtype) * b
        )
    if not changed:
        return None
    if not terms:
        terms = [typed_constant(0, dtype)]
    return fit_to(_elemwise(node, terms) if len(terms) > 1 else terms[0], out)


def _power(v: Variable) -> tuple[object, Variable]:
    """Split a factor into ``(exponent, base)``: ``x ** 3`` or ``x`` (exponent 1)."""
    if scalar_op_is(v, Pow):
        base, e = v.owner.inputs  # type: ignore[union-attr]
        value = scalar_constant(e)
        if value is not None:
            return value, base
    return 1, v


def _positive_int(v: object) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return bool(np.isfinite(v) and float(v) == int(v) and v >= 1)


@register_local(
    "canonicalize",
    "fast_run",
    identity="x * x -> x ** 2, x ** a * x ** b -> x ** (a + b) (positive integer a, b); "
    "c1 * x * c2 -> x * (c1 * c2)",
    tracks=[Mul],
)
def local_collect_mul(node: Apply) -> Variable | None:
    """Collect equal factors of a product into powers and merge its constants.

    Only positive integer exponents are collected: ``x**0.5 * x**0.5`` is NaN for
    ``x < 0`` and ``x**-1 * x`` is NaN at 0, so neither is ``x``.
    """
    out = _out(node)
    dtype = out.dtype  # type: ignore[attr-defined]
    if dtype == "bool":
        return None
    inputs, changed = _fold_constants(node, list(node.inputs), np.multiply)
    groups = _group(inputs, _power)
    if not changed and len(groups) == len(inputs):
        return None
    factors: list[Variable] = []
    for base, members in groups.items():
        exps = [e for e, _ in members]
        if len(exps) == 1 or not all(map(_positive_int, exps)) or base.dtype == "bool":  # type: ignore[attr-defined]
            factors.extend(i for _, i in members)
            continue
        changed = True
        factors.append(kt.pow(kt.cast(base, dtype), int(sum(exps))))  # type: ignore[arg-type]
    if not changed:
        return None
    return fit_to(_elemwise(node, factors) if len(factors) > 1 else factors[0], out)


@register_local(
    "canonicalize",
    "fast_run",
    identity="x * 0 -> 0 for integer and boolean dtypes only (for floats, inf * 0 is NaN)",
    tracks=[Mul],
)
def local_mul_zero_discrete(node: Apply) -> Variable | None:
    """Fold an integer (or boolean) product with a zero factor to zeros."""
    out = _out(node)
    if not is_discrete(out.dtype):  # type: ignore[attr-defined]
        return None
    if not any(scalar_constant(i) == 0 for i in node.inputs):
        return None
    return fit_to(typed_constant(0, out.dtype), out)  # type: ignore[attr-defined]


@register_local(
    "canonicalize",
    "fast_run",
    identity="x - x -> 0 for integer dtypes only (for floats, inf - inf is NaN)",
    tracks=[Sub],
)
def local_sub_self_discrete(node: Apply) -> Variable | None:
    """Fold an integer difference of a variable with itself to zeros."""
    x, y = node.inputs
    out = _out(node)
    if x is not y or not is_discrete(out.dtype):  # type: ignore[attr-defined]
        return None
    return fit_to(typed_constant(0, out.dtype), out)  # type: ignore[attr-defined]


def _num_den(v: Variable, depth: int = 2) -> tuple[list[Variable], list[Variable]]:
    """Split a float product / quotient into numerator and denominator factors."""
    owner = v.owner
    if depth and owner is not None and v.dtype.startswith("float"):  # type: ignore[attr-defined]
        if scalar_op_is(v, Mul):
            num: list[Variable] = []
            den: list[Variable] = []
            for i in owner.inputs:
                n, d = _num_den(i, depth - 1)
                num += n
                den += d
            return num, den
        if scalar_op_is(v, TrueDivide):
            n1, d1 = _num_den(owner.inputs[0], depth - 1)
            n2, d2 = _num_den(owner.inputs[1], depth - 1)
            return n1 + d2, d1 + n2
    return [v], []


def _product(factors: list[Variable], dtype: str) -> Variable:
    if not factors:
        return typed_constant(1, dtype)
    return kt.mul(*factors) if len(factors) > 1 else factors[0]


@register_local(
    "canonicalize",
    "fast_run",
    identity="x * y / x -> y, (x * y) / (x * z) -> y / z, (y / x) * x -> y, x / x -> 1 "
    "(float dtypes; as PyTensor: assumes x is not 0, inf or NaN)",
    tracks=[Mul, TrueDivide],
)
def local_div_cancel(node: Apply) -> Variable | None:
    """Cancel the factors common to the numerator and denominator of a float product.

    Like PyTensor's canonicalizer this ignores the points where ``x`` is 0, inf or
    NaN: there ``x * y / x`` is NaN, its rewrite ``y`` is not. Only float nodes are
    looked into (an integer product may wrap around).
    """
    out = _out(node)
    dtype = out.dtype  # type: ignore[attr-defined]
    if not dtype.startswith("float"):
        return None
    num, den = _num_den(out)
    rest: list[Variable] = []
    cancelled = False
    for f in den:
        if f in num:
            num.remove(f)
            cancelled = True
        else:
            rest.append(f)
    if not cancelled:
        return None
    top = _product(num, dtype)
    return fit_to(kt.true_divide(top, _product(rest, dtype)) if rest else top, out)


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="f(alloc(v, *dims), y) -> f(v, y) when y already gives the output its shape; "
    "f(alloc(v, *dims), alloc(w, *dims), s) -> alloc(f(v, w, s), *dims)",
    tracks=[Elemwise],
)
def local_elemwise_alloc(node: Apply) -> Variable | None:
    """Feed an elementwise op the value an Alloc broadcasts, not the broadcast array.

    Done when the op's output keeps its type, i.e. the other inputs determine every
    dimension the Alloc would have provided (the Alloc's own run-time length check is
    then dropped, as in PyTensor).
    """
    out = _out(node)
    inputs = list(node.inputs)
    changed = False
    for k, i in enumerate(inputs):
        a = i.owner.inputs[0] if is_left_pad(i) else i  # type: ignore[union-attr]
        if a.owner is None or not isinstance(a.owner.op, Alloc):
            continue
        trial = [*inputs[:k], a.owner.inputs[0], *inputs[k + 1 :]]
        if node.op.make_node(*trial).outputs[0].type == out.type:
            inputs = trial
            changed = True
    if changed:
        return node.op(*inputs)  # type: ignore[operator,no-any-return]
    return _lift_through_alloc(node, out)


def _lift_through_alloc(node: Apply, out: Variable) -> Variable | None:
    """Return ``alloc(f(v1, v2, ..., y), *dims)`` for ``f(alloc(v1, *dims), ...)``.

    When every input that gives the output a dimension is an Alloc to the same
    ``dims`` (the others are scalars or broadcast along every dimension), ``f`` runs
    once on the Alloc's values and one Alloc broadcasts its result: a gradient's
    ``switch(c, ones_like(x), zeros_like(x))`` is one value, not two arrays read
    element by element (a fused loop then takes it as a scalar).
    """
    if len(node.outputs) != 1:
        return None
    dims = None
    values = []
    for i in node.inputs:
        if i.owner is not None and isinstance(i.owner.op, Alloc) and i.ndim == out.ndim:  # type: ignore[attr-defined]
            if dims is None:
                dims = i.owner.inputs[1:]
            elif list(i.owner.inputs[1:]) != list(dims):
                return None
            values.append(i.owner.inputs[0])
        elif all(getattr(i.type, "broadcastable", (False,))):
            values.append(i)
        else:
            return None
    if dims is None:
        return None
    return fit_to(kt.alloc(node.op(*values), *dims), out)  # type: ignore[operator]


# --- exp / log ----------------------------------------------------------------------------


@register_local(
    "canonicalize",
    "fast_run",
    identity="log(exp(x)) -> x, log1p(expm1(x)) -> x (exact where exp does not "
    "overflow; more accurate where it does)",
    tracks=[Log, Log1p],
)
def local_log_exp(node: Apply) -> Variable | None:
    """Cancel ``log(exp(x))`` and ``log1p(expm1(x))``.

    Valid for every real ``x``, NaN and inf included; where ``exp(x)`` overflows
    (x > 709 in float64) or underflows to 0 the original gives inf / -inf and the
    rewrite gives the exact ``x``. PyTensor applies it the same way.
    """
    (x,) = node.inputs
    inner = Exp if isinstance(node.op.scalar_op, Log) else Expm1  # type: ignore[attr-defined]
    if not scalar_op_is(x, inner) or not _out(node).dtype.startswith("float"):  # type: ignore[attr-defined]
        return None
    return fit_to(x.owner.inputs[0], _out(node))  # type: ignore[union-attr]


@register_local(
    "canonicalize",
    "fast_run",
    identity="exp(log(x)) -> switch(x >= 0, x, nan), expm1(log1p(x)) -> "
    "switch(x >= -1, x, nan) (as PyTensor: exact, NaN kept outside the domain)",
    tracks=[Exp, Expm1],
)
def local_exp_log(node: Apply) -> Variable | None:
    """Cancel ``exp(log(x))`` keeping the NaN that ``log`` gives for ``x < 0``.

    PyTensor's choice: the result is ``x`` on the domain of ``log`` and NaN outside,
    exactly what the original computes (NaN in, NaN out), without evaluating
    ``exp`` or ``log``.
    """
    (x,) = node.inputs
    is_exp = isinstance(node.op.scalar_op, Exp)  # type: ignore[attr-defined]
    inner = Log if is_exp else Log1p
    if not scalar_op_is(x, inner):
        return None
    out = _out(node)
    dtype = out.dtype  # type: ignore[attr-defined]
    if not dtype.startswith("float"):
        return None
    v = kt.cast(x.owner.inputs[0], dtype)  # type: ignore[union-attr]
    lower = typed_constant(0 if is_exp else -1, dtype)
    return fit_to(kt.switch(kt.ge(v, lower), v, typed_constant(np.nan, dtype)), out)
