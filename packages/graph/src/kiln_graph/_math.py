"""Scalar ops with their NumPy implementation and gradient, and the elementwise functions.

Each scalar op is declared in one row: name, NumPy/SciPy implementation, number of
inputs, output-dtype rule and gradient rule. The output dtype is the one the NumPy /
SciPy implementation gives for the same input dtypes (``FROM_NFUNC``), so ``exp`` of
``int8`` is ``float16`` and ``erf`` of ``int8`` is ``float32``, as in NumPy and SciPy.
The gradient rule receives the tensor inputs, the output and the output gradient of the
Elemwise node, and returns one gradient (or ``None``) per input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph import _alloc, _incomplete
from kiln_graph._basic import as_tensor, constant
from kiln_graph._elemwise import (
    Cast,
    Elemwise,
    ScalarOp,
    bool_out,
    cast,
    upcast,
)
from kiln_graph._node import Constant, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES
from kiln_graph._ufuncs import (
    _prod_of,
    _round_half_to_even,
    _special,
    _sum_of,
    _switch,
    _ufunc_output_dtype,
    like_ufunc,
)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SQRT_PI = math.sqrt(math.pi)

GradRule = Callable[[list[TensorVariable], TensorVariable, TensorVariable], list[Any]]


def log1mexp_formula(x: Any, xp: Any = np) -> Any:
    """Return ``log(1 - exp(x))`` for ``x <= 0`` with the array namespace ``xp``.

    Accurate on both sides of ``-log 2`` (Maechler 2012). The one array statement of
    the formula: NumPy's (``Log1mexp.impl``) and JAX's (``xp=jax.numpy``); Numba's
    scalar code writes the same two branches as an ``if``.
    """
    x = xp.asarray(x)
    return xp.where(x < -_LN2, xp.log1p(-xp.exp(x)), xp.log(-xp.expm1(x)))


#: Dtype rule of a table row whose implementation is a NumPy / SciPy ufunc: the output
#: dtype is the one that ufunc gives for the same input dtypes.
FROM_NFUNC = None


def _declare(
    name: str,
    nfunc: Callable[..., Any] | _special,
    nin: int,
    dtype_rule: Callable[..., str] | None,
    grad: GradRule | None,
    doc: str,
) -> type[ScalarOp]:
    lazy = isinstance(nfunc, _special)  # its class attribute reads as the ufunc
    if dtype_rule is FROM_NFUNC:
        if not isinstance(nfunc, _special | np.ufunc):
            raise TypeError(f"{name}: FROM_NFUNC needs a ufunc implementation, got {nfunc!r}")
        dtype_rule = like_ufunc(nfunc)

    def grad_method(self: ScalarOp, inputs: Any, output: Any, gout: Any) -> list[Any]:
        if grad is None:
            return [None] * len(inputs)
        return grad(list(inputs), output, gout)

    cls = type(
        name,
        (ScalarOp,),
        {
            "nin": nin,
            "nfunc": nfunc if isinstance(nfunc, _special) else staticmethod(nfunc),
            "dtype_rule": staticmethod(dtype_rule),
            "supports_out": lazy or isinstance(nfunc, np.ufunc) or nfunc in (_sum_of, _prod_of),
            "grad": grad_method,
            "__doc__": doc,
            "__module__": __name__,
            "__qualname__": name,
        },
    )
    return cls


def _float_dtype(x: TensorVariable) -> str:
    return x.dtype if x.dtype.startswith("float") else "float64"


# --- the subgradient convention at ties ---------------------------------------------------
# Where a piecewise function has a kink (maximum, minimum, clip, abs, sign, max / min
# reductions), kiln's gradient is the mean of the one-sided derivatives: a tie splits the
# gradient equally among the tied arguments (1/2 each for maximum and minimum, 1/k each
# of k tied entries of a max / min reduction), and abs and sign give 0 at 0. This is what
# central finite differences give, and it keeps formulas written as sums of such pieces
# right: maximum(x, 0) + minimum(x, 0) == x has gradient 1 at x == 0. Comparisons have
# no gradient; a switch passes the gradient to the branch it selects only (so a clamp
# that must be exact at its edge is written as a switch, not as maximum / minimum).


def _tie_weight(a: TensorVariable, b: TensorVariable, dtype: str) -> TensorVariable:
    """Return the share of ``d maximum(a, b)`` that goes to ``a`` (1, 1/2 at a tie, else 0)."""
    return switch(eq(a, b), constant(0.5, dtype=dtype), cast(gt(a, b), dtype))


def _clip_grad(xs: list[TensorVariable], o: TensorVariable, g: TensorVariable) -> list[Any]:
    """Gradient of ``clip(x, lo, hi)`` as that of ``minimum(maximum(x, lo), hi)``."""
    x, lo, hi = xs
    m = maximum(x, lo)
    g_m = mul(g, _tie_weight(hi, m, g.dtype))
    return [
        mul(g_m, _tie_weight(x, lo, g.dtype)),
        mul(g_m, _tie_weight(lo, x, g.dtype)),
        mul(g, _tie_weight(m, hi, g.dtype)),
    ]


# --- scalar op table -------------------------------------------------------------------
# Gradient rules use the elementwise functions defined below (resolved at call time).

Add = _declare("Add", _sum_of, -1, upcast, lambda xs, o, g: [g] * len(xs), "x + y + ...")
Sub = _declare("Sub", np.subtract, 2, FROM_NFUNC, lambda xs, o, g: [g, neg(g)], "x - y")
Mul = _declare(
    "Mul",
    _prod_of,
    -1,
    upcast,
    lambda xs, o, g: [
        mul(g, *[x for j, x in enumerate(xs) if j != i]) if len(xs) > 1 else g
        for i in range(len(xs))
    ],
    "x * y * ...",
)
TrueDivide = _declare(
    "TrueDivide",
    np.true_divide,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, xs[1]), neg(true_divide(mul(g, o), xs[1]))],
    "x / y",
)
FloorDivide = _declare(
    "FloorDivide",
    np.floor_divide,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [_alloc.zeros_like(xs[0]), _alloc.zeros_like(xs[1])],
    "x // y",
)
Mod = _declare(
    "Mod",
    np.mod,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [g, neg(mul(g, floor_divide(xs[0], xs[1])))],
    "x % y (sign of y, as NumPy)",
)
Pow = _declare(
    "Pow",
    np.power,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [
        mul(g, xs[1], pow(xs[0], sub(xs[1], 1))),
        mul(g, o, log(xs[0])),
    ],
    "x ** y",
)
Maximum = _declare(
    "Maximum",
    np.maximum,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [
        mul(g, _tie_weight(xs[0], xs[1], g.dtype)),
        mul(g, _tie_weight(xs[1], xs[0], g.dtype)),
    ],
    "elementwise maximum (a tie splits the gradient equally)",
)
Minimum = _declare(
    "Minimum",
    np.minimum,
    2,
    FROM_NFUNC,
    lambda xs, o, g: [
        mul(g, _tie_weight(xs[1], xs[0], g.dtype)),
        mul(g, _tie_weight(xs[0], xs[1], g.dtype)),
    ],
    "elementwise minimum (a tie splits the gradient equally)",
)
EQ = _declare("EQ", np.equal, 2, bool_out, None, "x == y")
NEQ = _declare("NEQ", np.not_equal, 2, bool_out, None, "x != y")
LT = _declare("LT", np.less, 2, bool_out, None, "x < y")
LE = _declare("LE", np.less_equal, 2, bool_out, None, "x <= y")
GT = _declare("GT", np.greater, 2, bool_out, None, "x > y")
GE = _declare("GE", np.greater_equal, 2, bool_out, None, "x >= y")
AND = _declare("AND", np.logical_and, 2, bool_out, None, "logical and")
OR = _declare("OR", np.logical_or, 2, bool_out, None, "logical or")
NOT = _declare("NOT", np.logical_not, 1, bool_out, None, "logical not")
IsNan = _declare("IsNan", np.isnan, 1, bool_out, None, "x is NaN")
IsInf = _declare("IsInf", np.isinf, 1, bool_out, None, "x is +-inf")

Neg = _declare("Neg", np.negative, 1, FROM_NFUNC, lambda xs, o, g: [neg(g)], "-x")
Abs = _declare("Abs", np.abs, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, sign(xs[0]))], "|x|")
Sign = _declare(
    "Sign", np.sign, 1, FROM_NFUNC, lambda xs, o, g: [_alloc.zeros_like(xs[0])], "sign of x"
)
Exp = _declare("Exp", np.exp, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, o)], "e ** x")
Exp2 = _declare("Exp2", np.exp2, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, o, _LN2)], "2 ** x")
Expm1 = _declare(
    "Expm1", np.expm1, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, add(o, 1))], "exp(x) - 1"
)
Log = _declare("Log", np.log, 1, FROM_NFUNC, lambda xs, o, g: [true_divide(g, xs[0])], "log(x)")
Log2 = _declare(
    "Log2",
    np.log2,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, mul(xs[0], _LN2))],
    "log2(x)",
)
Log10 = _declare(
    "Log10",
    np.log10,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, mul(xs[0], _LN10))],
    "log10(x)",
)
Log1p = _declare(
    "Log1p",
    np.log1p,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, add(xs[0], 1))],
    "log(1 + x)",
)
Sqrt = _declare(
    "Sqrt",
    np.sqrt,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(mul(g, 0.5), o)],
    "square root",
)
Square = _declare("Square", np.square, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, 2, xs[0])], "x ** 2")
Reciprocal = _declare(
    "Reciprocal",
    np.reciprocal,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [neg(mul(g, square(o)))],
    "1 / x (as NumPy: integer x gives an integer result)",
)
Sigmoid = _declare(
    "Sigmoid",
    _special("expit"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, o, sub(1, o))],
    "1 / (1 + exp(-x))",
)
Softplus = _declare(
    "Softplus",
    lambda x: np.logaddexp(0, x),
    1,
    lambda x: _ufunc_output_dtype(np.logaddexp, (x, x)),
    lambda xs, o, g: [mul(g, sigmoid(xs[0]))],
    "log(1 + exp(x))",
)
Logaddexp = _declare(
    "Logaddexp",
    np.logaddexp,
    2,
    FROM_NFUNC,
    # d/dx log(e^x + e^y) = sigmoid(x - y); 1/2 where x == y (also for equal infinities,
    # where x - y is NaN).
    lambda xs, o, g: [
        mul(g, switch(eq(xs[0], xs[1]), 0.5, sigmoid(sub(xs[0], xs[1])))),
        mul(g, switch(eq(xs[0], xs[1]), 0.5, sigmoid(sub(xs[1], xs[0])))),
    ],
    "log(exp(x) + exp(y)), without overflow",
)
Log1mexp = _declare(
    "Log1mexp",
    log1mexp_formula,
    1,
    like_ufunc(np.expm1),
    lambda xs, o, g: [neg(true_divide(g, expm1(neg(xs[0]))))],
    "log(1 - exp(x)) for x <= 0",
)
Logit = _declare(
    "Logit",
    _special("logit"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, mul(xs[0], sub(1, xs[0])))],
    "log(x / (1 - x))",
)
Tanh = _declare(
    "Tanh", np.tanh, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, sub(1, square(o)))], "tanh"
)
Sinh = _declare("Sinh", np.sinh, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, cosh(xs[0]))], "")
Cosh = _declare("Cosh", np.cosh, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, sinh(xs[0]))], "")
Arcsinh = _declare(
    "Arcsinh",
    np.arcsinh,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, sqrt(add(square(xs[0]), 1)))],
    "inverse hyperbolic sine",
)
Sin = _declare("Sin", np.sin, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, cos(xs[0]))], "sine")
Cos = _declare("Cos", np.cos, 1, FROM_NFUNC, lambda xs, o, g: [neg(mul(g, sin(xs[0])))], "cosine")
Tan = _declare(
    "Tan", np.tan, 1, FROM_NFUNC, lambda xs, o, g: [mul(g, add(1, square(o)))], "tangent"
)
Arctan = _declare(
    "Arctan",
    np.arctan,
    1,
    FROM_NFUNC,
    lambda xs, o, g: [true_divide(g, add(1, square(xs[0])))],
    "inverse tangent",
)
Erf = _declare(
    "Erf",
    _special("erf"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, 2 / _SQRT_PI, exp(neg(square(xs[0]))))],
    "error function",
)
Erfc = _declare(
    "Erfc",
    _special("erfc"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, -2 / _SQRT_PI, exp(neg(square(xs[0]))))],
    "1 - erf(x)",
)
Erfcx = _declare(
    "Erfcx",
    _special("erfcx"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, sub(mul(2, xs[0], o), 2 / _SQRT_PI))],
    "exp(x**2) * erfc(x)",
)
Erfinv = _declare(
    "Erfinv",
    _special("erfinv"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, _SQRT_PI / 2, exp(square(o)))],
    "inverse error function",
)
Gammaln = _declare(
    "Gammaln",
    _special("gammaln"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, digamma(xs[0]))],
    "log |Gamma(x)|",
)
Digamma = _declare(
    "Digamma",
    _special("digamma"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, polygamma(1, xs[0]))],
    "d/dx log Gamma(x)",
)
Polygamma = _declare(
    "Polygamma",
    lambda n, x: _special("polygamma").resolve()(n, x),
    2,
    lambda n, x: _ufunc_output_dtype(_special("digamma").resolve(), (x,)),
    lambda xs, o, g: [None, mul(g, polygamma(add(xs[0], 1), xs[1]))],
    "n-th derivative of digamma",
)
Betaln = _declare(
    "Betaln",
    _special("betaln"),
    2,
    FROM_NFUNC,
    lambda xs, o, g: [
        mul(g, sub(digamma(xs[0]), digamma(add(xs[0], xs[1])))),
        mul(g, sub(digamma(xs[1]), digamma(add(xs[0], xs[1])))),
    ],
    "log |B(a, b)|",
)


def _i1e_grad(xs: list[TensorVariable], o: TensorVariable, g: TensorVariable) -> list[Any]:
    """``d i1e / dx = i0e(x) - i1e(x) / x - sign(x) i1e(x)``, 1/2 at ``x = 0``."""
    x = xs[0]
    at_zero = eq(x, 0)
    safe_x = switch(at_zero, _alloc.ones_like(x), x)
    d = sub(sub(i0e(x), true_divide(o, safe_x)), mul(sign(x), o))
    return [mul(g, switch(at_zero, 0.5, d))]


def _i1_grad(xs: list[TensorVariable], o: TensorVariable, g: TensorVariable) -> list[Any]:
    """``d I1 / dx = I0(x) - I1(x) / x``, 1/2 at ``x = 0``."""
    x = xs[0]
    at_zero = eq(x, 0)
    safe_x = switch(at_zero, _alloc.ones_like(x), x)
    return [mul(g, switch(at_zero, 0.5, sub(i0(x), true_divide(o, safe_x))))]


I0e = _declare(
    "I0e",
    _special("i0e"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, sub(i1e(xs[0]), mul(sign(xs[0]), o)))],
    "exp(-|x|) * I0(x), the exponentially scaled modified Bessel function of order 0",
)
I1e = _declare(
    "I1e",
    _special("i1e"),
    1,
    FROM_NFUNC,
    _i1e_grad,
    "exp(-|x|) * I1(x), the exponentially scaled modified Bessel function of order 1",
)
I0 = _declare(
    "I0",
    _special("i0"),
    1,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, i1(xs[0]))],
    "I0(x), the modified Bessel function of the first kind of order 0",
)
I1 = _declare(
    "I1",
    _special("i1"),
    1,
    FROM_NFUNC,
    _i1_grad,
    "I1(x), the modified Bessel function of the first kind of order 1",
)


def _xlogy(x: Any, y: Any) -> TensorVariable:
    """Return ``x log y``, 0 where ``x == 0`` (densities at the end of their support)."""
    return switch(eq(x, 0), 0.0, mul(x, log(y)))


def _gamma_density(a: Any, x: Any) -> TensorVariable:
    """Return d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)."""
    return exp(sub(sub(_xlogy(sub(a, 1), x), x), gammaln(a)))


def _beta_density(a: Any, b: Any, x: Any) -> TensorVariable:
    """Return d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    log1m = log1p(neg(x))
    lp = add(_xlogy(sub(a, 1), x), switch(eq(b, 1), 0.0, mul(sub(b, 1), log1m)))
    return exp(sub(lp, betaln(a, b)))


