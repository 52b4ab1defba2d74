"""C code of indexing: Subtensor, IncSubtensor, and gathers and scatters on the first axis.

Subtensor is a view; AdvancedSubtensor1 and AdvancedIncSubtensor1 gather and scatter
rows of an integer vector; AdvancedSubtensor and AdvancedIncSubtensor with integer
arrays only (on the leading axes, broadcast together: ``x[i, j]``) gather and scatter
elements (other mixes of arrays, slices and new axes run through ``perform``).

Indices are checked as NumPy checks them (``index 5 is out of bounds for axis 0 with
size 3`` is a :class:`~kiln_graph.KilnIndexError`, as on the VM); slices follow
Python's rules. An update writes into a copy of ``x``, or into ``x``'s own buffer when
the in-place plan allows it and nothing else holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln_c._funcify import CTYPE, DTYPE_CODE, NoCImplementation, NodeIO, c_funcify, dtype_of
from kiln_graph import Apply
from kiln_graph.ops import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
)


def _subview(out: str, x: str, idx_list: Sequence[Any], indices: Sequence[str]) -> list[str]:
    """Return statements setting ``out`` to the view ``x[index]`` (or failing)."""
    n = max(len(idx_list), 1)
    kinds: list[str] = []
    has: list[str] = []
    parts: dict[str, list[str]] = {"start": [], "stop": [], "step": []}
    it = iter(indices)
    for e in idx_list:
        values = ["0", "0", "0"]
        if isinstance(e, tuple):
            kinds.append("KILN_IDX_SLICE")
            bits = 0
            for k, p in enumerate(e):
                if p is not None:
                    bits |= 1 << k
                    values[k] = f"kiln_index_value({next(it)})"
            has.append(str(bits))
        elif e == "x":
            kinds.append("KILN_IDX_NEWAXIS")
            has.append("0")
        else:
            kinds.append("KILN_IDX_INT")
            has.append("0")
            values[0] = f"kiln_index_value({next(it)})"
        for name, value in zip(parts, values, strict=True):
            parts[name].append(value)

    def array(values: list[str]) -> str:
        return "{" + (", ".join(values) or "0") + "}"

    return [
        f"const int kind[{n}] = {array(kinds)};",
        f"const int has[{n}] = {array(has)};",
        *(f"const int64_t {name}[{n}] = {array(v)};" for name, v in parts.items()),
        f"if (kiln_subview(ctx, {out}, {x}, {len(idx_list)}, kind, start, stop, step, has)) "
        "return ctx->code;",
    ]


@c_funcify.register(Subtensor)
def c_funcify_Subtensor(op: Subtensor, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return the view ``x[index]``."""
    return "\n".join([*_subview(io.outs[0], io.ins[0], op.idx_list, io.ins[1:]), "return 0;"])


def _target(io: NodeIO, inplace: bool) -> list[str]:
    """Return statements making ``out`` the array to update: ``x`` itself, or a copy."""
    x, out = io.ins[0], io.outs[0]
    copy = f"if (kiln_copy(ctx, {out}, {x})) return ctx->code;"
    if not inplace:
        return [copy]
    return [
        f"if (kiln_can_reuse({x}, {x}->dtype, {x}->ndim, {x}->shape)) kiln_view({out}, {x});",
        f"else {copy}",
    ]


