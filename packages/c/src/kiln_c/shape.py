"""C code of shape ops: Shape, ShapeI, MakeVector, Reshape, Alloc, Join and Split."""

from __future__ import annotations

from kiln_c._funcify import CTYPE, DTYPE_CODE, NoCImplementation, NodeIO, c_funcify, dtype_of
from kiln_c.scalar import cast_expr
from kiln_graph import Apply
from kiln_graph.ops import Alloc, Join, MakeVector, Reshape, Shape, ShapeI, Split


@c_funcify.register(Shape)
def c_funcify_Shape(op: Shape, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the shape of ``x`` as an int64 vector."""
    (x,), (out,) = io.ins, io.outs
    return "\n".join(
        [
            f"const int64_t n[1] = {{{x}->ndim}};",
            f"if (kiln_alloc(ctx, {out}, KILN_INT64, 1, n)) return ctx->code;",
            f"memcpy({out}->data, {x}->shape, (size_t)(8 * {x}->ndim));",
            "return 0;",
        ]
    )


@c_funcify.register(ShapeI)
def c_funcify_ShapeI(op: ShapeI, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the length of dimension ``i`` as an int64 scalar."""
    (x,), (out,) = io.ins, io.outs
    return "\n".join(
        [
            f"if (kiln_alloc(ctx, {out}, KILN_INT64, 0, NULL)) return ctx->code;",
            f"*(int64_t *){out}->data = {x}->shape[{op.i}];",
            "return 0;",
        ]
    )


@c_funcify.register(MakeVector)
def c_funcify_MakeVector(op: MakeVector, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the scalars as one vector of ``op.dtype``."""
    dtype = dtype_of(node.outputs[0])
    out = io.outs[0]
    lines = [
        f"const int64_t n[1] = {{{len(io.ins)}}};",
        f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, 1, n)) return ctx->code;",
        f"{CTYPE[dtype]} *o = ({CTYPE[dtype]} *){out}->data;",
    ]
    for k, (v, name) in enumerate(zip(node.inputs, io.ins, strict=True)):
        src = dtype_of(v)
        value = f"*(const {CTYPE[src]} *){name}->data"
        lines.append(f"o[{k}] = {cast_expr(value, src, dtype)};")
    lines.append("return 0;")
    return "\n".join(lines)


@c_funcify.register(Reshape)
def c_funcify_Reshape(op: Reshape, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``x`` with a new shape: a view when contiguous, else a contiguous copy."""
    (x, shp), (out,) = io.ins, io.outs
    return "\n".join(
        [
            "int64_t shape[KILN_MAXDIM];",
            f"int64_t known = 1, unknown = -1, size = kiln_size({x});",
            f"for (int64_t d = 0; d < {op.ndim}; d++) {{",
            f"kiln_array e = *{shp}; e.ndim = 0; e.data = {shp}->data + d * {shp}->strides[0];",
            "shape[d] = kiln_index_value(&e);",
            "if (shape[d] == -1 && unknown < 0) unknown = d; else known *= shape[d];",
            "}",
            "if (unknown >= 0) shape[unknown] = known > 0 ? size / known : 0;",
            f"int64_t total = 1; for (int64_t d = 0; d < {op.ndim}; d++) total *= shape[d];",
            "if (total != size || (unknown >= 0 && known == 0)) return kiln_fail(ctx, "
            'KILN_E_SHAPE, "reshape: cannot reshape an array of size %lld into the requested '
            'shape", (long long)size);',
            f"if (kiln_is_contiguous({x})) kiln_view({out}, {x});",
            f"else if (kiln_copy(ctx, {out}, {x})) return ctx->code;",
            f"{out}->ndim = {op.ndim};",
            f"int64_t s = kiln_itemsize[{x}->dtype];",
            f"for (int64_t d = {op.ndim} - 1; d >= 0; d--) {{",
            f"{out}->shape[d] = shape[d]; {out}->strides[d] = s; s *= shape[d]; }}",
            "return 0;",
        ]
    )


@c_funcify.register(Alloc)
def c_funcify_Alloc(op: Alloc, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return a new array of the given shape filled with ``x`` (broadcast)."""
    x, *dims = io.ins
    out = io.outs[0]
    dtype = dtype_of(node.outputs[0])
    if dtype_of(node.inputs[0]) != dtype:
        raise NoCImplementation("Alloc that converts its value")
    ndim = len(dims)
    xv = node.inputs[0]
    flags = ", ".join("1" if s == 1 else "0" for s in xv.type.shape) or "0"  # type: ignore[attr-defined]
    ct = CTYPE[dtype]
    return "\n".join(
        [
            "int64_t shape[KILN_MAXDIM];",
            *(f"shape[{d}] = kiln_index_value({name});" for d, name in enumerate(dims)),
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {ndim}, shape)) return ctx->code;",
            f"static const uint8_t xbc[{max(xv.type.ndim, 1)}] = {{{flags}}};",  # type: ignore[attr-defined]
            "int64_t st[2][KILN_MAXDIM];",
            f"for (int64_t d = 0; d < {ndim}; d++) st[0][d] = {out}->strides[d];",
            f"if (kiln_update_strides(ctx, {x}, xbc, {ndim}, shape, st[1])) "
            'return kiln_fail(ctx, KILN_E_SHAPE, "alloc: cannot broadcast the value to the '
            'requested shape");',
            f"char *p[2] = {{{out}->data, {x}->data}};",
            "int64_t idx[KILN_MAXDIM] = {0};",
            f"const int64_t n = kiln_size({out});",
            "for (int64_t k = 0; k < n; k++) {",
            f"*({ct} *)p[0] = *(const {ct} *)p[1];",
            f"kiln_advance({ndim}, shape, idx, 2, p, st);",
            "}",
            "return 0;",
        ]
    )


@c_funcify.register(Join)
def c_funcify_Join(op: Join, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the inputs concatenated along ``axis`` (other lengths must agree)."""
    out = io.outs[0]
    dtype = dtype_of(node.outputs[0])
    if any(dtype_of(v) != dtype for v in node.inputs):
        raise NoCImplementation("Join of mixed dtypes")
    ndim = node.outputs[0].type.ndim  # type: ignore[attr-defined]
    axis = op.axis
    n = len(io.ins)
    lines = [
        f"kiln_array *in[{n}] = {{{', '.join(io.ins)}}};",
        "int64_t shape[KILN_MAXDIM];",
        f"for (int64_t d = 0; d < {ndim}; d++) shape[d] = in[0]->shape[d];",
        f"shape[{axis}] = 0;",
        f"for (int i = 0; i < {n}; i++) {{",
        f"for (int64_t d = 0; d < {ndim}; d++) if (d != {axis} && in[i]->shape[d] != shape[d]) "
        'return kiln_fail(ctx, KILN_E_SHAPE, "concatenate: tensors[%d] and tensors[0] differ '
        'in dimension %lld, but only the concatenation axis may differ", i, (long long)d);',
        f"shape[{axis}] += in[i]->shape[{axis}]; }}",
        f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {ndim}, shape)) return ctx->code;",
        "int64_t offset = 0;",
        f"for (int i = 0; i < {n}; i++) {{",
        f"kiln_array part = *{out}; part.buf = NULL;",
        f"part.data = {out}->data + offset * {out}->strides[{axis}];",
        f"part.shape[{axis}] = in[i]->shape[{axis}];",
        f"offset += in[i]->shape[{axis}];",
        "int64_t st[2][KILN_MAXDIM];",
        f"for (int64_t d = 0; d < {ndim}; d++) {{ st[0][d] = part.strides[d]; "
        "st[1][d] = in[i]->strides[d]; }",
        "char *p[2] = {part.data, in[i]->data};",
        "int64_t idx[KILN_MAXDIM] = {0};",
        "const int64_t m = kiln_size(&part);",
        "for (int64_t k = 0; k < m; k++) {",
        f"*({CTYPE[dtype]} *)p[0] = *(const {CTYPE[dtype]} *)p[1];",
        f"kiln_advance({ndim}, part.shape, idx, 2, p, st);",
        "}",
        "}",
        "return 0;",
    ]
    return "\n".join(lines)


@c_funcify.register(Split)
def c_funcify_Split(op: Split, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return views of consecutive pieces of ``x`` along ``axis`` (lengths must add up)."""
    x, *sizes = io.ins
    axis, n = op.axis, op.n
    lines = [
        f"int64_t len[{n}], total = 0;",
        *(f"len[{i}] = kiln_index_value({s});" for i, s in enumerate(sizes)),
        f"for (int i = 0; i < {n}; i++) {{ if (len[i] < 0) total = -1; "
        "if (total >= 0) total += len[i]; }",
        f"if (total != {x}->shape[{axis}]) {{",
        'char text[256]; int at = snprintf(text, sizeof text, "%lld", (long long)len[0]);',
        f"for (int i = 1; i < {n} && at < 200; i++) at += snprintf(text + at, "
        'sizeof text - (size_t)at, ", %lld", (long long)len[i]);',
        'return kiln_fail(ctx, KILN_E_SHAPE, "split: cannot cut a length-%lld dimension '
        f'{axis} into pieces of lengths [%s]", (long long){x}->shape[{axis}], text);',
        "}",
        "int64_t offset = 0;",
    ]
    for i, out in enumerate(io.outs):
        lines += [
            f"kiln_view({out}, {x});",
            f"{out}->shape[{axis}] = len[{i}];",
            f"{out}->data += offset * {x}->strides[{axis}];",
            f"offset += len[{i}];",
        ]
    lines.append("return 0;")
    return "\n".join(lines)
