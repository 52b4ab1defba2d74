"""Shape ops in Numba: shapes, shape vectors, reshape, alloc, join/split, arange and eye.

Run-time checks mirror each Op's ``perform`` on the VM and raise ``ValueError`` (Numba
messages are constant strings: they name the op and the rule, not the values).
"""

from __future__ import annotations

import numpy as np

from kiln_graph import Apply, Constant
from kiln_graph.ops import Alloc, ARange, Eye, Join, MakeVector, Reshape, Shape, ShapeI, Split
from kiln_numba._funcify import CodeContext, NoNumbaImplementation, literal, np_dtype, numba_funcify
from kiln_numba.elemwise import emit_loops, index_expr
from kiln_numba.scalar import cast_expr


def scalar_input(ctx: CodeContext, i: int) -> str:
    """Return the source of 0-d input ``i``'s value (a literal when it is a constant)."""
    lit = ctx.scalar_literal(i)
    return lit if lit is not None else f"{ctx.inputs[i]}[()]"


def _tuple(items: list[str]) -> str:
    return "(" + "".join(f"{s}, " for s in items) + ")"


def _raise_if(ctx: CodeContext, condition: str, message: str) -> None:
    ctx.emit(
        f"""
        if {condition}:
            raise ValueError({message!r})
        """
    )


def _reject_float16(ctx: CodeContext) -> None:
    dtypes = [ctx.input_type(i).dtype for i in range(len(ctx.node.inputs))]
    dtypes += [ctx.output_type(i).dtype for i in range(len(ctx.node.outputs))]
    if "float16" in dtypes:
        raise NoNumbaImplementation(f"{ctx.node.op}: float16 is not supported by Numba")


