"""The loops of elementwise and reduction nodes: one strided, broadcasting loop each.

:func:`loop_code` writes a node's function body: the inputs broadcast (kiln's rule:
only dimensions whose static length is 1 broadcast; other lengths must agree), the
outputs allocated (or an input's buffer taken over, when the in-place plan says so and
nothing else holds it), then one loop over the broadcast shape running the node's
scalar statements. Where every input is C-contiguous of the full shape or a single
element, the loop is a flat ``for`` over indices (what the compiler vectorizes);
otherwise the last dimension is an inner ``for`` over strides and the others advance
as an odometer (``kiln_advance``). A reduction is the same loop with the output's
strides zero along the reduced axes: each element combines into its output cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from kiln_c._funcify import CTYPE, DTYPE_CODE, NodeIO, literal
from kiln_c.scalar import calls_vector_math, simd_or_scalar

#: ``(input names, fresh name maker) -> (statements, output expressions)``.
Body = Callable[[Sequence[str], Callable[[], str]], tuple[list[str], list[str]]]


@dataclasses.dataclass(frozen=True)
class Reduction:
    """Combine the loop's one result into the output along ``axis`` (``kind`` of CAReduce)."""

    kind: str
    axis: tuple[int, ...]


def identity(kind: str, dtype: str) -> str:
    """Return the C literal that starts a ``kind`` reduction in ``dtype``."""
    if kind in ("sum", "any"):
        return literal(0, dtype)
    if kind in ("prod", "all"):
        return literal(1, dtype)
    if dtype.startswith("float"):
        return literal(float("-inf") if kind == "max" else float("inf"), dtype)
    if dtype == "bool":
        return "0" if kind == "max" else "1"
    info = np.iinfo(dtype)
    return literal(info.min if kind == "max" else info.max, dtype)


def combine(kind: str, acc: str, value: str, dtype: str) -> str:
    """Return the C expression combining ``value`` into the accumulator ``acc``."""
    if kind == "sum":
        return f"({acc} + {value})" if dtype != "bool" else f"({acc} || {value})"
    if kind == "prod":
        return f"({acc} * {value})" if dtype != "bool" else f"({acc} && {value})"
    if kind == "all":
        return f"({acc} && {value})"
    if kind == "any":
        return f"({acc} || {value})"
    if dtype.startswith("float"):
        suffix = "f" if dtype == "float32" else ""
        name = "maximum" if kind == "max" else "minimum"
        return f"kiln_{name}{suffix}({acc}, {value})"
    cmp = ">=" if kind == "max" else "<="
    return f"({acc} {cmp} {value} ? {acc} : {value})"


def loop_code(
    io: NodeIO,
    in_dtypes: Sequence[str],
    in_broadcast: Sequence[Sequence[bool]],
    out_dtypes: Sequence[str],
    body: Body,
    inplace: dict[int, int] | None = None,
    reduction: Reduction | None = None,
) -> str:
    """Return the body of a node's function: one loop computing ``body`` per element.

    ``in_broadcast[i][d]``: input ``i`` broadcasts along ``d``. ``inplace`` maps an
    output to the input whose buffer it may take over. With ``reduction``, ``body``
    gives one value, converted to the one output's dtype and combined into it.
    """
    n_in, n_out = len(in_dtypes), len(out_dtypes)
    nd = len(in_broadcast[0]) if in_broadcast else 0
    lines = [f"kiln_array *in[{max(n_in, 1)}] = {{{', '.join(io.ins) or 'NULL'}}};"]
    flags = ", ".join("1" if b else "0" for bc in in_broadcast for b in bc) or "0"
    lines.append(f"static const uint8_t bc[{max(n_in * nd, 1)}] = {{{flags}}};")
    lines.append("int64_t shape[KILN_MAXDIM];")
    lines.append(f"int64_t st[{n_in + n_out}][KILN_MAXDIM];")
    lines.append(f"if (kiln_broadcast(ctx, {n_in}, in, bc, {nd}, shape, st)) return ctx->code;")
    lines.append("int64_t n = 1;")
    lines.append(f"for (int d = 0; d < {nd}; d++) n *= shape[d];")
    counter = iter(range(1_000_000))

    def fresh() -> str:
        return f"t{next(counter)}"

    loads = [f"i{i}" for i in range(n_in)]
    stmts, results = body(loads, fresh)
    lines_ = simd_or_scalar([*stmts, *results])  # vector math only where the loop is SIMD
    stmts, results = lines_[: len(stmts)], lines_[len(stmts) :]
    if reduction is None:
        for j, (out, dtype) in enumerate(zip(io.outs, out_dtypes, strict=True)):
            alloc = f"kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {nd}, shape)"
            source = (inplace or {}).get(j)
            if source is not None:
                lines.append(
                    f"if (kiln_can_reuse(in[{source}], {DTYPE_CODE[dtype]}, {nd}, shape)) "
                    f"kiln_view({out}, in[{source}]); else if ({alloc}) return ctx->code;"
                )
            else:
                lines.append(f"if ({alloc}) return ctx->code;")
            lines.append(f"for (int d = 0; d < {nd}; d++) st[{n_in + j}][d] = {out}->strides[d];")
        lines.extend(_flat_loop(io, in_dtypes, in_broadcast, out_dtypes, stmts, results))
        lines.extend(_strided_loop(io, in_dtypes, out_dtypes, stmts, results, nd, None))
        return "\n".join(lines)
    (dtype,) = out_dtypes
    (out,) = io.outs
    kept = [d for d in range(nd) if d not in reduction.axis]
    lines.append("int64_t oshape[KILN_MAXDIM];")
    for k, d in enumerate(kept):
        lines.append(f"oshape[{k}] = shape[{d}];")
    alloc = f"kiln_alloc(ctx, {out}, {DTYPE_CODE[dtype]}, {len(kept)}, oshape)"
    lines.append(f"if ({alloc}) return ctx->code;")
    ctype = CTYPE[dtype]
    lines.append(f"{{ {ctype} *o = ({ctype} *){out}->data; int64_t m = kiln_size({out});")
    lines.append(f"for (int64_t k = 0; k < m; k++) o[k] = {identity(reduction.kind, dtype)}; }}")
    for d in range(nd):
        stride = f"{out}->strides[{kept.index(d)}]" if d in kept else "0"
        lines.append(f"st[{n_in}][{d}] = {stride};")
    inner_bc = [bool(bc) and bc[-1] for bc in in_broadcast]
    lines.extend(_strided_loop(io, in_dtypes, out_dtypes, stmts, results, nd, reduction, inner_bc))
    return "\n".join(lines)


