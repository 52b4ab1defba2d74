"""C code of random variables: NumPy's own distributions, drawing the VM's stream.

A random variable whose VM draw (``rng_fn``) is one vectorized method of NumPy's
``Generator`` is written in C as a loop over the draw's batch (C order, the order in
which NumPy's method iterates its broadcast parameters) calling the same function of
NumPy's ``libnpyrandom`` (``numpy/random/lib/libnpyrandom.a``, linked into the graph's
library) on the generator's ``bitgen_t``, then the arithmetic ``rng_fn`` does after it
(``mu + sigma * t``, ``abs``): for a seed, the draws are the VM's to the bit and the
generator ends in the VM's state.

The generator is a Python object. The node's code asks Python once per call, through
the context's callback, for the generator it draws from and the address of its
``bitgen_t`` (NumPy's public ``bit_generator.ctypes.bit_generator``):
:class:`GeneratorPointer` returns the input generator itself when the draw is in place,
else a copy of it (what ``RandomVariable.perform`` draws from). The parameter checks
come first, as in ``perform``: the batch shape, the declared constraints, then the
checks NumPy's method adds (Poisson's largest mean, uniform's finite range).

Random variables whose VM draw is a Python loop over ``core_fn`` (the truncated
normal, von Mises and hypergeometric draws; the categorical and multinomial over one
probability vector, :data:`VECTOR_DRAWS`) are that ``core_fn`` written in C
(``kiln_npyrandom.h``), making the same calls of the generator in the same order.
Dirichlet (``np.log`` and ``np.exp``, NumPy's own SIMD loops, not libm's) and MvNormal
(``np.linalg.cholesky``) keep running through ``perform`` (``kiln_c.THROUGH_PERFORM``),
where they are the VM's to the bit.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import numpy as np

from kiln_c._funcify import (
    CTYPE,
    DTYPE_CODE,
    OBJECT_OPS,
    CCode,
    NoCImplementation,
    NodeIO,
    c_funcify,
    dtype_of,
)
from kiln_graph import Apply, KilnTypeError, Op, RandomGeneratorType, TensorType, Variable
from kiln_random import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    CauchyRV,
    ExponentialRV,
    GammaRV,
    GeometricRV,
    HalfCauchyRV,
    HalfNormalRV,
    HalfStudentTRV,
    HyperGeometricRV,
    InverseGammaRV,
    LaplaceRV,
    LogisticRV,
    LogNormalRV,
    MultinomialRV,
    NegativeBinomialRV,
    NormalRV,
    PoissonRV,
    RandomVariable,
    StudentTRV,
    TruncatedNormalRV,
    UniformRV,
    VonMisesRV,
    WeibullRV,
    copy_generator,
)

HEADER = Path(__file__).with_name("kiln_npyrandom.h")
#: NumPy's largest Poisson mean (``POISSON_LAM_MAX`` of ``numpy.random``), as NumPy computes it.
POISSON_LAM_MAX = float(np.iinfo("int64").max - np.sqrt(np.iinfo("int64").max) * 10)

#: Each random variable drawn in C: the C expression of one draw from ``bg`` (the
#: ``bitgen_t *``) with the parameters named in braces, as its ``rng_fn`` computes it.
DRAWS: dict[type[RandomVariable], str] = {
    NormalRV: "random_normal(bg, {mu}, {sigma})",
    HalfNormalRV: "fabs(random_normal(bg, 0.0, {sigma}))",
    LogNormalRV: "random_lognormal(bg, {mu}, {sigma})",
    UniformRV: "random_uniform(bg, {lower}, {upper} - {lower})",
    ExponentialRV: "random_exponential(bg, {scale})",
    GammaRV: "random_gamma(bg, {shape}, {scale})",
    BetaRV: "random_beta(bg, {alpha}, {beta})",
    InverseGammaRV: "1.0 / random_gamma(bg, {alpha}, 1.0 / {beta})",
    StudentTRV: "{mu} + {sigma} * random_standard_t(bg, {nu})",
    HalfStudentTRV: "fabs({sigma} * random_standard_t(bg, {nu}))",
    CauchyRV: "{alpha} + {beta} * random_standard_cauchy(bg)",
    HalfCauchyRV: "fabs({beta} * random_standard_cauchy(bg))",
    LaplaceRV: "random_laplace(bg, {mu}, {b})",
    LogisticRV: "random_logistic(bg, {mu}, {s})",
    WeibullRV: "{beta} * random_weibull(bg, {alpha})",
    BernoulliRV: "random_binomial(bg, {p}, 1, &binomial)",
    BinomialRV: "random_binomial(bg, {p}, {n}, &binomial)",
    PoissonRV: "random_poisson(bg, {mu})",
    NegativeBinomialRV: "random_negative_binomial(bg, {n}, {p})",
    GeometricRV: "random_geometric(bg, {p})",
    # core_fn draws, written in C in kiln_npyrandom.h
    TruncatedNormalRV: "kiln_truncated_normal(bg, {mu}, {sigma}, {lower}, {upper})",
    VonMisesRV: "kiln_vonmises(bg, {mu}, {kappa})",
    HyperGeometricRV: "kiln_hypergeometric(bg, {N}, {k}, {n})",
}

#: Random variables with one core-vector parameter ``p`` drawn in C: the C call that
#: writes one draw at ``o + k`` (``{p}`` the vector's first entry, ``{p_stride}`` its
#: stride in bytes, ``{K}`` its length; 0 or an error status), the entries one draw
#: writes (``"K"``: the vector's length, the draw's core dimension), and the messages
#: of the statuses 1, 2, 3 (those ``core_fn`` raises).
VECTOR_DRAWS: dict[type[RandomVariable], tuple[str, str, tuple[str, ...]]] = {
    CategoricalRV: (
        "kiln_categorical(bg, {p}, {p_stride}, {K}, o + k)",
        "1",
        ("categorical: p must be >= 0", "categorical: p must have a positive sum"),
    ),
    MultinomialRV: (
        "kiln_multinomial(bg, {n}, {p}, {p_stride}, {K}, o + k, &binomial)",
        "K",
        (
            "multinomial: p must be >= 0",
            "multinomial: p must have a positive sum",
            "multinomial: p has no category",
        ),
    ),
}

#: The checks NumPy's method makes after kiln's constraints: ``(C condition true for
#: valid values, NumPy's message)``.
NUMPY_CHECKS: dict[type[RandomVariable], tuple[tuple[str, str], ...]] = {
    UniformRV: (("isfinite({upper} - {lower})", "Range exceeds valid bounds"),),
    PoissonRV: ((f"!({{mu}} > {POISSON_LAM_MAX!r})", "lam value too large"),),
    NegativeBinomialRV: (
        (
            f"!((1 - {{p}}) / {{p}} * ({{n}} + 10 * sqrt({{n}})) > {POISSON_LAM_MAX!r})",
            "n too large or p too small, see Generator.negative_binomial Notes",
        ),
    ),
}


class GeneratorPointer(Op):
    """``rng -> (generator, address)``: the generator a draw uses and its ``bitgen_t``.

    The generator is ``rng`` itself when ``inplace``, else a copy of it in the same
    state (as ``RandomVariable.perform`` draws); the address is that of its bit
    generator's ``bitgen_t`` (``bit_generator.ctypes.bit_generator``), as a uint64
    scalar. Run by the C code of a draw through the context's callback; never in a
    graph.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool) -> None:
        self.inplace = bool(inplace)

    def make_node(self, rng: Any) -> Apply:
        """Return the node taking the generator variable ``rng``."""
        if not isinstance(rng, Variable) or not isinstance(rng.type, RandomGeneratorType):
            raise KilnTypeError(f"GeneratorPointer: expected a generator variable, got {rng!r}")
        return Apply.create(self, [rng], [RandomGeneratorType(), TensorType("uint64", ())])

    def perform(self, node: Apply, inputs: Any, outputs: list[Any]) -> None:
        """Set the generator to draw from and its ``bitgen_t`` address."""
        (rng,) = inputs
        generator = rng if self.inplace else copy_generator(rng)
        outputs[0] = generator
        outputs[1] = np.uint64(generator.bit_generator.ctypes.bit_generator.value)


