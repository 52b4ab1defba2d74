"""Canonicalize phase: constant folding, useless ops, algebraic normal forms, shapes.

Constant folding is here; the other rewrites are grouped by family in
:mod:`kiln_rewrite._canonicalize_algebra` (elementwise algebra: useless arithmetic,
n-ary chains, like terms and powers, exp/log) and :mod:`kiln_rewrite._canonicalize_shape`
(DimShuffle, Reshape, Alloc, shape reads, shape vectors, reductions) and
:mod:`kiln_rewrite._canonicalize_subtensor` (sums of increments as chains), re-exported
as ``algebra``, ``shape`` and ``subtensor``. Every rewrite is tagged ``fast_run``; the cheap ones
(folding, useless ops, DimShuffle merging, shape simplification) also ``fast_compile``.
``kiln_rewrite.pipeline()`` lists them with the identity each applies.
"""

from __future__ import annotations

import numpy as np

from kiln_graph import Apply, Constant, Variable
from kiln_graph import tensor as kt
from kiln_graph.ops import Alloc, ARange, Eye
from kiln_rewrite._db import register_local

#: Ops whose folded result can be much larger than their inputs: folded only when small.
_EXPANDING = (Alloc, ARange, Eye)
#: Above this many elements, a folded result that would only copy (a view op such as a
#: transpose of a constant data matrix) or expand its input is left unfolded: folding it
#: would store a second copy of the data in the graph and in every cache entry.
_MAX_EXPANDED_SIZE = 10_000


@register_local(
    "canonicalize",
    "fast_run",
    "fast_compile",
    identity="op(constants...) -> constant (through Op.perform)",
)
def constant_folding(node: Apply) -> list[Variable] | None:
    """Evaluate a node whose inputs are all constants with its ``perform``."""
    if not node.inputs or not all(isinstance(i, Constant) for i in node.inputs):
        return None
    if not all(hasattr(o.type, "dtype") for o in node.outputs):
        return None
    results: list = [None] * len(node.outputs)
    with np.errstate(all="ignore"):
        node.op.perform(node, [i.data for i in node.inputs], results)  # type: ignore[attr-defined]
    copies_or_expands = isinstance(node.op, _EXPANDING) or bool(node.op.view_map)
    if copies_or_expands and any(np.size(r) > _MAX_EXPANDED_SIZE for r in results):
        return None
    return [
        kt.constant(np.asarray(r, dtype=o.type.dtype))  # type: ignore[attr-defined]
        for r, o in zip(results, node.outputs, strict=True)
    ]


# The rewrites of the other canonicalize families register themselves in these modules
# (after constant folding, so it is listed first); import them by name from here.
from kiln_rewrite import _canonicalize_algebra as algebra  # noqa: E402
from kiln_rewrite import _canonicalize_blockwise as blockwise  # noqa: E402
from kiln_rewrite import _canonicalize_shape as shape  # noqa: E402
from kiln_rewrite import _canonicalize_subtensor as subtensor  # noqa: E402

__all__ = ["algebra", "blockwise", "constant_folding", "shape", "subtensor"]
