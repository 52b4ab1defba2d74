"""Helpers the canonicalize rewrites share: a node's own shape, fitting a replacement.

A replacement must have the type of the variable it replaces: the same dtype and the
same broadcasting (in kiln a dimension broadcasts exactly where its static length is
1). :func:`fit_to` casts and broadcasts a candidate replacement to that type, reading
the lengths it needs from the replaced node's ``infer_shape`` (:func:`local_shape`),
so the replacement never depends on computing the value it replaces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kiln_graph import Constant, DimShuffle, Elemwise, TensorType, Variable
from kiln_graph import tensor as kt
from kiln_graph.helpers import shape_constant, shape_tuple, uses_any
from kiln_graph.ops import ShapeI
from kiln_graph.scalar import DISCRETE_DTYPES

#: How many nodes :func:`local_shape` inspects, looking for a self-reference, before it
#: gives up (and reports no usable shape).
_MAX_SHAPE_WALK = 500


def is_discrete(dtype: str) -> bool:
    """Whether ``dtype`` is an integer or boolean dtype (exact arithmetic, no NaN/inf)."""
    return dtype in DISCRETE_DTYPES


def scalar_op_is(v: Variable, op_class: type) -> bool:
    """Whether ``v`` is computed by an ``Elemwise`` of a ScalarOp of ``op_class``."""
    owner = v.owner
    return (
        owner is not None
        and isinstance(owner.op, Elemwise)
        and isinstance(owner.op.scalar_op, op_class)
    )


def is_left_pad(v: Variable) -> bool:
    """Whether ``v`` is a DimShuffle that only adds broadcastable dims on the left.

    Elemwise inserts exactly those to line up inputs of fewer dimensions.
    """
    owner = v.owner
    if owner is None or not isinstance(owner.op, DimShuffle):
        return False
    op = owner.op
    pad = len(op.new_order) - op.input_ndim
    return pad >= 0 and op.new_order == ("x",) * pad + tuple(range(op.input_ndim))


def _mentions(roots: Sequence[Variable], stop: set[Variable], targets: set[Variable]) -> bool:
    """Return whether the graph of ``roots`` above ``stop`` uses a target (conservative)."""
    return uses_any(roots, targets, stop, limit=_MAX_SHAPE_WALK)


def local_shape(v: Variable) -> tuple[Variable, ...] | None:
    """Return the shape of ``v`` from its owner's ``infer_shape`` (one step), or ``None``.

    Each entry is an int64 scalar: a constant where the static length is known, else
    the expression ``infer_shape`` gives in terms of the owner's inputs and their
    shapes. ``None`` when the owner has no ``infer_shape`` or its answer refers to the
    owner's own outputs (then reading the shape would still compute ``v``).
    """
    vt = v.type
    if not isinstance(vt, TensorType):
        return None
    node = v.owner
    if node is None:
        return shape_tuple(v)
    in_shapes = [shape_tuple(i) if isinstance(i.type, TensorType) else None for i in node.inputs]
    try:
        shapes = node.op.infer_shape(node, in_shapes)
    except NotImplementedError:
        return None
    shp = shapes[v.index or 0]
    if shp is None or len(shp) != vt.ndim:
        return None
    out = tuple(
        shape_constant(n) if n is not None else s if isinstance(s, Variable) else kt.as_tensor(s)
        for n, s in zip(vt.shape, shp, strict=True)
    )
    if _mentions(list(out), set(node.inputs), set(node.outputs)):
        return None
    return out


def dim_of(x: Variable, d: int, depth: int = 32) -> Variable:
    """Return the simplest known expression for the length of dimension ``d`` of ``x``.

    Follows :func:`local_shape` through chains of computed variables (the length of
    ``exp(x + y)`` is the length of ``x``), as the shape rewrites do.
    """
    for _ in range(depth):
        n = x.type.shape[d]  # type: ignore[attr-defined]
        if n is not None:
            return shape_constant(n)
        shp = local_shape(x) if x.owner is not None else None
        if shp is None:
            break
        entry = shp[d]
        owner = entry.owner
        if owner is not None and isinstance(owner.op, ShapeI) and owner.inputs[0] is not x:
            x, d = owner.inputs[0], owner.op.i
            continue
        return entry
    return kt.shape_i(x, d)


def same_length(x: Variable, d: int, length: Variable) -> bool:
    """Whether ``length`` (an int scalar) provably equals the length of dim ``d`` of ``x``."""
    n = x.type.shape[d]  # type: ignore[attr-defined]
    if isinstance(length, Constant):
        return n is not None and int(length.data) == n
    return dim_of(x, d) is length


def fit_to(
    rep: Variable, out: Variable, shape: Sequence[Variable] | None = None
) -> Variable | None:
    """Return ``rep`` cast and broadcast to the type of ``out``, or ``None`` if it can't be.

    Adds leading broadcastable dimensions, casts to ``out``'s dtype and, where ``rep``
    broadcasts (static length 1) or is less known than ``out``, allocates it to
    ``out``'s lengths: ``shape`` if given, else :func:`local_shape` of ``out``.
    """
    ot = out.type
    if not isinstance(ot, TensorType):
        return rep if rep.type == ot else None
    r = kt.as_tensor(rep)
    if r.ndim > ot.ndim:
        return None
    if r.ndim < ot.ndim:
        pad = ot.ndim - r.ndim
        r = kt.dimshuffle(r, ("x",) * pad + tuple(range(r.ndim)))
    if r.dtype != ot.dtype:
        r = kt.cast(r, ot.dtype)
    rs = r.type.shape
    needs = [
        d
        for d in range(ot.ndim)
        if rs[d] != ot.shape[d] and (rs[d] == 1 or rs[d] is None or ot.shape[d] is not None)
    ]
    if not needs:
        return r
    dims = shape if shape is not None else local_shape(out)
    if dims is None:
        return None
    entries = [shape_constant(n) if n is not None else dims[d] for d, n in enumerate(ot.shape)]
    return kt.alloc(r, *entries)


def typed_constant(value: object, dtype: str) -> Constant:
    """Return ``value`` as a 0-d constant of ``dtype``."""
    return kt.constant(np.asarray(value).astype(dtype))