@functools.cache
def npyrandom_archive() -> Path | None:
    """Return the path of NumPy's ``libnpyrandom`` static archive, or None if it has none."""
    folder = Path(np.__file__).parent / "random" / "lib"
    for name in ("libnpyrandom.a", "npyrandom.lib"):
        if (folder / name).is_file():
            return folder / name
    return None


def link_archives(source: str) -> list[str]:
    """Return the static archives the library of ``source`` links (libnpyrandom if it draws)."""
    archive = npyrandom_archive()
    return [str(archive)] if archive is not None and "bitgen_t *bg" in source else []


def random_header(functions: str) -> str:
    """Return the declarations of libnpyrandom when ``functions`` draw, else ``""``.

    The header names NumPy's version: it is part of the source, hence of the library's
    cache key (the archive is linked into the library).
    """
    if "bitgen_t *bg" not in functions:
        return ""
    return f"/* libnpyrandom of NumPy {np.__version__} */\n{HEADER.read_text()}"


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


_ALLOWED: tuple[type[ast.AST], ...] = (
    *(ast.Expression, ast.Compare, ast.BinOp, ast.BitAnd, ast.BitOr, ast.Name, ast.Load),
    *(ast.Constant, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq),
)


def constraint_c(expr: str) -> str:
    """Return the constraint ``expr`` (NumPy source over parameter names) as a C condition.

    Comparisons joined by ``&`` and ``|`` of names and numbers mean the same in C (a
    comparison is 0 or 1; NaN compares false); anything else raises
    :class:`NoCImplementation`.
    """
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Compare) and len(node.ops) != 1):
            raise NoCImplementation(f"the C backend cannot write the constraint {expr!r}")
    return re.sub(r"\b([A-Za-z_]\w*)\b", r"{\1}", expr)


