"""Reductions as explicit loops: CAReduce, FusedReduce, Argmax and CumSum.

A reduction is one loop nest over its input in C order, accumulating into the output
at the kept indices, so memory is read once. When the innermost dimensions are all
reduced, they accumulate into a local scalar (which LLVM keeps in a register), and
float32 sums accumulate that scalar in float64; otherwise the output, initialized with
the reduction's identity, is the accumulator. ``FusedReduce`` evaluates its scalar
program per element inside the same loop nest, so ``sum(exp(x) * y)`` allocates
nothing but its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kiln_graph import Apply, Composite
from kiln_graph.ops import Argmax, CAReduce, CumSum, FusedReduce
from kiln_numba._funcify import CodeContext, NoNumbaImplementation, literal, np_dtype, numba_funcify
from kiln_numba._outline import outline_loops
from kiln_numba.elemwise import index_expr, is_long_loop, loop_shape, read_inputs
from kiln_numba.scalar import VECTORIZABLE, cast_expr, composite_statements, scalar_expr

#: ``value_lines(loop_vars) -> (statements, name)``: the element at the loop position.
ValueFn = Callable[[list[str]], tuple[list[str], str]]


def _reject_unsupported(ctx: CodeContext, kind: str | None = None, *extra: str) -> None:
    """Fall back to object mode for dtypes Numba's CPU target does not handle here."""
    dtypes = [ctx.input_type(i).dtype for i in range(len(ctx.node.inputs))]
    dtypes += [ctx.output_type(i).dtype for i in range(len(ctx.node.outputs))]
    dtypes += extra
    if "float16" in dtypes:
        raise NoNumbaImplementation(f"{ctx.node.op}: float16 is not supported by Numba")
    if kind in ("max", "min", "argmax") and any(d.startswith("complex") for d in dtypes):
        raise NoNumbaImplementation(f"{ctx.node.op}: complex inputs are not ordered")


def identity(kind: str, dtype: str) -> str:
    """Return the source of the identity of reduction ``kind`` in ``dtype``."""
    if kind in ("sum", "prod"):
        return number(0 if kind == "sum" else 1, dtype)
    if kind == "all":
        return "True"
    if kind == "any":
        return "False"
    lowest = kind == "max"
    if dtype == "bool":
        return "False" if lowest else "True"
    if np.dtype(dtype).kind == "f":
        return literal(-np.inf if lowest else np.inf, dtype)
    info = np.iinfo(dtype)
    return literal(info.min if lowest else info.max, dtype)


def number(value: int, dtype: str) -> str:
    """Return the source of the small integer ``value`` as ``dtype`` (complex included)."""
    if np.dtype(dtype).kind == "c":
        return f"{np_dtype(dtype)}({value})"
    return literal(value, dtype)


def combine(kind: str, target: str, value: str, is_float: bool) -> list[str]:
    """Return statements folding ``value`` into ``target`` (NaN propagates through max/min)."""
    if kind == "sum":
        return [f"{target} += {value}"]
    if kind == "prod":
        return [f"{target} *= {value}"]
    if kind == "all":
        return [f"if not {value}:", f"    {target} = False"]
    if kind == "any":
        return [f"if {value}:", f"    {target} = True"]
    cmp = ">" if kind == "max" else "<"
    nan = f" or {value} != {value}" if is_float else ""
    return [f"if {value} {cmp} {target}{nan}:", f"    {target} = {value}"]


def value_cast(expr: str, src: str, dst: str, kind: str) -> str:
    """Return ``expr`` (of dtype ``src``) as the accumulator's ``dst`` (truth for all/any)."""
    if kind in ("all", "any"):
        return expr if src == "bool" else f"bool({expr})"
    return expr if src == dst else cast_expr(expr, dst)


