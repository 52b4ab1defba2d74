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
float64 values in float64). A few templates depend on the dtype
(:data:`DTYPE_TEMPLATES`): float floor division follows NumPy's ``divmod`` (``inf // 1``
is NaN), float true division is ``/``, the sign of an unsigned integer is 0 or 1,
rounding an integer is the identity, and float32 ``polygamma`` rounds its factors to
float32 as SciPy's float32 loops do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln_graph import ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, Composite, ScalarConstant
from kiln_numba._funcify import NoNumbaImplementation, literal, np_dtype

Template = Callable[[Sequence[str]], str]


def _ufunc(name: str) -> Template:
    return lambda a: f"np.{name}({', '.join(a)})"


def _runtime(name: str) -> Template:
    return lambda a: f"{name}({', '.join(f'np.float64({x})' for x in a)})"


def _infix(op: str) -> Template:
    return lambda a: "(" + f" {op} ".join(a) + ")"


TEMPLATES: dict[type, Template] = {
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
    m.Floor: _ufunc("floor"),
    m.Ceil: _ufunc("ceil"),
    m.Round: _runtime("round_half_to_even"),
    m.Switch: lambda a: f"({a[1]} if {a[0]} else {a[2]})",
    m.Clip: lambda a: f"np.minimum(np.maximum({a[0]}, {a[1]}), {a[2]})",
    m.Logaddexp: _ufunc("logaddexp"),
}


#: Templates that depend on the output dtype: ``(args, out_dtype) -> source``, or None
#: to use :data:`TEMPLATES`.
DtypeTemplate = Callable[[Sequence[str], str], "str | None"]


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
VECTOR_MATH: dict[type, str] = {m.Exp: "exp_f64", m.Log1p: "log1p_f64"}
VECTORIZABLE = tuple(f"{name}(" for name in VECTOR_MATH.values())

DTYPE_TEMPLATES: dict[type, DtypeTemplate] = {
    m.TrueDivide: _true_divide,
    m.FloorDivide: _floor_divide,
    m.Sign: _sign,
    m.Round: _round,
    m.Polygamma: _polygamma,
}

#: Ops whose arguments are not all converted to a float output's dtype (the condition).
_KEEP_ARGS: dict[type, tuple[int, ...]] = {m.Switch: (0,)}


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
    long loop, where :data:`VECTOR_MATH`'s ops are written with their vectorizable
    versions.
    """
    if in_dtypes is not None and isinstance(op, Cast) and in_dtypes[0] == op.dtype:
        return args[0]
    if isinstance(op, Cast):
        return cast_expr(args[0], op.dtype)
    if isinstance(op, ScalarConstant):
        return literal(op.value[()], op.dtype)
    kind = type(op)
    dtypes = list(in_dtypes) if in_dtypes is not None else [None] * len(args)
    if out_dtype.startswith("float"):
        keep = _KEEP_ARGS.get(kind, ())
        converted = []
        for i, a in enumerate(args):
            if i not in keep and dtypes[i] != out_dtype:
                a = cast_expr(a, out_dtype)
                dtypes[i] = out_dtype  # type: ignore[call-overload]
            converted.append(a)
        args = converted
    special = DTYPE_TEMPLATES.get(kind)
    expr = special(args, out_dtype) if special is not None else None
    if vector_math and out_dtype == "float64" and kind in VECTOR_MATH:
        expr = f"{VECTOR_MATH[kind]}({args[0]})"
    if expr is None:
        template = TEMPLATES.get(kind)
        if template is None:
            raise NoNumbaImplementation(f"no Numba template for the scalar op {op}")
        expr = template(args)
    keep = _KEEP_ARGS.get(kind, ())
    if out_dtype == "float64" and all(
        d == "float64" for i, d in enumerate(dtypes) if i not in keep
    ):
        return expr
    return cast_expr(expr, out_dtype)


def cast_expr(expr: str, dtype: str) -> str:
    """Return ``expr`` converted to ``dtype``."""
    if dtype == "bool":
        return f"bool({expr})"
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


def has_scalar_template(op_class: type) -> bool:
    """Whether scalar ops of ``op_class`` compile to Numba source.

    True for the ops of :data:`TEMPLATES` and :data:`DTYPE_TEMPLATES`, casts, scalar
    constants, and Composites (whose programs :func:`composite_statements` writes).
    """
    if issubclass(op_class, Cast | ScalarConstant | Composite):
        return True
    return op_class in TEMPLATES or op_class in DTYPE_TEMPLATES
