"""C source for each scalar op: ``scalar_expr(op, args, out_dtype, in_dtypes)``.

Templates follow NumPy's loops: an op with a float output computes in that dtype (its
arguments are converted first; float32 uses the ``f`` functions of C's math library);
integer ops wrap (the file is compiled with ``-fwrapv``), and division and modulo by
zero give 0 as NumPy's integer loops do; comparisons convert both sides to their
common dtype. Every expression is converted to the op's output dtype. Ops that C's
math library lacks (SciPy's special functions beyond ``erf``, ``erfc`` and ``lgamma``)
call kiln's own: ``digamma`` in ``kiln_runtime.h``, the others in ``kiln_special.h``
(pasted into a file that calls one of them: :func:`special_header`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from kiln_c._funcify import CTYPE, NoCImplementation, ScalarTemplate, c_funcify, literal
from kiln_graph import Apply, ScalarOp
from kiln_graph import scalar as m
from kiln_graph.scalar import Cast, Composite, ScalarConstant, upcast

Template = Callable[[Sequence[str], str], "str | None"]


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def _math(name: str) -> Template:
    """Call a function of C's math library (``name`` for float64, ``namef`` for float32)."""

    def template(a: Sequence[str], dtype: str) -> str | None:
        if not _is_float(dtype):
            return None
        fn = name + ("f" if dtype == "float32" else "")
        return f"{fn}({', '.join(a)})"

    return template


def _runtime(name: str) -> Template:
    """Call a helper of ``kiln_runtime.h`` (``kiln_name`` / ``kiln_namef``)."""
    return _math(f"kiln_{name}")


def _infix(op: str) -> Template:
    return lambda a, dtype: "(" + f" {op} ".join(a) + ")"


def _divide(a: Sequence[str], dtype: str) -> str | None:
    return f"({a[0]} / {a[1]})" if _is_float(dtype) else None


def _floor_divide(a: Sequence[str], dtype: str) -> str:
    if _is_float(dtype):
        return f"kiln_floordiv({a[0]}, {a[1]})"
    if dtype.startswith("uint"):
        return f"kiln_floordiv_u({a[0]}, {a[1]})"
    if dtype == "bool":
        return f"({a[0]} && {a[1]})"
    return f"kiln_floordiv_i({a[0]}, {a[1]})"


def _mod(a: Sequence[str], dtype: str) -> str:
    if _is_float(dtype):
        return f"kiln_fmod_py({a[0]}, {a[1]})"
    if dtype.startswith("uint"):
        return f"kiln_mod_u({a[0]}, {a[1]})"
    if dtype == "bool":
        return "0"
    return f"kiln_mod_i({a[0]}, {a[1]})"


def _pow(a: Sequence[str], dtype: str) -> str:
    if _is_float(dtype):
        return f"pow{'f' if dtype == 'float32' else ''}({a[0]}, {a[1]})"
    if dtype == "bool":
        return f"({a[0]} || !{a[1]})"
    return f"kiln_pow_i({a[0]}, {a[1]})"


def _extremum(which: str) -> Callable[[Sequence[str], str], str]:
    def template(a: Sequence[str], dtype: str) -> str:
        if _is_float(dtype):
            fn = f"kiln_{which}" + ("f" if dtype == "float32" else "")
            return f"{fn}({a[0]}, {a[1]})"
        cmp = ">=" if which == "maximum" else "<="
        return f"({a[0]} {cmp} {a[1]} ? {a[0]} : {a[1]})"

    return template


def _abs(a: Sequence[str], dtype: str) -> str:
    if _is_float(dtype):
        return f"fabs{'f' if dtype == 'float32' else ''}({a[0]})"
    if dtype.startswith("uint") or dtype == "bool":
        return a[0]
    return f"({a[0]} < 0 ? -{a[0]} : {a[0]})"


def _sign(a: Sequence[str], dtype: str) -> str:
    if _is_float(dtype):
        return f"kiln_sign({a[0]})"
    if dtype.startswith("uint") or dtype == "bool":
        return f"({a[0]} > 0)"
    return f"(({a[0]} > 0) - ({a[0]} < 0))"


def _reciprocal(a: Sequence[str], dtype: str) -> str:
    one = "1.0f" if dtype == "float32" else "1.0"
    if _is_float(dtype):
        return f"({one} / {a[0]})"
    return f"({a[0]} == 0 ? 0 : 1 / {a[0]})"