def emit_reduction(
    ctx: CodeContext,
    kind: str,
    axes: tuple[int, ...],
    sizes: list[str],
    value: ValueFn,
    value_dtype: str,
) -> None:
    """Emit one loop nest over ``sizes`` folding ``value`` over ``axes`` into the output.

    The innermost run of reduced dimensions (if any) accumulates into a local scalar;
    when every reduced dimension is in that run, each output element is written once
    and needs no initialization.
    """
    (out,) = ctx.outputs
    out_dtype = ctx.output_type(0).dtype
    ndim = len(sizes)
    kept = [d for d in range(ndim) if d not in axes]
    split = ndim
    while split > 0 and split - 1 in axes:
        split -= 1
    direct = bool(axes) and split == ndim - len(axes)  # the reduced dims are the innermost
    is_float = np.dtype(value_dtype).kind == "f"
    if kind in ("max", "min") and axes:
        empty = " or ".join(f"{sizes[a]} == 0" for a in axes)
        message = f"{ctx.node.op}: cannot reduce a zero-length axis (the reduction has no identity)"
        ctx.emit(
            f"""
            if {empty}:
                raise ValueError({message!r})
            """
        )
    out_shape = "(" + "".join(f"{sizes[d]}, " for d in kept) + ")"
    if direct:
        ctx.emit(f"{out} = empty({out_shape}, {np_dtype(out_dtype)})")
    else:
        ident = identity(kind, out_dtype)
        ctx.emit(f"{out} = full({out_shape}, {ident}, {np_dtype(out_dtype)})")
    acc_dtype = "float64" if kind == "sum" and out_dtype == "float32" else out_dtype
    loop_vars = [ctx.fresh("j") for _ in range(ndim)]
    target = index_expr(out, (False,) * len(kept), [loop_vars[d] for d in kept])
    lines = []
    for depth in range(split):
        lines.append("    " * depth + f"for {loop_vars[depth]} in range({sizes[depth]}):")
    outer = "    " * split
    steps, v = value(loop_vars)
    elem = ctx.fresh("x")
    if split < ndim:
        acc = ctx.fresh("acc")
        lines.append(outer + f"{acc} = {identity(kind, acc_dtype)}")
        if kind == "sum" and is_float and split == ndim - 1 and calls_vector_math(steps):
            value_ = value_cast(v, value_dtype, acc_dtype, kind)
            lines += _two_pass_sum(ctx, split, sizes[split], loop_vars[split], steps, value_, acc)
        else:
            for depth in range(split, ndim):
                lines.append("    " * depth + f"for {loop_vars[depth]} in range({sizes[depth]}):")
            inner = "    " * ndim
            lines += [inner + s for s in steps]
            lines.append(inner + f"{elem} = {value_cast(v, value_dtype, acc_dtype, kind)}")
            lines += [inner + s for s in combine(kind, acc, elem, is_float)]
        if direct:
            lines.append(outer + f"{target} = {value_cast(acc, acc_dtype, out_dtype, kind)}")
        else:
            lines += [outer + s for s in combine(kind, target, acc, is_float)]
    else:
        lines += [outer + s for s in steps]
        lines.append(outer + f"{elem} = {value_cast(v, value_dtype, out_dtype, kind)}")
        lines += [outer + s for s in combine(kind, target, elem, is_float)]
    ctx.emit("\n".join(lines))


def calls_vector_math(steps: Sequence[str]) -> bool:
    """Whether ``steps`` call a function of :mod:`kiln_numba._vector_math`."""
    return any(name in step for step in steps for name in VECTORIZABLE)


def _two_pass_sum(
    ctx: CodeContext, depth: int, size: str, var: str, steps: list[str], value: str, acc: str
) -> list[str]:
    """Return the innermost summed loop in two passes: values into a buffer, then added.

    A loop adding into one float accumulator cannot become SIMD code (that would reorder
    the additions), but the values it adds can: the first loop computes them (and
    vectorizes, as :mod:`kiln_numba._vector_math`'s functions do), the second adds them
    in the order of a single loop, so the sum is the same to the bit. The buffer (one
    row of the summed axis) is allocated once per call. Seen on M3's log-likelihood
    (10,000 ``log1p``): 153 us in one loop, 31 us in two.
    """
    buf, k = ctx.fresh("buf"), ctx.fresh("k")
    ctx.emit(f"{buf} = empty({size}, np.float64)")
    pad = "    " * depth
    return [
        pad + f"for {var} in range({size}):",
        *(pad + "    " + s for s in steps),
        pad + f"    {buf}[{var}] = {value}",
        pad + f"for {k} in range({size}):",
        pad + f"    {acc} += {buf}[{k}]",
    ]


