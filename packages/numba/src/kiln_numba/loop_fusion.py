"""Loop fusion on Numba: :func:`kiln_rewrite.loop_fusion.fuse_loops` with Numba's limits.

The decision (which loop nodes over one vector length become one
:class:`~kiln_rewrite.loop_fusion.FusedLoop`) is kiln_rewrite's; this module registers
it for Numba (tag ``numba``, fusion phase, after the elementwise and reduction
fusions) with the limits Numba's compile time needs (:data:`NUMBA_LIMITS`), and the
small dot product rewritten as a reduction that the loop can join.
:mod:`kiln_numba._fused_loop_code` writes each FusedLoop as one ``for j in range(n)``;
where the loop calls vectorizable math and neither gathers nor scatters, the
reductions fold their values in a second loop, so that the first one stays SIMD code.
One loop, the same additions in the same order: the results equal the unfused nodes'
to the bit.
"""

from __future__ import annotations

from kiln_graph import Apply, DimShuffle, Variable
from kiln_numba._outline import MAX_INLINED_LOOPS, MAX_INLINED_PARAMS
from kiln_numba.linalg import SMALL_MATMUL
from kiln_rewrite import register_global, register_local
from kiln_rewrite.loop_fusion import (
    GATHER,
    MAP,
    REDUCE,
    SCATTER,
    FusedLoop,
    LoopLimits,
    fuse_loops,
    loop_kind,
    small_dot_to_sum,
    vector_length,
)

#: At most 16 nodes in one fused loop: Numba compiles a function in time that grows
#: faster than its length (M4's twenty groups in one 80-node loop took 2 s longer); at
#: most :data:`~kiln_numba._outline.MAX_INLINED_PARAMS` inputs, so that its function is
#: inlined. A graph with more than :data:`~kiln_numba._outline.MAX_INLINED_LOOPS` loop
#: nodes is left unfused: its loops are functions of their own, one per distinct code,
#: which its repeated groups share (M4: 20 groups); fused, each loop's code differs,
#: and compiling them took M4 from 11 s to 13-17 s.
NUMBA_LIMITS = LoopLimits(
    max_members=16, max_inputs=MAX_INLINED_PARAMS, max_loop_nodes=MAX_INLINED_LOOPS
)


@register_local(
    "fusion",
    "numba",
    identity="dot(x, y) -> sum(x * y) for float64 vectors of a small static length, a "
    "reduction that loop fusion can join (Numba only)",
    tracks=[DimShuffle],
)
def numba_small_dot_to_sum(node: Apply) -> list[Variable] | None:
    """Rewrite a small vector dot product (``matmul`` of a row and a column) as a sum.

    Numba writes such a product as loops anyway (:data:`kiln_numba.linalg.SMALL_MATMUL`),
    in the same order as the reduction, so the result is the same to the bit.
    """
    return small_dot_to_sum(node, SMALL_MATMUL)


@register_global(
    "fusion",
    "numba",
    identity="loops over one vector length (elementwise, gathers, reductions, scatter-adds) "
    "-> FusedLoop, one loop (Numba only)",
)
def numba_loop_fusion(inputs: list[Variable], outputs: list[Variable]) -> list[Variable]:
    """Fuse groups of loop nodes over one length into FusedLoops, within Numba's limits."""
    return fuse_loops(inputs, outputs, NUMBA_LIMITS)


__all__ = [
    "GATHER", "MAP", "NUMBA_LIMITS", "REDUCE", "SCATTER", "FusedLoop", "fuse_loops",
    "loop_kind", "numba_loop_fusion", "vector_length",
]  # fmt: skip
