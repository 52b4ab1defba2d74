"""Stabilize phase: replace expressions that lose precision or overflow by stable equivalents.

Simple algebra is written as declarative patterns (one row each: pattern, replacement,
identity); the rewrites that look at reductions or need a guard are functions of one
node. Rewrites compose bottom-up: ``log(1 - sigmoid(x))`` first becomes
``log(sigmoid(-x))`` and then ``-softplus(x)``.

Replacements keep the original's dtype: an integer or boolean ``x`` under a float
function (``log(sigmoid(x))``) is first cast to the float dtype NumPy gives that
function, so that ``-x`` is defined and the result's dtype is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph import Apply, DimShuffle, Elemwise, KilnValueError, Variable
from kiln_graph import tensor as kt
from kiln_graph.ops import Alloc, CAReduce, Cholesky, MatMul
from kiln_graph.scalar import (
    GE,
    LE,
    Add,
    Erfc,
    Exp,
    Expm1,
    Log,
    Log1p,
    Minimum,
    Mul,
    Neg,
    Pow,
    Reciprocal,
    Sigmoid,
    Sqrt,
    Square,
    Sub,
    Switch,
    TrueDivide,
    like_ufunc,
)
from kiln_rewrite._db import register_local
from kiln_rewrite._patterns import E, Pat, PVar, register_pattern, scalar_constant

_float_of = like_ufunc(np.exp)


def _is(v: Variable, scalar_op: type) -> bool:
    """Whether ``v`` is the output of an Elemwise of ``scalar_op``."""
    node = v.owner
    return (
        node is not None
        and isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, scalar_op)
    )


def _args(v: Variable) -> tuple[Any, ...]:
    """Return the inputs of the node that computes ``v`` (which must have one)."""
    assert v.owner is not None
    return v.owner.inputs


def _flat_args(v: Variable) -> list[Any]:
    """Return the terms of the n-ary add (or factors of the mul) ``v``, nested ones included.

    An inner node of the same op and dtype that is an input as it is (not broadcast by a
    DimShuffle) contributes its own inputs: ``(a + 1) + b`` has the terms ``a, 1, b``.
    """
    node = v.owner
    assert node is not None and isinstance(node.op, Elemwise)
    kind = type(node.op.scalar_op)
    out: list[Any] = []
    for i in node.inputs:
        if _is(i, kind) and _dtype(i) == _dtype(v):
            out.extend(_flat_args(i))
        else:
            out.append(i)
    return out


def _as_float(x: Any) -> Variable:
    """``x`` cast to the float dtype NumPy's unary functions give it (itself if float)."""
    return kt.cast(x, _float_of(x.type.dtype))


def _dtype(v: Any) -> str:
    """Return the dtype of tensor ``v``."""
    return str(v.type.dtype)


def _neg(x: Variable) -> Variable:
    """``-x``, without building ``-(-y)``."""
    if _is(x, Neg):
        return _args(x)[0]
    return kt.neg(_as_float(x))


def _stabilize(pattern: Pat, build: Callable[..., Variable], identity: str, name: str) -> None:
    register_pattern("stabilize", pattern, build, "fast_run", identity=identity, name=name)


# --- declarative rules ---------------------------------------------------------------------
# Order matters where two rules match the same node: the more specific one comes first
# (``log(1 + exp(x))`` is a softplus before it is a log1p). Bottom-up, ``1 - exp(x)`` and
# ``1 - sigmoid(x)`` are rewritten before the log above them is visited, so
# ``log(1 - exp(x))`` and ``log(1 - sigmoid(x))`` usually arrive as ``log(-expm1(x))``
# and ``log(sigmoid(-x))``; their direct rules apply when those inner rules do not run.

_x, _a, _b = PVar("x"), PVar("a"), PVar("b")