def _no_second_derivative(name: str, param: TensorVariable) -> None:
    """Raise where the gradient of a parameter derivative would be needed in ``param``."""
    if param.dtype in DISCRETE_DTYPES or isinstance(param, Constant):
        return
    raise NotImplementedError(
        f"{name}: the second derivative in a parameter of the incomplete gamma / beta "
        "function is not implemented (only the derivatives in x are)"
    )


def _gammainc_da_grad(
    sign: float, name: str
) -> Callable[[list[TensorVariable], TensorVariable, TensorVariable], list[Any]]:
    def rule(xs: list[TensorVariable], o: TensorVariable, g: TensorVariable) -> list[Any]:
        a, x = xs
        _no_second_derivative(name, a)
        dx = mul(sign, _gamma_density(a, x), sub(log(x), digamma(a)))
        return [None, mul(g, dx)]

    return rule


def _betainc_d_grad(
    which: int,
) -> Callable[[list[TensorVariable], TensorVariable, TensorVariable], list[Any]]:
    def rule(xs: list[TensorVariable], o: TensorVariable, g: TensorVariable) -> list[Any]:
        a, b, x = xs
        name = ("BetaincDa", "BetaincDb")[which]
        _no_second_derivative(name, a)
        _no_second_derivative(name, b)
        # d/dx d/dp I = d/dp (density) = density * d/dp log(density)
        psi_ab = digamma(add(a, b))
        dlog = (
            add(sub(log(x), digamma(a)), psi_ab)
            if which == 0
            else add(sub(log1p(neg(x)), digamma(b)), psi_ab)
        )
        return [None, None, mul(g, _beta_density(a, b, x), dlog)]

    return rule


