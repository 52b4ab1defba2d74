"""Blockwise: a loop over the batch dimensions calling the core op's compiled function.

The core op's code is generated, with the same code generator as the whole graph, into
a module-level njit function of its own (one per core op and core types, see
:meth:`~kiln_numba._funcify.CodeContext.call_function`). The node's code computes the
broadcast batch shape (with the VM's checks), allocates each output and calls the core
function once per batch index, writing each core result into its slot.

Each output's core shape comes from its static shape or from an input dimension of the
same name; when neither tells (a vectorized function whose output has a new core
dimension), the Numba-only rewrite of :mod:`kiln_numba.core_shape` passes it as an input
computed from the shape graph; where that rewrite could not run or the shape graph
cannot tell, the core function runs on the first batch index to find it.
"""

from __future__ import annotations

from kiln_graph import Apply, Blockwise, TensorType, TensorVariable
from kiln_numba._funcify import CodeContext, np_dtype, numba_funcify


def _batch_sizes(op: Blockwise, ctx: CodeContext, batch: int) -> list[str]:
    """Emit the length of each batch dimension, checking that the inputs agree."""
    sizes = []
    for d in range(batch):
        sources = [i for i in range(len(ctx.inputs)) if ctx.input_type(i).shape[d] != 1]
        if not sources:
            sizes.append("1")
            continue
        size = ctx.fresh("n")
        first = sources[0]
        ctx.emit(f"{size} = {ctx.inputs[first]}.shape[{d}]")
        for i in sources[1:]:
            message = (
                f"{op}: batch dimension {d} of input {i} does not match input {first}; kiln "
                "broadcasts only dimensions whose static length is 1"
            )
            ctx.emit(
                f"""
                if {ctx.inputs[i]}.shape[{d}] != {size}:
                    raise ValueError({message!r})
                """
            )
        sizes.append(size)
    return sizes


def _core_sizes(op: Blockwise, ctx: CodeContext, batch: int) -> dict[str, str]:
    """Emit the checks that equally named core dimensions agree; return each one's length."""
    found: dict[str, tuple[str, int]] = {}
    for i, dims in enumerate(op.inputs_sig):
        for j, name in enumerate(dims):
            length = f"{ctx.inputs[i]}.shape[{batch + j}]"
            if name not in found:
                found[name] = (length, i)
                continue
            message = f"{op}: core dimension {name!r} of input {i} does not match input "
            message += str(found[name][1])
            ctx.emit(
                f"""
                if {length} != {found[name][0]}:
                    raise ValueError({message!r})
                """
            )
    return {name: length for name, (length, _) in found.items()}


def _core_args(ctx: CodeContext, batch: int, loop_vars: list[str]) -> list[str]:
    """Return each input's core block at the loop position (0 along broadcast dimensions).

    A 0-d block is passed as a 0-d array (the generated code's convention for scalars).
    """
    args = []
    for i, name in enumerate(ctx.inputs):
        t = ctx.input_type(i)
        if batch == 0:
            args.append(name)
            continue
        idx = ", ".join("0" if t.shape[d] == 1 else loop_vars[d] for d in range(batch))
        args.append(f"{name}[{idx}]" if t.ndim > batch else f"np.asarray({name}[{idx}])")
    return args


