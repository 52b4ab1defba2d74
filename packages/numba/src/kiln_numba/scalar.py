"""Numba source for each scalar op: ``scalar_expr(op, args, out_dtype)``.

Expressions use NumPy's ufuncs on scalars where Numba supports them, and the helpers of
:mod:`kiln_numba._runtime` for SciPy's special functions. When the output is a float,
the arguments are first converted to it: NumPy computes such an op in the output's
dtype (``exp`` of int16 runs the float32 loop, ``uint8 / uint8`` the float64 one),
while Numba's scalar ufuncs may pick another loop for integer arguments. Every
expression is cast to the op's output dtype, as the VM's ``np.asarray(result, dtype)``
does. Casts that change nothing are left out (each is one more call for Numba to type
and lower): an argument whose dtype is known to be the output's, and the result of a
float64 expression whose arguments are all float64 (Numba computes every template on
float64 values in float64). A few templates depend on the dtype (``by_dtype`` of
:class:`ScalarSource`): float floor division follows NumPy's ``divmod`` (``inf // 1``
is NaN), float true division is ``/``, the sign of an unsigned integer is 0 or 1,
rounding an integer is the identity, and float32 ``polygamma`` rounds its factors to
float32 as SciPy's float32 loops do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from kiln_graph import ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, Composite, ScalarConstant
from kiln_numba._funcify import NoNumbaImplementation, literal, np_dtype, numba_funcify

#: ``args -> source`` of a scalar op.
Template = Callable[[Sequence[str]], str]
#: ``(args, out_dtype) -> source``, or None to use the op's :data:`Template`.
DtypeTemplate = Callable[[Sequence[str], str], "str | None"]


@dataclasses.dataclass(frozen=True)
class ScalarSource:
    """How a scalar op class is written in Numba source (what ``numba_funcify`` returns).

    ``template`` writes it; ``by_dtype`` (optional) writes it for some output dtypes
    instead; ``vector_math`` names the :mod:`kiln_numba._vector_math` function that
    computes it (float64) in long loops, where it vectorizes; the arguments at
    ``keep_args`` are not converted to a float output's dtype (a condition).
    """

    template: Template
    by_dtype: DtypeTemplate | None = None
    vector_math: str | None = None
    keep_args: tuple[int, ...] = ()


def register_scalar(
    op_class: type[ScalarOp],
    template: Template,
    by_dtype: DtypeTemplate | None = None,
    vector_math: str | None = None,
    keep_args: tuple[int, ...] = (),
) -> ScalarSource:
    """Register the Numba source of ``op_class`` with ``numba_funcify``; return it."""
    source = ScalarSource(template, by_dtype, vector_math, keep_args)

    def numba_funcify_scalar(op: ScalarOp, node: Any = None, ctx: Any = None) -> ScalarSource:
        return source

    numba_funcify_scalar.__name__ = f"numba_funcify_{op_class.__name__}"
    numba_funcify.register(op_class)(numba_funcify_scalar)
    return source


def scalar_source(op: ScalarOp) -> ScalarSource:
    """Return the registered :class:`ScalarSource` of ``op``'s class."""
    source = numba_funcify(op, None, None)  # type: ignore[arg-type]
    if not isinstance(source, ScalarSource):
        raise NoNumbaImplementation(f"no Numba template for the scalar op {op}")
    return source


def _ufunc(name: str) -> Template:
    return lambda a: f"np.{name}({', '.join(a)})"


def _runtime(name: str) -> Template:
    return lambda a: f"{name}({', '.join(f'np.float64({x})' for x in a)})"


def _infix(op: str) -> Template:
    return lambda a: "(" + f" {op} ".join(a) + ")"