_LIKE_GAMMAINC = like_ufunc(_special("gammainc"))
_LIKE_BETAINC = like_ufunc(_special("betainc"))

Gammainc = _declare(
    "Gammainc",
    _special("gammainc"),
    2,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, gammainc_da(*xs)), mul(g, _gamma_density(*xs))],
    "regularized lower incomplete gamma function P(a, x)",
)
Gammaincc = _declare(
    "Gammaincc",
    _special("gammaincc"),
    2,
    FROM_NFUNC,
    lambda xs, o, g: [mul(g, gammaincc_da(*xs)), neg(mul(g, _gamma_density(*xs)))],
    "regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)",
)
Betainc = _declare(
    "Betainc",
    _special("betainc"),
    3,
    FROM_NFUNC,
    lambda xs, o, g: [
        mul(g, betainc_da(*xs)),
        mul(g, betainc_db(*xs)),
        mul(g, _beta_density(*xs)),
    ],
    "regularized incomplete beta function I_x(a, b)",
)
GammaincDa = _declare(
    "GammaincDa",
    _incomplete.gammainc_da,
    2,
    _LIKE_GAMMAINC,
    _gammainc_da_grad(1.0, "GammaincDa"),
    "d/da P(a, x) (its gradient in a is not implemented: a clear error)",
)
GammainccDa = _declare(
    "GammainccDa",
    _incomplete.gammaincc_da,
    2,
    _LIKE_GAMMAINC,
    _gammainc_da_grad(-1.0, "GammainccDa"),
    "d/da Q(a, x) (its gradient in a is not implemented: a clear error)",
)
BetaincDa = _declare(
    "BetaincDa",
    _incomplete.betainc_da,
    3,
    _LIKE_BETAINC,
    _betainc_d_grad(0),
    "d/da I_x(a, b) (its gradient in a and b is not implemented: a clear error)",
)
BetaincDb = _declare(
    "BetaincDb",
    _incomplete.betainc_db,
    3,
    _LIKE_BETAINC,
    _betainc_d_grad(1),
    "d/db I_x(a, b) (its gradient in a and b is not implemented: a clear error)",
)
Floor = _declare(
    "Floor", np.floor, 1, FROM_NFUNC, lambda xs, o, g: [_alloc.zeros_like(xs[0])], "floor"
)
Ceil = _declare("Ceil", np.ceil, 1, FROM_NFUNC, lambda xs, o, g: [_alloc.zeros_like(xs[0])], "ceil")
Round = _declare(
    "Round",
    _round_half_to_even,
    1,
    upcast,
    lambda xs, o, g: [_alloc.zeros_like(xs[0])],
    "round half to even",
)
Switch = _declare(
    "Switch",
    _switch,
    3,
    lambda c, a, b: upcast(a, b),
    lambda xs, o, g: [
        None,
        switch(xs[0], g, _alloc.zeros_like(g)),
        switch(xs[0], _alloc.zeros_like(g), g),
    ],
    "a where cond else b",
)
Clip = _declare(
    "Clip",
    np.clip,
    3,
    upcast,
    _clip_grad,
    "x limited to [lo, hi] (minimum(maximum(x, lo), hi), and its gradient at ties)",
)