@numba_funcify.register(Shape)
def numba_funcify_Shape(op: Shape, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write the input's shape into a new int64 vector."""
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    ndim = ctx.input_type(0).ndim
    ctx.emit(f"{out} = empty(({ndim},), np.int64)")
    for d in range(ndim):
        ctx.emit(f"{out}[{d}] = {x}.shape[{d}]")


@numba_funcify.register(ShapeI)
def numba_funcify_ShapeI(op: ShapeI, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write the length of dimension ``op.i`` into a 0-d int64 array."""
    (x,) = ctx.inputs
    (out,) = ctx.outputs
    ctx.emit(f"{out} = empty((), np.int64)")
    ctx.emit(f"{out}[()] = {x}.shape[{op.i}]")


@numba_funcify.register(MakeVector)
def numba_funcify_MakeVector(op: MakeVector, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Stack the scalar inputs (already of ``op.dtype``) into a vector."""
    _reject_float16(ctx)
    (out,) = ctx.outputs
    ctx.emit(f"{out} = empty(({len(node.inputs)},), {np_dtype(op.dtype)})")
    for k in range(len(node.inputs)):
        ctx.emit(f"{out}[{k}] = {scalar_input(ctx, k)}")


@numba_funcify.register(Reshape)
def numba_funcify_Reshape(op: Reshape, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Resolve a negative (unknown) entry, check the size, reshape (a view if contiguous)."""
    x, shp = ctx.inputs
    (out,) = ctx.outputs
    shp_var = node.inputs[1]
    static = [int(v) for v in shp_var.data] if isinstance(shp_var, Constant) else None
    message = "reshape: cannot reshape the array into the requested shape"
    dims = [ctx.fresh("d") for _ in range(op.ndim)]
    if static is not None:
        # Entries known: resolve the unknown entry (any negative one, as NumPy) here.
        unknown = [k for k, v in enumerate(static) if v < 0]
        rest = int(np.prod([v for v in static if v >= 0], dtype="int64"))
        for k, d in enumerate(dims):
            ctx.emit(f"{d} = {static[k]}")
        if len(unknown) > 1:
            _raise_if(ctx, "True", "reshape: can only specify one unknown dimension")
        elif unknown and rest == 0:
            _raise_if(ctx, "True", message)
        elif unknown:
            _raise_if(ctx, f"{x}.size % {rest} != 0", message)
            ctx.emit(f"{dims[unknown[0]]} = {x}.size // {rest}")
        else:
            _raise_if(ctx, f"{x}.size != {rest}", message)
    else:
        unknown_n, rest_n, missing = ctx.fresh("unknown"), ctx.fresh("rest"), ctx.fresh("missing")
        for k, d in enumerate(dims):
            ctx.emit(f"{d} = {shp}[{k}]")
        ctx.emit(f"{unknown_n} = 0\n{rest_n} = 1")
        for d in dims:
            ctx.emit(
                f"""
                if {d} < 0:
                    {unknown_n} += 1
                else:
                    {rest_n} *= {d}
                """
            )
        _raise_if(ctx, f"{unknown_n} > 1", "reshape: can only specify one unknown dimension")
        resolve = [f"    if {d} < 0:\n        {d} = {missing}" for d in dims]
        ctx.emit(
            f"if {unknown_n} == 1:\n"
            f"    if {rest_n} == 0 or {x}.size % {rest_n} != 0:\n"
            f"        raise ValueError({message!r})\n"
            f"    {missing} = {x}.size // {rest_n}\n" + "\n".join(resolve) + "\n"
            f"elif {rest_n} != {x}.size:\n"
            f"    raise ValueError({message!r})"
        )
    ctx.emit(f"{out} = contiguous({x}).reshape({_tuple(dims)})")


@numba_funcify.register(Alloc)
def numba_funcify_Alloc(op: Alloc, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Broadcast the value to the shape (only static length-1 dimensions broadcast)."""
    _reject_float16(ctx)
    x = ctx.inputs[0]
    (out,) = ctx.outputs
    x_t = ctx.input_type(0)
    out_t = ctx.output_type(0)
    dims = []
    for k in range(1, len(node.inputs)):
        value = ctx.static_int(k)
        dims.append(f"np.int64({value})" if value is not None else f"{ctx.inputs[k]}[()]")
    names = [ctx.fresh("n") for _ in dims]
    for n, d in zip(names, dims, strict=True):
        ctx.emit(f"{n} = {d}")
    offset = len(dims) - x_t.ndim
    message = "alloc: cannot broadcast the value to the requested shape"
    for k, n in enumerate(names):
        if k < offset or x_t.shape[k - offset] == 1:
            _raise_if(ctx, f"{n} < 0", "alloc: negative dimensions are not allowed")
        else:
            _raise_if(ctx, f"{x}.shape[{k - offset}] != {n}", message)
    shape = _tuple(names)
    dtype = np_dtype(out_t.dtype)
    fill = ctx.scalar_literal(0)
    if fill is not None:
        ctx.emit(f"{out} = full({shape}, {fill}, {dtype})")
        return
    ctx.emit(f"{out} = empty({shape}, {dtype})")

    def body(loop_vars: list[str]) -> list[str]:
        src = index_expr(x, x_t.broadcastable, loop_vars[offset:])
        return [f"{index_expr(out, (False,) * len(names), loop_vars)} = {src}"]

    emit_loops(ctx, names, body)


def _slice_index(ndim: int, axis: int, piece: str) -> str:
    return ", ".join(piece if d == axis else ":" for d in range(ndim))


@numba_funcify.register(Join)
def numba_funcify_Join(op: Join, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Check the other dimensions agree, then copy each input into its slab of the output."""
    _reject_float16(ctx)
    (out,) = ctx.outputs
    out_t = ctx.output_type(0)
    ndim, a = out_t.ndim, op.axis
    first = ctx.inputs[0]
    message = f"{op}: the inputs differ in a dimension other than the concatenation axis"
    for i in range(1, len(node.inputs)):
        for d in range(ndim):
            static = (ctx.input_type(i).shape[d], ctx.input_type(0).shape[d])
            if d == a or ctx.inputs[i] == first or None not in static:
                continue  # equal when both static (make_node)
            _raise_if(ctx, f"{ctx.inputs[i]}.shape[{d}] != {first}.shape[{d}]", message)
    total = " + ".join(f"{x}.shape[{a}]" for x in ctx.inputs)
    shape = [total if d == a else f"{first}.shape[{d}]" for d in range(ndim)]
    ctx.emit(f"{out} = empty({_tuple(shape)}, {np_dtype(out_t.dtype)})")
    pos = ctx.fresh("off")
    ctx.emit(f"{pos} = 0")
    # Explicit copy loops: Numba compiles slice assignments slowly.
    for x in ctx.inputs:

        def body(loop_vars: list[str], x: str = x) -> list[str]:
            dst = [f"{pos} + {j}" if d == a else j for d, j in enumerate(loop_vars)]
            return [f"{out}[{', '.join(dst)}] = {x}[{', '.join(loop_vars)}]"]

        emit_loops(ctx, [f"{x}.shape[{d}]" for d in range(ndim)], body)
        ctx.emit(f"{pos} += {x}.shape[{a}]")


@numba_funcify.register(Split)
def numba_funcify_Split(op: Split, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Check the lengths, then cut views of the input along the axis."""
    x = ctx.inputs[0]
    ndim, a = ctx.input_type(0).ndim, op.axis
    lengths = [ctx.fresh("len") for _ in range(op.n)]
    for k, n in enumerate(lengths):
        ctx.emit(f"{n} = {scalar_input(ctx, k + 1)}")
    negative = " or ".join(f"{n} < 0" for n in lengths)
    message = f"split: cannot cut dimension {a} into pieces of the given lengths"
    _raise_if(ctx, f"{negative} or {' + '.join(lengths)} != {x}.shape[{a}]", message)
    pos = ctx.fresh("off")
    ctx.emit(f"{pos} = 0")
    for out, n in zip(ctx.outputs, lengths, strict=True):
        ctx.emit(f"{out} = {x}[{_slice_index(ndim, a, f'{pos}:{pos} + {n}')}]")
        ctx.emit(f"{pos} += {n}")


@numba_funcify.register(ARange)
def numba_funcify_ARange(op: ARange, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Fill as ``numpy.arange`` does: ``out[i] = out[0] + i * (out[1] - out[0])``.

    NumPy computes the length in double precision, the first two values from the Python
    numbers (floats as doubles), then the rest in the output dtype.
    """
    _reject_float16(ctx)
    (out,) = ctx.outputs
    args = []
    for i, name in enumerate(("start", "stop", "step")):
        v = ctx.fresh(name)
        value = scalar_input(ctx, i)
        if ctx.input_type(i).dtype.startswith("float"):
            value = f"np.float64({value})"
        ctx.emit(f"{v} = {value}")
        args.append(v)
    start, stop, step = args
    _raise_if(ctx, f"{step} == 0", "arange: step must not be zero")
    n, first, delta, j = ctx.fresh("n"), ctx.fresh("first"), ctx.fresh("delta"), ctx.fresh("j")
    dtype = op.dtype

    ctx.emit(
        f"""
        {n} = max(math.ceil(np.float64({stop} - {start}) / np.float64({step})), 0)
        {out} = empty(({n},), {np_dtype(dtype)})
        if {n} > 0:
            {out}[0] = {cast_expr(start, dtype)}
        if {n} > 1:
            {out}[1] = {cast_expr(f"{start} + {step}", dtype)}
            {first} = {out}[0]
            {delta} = {out}[1] - {first}
            for {j} in range(2, {n}):
                {out}[{j}] = {first} + {cast_expr(j, dtype)} * {delta}
        """
    )


@numba_funcify.register(Eye)
def numba_funcify_Eye(op: Eye, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Zeros with ones on the ``k``-th diagonal."""
    _reject_float16(ctx)
    (out,) = ctx.outputs
    n, m, k, i = ctx.fresh("n"), ctx.fresh("m"), ctx.fresh("k"), ctx.fresh("i")
    ctx.emit(
        f"""
        {n} = {scalar_input(ctx, 0)}
        {m} = {scalar_input(ctx, 1)}
        {k} = {scalar_input(ctx, 2)}
        if {n} < 0 or {m} < 0:
            raise ValueError('eye: n and m must be non-negative')
        {out} = zeros(({n}, {m}), {np_dtype(op.dtype)})
        for {i} in range(max(0, -{k}), min({n}, {m} - {k})):
            {out}[{i}, {i} + {k}] = {literal(1, op.dtype)}
        """
    )