# A probability computed as sigmoid(x) is in [0, 1] unless x is NaN: the bounds checks
# that log-densities write on their probability parameters cost a pass with an exp.
_stabilize(
    E(GE)(E(Sigmoid)(_x), 0),
    lambda x: kt.logical_not(kt.isnan(x)),
    "sigmoid(x) >= 0 -> not isnan(x)",
    "local_sigmoid_nonnegative",
)
_stabilize(
    E(LE)(E(Sigmoid)(_x), 1),
    lambda x: kt.logical_not(kt.isnan(x)),
    "sigmoid(x) <= 1 -> not isnan(x)",
    "local_sigmoid_at_most_one",
)

_stabilize(
    E(Log)(E(Sub)(1, E(Exp)(_x))),
    lambda x: kt.log1mexp(x),
    "log(1 - exp(x)) -> log1mexp(x)",
    "local_log_one_minus_exp",
)
_stabilize(
    E(Log)(E(Neg)(E(Expm1)(_x))),
    lambda x: kt.log1mexp(x),
    "log(-expm1(x)) -> log1mexp(x)",
    "local_log_neg_expm1",
)
_stabilize(
    E(Log1p)(E(Neg)(E(Exp)(_x))),
    lambda x: kt.log1mexp(x),
    "log1p(-exp(x)) -> log1mexp(x)",
    "local_log1p_neg_exp",
)
_stabilize(
    E(Log)(E(Add)(1, E(Exp)(_x))),
    lambda x: kt.softplus(x),
    "log(1 + exp(x)) -> softplus(x)",
    "local_log_one_plus_exp",
)
_stabilize(
    E(Log1p)(E(Exp)(_x)),
    lambda x: kt.softplus(x),
    "log1p(exp(x)) -> softplus(x)",
    "local_log1p_exp",
)
_stabilize(
    E(Log)(E(Sigmoid)(_x)),
    lambda x: kt.neg(kt.softplus(_neg(x))),
    "log(sigmoid(x)) -> -softplus(-x)",
    "local_log_sigmoid",
)
_stabilize(
    E(Log)(E(Sub)(1, E(Sigmoid)(_x))),
    lambda x: kt.neg(kt.softplus(x)),
    "log(1 - sigmoid(x)) -> -softplus(x)",
    "local_log_one_minus_sigmoid",
)
_stabilize(
    E(Log1p)(E(Neg)(E(Sigmoid)(_x))),
    lambda x: kt.neg(kt.softplus(x)),
    "log1p(-sigmoid(x)) -> -softplus(x)",
    "local_log1p_neg_sigmoid",
)
_stabilize(
    E(Sub)(1, E(Sigmoid)(_x)),
    lambda x: kt.sigmoid(_neg(x)),
    "1 - sigmoid(x) -> sigmoid(-x)",
    "local_one_minus_sigmoid",
)
_stabilize(
    E(Log)(E(Add)(E(Exp)(_a), E(Exp)(_b))),
    lambda a, b: kt.logaddexp(a, b),
    "log(exp(a) + exp(b)) -> logaddexp(a, b)",
    "local_log_add_exp",
)


@register_local(
    "stabilize",
    "fast_run",
    identity="log(1 + x) -> log1p(x), log(1 + x + y...) -> log1p(x + y...)",
    tracks=[Log],
)
def local_log1p(node: Apply) -> Variable | None:
    """Rewrite the log of a sum with a term 1 (n-ary sums included) into ``log1p``."""
    (arg,) = node.inputs
    if not _is(arg, Add):
        return None
    terms = _flat_args(arg)
    one = next((i for i, t in enumerate(terms) if scalar_constant(t) == 1), None)
    if one is None or len(terms) < 2:
        return None
    del terms[one]
    rest: Any = kt.cast(terms[0] if len(terms) == 1 else kt.add(*terms), _dtype(arg))
    if rest.type.broadcastable != kt.as_tensor(arg).type.broadcastable:
        return None  # the 1 broadcasts the other terms
    return kt.log1p(rest)