#: The bytes of one element of each dtype.
_ITEMSIZE = {name: int(np.dtype(name).itemsize) for name in CTYPE}


def _loads(in_dtypes: Sequence[str], address: Callable[[int], str]) -> list[str]:
    return [
        f"const {CTYPE[d]} i{i} = *(const {CTYPE[d]} *)({address(i)});"
        for i, d in enumerate(in_dtypes)
    ]


def _flat_loop(
    io: NodeIO,
    in_dtypes: Sequence[str],
    in_broadcast: Sequence[Sequence[bool]],
    out_dtypes: Sequence[str],
    stmts: list[str],
    results: list[str],
) -> list[str]:
    """Return the loop over flat indices, taken when every input is whole or one element.

    What the static broadcast pattern fixes is written as constants (the compiler
    vectorizes the loop): an input broadcast along every dimension is one element, read
    once before the loop; one broadcast along none is read at ``k``.
    """
    kinds = ["one" if all(bc) else "whole" if not any(bc) else "either" for bc in in_broadcast]
    conditions = []
    for i, kind in enumerate(kinds):
        whole = f"(kiln_size(in[{i}]) == n && kiln_is_contiguous(in[{i}]))"
        one = f"kiln_size(in[{i}]) == 1"
        conditions.append({"one": one, "whole": whole, "either": f"({whole} || {one})"}[kind])
    lines = [f"if ({' && '.join(conditions) or '1'}) {{"]
    loads = []
    for i, (d, kind) in enumerate(zip(in_dtypes, kinds, strict=True)):
        lines.append(f"const {CTYPE[d]} *x{i} = (const {CTYPE[d]} *)in[{i}]->data;")
        if kind == "one":
            lines.append(f"const {CTYPE[d]} i{i} = x{i}[0];")
        elif kind == "whole":
            loads.append(f"const {CTYPE[d]} i{i} = x{i}[k];")
        else:
            lines.append(f"const int64_t s{i} = kiln_size(in[{i}]) == 1 ? 0 : 1;")
            loads.append(f"const {CTYPE[d]} i{i} = x{i}[k * s{i}];")
    for j, d in enumerate(out_dtypes):
        lines.append(f"{CTYPE[d]} *o{j} = ({CTYPE[d]} *){io.outs[j]}->data;")
    if calls_vector_math(stmts):
        lines.append("KILN_IVDEP")  # each output written at k, no input read elsewhere
    lines.append("for (int64_t k = 0; k < n; k++) {")
    lines.extend(loads)
    lines.extend(stmts)
    lines.extend(f"o{j}[k] = {r};" for j, r in enumerate(results))
    lines.append("}")
    lines.append("return 0;")
    lines.append("}")
    return lines