def _round(a: Sequence[str], dtype: str) -> str:
    return _math("rint")(a, dtype) or a[0]


def _rounding(name: str) -> Template:
    return lambda a, dtype: _math(name)(a, dtype) or a[0]


def _test(name: str) -> Template:
    return lambda a, dtype: f"{name}({a[0]})" if _is_float(dtype) else "0"


def _square(a: Sequence[str], dtype: str) -> str:
    return f"({a[0]} * {a[0]})"


def _neg(a: Sequence[str], dtype: str) -> str:
    return f"(-{a[0]})"


def _clip(a: Sequence[str], dtype: str) -> str:
    hi = _extremum("maximum")([a[0], a[1]], dtype)
    return _extremum("minimum")([hi, a[2]], dtype)


#: The C source of each scalar op class.
_TEMPLATES: dict[type, Template] = {
    m.Add: _infix("+"),
    m.Sub: _infix("-"),
    m.Mul: _infix("*"),
    m.TrueDivide: _divide,
    m.FloorDivide: _floor_divide,
    m.Mod: _mod,
    m.Pow: _pow,
    m.Maximum: _extremum("maximum"),
    m.Minimum: _extremum("minimum"),
    m.Neg: _neg,
    m.Abs: _abs,
    m.Sign: _sign,
    m.Exp: _math("exp"),
    m.Exp2: _math("exp2"),
    m.Expm1: _math("expm1"),
    m.Log: _math("log"),
    m.Log2: _math("log2"),
    m.Log10: _math("log10"),
    m.Log1p: _math("log1p"),
    m.Sqrt: _math("sqrt"),
    m.Square: _square,
    m.Reciprocal: _reciprocal,
    m.Sigmoid: _runtime("sigmoid"),
    m.Softplus: lambda a, dtype: _runtime("logaddexp")(["0", a[0]], dtype),
    m.Log1mexp: _runtime("log1mexp"),
    m.Logit: _runtime("logit"),
    m.Tanh: _math("tanh"),
    m.Sinh: _math("sinh"),
    m.Cosh: _math("cosh"),
    m.Arcsinh: _math("asinh"),
    m.Sin: _math("sin"),
    m.Cos: _math("cos"),
    m.Tan: _math("tan"),
    m.Arctan: _math("atan"),
    m.Erf: _math("erf"),
    m.Erfc: _math("erfc"),
    m.Gammaln: _math("lgamma"),
    m.Digamma: _runtime("digamma"),
    m.Polygamma: _runtime("polygamma"),
    m.Betaln: _runtime("betaln"),
    m.Erfcx: _runtime("erfcx"),
    m.Erfinv: _runtime("erfinv"),
    m.Gammainc: _runtime("gammainc"),
    m.Gammaincc: _runtime("gammaincc"),
    m.GammaincDa: _runtime("gammainc_da"),
    m.GammainccDa: _runtime("gammaincc_da"),
    m.Betainc: _runtime("betainc"),
    m.BetaincDa: _runtime("betainc_da"),
    m.BetaincDb: _runtime("betainc_db"),
    m.I0: _runtime("i0"),
    m.I0e: _runtime("i0e"),
    m.I1: _runtime("i1"),
    m.I1e: _runtime("i1e"),
    m.Floor: _rounding("floor"),
    m.Ceil: _rounding("ceil"),
    m.Round: _round,
    m.Logaddexp: _runtime("logaddexp"),
    m.Clip: _clip,
}
#: Comparisons, logical ops and tests: a bool of arguments in their common dtype.
_COMPARISONS: dict[type, Template] = {
    m.EQ: _infix("=="),
    m.NEQ: _infix("!="),
    m.LT: _infix("<"),
    m.LE: _infix("<="),
    m.GT: _infix(">"),
    m.GE: _infix(">="),
    m.AND: lambda a, dtype: f"({a[0]} && {a[1]})",
    m.OR: lambda a, dtype: f"({a[0]} || {a[1]})",
    m.NOT: lambda a, dtype: f"(!{a[0]})",
    m.IsNan: _test("isnan"),
    m.IsInf: _test("isinf"),
}


