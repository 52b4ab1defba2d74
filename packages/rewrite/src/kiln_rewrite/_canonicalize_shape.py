"""Canonicalize: shapes, DimShuffle, Reshape, Alloc, shape vectors and reductions.

Shape reads are replaced by what the producing Op's ``infer_shape`` says, so a shape
no longer depends on computing the tensor it describes (gradients read the shapes of
intermediate results through ``shape_tuple``). DimShuffles merge; reshapes, allocs
and dimshuffles that change nothing disappear; reductions of broadcast values and
over length-1 axes become elementwise arithmetic.
"""

from __future__ import annotations

import numpy as np

from kiln_graph import Apply, Constant, DimShuffle, Elemwise, Subtensor, Variable
from kiln_graph import tensor as kt
from kiln_graph.index import group as group_index_entries
from kiln_graph.ops import Alloc, CAReduce, MakeVector, Reshape, Shape, ShapeI
from kiln_rewrite._canonicalize_util import dim_of, fit_to, local_shape, same_length
from kiln_rewrite._db import register_local

_CHEAP = ("fast_run", "fast_compile")

# --- DimShuffle ---------------------------------------------------------------------------


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="dimshuffle(x) -> x when it only moves length-1 dims (same type, same order "
    "of the other dims)",
    tracks=[DimShuffle],
)
def local_useless_dimshuffle(node: Apply) -> Variable | None:
    """Remove a DimShuffle (a transpose) whose result has the same elements in order."""
    (x,) = node.inputs
    out = node.outputs[0]
    if out.type != x.type:
        return None
    xshape = x.type.shape  # type: ignore[attr-defined]
    kept = [o for o in node.op.new_order if o != "x" and xshape[o] != 1]  # type: ignore[attr-defined]
    return x if kept == sorted(kept) else None


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="dimshuffle(dimshuffle(x, p), q) -> dimshuffle(x, p[q])",
    tracks=[DimShuffle],
)
def local_dimshuffle_merge(node: Apply) -> Variable | None:
    """Compose two consecutive DimShuffles into one."""
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, DimShuffle):
        return None
    first = x.owner.op.new_order
    order = ["x" if o == "x" else first[o] for o in node.op.new_order]  # type: ignore[attr-defined]
    return kt.dimshuffle(x.owner.inputs[0], order)


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="f(dimshuffle(a, (x,)), dimshuffle(b, (x,))) -> dimshuffle(f(a, b), (x,)) for "
    "elementwise f of broadcast scalars (and one-element constants)",
    tracks=[Elemwise],
)
def local_elemwise_of_broadcast_scalars(node: Apply) -> Variable | None:
    """Apply an elementwise op to the scalars before broadcasting them, not after.

    A value of static shape ``(1,)`` is an array; the scalar it broadcasts is a plain
    number on a compiled backend (no allocation, no loop).
    """
    out = node.outputs[0]
    ndim = out.type.ndim  # type: ignore[attr-defined]
    if len(node.outputs) != 1 or ndim == 0 or getattr(node.op.scalar_op, "nout", 1) != 1:  # type: ignore[attr-defined]
        return None
    scalars: list[Variable] = []
    for v in node.inputs:
        owner = v.owner
        if owner is not None and isinstance(owner.op, DimShuffle) and owner.op.input_ndim == 0:
            scalars.append(owner.inputs[0])
        elif isinstance(v, Constant) and v.data.size == 1:
            scalars.append(kt.constant(v.data.reshape(()), dtype=v.data.dtype.name))
        else:
            return None
    if not any(v.owner is not None or not isinstance(v, Constant) for v in scalars):
        return None  # constants only: constant folding's
    scalar = Elemwise(node.op.scalar_op)(*scalars)  # type: ignore[attr-defined]
    if scalar.type.dtype != out.type.dtype:  # type: ignore[attr-defined]
        return None
    return kt.dimshuffle(scalar, ("x",) * ndim)


# --- Reshape, Alloc -----------------------------------------------------------------------


