"""C code of ranges: ARange and Eye."""

from __future__ import annotations

from kiln_c._funcify import CTYPE, DTYPE_CODE, NodeIO, c_funcify, dtype_of
from kiln_c.scalar import cast_expr
from kiln_graph import Apply
from kiln_graph.ops import ARange, Eye


@c_funcify.register(ARange)
def c_funcify_ARange(op: ARange, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``start + i * step`` for ``i < ceil((stop - start) / step)``, as NumPy.

    NumPy computes the length in double precision, then the first two values in the
    output dtype and each further one as ``first + i * delta`` (``delta`` their
    difference, in the output dtype).
    """
    out = io.outs[0]
    dtype = dtype_of(node.outputs[0])
    t = CTYPE[dtype]
    loads = []
    for name, v, arg in zip(("start", "stop", "step"), node.inputs, io.ins, strict=True):
        src = dtype_of(v)
        value = cast_expr(f"*(const {CTYPE[src]} *){arg}->data", src, "float64")
        loads.append(f"const double {name} = {value};")
    return "\n".join(
        [
            *loads,
            'if (step == 0) return kiln_fail(ctx, KILN_E_VALUE, "arange: step must not be zero");',
            "double span = ceil((stop - start) / step);",
            "if (!(span == span) || span > 9.2e18) return kiln_fail(ctx, KILN_E_VALUE, "
            '"arange: cannot compute the length of the range");',
            "const int64_t n[1] = {span > 0 ? (int64_t)span : 0};",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 1, n)) return ctx->code;",
            f"{t} *o = ({t} *){out}->data;",
            "if (n[0] == 0) return 0;",
            f"o[0] = {cast_expr('start', 'float64', dtype)};",
            "if (n[0] == 1) return 0;",
            f"o[1] = {cast_expr('start + step', 'float64', dtype)};",
            f"const {t} delta = ({t})(o[1] - o[0]);",
            f"for (int64_t i = 2; i < n[0]; i++) o[i] = ({t})(o[0] + ({t})i * delta);",
            "return 0;",
        ]
    )


@c_funcify.register(Eye)
def c_funcify_Eye(op: Eye, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return an ``n`` by ``m`` array with ones on diagonal ``k``."""
    n, m, k = io.ins
    out = io.outs[0]
    dtype = dtype_of(node.outputs[0])
    t = CTYPE[dtype]
    return "\n".join(
        [
            f"const int64_t rows = kiln_index_value({n}), cols = kiln_index_value({m}), "
            f"k = kiln_index_value({k});",
            "if (rows < 0 || cols < 0) return kiln_fail(ctx, KILN_E_VALUE, "
            '"eye: n and m must be non-negative, got n=%lld, m=%lld", (long long)rows, '
            "(long long)cols);",
            "const int64_t shape[2] = {rows, cols};",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 2, shape)) return ctx->code;",
            f"{t} *o = ({t} *){out}->data;",
            f"for (int64_t i = 0; i < rows * cols; i++) o[i] = ({t})0;",
            "for (int64_t i = 0; i < rows; i++)",
            f"if (i + k >= 0 && i + k < cols) o[i * cols + i + k] = ({t})1;",
            "return 0;",
        ]
    )