def _update_loop(
    region: str, y_shape: tuple[int | None, ...], y_name: str, set_: bool, dtype: str
) -> list[str]:
    """Return statements writing ``y`` (broadcast) into (or adding it to) ``region``.

    ``y_shape`` is ``y``'s static shape (lengths of 1 broadcast).
    """
    ct = CTYPE[dtype]
    flags = ", ".join("1" if s == 1 else "0" for s in y_shape) or "0"
    op = "=" if set_ else "+="
    return [
        "{",
        f"static const uint8_t ybc[{max(len(y_shape), 1)}] = {{{flags}}};",
        "int64_t st[2][KILN_MAXDIM];",
        f"for (int64_t d = 0; d < {region}->ndim; d++) st[0][d] = {region}->strides[d];",
        f"if (kiln_update_strides(ctx, {y_name}, ybc, {region}->ndim, {region}->shape, st[1])) "
        "return ctx->code;",
        f"char *p[2] = {{{region}->data, {y_name}->data}};",
        "int64_t idx[KILN_MAXDIM] = {0};",
        f"const int64_t n = kiln_size({region});",
        "for (int64_t k = 0; k < n; k++) {",
        f"*({ct} *)p[0] {op} *(const {ct} *)p[1];",
        f"kiln_advance({region}->ndim, {region}->shape, idx, 2, p, st);",
        "}",
        "}",
    ]