def _shape_entries(vec: Variable) -> list[Variable] | None:
    """Return the int scalar entries of a shape vector (constant, MakeVector, Shape)."""
    if isinstance(vec, Constant):
        return [kt.constant(np.int64(v)) for v in vec.data]
    owner = vec.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return list(owner.inputs)
    if owner is not None and isinstance(owner.op, Shape):
        return [dim_of(owner.inputs[0], d) for d in range(owner.inputs[0].type.ndim)]  # type: ignore[attr-defined]
    return None


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="reshape(x, shape(x)) -> x (each new length provably equals the old one)",
    tracks=[Reshape],
)
def local_useless_reshape(node: Apply) -> Variable | None:
    """Remove a reshape to the shape ``x`` already has."""
    x, vec = node.inputs
    if x.type.ndim != node.op.ndim:  # type: ignore[attr-defined]
        return None
    entries = _shape_entries(vec)
    if entries is None:
        return None
    if all(same_length(x, d, e) for d, e in enumerate(entries)):
        return fit_to(x, node.outputs[0])
    return None


@register_local(
    "canonicalize",
    "fast_run",
    identity="reshape(reshape(x, s1), s2) -> reshape(x, s2)",
    tracks=[Reshape],
)
def local_reshape_reshape(node: Apply) -> Variable | None:
    """Skip an inner reshape: reshaping is in C order, so only the last shape counts."""
    x, vec = node.inputs
    if x.owner is None or not isinstance(x.owner.op, Reshape):
        return None
    return fit_to(node.op(x.owner.inputs[0], vec), node.outputs[0])  # type: ignore[operator]


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="alloc(x, *shape(x)) -> x, broadcast_to(x, x.shape) -> x",
    tracks=[Alloc],
)
def local_useless_alloc(node: Apply) -> Variable | None:
    """Remove an Alloc (broadcast) of a value that already has the target shape."""
    x, *dims = node.inputs
    if x.type.ndim != len(dims):  # type: ignore[attr-defined]
        return None
    if all(same_length(x, d, n) for d, n in enumerate(dims)):
        return fit_to(x, node.outputs[0])
    return None


# --- shapes -------------------------------------------------------------------------------


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="shape(x) -> constant (static shape); shape(op(...)) -> "
    "make_vector(infer_shape of op)",
    tracks=[Shape],
)
def local_shape_of_computed(node: Apply) -> Variable | None:
    """Replace the shape of a computed tensor by its inferred shape."""
    (x,) = node.inputs
    static = x.type.shape  # type: ignore[attr-defined]
    if None not in static:
        return kt.constant(np.array(static, dtype="int64").reshape(len(static)))
    if x.owner is None:
        return None
    shp = local_shape(x)
    if shp is None:
        return None
    return MakeVector("int64")(*shp)


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="shape_i(x, i) -> constant (static length); shape_i(op(...), i) -> "
    "infer_shape(op)[i]; shape_i(alloc(v, *dims), i) -> dims[i]",
    tracks=[ShapeI],
)
def local_shape_i_of_computed(node: Apply) -> Variable | None:
    """Replace the length of a dimension by its static value or inferred expression."""
    (x,) = node.inputs
    i = node.op.i  # type: ignore[attr-defined]
    n = x.type.shape[i]  # type: ignore[attr-defined]
    if n is not None:
        return kt.constant(np.int64(n))
    if x.owner is None:
        return None
    shp = local_shape(x)
    if shp is None:
        return None
    return fit_to(shp[i], node.outputs[0])


def _constant_index(node: Apply) -> list[object] | None:
    """Return a Subtensor's index as Python ints / slices (``None`` if not constant)."""
    values = node.inputs[1:]
    if not all(isinstance(v, Constant) for v in values):
        return None
    out: list[object] = []
    idx_list = node.op.idx_list  # type: ignore[attr-defined]
    for entry, g in zip(idx_list, group_index_entries(idx_list, values), strict=True):
        if isinstance(entry, tuple):
            out.append(slice(*(None if p is None else int(p.data) for p in g)))
        elif entry == "i":
            out.append(int(g.data))
        else:
            return None
    return out


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="make_vector(a, b, c)[1] -> b, make_vector(a, b, c)[1:] -> make_vector(b, c), "
    "shape(x)[i] -> shape_i(x, i)",
    tracks=[Subtensor],
)
def local_subtensor_of_shape_vector(node: Apply) -> Variable | None:
    """Index a shape vector (MakeVector or Shape) with a constant index statically."""
    x = node.inputs[0]
    owner = x.owner
    if owner is None or not isinstance(owner.op, MakeVector | Shape):
        return None
    index = _constant_index(node)
    if index is None or len(index) != 1:
        return None
    (k,) = index
    n = x.type.shape[0]  # type: ignore[attr-defined]
    assert n is not None
    if isinstance(owner.op, Shape):
        if not isinstance(k, int) or not -n <= k < n:
            return None
        return kt.shape_i(owner.inputs[0], k % n)
    if isinstance(k, int):
        if not -n <= k < n:
            return None  # out of bounds: keep the run-time error
        return owner.inputs[k % n]
    assert isinstance(k, slice)
    picked = owner.inputs[k]
    if not picked:
        return kt.constant(np.zeros(0, dtype=owner.op.dtype))
    return MakeVector(owner.op.dtype)(*picked)