_stabilize(
    E(Sub)(E(Exp)(_x), 1),
    lambda x: kt.expm1(x),
    "exp(x) - 1 -> expm1(x)",
    "local_expm1",
)
_stabilize(
    E(Add)(E(Exp)(_x), -1),
    lambda x: kt.expm1(x),
    "exp(x) + -1 -> expm1(x)",
    "local_expm1_add",
)
_stabilize(
    E(Sub)(1, E(Exp)(_x)),
    lambda x: kt.neg(kt.expm1(x)),
    "1 - exp(x) -> -expm1(x)",
    "local_one_minus_exp",
)


# --- division by an exp ---------------------------------------------------------------------


def _exp_under_shuffle(v: Variable) -> tuple[Variable, DimShuffle | None] | None:
    """Match ``[dimshuffle](exp(z))``: return ``z`` and the DimShuffle (or None)."""
    shuffle = None
    if v.owner is not None and isinstance(v.owner.op, DimShuffle):
        shuffle, v = v.owner.op, v.owner.inputs[0]
    if not _is(v, Exp):
        return None
    return _args(v)[0], shuffle


@register_local(
    "stabilize",
    "before_grad",
    identity="x / exp(z) -> x * exp(-z), reciprocal(exp(z)) -> exp(-z) (also of a broadcast "
    "exp: its gradient stays finite where exp(z) overflows); before differentiating only",
    tracks=[TrueDivide, Reciprocal],
)
def local_div_exp(node: Apply) -> Variable | None:
    """Rewrite a division by ``exp(z)`` into a product with ``exp(-z)``.

    Where ``exp(z)`` overflows, ``x / exp(z)`` is 0 and so is the rewritten value, but
    the gradient of the quotient (``-x / exp(z)**2 * exp(z)``) is ``0 * inf``; that of
    ``x * exp(-z)`` is ``-x * exp(-z)``, 0. Tagged ``before_grad``: it runs in
    :func:`kiln_rewrite.stable_grad`'s pass over a value about to be differentiated, not
    in ``FAST_RUN``, where it would keep a gradient's ``(g / exp(z)) * exp(z)`` from
    cancelling to ``g`` (and add an ``exp(-z)`` beside ``exp(z)``).
    """
    is_div = isinstance(node.op.scalar_op, TrueDivide)  # type: ignore[attr-defined]
    found = _exp_under_shuffle(node.inputs[-1])
    out = node.outputs[0]
    if found is None or not _dtype(out).startswith("float"):
        return None
    z, shuffle = found
    inv: Any = kt.exp(_neg(z))
    if shuffle is not None:
        inv = shuffle(inv)
    result = kt.mul(node.inputs[0], inv) if is_div else inv
    result = kt.cast(result, _dtype(out))
    return result if result.type == out.type else None


# --- sqrt(x**2) ------------------------------------------------------------------------------


@register_local(
    "stabilize",
    "fast_run",
    identity="sqrt(x**2) -> abs(x), sqrt(square(x)) -> abs(x)",
    tracks=[Sqrt],
)
def local_sqrt_square(node: Apply) -> Variable | None:
    """``sqrt(x**2)`` and ``sqrt(square(x))`` are ``|x|``, without overflow of ``x**2``."""
    (arg,) = node.inputs
    if _is(arg, Square):
        inner = _args(arg)[0]
    elif _is(arg, Pow) and scalar_constant(_args(arg)[1]) == 2:
        inner = _args(arg)[0]
    else:
        return None
    dtype = _dtype(node.outputs[0])
    return kt.cast(kt.abs(kt.cast(inner, dtype)), dtype)


# --- log(sum(exp(x))) ------------------------------------------------------------------------


def _reduction(v: Variable, kind: str) -> CAReduce | None:
    node = v.owner
    if node is not None and isinstance(node.op, CAReduce) and node.op.kind == kind:
        return node.op
    return None


