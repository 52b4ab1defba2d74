"""Blockwise on torch: the core op's function over the batch dimensions.

The inputs' batch dimensions are broadcast as NumPy's gufuncs do. A core function that
takes batches itself (the linear algebra of :mod:`kiln_torch.linalg`, marked
``batched``) is called once on the whole batch; any other is mapped with
``torch.vmap`` over the flattened batch, except the constant inputs that only broadcast
along the batch (a reshape's target shape), which the core function gets as they are.
"""

from __future__ import annotations

from typing import Any

import torch

from kiln_graph import Apply, Blockwise, TensorType, TensorVariable
from kiln_torch._funcify import TorchImpl, torch_funcify


@torch_funcify.register(Blockwise)
def torch_funcify_Blockwise(op: Blockwise, node: Apply) -> TorchImpl:  # noqa: N802
    """Broadcast the batch dimensions, then the core function on the whole batch."""
    batch = op.batch_ndim(node)
    core_types = [
        TensorType(v.type.dtype, v.type.shape[batch:])  # type: ignore[attr-defined]
        for v in node.inputs
    ]
    core_node = op.core_op.make_node(*[TensorVariable(t) for t in core_types])
    core = torch_funcify(op.core_op, core_node)
    multiple = len(node.outputs) > 1
    core_ndims = [len(t.shape) for t in core_types]

    def broadcast(args: tuple[Any, ...]) -> tuple[tuple[int, ...], list[Any]]:
        pairs = list(zip(args, core_ndims, strict=True))
        shape = torch.broadcast_shapes(*(tuple(a.shape[: a.ndim - k]) for a, k in pairs))
        full = [
            torch.broadcast_to(a, (*shape, *a.shape[a.ndim - k :]))
            for a, k in zip(args, core_ndims, strict=True)
        ]
        return tuple(shape), full

    if getattr(core, "batched", False):

        def blockwise_batched(*args: Any) -> Any:
            _, full = broadcast(args)
            out = core(*full)
            return tuple(out) if multiple else out

        return blockwise_batched

    fixed = {i: torch.as_tensor(c) for i, c in op.unmapped_constants(node).items()}
    free = [i for i in range(len(node.inputs)) if i not in fixed]

    def core_of_free(*a: Any) -> Any:
        full = [fixed.get(i) for i in range(len(node.inputs))]
        for i, value in zip(free, a, strict=True):
            full[i] = value
        out = core(*full)
        return tuple(out) if multiple else out

    mapped = torch.vmap(core_of_free)

    def blockwise(*args: Any) -> Any:
        shape, full = broadcast(args)
        flat = [full[i].reshape(-1, *full[i].shape[len(shape) :]) for i in free]
        out = mapped(*flat)
        outs = list(out) if multiple else [out]
        outs = [o.reshape(*shape, *o.shape[1:]) for o in outs]
        return tuple(outs) if multiple else outs[0]

    return blockwise
