"""Numba code of a fused loop (:class:`kiln_numba.loop_fusion.FusedLoop`).

One ``for`` loop over the loop's length: each member (an elementwise map, a gather, a
reduction's fold, a scatter) written in order, each input read once per position, every
index checked as the VM checks it. Where the loop only computes vectorizable math and
neither gathers nor scatters, its folds go to a second loop over stored values (see
:func:`_place_folds`), so that the first one becomes SIMD code.
"""

from __future__ import annotations

import numpy as np

from kiln_graph import (
    Apply,
    Composite,
    Constant,
    Elemwise,
    FusedReduce,
    TensorType,
    Variable,
    toposort,
)
from kiln_numba._funcify import CodeContext, literal, np_dtype, numba_funcify
from kiln_numba._outline import outline
from kiln_numba.elemwise import LONG_LOOP
from kiln_numba.loop_fusion import GATHER, MAP, REDUCE, FusedLoop, loop_kind, vector_length
from kiln_numba.reduce import calls_vector_math, combine, identity, value_cast
from kiln_numba.scalar import composite_statements, scalar_expr


@numba_funcify.register(FusedLoop)
def numba_funcify_FusedLoop(op: FusedLoop, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Write the inner graph as one loop over ``op.length`` (a function of its own)."""
    outline(ctx, lambda sub: _LoopWriter(op, sub).write())


class _LoopWriter:
    """Writes one FusedLoop's loop: its members in order, each value read once."""

    def __init__(self, op: FusedLoop, ctx: CodeContext) -> None:
        self.op, self.ctx, self.n = op, ctx, op.length
        self.inner_inputs = list(op.inner_inputs)
        self.outputs: dict[Variable, str] = dict(zip(op.inner_outputs, ctx.outputs, strict=True))
        self.vector_math = self.n >= LONG_LOOP
        self.j = ctx.fresh("j")
        self.lines = _Lines()
        self.folds: list[_Fold] = []
        self.indexed = False  # whether the loop gathers or scatters (then it is not SIMD)
        self.arrays: dict[Variable, str] = dict(zip(self.inner_inputs, ctx.inputs, strict=True))
        self.values: dict[Variable, str] = {
            v: ctx.inputs[k] for k, v in enumerate(self.inner_inputs) if k in ctx.scalars
        }
        self.checked_indices: dict[tuple[str, str], str] = {}

    def value(self, v: Variable) -> str:
        """Return the value of ``v`` at the loop position (read into a local once)."""
        found = self.values.get(v)
        if found is not None:
            return found
        if isinstance(v, Constant):
            return literal(v.data.reshape(-1)[0], v.data.dtype.name)
        ctx, before, body = self.ctx, self.lines.before, self.lines.body
        k = self.inner_inputs.index(v)  # type: ignore[arg-type]
        name = ctx.fresh("a")
        t = v.type
        assert isinstance(t, TensorType)
        if k in ctx.gathers:
            self.indexed = True
            x = ctx.inputs[k]
            label = "AdvancedSubtensor1"
            g, checks = _checked_index(ctx, f"{ctx.gathers[k]}[{self.j}]", f"{x}.shape[0]", label)
            body.extend([*checks, f"{name} = {x}[{g}]"])
        elif t.ndim == 0:
            before.append(f"{name} = {self.arrays[v]}[()]")
        elif t.broadcastable == (True,):
            before.append(f"{name} = {self.arrays[v]}[0]")
        else:
            if t.shape[0] is None:  # Numba checks no bounds: check the length once
                message = (
                    f"{self.op}: an input has a different length than the loop's {self.n}; "
                    "kiln broadcasts only dimensions whose static length is 1"
                )
                before.append(f"if {self.arrays[v]}.shape[0] != {self.n}:")
                before.append(f"    raise ShapeMismatchError({message!r})")
            body.append(f"{name} = {self.arrays[v]}[{self.j}]")
        self.values[v] = name
        return name

    def checked(self, idx_var: Variable, size: str, label: str) -> str:
        """Return the index ``idx_var`` checked as one into ``size`` elements (once per pair).

        Constant indices known to be in bounds (and not negative) need no check.
        """
        idx = self.value(idx_var)
        if size.isdigit() and idx_var in self.inner_inputs:
            outer = self.ctx.node.inputs[self.inner_inputs.index(idx_var)]  # type: ignore[arg-type]
            if _constant_in_bounds(outer, int(size)):
                return idx
        found = self.checked_indices.get((idx, size))
        if found is None:
            found, checks = _checked_index(self.ctx, idx, size, label)
            self.lines.body.extend(checks)
            self.checked_indices[(idx, size)] = found
        return found

    def _store(self, out: Variable, value: str, dtype: str) -> None:
        """Write ``value`` into the loop's output array of ``out`` (when it is an output)."""
        if out in self.outputs:
            target = self.outputs[out]
            self.lines.before.append(f"{target} = empty(({self.n}, ), {np_dtype(dtype)})")
            self.lines.body.append(f"{target}[{self.j}] = {value}")

    def member(self, inner: Apply) -> None:
        """Write one member of the loop (a map, a gather, a reduction or a scatter)."""
        kind = loop_kind(inner)
        (out,) = inner.outputs
        out_t = out.type
        assert isinstance(out_t, TensorType)
        body = self.lines.body
        if kind == MAP:
            args = [self.value(v) for v in inner.inputs]
            self.values[out] = _map_value(inner, args, body, self.ctx, self.vector_math)
            self._store(out, self.values[out], out_t.dtype)
        elif kind == GATHER:
            self.indexed = True
            x, idx = inner.inputs
            name = self.ctx.fresh("a")
            g = self.checked(idx, _length(self.arrays[x], x), str(inner.op))
            body.append(f"{name} = {self.arrays[x]}[{g}]")
            self.values[out] = name
            self._store(out, name, out_t.dtype)
        elif kind == REDUCE:
            args = [self.value(v) for v in inner.inputs]
            fold = _fold(inner, args, self.outputs[out], self.lines, self.ctx, self.vector_math)
            self.folds.append(fold)
        else:
            self.indexed = True
            x, y, idx = inner.inputs
            target = self.outputs[out] if out in self.outputs else self.ctx.fresh("t")
            self.lines.before.append(f"{target} = copy({self.arrays[x]})")
            set_ = inner.op.set_instead_of_inc  # type: ignore[attr-defined]
            g = self.checked(idx, _length(target, x), str(inner.op))
            body.append(f"{target}[{g}] {'=' if set_ else '+='} {self.value(y)}")

    def write(self) -> None:
        """Write every member, then the loop (and the folds' second pass, where it pays)."""
        for inner in toposort(list(self.op.inner_outputs), stop_at=self.inner_inputs):
            self.member(inner)
        folds = self.folds
        two_pass = bool(folds) and not self.indexed and calls_vector_math(self.lines.body)
        lines = _place_folds(self.lines, folds, self.n, self.j, two_pass, self.ctx)
        self.ctx.emit("\n".join(lines))


def _index_error(ctx: CodeContext) -> str:
    module = "kiln_numba._subtensor_kernels"
    return ctx.helper(
        f"{module}.index_error", lambda alias: f"from {module} import index_error as {alias}"
    )


def _length(name: str, v: Variable) -> str:
    """Return the length of the vector ``v`` (named ``name``): a literal when static.

    Equal literal bounds let LLVM merge the checks of one index against several vectors.
    """
    n = vector_length(v)
    return str(n) if n is not None else f"{name}.shape[0]"


def _constant_in_bounds(v: Variable, size: int) -> bool:
    """Whether ``v`` is a constant of integer indices in ``[0, size)``."""
    if not isinstance(v, Constant) or v.data.dtype.kind not in "iu" or v.data.size == 0:
        return False
    return bool(v.data.min() >= 0 and v.data.max() < size)


def _checked_index(ctx: CodeContext, idx: str, size: str, label: str) -> tuple[str, list[str]]:
    """Return the name of ``idx`` as an index into ``size`` elements, and its statements.

    Negative indices wrap; out of bounds raises the VM's error.
    """
    k = ctx.fresh("g")
    index_error = _index_error(ctx)
    return k, [
        f"{k} = np.int64({idx})",
        f"if {k} < -{size} or {k} >= {size}:",
        f"    {index_error}({k}, {size}, 0, {label!r})",
        f"if {k} < 0:",
        f"    {k} += {size}",
    ]


def _scalar_program(
    op: object,
    args: list[str],
    in_dtypes: list[str],
    out_dtype: str,
    body: list[str],
    ctx: CodeContext,
    vector_math: bool,
) -> str:
    """Append the statements of ``op`` (a ScalarOp or Composite) on ``args``; return its value."""
    if isinstance(op, Composite):
        steps, results = composite_statements(op, args, in_dtypes, ctx.fresh, vector_math)
        body.extend(steps)
        return results[0]
    name = ctx.fresh("e")
    body.append(f"{name} = {scalar_expr(op, args, out_dtype, in_dtypes, vector_math)}")  # type: ignore[arg-type]
    return name


def _map_value(
    node: Apply, args: list[str], body: list[str], ctx: CodeContext, vector_math: bool
) -> str:
    op = node.op
    assert isinstance(op, Elemwise)
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    out_dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    return _scalar_program(op.scalar_op, args, in_dtypes, out_dtype, body, ctx, vector_math)


class _Lines:
    """The statements of a fused loop: before it, in its body, after it."""

    def __init__(self) -> None:
        self.before: list[str] = []
        self.body: list[str] = []
        self.after: list[str] = []


class _Fold:
    """A reduction member's accumulator and the value it folds at the loop position."""

    def __init__(self, ctx: CodeContext, kind: str, pre_dtype: str, acc_dtype: str) -> None:
        self.kind, self.acc_dtype = kind, acc_dtype
        self.is_float = np.dtype(pre_dtype).kind == "f"
        self.acc, self.elem, self.buf = ctx.fresh("acc"), ctx.fresh("x"), ctx.fresh("buf")
        self.marker = f"<fold {self.acc}>"


def _fold(
    node: Apply,
    args: list[str],
    result: str,
    lines: _Lines,
    ctx: CodeContext,
    vector_math: bool,
) -> _Fold:
    """Write a reduction member: its accumulator, the value it folds, its result after.

    The body gets a marker where the value is folded (see :func:`_place_folds`).
    """
    op = node.op
    out_dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
    in_dtypes = [v.type.dtype for v in node.inputs]  # type: ignore[attr-defined]
    if isinstance(op, FusedReduce):
        pre_dtype = op.scalar_op.output_dtype(*in_dtypes)
        v = _scalar_program(op.scalar_op, args, in_dtypes, pre_dtype, lines.body, ctx, vector_math)
    else:
        pre_dtype, v = in_dtypes[0], args[0]
    kind = op.kind  # type: ignore[attr-defined]
    acc_dtype = "float64" if kind == "sum" and out_dtype == "float32" else out_dtype
    fold = _Fold(ctx, kind, pre_dtype, acc_dtype)
    lines.before.append(f"{fold.acc} = {identity(kind, acc_dtype)}")
    lines.body.append(f"{fold.elem} = {value_cast(v, pre_dtype, acc_dtype, kind)}")
    lines.body.append(fold.marker)
    lines.after.append(f"{result} = empty((), {np_dtype(out_dtype)})")
    lines.after.append(f"{result}[()] = {value_cast(fold.acc, acc_dtype, out_dtype, kind)}")
    return fold


def _place_folds(
    lines: _Lines, folds: list[_Fold], n: int, j: str, two_pass: bool, ctx: CodeContext
) -> list[str]:
    """Return the loop's statements, each fold in the loop or in a second loop.

    With ``two_pass``, the loop stores the folded values in buffers and a second loop
    folds them in the same order (the results are the same to the bit): a loop that
    folds into a scalar accumulator does not become SIMD code, a loop that only
    computes and stores values does (see :func:`kiln_numba.reduce._two_pass_sum`).
    """
    by_marker = {f.marker: f for f in folds}
    body: list[str] = []
    for line in lines.body:
        fold = by_marker.get(line)
        if fold is None:
            body.append(line)
        elif two_pass:
            body.append(f"{fold.buf}[{j}] = {fold.elem}")
        else:
            body.extend(combine(fold.kind, fold.acc, fold.elem, fold.is_float))
    before = list(lines.before)
    second: list[str] = []
    if two_pass:
        k = ctx.fresh("k")
        second.append(f"for {k} in range({n}):")
        for fold in folds:
            before.append(f"{fold.buf} = empty({n}, {np_dtype(fold.acc_dtype)})")
            value = f"{fold.buf}[{k}]"
            second += ["    " + s for s in combine(fold.kind, fold.acc, value, fold.is_float)]
    return [*before, f"for {j} in range({n}):", *("    " + s for s in body), *second, *lines.after]
