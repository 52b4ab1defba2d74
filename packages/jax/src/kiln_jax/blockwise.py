"""Blockwise on JAX: the core op's function vectorized over the batch dimensions.

``jnp.vectorize`` with the Op's gufunc signature broadcasts the batch dimensions as
NumPy's gufuncs do and maps the core function with ``jax.vmap``, so XLA runs one
batched computation (a batched Cholesky, a batched solve) rather than a loop.
A constant input that only broadcasts along the batch (a reshape's target shape) is
handed to the core function as its NumPy value, not mapped: the core ops that need an
input at trace time (shapes) still get it.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from kiln_graph import Apply, Blockwise, TensorType, TensorVariable
from kiln_jax._funcify import JaxImpl, jax_funcify


@jax_funcify.register(Blockwise)
def jax_funcify_Blockwise(op: Blockwise, node: Apply) -> JaxImpl:  # noqa: N802
    """``jnp.vectorize(core_function, signature=op.signature)``."""
    batch = op.batch_ndim(node)
    core_types = [
        TensorType(v.type.dtype, v.type.shape[batch:])  # type: ignore[attr-defined]
        for v in node.inputs
    ]
    core_node = op.core_op.make_node(*[TensorVariable(t) for t in core_types])
    core = jax_funcify(op.core_op, core_node)
    multiple = len(node.outputs) > 1
    fixed = op.unmapped_constants(node)
    mapped = [i for i in range(len(node.inputs)) if i not in fixed]

    def core_fn(*args: Any) -> Any:
        full = [fixed[i] if i in fixed else None for i in range(len(node.inputs))]
        for i, a in zip(mapped, args, strict=True):
            full[i] = a
        out = core(*full)
        return tuple(out) if multiple else out

    def dims(group: Any) -> str:
        return ",".join("(" + ",".join(d) + ")" for d in group)

    signature = f"{dims([op.inputs_sig[i] for i in mapped])}->{dims(op.outputs_sig)}"
    vectorized = jnp.vectorize(core_fn, signature=signature)

    def blockwise(*args: Any) -> Any:
        return vectorized(*(jnp.asarray(args[i]) for i in mapped))

    return blockwise