def _is_max_shifted(z: Variable, axes: tuple[int, ...]) -> bool:
    """Whether ``z`` is ``y - m`` with ``m`` the maximum of ``y`` over ``axes``.

    ``m`` may be broadcast (DimShuffle) and made 0 where infinite
    (``switch(isinf(m), 0, m)``), as :func:`kiln_graph.tensor.logsumexp` and
    :func:`kiln_graph.tensor.softmax` build it. Such a ``z`` is at most 0 along ``axes``:
    ``exp(z)`` cannot overflow and its sum is at least 1.
    """
    if _is(z, Sub):
        y, m = _args(z)
    elif _is(z, Add) and len(_args(z)) == 2 and _is(_args(z)[1], Neg):
        y, m = _args(z)[0], _args(_args(z)[1])[0]
    else:
        return False
    while m.owner is not None:
        op = m.owner.op
        if isinstance(op, DimShuffle):
            m = m.owner.inputs[0]
        elif _is(m, Switch):
            m = m.owner.inputs[2]
        else:
            reduce_op = _reduction(m, "max")
            return reduce_op is not None and reduce_op.axis == axes and m.owner.inputs[0] is y
    return False


def _sum_of_exp(v: Variable) -> tuple[DimShuffle | None, CAReduce, Variable] | None:
    """Match ``[dimshuffle](sum(exp(z), axes))``: return the DimShuffle, the sum and exp(z)."""
    shuffle = None
    if v.owner is not None and isinstance(v.owner.op, DimShuffle):
        shuffle, v = v.owner.op, v.owner.inputs[0]
    reduce_op = _reduction(v, "sum")
    if reduce_op is None:
        return None
    e = _args(v)[0]
    if not _is(e, Exp):
        return None
    return shuffle, reduce_op, e


@register_local(
    "stabilize",
    "fast_run",
    identity="log(sum(exp(x), axes)) -> max(x) + log(sum(exp(x - max(x)), axes))",
    tracks=[Log],
)
def local_log_sum_exp(node: Apply) -> Variable | None:
    """Rewrite ``log(sum(exp(x)))`` (any axes, keepdims) into the max-shifted logsumexp."""
    found = _sum_of_exp(node.inputs[0])
    if found is None:
        return None
    shuffle, reduce_op, e = found
    z = _args(e)[0]
    if _is_max_shifted(z, reduce_op.axis):
        return None  # already stable (the shifted form this rewrite builds)
    if any(z.type.shape[d] == 0 for d in reduce_op.axis):
        return None  # log(0) = -inf; the maximum of an empty axis is undefined
    out = kt.logsumexp(kt.cast(z, _dtype(e)), axis=reduce_op.axis)
    return shuffle(out) if shuffle is not None else out


# --- log(softmax(x)) -------------------------------------------------------------------------


@register_local(
    "stabilize",
    "fast_run",
    identity="log(exp(z) / sum(exp(z), axes)) -> z - log(sum(exp(z), axes))  (log_softmax)",
    tracks=[Log],
)
def local_log_softmax(node: Apply) -> Variable | None:
    """Rewrite ``log(softmax(x))`` into the graph of ``log_softmax(x)``.

    Matches the graph :func:`kiln_graph.tensor.softmax` builds (``exp(z)`` divided by its
    own sum with kept dimensions) and any other ``exp(z) / sum(exp(z))``; the log of the
    sum that remains is made stable by ``local_log_sum_exp`` unless ``z`` is shifted.
    """
    (arg,) = node.inputs
    if _is(arg, TrueDivide):
        num, den = _args(arg)
    elif _is(arg, Mul) and len(_args(arg)) == 2:
        num, den = _args(arg)
        if not _is(den, Reciprocal):
            num, den = den, num
        if not _is(den, Reciprocal):
            return None
        den = _args(den)[0]
    else:
        return None
    found = _sum_of_exp(den)
    if found is None or found[2] is not num:
        return None
    z = kt.cast(_args(num)[0], _dtype(num))
    return kt.sub(z, kt.log(den))


# --- log(erfc(x)) ----------------------------------------------------------------------------

