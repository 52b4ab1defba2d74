"""C code of reductions: CAReduce, FusedReduce (an op reduced in one loop), Argmax, CumSum."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln_c._funcify import CTYPE, DTYPE_CODE, NodeIO, c_funcify, dtype_of
from kiln_c._loops import Reduction, loop_code
from kiln_c.elemwise import scalar_body
from kiln_c.scalar import cast_expr, is_long_loop
from kiln_graph import Apply
from kiln_graph.ops import Argmax, CAReduce, CumSum, FusedReduce


def _cast_body(
    body: Callable[[Sequence[str], Callable[[], str]], tuple[list[str], list[str]]],
    from_dtype: str,
    to_dtype: str,
) -> Callable[[Sequence[str], Callable[[], str]], tuple[list[str], list[str]]]:
    def cast(names: Sequence[str], fresh: Callable[[], str]) -> tuple[list[str], list[str]]:
        stmts, (result,) = body(names, fresh)
        return stmts, [cast_expr(result, from_dtype, to_dtype)]

    return cast


@c_funcify.register(CAReduce)
def c_funcify_CAReduce(op: CAReduce, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Combine, in one loop over the input, each element into its output cell."""
    (x,) = node.inputs
    in_dtype, out_dtype = dtype_of(x), dtype_of(node.outputs[0])
    ndim = x.type.ndim  # type: ignore[attr-defined]

    def body(names: Sequence[str], fresh: Callable[[], str]) -> tuple[list[str], list[str]]:
        return [], [cast_expr(names[0], in_dtype, out_dtype)]

    return loop_code(
        io, [in_dtype], [[False] * ndim], [out_dtype], body, reduction=Reduction(op.kind, op.axis)
    )


