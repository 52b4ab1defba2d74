"""Torch functions of kiln's scalar ops (``kiln_graph._math``), registered with ``torch_funcify``.

Each takes tensors already cast to the dtype the op computes in (see
:func:`kiln_torch.elemwise.scalar_applier`) and returns a tensor; the caller casts the
result to the op's output dtype, as the VM's ``np.asarray(result, dtype)`` does.

Torch has no regularized incomplete beta function and no derivatives of the incomplete
gamma and beta functions in their parameters: those ops (:data:`HOST_OPS`) compute with
kiln's NumPy implementation on the host (a copy to the CPU and back), with one
:class:`HostComputationWarning` per op when a graph using them is linked.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.special as ts

from kiln_graph import ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, ScalarConstant
from kiln_torch._funcify import TorchImpl, torch_funcify


class HostComputationWarning(UserWarning):
    """An op computes on the host in NumPy: torch has no function for it (slower)."""


def _log1mexp(x: Any) -> Any:
    return m.log1mexp_formula(x, torch)


def _fold(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda *xs: functools.reduce(op, xs)


def _sign(x: Any) -> Any:
    return torch.where(torch.isnan(x), x, torch.sign(x)) if x.is_floating_point() else x.sign()


def _softplus(x: Any) -> Any:
    return torch.logaddexp(torch.zeros((), dtype=x.dtype, device=x.device), x)


def _betaln(a: Any, b: Any) -> Any:
    return ts.gammaln(a) + ts.gammaln(b) - ts.gammaln(a + b)


def _polygamma(n: Any, x: Any) -> Any:
    """``polygamma(n, x)``: torch takes an int order, so one call per distinct order."""
    n, x = torch.broadcast_tensors(n, x)
    orders = torch.unique(n).tolist()
    if len(orders) == 1:
        return ts.polygamma(int(orders[0]), x)
    out = torch.empty_like(x)
    for k in orders:
        where = n == k
        out[where] = ts.polygamma(int(k), x[where])
    return out


#: The torch function of each scalar op class (registered with ``torch_funcify`` below).
_FUNCTIONS: dict[type, Callable[..., Any]] = {
    m.Add: _fold(operator.add),
    m.Sub: torch.sub,
    m.Mul: _fold(operator.mul),
    m.TrueDivide: torch.true_divide,
    m.FloorDivide: torch.floor_divide,
    m.Mod: torch.remainder,
    m.Pow: torch.pow,
    m.Maximum: torch.maximum,
    m.Minimum: torch.minimum,
    m.EQ: torch.eq,
    m.NEQ: torch.ne,
    m.LT: torch.lt,
    m.LE: torch.le,
    m.GT: torch.gt,
    m.GE: torch.ge,
    m.AND: torch.logical_and,
    m.OR: torch.logical_or,
    m.NOT: torch.logical_not,
    m.IsNan: torch.isnan,
    m.IsInf: torch.isinf,
    m.Neg: torch.neg,
    m.Abs: torch.abs,
    m.Sign: _sign,
    m.Exp: torch.exp,
    m.Exp2: torch.exp2,
    m.Expm1: torch.expm1,
    m.Log: torch.log,
    m.Log2: torch.log2,
    m.Log10: torch.log10,
    m.Log1p: torch.log1p,
    m.Sqrt: torch.sqrt,
    m.Square: torch.square,
    m.Reciprocal: torch.reciprocal,
    m.Sigmoid: ts.expit,
    m.Softplus: _softplus,
    m.Logaddexp: torch.logaddexp,
    m.Log1mexp: _log1mexp,
    m.Logit: ts.logit,
    m.Tanh: torch.tanh,
    m.Sinh: torch.sinh,
    m.Cosh: torch.cosh,
    m.Arcsinh: torch.asinh,
    m.Sin: torch.sin,
    m.Cos: torch.cos,
    m.Tan: torch.tan,
    m.Arctan: torch.atan,
    m.Erf: ts.erf,
    m.Erfc: ts.erfc,
    m.Erfcx: ts.erfcx,
    m.Erfinv: ts.erfinv,
    m.Gammaln: ts.gammaln,
    m.Digamma: ts.digamma,
    m.Polygamma: _polygamma,
    m.Betaln: _betaln,
    m.Gammainc: ts.gammainc,
    m.Gammaincc: ts.gammaincc,
    m.I0e: ts.i0e,
    m.I1e: ts.i1e,
    m.I0: ts.i0,
    m.I1: ts.i1,
    m.Floor: torch.floor,
    m.Ceil: torch.ceil,
    m.Round: torch.round,
    m.Switch: lambda c, a, b: torch.where(c.bool(), a, b),
    m.Clip: torch.clamp,
}

#: Scalar ops with no torch function: computed by kiln's NumPy implementation on the host.
HOST_OPS: tuple[type, ...] = (m.Betainc, m.GammaincDa, m.GammainccDa, m.BetaincDa, m.BetaincDb)
_warned: set[type] = set()


def register_scalar(cls: type, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as the torch function of the scalar ops of ``cls``."""

    def torch_funcify_scalar(op: ScalarOp, node: Any = None) -> TorchImpl:
        return fn

    torch_funcify_scalar.__name__ = f"torch_funcify_{cls.__name__}"
    torch_funcify.register(cls)(torch_funcify_scalar)


for _cls, _fn in _FUNCTIONS.items():
    register_scalar(_cls, _fn)


def _host_funcify(op: ScalarOp, node: Any = None) -> TorchImpl:
    """Compute ``op`` with its NumPy implementation on the host (one warning per op)."""
    if type(op) not in _warned:
        _warned.add(type(op))
        warnings.warn(
            f"kiln_torch: torch has no function for {op} ({type(op).__name__}); it is "
            "computed by kiln's NumPy implementation on the host (a copy to the CPU and "
            "back at each call, and a graph break under torch.compile)",
            HostComputationWarning,
            stacklevel=2,
        )

    def host(*args: Any) -> Any:
        device = args[0].device
        arrays = [a.detach().cpu().numpy() for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(op.impl(*arrays))
        return torch.from_numpy(np.array(out)).to(device)

    return host


for _cls in HOST_OPS:
    torch_funcify.register(_cls)(_host_funcify)


@torch_funcify.register(Cast)
def torch_funcify_Cast(op: Cast, node: Any = None) -> TorchImpl:  # noqa: N802
    """Return the identity: the caller's conversion to the output dtype is the cast."""
    return lambda x: x


@torch_funcify.register(ScalarConstant)
def torch_funcify_ScalarConstant(op: ScalarConstant, node: Any = None) -> TorchImpl:  # noqa: N802
    """Return the inlined constant's value (a 0-d NumPy array of its dtype)."""
    value = op.value
    return lambda: value
