"""Canonicalize: a Blockwise of an inner graph becomes the inner graph, batched node by node.

``kiln.tensor.vectorize`` wraps the traced graph in one :class:`OpFromGraph` applied with
:class:`Blockwise`; a backend then loops over the batch and calls the inner graph once
per element, which for an inner graph of many small nodes (the constrained values of a
model of thousands of scalars, one ``x[i]`` each) is one function with thousands of
outputs: slow to compile and to call. Batched node by node instead, each node works on
whole arrays: an Elemwise on the batched inputs (unbatched ones given broadcastable
batch dimensions), ``x[i]`` as ``x[..., i]`` (and a gather by unbatched index arrays
likewise), a DimShuffle with the batch dimensions first, a reduction or a concatenation
along its axes moved past the batch dimensions (an unbatched input of a concatenation
broadcast to the batch), any other node as a Blockwise of its own Op; a graph where an
integer value (a shape) would be batched is left to the Blockwise of the whole graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_graph import (
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Apply,
    Blockwise,
    Constant,
    DimShuffle,
    Elemwise,
    KilnError,
    OpFromGraph,
    Subtensor,
    TensorType,
    Variable,
    toposort,
)
from kiln_graph.ops import Alloc, CAReduce, Join, ShapeI
from kiln_rewrite._db import register_local

_FULL = (None, None, None)


def _signature(node: Apply) -> str:
    """Return a gufunc signature for ``node``'s Op on the core shapes of its variables."""
    names = iter(f"d{k}" for k in range(10_000))

    def arg(v: Variable) -> str:
        return "(" + ",".join(next(names) for _ in range(v.type.ndim)) + ")"  # type: ignore[attr-defined]

    ins = ",".join(arg(v) for v in node.inputs)
    outs = ",".join(arg(v) for v in node.outputs)
    return f"{ins}->{outs}"


def _with_batch(v: Variable, batch: int) -> Variable:
    """Return the unbatched ``v`` with ``batch`` leading broadcastable dimensions."""
    ndim = v.type.ndim  # type: ignore[attr-defined]
    return DimShuffle(ndim, ["x"] * batch + list(range(ndim)))(v)  # type: ignore[no-any-return]


def _batched_node(
    node: Apply, inputs: Sequence[Variable], batched: Sequence[bool], batch: int
) -> Sequence[Variable] | None:
    """Return the outputs of ``node`` applied over ``batch`` leading dimensions of ``inputs``.

    Any other Op becomes a Blockwise of itself, unless an integer value would be batched
    (a node's shape, a reshape's or an allocation's shape input): then None, since
    per-block shapes are what backends that trace (JAX) need static.
    """
    op = node.op
    if isinstance(op, Elemwise):
        args = [v if b else _with_batch(v, batch) for v, b in zip(inputs, batched, strict=True)]
        return op.make_node(*args).outputs
    if isinstance(op, Subtensor) and batched[0] and not any(batched[1:]):
        return Subtensor((_FULL,) * batch + tuple(op.idx_list)).make_node(*inputs).outputs
    if isinstance(op, AdvancedSubtensor | AdvancedSubtensor1) and batched[0]:
        gathered = _batched_gather(op, inputs, batched, batch)
        if gathered is not None:
            return gathered
    if isinstance(op, DimShuffle) and batched[0]:
        order = [*range(batch), *(d if isinstance(d, str) else d + batch for d in op.new_order)]
        return DimShuffle(op.input_ndim + batch, order).make_node(*inputs).outputs
    if isinstance(op, CAReduce) and batched[0]:
        return CAReduce(op.kind, tuple(a + batch for a in op.axis)).make_node(*inputs).outputs
    if isinstance(op, Join):
        joined = _batched_join(op, inputs, batched, batch)
        if joined is not None:
            return joined
    ints = [v for v, b in zip(inputs, batched, strict=True) if b] + list(node.outputs)
    if any(v.type.dtype[0] in "biu" for v in ints):  # type: ignore[attr-defined]
        return None
    return Blockwise(op, _signature(node)).make_node(*inputs).outputs


