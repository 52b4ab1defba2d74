"""Elementwise ops as explicit loops: Elemwise (fused Composites included) and DimShuffle."""

from __future__ import annotations

from collections.abc import Callable

from kiln_graph import Apply, DimShuffle, Elemwise
from kiln_graph.ops import MatMul
from kiln_graph.scalar import Composite
from kiln_numba._funcify import CodeContext, np_dtype, numba_funcify
from kiln_numba._outline import outline_loops
from kiln_numba.scalar import composite_statements, scalar_expr


def loop_shape(ctx: CodeContext, label: str) -> list[str]:
    """Emit the run-time length of each output dimension (with the broadcast checks).

    A dimension takes its length from the first input that does not broadcast along it
    (static length other than 1); the others must match, as on the VM. The inputs all
    have the same number of dimensions (Elemwise, FusedReduce); the loop runs over them.
    """
    node = ctx.node
    sizes = []
    for d in range(ctx.input_type(0).ndim):
        sources = [i for i, v in enumerate(node.inputs) if not v.type.broadcastable[d]]  # type: ignore[attr-defined]
        statics = [ctx.input_type(i).shape[d] for i in sources]
        static = next((n for n in statics if n is not None), None)
        if not sources:
            sizes.append("1")
            continue
        # The length comes from an input whose length is static when there is one (the
        # statically known lengths agree: make_node checked them); every input of
        # unknown length is checked against it at run time.
        ref = next((i for i in sources if ctx.input_type(i).shape[d] is not None), sources[0])
        size = ctx.fresh("n")
        ctx.emit(f"{size} = {_array(ctx, ref)}.shape[{d}]")
        for i in sources:
            if i == ref or (ctx.input_type(i).shape[d] is not None and static is not None):
                continue
            message = (
                f"{label}: input {i} has a different length in dimension {d} than input "
                f"{ref}; kiln broadcasts only dimensions whose static length is 1 "
                "(declare shape=(..., 1, ...) or use expand_dims)"
            )
            ctx.emit(
                f"""
                if {_array(ctx, i)}.shape[{d}] != {size}:
                    raise ShapeMismatchError({message!r})
                """
            )
        sizes.append(size)
    return sizes


def _array(ctx: CodeContext, i: int) -> str:
    """Return the array whose shape input ``i`` has (its index vector when gathered)."""
    return ctx.gathers.get(i, ctx.inputs[i])


def _gathered_read(ctx: CodeContext, i: int, j: str, lines: list[str]) -> str:
    """Append the checked read of gathered input ``i`` at loop position ``j``; return it."""
    x, idx = ctx.inputs[i], ctx.gathers[i]
    k = ctx.fresh("g")
    message = f"{ctx.node.op}: input {i} gathers an index out of bounds of its vector"
    lines += [
        f"{k} = np.int64({idx}[{j}])",
        f"if {k} < 0:",
        f"    {k} += {x}.shape[0]",
        f"if {k} < 0 or {k} >= {x}.shape[0]:",
        f"    raise IndexError({message!r})",
    ]
    return f"{x}[{k}]"


def read_inputs(ctx: CodeContext, loop_vars: list[str]) -> tuple[list[str], list[str]]:
    """Return the statements reading every input at the loop position, and their values.

    Values are names or literals: one-element constants are inlined, scalar inputs
    (``ctx.scalars``) used as they are, gathered ones read through their index vector.
    """
    args: list[str] = []
    lines: list[str] = []
    for i, v in enumerate(ctx.node.inputs):
        lit = ctx.scalar_literal(i)
        if lit is not None:
            args.append(lit)
            continue
        if i in ctx.scalars:
            args.append(ctx.inputs[i])
            continue
        name = ctx.fresh("a")
        if i in ctx.gathers:
            read = _gathered_read(ctx, i, loop_vars[0], lines)
        else:
            read = index_expr(ctx.inputs[i], v.type.broadcastable, loop_vars)  # type: ignore[attr-defined]
        lines.append(f"{name} = {read}")
        args.append(name)
    return lines, args


def index_expr(name: str, broadcastable: tuple[bool, ...], loop_vars: list[str]) -> str:
    """Return ``name`` indexed at the loop position (index 0 along broadcast dimensions)."""
    if not broadcastable:
        return f"{name}[()]"
    idx = ", ".join("0" if b else j for b, j in zip(broadcastable, loop_vars, strict=True))
    return f"{name}[{idx}]"


#: Loops at least this long (or of lengths known only at run time) use vectorizable math
#: (:data:`kiln_numba.scalar.VECTOR_MATH`).
LONG_LOOP = 128


def is_long_loop(ctx: CodeContext) -> bool:
    """Whether the loop over the node's inputs runs :data:`LONG_LOOP` times or more."""
    node = ctx.node
    total = 1
    for d in range(ctx.input_type(0).ndim):
        lengths = [
            ctx.input_type(i).shape[d]
            for i, v in enumerate(node.inputs)
            if not v.type.broadcastable[d]  # type: ignore[attr-defined]
        ]
        if lengths and all(n is None for n in lengths):
            return True
        total *= next((n for n in lengths if n is not None), 1)
    return total >= LONG_LOOP


