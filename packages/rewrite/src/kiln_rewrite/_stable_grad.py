"""Gradients taken of the stabilized graph, so they are as stable as the value.

``kiln.grad`` differentiates the graph as written: the gradient of ``log(exp(z))`` is
``exp(z) / exp(z)``, NaN once ``exp(z)`` overflows, even though the stabilize phase
later rewrites the value itself to ``z``. :func:`stable_grad` first runs the phases
that make the value stable (merge, canonicalize, stabilize), then differentiates that
graph: the gradient of a ``softplus``, ``log1mexp``, ``logaddexp`` or of ``z`` itself
has the stable rule of its op, on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from kiln_graph import Variable, grad
from kiln_rewrite._db import Query
from kiln_rewrite._pipeline import FAST_RUN_QUERY, rewrite

#: The phases a value is stabilized by before it is differentiated: FAST_RUN's rewrites
#: of merge, canonicalize and stabilize, and those tagged ``before_grad`` (rewrites that
#: only a gradient needs, such as ``x / exp(z) -> x * exp(-z)``).
STABILIZE_QUERY = Query(
    include=FAST_RUN_QUERY.include | {"before_grad"},
    phases=("merge", "canonicalize", "stabilize"),
)


#: ``rewriter(inputs, outputs, query) -> outputs``: :func:`kiln_rewrite.rewrite`, or one
#: that caches (``kiln_compile.rewrite_cached``).
Rewriter = Callable[[Sequence[Variable], Sequence[Variable], Query], Sequence[Variable]]


def stabilize_graph(
    outputs: Sequence[Variable], inputs: Sequence[Variable] = (), rewriter: Rewriter | None = None
) -> list[Variable]:
    """Return ``outputs`` rewritten by :data:`STABILIZE_QUERY` (merge to stabilize)."""
    run = rewriter or (lambda i, o, q: rewrite(list(i), list(o), q))
    return list(run(list(inputs), list(outputs), STABILIZE_QUERY))


def stable_grad(
    cost: Variable,
    wrt: Variable | Sequence[Variable],
    disconnected_inputs: Literal["raise", "warn", "ignore"] = "raise",
    rewriter: Rewriter | None = None,
) -> tuple[Variable, Any]:
    """Return ``(stable cost, gradient of it with respect to wrt)``.

    The cost is first rewritten by :data:`STABILIZE_QUERY` (with ``rewriter``, by
    default :func:`kiln_rewrite.rewrite`); the gradient is that of the rewritten cost
    (one variable for one ``wrt``, a list for a list), so an overflow that the
    rewritten value avoids does not reach the gradient either.

    Examples
    --------
    >>> x = kt.scalar("x")  # doctest: +SKIP
    >>> cost, g = stable_grad(kt.log(1 + kt.exp(x)), x)  # softplus(x), sigmoid(x)  # doctest: +SKIP
    """
    inputs = [wrt] if isinstance(wrt, Variable) else list(wrt)
    (stable,) = stabilize_graph([cost], inputs, rewriter)
    return stable, grad(stable, wrt, disconnected_inputs=disconnected_inputs)


__all__ = ["STABILIZE_QUERY", "Rewriter", "stabilize_graph", "stable_grad"]