@numba_funcify.register(CAReduce)
@outline_loops
def numba_funcify_CAReduce(op: CAReduce, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Fold the input over ``op.axis`` in one pass (sum, prod, max, min, all, any)."""
    _reject_unsupported(ctx, op.kind)
    (x,) = ctx.inputs
    x_t = ctx.input_type(0)
    sizes = [f"{x}.shape[{d}]" for d in range(x_t.ndim)]

    def value(loop_vars: list[str]) -> tuple[list[str], str]:
        return [], index_expr(x, (False,) * x_t.ndim, loop_vars)

    emit_reduction(ctx, op.kind, op.axis, sizes, value, x_t.dtype)


@numba_funcify.register(FusedReduce)
@outline_loops
def numba_funcify_FusedReduce(op: FusedReduce, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Evaluate the scalar program per element of the broadcast inputs and fold it."""
    in_dtypes = [ctx.input_type(i).dtype for i in range(len(node.inputs))]
    pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
    _reject_unsupported(ctx, op.kind, pre_dtype)
    sizes = loop_shape(ctx, str(op))
    vector_math = is_long_loop(ctx)

    def value(loop_vars: list[str]) -> tuple[list[str], str]:
        lines, args = read_inputs(ctx, loop_vars)
        if isinstance(op.scalar_op, Composite):
            steps, results = composite_statements(
                op.scalar_op, args, in_dtypes, ctx.fresh, vector_math
            )
            return lines + steps, results[0]
        name = ctx.fresh("e")
        expr = scalar_expr(op.scalar_op, args, pre_dtype, in_dtypes, vector_math)
        lines.append(f"{name} = {expr}")
        return lines, name

    emit_reduction(ctx, op.kind, op.axis, sizes, value, pre_dtype)


def _nest(sizes: Sequence[str], loop_vars: Sequence[str], reverse: bool = False) -> list[str]:
    """Return the ``for`` headers of a loop nest (each loop backwards if ``reverse``)."""
    lines = []
    for depth, (j, n) in enumerate(zip(loop_vars, sizes, strict=True)):
        rng = f"range({n} - 1, -1, -1)" if reverse else f"range({n})"
        lines.append("    " * depth + f"for {j} in {rng}:")
    return lines


@numba_funcify.register(Argmax)
def numba_funcify_Argmax(op: Argmax, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Find the first index of the maximum (the first NaN if any, as NumPy)."""
    _reject_unsupported(ctx, "argmax")
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    x_t = ctx.input_type(0)
    ndim = x_t.ndim
    is_float = np.dtype(x_t.dtype).kind == "f"
    sizes = [f"{x}.shape[{d}]" for d in range(ndim)]
    reduced = list(range(ndim)) if op.axis is None else [op.axis]
    kept = [d for d in range(ndim) if d not in reduced]
    # As on the VM: an empty input is an error even when the reduced axis is not empty.
    message = f"{op}: cannot take the argmax of an empty array"
    ctx.emit(
        f"""
        if {x}.size == 0:
            raise ValueError({message!r})
        """
    )
    loop_vars = [ctx.fresh("j") for _ in range(ndim)]
    best, idx, pos, v = ctx.fresh("best"), ctx.fresh("idx"), ctx.fresh("k"), ctx.fresh("v")
    ctx.emit(f"{out} = empty((" + "".join(f"{sizes[d]}, " for d in kept) + "), np.int64)")
    # Kept dimensions outside, reduced ones inside (C order among each group).
    order = kept + reduced
    lines = _nest([sizes[d] for d in kept], [loop_vars[d] for d in kept])
    outer = "    " * len(kept)
    start = ["0" if d in reduced else loop_vars[d] for d in range(ndim)]
    lines += [
        outer + f"{best} = {index_expr(x, (False,) * ndim, start)}",
        outer + f"{idx} = 0",
        outer + f"{pos} = 0",
    ]
    inner_nest = _nest([sizes[d] for d in reduced], [loop_vars[d] for d in reduced])
    lines += [outer + line for line in inner_nest]
    inner = "    " * len(order)
    better = f"{v} > {best}"
    if is_float:
        # Once the best is NaN it stays; a NaN is better than any number.
        better = f"{best} == {best} and ({v} > {best} or {v} != {v})"
    lines += [
        inner + f"{v} = {index_expr(x, (False,) * ndim, loop_vars)}",
        inner + f"if {better}:",
        inner + f"    {best} = {v}",
        inner + f"    {idx} = {pos}",
        inner + f"{pos} += 1",
    ]
    target = index_expr(out, (False,) * len(kept), [loop_vars[d] for d in kept])
    lines.append(outer + f"{target} = {idx}")
    ctx.emit("\n".join(lines))


@numba_funcify.register(CumSum)
def numba_funcify_CumSum(op: CumSum, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Accumulate along the axis (or the flattened input) in one pass, forward or backward."""
    _reject_unsupported(ctx)
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    x_t = ctx.input_type(0)
    out_dtype = ctx.output_type(0).dtype
    ndim = x_t.ndim
    sizes = [f"{x}.shape[{d}]" for d in range(ndim)]
    loop_vars = [ctx.fresh("j") for _ in range(ndim)]
    element = cast_expr(index_expr(x, (False,) * ndim, loop_vars), out_dtype)
    if x_t.dtype == out_dtype:
        element = index_expr(x, (False,) * ndim, loop_vars)
    dt = np_dtype(out_dtype)
    if op.axis is None:
        # The flattened input in C order; backwards from the end when reversed.
        acc, pos = ctx.fresh("acc"), ctx.fresh("k")
        ctx.emit(f"{out} = empty(({x}.size,), {dt})")
        ctx.emit(f"{acc} = {number(0, out_dtype)}")
        ctx.emit(f"{pos} = {x}.size - 1" if op.reverse else f"{pos} = 0")
        lines = _nest(sizes, loop_vars, reverse=op.reverse)
        inner = "    " * ndim
        step = "-=" if op.reverse else "+="
        lines += [inner + f"{acc} += {element}", inner + f"{out}[{pos}] = {acc}"]
        lines.append(inner + f"{pos} {step} 1")
        ctx.emit("\n".join(lines))
        return
    # Along one axis: C order, that axis' loop running forward (or backward), each
    # element adding the previous one along the axis.
    a = op.axis
    ctx.emit(f"{out} = empty({x}.shape, {dt})")
    lines = []
    for depth in range(ndim):
        j, n = loop_vars[depth], sizes[depth]
        rng = f"range({n} - 1, -1, -1)" if op.reverse and depth == a else f"range({n})"
        lines.append("    " * depth + f"for {j} in {rng}:")
    inner = "    " * ndim
    v = ctx.fresh("v")
    prev_vars = list(loop_vars)
    prev_vars[a] = f"{loop_vars[a]} + 1" if op.reverse else f"{loop_vars[a]} - 1"
    prev = index_expr(out, (False,) * ndim, prev_vars)
    first = f"{loop_vars[a]} < {sizes[a]} - 1" if op.reverse else f"{loop_vars[a]} > 0"
    lines += [
        inner + f"{v} = {element}",
        inner + f"if {first}:",
        inner + f"    {v} += {prev}",
        inner + f"{index_expr(out, (False,) * ndim, loop_vars)} = {v}",
    ]
    ctx.emit("\n".join(lines))