#: Above this, log(erfc(x)) is computed as log(erfcx(x)) - x**2. erfc(x) underflows past
#: x ~ 26.5 (float64), 9.2 (float32), 3.9 (float16), while erfcx(x) = exp(x**2) erfc(x)
#: overflows for x below about -26; both forms are accurate for 0 <= x <= 2 (the terms of
#: the second have the same sign), so 2 is safe for every float dtype.
ERFC_THRESHOLD = 2.0


@register_local(
    "stabilize",
    "fast_run",
    identity=f"log(erfc(x)) -> log(erfcx(x)) - x**2 where x >= {ERFC_THRESHOLD}",
    tracks=[Log],
)
def local_log_erfc(node: Apply) -> Variable | None:
    """Rewrite ``log(erfc(x))``, which is ``-inf`` once ``erfc`` underflows, for large x.

    Each branch of the switch sees a clamped argument (``minimum(x, t)``, and
    ``switch(x < t, t, x)`` so that at ``x == t`` the selected branch gets the whole
    gradient) so the branch not taken is finite and contributes no NaN to the gradient.
    """
    (arg,) = node.inputs
    if not _is(arg, Erfc):
        return None
    x = _args(arg)[0]
    if _is(x, Minimum):
        bound = scalar_constant(_args(x)[1])
        if bound is not None and bound <= ERFC_THRESHOLD:
            return None  # already bounded above: erfc cannot underflow (built here)
    x = kt.cast(x, _dtype(arg))
    t = ERFC_THRESHOLD
    below = kt.lt(x, t)
    small = kt.log(kt.erfc(kt.minimum(x, t)))
    xl = kt.switch(below, t, x)
    large = kt.sub(kt.log(kt.erfcx(xl)), kt.square(xl))
    return kt.switch(below, small, large)


# --- the gradients of the unstable forms ------------------------------------------------------
# Gradients are taken before rewriting, so kiln.grad of log(1 + exp(x)) holds
# exp(x) * (g / (1 + exp(x))), which is inf * 0 for large x. These rules rewrite such
# products (an exp times a quotient by an expression of the same exp) into stable forms.


def _quotient(f: Variable) -> tuple[Any, Any, DimShuffle | None] | None:
    """Match ``[alloc]([dimshuffle](n / d))`` or the same of ``reciprocal(d)`` (n None).

    An Alloc (``broadcast_to``) is looked through: the product it is a factor of has
    its shape from the other factors (checked by the caller).
    """
    shuffle = None
    if f.owner is not None and isinstance(f.owner.op, Alloc):
        f = f.owner.inputs[0]
    if f.owner is not None and isinstance(f.owner.op, DimShuffle):
        shuffle, f = f.owner.op, f.owner.inputs[0]
    if _is(f, TrueDivide):
        n, d = _args(f)
        return n, d, shuffle
    if _is(f, Reciprocal):
        return None, _args(f)[0], shuffle
    return None


def _is_neg_square_of(v: Variable, x: Variable) -> bool:
    """Whether ``v`` is ``-(x**2)`` (as ``neg(square(x))`` or ``neg(x ** 2)``)."""
    if not _is(v, Neg):
        return False
    (sq,) = _args(v)
    if _is(sq, Square):
        return _args(sq)[0] is x
    return _is(sq, Pow) and _args(sq)[0] is x and scalar_constant(_args(sq)[1]) == 2


