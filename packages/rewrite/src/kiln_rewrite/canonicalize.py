"""Canonicalize phase: constant folding, useless ops, algebraic normal forms, shapes.

Constant folding is here; the other rewrites are grouped by family in
:mod:`kiln_rewrite._canonicalize_algebra` (elementwise algebra: useless arithmetic,
n-ary chains, like terms and powers, exp/log) and :mod:`kiln_rewrite._canonicalize_shape`
(DimShuffle, Reshape, Alloc, shape reads, shape vectors, reductions),
:mod:`kiln_rewrite._canonicalize_subtensor` (sums of increments as chains),
:mod:`kiln_rewrite._canonicalize_blockwise` (vectorized inner graphs node by node) and
:mod:`kiln_rewrite._canonicalize_batched_linalg` (vectorized solves and triangles as one
call), re-exported as ``algebra``, ``shape``, ``subtensor``, ``blockwise`` and
``batched_linalg``. Every rewrite is tagged ``fast_run``; the cheap ones
(folding, useless ops, DimShuffle merging, shape simplification) also ``fast_compile``.
``kiln_rewrite.pipeline()`` lists them with the identity each applies.
"""

from __future__ import annotations

import numpy as np

from kiln_graph import Apply, Constant, TensorType, Variable, graph_replace, toposort
from kiln_graph import tensor as kt
from kiln_graph.ops import Alloc, ARange, Eye
from kiln_rewrite._db import register_global, register_local
from kiln_rewrite._engine import fit_replacement

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
    if not all(hasattr(o.type, "dtype") for o in node.outputs) or _broadcasts_a_scalar(node):
        return None
    results = _perform(node, [i.data for i in node.inputs])  # type: ignore[attr-defined]
    if _only_copies_a_large_value(node, results):
        return None
    return [_constant(r, o) for r, o in zip(results, node.outputs, strict=True)]


def _perform(node: Apply, values: list) -> list:
    results: list = [None] * len(node.outputs)
    with np.errstate(all="ignore"):
        node.op.perform(node, values, results)  # type: ignore[attr-defined]
    return results


def _only_copies_a_large_value(node: Apply, results: list) -> bool:
    if _broadcasts_a_scalar(node):
        return True
    copies_or_expands = isinstance(node.op, _EXPANDING) or bool(node.op.view_map)
    return copies_or_expands and any(np.size(r) > _MAX_EXPANDED_SIZE for r in results)


def _broadcasts_a_scalar(node: Apply) -> bool:
    """Whether ``node`` is an Alloc of one value (``ones(n)``, a gradient's ``zeros_like``).

    Left unfolded: an elementwise op reads the value itself (``local_elemwise_alloc``),
    where a folded array of ``n`` equal numbers would be read element by element.
    """
    value = node.inputs[0]
    return isinstance(node.op, Alloc) and isinstance(value, Constant) and np.size(value.data) == 1


def _constant(value: object, like: Variable) -> Variable:
    return kt.constant(np.asarray(value, dtype=like.type.dtype))  # type: ignore[attr-defined]


@register_global(
    "canonicalize",
    "fast_run",
    "fast_compile",
    identity="f(view(constant)) -> constant: a computation on a large constant's copy or "
    "expansion is folded; the copy itself stays unfolded only where it meets a variable",
)
def fold_computations_on_large_views(
    inputs: list[Variable], outputs: list[Variable]
) -> list[Variable]:
    """Fold what ``constant_folding`` leaves behind a large view of a constant.

    ``constant_folding`` refuses to turn a large copy or expansion of a constant (a
    column of the data, its transpose, an ``Alloc``) into a second constant, so the
    nodes computing on it (``sin(X[:, 0] * w)`` for a constant basis) stay in the
    graph too and run at every call. Here the whole constant sub-graph is evaluated
    once, and every value it hands to a node that reads a variable, or to an output,
    becomes a constant, except a large copy, whose node stays (its own constant
    inputs are then kept as they are).
    """
    nodes = toposort(outputs)
    values: dict[Variable, object] = {}
    for node in nodes:
        if not node.inputs or not all(isinstance(o.type, TensorType) for o in node.outputs):
            continue
        if not all(isinstance(i, Constant) or i in values for i in node.inputs):
            continue
        args = [i.data if isinstance(i, Constant) else values[i] for i in node.inputs]
        values.update(zip(node.outputs, _perform(node, args), strict=True))
    if not values:
        return outputs
    # The values read by a node that is not folded (or that are outputs): the frontier.
    frontier = [v for v in outputs if v in values]
    frontier += [i for n in nodes if n.outputs[0] not in values for i in n.inputs if i in values]
    replace: dict[Variable, Variable] = {}
    seen: set[Variable] = set()
    while frontier:
        v = frontier.pop()
        if v in seen:
            continue
        seen.add(v)
        owner = v.owner
        assert owner is not None
        if _only_copies_a_large_value(owner, [values[o] for o in owner.outputs]):
            frontier += [i for i in owner.inputs if i in values]
        else:
            replace[v] = fit_replacement(
                _constant(values[v], v), v, "fold_computations_on_large_views"
            )
    if not replace:
        return outputs
    new = graph_replace(outputs, replace)
    assert isinstance(new, list)
    return new


# The rewrites of the other canonicalize families register themselves in these modules
# (after constant folding, so it is listed first); import them by name from here.
from kiln_rewrite import _canonicalize_algebra as algebra  # noqa: E402
from kiln_rewrite import _canonicalize_batched_linalg as batched_linalg  # noqa: E402
from kiln_rewrite import _canonicalize_blockwise as blockwise  # noqa: E402
from kiln_rewrite import _canonicalize_shape as shape  # noqa: E402
from kiln_rewrite import _canonicalize_subtensor as subtensor  # noqa: E402

__all__ = ["algebra", "batched_linalg", "blockwise", "constant_folding", "shape", "subtensor"]