def emit_loops(
    ctx: CodeContext, sizes: list[str], body: Callable[[list[str]], list[str]]
) -> list[str]:
    """Emit nested ``for`` loops over ``sizes`` around ``body``; return the loop names."""
    loop_vars = [ctx.fresh("j") for _ in sizes]
    lines = []
    for depth, (j, n) in enumerate(zip(loop_vars, sizes, strict=True)):
        lines.append("    " * depth + f"for {j} in range({n}):")
    indent = "    " * len(sizes)
    lines.extend(indent + line for line in body(loop_vars))
    ctx.emit("\n".join(lines))
    return loop_vars


@numba_funcify.register(Elemwise)
@outline_loops
def numba_funcify_Elemwise(op: Elemwise, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write one loop nest over the output computing the scalar op (or Composite program)."""
    out_t = ctx.output_type(0)
    (out,) = ctx.outputs
    sizes = loop_shape(ctx, str(op))
    inplace = dict(op.inplace_pattern)
    if 0 in inplace and inplace[0] not in (*ctx.gathers, *ctx.scalars):  # those have no buffer
        ctx.emit(f"{out} = {ctx.inputs[inplace[0]]}")
    else:
        shape = "(" + "".join(f"{s}, " for s in sizes) + ")"
        ctx.emit(f"{out} = empty({shape}, {np_dtype(out_t.dtype)})")
    in_dtypes = [ctx.input_type(i).dtype for i in range(len(node.inputs))]
    vector_math = is_long_loop(ctx)

    def body(loop_vars: list[str]) -> list[str]:
        lines, args = read_inputs(ctx, loop_vars)
        target = index_expr(out, (False,) * out_t.ndim, loop_vars)
        if isinstance(op.scalar_op, Composite):
            steps, results = composite_statements(
                op.scalar_op, args, in_dtypes, ctx.fresh, vector_math
            )
            lines.extend(steps)
            lines.append(f"{target} = {results[0]}")
        else:
            expr = scalar_expr(op.scalar_op, args, out_t.dtype, in_dtypes, vector_math)
            lines.append(f"{target} = {expr}")
        return lines

    emit_loops(ctx, sizes, body)


@numba_funcify.register(DimShuffle)
def numba_funcify_DimShuffle(op: DimShuffle, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write a view of the input: basic indexing, after a strided transposition if needed.

    Dropped dimensions (static length 1) are indexed with ``0``, new ones with
    ``None``; kept dimensions out of order become a strided view first (``x.T`` for a
    full reversal). ``np.transpose`` with axes, ``np.swapaxes`` and ``reshape`` are
    avoided: each costs Numba seconds of compile time, the first ones about 6 s in
    every process. A 0-d output (or one made only of new dimensions) is a one-element
    copy, since indexing every dimension gives Numba a scalar, not an array.
    """
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    kept = op.transposition
    if not kept:
        # Every input dimension has length 1: copy its one element.
        shape = "(" + "1, " * len(op.new_order) + ")"
        element = "[()]" if op.input_ndim == 0 else "[" + "0, " * op.input_ndim + "]"
        ctx.emit(
            f"""
            {out} = empty({shape}, {np_dtype(ctx.output_type(0).dtype)})
            {out}[{"0, " * len(op.new_order) or "()"}] = {x}{element}
            """
        )
        return
    index: list[str] = []
    producer = node.inputs[0].owner
    if (
        list(kept) == sorted(kept)
        and "x" not in op.new_order
        and producer is not None
        and isinstance(producer.op, MatMul)
    ):
        # A product's result is a new C-contiguous array: dropping its length-1
        # dimensions by reshaping keeps the C layout, so that loops over it vectorize
        # (indexing, ``y[:, 0]``, gives Numba's layout 'A', and scalar loops: M3's
        # log-likelihood over ``X @ beta`` ran 2.5x slower).
        shape = "".join(f"{x}.shape[{d}], " for d in kept)
        ctx.emit(f"{out} = {x}.reshape(({shape}))")
        return
    if list(kept) == sorted(kept):
        src = x
        position = 0  # the next input dimension the index consumes
        for o in op.new_order:
            if o == "x":
                index.append("None")
                continue
            index.extend("0" for _ in range(position, int(o)))  # dropped before ``o``
            index.append(":")
            position = int(o) + 1
        index.extend("0" for _ in range(position, op.input_ndim))
    else:
        src = ctx.fresh("t")
        if not op.drop and kept == tuple(reversed(range(op.input_ndim))):
            ctx.emit(f"{src} = {x}.T")
        else:
            shape = "".join(f"{x}.shape[{d}], " for d in kept)
            strides = "".join(f"{x}.strides[{d}], " for d in kept)
            ctx.emit(
                f"{src} = np.lib.stride_tricks.as_strided({x}, shape=({shape}), "
                f"strides=({strides}))"
            )
        index = ["None" if o == "x" else ":" for o in op.new_order]
    if all(i == ":" for i in index):
        ctx.emit(f"{out} = {src}")
    else:
        ctx.emit(f"{out} = {src}[{', '.join(index)}]")