def _strided_loop(
    io: NodeIO,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    stmts: list[str],
    results: list[str],
    nd: int,
    reduction: Reduction | None,
    inner_bc: Sequence[bool] = (),
) -> list[str]:
    n_in, n_out = len(in_dtypes), len(out_dtypes)
    np_ = n_in + n_out
    ptrs = [f"in[{i}]->data" for i in range(n_in)] + [f"{o}->data" for o in io.outs]
    lines = [
        "{",
        f"char *p[{np_}] = {{{', '.join(ptrs)}}};",
        "int64_t idx[KILN_MAXDIM] = {0};",
        f"const int64_t inner = {f'shape[{nd - 1}]' if nd else '1'};",
        "const int64_t outer = inner > 0 ? n / inner : 0;",
    ]
    last = nd - 1
    step = [f"st[{k}][{last}]" if nd else "0" for k in range(np_)]
    if reduction is not None and nd:
        # The inner dimension is reduced: accumulate in a register, store once per row.
        (r,), (d,) = results, out_dtypes
        target = f"*({CTYPE[d]} *)p[{n_in}]"
        # Eight independent accumulators (as NumPy's pairwise sum has), then a tree.
        kind = reduction.kind
        lanes = [f"a[{u}]" for u in range(8)]
        while len(lanes) > 1:
            lanes = [combine(kind, x, y, d) for x, y in zip(lanes[::2], lanes[1::2], strict=True)]
        # Inputs broadcast along the inner dimension (statically) step by 0; where the
        # others step by one element, a copy of the loop says so (and is vectorized).
        bc = list(inner_bc) or [False] * n_in
        step = ["0" if bc[i] else step[i] for i in range(n_in)] + step[n_in:]
        unit = [f"{step[i]} == {_ITEMSIZE[in_dtypes[i]]}" for i in range(n_in) if not bc[i]] or [
            "1"
        ]
        lines.append(f"if ({step[n_in]} == 0) {{")
        lines.append(f"const int unit = {' && '.join(unit)};")
        lines.append("for (int64_t q = 0; q < outer; q++) {")
        lines.append(f"{CTYPE[d]} acc = {target};")
        lines.append(f"{CTYPE[d]} a[8];")
        lines.append(f"for (int u = 0; u < 8; u++) a[u] = {identity(kind, d)};")
        lines.append("int64_t j = 0;")
        for variant in ("unit", "strided"):
            if variant == "unit":
                lines.append("if (unit) {")
                at = [f"p[{i}]" if bc[i] else f"p[{i}] + (j + u) * {_ITEMSIZE[t]}"
                      for i, t in enumerate(in_dtypes)]  # fmt: skip
            else:
                lines.append("} else {")
                at = [f"p[{i}] + (j + u) * {step[i]}" for i in range(n_in)]
            lines.append("for (; j + 8 <= inner; j += 8) {")
            lines.append("for (int u = 0; u < 8; u++) {")
            lines.extend(_loads(in_dtypes, lambda i, at=at: at[i]))  # type: ignore[misc]
            lines.extend(stmts)
            lines.append(f"a[u] = {combine(kind, 'a[u]', r, d)};")
            lines.append("}")
            lines.append("}")
        lines.append("}")
        lines.append("for (; j < inner; j++) {")
        lines.extend(_loads(in_dtypes, lambda i: f"p[{i}] + j * {step[i]}"))
        lines.extend(stmts)
        lines.append(f"acc = {combine(kind, 'acc', r, d)};")
        lines.append("}")
        lines.append(f"{target} = {combine(kind, 'acc', lanes[0], d)};")
        if nd > 1:
            lines.append(f"kiln_advance({nd - 1}, shape, idx, {np_}, p, st);")
        lines.append("}")
        lines.append("return 0;")
        lines.append("}")
    lines.append("for (int64_t q = 0; q < outer; q++) {")
    lines.append("for (int64_t j = 0; j < inner; j++) {")
    lines.extend(_loads(in_dtypes, lambda i: f"p[{i}] + j * {step[i]}"))
    lines.extend(stmts)
    for j, (r, d) in enumerate(zip(results, out_dtypes, strict=True)):
        target = f"*({CTYPE[d]} *)(p[{n_in + j}] + j * {step[n_in + j]})"
        if reduction is None:
            lines.append(f"{target} = {r};")
        else:
            lines.append(f"{target} = {combine(reduction.kind, target, r, d)};")
    lines.append("}")
    if nd > 1:
        lines.append(f"kiln_advance({nd - 1}, shape, idx, {np_}, p, st);")
    lines.append("}")
    lines.append("}")
    lines.append("return 0;")
    return lines