@c_funcify.register(IncSubtensor)
def c_funcify_IncSubtensor(op: IncSubtensor, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``x`` with ``x[index]`` incremented by (or set to) ``y``."""
    dtype = dtype_of(node.outputs[0])
    lines = [*_target(io, op.inplace), "kiln_array region;"]
    view = _subview("(&region)", io.outs[0], op.idx_list, io.ins[2:])
    view[-1] = view[-1].replace(
        "return ctx->code;", "{ kiln_release(" + io.outs[0] + "); return ctx->code; }"
    )
    lines += view
    y_shape = node.inputs[1].type.shape  # type: ignore[attr-defined]
    loop = _update_loop("(&region)", y_shape, io.ins[1], op.set_instead_of_inc, dtype)
    lines += [
        line.replace("return ctx->code;", "{ kiln_release(&region); return ctx->code; }")
        for line in loop
    ]
    lines += ["kiln_release(&region);", "return 0;"]
    return "\n".join(lines)


def _checked_index(idx: str, idx_dtype: str, x: str) -> list[str]:
    """Return statements reading element ``k`` of ``idx`` into ``i``, checked against ``x``."""
    return [
        f"int64_t i = (int64_t)*(const {CTYPE[idx_dtype]} *)({idx}->data + k * {idx}->strides[0]);",
        f"if (i < -{x}->shape[0] || i >= {x}->shape[0]) return kiln_fail(ctx, KILN_E_INDEX, "
        f'"index %lld is out of bounds for axis 0 with size %lld", (long long)i, '
        f"(long long){x}->shape[0]);",
        f"if (i < 0) i += {x}->shape[0];",
    ]


@c_funcify.register(AdvancedSubtensor1)
def c_funcify_AdvancedSubtensor1(op: AdvancedSubtensor1, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``x[idx]`` for an integer vector ``idx``: rows gathered into a new array."""
    (x, idx), (out,) = io.ins, io.outs
    dtype, idx_dtype = dtype_of(node.inputs[0]), dtype_of(node.inputs[1])
    ct = CTYPE[dtype]
    head = [
        "int64_t shape[KILN_MAXDIM];",
        f"shape[0] = {idx}->shape[0];",
        f"for (int64_t d = 1; d < {x}->ndim; d++) shape[d] = {x}->shape[d];",
        f"if (kiln_alloc(ctx, {out}, {x}->dtype, {x}->ndim, shape)) return ctx->code;",
    ]
    if node.inputs[0].type.ndim == 1:  # type: ignore[attr-defined]
        return "\n".join(
            [
                *head,
                f"{ct} *o = ({ct} *){out}->data;",
                f"for (int64_t k = 0; k < {idx}->shape[0]; k++) {{",
                *_checked_index(idx, idx_dtype, x),
                f"o[k] = *(const {ct} *)({x}->data + i * {x}->strides[0]);",
                "}",
                "return 0;",
            ]
        )
    return "\n".join(
        [
            *head,
            f"const int64_t item = kiln_itemsize[{x}->dtype];",
            f"int64_t row = 1; for (int64_t d = 1; d < {x}->ndim; d++) row *= {x}->shape[d];",
            f"kiln_array src = *{x}, dst;",
            "src.buf = NULL; src.ndim -= 1;",
            "for (int64_t d = 0; d < src.ndim; d++) {",
            f"src.shape[d] = {x}->shape[d + 1]; src.strides[d] = {x}->strides[d + 1]; }}",
            "const int rows_contiguous = kiln_is_contiguous(&src);",
            f"for (int64_t k = 0; k < {idx}->shape[0]; k++) {{",
            *_checked_index(idx, idx_dtype, x),
            f"src.data = {x}->data + i * {x}->strides[0];",
            "if (rows_contiguous) {",
            f"memcpy({out}->data + k * row * item, src.data, (size_t)(row * item));",
            "} else {",
            "if (kiln_copy(ctx, &dst, &src)) return ctx->code;",
            f"memcpy({out}->data + k * row * item, dst.data, (size_t)(row * item));",
            "kiln_release(&dst);",
            "}",
            "}",
            "return 0;",
        ]
    )


@c_funcify.register(AdvancedIncSubtensor1)
def c_funcify_AdvancedIncSubtensor1(  # noqa: N802
    op: AdvancedIncSubtensor1, node: Apply, io: NodeIO
) -> str:
    """Return ``x`` with rows ``idx`` incremented by ``y`` (repeats accumulate) or set."""
    (_, y, idx), (out,) = io.ins, io.outs
    dtype = dtype_of(node.outputs[0])
    idx_dtype = dtype_of(node.inputs[2])
    yv = node.inputs[1]
    if node.inputs[0].type.ndim == 1:  # type: ignore[attr-defined]
        return _scatter_vector(op, io, dtype, idx_dtype, yv.type.shape)  # type: ignore[attr-defined]
    # y's leading dimension runs along idx when y has x's number of dimensions.
    full = yv.type.ndim == node.inputs[0].type.ndim  # type: ignore[attr-defined]
    spread = "1" if full and yv.type.shape[0] == 1 else "0"  # type: ignore[attr-defined]
    region_y = [
        "kiln_array yrow = *" + y + ";",
        "if (" + ("1" if full else "0") + ") {",
        f"if ({y}->shape[0] != {idx}->shape[0] && !({spread} && {y}->shape[0] == 1)) {{",
        "kiln_release(" + out + ");",
        f'return kiln_fail(ctx, KILN_E_SHAPE, "y has length %lld in dimension 0 but idx has '
        f'%lld", (long long){y}->shape[0], (long long){idx}->shape[0]); }}',
        f"yrow.ndim = {y}->ndim - 1;",
        f"if ({y}->shape[0] != 1 || {idx}->shape[0] == 1)",
        f"yrow.data = {y}->data + k * {y}->strides[0];",
        "for (int64_t d = 0; d < yrow.ndim; d++) {",
        f"yrow.shape[d] = {y}->shape[d + 1]; yrow.strides[d] = {y}->strides[d + 1]; }}",
        "}",
    ]
    y_shape = yv.type.shape[1:] if full else yv.type.shape  # type: ignore[attr-defined]
    loop = _update_loop("(&region)", y_shape, "(&yrow)", op.set_instead_of_inc, dtype)
    lines = [
        *_target(io, op.inplace),
        "kiln_array region;",
        f"for (int64_t k = 0; k < {idx}->shape[0]; k++) {{",
        *_checked_index(idx, idx_dtype, out),
        f"region = *{out}; region.ndim = {out}->ndim - 1;",
        f"region.data = {out}->data + i * {out}->strides[0];",
        "for (int64_t d = 0; d < region.ndim; d++) {",
        f"region.shape[d] = {out}->shape[d + 1]; region.strides[d] = {out}->strides[d + 1]; }}",
        *region_y,
        *[
            s.replace("return ctx->code;", f"{{ kiln_release({out}); return ctx->code; }}")
            for s in loop
        ],
        "}",
        "return 0;",
    ]
    return "\n".join(lines)


def _scatter_vector(
    op: AdvancedIncSubtensor1, io: NodeIO, dtype: str, idx_dtype: str, y_shape: tuple
) -> str:
    """Return the scatter into a vector: one element of ``y`` (or its one value) per index."""
    (_, y, idx), (out,) = io.ins, io.outs
    ct = CTYPE[dtype]
    spread = "1" if y_shape == () or y_shape[0] == 1 else "0"
    step = f"({y}->ndim == 0 || ({spread} && {y}->shape[0] == 1) ? 0 : {y}->strides[0])"
    assign = "=" if op.set_instead_of_inc else "+="
    return "\n".join(
        [
            *_target(io, op.inplace),
            f"if ({y}->ndim == 1 && {y}->shape[0] != {idx}->shape[0] && "
            f"!({spread} && {y}->shape[0] == 1)) return kiln_fail(ctx, KILN_E_SHAPE, "
            f'"y has length %lld in dimension 0 but idx has %lld", (long long){y}->shape[0], '
            f"(long long){idx}->shape[0]);",
            f"const int64_t ys = {step};",
            f"for (int64_t k = 0; k < {idx}->shape[0]; k++) {{",
            *_checked_index(idx, idx_dtype, out),
            f"*({ct} *)({out}->data + i * {out}->strides[0]) {assign} "
            f"*(const {ct} *)({y}->data + k * ys);",
            "}",
            "return 0;",
        ]
    )


def _array_walk(
    x: str, idx_list: Sequence[Any], indices: Sequence[str], node: Apply, first_index: int
) -> tuple[list[str], list[str], int]:
    """Return the setup and per-element statements of ``x[i0, i1, ...]`` (arrays only).

    The setup broadcasts the index arrays (right-aligned) into ``shape[0:B]``, followed
    by ``x``'s remaining dimensions (``nd`` in all); per element of that shape (its
    position in ``idx``), ``xp`` is the address of the element of ``x`` it reads or
    writes, each index checked and wrapped as NumPy does. Raises NoCImplementation for
    an index with slices or new axes.
    """
    if not idx_list or any(entry != "a" for entry in idx_list):
        raise NoCImplementation("AdvancedSubtensor with slices or new axes")
    k = len(idx_list)
    arrays = node.inputs[first_index : first_index + k]
    b = max(v.type.ndim for v in arrays)  # type: ignore[attr-defined]
    setup = [
        f"const kiln_array *ix[{k}] = {{{', '.join(indices[:k])}}};",
        f"const int64_t nd = {b} + {x}->ndim - {k};",
        f"int64_t shape[KILN_MAXDIM], ist[{k}][KILN_MAXDIM], idx[KILN_MAXDIM] = {{0}};",
        f"for (int64_t d = 0; d < {b}; d++) {{",
        "int64_t n = 1;",
        f"for (int i = 0; i < {k}; i++) {{",
        f"const int64_t id = d - ({b} - ix[i]->ndim);",
        "ist[i][d] = 0;",
        "if (id < 0 || ix[i]->shape[id] == 1) continue;",
        "if (n != 1 && ix[i]->shape[id] != n) return kiln_fail(ctx, KILN_E_INDEX, "
        '"shape mismatch: indexing arrays could not be broadcast together");',
        "n = ix[i]->shape[id]; ist[i][d] = ix[i]->strides[id];",
        "}",
        "shape[d] = n;",
        "}",
        f"for (int64_t t = {k}; t < {x}->ndim; t++) shape[{b} + t - {k}] = {x}->shape[t];",
    ]
    element = [f"char *xp = {x}->data;"]
    for i, v in enumerate(arrays):
        t = CTYPE[dtype_of(v)]
        element += [
            "{",
            f"const char *q = ix[{i}]->data;",
            f"for (int64_t d = 0; d < {b}; d++) q += idx[d] * ist[{i}][d];",
            f"int64_t j = (int64_t)*(const {t} *)q;",
            f"if (j < -{x}->shape[{i}] || j >= {x}->shape[{i}]) {{ status = kiln_fail(ctx, "
            f'KILN_E_INDEX, "index %lld is out of bounds for axis {i} with size %lld", '
            f"(long long)j, (long long){x}->shape[{i}]); goto done; }}",
            f"if (j < 0) j += {x}->shape[{i}];",
            f"xp += j * {x}->strides[{i}];",
            "}",
        ]
    element.append(
        f"for (int64_t t = {k}; t < {x}->ndim; t++) xp += idx[{b} + t - {k}] * {x}->strides[t];"
    )
    return setup, element, b


@c_funcify.register(AdvancedSubtensor)
def c_funcify_AdvancedSubtensor(op: AdvancedSubtensor, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return ``x[i0, i1, ...]`` for integer arrays on the leading axes (a new array)."""
    x, out = io.ins[0], io.outs[0]
    dtype = dtype_of(node.outputs[0])
    setup, element, _ = _array_walk(x, op.idx_list, io.ins[1:], node, 1)
    return "\n".join(
        [
            *setup,
            f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, nd, shape)) return ctx->code;",
            f"const int64_t size = kiln_itemsize[{DTYPE_CODE[dtype]}], n = kiln_size({out});",
            f"char *op = {out}->data;",
            "int status = 0;",
            "for (int64_t e = 0; e < n; e++) {",
            *element,
            "memcpy(op, xp, (size_t)size); op += size;",
            "kiln_advance(nd, shape, idx, 0, NULL, NULL);",
            "}",
            "done:",
            "return status;",
        ]
    )


@c_funcify.register(AdvancedIncSubtensor)
def c_funcify_AdvancedIncSubtensor(  # noqa: N802
    op: AdvancedIncSubtensor, node: Apply, io: NodeIO
) -> str:
    """Return ``x`` with ``x[i0, i1, ...]`` incremented by (or set to) ``y`` (broadcast).

    Repeated indices accumulate (``np.add.at``); with ``set_instead_of_inc`` the last
    write wins.
    """
    dtype = dtype_of(node.outputs[0])
    if dtype_of(node.inputs[1]) != dtype or (dtype == "bool" and not op.set_instead_of_inc):
        raise NoCImplementation("AdvancedIncSubtensor of another dtype, or adding booleans")
    out, y = io.outs[0], io.ins[1]
    setup, element, _ = _array_walk(out, op.idx_list, io.ins[2:], node, 2)
    y_shape = node.inputs[1].type.shape  # type: ignore[attr-defined]
    flags = ", ".join("1" if s == 1 else "0" for s in y_shape) or "0"
    t = CTYPE[dtype]
    write = "=" if op.set_instead_of_inc else "+="
    return "\n".join(
        [
            *_target(io, op.inplace),
            *(
                line.replace("return kiln_fail(", f"return kiln_release({out}), kiln_fail(")
                for line in setup
            ),
            f"static const uint8_t ybc[{max(len(y_shape), 1)}] = {{{flags}}};",
            "int64_t yst[1][KILN_MAXDIM];",
            "int status = 0;",
            f"if (kiln_update_strides(ctx, {y}, ybc, nd, shape, yst[0])) "
            "{ status = ctx->code; goto done; }",
            f"char *yp[1] = {{{y}->data}};",
            "int64_t n = 1;",
            "for (int64_t d = 0; d < nd; d++) n *= shape[d];",
            "for (int64_t e = 0; e < n; e++) {",
            *element,
            f"*({t} *)xp {write} *(const {t} *)yp[0];",
            "kiln_advance(nd, shape, idx, 1, yp, yst);",
            "}",
            "return 0;",
            "done:",
            f"kiln_release({out});",
            "return status;",
        ]
    )
