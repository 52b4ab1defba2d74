"""Indexing as Numba code: basic views, gathers and scatters, with explicit bounds checks.

- :class:`~kiln_graph.Subtensor` slices ``x`` with Numba's basic indexing, so the
  result is a view of ``x`` as on the VM (a 0-d result is a new 0-d array, as NumPy's
  ``np.asarray(x[i, j])``).
- :class:`~kiln_graph.AdvancedSubtensor1` (``mu[idx]``) and its gradient
  :class:`~kiln_graph.AdvancedIncSubtensor1` (a scatter-add where repeated indices
  accumulate, ``np.add.at``) call tight loops of :mod:`kiln_numba._subtensor_kernels`,
  compiled once per type signature and cached on disk.
- :class:`~kiln_graph.IncSubtensor`, :class:`~kiln_graph.AdvancedSubtensor` and
  :class:`~kiln_graph.AdvancedIncSubtensor` are one loop nest over the indexed region,
  written from the index's layout (:func:`kiln_graph._index.layout`, NumPy's rules).

Numba checks no bounds, so every index is checked (before any is used) and a bad one
raises the VM's error: a :class:`~kiln_graph.KilnIndexError` with NumPy's message
prefixed by the Op. The update ops copy ``x`` unless the in-place phase made them
``inplace``; ``y`` broadcasts only along missing leading dimensions and dimensions of
static length 1, as on the VM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln_graph import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Apply,
    IncSubtensor,
    Subtensor,
)
from kiln_graph import index as _index
from kiln_numba._funcify import CodeContext, np_dtype, numba_funcify
from kiln_numba.elemwise import emit_loops

INT, ARRAY, NEWAXIS = _index.INT, _index.ARRAY, _index.NEWAXIS

# --- shared code generation -------------------------------------------------------------


def _rt(ctx: CodeContext, name: str) -> str:
    """Return the generated module's name for the run-time helper ``name``.

    The helpers live in :mod:`kiln_numba._subtensor_kernels`; each is imported once.
    """
    module = "kiln_numba._subtensor_kernels"
    return ctx.helper(f"{module}.{name}", lambda alias: f"from {module} import {name} as {alias}")


def _scalar(ctx: CodeContext, i: int) -> str:
    """Return an int64 expression for the integer scalar input ``i``."""
    value = ctx.static_int(i)
    return str(value) if value is not None else f"np.int64({ctx.inputs[i]}[()])"


def _tuple(items: Sequence[str]) -> str:
    return "(" + "".join(f"{s}, " for s in items) + ")"


def _at(name: str, items: Sequence[str]) -> str:
    """Return ``name`` indexed by ``items`` (``name[()]`` when there are none)."""
    return f"{name}[{', '.join(items)}]" if items else f"{name}[()]"


def _check_indices(ctx: CodeContext, i: int, n: str, axis: int, label: str) -> None:
    """Emit the check of every entry of the index array input ``i`` against length ``n``.

    Every index is checked before any is used, as NumPy does (also when the result is
    empty).
    """
    a = ctx.inputs[i]
    loop_vars = [ctx.fresh("q") for _ in range(ctx.input_type(i).ndim)]
    lines = [
        "    " * depth + f"for {q} in range({a}.shape[{depth}]):"
        for depth, q in enumerate(loop_vars)
    ]
    w = ctx.fresh("w")
    body = [
        f"{w} = np.int64({_at(a, loop_vars)})",
        f"if {w} < -{n} or {w} >= {n}:",
        f"    {_rt(ctx, 'index_error')}({w}, {n}, {axis}, {label!r})",
    ]
    lines.extend("    " * len(loop_vars) + line for line in body)
    ctx.emit("\n".join(lines))


def _y_index(ctx: CodeContext, loop_vars: Sequence[str]) -> str:
    """Return y (input 1) indexed at the region position, 0 along its broadcast dims."""
    y_t = ctx.input_type(1)
    offset = len(loop_vars) - y_t.ndim
    idx = ["0" if b else loop_vars[offset + d] for d, b in enumerate(y_t.broadcastable)]
    return _at(ctx.inputs[1], idx)


def _check_update(ctx: CodeContext, sizes: Sequence[str], label: str) -> None:
    """Emit the checks that y (input 1) fits the region of lengths ``sizes`` (as the VM).

    A dimension whose length is static in ``y`` and a literal of the same value in
    ``sizes`` needs none.
    """
    y, y_t = ctx.inputs[1], ctx.input_type(1)
    offset = len(sizes) - y_t.ndim
    for d, b in enumerate(y_t.broadcastable):
        size = sizes[offset + d]
        if b or (y_t.shape[d] is not None and size == str(y_t.shape[d])):
            continue
        check = _rt(ctx, "check_update_length")
        ctx.emit(f"{check}({y}.shape[{d}], {size}, {d}, {label!r})")


def _update_buffer(ctx: CodeContext, inplace: bool) -> str:
    """Emit the buffer an update op writes: ``x`` itself when in place, else a copy."""
    out, x = ctx.outputs[0], ctx.inputs[0]
    if inplace:
        ctx.emit(f"{out} = {_rt(ctx, 'writable')}({x})")
    else:
        ctx.emit(f"{out} = copy({x})")
    return out


IndexFn = Callable[[list[str]], tuple[list[str], list[str]]]


def _region(ctx: CodeContext, idx_list: tuple, first: int, label: str) -> tuple[list[str], IndexFn]:
    """Emit the set-up of ``x[index]`` as a loop nest (any mix of index kinds).

    ``x`` is input 0 and the index inputs start at input ``first``. Emits the checks of
    integers and index arrays, the slices' first positions and lengths and the index
    arrays' broadcast. Returns the run-time length of each dimension of ``x[index]`` and
    a function mapping loop variables over them to (statements, index of ``x``).
    """
    x = ctx.inputs[0]
    ndim = ctx.input_type(0).ndim
    groups = _index.group(idx_list, list(range(first, len(ctx.inputs))))
    source: dict[int, tuple[str, ...]] = {}  # dimension of x -> how it is indexed
    arrays: list[tuple[int, int]] = []  # (dimension of x, input) of the index arrays
    d = 0
    for e, g in zip(idx_list, groups, strict=True):
        if e == NEWAXIS:
            continue
        n = f"{x}.shape[{d}]"
        if isinstance(e, tuple):
            source[d] = _slice(ctx, g, n, label, ctx.input_type(0).shape[d])
        elif e == INT or ctx.input_type(g).ndim == 0:
            source[d] = ("int", _int_index(ctx, g, d, label))
        else:
            _check_indices(ctx, g, n, d, label)
            source[d] = ("array", str(len(arrays)))
        if e == ARRAY:
            arrays.append((d, g))
        d += 1
    adv_sizes, adv_entries = _broadcast(ctx, arrays, label)
    sizes: list[str] = []
    for desc in _index.layout(idx_list, ndim):
        if desc[0] == "new":
            sizes.append("1")
        elif desc[0] == "dim":
            sizes.append(f"{x}.shape[{desc[1]}]")
        elif desc[0] == "slice":
            sizes.append(source[desc[1]][2])
        else:
            sizes.extend(adv_sizes)
    layout = _index.layout(idx_list, ndim)

    def index(loop_vars: list[str]) -> tuple[list[str], list[str]]:
        it = iter(loop_vars)
        var_of: dict[int, str] = {}
        adv_vars: list[str] = []
        for desc in layout:
            if desc[0] == "adv":
                adv_vars = [next(it) for _ in adv_sizes]
                continue
            var = next(it)
            if desc[0] != "new":
                var_of[desc[1]] = var
        lines: list[str] = []
        x_index: list[str] = []
        for dim in range(ndim):
            kind = source.get(dim, ("dim",))
            if kind[0] == "int":
                x_index.append(kind[1])
            elif kind[0] == "slice":
                x_index.append(_position(kind[1], var_of[dim], kind[3]))
            elif kind[0] == "array":
                v = ctx.fresh("v")
                lines.append(f"{v} = np.int64({adv_entries[int(kind[1])](adv_vars)})")
                lines.append(f"if {v} < 0:")
                lines.append(f"    {v} += {x}.shape[{dim}]")
                x_index.append(v)
            else:
                x_index.append(var_of[dim])
        return lines, x_index

    return sizes, index


def _position(first: str, var: str, step: str) -> str:
    """Return the source of ``first + var * step``, simplified for a unit step."""
    if step == "1":
        return var if first == "0" else f"{first} + {var}"
    return f"{first} + {var} * {step}"


def _int_index(ctx: CodeContext, g: int, d: int, label: str) -> str:
    """Return integer index input ``g`` along dimension ``d`` of ``x``, checked, >= 0.

    A constant index into a dimension of static length is checked here, once, and
    written as a literal; any other is checked at run time (``check_index``).
    """
    k, n = ctx.static_int(g), ctx.input_type(0).shape[d]
    if k is not None and n is not None and -n <= k < n:
        return str(k % n)
    name = ctx.fresh("k")
    x = ctx.inputs[0]
    ctx.emit(
        f"{name} = {_rt(ctx, 'check_index')}({_scalar(ctx, g)}, {x}.shape[{d}], {d}, {label!r})"
    )
    return name


def _slice(
    ctx: CodeContext, parts: tuple, n: str, label: str, static_n: int | None = None
) -> tuple[str, ...]:
    """Emit a slice's first position and length; return ("slice", first, length, step).

    A slice of constants over a dimension of static length ``static_n`` is resolved
    here (as Python's ``slice.indices``), with no run-time code.
    """
    values = [None if p is None else ctx.static_int(p) for p in parts]
    static = all(v is not None or p is None for v, p in zip(values, parts, strict=True))
    if static and static_n is not None and values[2] != 0:
        span = range(*slice(*values).indices(static_n))
        return ("slice", str(span.start), str(len(span)), str(span.step))
    start, stop, step = (None if p is None else _scalar(ctx, p) for p in parts)
    if step is None:
        step = "1"
    elif parts[2] is not None and ctx.static_int(parts[2]) is None:
        ctx.emit(f"{_rt(ctx, 'check_step')}({step}, {label!r})")
    if step not in ("1", "-1") or start is not None or stop is not None:
        stp = ctx.fresh("st")
        ctx.emit(f"{stp} = {step}")
        first, length = ctx.fresh("first"), ctx.fresh("len")
        args = f"{start or 0}, {stop or 0}, {stp}, {n}, {start is not None}, {stop is not None}"
        ctx.emit(f"{first}, {length} = {_rt(ctx, 'slice_span')}({args})")
        return ("slice", first, length, stp)
    if step == "1":
        return ("slice", "0", n, "1")
    return ("slice", f"({n} - 1)", n, "-1")


def _broadcast(
    ctx: CodeContext, arrays: list[tuple[int, int]], label: str
) -> tuple[list[str], list[Callable[[list[str]], str]]]:
    """Emit the index arrays' broadcast shape.

    Returns its lengths and, per array, a function from loop variables over the
    broadcast shape to the array's entry there (index 0 along its broadcast dimensions).
    """
    if not arrays:
        return [], []
    ndims = [ctx.input_type(g).ndim for _, g in arrays]
    nb = max(ndims)
    sizes = []
    for j in range(nb):
        b = ctx.fresh("b")
        ctx.emit(f"{b} = 1")
        for (_, g), nd in zip(arrays, ndims, strict=True):
            if j >= nb - nd:
                n = f"{ctx.inputs[g]}.shape[{j - nb + nd}]"
                ctx.emit(f"{b} = {_rt(ctx, 'broadcast_length')}({b}, {n}, {label!r})")
        sizes.append(b)
    entries = []
    for (_, g), nd in zip(arrays, ndims, strict=True):
        # Per dimension of the array: "" (it runs along), "0" (static length 1) or the
        # name of a run-time 0/1 factor (length 1 at run time broadcasts).
        factors = []
        for p, length in enumerate(ctx.input_type(g).shape):
            if length == 1:
                factors.append("0")
            elif length is not None:
                factors.append("")
            else:
                f = ctx.fresh("f")
                ctx.emit(f"{f} = 0 if {ctx.inputs[g]}.shape[{p}] == 1 else 1")
                factors.append(f)
        entries.append(_array_entry(ctx.inputs[g], nb - nd, factors))
    return sizes, entries


def _array_entry(a: str, offset: int, factors: list[str]) -> Callable[[list[str]], str]:
    """Return the function from broadcast loop variables to the index array ``a``'s entry.

    ``offset`` is the number of leading broadcast dimensions ``a`` lacks; ``factors``
    says, per dimension of ``a``, how its loop variable is used (see :func:`_broadcast`).
    """

    def entry(adv_vars: list[str]) -> str:
        items = [
            "0" if f == "0" else var if not f else f"{var} * {f}"
            for var, f in zip(adv_vars[offset:], factors, strict=True)
        ]
        return _at(a, items)

    return entry


# --- basic indexing ---------------------------------------------------------------------


@numba_funcify.register(Subtensor)
def numba_funcify_Subtensor(op: Subtensor, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Index ``x`` with Numba's basic indexing (a view); check every integer index."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    label = str(op)
    groups = _index.group(op.idx_list, list(range(1, len(ctx.inputs))))
    items: list[str] = []
    d = 0
    for e, g in zip(op.idx_list, groups, strict=True):
        if e == NEWAXIS:
            items.append("None")
            continue
        if e == INT:
            items.append(_int_index(ctx, g, d, label))
        else:
            start, stop, step = ("" if p is None else _scalar(ctx, p) for p in g)
            if g[2] is not None and ctx.static_int(g[2]) is None:
                st = ctx.fresh("st")
                ctx.emit(f"{st} = {step}\n{_rt(ctx, 'check_step')}({st}, {label!r})")
                step = st
            items.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        d += 1
    if not items:
        ctx.emit(f"{out} = {x}")
    elif ctx.output_type().ndim == 0:  # a scalar in Numba: return it as a new 0-d array
        ctx.emit(
            f"""
            {out} = empty((), {np_dtype(ctx.output_type().dtype)})
            {out}[()] = {_at(x, items)}
            """
        )
    else:
        ctx.emit(f"{out} = {_at(x, items)}")


def _emit_update(ctx: CodeContext, idx_list: tuple, set_: bool, inplace: bool, label: str) -> None:
    """Emit ``x`` with ``x[index]`` set to / incremented by ``y`` as one loop nest."""
    out = _update_buffer(ctx, inplace)
    sizes, index = _region(ctx, idx_list, 2, label)
    _check_update(ctx, sizes, label)
    assign = "=" if set_ else "+="

    def body(loop_vars: list[str]) -> list[str]:
        lines, x_index = index(loop_vars)
        return [*lines, f"{_at(out, x_index)} {assign} {_y_index(ctx, loop_vars)}"]

    emit_loops(ctx, sizes, body)


@numba_funcify.register(IncSubtensor)
def numba_funcify_IncSubtensor(op: IncSubtensor, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Copy ``x`` (unless in place), then set / increment the region in one loop nest."""
    _emit_update(ctx, op.idx_list, op.set_instead_of_inc, op.inplace, str(op))


# --- advanced indexing ------------------------------------------------------------------


@numba_funcify.register(AdvancedSubtensor)
def numba_funcify_AdvancedSubtensor(op: AdvancedSubtensor, node: Apply, ctx: CodeContext) -> None:  # noqa: N802
    """Gather ``x[index]`` in one loop nest over the result (NumPy's layout rules)."""
    out = ctx.outputs[0]
    sizes, index = _region(ctx, op.idx_list, 1, str(op))
    dtype = np_dtype(ctx.output_type().dtype)
    ctx.emit(f"{out} = empty({_tuple(sizes)}, {dtype})")

    def body(loop_vars: list[str]) -> list[str]:
        lines, x_index = index(loop_vars)
        return [*lines, f"{_at(out, loop_vars)} = {_at(ctx.inputs[0], x_index)}"]

    emit_loops(ctx, sizes, body)


@numba_funcify.register(AdvancedIncSubtensor)
def numba_funcify_AdvancedIncSubtensor(  # noqa: N802
    op: AdvancedIncSubtensor, node: Apply, ctx: CodeContext
) -> None:
    """Copy ``x`` (unless in place), then scatter ``y``; repeated indices accumulate."""
    _emit_update(ctx, op.idx_list, op.set_instead_of_inc, op.inplace, str(op))


def _full_update_value(ctx: CodeContext, sizes: list[str]) -> str:
    """Return y (input 1) with the region's shape (a broadcast view where needed)."""
    y, y_t = ctx.inputs[1], ctx.input_type(1)
    if y_t.ndim == len(sizes) and not any(y_t.broadcastable):
        return y
    name = ctx.fresh("yb")
    ctx.emit(f"{name} = np.broadcast_to({y}, {_tuple(sizes)})")
    return name


def _kernel(kind: str, ndim: int) -> str:
    """Return the name of the gather / scatter kernel for ``ndim`` dimensions."""
    return f"{kind}_{ndim}d" if ndim <= 2 else f"{kind}_nd"


@numba_funcify.register(AdvancedSubtensor1)
def numba_funcify_AdvancedSubtensor1(  # noqa: N802
    op: AdvancedSubtensor1, node: Apply, ctx: CodeContext
) -> None:
    """Gather rows ``x[idx]`` with a tight compiled loop (cached once per type)."""
    take = _rt(ctx, _kernel("take", ctx.input_type(0).ndim))
    ctx.emit(f"{ctx.outputs[0]} = {take}({ctx.inputs[0]}, {ctx.inputs[1]})")


@numba_funcify.register(AdvancedIncSubtensor1)
def numba_funcify_AdvancedIncSubtensor1(  # noqa: N802
    op: AdvancedIncSubtensor1, node: Apply, ctx: CodeContext
) -> None:
    """Scatter ``y`` into rows ``idx`` of (a copy of) ``x``; repeats accumulate (np.add.at)."""
    ndim = ctx.input_type(0).ndim
    label = str(op)
    out = _update_buffer(ctx, op.inplace)
    idx = ctx.inputs[2]
    x_t, n = ctx.input_type(0), ctx.input_type(2).shape[0]
    sizes = [f"{idx}.shape[0]" if n is None else str(n)]
    sizes += [
        f"{ctx.inputs[0]}.shape[{d}]" if x_t.shape[d] is None else str(x_t.shape[d])
        for d in range(1, ndim)
    ]
    _check_update(ctx, sizes, label)
    y = _full_update_value(ctx, sizes)
    scatter = _rt(ctx, _kernel("scatter", ndim))
    ctx.emit(f"{scatter}({out}, {y}, {idx}, {op.set_instead_of_inc}, {label!r})")