@numba_funcify.register(Blockwise)
def numba_funcify_Blockwise(op: Blockwise, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Loop over the broadcast batch dimensions, calling the core op's function."""
    write_blockwise(op, node, ctx, core_shapes=None)


def write_blockwise(
    op: Blockwise, node: Apply, ctx: CodeContext, core_shapes: list[str] | None
) -> None:
    """Write the batch loop of ``node``; ``core_shapes`` name each output's core shape.

    Without them (no core-shape rewrite), each output's core length is static, an input
    dimension of the same name, or found by calling the core function once.
    """
    batch = op.batch_ndim(node)
    core_types = [
        TensorType(t.dtype, t.shape[batch:]) for t in map(ctx.input_type, range(len(node.inputs)))
    ]
    core_node = op.core_op.make_node(*[TensorVariable(t) for t in core_types])
    key = f"blockwise:{op.core_op.digest_bytes.hex()}:{op.signature}:" + ";".join(
        f"{t.dtype}{t.shape}" for t in core_types
    )

    def call(loop_vars: list[str]) -> str:
        args = _core_args(ctx, batch, loop_vars)
        return ctx.call_function(key, core_node.inputs, core_node.outputs, args)

    sizes = _batch_sizes(op, ctx, batch)
    by_name = _core_sizes(op, ctx, batch)
    if batch == 0:
        result = ctx.fresh("r")
        ctx.emit(f"{result} = {call([])}")
        for k, out in enumerate(ctx.outputs):
            ctx.emit(f"{out} = copy({result}[{k}])")
        return

    # Each output's core shape: static, from an input dimension of the same name, or
    # (None) only known from a core result.
    out_core: list[list[str | None]] = []
    for k, (o, dims) in enumerate(zip(core_node.outputs, op.outputs_sig, strict=True)):
        shape = o.type.shape  # type: ignore[attr-defined]
        out_core.append(
            [
                str(n)
                if n is not None
                else f"{core_shapes[k]}[{j}]"
                if core_shapes is not None
                else by_name.get(name)
                for j, (n, name) in enumerate(zip(shape, dims, strict=True))
            ]
        )
    first = None
    if any(n is None for shape in out_core for n in shape):
        first = ctx.fresh("first")
        message = f"{op}: cannot tell the core shape of its outputs for an empty batch"
        ctx.emit(
            f"""
            if {" * ".join(sizes)} == 0:
                raise ValueError({message!r})
            {first} = {call(["0"] * batch)}
            """
        )
    for k, out in enumerate(ctx.outputs):
        core_dims = [
            n if n is not None else f"{first}[{k}].shape[{j}]" for j, n in enumerate(out_core[k])
        ]
        shape_src = "(" + "".join(f"{s}, " for s in [*sizes, *core_dims]) + ")"
        ctx.emit(f"{out} = empty({shape_src}, {np_dtype(ctx.output_type(k).dtype)})")

    loop_vars = [ctx.fresh("j") for _ in range(batch)]
    result = ctx.fresh("r")
    lines = [f"{result} = {call(loop_vars)}"]
    for k, out in enumerate(ctx.outputs):
        lines += _write_block(ctx, op, k, out, f"{result}[{k}]", loop_vars, len(out_core[k]))
    loops = [
        ("    " * d) + f"for {j} in range({n}):"
        for d, (j, n) in enumerate(zip(loop_vars, sizes, strict=True))
    ]
    ctx.emit("\n".join(loops + [("    " * batch) + line for line in lines]))


def _write_block(
    ctx: CodeContext, op: Blockwise, k: int, out: str, value: str, loop_vars: list[str], core: int
) -> list[str]:
    """Return the statements copying core result ``value`` into ``out`` at the loop position.

    Element loops, not ``out[j] = value``: Numba's array-assignment takes seconds of
    LLVM time per function, a plain loop a fraction of that.
    """
    if core == 0:
        return [f"{out}[{', '.join(loop_vars)}] = {value}[()]"]
    slot, block = ctx.fresh("slot"), ctx.fresh("block")
    message = f"{op}: output {k} of the core op has a different shape at some batch index"
    lines = [
        f"{slot} = {out}[{', '.join(loop_vars)}]",
        f"{block} = {value}",
        f"if {block}.shape != {slot}.shape:",
        f"    raise ValueError({message!r})",
    ]
    idx = [ctx.fresh("c") for _ in range(core)]
    for d, c in enumerate(idx):
        lines.append("    " * d + f"for {c} in range({slot}.shape[{d}]):")
    lines.append("    " * core + f"{slot}[{', '.join(idx)}] = {block}[{', '.join(idx)}]")
    return lines