def _loops(shape: list[str], body: list[str]) -> list[str]:
    """Return ``body`` inside C-order loops ``j0, j1, ...`` over ``shape`` (a block of its own)."""
    heads = [f"for (int64_t j{d} = 0; j{d} < {n}; j{d}++) " for d, n in enumerate(shape)]
    return ["".join(heads) + "{", *body, "}"]


def _draw_code(op: RandomVariable, node: Apply, io: NodeIO, draw: str) -> CCode:
    """Return the C body of the draw ``node`` (see the module docstring)."""
    vector = [i for i, sig in enumerate(op.inputs_sig) if sig]
    if (op.core_ndim or vector) and type(op) not in VECTOR_DRAWS:
        raise NoCImplementation(f"{op}: the C backend draws scalar distributions only")
    if npyrandom_archive() is None:
        raise NoCImplementation(f"NumPy {np.__version__} ships no libnpyrandom to link")
    if any(dtype_of(node.inputs[2 + i]) != "float64" for i in vector):
        raise NoCImplementation(f"{op}: the C backend draws from float64 probability vectors")
    rng_in, size_in, *params = io.ins
    rng_out, out = io.outs
    batch = op.batch_ndim(node)
    static = [v.type.shape for v in node.inputs[2:]]  # type: ignore[attr-defined]
    ctypes = [CTYPE[dtype_of(v)] for v in node.inputs[2:]]
    name = op.name
    lines = [f"int64_t sh[{batch + 1}];"]
    if node.inputs[1].type.shape[0]:  # type: ignore[attr-defined]
        size_t = CTYPE[dtype_of(node.inputs[1])]
        for d in range(batch):
            lines += [
                f"sh[{d}] = (int64_t)*(const {size_t} *)({size_in}->data + "
                f"{d} * {size_in}->strides[0]);",
                f"if (sh[{d}] < 0) return kiln_fail(ctx, KILN_E_VALUE, "
                f'"{name}: size must be non-negative, got %lld in dimension {d}", '
                f"(long long)sh[{d}]);",
            ]
    else:
        for d in range(batch):
            sources = [i for i, s in enumerate(static) if s[d] != 1]
            lines.append(
                f"sh[{d}] = {params[sources[0]]}->shape[{d}];" if sources else f"sh[{d}] = 1;"
            )
    for i, p in enumerate(params):
        for d in range(batch):
            if static[i][d] != 1:
                message = (
                    f"{name}: parameter {op.params[i]!r} has length %lld in batch dimension "
                    f"{d}, which does not match the draw's batch shape (%lld there); kiln "
                    "broadcasts only dimensions whose static length is 1"
                )
                lines.append(
                    f"if ({p}->shape[{d}] != sh[{d}]) return kiln_fail(ctx, KILN_E_SHAPE, "
                    f"{_c_string(message).replace('%%lld', '%lld')}, "
                    f"(long long){p}->shape[{d}], (long long)sh[{d}]);"
                )

    def base(i: int) -> str:
        """Return the address of parameter ``i`` at the batch index (its core's first entry)."""
        offset = "".join(
            f" + j{d} * {params[i]}->strides[{d}]" for d in range(batch) if static[i][d] != 1
        )
        return f"({params[i]}->data{offset})"

    def element(i: int) -> str:
        return f"(*(const {ctypes[i]} *){base(i)})"

    def loads(text: str) -> list[str]:
        out = []
        for i, n in enumerate(op.params):
            if "{" + n + "}" not in text:
                continue
            if i in vector:  # the core vector: its first entry's address and its stride
                out.append(f"const char *P_{n} = {base(i)};")
                out.append(f"const int64_t S_{n} = {params[i]}->strides[{batch}];")
            else:
                out.append(f"const {ctypes[i]} P_{n} = {element(i)};")
        return out

    names = {n: f"P_{n}" for n in op.params}
    # The parameters' checks run over their broadcast, which is the batch where any
    # parameter spans a dimension, else length 1 (a size beyond them draws more).
    check_shape = [f"sh[{d}]" if any(s[d] != 1 for s in static) else "1" for d in range(batch)]
    checks = [
        (constraint_c(expr), f"{name}: {description} (invalid parameter values)")
        for expr, description in op.constraints
    ]
    checks += list(NUMPY_CHECKS.get(type(op), ()))
    for condition, message in checks:
        fail = f"return kiln_fail(ctx, KILN_E_VALUE, {_c_string(message)});"
        test = f"if (!({condition.format(**names)})) {fail}"
        lines += _loops(check_shape, [*loads(condition), test])
    if vector:  # the core vector's length, and the draw's core dimension
        lines.append(f"const int64_t K = {params[vector[0]]}->shape[{batch}];")
        if op.core_ndim:
            lines.append(f"sh[{batch}] = K;")
    callback = GeneratorPointer(op.inplace).make_node(node.inputs[0])
    dtype = dtype_of(node.outputs[1])
    t = CTYPE[dtype]
    lines += [
        "kiln_array a[1], r[2];",
        f"a[0] = *{rng_in};",
        "kiln_clear(&r[0]); kiln_clear(&r[1]);",
        "int status = ctx->fallback(KILN_CALLBACK(0), a, r);",
        "if (status) return status;",
        f"*{rng_out} = r[0];",
        "bitgen_t *bg = (bitgen_t *)(uintptr_t)*(const uint64_t *)r[1].data;",
        "kiln_release(&r[1]);",
        f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {batch + op.core_ndim}, sh)) "
        "return ctx->code;",
        f"{t} *o = ({t} *){out}->data;",
        "int64_t k = 0;",
    ]
    if "&binomial" in draw:
        lines += ["binomial_t binomial;", "memset(&binomial, 0, sizeof binomial);"]
    if vector:
        call, per_draw, messages = VECTOR_DRAWS[type(op)]
        vector_names = {**names, "p_stride": f"S_{op.params[vector[0]]}", "K": "K"}
        fails = [
            f"if (bad == {code}) return kiln_fail(ctx, KILN_E_VALUE, {_c_string(message)});"
            for code, message in enumerate(messages, 1)
        ]
        body = [f"int bad = {call.format(**vector_names)};", *fails, f"k += {per_draw};"]
        lines += _loops([f"sh[{d}]" for d in range(batch)], [*loads(call), *body])
    else:
        value = f"o[k++] = ({t})({draw.format(**names)});"
        lines += _loops([f"sh[{d}]" for d in range(batch)], [*loads(draw), value])
    lines.append("return 0;")
    code = CCode.with_helpers("\n".join(lines), ())
    code.callbacks = (callback,)
    return code


def _register(op_class: type[RandomVariable], draw: str) -> None:
    @c_funcify.register(op_class)
    def c_funcify_draw(op: RandomVariable, node: Apply, io: NodeIO) -> CCode:
        return _draw_code(op, node, io, draw)

    c_funcify_draw.__name__ = f"c_funcify_{op_class.__name__}"
    c_funcify_draw.__doc__ = f"Draw {op_class.__name__} with libnpyrandom: ``{draw}`` per element."


for _op_class, _draw in DRAWS.items():
    _register(_op_class, _draw)
for _op_class, _vector_draw in VECTOR_DRAWS.items():
    _register(_op_class, _vector_draw[0])
OBJECT_OPS.extend(DRAWS)
OBJECT_OPS.extend(VECTOR_DRAWS)
