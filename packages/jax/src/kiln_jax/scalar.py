"""JAX functions of kiln's scalar ops (``kiln_graph._math``), registered with ``jax_funcify``.

Each takes arguments already cast to the dtype the op computes in (see
:func:`kiln_jax.elemwise.apply_scalar`) and returns a ``jax.numpy`` array; the caller
casts the result to the op's output dtype, as the VM's ``np.asarray(result, dtype)``
does.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import jax.scipy.special as jsp

from kiln_graph import ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, ScalarConstant
from kiln_jax import _incomplete
from kiln_jax._funcify import JaxImpl, jax_funcify


def _log1mexp(x: Any) -> Any:
    return m.log1mexp_formula(x, jnp)


def _fold(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda *xs: functools.reduce(op, xs)


#: The JAX function of each scalar op class (registered with ``jax_funcify`` below).
_FUNCTIONS: dict[type, Callable[..., Any]] = {
    m.Add: _fold(operator.add),
    m.Sub: jnp.subtract,
    m.Mul: _fold(operator.mul),
    m.TrueDivide: jnp.true_divide,
    m.FloorDivide: jnp.floor_divide,
    m.Mod: jnp.mod,
    m.Pow: jnp.power,
    m.Maximum: jnp.maximum,
    m.Minimum: jnp.minimum,
    m.EQ: jnp.equal,
    m.NEQ: jnp.not_equal,
    m.LT: jnp.less,
    m.LE: jnp.less_equal,
    m.GT: jnp.greater,
    m.GE: jnp.greater_equal,
    m.AND: jnp.logical_and,
    m.OR: jnp.logical_or,
    m.NOT: jnp.logical_not,
    m.IsNan: jnp.isnan,
    m.IsInf: jnp.isinf,
    m.Neg: jnp.negative,
    m.Abs: jnp.abs,
    m.Sign: jnp.sign,
    m.Exp: jnp.exp,
    m.Exp2: jnp.exp2,
    m.Expm1: jnp.expm1,
    m.Log: jnp.log,
    m.Log2: jnp.log2,
    m.Log10: jnp.log10,
    m.Log1p: jnp.log1p,
    m.Sqrt: jnp.sqrt,
    m.Square: jnp.square,
    m.Reciprocal: jnp.reciprocal,
    m.Sigmoid: jsp.expit,
    m.Softplus: lambda x: jnp.logaddexp(jnp.zeros((), x.dtype), x),
    m.Logaddexp: jnp.logaddexp,
    m.Log1mexp: _log1mexp,
    m.Logit: jsp.logit,
    m.Tanh: jnp.tanh,
    m.Sinh: jnp.sinh,
    m.Cosh: jnp.cosh,
    m.Arcsinh: jnp.arcsinh,
    m.Sin: jnp.sin,
    m.Cos: jnp.cos,
    m.Tan: jnp.tan,
    m.Arctan: jnp.arctan,
    m.Erf: jsp.erf,
    m.Erfc: jsp.erfc,
    m.Erfcx: jsp.erfcx,
    m.Erfinv: jsp.erfinv,
    m.Gammaln: jsp.gammaln,
    m.Digamma: jsp.digamma,
    m.Polygamma: lambda n, x: jsp.polygamma(jnp.asarray(n).astype("int32"), x),
    m.Betaln: jsp.betaln,
    m.Gammainc: jsp.gammainc,
    m.Gammaincc: jsp.gammaincc,
    m.Betainc: jsp.betainc,
    m.GammaincDa: _incomplete.gammainc_da,
    m.GammainccDa: _incomplete.gammaincc_da,
    m.BetaincDa: _incomplete.betainc_da,
    m.BetaincDb: _incomplete.betainc_db,
    m.I0e: jsp.i0e,
    m.I1e: jsp.i1e,
    m.I0: jsp.i0,
    m.I1: jsp.i1,
    m.Floor: jnp.floor,
    m.Ceil: jnp.ceil,
    m.Round: jnp.round,
    m.Switch: jnp.where,
    m.Clip: jnp.clip,
}


def register_scalar(cls: type, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as the JAX function of the scalar ops of ``cls``."""

    def jax_funcify_scalar(op: ScalarOp, node: Any = None) -> JaxImpl:
        return fn

    jax_funcify_scalar.__name__ = f"jax_funcify_{cls.__name__}"
    jax_funcify.register(cls)(jax_funcify_scalar)


for _cls, _fn in _FUNCTIONS.items():
    register_scalar(_cls, _fn)


@jax_funcify.register(Cast)
def jax_funcify_Cast(op: Cast, node: Any = None) -> JaxImpl:  # noqa: N802
    """Return the identity: the caller's conversion to the output dtype is the cast."""
    return lambda x: x


@jax_funcify.register(ScalarConstant)
def jax_funcify_ScalarConstant(op: ScalarConstant, node: Any = None) -> JaxImpl:  # noqa: N802
    """Return the inlined constant's value (a 0-d NumPy array of its dtype)."""
    value = op.value
    return lambda: value
