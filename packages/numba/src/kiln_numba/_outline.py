"""Loop nests as functions of their own, one per distinct code (shared by equal nodes).

Numba compiles a loop in the middle of a large function slowly, and more slowly the
larger the function: its SSA reconstruction and liveness passes revisit the whole
function for each loop counter and accumulator (about 50 ms per loop in a function of
50 loops, 75 ms in one of 200). Written as a small function, a loop nest costs one
short compile, and nodes whose code is the same up to the names of their values (the
repeated groups of a hierarchical model: the same reduction over each group's data)
share one function, compiled once per argument types. LLVM still inlines the small
ones into the caller.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from kiln_graph import Apply, Constant, Op, TensorType, Variable
from kiln_numba._funcify import (
    MAX_INLINED_PARAMS,
    CodeContext,
    FunctionScope,
    ModuleBuilder,
    np_dtype,
    out_of_line_raise,
)
from kiln_numba._scalars import promote_scalars, propagate_copies

_FRESH = re.compile(r"\b([A-Za-z]+)_(\d+)\b")

#: Where an outlined function's decorator takes ``, inline='always'``: the code
#: generator decides once it knows how many loop nests the graph has
#: (:func:`inline_outlined`).
INLINE_MARKER = "<kiln-inline>"
#: A graph with at most this many outlined loop nests has them inlined into its one
#: function (at Numba IR level). Each outlined function is compiled, optimized and
#: turned into machine code on its own, then again inside the caller (about 0.1 s
#: each); inlined, a loop costs the caller's SSA and liveness passes instead, which
#: grow with the caller's size: cheaper for small graphs, much dearer for large ones.
MAX_INLINED_LOOPS = 40

Writer = Callable[[Op, Apply, CodeContext], None]


def has_loops(node: Apply) -> bool:
    """Whether the node's code loops: an input or an output has dimensions."""
    return any(getattr(v.type, "ndim", 0) > 0 for v in (*node.inputs, *node.outputs))


def outline(ctx: CodeContext, write: Callable[[CodeContext], None]) -> None:
    """Write the node through ``write`` as a call of a module function (shared if equal).

    ``write`` writes the node's statements for a context whose inputs and outputs are
    the function's parameters ``p0, p1, ...`` and results ``r0, r1, ...``; constants it
    names become further parameters. Its local names are renumbered in order of
    appearance, so equal code gives one key and one function.
    """
    module = ctx.module
    extra: dict[Constant, str] = {}

    def constant_name(c: Constant) -> str:
        return extra.setdefault(c, f"k{len(extra)}")

    scope = FunctionScope(constant_name)
    params = [f"p{k}" for k in range(len(ctx.inputs))]
    gathered = sorted(ctx.gathers)
    index_params = {i: f"p{len(params) + k}" for k, i in enumerate(gathered)}
    results = [f"r{k}" for k in range(len(ctx.outputs))]
    first = module._counter
    write(CodeContext(module, ctx.node, params, results, scope, index_params, ctx.scalars))
    params += [index_params[i] for i in gathered]
    last = module._counter
    if not scope.cacheable:
        ctx.scope.cacheable = False
    helpers = set(module.helpers) | set(module.helper_names.values())
    renamed: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        name = match.group(0)
        if not first < int(match.group(2)) <= last or name in helpers:
            return name
        return renamed.setdefault(name, f"{match.group(1)}{len(renamed)}")

    lines = [_FRESH.sub(rename, line) for line in scope.lines]
    # 0-d outputs come back as scalars, and become 0-d arrays again in the caller, where
    # kiln_numba._scalars makes the ones that stay local plain scalars.
    zero_d = [_zero_d_dtype(v) for v in ctx.node.outputs]
    returned = [r if d is None else f"{r}[()]" for r, d in zip(results, zero_d, strict=True)]
    lines.append("return (" + "".join(f"{r}, " for r in returned) + ")")
    signature = ", ".join([*params, *extra.values()])
    key = "outlined\n" + signature + "\n" + "\n".join(lines)

    def source(name: str) -> str:
        raised = [out_of_line_raise(module, line) for line in lines]
        body = "\n".join("    " + line for line in propagate_copies(promote_scalars(raised)))
        inline = INLINE_MARKER if len(params) + len(extra) <= MAX_INLINED_PARAMS else ""
        return f"@njit(error_model='numpy', callee=True{inline})\ndef {name}({signature}):\n{body}"

    name = module.helper(key, source)
    module.outlined_calls += 1
    args = [
        *ctx.inputs,
        *(ctx.gathers[i] for i in gathered),
        *(ctx.scope.constant_name(c) for c in extra),
    ]
    targets = [o if d is None else ctx.fresh("x") for o, d in zip(ctx.outputs, zero_d, strict=True)]
    ctx.emit(f"({''.join(f'{t}, ' for t in targets)}) = {name}({', '.join(args)})")
    for out, target, dtype in zip(ctx.outputs, targets, zero_d, strict=True):
        if dtype is not None:
            ctx.emit(f"{out} = empty((), {dtype})")
            ctx.emit(f"{out}[()] = {target}")


def _zero_d_dtype(v: Variable) -> str | None:
    """Return the dtype source of a 0-d tensor ``v`` (None for other values)."""
    t = v.type
    if isinstance(t, TensorType) and t.ndim == 0:
        return np_dtype(t.dtype)
    return None


def inline_outlined(module: ModuleBuilder, source: str) -> str:
    """Return ``source`` with the outlined functions' decorators completed.

    They are inlined when the module has at most :data:`MAX_INLINED_LOOPS` outlined
    calls, and stay functions of their own otherwise.
    """
    inline = ", inline='always'" if module.outlined_calls <= MAX_INLINED_LOOPS else ""
    return source.replace(INLINE_MARKER, inline)


def outline_loops(fn: Any) -> Writer:
    """Return ``fn`` writing its node through :func:`outline` when the node loops."""

    @functools.wraps(fn)
    def write(op: Op, node: Apply, ctx: CodeContext) -> None:
        if not has_loops(node):
            fn(op, node, ctx)
            return
        outline(ctx, lambda sub: fn(op, node, sub))

    return write
