"""C code of Blockwise: the core op's code as a function, called once per batch index.

The core node's code (any Op with C code, LAPACK's included) becomes a static function
of its own, named by a digest of its code (equal core ops share one); the node's
function broadcasts the batch dimensions as the VM does, hands the function views of
each input's core block, and copies each core result into its block of the output
(allocated at the first block, whose core shape the others must repeat).
"""

from __future__ import annotations

import hashlib

from kiln_c._funcify import DTYPE_CODE, CCode, NodeIO, c_funcify, dtype_of, ndim_of
from kiln_graph import Apply, Blockwise, Variable
from kiln_graph import tensor as kt
from kiln_graph.ops import Solve, SolveTriangular


def inner_function(node: Apply, index: int) -> tuple[str, list[str]]:
    """Return the name of a static function computing ``node`` and the functions to emit.

    The function is ``static int NAME(kiln_ctx *ctx, kiln_array *v)``: ``v`` holds the
    node's inputs, then its outputs (set by the call). Raises ``NoCImplementation``
    when ``node`` has no C code.
    """
    for v in (*node.inputs, *node.outputs):
        dtype_of(v)
    n_in = len(node.inputs)
    io = NodeIO(
        index,
        tuple(f"(&v[{i}])" for i in range(n_in)),
        tuple(f"(&v[{n_in + j}])" for j in range(len(node.outputs))),
    )
    code = c_funcify(node.op, node, io)
    body = str(code)
    name = "kiln_inner_" + hashlib.sha256(body.encode()).hexdigest()[:16]
    comment = str(node.op)[:80].replace("*/", "* /")
    function = f"/* {comment} */\nstatic int {name}(kiln_ctx *ctx, kiln_array *v) {{\n{body}\n}}\n"
    return name, [*getattr(code, "helpers", ()), function]


def _core_node(op: Blockwise, node: Apply) -> Apply:
    """Return the core op applied to inputs of the core dimensions (static where known)."""
    batch = node.outputs[0].type.ndim - len(op.outputs_sig[0])  # type: ignore[attr-defined]
    dummies = [
        kt.tensor(dtype=v.type.dtype, shape=v.type.shape[batch:])  # type: ignore[attr-defined]
        for v in node.inputs
    ]
    return op.core_op.make_node(*dummies)


def _sizes(op: Blockwise, node: Apply, batch: int, ins: tuple[str, ...]) -> dict[str, str]:
    """Return, for each core dimension name, a C expression of its length (from an input)."""
    sizes: dict[str, str] = {}
    for i, dims in enumerate(op.inputs_sig):
        for d, dim in enumerate(dims):
            sizes.setdefault(dim, f"{ins[i]}->shape[{batch + d}]")
    return sizes


def _shared_matrix_solve(op: Blockwise, node: Apply, io: NodeIO) -> str | None:
    """Return one solve with many right-hand sides for vectors solved against one matrix.

    ``solve(a[None], b)`` with ``b`` a stack of vectors (a model's MvNormal): the core
    op with ``b_ndim=2`` on ``b`` transposed (a view), its result transposed back (a
    view), instead of one LAPACK call per vector. None when the node is not that.
    """
    core_op = op.core_op
    if not isinstance(core_op, Solve | SolveTriangular) or core_op.b_ndim != 1:
        return None
    a, b = node.inputs
    if a.type.ndim != 3 or a.type.shape[0] != 1 or b.type.ndim != 2:  # type: ignore[attr-defined]
        return None
    if isinstance(core_op, Solve):
        matrix_op: Solve | SolveTriangular = Solve(core_op.assume_a, core_op.lower, b_ndim=2)
    else:
        matrix_op = SolveTriangular(core_op.lower, core_op.unit_diagonal, core_op.trans, b_ndim=2)
    core = matrix_op.make_node(
        kt.tensor(dtype=a.type.dtype, shape=a.type.shape[1:]),  # type: ignore[attr-defined]
        kt.tensor(dtype=b.type.dtype, shape=b.type.shape[::-1]),  # type: ignore[attr-defined]
    )
    name, helpers = inner_function(core, io.index)
    (ain, bin_), (out,) = io.ins, io.outs
    body = "\n".join(
        [
            "kiln_array t[3];",
            f"t[0] = *{ain}; t[0].buf = NULL; t[0].ndim = 2;",
            f"t[0].shape[0] = {ain}->shape[1]; t[0].shape[1] = {ain}->shape[2];",
            f"t[0].strides[0] = {ain}->strides[1]; t[0].strides[1] = {ain}->strides[2];",
            f"t[1] = *{bin_}; t[1].buf = NULL;",
            f"t[1].shape[0] = {bin_}->shape[1]; t[1].shape[1] = {bin_}->shape[0];",
            f"t[1].strides[0] = {bin_}->strides[1]; t[1].strides[1] = {bin_}->strides[0];",
            "kiln_clear(&t[2]);",
            f"int status = {name}(ctx, t);",
            "if (status) { kiln_release(&t[2]); return status; }",
            f"*{out} = t[2];",
            f"{out}->shape[0] = t[2].shape[1]; {out}->shape[1] = t[2].shape[0];",
            f"{out}->strides[0] = t[2].strides[1]; {out}->strides[1] = t[2].strides[0];",
            "return 0;",
        ]
    )
    return CCode.with_helpers(body, helpers)