#: The Numba source of each scalar op class (registered below, after the dtype templates).
_TEMPLATES: dict[type, Template] = {
    m.Add: _infix("+"),
    m.Sub: _infix("-"),
    m.Mul: _infix("*"),
    m.TrueDivide: _ufunc("true_divide"),
    m.FloorDivide: _ufunc("floor_divide"),
    m.Mod: _ufunc("mod"),
    m.Pow: _ufunc("power"),
    m.Maximum: _ufunc("maximum"),
    m.Minimum: _ufunc("minimum"),
    m.EQ: _infix("=="),
    m.NEQ: _infix("!="),
    m.LT: _infix("<"),
    m.LE: _infix("<="),
    m.GT: _infix(">"),
    m.GE: _infix(">="),
    m.AND: lambda a: f"(bool({a[0]}) and bool({a[1]}))",
    m.OR: lambda a: f"(bool({a[0]}) or bool({a[1]}))",
    m.NOT: lambda a: f"(not {a[0]})",
    m.IsNan: _ufunc("isnan"),
    m.IsInf: _ufunc("isinf"),
    m.Neg: lambda a: f"(-{a[0]})",
    m.Abs: _ufunc("abs"),
    m.Sign: _ufunc("sign"),
    m.Exp: _ufunc("exp"),
    m.Exp2: _ufunc("exp2"),
    m.Expm1: _ufunc("expm1"),
    m.Log: _ufunc("log"),
    m.Log2: _ufunc("log2"),
    m.Log10: _ufunc("log10"),
    m.Log1p: _ufunc("log1p"),
    m.Sqrt: _ufunc("sqrt"),
    m.Square: lambda a: f"({a[0]} * {a[0]})",
    m.Reciprocal: _ufunc("reciprocal"),
    m.Sigmoid: _runtime("sigmoid"),
    m.Softplus: _runtime("softplus"),
    m.Log1mexp: _runtime("log1mexp"),
    m.Logit: _runtime("logit"),
    m.Tanh: _ufunc("tanh"),
    m.Sinh: _ufunc("sinh"),
    m.Cosh: _ufunc("cosh"),
    m.Arcsinh: _ufunc("arcsinh"),
    m.Sin: _ufunc("sin"),
    m.Cos: _ufunc("cos"),
    m.Tan: _ufunc("tan"),
    m.Arctan: _ufunc("arctan"),
    m.Erf: lambda a: f"math.erf({a[0]})",
    m.Erfc: lambda a: f"math.erfc({a[0]})",
    m.Erfcx: _runtime("erfcx"),
    m.Erfinv: _runtime("erfinv"),
    m.Gammaln: _runtime("gammaln"),
    m.Digamma: _runtime("digamma"),
    m.Polygamma: _runtime("polygamma"),
    m.Betaln: _runtime("betaln"),
    m.Gammainc: _runtime("gammainc"),
    m.Gammaincc: _runtime("gammaincc"),
    m.Betainc: _runtime("betainc"),
    m.GammaincDa: _runtime("gammainc_da"),
    m.GammainccDa: _runtime("gammaincc_da"),
    m.BetaincDa: _runtime("betainc_da"),
    m.BetaincDb: _runtime("betainc_db"),
    m.I0e: _runtime("i0e"),
    m.I1e: _runtime("i1e"),
    m.I0: _runtime("i0"),
    m.I1: _runtime("i1"),
    m.Floor: _ufunc("floor"),
    m.Ceil: _ufunc("ceil"),
    m.Round: _runtime("round_half_to_even"),
    m.Switch: lambda a: f"({a[1]} if {a[0]} else {a[2]})",
    m.Clip: lambda a: f"np.minimum(np.maximum({a[0]}, {a[1]}), {a[2]})",
    m.Logaddexp: _ufunc("logaddexp"),
}


def _floor_divide(a: Sequence[str], dtype: str) -> str | None:
    return f"floor_divide({a[0]}, {a[1]})" if dtype.startswith("float") else None


def _true_divide(a: Sequence[str], dtype: str) -> str | None:
    # IEEE division (Numba's error_model='numpy': x / 0 is inf or nan), cheaper to
    # compile than the ufunc; the arguments have the float output's dtype.
    return f"({a[0]} / {a[1]})" if dtype.startswith("float") else None


def _sign(a: Sequence[str], dtype: str) -> str | None:
    return f"(1 if {a[0]} > 0 else 0)" if dtype.startswith("uint") or dtype == "bool" else None


def _round(a: Sequence[str], dtype: str) -> str | None:
    return a[0] if not dtype.startswith(("float", "complex")) else None


def _polygamma(a: Sequence[str], dtype: str) -> str | None:
    return f"polygamma_f32({a[0]}, {a[1]})" if dtype == "float32" else None


#: The float64 ops written with :mod:`kiln_numba._vector_math` in long loops (those
#: vectorize; a call into the C library does not). Elsewhere they stay NumPy's: the
#: inlined arithmetic costs compile time, which a short loop or a scalar never repays.
_VECTOR_MATH = {m.Exp: "exp_f64", m.Log1p: "log1p_f64"}
#: The source of a call to a :mod:`kiln_numba._vector_math` function starts with one of these.
VECTORIZABLE = tuple(f"{name}(" for name in _VECTOR_MATH.values())
_BY_DTYPE: dict[type, DtypeTemplate] = {
    m.TrueDivide: _true_divide,
    m.FloorDivide: _floor_divide,
    m.Sign: _sign,
    m.Round: _round,
    m.Polygamma: _polygamma,
}
#: The condition of Switch stays as it is (not converted to a float output's dtype).
_KEEP_ARGS = {m.Switch: (0,)}