@c_funcify.register(FusedReduce)
def c_funcify_FusedReduce(op: FusedReduce, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Compute the elementwise op and the reduction in one loop over the broadcast inputs."""
    in_dtypes = [dtype_of(v) for v in node.inputs]
    out_dtype = dtype_of(node.outputs[0])
    pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
    # Vector math where the loop is SIMD code: the inner axis reduced, in eight lanes.
    ndim = node.inputs[0].type.ndim  # type: ignore[attr-defined]
    inner_reduced = ndim > 0 and ndim - 1 in op.axis
    program = scalar_body(
        op.scalar_op, in_dtypes, [pre_dtype], inner_reduced and is_long_loop(node)
    )
    body = _cast_body(program, pre_dtype, out_dtype)
    broadcast = [[s == 1 for s in v.type.shape] for v in node.inputs]  # type: ignore[attr-defined]
    return loop_code(
        io, in_dtypes, broadcast, [out_dtype], body, reduction=Reduction(op.kind, op.axis)
    )


def _along_axis(x: str, out: str, ndim: int, axis: int | None) -> tuple[list[str], dict[int, int]]:
    """Return the statements that walk ``x`` in rows along ``axis`` (``len`` long).

    ``outer`` counts the rows; ``p`` (the output's and ``x``'s row starts), ``st`` and
    ``idx`` walk them with ``kiln_advance`` over the ``nd`` other dimensions (the
    caller sets the output's strides ``st[0]``); ``xs`` steps along a row of ``x``.
    ``axis`` None: ``x`` flattened (a contiguous copy ``xc`` when it is not), one row,
    ``os`` the output's step. Also return the output dimension of each other axis.
    """
    if axis is None:
        return [
            "kiln_array xc; kiln_clear(&xc);",
            f"const kiln_array *xf = {x};",
            f"if (!kiln_is_contiguous({x})) {{ if (kiln_copy(ctx, &xc, {x})) return ctx->code; "
            "xf = &xc; }",
            "const int64_t len = kiln_size(xf), outer = 1, nd = 0;",
            f"const int64_t xs = kiln_itemsize[{x}->dtype];",
            f"const int64_t os = {out}->ndim ? {out}->strides[0] : 0;",
            "int64_t shape[KILN_MAXDIM], st[2][KILN_MAXDIM], idx[KILN_MAXDIM] = {0};",
            f"char *p[2] = {{{out}->data, xf->data}};",
        ], {}
    others = [d for d in range(ndim) if d != axis]
    out_dim = {d: i for i, d in enumerate(others)}
    lines = [
        "kiln_array xc; kiln_clear(&xc);",
        f"const int64_t len = {x}->shape[{axis}], nd = {len(others)};",
        f"const int64_t xs = {x}->strides[{axis}];",
        "int64_t shape[KILN_MAXDIM], st[2][KILN_MAXDIM], idx[KILN_MAXDIM] = {0};",
        "int64_t outer = 1;",
    ]
    for i, d in enumerate(others):
        lines.append(
            f"shape[{i}] = {x}->shape[{d}]; st[1][{i}] = {x}->strides[{d}]; outer *= shape[{i}];"
        )
    lines.append(f"char *p[2] = {{{out}->data, {x}->data}};")
    return lines, out_dim


@c_funcify.register(Argmax)
def c_funcify_Argmax(op: Argmax, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the index of the first maximum along ``axis`` (a NaN is the maximum)."""
    (x,), (out,) = io.ins, io.outs
    src = dtype_of(node.inputs[0])
    ndim = node.inputs[0].type.ndim  # type: ignore[attr-defined]
    t = CTYPE[src]
    out_ndim = node.outputs[0].type.ndim  # type: ignore[attr-defined]
    if op.axis is None:
        setup, _ = _along_axis(x, out, ndim, None)
        alloc = [f"if (kiln_alloc(ctx, {out}, KILN_INT64, 0, NULL)) return ctx->code;"]
        out_strides: list[str] = []
        empty = f"kiln_size({x}) == 0"
    else:
        setup, out_dim = _along_axis(x, out, ndim, op.axis)
        alloc = [
            "int64_t oshape[KILN_MAXDIM];",
            *(f"oshape[{i}] = {x}->shape[{d}];" for d, i in out_dim.items()),
            f"if (kiln_alloc(ctx, {out}, KILN_INT64, {out_ndim}, oshape)) return ctx->code;",
        ]
        out_strides = [f"st[0][{i}] = {out}->strides[{i}];" for i in range(out_ndim)]
        empty = f"{x}->shape[{op.axis}] == 0"
    better = "(v > best || (v != v && best == best))" if src.startswith("float") else "v > best"
    return "\n".join(
        [
            f"if ({empty}) return kiln_fail(ctx, KILN_E_VALUE, "
            '"cannot take the argmax of an empty axis");',
            *alloc,
            *setup,
            *out_strides,
            "for (int64_t r = 0; r < outer; r++) {",
            f"const char *q = p[1]; {t} best = *(const {t} *)q; int64_t at = 0;",
            "for (int64_t i = 1; i < len; i++) {",
            *(["if (best != best) break;"] if src.startswith("float") else []),
            f"q += xs; {t} v = *(const {t} *)q;",
            f"if ({better}) {{ best = v; at = i; }}",
            "}",
            "*(int64_t *)p[0] = at;",
            "kiln_advance(nd, shape, idx, 2, p, st);",
            "}",
            "kiln_release(&xc);",
            "return 0;",
        ]
    )


@c_funcify.register(CumSum)
def c_funcify_CumSum(op: CumSum, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the running sums along ``axis`` (from the end with ``reverse``), in order."""
    (x,), (out,) = io.ins, io.outs
    src, dtype = dtype_of(node.inputs[0]), dtype_of(node.outputs[0])
    ndim = node.inputs[0].type.ndim  # type: ignore[attr-defined]
    t = CTYPE[dtype]
    if op.axis is None:
        setup, _ = _along_axis(x, out, ndim, None)
        alloc = [
            f"const int64_t n1[1] = {{kiln_size({x})}};",
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 1, n1)) return ctx->code;",
        ]
        out_strides: list[str] = []
        os_line: list[str] = []
    else:
        setup, out_dim = _along_axis(x, out, ndim, op.axis)
        alloc = [
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {ndim}, {x}->shape)) "
            "return ctx->code;"
        ]
        out_strides = [f"st[0][{i}] = {out}->strides[{d}];" for d, i in out_dim.items()]
        os_line = [f"const int64_t os = {out}->strides[{op.axis}];"]
    load = cast_expr(f"*(const {CTYPE[src]} *)qx", src, dtype)
    if dtype == "bool":
        step = f"acc = (uint8_t)(acc || {load});"
    else:
        step = f"acc = ({t})(acc + {load});"
    start = "(len - 1)" if op.reverse else "0"
    move = "-=" if op.reverse else "+="
    return "\n".join(
        [
            *alloc,
            *setup,
            *os_line,
            *out_strides,
            "for (int64_t r = 0; r < outer; r++) {",
            f"const char *qx = p[1] + {start} * xs; char *qo = p[0] + {start} * os;",
            f"{t} acc = 0;",
            "for (int64_t i = 0; i < len; i++) {",
            step,
            f"*({t} *)qo = acc;",
            f"qx {move} xs; qo {move} os;",
            "}",
            "kiln_advance(nd, shape, idx, 2, p, st);",
            "}",
            "kiln_release(&xc);",
            "return 0;",
        ]
    )