@c_funcify.register(Blockwise)
def c_funcify_Blockwise(op: Blockwise, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Loop over the broadcast batch dimensions, calling the core op's function on each block."""
    shared = _shared_matrix_solve(op, node, io)
    if shared is not None:
        return shared
    core = _core_node(op, node)
    name, helpers = inner_function(core, io.index)
    n_in, n_out = len(io.ins), len(io.outs)
    out0: Variable = node.outputs[0]
    batch = ndim_of(out0) - len(op.outputs_sig[0])
    sizes = _sizes(op, node, batch, io.ins)
    lines = [
        f"kiln_array *in[{n_in}] = {{{', '.join(io.ins)}}};",
        f"kiln_array *out[{n_out}] = {{{', '.join(io.outs)}}};",
        f"int64_t bshape[{max(batch, 1)}], idx[{max(batch, 1)}], total = 1;",
        f"for (int d = 0; d < {batch}; d++) {{",
        "int64_t n = 1;",
        f"for (int i = 0; i < {n_in}; i++) {{",
        "int64_t m = in[i]->shape[d];",
        "if (m == 1) continue;",
        "if (n != 1 && m != n) return kiln_fail(ctx, KILN_E_SHAPE, "
        "\"blockwise: the batch dimension %d of input %d has length %lld, another input's "
        'has %lld", d, i, (long long)m, (long long)n);',
        "n = m;",
        "}",
        "bshape[d] = n; idx[d] = 0; total *= n;",
        "}",
        f"kiln_array w[{n_in + n_out}];",
        "int status = 0;",
        f"for (int k = 0; k < {n_out}; k++) kiln_clear(out[k]);",
        "if (total == 0) {",
        "int64_t shape[KILN_MAXDIM];",
        f"for (int d = 0; d < {batch}; d++) shape[d] = bshape[d];",
    ]
    for k, (o, dims) in enumerate(zip(node.outputs, op.outputs_sig, strict=True)):
        for d, dim in enumerate(dims):
            static = o.type.shape[batch + d]  # type: ignore[attr-defined]
            length = str(static) if static is not None else sizes.get(dim)
            if length is None:
                lines.append(
                    'return kiln_fail(ctx, KILN_E_VALUE, "blockwise: cannot tell the core shape '
                    f'of output {k} for an empty batch");'
                )
                break
            lines.append(f"shape[{batch + d}] = {length};")
        lines.append(
            f"if (kiln_alloc(ctx, out[{k}], {DTYPE_CODE[dtype_of(o)]}, {ndim_of(o)}, shape)) "
            "return ctx->code;"
        )
    lines += [
        "return 0;",
        "}",
        "for (int64_t b = 0; b < total; b++) {",
        f"for (int i = 0; i < {n_in}; i++) {{",
        "kiln_array *x = in[i];",
        "kiln_array *c = &w[i];",
        "c->data = x->data; c->buf = NULL; c->dtype = x->dtype;",
        f"c->ndim = x->ndim - {batch};",
        f"for (int d = 0; d < {batch}; d++)",
        "if (x->shape[d] != 1) c->data += idx[d] * x->strides[d];",
        f"for (int64_t d = 0; d < c->ndim; d++) {{ c->shape[d] = x->shape[{batch} + d]; "
        f"c->strides[d] = x->strides[{batch} + d]; }}",
        "}",
        f"for (int k = 0; k < {n_out}; k++) kiln_clear(&w[{n_in} + k]);",
        f"if ((status = {name}(ctx, w)) != 0) goto fail;",
        f"for (int k = 0; k < {n_out}; k++) {{",
        f"const kiln_array *r = &w[{n_in} + k];",
        "if (b == 0) {",
        "int64_t shape[KILN_MAXDIM];",
        f"for (int d = 0; d < {batch}; d++) shape[d] = bshape[d];",
        f"for (int64_t d = 0; d < r->ndim; d++) shape[{batch} + d] = r->shape[d];",
        f"if ((status = kiln_alloc(ctx, out[k], r->dtype, {batch} + r->ndim, shape)) != 0) "
        "goto fail;",
        "}",
        "kiln_array part = *out[k]; part.buf = NULL; part.ndim = r->ndim;",
        f"for (int d = 0; d < {batch}; d++) part.data += idx[d] * out[k]->strides[d];",
        "for (int64_t d = 0; d < r->ndim; d++) {",
        f"if (out[k]->shape[{batch} + d] != r->shape[d]) {{ status = kiln_fail(ctx, "
        'KILN_E_SHAPE, "blockwise: output %d of the core op has length %lld in its '
        'dimension %lld here but %lld at the first batch index", k, (long long)r->shape[d], '
        f"(long long)d, (long long)out[k]->shape[{batch} + d]); goto fail; }}",
        f"part.shape[d] = r->shape[d]; part.strides[d] = out[k]->strides[{batch} + d];",
        "}",
        "int64_t st[2][KILN_MAXDIM], j[KILN_MAXDIM] = {0};",
        "for (int64_t d = 0; d < r->ndim; d++) { st[0][d] = part.strides[d]; "
        "st[1][d] = r->strides[d]; }",
        "char *p[2] = {part.data, r->data};",
        "const int64_t size = kiln_itemsize[r->dtype], m = kiln_size(r);",
        "for (int64_t q = 0; q < m; q++) {",
        "memcpy(p[0], p[1], (size_t)size);",
        "kiln_advance(r->ndim, r->shape, j, 2, p, st);",
        "}",
        f"kiln_release(&w[{n_in} + k]);",
        "}",
        f"for (int d = {batch} - 1; d >= 0; d--) {{",
        "if (++idx[d] < bshape[d]) break;",
        "idx[d] = 0;",
        "}",
        "}",
        "return 0;",
        "fail:",
        f"for (int k = 0; k < {n_out}; k++) {{ kiln_release(&w[{n_in} + k]); }}",
        "return status;",
    ]
    return CCode.with_helpers("\n".join(lines), helpers)
