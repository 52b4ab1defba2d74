"""Blockwise on MLX: the core op's function mapped over the batch dimensions.

The batch dimensions of the inputs are broadcast (as NumPy's gufuncs do) and
flattened into one; ``mx.vmap`` maps the core function over it. Where MLX has no
batching rule for a primitive of the core (MLX 0.32: the LU factorization behind
``solve``; ``cholesky`` and ``inv`` have one), ``mx.vmap`` raises while tracing and the
core function runs once per batch element instead (the batch shape is known when
tracing), the results stacked.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from kiln_graph import Apply, Blockwise, TensorType, TensorVariable
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify


@mlx_funcify.register(Blockwise)
def mlx_funcify_Blockwise(op: Blockwise, node: Apply) -> MlxImpl:  # noqa: N802
    """Run the core function over the broadcast, flattened batch dimensions."""
    batch = op.batch_ndim(node)
    core_types = [
        TensorType(v.type.dtype, v.type.shape[batch:])  # type: ignore[attr-defined]
        for v in node.inputs
    ]
    core_ndims = [len(t.shape) for t in core_types]
    core_node = op.core_op.make_node(*[TensorVariable(t) for t in core_types])
    core = mlx_funcify(op.core_op, core_node)
    multiple = len(node.outputs) > 1

    def blockwise(*args: Any) -> Any:
        arrays = [as_mx(a) for a in args]
        batch_shape = tuple(
            np.broadcast_shapes(
                *(tuple(a.shape[: a.ndim - k]) for a, k in zip(arrays, core_ndims, strict=True))
            )
        )
        size = int(np.prod(batch_shape))
        flat = [
            mx.reshape(
                mx.broadcast_to(a, batch_shape + tuple(a.shape[a.ndim - k :])),
                (size, *a.shape[a.ndim - k :]),
            )
            for a, k in zip(arrays, core_ndims, strict=True)
        ]
        if size > 1:
            try:
                mapped = mx.vmap(core)(*flat)
            except ValueError as exc:
                if "vmap" not in str(exc):
                    raise
            else:
                results = list(mapped) if multiple else [mapped]
                shaped = [mx.reshape(r, batch_shape + tuple(r.shape[1:])) for r in results]
                return tuple(shaped) if multiple else shaped[0]
        outs = [core(*(f[i] for f in flat)) for i in range(size)]
        pieces = list(zip(*outs, strict=True)) if multiple else [outs]
        results = [
            mx.reshape(
                mx.stack([as_mx(p) for p in part]), batch_shape + tuple(as_mx(part[0]).shape)
            )
            for part in pieces
        ]
        return tuple(results) if multiple else results[0]

    return blockwise
