"""Loop fusion on C: a FusedLoop as one ``for`` loop in one small static function.

The decision is kiln_rewrite's (:mod:`kiln_rewrite.loop_fusion`), registered here for
the C backend (tag ``c``, fusion phase, after the elementwise and reduction fusions),
with the small dot product rewritten as a reduction that the loop can join.

:func:`c_funcify_FusedLoop` writes the node's function: each input read once per
position into a C local (a 0-d or one-element input once, before the loop), each
member in order (an elementwise value, a gather ``x[idx[j]]`` checked as the VM
checks it, a reduction folded into a local accumulator, a scatter into a copy of its
vector), and only the values that leave the loop stored in arrays. Intermediate values
are C locals, never arrays. A loop of 128 positions or more that calls ``kiln_exp_v`` /
``kiln_log1p_v`` and neither gathers nor scatters is written to vectorize
(:meth:`_LoopWriter.simd`): unit-stride reads, folded values into buffers, folded in
order in a second loop (M3's log-likelihood and gradient: 231 us a call, 112 us so).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kiln_c._funcify import CTYPE, DTYPE_CODE, NodeIO, c_funcify, dtype_of, literal
from kiln_c._loops import combine, identity
from kiln_c.elemwise import scalar_body
from kiln_c.scalar import (
    LONG_LOOP,
    calls_vector_math,
    cast_expr,
    scalar_math,
    simd_or_scalar,
)
from kiln_graph import Apply, Constant, DimShuffle, Elemwise, FusedReduce, Variable, toposort
from kiln_rewrite import register_global, register_local
from kiln_rewrite.loop_fusion import (
    GATHER,
    MAP,
    REDUCE,
    FusedLoop,
    LoopLimits,
    fuse_loops,
    loop_kind,
    small_dot_to_sum,
)

#: gcc compiles one function in time superlinear in its length: 32 nodes a loop at most.
C_LIMITS = LoopLimits(max_members=32, max_inputs=64, max_loop_nodes=None)
#: The longest vectors whose dot product is written as a loop (as MatMul's own loop).
SMALL_DOT = 1 << 14


@register_local(
    "fusion",
    "c",
    identity="dot(x, y) -> sum(x * y) for float64 vectors of a small static length, a "
    "reduction that loop fusion can join (C only)",
    tracks=[DimShuffle],
)
def c_small_dot_to_sum(node: Apply) -> list[Variable] | None:
    """Rewrite a small vector dot product (``matmul`` of a row and a column) as a sum."""
    return small_dot_to_sum(node, SMALL_DOT)


@register_global(
    "fusion",
    "c",
    identity="loops over one vector length (elementwise, gathers, reductions, scatter-adds) "
    "-> FusedLoop, one loop (C only)",
)
def c_loop_fusion(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Fuse groups of loop nodes over one length into FusedLoops (C's limits)."""
    return fuse_loops(inputs, outputs, C_LIMITS)


def _constant_in_bounds(v: Variable, size: int) -> bool:
    """Whether ``v`` is a constant of integer indices in ``[0, size)``."""
    if not isinstance(v, Constant) or v.data.dtype.kind not in "iu" or v.data.size == 0:
        return False
    return bool(v.data.min() >= 0 and v.data.max() < size)