def _batched_gather(
    op: AdvancedSubtensor | AdvancedSubtensor1,
    inputs: Sequence[Variable],
    batched: Sequence[bool],
    batch: int,
) -> Sequence[Variable] | None:
    """Return ``x[..., index]``: the gather of the batched ``x`` by unbatched index arrays.

    None where an index is batched, or where the index arrays are not next to each other
    in the index: NumPy then puts their dimensions first, before the batch dimensions.
    """
    if any(batched[1:]):
        return None
    idx_list = ("a",) if isinstance(op, AdvancedSubtensor1) else tuple(op.idx_list)
    arrays = [k for k, e in enumerate(idx_list) if e == "a"]
    if arrays[-1] - arrays[0] + 1 != len(arrays):
        return None
    return AdvancedSubtensor((_FULL,) * batch + idx_list).make_node(*inputs).outputs


def _batched_join(
    op: Join, inputs: Sequence[Variable], batched: Sequence[bool], batch: int
) -> Sequence[Variable] | None:
    """Return the Join of ``inputs`` along its axis past ``batch`` batch dimensions.

    An unbatched input is broadcast to the batch (``Alloc``, the batch lengths read from
    the first batched input). None where the batched inputs' static batch shapes differ
    and one has a length 1, which the Blockwise broadcasts and a Join would not.
    """
    shapes = {v.type.shape[:batch] for v, b in zip(inputs, batched, strict=True) if b}  # type: ignore[attr-defined]
    if len(shapes) > 1 and any(1 in s for s in shapes):
        return None
    ref = next(v for v, b in zip(inputs, batched, strict=True) if b)
    lengths = [ShapeI(d)(ref) for d in range(batch)]
    args = [
        v if b else Alloc()(v, *lengths, *(ShapeI(d)(v) for d in range(v.type.ndim)))  # type: ignore[attr-defined]
        for v, b in zip(inputs, batched, strict=True)
    ]
    return Join(op.axis + batch).make_node(*args).outputs


@register_local(
    "canonicalize",
    "fast_run",
    identity="Blockwise(OpFromGraph(g))(xs) -> g batched node by node on xs",
    tracks=[Blockwise],
)
def local_blockwise_of_graph(node: Apply) -> list[Variable] | None:
    """Replace a Blockwise of an :class:`OpFromGraph` by its inner graph batched node by node.

    Inputs with fewer batch dimensions than the node get broadcastable ones; inner
    nodes that read only unbatched values stay unbatched. Left alone when an inner value
    is not a tensor or an inner node cannot be batched (an integer value would be).
    """
    op = node.op
    if not isinstance(op, Blockwise) or not isinstance(op.core_op, OpFromGraph):
        return None
    ofg = op.core_op
    if not all(isinstance(v.type, TensorType) for v in node.inputs):
        return None
    batch = op.batch_ndim(node)
    values: dict[Variable, tuple[Variable, bool]] = {}
    for inner, outer, dims in zip(ofg.inner_inputs, node.inputs, op.inputs_sig, strict=True):
        ndim = outer.type.ndim  # type: ignore[attr-defined]
        extra = ndim - len(dims)
        if not any(d is None or d != 1 for d in outer.type.shape[:extra]):  # type: ignore[attr-defined]
            # No batch dimensions, or only broadcastable ones: the same for every block.
            unbatched = DimShuffle(ndim, list(range(extra, ndim)))(outer) if extra else outer
            values[inner] = (unbatched, False)
        else:
            order = ["x"] * (batch - extra) + list(range(ndim))
            values[inner] = (DimShuffle(ndim, order)(outer) if extra < batch else outer, True)

    def lookup(v: Variable) -> tuple[Variable, bool]:
        return (v, False) if isinstance(v, Constant) else values[v]

    try:
        for inner_node in toposort(list(ofg.inner_outputs), stop_at=list(ofg.inner_inputs)):
            if not all(isinstance(v.type, TensorType) for v in inner_node.outputs):
                return None
            ins = [lookup(v) for v in inner_node.inputs]
            args = [v for v, _ in ins]
            flags = [b for _, b in ins]
            if any(flags):
                batched_outs = _batched_node(inner_node, args, flags, batch)
                if batched_outs is None:
                    return None
                outs = batched_outs
            else:
                outs = inner_node.op.make_node(*args).outputs
            for old, new in zip(inner_node.outputs, outs, strict=True):
                values[old] = (new, any(flags))
    except (KilnError, NotImplementedError):
        return None
    result: list[Variable] = []
    for inner in ofg.inner_outputs:
        new, is_batched = lookup(inner)
        result.append(new if is_batched else _with_batch(new, batch))
    return result
