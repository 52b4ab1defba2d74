"""C code of Elemwise nodes (a scalar op or a fused Composite program) and DimShuffle."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln_c._funcify import CTYPE, DTYPE_CODE, NodeIO, c_funcify, dtype_of
from kiln_c._loops import loop_code
from kiln_c.scalar import composite_statements, is_long_loop, scalar_expr, scalar_template
from kiln_graph import Apply
from kiln_graph.ops import DimShuffle, Elemwise
from kiln_graph.scalar import Composite, ScalarOp


def scalar_body(
    op: ScalarOp, in_dtypes: Sequence[str], out_dtypes: Sequence[str], vector_math: bool = False
) -> Callable[[Sequence[str], Callable[[], str]], tuple[list[str], list[str]]]:
    """Return the loop body computing ``op`` (a scalar op or Composite) per element.

    ``vector_math``: the loop is long (:func:`kiln_c.scalar.scalar_expr`'s argument).

    Raises :class:`~kiln_c.NoCImplementation` now (not when writing the loop) if a
    scalar op of it has no C template.
    """
    if isinstance(op, Composite):
        composite_statements(op, [f"a{i}" for i in range(op.nin)], in_dtypes, lambda: "t")

        def composite(
            names: Sequence[str], fresh: Callable[[], str]
        ) -> tuple[list[str], list[str]]:
            return composite_statements(op, names, in_dtypes, fresh, vector_math)

        return composite
    scalar_template(op)
    expr_of = lambda names: scalar_expr(op, names, out_dtypes[0], in_dtypes, vector_math)  # noqa: E731
    expr_of([f"a{i}" for i in range(len(in_dtypes))])

    def single(names: Sequence[str], fresh: Callable[[], str]) -> tuple[list[str], list[str]]:
        return [], [expr_of(names)]

    return single


@c_funcify.register(Elemwise)
def c_funcify_Elemwise(op: Elemwise, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Compute, in one loop over the broadcast inputs, the scalar op (or Composite)."""
    in_dtypes = [dtype_of(v) for v in node.inputs]
    out_dtypes = [dtype_of(v) for v in node.outputs]
    body = scalar_body(op.scalar_op, in_dtypes, out_dtypes, is_long_loop(node))
    if all(v.type.ndim == 0 for v in (*node.inputs, *node.outputs)):  # type: ignore[attr-defined]
        return _scalar_code(io, in_dtypes, out_dtypes, body, dict(op.inplace_pattern))
    broadcast = [[s == 1 for s in v.type.shape] for v in node.inputs]  # type: ignore[attr-defined]
    return loop_code(io, in_dtypes, broadcast, out_dtypes, body, dict(op.inplace_pattern))


def _scalar_code(
    io: NodeIO,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    body: Callable[[Sequence[str], Callable[[], str]], tuple[list[str], list[str]]],
    inplace: dict[int, int],
) -> str:
    """Return the body of a node on 0-d values: C locals, no loop, no broadcasting.

    ``inplace`` maps an output to the input whose buffer it may take over.
    """
    counter = iter(range(1_000_000))
    names = [f"i{i}" for i in range(len(in_dtypes))]
    stmts, results = body(names, lambda: f"t{next(counter)}")
    lines = [
        f"const {CTYPE[d]} i{i} = *(const {CTYPE[d]} *){x}->data;"
        for i, (x, d) in enumerate(zip(io.ins, in_dtypes, strict=True))
    ]
    lines += stmts
    lines += [
        f"const {CTYPE[d]} r{j} = {r};"
        for j, (r, d) in enumerate(zip(results, out_dtypes, strict=True))
    ]
    for j, (out, d) in enumerate(zip(io.outs, out_dtypes, strict=True)):
        alloc = f"if (kiln_alloc(ctx, {out}, {DTYPE_CODE[d]}, 0, NULL)) return ctx->code;"
        source = inplace.get(j)
        if source is not None:
            alloc = (
                f"if (kiln_can_reuse({io.ins[source]}, {DTYPE_CODE[d]}, 0, NULL)) "
                f"kiln_view({out}, {io.ins[source]}); else {{ {alloc} }}"
            )
        lines.append(alloc)
        lines.append(f"*({CTYPE[d]} *){out}->data = r{j};")
    lines.append("return 0;")
    return "\n".join(lines)


@c_funcify.register(DimShuffle)
def c_funcify_DimShuffle(op: DimShuffle, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Return a view: dimensions reordered, ``"x"`` ones inserted, dropped ones checked to be 1."""
    (x,), (out,) = io.ins, io.outs
    kept = [d for d in op.new_order if d != "x"]
    lines = []
    for d in range(op.input_ndim):
        if d not in kept:
            lines.append(
                f"if ({x}->shape[{d}] != 1) return kiln_fail(ctx, KILN_E_SHAPE, "
                f'"cannot drop dimension {d} of length %lld (only length 1)", '
                f"(long long){x}->shape[{d}]);"
            )
    lines.append(f"kiln_view({out}, {x});")
    lines.append(f"{out}->ndim = {len(op.new_order)};")
    for k, axis in enumerate(op.new_order):
        if axis == "x":
            lines.append(f"{out}->shape[{k}] = 1; {out}->strides[{k}] = 0;")
        else:
            lines.append(f"{out}->shape[{k}] = {x}->shape[{axis}];")
            lines.append(f"{out}->strides[{k}] = {x}->strides[{axis}];")
    lines.append("return 0;")
    return "\n".join(lines)