def register_scalar(
    op_class: type[ScalarOp],
    template: Template,
    keep_args: tuple[int, ...] = (),
    common_args: bool = False,
) -> ScalarTemplate:
    """Register the C template of ``op_class`` with ``c_funcify``; return it."""
    source = ScalarTemplate(template, keep_args, common_args)

    def c_funcify_scalar(op: ScalarOp, node: object = None, io: object = None) -> ScalarTemplate:
        return source

    c_funcify_scalar.__name__ = f"c_funcify_{op_class.__name__}"
    c_funcify.register(op_class)(c_funcify_scalar)
    return source


for _cls, _template in _TEMPLATES.items():
    register_scalar(_cls, _template)
for _cls, _template in _COMPARISONS.items():
    register_scalar(_cls, _template, common_args=True)
register_scalar(m.Switch, lambda a, dtype: f"({a[0]} ? {a[1]} : {a[2]})", keep_args=(0,))


@c_funcify.register(Cast)
def c_funcify_Cast(op: Cast, node: object = None, io: object = None) -> ScalarTemplate:  # noqa: N802
    """Return the conversion to ``op.dtype`` (the expression is converted by the caller)."""
    return ScalarTemplate(lambda a, dtype: a[0])


@c_funcify.register(ScalarConstant)
def c_funcify_ScalarConstant(  # noqa: N802
    op: ScalarConstant, node: object = None, io: object = None
) -> ScalarTemplate:
    """Return the inlined constant (a literal of its dtype)."""
    return ScalarTemplate(lambda a, dtype: literal(op.value[()], op.dtype))


def scalar_template(op: ScalarOp) -> ScalarTemplate:
    """Return the registered :class:`ScalarTemplate` of ``op``'s class."""
    source = c_funcify(op)
    if not isinstance(source, ScalarTemplate):
        raise NoCImplementation(f"no C template for the scalar op {op}")
    return source


def cast_expr(expr: str, from_dtype: str, dtype: str, vector_math: bool = False) -> str:
    """Return ``expr`` (of ``from_dtype``) converted to ``dtype`` as NumPy converts.

    To bool: nonzero. A float to an unsigned integer goes through int64 (NumPy wraps a
    negative value there; C's direct conversion of one is undefined). ``vector_math``
    (a long loop): int64 to float64 by ``kiln_i64_to_f64`` (the same bits; SIMD code
    without AVX-512, which alone converts int64 lanes).
    """
    if from_dtype == dtype:
        return expr
    if vector_math and from_dtype == "int64" and dtype == "float64":
        return f"kiln_i64_to_f64({expr})"
    if dtype == "bool":
        return f"((uint8_t)(({expr}) != 0))"
    if from_dtype.startswith("float") and dtype.startswith("uint") and dtype != "uint64":
        return f"(({CTYPE[dtype]})(int64_t)({expr}))"
    return f"(({CTYPE[dtype]})({expr}))"


#: Loops at least this long (or of lengths known only at run time) compute float64 ``exp``
#: and ``log1p`` with ``kiln_runtime.h``'s vectorizable functions (kiln_numba's rule).
LONG_LOOP = 128
#: The float64 ops written with a vectorizable function of ``kiln_runtime.h`` in long loops.
_VECTOR_MATH = {m.Exp: "kiln_exp_v", m.Log1p: "kiln_log1p_v"}
_VECTOR_CALL = re.compile(r"\b(" + "|".join(_VECTOR_MATH.values()) + r")\(")


def is_long_loop(node: Apply) -> bool:
    """Whether the loop over ``node``'s broadcast inputs runs :data:`LONG_LOOP` times or more.

    A dimension whose length no input knows statically counts as long.
    """
    if not node.inputs:
        return False
    first = node.inputs[0].type
    total = 1
    for d in range(first.ndim):  # type: ignore[attr-defined]
        lengths = [
            v.type.shape[d]  # type: ignore[attr-defined]
            for v in node.inputs
            if not v.type.broadcastable[d]  # type: ignore[attr-defined]
        ]
        if lengths and all(n is None for n in lengths):
            return True
        total *= next((n for n in lengths if n is not None), 1)
    return total >= LONG_LOOP


def calls_vector_math(lines: Sequence[str]) -> bool:
    """Whether C statements ``lines`` call a vectorizable function (``kiln_exp_v``...)."""
    return any(_VECTOR_CALL.search(line) for line in lines)