class _LoopWriter:
    """Writes one FusedLoop's function: before the loop, its body, after it."""

    def __init__(self, op: FusedLoop, node: Apply, io: NodeIO) -> None:
        self.op, self.node, self.io, self.n = op, node, io, op.length
        self.inner_inputs: list[Variable] = list(op.inner_inputs)
        self.outputs: dict[Variable, str] = dict(zip(op.inner_outputs, io.outs, strict=True))
        self.before: list[str] = []
        self.body: list[str | _Load | _Fold] = []
        self.after: list[str] = []
        self.values: dict[Variable, str] = {}
        self.checked: dict[tuple[str, str], str] = {}
        self.bases: dict[str, str] = {}
        self.count = 0
        self.members = toposort(list(op.inner_outputs), stop_at=self.inner_inputs)
        self.vector_math = self.n >= LONG_LOOP
        self.indexed = False  # whether the loop gathers or scatters (then it is not SIMD)
        self.stored: dict[str, tuple[str, str]] = {}  # value -> (output pointer, dtype)

    def fresh(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def array(self, v: Variable) -> str:
        """Return the ``kiln_array *`` of the inner input ``v``."""
        return self.io.ins[self.inner_inputs.index(v)]

    def value(self, v: Variable) -> str:
        """Return the value of ``v`` at the loop position (read into a local once)."""
        found = self.values.get(v)
        if found is not None:
            return found
        dtype = dtype_of(v)
        if isinstance(v, Constant):
            return literal(v.data.reshape(-1)[0], dtype)
        t = CTYPE[dtype]
        a, name = self.array(v), self.fresh("a")
        shape = v.type.shape  # type: ignore[attr-defined]
        if len(shape) == 0 or shape == (1,):
            self.before.append(f"const {t} {name} = *(const {t} *){a}->data;")
        else:
            if shape[0] is None:
                self.before.append(
                    f"if ({a}->shape[0] != {self.n}) return kiln_fail(ctx, KILN_E_SHAPE, "
                    f"\"{self.op}: an input has a different length (%lld) than the loop's "
                    f'{self.n}; kiln broadcasts only dimensions whose static length is 1", '
                    f"(long long){a}->shape[0]);"
                )
            p = self.fresh("p")
            self.before.append(
                f"const char *{p} = {a}->data; const int64_t s{p} = {a}->strides[0];"
            )
            self.body.append(_Load(name, t, p, a, int(np.dtype(dtype).itemsize)))
        self.values[v] = name
        return name

    def index(self, idx_var: Variable, size: str, static_size: int | None) -> str:
        """Return the index ``idx_var`` at ``j`` checked against ``size`` (once per pair)."""
        idx = self.value(idx_var)
        if static_size is not None and idx_var in self.inner_inputs:
            outer = self.node.inputs[self.inner_inputs.index(idx_var)]
            if _constant_in_bounds(outer, static_size):
                return f"(int64_t){idx}"
        found = self.checked.get((idx, size))
        if found is None:
            found = self.fresh("g")
            self.body += [
                f"int64_t {found} = (int64_t){idx};",
                f"if ({found} < -{size} || {found} >= {size}) return kiln_fail(ctx, "
                f'KILN_E_INDEX, "index %lld is out of bounds for axis 0 with size %lld", '
                f"(long long){found}, (long long){size});",
                f"if ({found} < 0) {found} += {size};",
            ]
            self.checked[(idx, size)] = found
        return found

    def base(self, a: str) -> str:
        """Return the local holding the data pointer of ``a`` (its stride: ``s`` + the name)."""
        found = self.bases.get(a)
        if found is None:
            found = self.bases[a] = self.fresh("b")
            self.before.append(f"const char *{found} = {a}->data;")
            self.before.append(f"const int64_t s{found} = {a}->strides[0];")
        return found

    def store(self, out: Variable, value: str) -> None:
        """Write ``value`` into the loop's output array of ``out`` (when it leaves the loop)."""
        target = self.outputs.get(out)
        if target is None:
            return
        dtype = dtype_of(out)
        o = self.fresh("o")
        self.before += [
            f"if (kiln_alloc(ctx, {target}, {DTYPE_CODE[dtype]}, 1, n1)) return ctx->code;",
            f"{CTYPE[dtype]} *restrict {o} = ({CTYPE[dtype]} *){target}->data;",
        ]
        self.body.append(f"{o}[j] = {value};")
        self.stored.setdefault(value, (o, dtype))

    def program(self, op: object, args: list[str], in_dtypes: list[str], out_dtype: str) -> str:
        """Append the statements of a scalar op (or Composite) on ``args``; return its value."""
        body = scalar_body(op, in_dtypes, [out_dtype], self.vector_math)  # type: ignore[arg-type]
        stmts, (result,) = body(args, self.fresh)
        self.body.extend(stmts)
        name = self.fresh("e")
        self.body.append(f"const {CTYPE[out_dtype]} {name} = {result};")
        return name

    def member(self, inner: Apply) -> None:
        """Write one member (a map, a gather, a reduction or a scatter)."""
        kind = loop_kind(inner)
        (out,) = inner.outputs
        if kind == MAP:
            op = inner.op
            assert isinstance(op, Elemwise)
            args = [self.value(v) for v in inner.inputs]
            in_dtypes = [dtype_of(v) for v in inner.inputs]
            self.values[out] = self.program(op.scalar_op, args, in_dtypes, dtype_of(out))
            self.store(out, self.values[out])
        elif kind == GATHER:
            self.indexed = True
            x, idx = inner.inputs
            a = self.array(x)
            g = self.index(idx, f"{a}->shape[0]", x.type.shape[0])  # type: ignore[attr-defined]
            name, t = self.fresh("a"), CTYPE[dtype_of(out)]
            b = self.base(a)
            self.body.append(f"const {t} {name} = *(const {t} *)({b} + {g} * s{b});")
            self.values[out] = name
            self.store(out, name)
        elif kind == REDUCE:
            self.fold(inner)
        else:
            self.scatter(inner)

    def fold(self, inner: Apply) -> None:
        """Write a reduction: a local accumulator, its value folded at ``j``, its result after."""
        op, (out,) = inner.op, inner.outputs
        out_dtype = dtype_of(out)
        in_dtypes = [dtype_of(v) for v in inner.inputs]
        args = [self.value(v) for v in inner.inputs]
        if isinstance(op, FusedReduce):
            pre = op.scalar_op.output_dtype(*in_dtypes)
            v = self.program(op.scalar_op, args, in_dtypes, pre)
        else:
            pre, v = in_dtypes[0], args[0]
        kind = op.kind  # type: ignore[attr-defined]
        # A float32 sum accumulates in float64 (one accumulator, not NumPy's pairwise sum).
        acc_dtype = "float64" if kind == "sum" and out_dtype == "float32" else out_dtype
        acc, t = self.fresh("acc"), CTYPE[out_dtype]
        self.before.append(f"{CTYPE[acc_dtype]} {acc} = {identity(kind, acc_dtype)};")
        value = cast_expr(cast_expr(v, pre, out_dtype), out_dtype, acc_dtype)
        self.body.append(_Fold(acc, value, kind, acc_dtype))
        target = self.outputs[out]
        self.after += [
            f"if (kiln_alloc(ctx, {target}, {DTYPE_CODE[out_dtype]}, 0, NULL)) return ctx->code;",
            f"*({t} *){target}->data = {cast_expr(acc, acc_dtype, out_dtype)};",
        ]

    def scatter(self, inner: Apply) -> None:
        """Write ``out[idx[j]] += y_j`` (or ``=``) into a copy of the vector ``x``."""
        self.indexed = True
        x, y, idx = inner.inputs
        (out,) = inner.outputs
        target = self.outputs.get(out)
        if target is None:  # a scatter read by no one outside: computed, not kept
            target = f"(&{self.fresh('scratch')})"
            self.before.append(f"kiln_array {target[2:-1]}; kiln_clear({target});")
            self.after.append(f"kiln_release({target});")
        self.before.append(f"if (kiln_copy(ctx, {target}, {self.array(x)})) return ctx->code;")
        size = f"{target}->shape[0]"
        g = self.index(idx, size, x.type.shape[0])  # type: ignore[attr-defined]
        t = CTYPE[dtype_of(out)]
        assign = "=" if inner.op.set_instead_of_inc else "+="  # type: ignore[attr-defined]
        o = self.fresh("o")
        self.before.append(f"{t} *{o} = ({t} *){target}->data;")
        self.body.append(f"{o}[{g}] {assign} {self.value(y)};")

    def strided(self) -> list[str]:
        """Return the loop over any strides: each fold combined at ``j``."""
        lines = [f"for (int64_t j = 0; j < {self.n}; j++) {{"]
        for entry in self.body:
            if isinstance(entry, _Load):
                p = entry.pointer
                lines.append(
                    f"const {entry.ctype} {entry.name} = *(const {entry.ctype} *)({p} + j * s{p});"
                )
            elif isinstance(entry, _Fold):
                lines.append(
                    f"{entry.acc} = {combine(entry.kind, entry.acc, entry.value, entry.dtype)};"
                )
            else:
                lines.append(entry)
        return [*lines, "}"]

    def simd(self) -> tuple[list[str], list[str], list[str]]:
        """Return the loops of a long loop calling vectorizable math, and what frames them.

        The loop reads each vector at unit stride (a vector of other strides is copied
        first) through ``restrict`` pointers, and stores each folded value in a buffer
        (the call's arena or the heap): no value it reads is written in it, no
        accumulator is carried through it, so the compiler makes SIMD code of it. A
        second loop folds the buffers in the order of the first (the same bits as one
        loop). Return the statements before the loops, the loops, and the releases.
        """
        scratch: list[str] = []
        setup: list[str] = []
        release: list[str] = []
        fail = "{ %s return ctx->code; }"
        lines = ["KILN_IVDEP", f"for (int64_t j = 0; j < {self.n}; j++) {{"]
        second = [f"for (int64_t j = 0; j < {self.n}; j++) {{"]
        for entry in self.body:
            if isinstance(entry, _Load):
                p, t, c = entry.pointer, entry.ctype, f"c{entry.pointer}"
                scratch.append(f"kiln_array {c}; kiln_clear(&{c});")
                release.append(f"kiln_release(&{c});")
                setup += [
                    f"if (s{p} != {entry.itemsize}) {{",
                    f"if (kiln_copy(ctx, &{c}, {entry.array})) {fail % ' '.join(release)}",
                    f"{p} = {c}.data;",
                    "}",
                    f"const {t} *restrict u{p} = (const {t} *){p};",
                ]
                lines.append(f"const {t} {entry.name} = u{p}[j];")
            elif isinstance(entry, _Fold):
                t = CTYPE[entry.dtype]
                found = self.stored.get(entry.value)
                if found is not None and found[1] == entry.dtype:
                    buf = found[0]
                else:
                    b = self.fresh("fb")
                    buf = f"u{b}"
                    scratch.append(f"kiln_array {b}; kiln_clear(&{b});")
                    release.append(f"kiln_release(&{b});")
                    alloc = f"kiln_alloc(ctx, &{b}, {DTYPE_CODE[entry.dtype]}, 1, n1)"
                    setup += [
                        f"if ({alloc}) {fail % ' '.join(release)}",
                        f"{t} *restrict {buf} = ({t} *){b}.data;",
                    ]
                    lines.append(f"{buf}[j] = {entry.value};")
                second.append(
                    f"{entry.acc} = {combine(entry.kind, entry.acc, f'{buf}[j]', entry.dtype)};"
                )
            else:
                lines.append(entry)
        loops = [*lines, "}", *(second + ["}"] if len(second) > 1 else [])]
        return scratch + setup, loops, release

    def devectorize(self) -> None:
        """Write C's scalar math in a loop that cannot be SIMD (:func:`simd_or_scalar`)."""
        text = [e if isinstance(e, str) else e.value for e in self.body if not isinstance(e, _Load)]
        if not self.indexed and simd_or_scalar(text) == text:
            return
        for k, entry in enumerate(self.body):
            if isinstance(entry, str):
                self.body[k] = scalar_math(entry)
            elif isinstance(entry, _Fold):
                self.body[k] = dataclasses.replace(entry, value=scalar_math(entry.value))
        self.stored = {scalar_math(v): o for v, o in self.stored.items()}

    def write(self) -> str:
        """Return the function body: before the loop, the loop, after it."""
        for inner in self.members:
            self.member(inner)
        self.devectorize()
        text = [e for e in self.body if isinstance(e, str)]
        text += [e.value for e in self.body if isinstance(e, _Fold)]
        if self.vector_math and not self.indexed and calls_vector_math(text):
            setup, loop, release = self.simd()
        else:
            setup, loop, release = [], self.strided(), []
        return "\n".join(
            [
                f"const int64_t n1[1] = {{{self.n}}}; (void)n1;",
                *self.before,
                *setup,
                *loop,
                *release,
                *self.after,
                "return 0;",
            ]
        )


@dataclasses.dataclass(frozen=True)
class _Load:
    """Read ``name`` (of C type ``ctype``) at ``j`` from the vector at ``pointer``."""

    name: str
    ctype: str
    pointer: str
    array: str  # the kiln_array * it reads
    itemsize: int


@dataclasses.dataclass(frozen=True)
class _Fold:
    """Combine ``value`` into the accumulator ``acc`` (a ``kind`` reduction in ``dtype``)."""

    acc: str
    value: str
    kind: str
    dtype: str


@c_funcify.register(FusedLoop)
def c_funcify_FusedLoop(op: FusedLoop, node: Apply, io: NodeIO) -> str:  # noqa: N802
    """Write the inner graph as one loop over ``op.length`` (see the module docstring)."""
    return _LoopWriter(op, node, io).write()


__all__ = ["C_LIMITS", "SMALL_DOT", "c_loop_fusion", "c_small_dot_to_sum"]