def _exp_times_quotient(
    e: Variable, d: Variable, shuffle: DimShuffle | None
) -> Callable[[Any], Variable] | None:
    """If ``e * shuffle(n / d)`` has a stable form, return ``n -> stable form``."""
    if not _is(e, Exp):
        return None
    (z,) = _args(e)
    found = _sum_of_exp(d)
    if found is not None and found[0] is None and found[2] is e:
        if _is_max_shifted(z, found[1].axis):
            return None  # exp(z) / sum(exp(z)) is already stable
        # exp(z) / sum(exp(z)) = exp(z - log(sum(exp(z)))); the log becomes a logsumexp
        s: Callable[[Any], Any] = shuffle if shuffle is not None else (lambda v: v)
        return lambda n: kt.mul(s(n), kt.exp(kt.sub(z, s(kt.log(d)))))
    if shuffle is not None:
        return None  # below, e and n / d must be aligned elementwise
    if _is(d, Add) and len(_args(d)) == 2:
        one, other = _args(d)
        if other is not e:
            one, other = other, one
        if other is e and scalar_constant(one) == 1:
            # exp(x) / (1 + exp(x)) = sigmoid(x)
            return lambda n: kt.mul(n, kt.sigmoid(z))
    if _is(d, Erfc) and _is_neg_square_of(z, _args(d)[0]):
        # exp(-x**2) / erfc(x) = 1 / erfcx(x)
        return lambda n: kt.true_divide(n, kt.erfcx(_args(d)[0]))
    return None


@register_local(
    "stabilize",
    "fast_run",
    identity="exp(x) * (n / (1 + exp(x))) -> n * sigmoid(x); "
    "exp(z) * (n / sum(exp(z))) -> n * exp(z - log(sum(exp(z)))); "
    "exp(-x**2) * (n / erfc(x)) -> n / erfcx(x)",
    tracks=[Mul],
)
def local_exp_times_quotient(node: Apply) -> Variable | None:
    """Rewrite the products that the gradients of softplus, logsumexp and log(erfc) hold.

    One factor is ``exp(z)``, another a quotient ``n / d`` (maybe broadcast) whose
    denominator ``d`` grows like that exp; both are replaced by one stable factor. (The
    gradient of ``log(sigmoid(x))``, ``(g / sigmoid(x)) * sigmoid(x) * sigmoid(-x)``,
    is made stable by canonicalize's cancellation of ``(y / x) * x``.)
    """
    factors = _flat_args(node.outputs[0])
    out: Any = node.outputs[0]
    for i, f in enumerate(factors):
        quotient = _quotient(f)
        if quotient is None:
            continue
        n, d, shuffle = quotient
        for j, e in enumerate(factors):
            stable = _exp_times_quotient(e, d, shuffle) if j != i else None
            if stable is None:
                continue
            num: Any = kt.constant(np.ones((1,) * d.type.ndim, d.type.dtype)) if n is None else n
            try:
                merged = stable(num)
            except KilnValueError:
                continue  # the broadcast of n / d does not apply to n alone
            rest = [v for k, v in enumerate(factors) if k not in (i, j)]
            result: Any = kt.cast(kt.mul(*rest, merged) if rest else merged, out.type.dtype)
            if result.type.broadcastable != out.type.broadcastable:
                continue
            return result
    return None


# --- linear algebra --------------------------------------------------------------------------


@register_local(
    "stabilize",
    "fast_run",
    identity="cholesky(L @ L.T) -> L (L.T for an upper factor) where L is a lower Cholesky factor",
    tracks=[Cholesky],
)
def local_cholesky_of_gram(node: Apply) -> Variable | None:
    """Return the Cholesky factor ``L`` of ``L @ L.T`` when ``L`` is one already.

    ``MvNormal(chol=L)`` holds the covariance ``L @ L.T`` and its density factors it
    again: one more factorization per evaluation, and one more in the gradient (a GP's
    Marginal likelihood took 3x PyTensor's time). A lower Cholesky factor is lower
    triangular with a positive diagonal, so it is the factor of its Gram matrix.
    """
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, MatMul):
        return None
    a, b = x.owner.inputs
    if b.owner is None or not isinstance(b.owner.op, DimShuffle) or b.owner.inputs[0] is not a:
        return None
    if tuple(b.owner.op.new_order) != (1, 0):
        return None
    if a.owner is None or not isinstance(a.owner.op, Cholesky) or not a.owner.op.lower:
        return None
    if a.type != node.outputs[0].type:
        return None
    return a if node.op.lower else kt.transpose(a)  # type: ignore[attr-defined]


__all__: list[Any] = []
