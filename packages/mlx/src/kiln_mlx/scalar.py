"""MLX functions of kiln's scalar ops (``kiln_graph._math``), registered with ``mlx_funcify``.

Each takes MLX arrays already cast to the dtype the op computes in (see
:func:`kiln_mlx.elemwise.apply_scalar`); the caller casts the result to the op's output
dtype. The functions MLX gets wrong in float64, or lacks, come from
:mod:`kiln_mlx._float64_math`; the incomplete gamma and beta functions (and their
parameter derivatives) and the modified Bessel functions from :mod:`kiln_mlx._special`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import mlx.core as mx

from kiln_graph import ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, ScalarConstant
from kiln_mlx import _float64_math as f64
from kiln_mlx import _special
from kiln_mlx._dtypes import as_mx, const
from kiln_mlx._funcify import MlxImpl, mlx_funcify


def _fold(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda *xs: functools.reduce(op, xs)


def _floor_divide(a: Any, b: Any) -> Any:
    if mx.issubdtype(a.dtype, mx.integer):
        return mx.floor_divide(a, b)
    return mx.floor(a / b)


def _sign(x: Any) -> Any:
    return (
        mx.where(mx.isnan(x), x, mx.sign(x)) if mx.issubdtype(x.dtype, mx.floating) else mx.sign(x)
    )


def _logit(p: Any) -> Any:
    return mx.log(p) - mx.log1p(-p)


def _exp2(x: Any) -> Any:
    return mx.power(const(2.0, x), x)


def _round(x: Any) -> Any:
    return mx.round(x)  # half to even, as NumPy


def _square(x: Any) -> Any:
    return x * x


def _clip(x: Any, low: Any, high: Any) -> Any:
    return mx.minimum(mx.maximum(x, low), high)


def _maximum(a: Any, b: Any) -> Any:
    out = mx.maximum(a, b)
    if mx.issubdtype(out.dtype, mx.floating):  # NumPy propagates NaN
        out = mx.where(mx.isnan(a), a, mx.where(mx.isnan(b), b, out))
    return out


def _minimum(a: Any, b: Any) -> Any:
    out = mx.minimum(a, b)
    if mx.issubdtype(out.dtype, mx.floating):
        out = mx.where(mx.isnan(a), a, mx.where(mx.isnan(b), b, out))
    return out


#: The MLX function of each scalar op class (registered with ``mlx_funcify`` below).
_FUNCTIONS: dict[type, Callable[..., Any]] = {
    m.Add: _fold(operator.add),
    m.Sub: mx.subtract,
    m.Mul: _fold(operator.mul),
    m.TrueDivide: mx.divide,
    m.FloorDivide: _floor_divide,
    m.Mod: mx.remainder,  # the sign of the divisor, as NumPy's
    m.Pow: mx.power,
    m.Maximum: _maximum,
    m.Minimum: _minimum,
    m.EQ: mx.equal,
    m.NEQ: mx.not_equal,
    m.LT: mx.less,
    m.LE: mx.less_equal,
    m.GT: mx.greater,
    m.GE: mx.greater_equal,
    m.AND: mx.logical_and,
    m.OR: mx.logical_or,
    m.NOT: mx.logical_not,
    m.IsNan: mx.isnan,
    m.IsInf: mx.isinf,
    m.Neg: mx.negative,
    m.Abs: mx.abs,
    m.Sign: _sign,
    m.Exp: f64.exp,
    m.Exp2: _exp2,
    m.Expm1: mx.expm1,
    m.Log: mx.log,
    m.Log2: mx.log2,
    m.Log10: mx.log10,
    m.Log1p: mx.log1p,
    m.Sqrt: mx.sqrt,
    m.Square: _square,
    m.Reciprocal: mx.reciprocal,
    m.Sigmoid: f64.sigmoid,
    m.Softplus: f64.softplus,
    m.Logaddexp: f64.logaddexp,
    m.Log1mexp: f64.log1mexp,
    m.Logit: _logit,
    m.Tanh: mx.tanh,
    m.Sinh: mx.sinh,
    m.Cosh: mx.cosh,
    m.Arcsinh: mx.arcsinh,
    m.Sin: f64.sin,
    m.Cos: f64.cos,
    m.Tan: mx.tan,
    m.Arctan: mx.arctan,
    m.Erf: f64.erf,
    m.Erfc: f64.erfc,
    m.Erfcx: f64.erfcx,
    m.Erfinv: f64.erfinv,
    m.Gammaln: f64.lgamma,
    m.Digamma: f64.digamma,
    m.Polygamma: f64.polygamma,
    m.Betaln: f64.betaln,
    m.Gammainc: _special.gammainc,
    m.Gammaincc: _special.gammaincc,
    m.GammaincDa: _special.gammainc_da,
    m.GammainccDa: _special.gammaincc_da,
    m.Betainc: _special.betainc,
    m.BetaincDa: _special.betainc_da,
    m.BetaincDb: _special.betainc_db,
    m.I0e: _special.i0e,
    m.I1e: _special.i1e,
    m.I0: _special.i0,
    m.I1: _special.i1,
    m.Floor: mx.floor,
    m.Ceil: mx.ceil,
    m.Round: _round,
    m.Switch: mx.where,
    m.Clip: _clip,
}


def register_scalar(cls: type, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as the MLX function of the scalar ops of ``cls``."""

    def mlx_funcify_scalar(op: ScalarOp, node: Any = None) -> MlxImpl:
        return fn

    mlx_funcify_scalar.__name__ = f"mlx_funcify_{cls.__name__}"
    mlx_funcify.register(cls)(mlx_funcify_scalar)


for _cls, _fn in _FUNCTIONS.items():
    register_scalar(_cls, _fn)


@mlx_funcify.register(Cast)
def mlx_funcify_Cast(op: Cast, node: Any = None) -> MlxImpl:  # noqa: N802
    """Return the identity: the caller's conversion to the output dtype is the cast."""
    return lambda x: x


@mlx_funcify.register(ScalarConstant)
def mlx_funcify_ScalarConstant(op: ScalarConstant, node: Any = None) -> MlxImpl:  # noqa: N802
    """Return the inlined constant's value (a 0-d array of its dtype)."""
    value = op.value
    return lambda: as_mx(value)
