"""Random variables: a loop over the batch, one compiled core draw per element.

The node's code takes the generator (a copy unless the in-place phase made the draw
in place), computes the batch shape (the ``size`` entries, or the broadcast of the
parameters' batch shapes, with the VM's checks), allocates the draw and calls the
random variable's compiled ``core_fn`` (:mod:`kiln_numba._random_kernels`) once per
batch element, checking the declared parameter constraints element by element.

A draw with core dimensions needs its core shape before the loop. The Numba-only
rewrite of :mod:`kiln_numba.core_shape` passes it as an input (computed from the
shape graph); without it (modes that skip the specialize phase), each core dimension
is read from a parameter's dimension of the same name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kiln_graph import Apply, Blockwise
from kiln_numba._funcify import CodeContext, NoNumbaImplementation, np_dtype, numba_funcify
from kiln_numba.blockwise import write_blockwise
from kiln_numba.core_shape import CoreShape
from kiln_random import RandomVariable


@numba_funcify.register(RandomVariable)
def numba_funcify_RandomVariable(op: RandomVariable, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Draw elementwise over the batch (core shape from same-named parameter dimensions)."""
    write_draws(op, node, ctx, ctx.inputs, core_shape=None)


@numba_funcify.register(CoreShape)
def numba_funcify_CoreShape(op: CoreShape, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Run the wrapped random variable or Blockwise with outputs of the given core shapes."""
    n = op.n_shapes
    inner = op.inner_node(node)
    if isinstance(op.op, RandomVariable):
        write_draws(op.op, inner, ctx, ctx.inputs[n:], core_shape=ctx.inputs[0])
    elif isinstance(op.op, Blockwise):
        sub = CodeContext(ctx.module, inner, ctx.inputs[n:], ctx.outputs, ctx.scope)
        write_blockwise(op.op, inner, sub, core_shapes=ctx.inputs[:n])
    else:
        raise NoNumbaImplementation(f"no Numba implementation for {op}")


def _kernel(op: RandomVariable, ctx: CodeContext) -> str:
    from kiln_numba._random_kernels import compile_kernel, kernel_name  # imports Numba

    name = kernel_name(op)
    if name is not None:
        return name
    return ctx.module.python_global(compile_kernel(op), f"rv_{op.name}")


def write_draws(
    op: RandomVariable,
    node: Apply,
    ctx: CodeContext,
    names: Sequence[str],
    core_shape: str | None,
) -> None:
    """Write the statements drawing ``node`` (inputs named ``names``) into ``ctx``.

    ``core_shape`` names an int64 vector holding the draw's core shape, or is None.
    """
    rng_in, size_in, *params = names
    rng, out = ctx.outputs
    batch = op.batch_ndim(node)
    kernel = _kernel(op, ctx)
    ctx.emit(f"{rng} = {rng_in}" if op.inplace else f"{rng} = copy_rng({rng_in})")
    static = [v.type.shape for v in node.inputs[2:]]  # type: ignore[attr-defined]
    sizes = _batch_sizes(op, node, ctx, size_in, params, static, batch)
    core = _core_dims(op, node, params, batch, core_shape)
    shape = "(" + "".join(f"{s}, " for s in [*sizes, *core]) + ")"
    dtype = np_dtype(node.outputs[1].type.dtype)  # type: ignore[attr-defined]
    ctx.emit(f"{out} = empty({shape}, {dtype})")

    loop_vars = [ctx.fresh("j") for _ in range(batch)]
    body: list[str] = []
    elems: dict[str, str] = {}
    for i, (p, dims) in enumerate(zip(params, op.inputs_sig, strict=True)):
        idx = ", ".join("0" if static[i][d] == 1 else loop_vars[d] for d in range(batch))
        if dims:
            value = f"{p}[{idx}]" if batch else p
        else:
            value = f"{p}[{idx}]" if batch else f"{p}[()]"
        elem = ctx.fresh("e")
        body.append(f"{elem} = {value}")
        elems[op.params[i]] = elem
    for expr, description in op.constraints:
        check = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: elems.get(m[0], m[0]), expr)
        message = f"{op.name}: {description} (invalid parameter values)"
        body += [f"if not ({check}):", f"    raise KilnValueError({message!r})"]
    args = ", ".join([rng, *elems.values()])
    target = f"{out}[{', '.join(loop_vars)}]" if batch else f"{out}[()]"
    if op.core_ndim:
        slot = f"{out}[{', '.join(loop_vars)}]" if batch else out
        body.append(f"{kernel}({args}, {slot})")
    else:
        body.append(f"{target} = {kernel}({args})")
    loops = [
        ("    " * d) + f"for {j} in range({n}):"
        for d, (j, n) in enumerate(zip(loop_vars, sizes, strict=True))
    ]
    ctx.emit("\n".join(loops + [("    " * batch) + line for line in body]))


def _batch_sizes(
    op: RandomVariable,
    node: Apply,
    ctx: CodeContext,
    size_in: str,
    params: Sequence[str],
    static: Sequence[tuple[int | None, ...]],
    batch: int,
) -> list[str]:
    """Emit the batch lengths and the checks that the parameters broadcast to them."""
    sizes: list[str] = []
    given = bool(node.inputs[1].type.shape[0])  # type: ignore[attr-defined]
    for d in range(batch):
        sources = [i for i in range(len(params)) if static[i][d] != 1]
        n = ctx.fresh("n")
        if given:
            message = f"{op.name}: size must be non-negative"
            ctx.emit(
                f"""
                {n} = {size_in}[{d}]
                if {n} < 0:
                    raise KilnValueError({message!r})
                """
            )
        elif sources:
            ctx.emit(f"{n} = {params[sources[0]]}.shape[{d}]")
            sources = sources[1:]
        else:
            n = "1"
        for i in sources:
            message = (
                f"{op.name}: parameter {op.params[i]!r} does not match the draw's batch "
                f"shape in dimension {d}; kiln broadcasts only dimensions whose static "
                "length is 1"
            )
            ctx.emit(
                f"""
                if {params[i]}.shape[{d}] != {n}:
                    raise ShapeMismatchError({message!r})
                """
            )
        sizes.append(n)
    return sizes


def _core_dims(
    op: RandomVariable,
    node: Apply,
    params: Sequence[str],
    batch: int,
    core_shape: str | None,
) -> list[str]:
    """Return the source of each core dimension's length of the draw."""
    if core_shape is not None:
        return [f"{core_shape}[{j}]" for j in range(op.core_ndim)]
    dims = []
    for dim in op.output_sig:
        for p, sig in zip(params, op.inputs_sig, strict=True):
            if dim in sig:
                dims.append(f"{p}.shape[{batch + sig.index(dim)}]")
                break
        else:
            raise NoNumbaImplementation(
                f"{op}: no parameter has the core dimension {dim!r} of the draw, and the "
                "core-shape rewrite did not run"
            )
    return dims
