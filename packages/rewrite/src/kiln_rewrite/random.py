"""Rewrites of random variables: generators updated in place, redundant sizes dropped.

A random variable is pure (it returns the next generator state); where nothing reads
its input state afterwards, the in-place phase lets it draw from that generator
itself instead of a copy (``RandomVariable.inplace_variants``). A function's shared
generator is a root, so its first draw copies it (the caller keeps the old state
until the update is applied); every later draw of the chain runs in place.
"""

from __future__ import annotations

from kiln_graph import Apply, Constant, Variable
from kiln_graph.helpers import static_broadcast
from kiln_random import RandomVariable
from kiln_rewrite._db import register_local


@register_local(
    "canonicalize",
    "fast_run",
    identity="rv(rng, size, *params) -> rv(rng, None, *params) when size is the "
    "parameters' static batch shape",
    tracks=[RandomVariable],
)
def local_rv_drop_size(node: Apply) -> list[Variable] | None:
    """Drop a constant ``size`` that equals the broadcast of the parameters' batch shapes."""
    op = node.op
    assert isinstance(op, RandomVariable)
    rng, size, *params = node.inputs
    if not isinstance(size, Constant) or size.data.size == 0:
        return None
    batch = size.data.size
    shapes = [p.type.shape[:batch] for p in params]  # type: ignore[attr-defined]
    if not shapes or static_broadcast(shapes, op) != tuple(int(n) for n in size.data):
        return None
    return list(op.make_node(rng, None, *params).outputs)


__all__ = ["local_rv_drop_size"]