#: The functions a loop may call and still become SIMD code (gcc): arithmetic, selects
#: and bit casts inlined, or single instructions.
_SIMD_CALLS = frozenset(
    {"kiln_exp_v", "kiln_log1p_v", "kiln_i64_to_f64", "kiln_maximum", "kiln_minimum", "fabs"}
    | {"sqrt", "copysign"}
)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
#: Each vectorizable function's scalar equivalent (C's, or a plain conversion).
_SCALAR_OF = {"kiln_exp_v(": "exp(", "kiln_log1p_v(": "log1p(", "kiln_i64_to_f64(": "(double)("}
_SCALAR_CALL = re.compile("|".join(re.escape(name) for name in _SCALAR_OF))


def simd_or_scalar(lines: list[str]) -> list[str]:
    """Return a long loop's statements ``lines``, scalar math where they cannot be SIMD.

    ``kiln_exp_v`` and friends pay only in a loop that vectorizes: one element at a
    time, they take about twice C's ``exp``. A loop that calls another function (C's
    ``tanh``, a helper with branches) does not vectorize, so its vectorizable calls
    become C's (``exp``, ``log1p``, a plain conversion); so do conversions in a loop
    without ``exp`` or ``log1p``.
    """
    calls = [name for line in lines for name in _CALL.findall(line)]
    if calls_vector_math(lines) and all(name in _SIMD_CALLS for name in calls):
        return lines
    return [scalar_math(line) for line in lines]


def scalar_math(line: str) -> str:
    """Return the C statement ``line`` with C's functions for the vectorizable ones."""
    return _SCALAR_CALL.sub(lambda m: _SCALAR_OF[m.group(0)], line)


def scalar_expr(
    op: ScalarOp,
    args: Sequence[str],
    out_dtype: str,
    in_dtypes: Sequence[str],
    vector_math: bool = False,
) -> str:
    """Return the C expression of ``op`` on ``args`` (of ``in_dtypes``), as ``out_dtype``.

    ``vector_math``: the expression is in a long loop (:data:`LONG_LOOP`), where float64
    ``exp`` and ``log1p`` call ``kiln_exp_v`` and ``kiln_log1p_v`` (which vectorize).
    """
    source = scalar_template(op)
    if isinstance(op, Cast):
        return cast_expr(args[0], in_dtypes[0], out_dtype, vector_math)
    if isinstance(op, ScalarConstant):
        return source.template(args, out_dtype) or ""
    work = out_dtype
    if source.common_args:
        work = upcast(*in_dtypes) if in_dtypes else out_dtype
        if op.__class__ in (m.AND, m.OR, m.NOT):
            work = "bool"
    converted = [
        a if i in source.keep_args else cast_expr(a, d, work, vector_math)
        for i, (a, d) in enumerate(zip(args, in_dtypes, strict=True))
    ]
    expr = source.template(converted, work)
    vector = _VECTOR_MATH.get(op.__class__)
    if vector_math and vector is not None and work == "float64":
        expr = f"{vector}({converted[0]})"
    if expr is None:
        raise NoCImplementation(f"no C template for {op} on {work}")
    if out_dtype == "bool":  # C computes bools as ints: 1 + 1 is 2
        return f"((uint8_t)(({expr}) != 0))"
    return cast_expr(expr, work, out_dtype, vector_math)


def composite_statements(
    op: Composite,
    args: Sequence[str],
    in_dtypes: Sequence[str],
    fresh: Callable[[], str],
    vector_math: bool = False,
) -> tuple[list[str], list[str]]:
    """Return the C statements of a Composite's program and the names of its outputs.

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
        name = fresh()
        expr = scalar_expr(step, step_in, dtypes[slot], [dtypes[a] for a in step_args], vector_math)
        lines.append(f"const {CTYPE[dtypes[slot]]} {name} = {expr};")
        slots.append(name)
    return lines, [slots[o] for o in op.outputs]


SPECIAL = Path(__file__).with_name("kiln_special.h")
#: The functions of ``kiln_special.h`` that templates call.
_SPECIAL_CALLS = re.compile(
    r"\bkiln_(polygamma|betaln|erfcx|erfinv|gammainc|gammaincc|gammainc_da|gammaincc_da|"
    r"betainc|betainc_da|betainc_db|i0|i0e|i1|i1e)f?\("
)


@functools.cache
def _special_source() -> str:
    return SPECIAL.read_text()


def special_header(code: str) -> str:
    """Return ``kiln_special.h`` when ``code`` calls one of its functions, else ``""``."""
    return _special_source() if _SPECIAL_CALLS.search(code) else ""