# --- elementwise functions ---------------------------------------------------------------


def _weak_constants(args: tuple[Any, ...]) -> list[TensorVariable]:
    """Turn Python scalars into constants of the dtype NumPy 2 would give them (NEP 50).

    ``x_float32 * 2.0`` stays float32; ``x_int32 + 1.5`` becomes float64.
    """
    tensors = [a for a in args if isinstance(a, Variable)]
    dtypes = [as_tensor(t).dtype for t in tensors]
    out = []
    for a in args:
        if isinstance(a, Variable):
            out.append(as_tensor(a))
        elif isinstance(a, bool | int | float) and dtypes:
            try:
                dt = np.result_type(*dtypes, a)
                value = np.asarray(a).astype(dt)
                if value != a:
                    raise OverflowError
            except (OverflowError, TypeError):
                dt = np.asarray(a).dtype
            out.append(constant(a, dtype=dt))
        else:
            out.append(as_tensor(a))
    return out


def _elemwise_function(op_class: type[ScalarOp], name: str, doc: str) -> Callable[..., Any]:
    op = Elemwise(op_class())

    def fn(*args: Any) -> TensorVariable:
        return op(*_weak_constants(args))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{doc or name}``, with NumPy broadcasting."
    return fn


add = _elemwise_function(Add, "add", "x + y + ...")
sub = _elemwise_function(Sub, "sub", "x - y")
mul = _elemwise_function(Mul, "mul", "x * y * ...")
true_divide = _elemwise_function(TrueDivide, "true_divide", "x / y")
floor_divide = _elemwise_function(FloorDivide, "floor_divide", "x // y")
mod = _elemwise_function(Mod, "mod", "x % y")
pow = _elemwise_function(Pow, "pow", "x ** y")  # noqa: A001
maximum = _elemwise_function(Maximum, "maximum", "maximum")
minimum = _elemwise_function(Minimum, "minimum", "minimum")
eq = _elemwise_function(EQ, "eq", "x == y")
neq = _elemwise_function(NEQ, "neq", "x != y")
lt = _elemwise_function(LT, "lt", "x < y")
le = _elemwise_function(LE, "le", "x <= y")
gt = _elemwise_function(GT, "gt", "x > y")
ge = _elemwise_function(GE, "ge", "x >= y")
logical_and = _elemwise_function(AND, "logical_and", "logical and")
logical_or = _elemwise_function(OR, "logical_or", "logical or")
logical_not = _elemwise_function(NOT, "logical_not", "logical not")
isnan = _elemwise_function(IsNan, "isnan", "test for NaN")
isinf = _elemwise_function(IsInf, "isinf", "test for +-inf")
neg = _elemwise_function(Neg, "neg", "-x")
abs = _elemwise_function(Abs, "abs", "absolute value")  # noqa: A001
sign = _elemwise_function(Sign, "sign", "sign")
exp = _elemwise_function(Exp, "exp", "exp(x)")
exp2 = _elemwise_function(Exp2, "exp2", "2 ** x")
expm1 = _elemwise_function(Expm1, "expm1", "exp(x) - 1")
log = _elemwise_function(Log, "log", "natural logarithm")
log2 = _elemwise_function(Log2, "log2", "base-2 logarithm")
log10 = _elemwise_function(Log10, "log10", "base-10 logarithm")
log1p = _elemwise_function(Log1p, "log1p", "log(1 + x)")
sqrt = _elemwise_function(Sqrt, "sqrt", "square root")
square = _elemwise_function(Square, "square", "x ** 2")
reciprocal = _elemwise_function(Reciprocal, "reciprocal", "1 / x")
sigmoid = _elemwise_function(Sigmoid, "sigmoid", "logistic sigmoid 1 / (1 + exp(-x))")
softplus = _elemwise_function(Softplus, "softplus", "log(1 + exp(x))")
log1mexp = _elemwise_function(Log1mexp, "log1mexp", "log(1 - exp(x)) for x <= 0")
logaddexp = _elemwise_function(Logaddexp, "logaddexp", "log(exp(x) + exp(y))")
logit = _elemwise_function(Logit, "logit", "log(x / (1 - x))")
tanh = _elemwise_function(Tanh, "tanh", "hyperbolic tangent")
sinh = _elemwise_function(Sinh, "sinh", "hyperbolic sine")
cosh = _elemwise_function(Cosh, "cosh", "hyperbolic cosine")
arcsinh = _elemwise_function(Arcsinh, "arcsinh", "inverse hyperbolic sine")
sin = _elemwise_function(Sin, "sin", "sine")
cos = _elemwise_function(Cos, "cos", "cosine")
tan = _elemwise_function(Tan, "tan", "tangent")
arctan = _elemwise_function(Arctan, "arctan", "inverse tangent")
erf = _elemwise_function(Erf, "erf", "error function")
erfc = _elemwise_function(Erfc, "erfc", "complementary error function")
erfcx = _elemwise_function(Erfcx, "erfcx", "scaled complementary error function")
erfinv = _elemwise_function(Erfinv, "erfinv", "inverse error function")
gammaln = _elemwise_function(Gammaln, "gammaln", "log |Gamma(x)|")
digamma = _elemwise_function(Digamma, "digamma", "digamma function")
polygamma = _elemwise_function(Polygamma, "polygamma", "polygamma(n, x)")
betaln = _elemwise_function(Betaln, "betaln", "log |B(a, b)|")
i0e = _elemwise_function(I0e, "i0e", "exp(-|x|) I0(x)")
i1e = _elemwise_function(I1e, "i1e", "exp(-|x|) I1(x)")
i0 = _elemwise_function(I0, "i0", "modified Bessel function I0(x)")
i1 = _elemwise_function(I1, "i1", "modified Bessel function I1(x)")
gammainc = _elemwise_function(Gammainc, "gammainc", "regularized lower incomplete gamma P(a, x)")
gammaincc = _elemwise_function(Gammaincc, "gammaincc", "regularized upper incomplete gamma Q(a, x)")
betainc = _elemwise_function(Betainc, "betainc", "regularized incomplete beta I_x(a, b)")
gammainc_da = _elemwise_function(GammaincDa, "gammainc_da", "d/da P(a, x)")
gammaincc_da = _elemwise_function(GammainccDa, "gammaincc_da", "d/da Q(a, x)")
betainc_da = _elemwise_function(BetaincDa, "betainc_da", "d/da I_x(a, b)")
betainc_db = _elemwise_function(BetaincDb, "betainc_db", "d/db I_x(a, b)")
floor = _elemwise_function(Floor, "floor", "floor")
ceil = _elemwise_function(Ceil, "ceil", "ceiling")
round = _elemwise_function(Round, "round", "round half to even")  # noqa: A001
_switch_fn = _elemwise_function(Switch, "switch", "a where cond else b")
_clip_fn = _elemwise_function(Clip, "clip", "clip")


def switch(cond: Any, a: Any, b: Any) -> TensorVariable:
    """Elementwise ``a`` where ``cond`` is true, else ``b`` (NumPy's ``where``)."""
    c = as_tensor(cond)
    if c.dtype != "bool":
        c = neq(c, 0)
    return _switch_fn(c, a, b)


where = switch


def clip(x: Any, lo: Any, hi: Any) -> TensorVariable:
    """Elementwise ``x`` limited to ``[lo, hi]``."""
    return _clip_fn(x, lo, hi)


__all_scalar_ops__ = [
    obj for obj in list(globals().values()) if isinstance(obj, type) and issubclass(obj, ScalarOp)
] + [Cast]