# --- reductions ---------------------------------------------------------------------------


@register_local(
    "canonicalize",
    "fast_run",
    identity="sum(alloc(c, n)) -> c * n, prod(alloc(c, n)) -> c ** n (over broadcast dims)",
    tracks=[CAReduce],
)
def local_reduce_of_alloc(node: Apply) -> Variable | None:
    """Reduce an Alloc over dimensions it broadcasts along, without building it.

    Summing ``n`` copies of ``c`` rounds ``n`` times; ``c * n`` rounds once.
    """
    op = node.op
    if op.kind not in ("sum", "prod"):  # type: ignore[attr-defined]
        return None
    (a,) = node.inputs
    if a.owner is None or not isinstance(a.owner.op, Alloc):
        return None
    v, *dims = a.owner.inputs
    pad = len(dims) - v.type.ndim  # type: ignore[attr-defined]
    vshape = v.type.shape  # type: ignore[attr-defined]
    axes = op.axis  # type: ignore[attr-defined]
    if not axes or any(ax >= pad and vshape[ax - pad] != 1 for ax in axes):
        return None
    padded = kt.dimshuffle(v, ("x",) * pad + tuple(range(v.type.ndim)))  # type: ignore[attr-defined]
    kept = [d for d in range(len(dims)) if d not in axes]
    base = kt.cast(kt.dimshuffle(padded, kept), node.outputs[0].dtype)  # type: ignore[attr-defined]
    count = [dims[ax] for ax in axes]
    n = kt.cast(kt.mul(*count) if len(count) > 1 else count[0], base.dtype)
    result = kt.mul(base, n) if op.kind == "sum" else kt.pow(base, n)  # type: ignore[attr-defined]
    return fit_to(result, node.outputs[0], [dims[d] for d in kept])


@register_local(
    "canonicalize",
    "fast_run",
    identity="sum(x, axis=a) -> dimshuffle(x) where dim a has static length 1 "
    "(also prod, max, min; all / any give x != 0)",
    tracks=[CAReduce],
)
def local_reduce_length_one(node: Apply) -> Variable | None:
    """Drop the reduced axes of static length 1: reducing one element is that element."""
    op = node.op
    (x,) = node.inputs
    shape = x.type.shape  # type: ignore[attr-defined]
    ones = [ax for ax in op.axis if shape[ax] == 1]  # type: ignore[attr-defined]
    if not ones:
        return None
    y = kt.dimshuffle(x, [d for d in range(x.type.ndim) if d not in ones])  # type: ignore[attr-defined]
    rest = tuple(ax - sum(o < ax for o in ones) for ax in op.axis if ax not in ones)  # type: ignore[attr-defined]
    if rest:
        return fit_to(CAReduce(op.kind, rest)(y), node.outputs[0])  # type: ignore[attr-defined]
    if op.kind in ("all", "any") and y.dtype != "bool":  # type: ignore[attr-defined]
        y = kt.neq(y, 0)
    return fit_to(y, node.outputs[0])


@register_local(
    "canonicalize",
    *_CHEAP,
    identity="reduce(x, axis=()) -> x (cast to the reduction's dtype; all / any: x != 0)",
    tracks=[CAReduce],
)
def local_reduce_no_axes(node: Apply) -> Variable | None:
    """Remove a reduction over no axes."""
    op = node.op
    if op.axis:  # type: ignore[attr-defined]
        return None
    (x,) = node.inputs
    if op.kind in ("all", "any") and x.dtype != "bool":  # type: ignore[attr-defined]
        x = kt.neq(x, 0)
    return fit_to(x, node.outputs[0])