@numba_funcify.register(Cast)
def numba_funcify_Cast(op: Cast, node: Any = None, ctx: Any = None) -> ScalarSource:  # noqa: N802
    """Return the source of the conversion to ``op.dtype``."""
    return ScalarSource(lambda a: cast_expr(a[0], op.dtype))


@numba_funcify.register(ScalarConstant)
def numba_funcify_ScalarConstant(  # noqa: N802
    op: ScalarConstant, node: Any = None, ctx: Any = None
) -> ScalarSource:
    """Return the source of the inlined constant (a literal of its dtype)."""
    return ScalarSource(lambda a: literal(op.value[()], op.dtype))


# Every scalar op of kiln_graph.scalar, registered with numba_funcify (one per class).
for _cls, _template in _TEMPLATES.items():
    register_scalar(
        _cls,
        _template,
        by_dtype=_BY_DTYPE.get(_cls),
        vector_math=_VECTOR_MATH.get(_cls),
        keep_args=_KEEP_ARGS.get(_cls, ()),
    )


def scalar_expr(
    op: ScalarOp,
    args: Sequence[str],
    out_dtype: str,
    in_dtypes: Sequence[str] | None = None,
    vector_math: bool = False,
) -> str:
    """Return the Numba expression of ``op`` applied to ``args``, as ``out_dtype``.

    ``in_dtypes``, when given, are the dtypes of ``args`` (as Numba types them): casts
    that would not change them are left out. ``vector_math``: the expression is in a
    long loop, where ops with a ``vector_math`` function are written with it.
    """
    if in_dtypes is not None and isinstance(op, Cast) and in_dtypes[0] == op.dtype:
        return args[0]
    source = scalar_source(op)
    if isinstance(op, Cast | ScalarConstant):  # already of the output's dtype
        return source.template(args)
    keep = source.keep_args
    dtypes = list(in_dtypes) if in_dtypes is not None else [None] * len(args)
    if out_dtype.startswith("float"):
        converted = []
        for i, a in enumerate(args):
            if i not in keep and dtypes[i] != out_dtype:
                a = cast_expr(a, out_dtype)
                dtypes[i] = out_dtype  # type: ignore[call-overload]
            converted.append(a)
        args = converted
    expr = source.by_dtype(args, out_dtype) if source.by_dtype is not None else None
    if vector_math and out_dtype == "float64" and source.vector_math is not None:
        expr = f"{source.vector_math}({args[0]})"
    if expr is None:
        expr = source.template(args)
    if out_dtype == "float64" and all(
        d == "float64" for i, d in enumerate(dtypes) if i not in keep
    ):
        return expr
    return cast_expr(expr, out_dtype)


def cast_expr(expr: str, dtype: str) -> str:
    """Return ``expr`` converted to ``dtype``.

    A narrow unsigned type is reached through int64, as NumPy converts: a float outside
    its range (``-3.0`` to uint8) wraps to 253 there, while LLVM's direct float-to-unsigned
    conversion of such a value is undefined (0 on some CPUs, 253 on others).
    """
    if dtype == "bool":
        return f"bool({expr})"
    if dtype in ("uint8", "uint16", "uint32"):
        return f"{np_dtype(dtype)}(np.int64({expr}))"
    return f"{np_dtype(dtype)}({expr})"


def composite_statements(
    op: Composite,
    args: Sequence[str],
    in_dtypes: Sequence[str],
    fresh: Callable[[str], str],
    vector_math: bool = False,
) -> tuple[list[str], list[str]]:
    """Return the statements of a Composite's program and the names of its outputs.

    ``vector_math``: as :func:`scalar_expr`'s (the program runs in a long loop).
    """
    dtypes = op.slot_dtypes(*in_dtypes)
    slots = list(args)
    lines = []
    for j, (step, step_args) in enumerate(op.steps):
        slot = op.nin + j
        step_in = [slots[a] for a in step_args]
        if isinstance(step, Composite):  # a nested program: inline it
            inner, results = composite_statements(
                step, step_in, [dtypes[a] for a in step_args], fresh, vector_math
            )
            lines.extend(inner)
            slots.append(results[0])
            continue
        name = fresh("s")
        in_dt = [dtypes[a] for a in step_args]
        expr = scalar_expr(step, step_in, dtypes[slot], in_dt, vector_math)
        lines.append(f"{name} = {expr}")
        slots.append(name)
    return lines, [slots[o] for o in op.outputs]
