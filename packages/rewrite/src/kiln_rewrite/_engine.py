"""Applying local rewrites to a graph: functional, bottom-up, memoized, to a fixed point.

A pass visits every node once after its inputs: it rebuilds the node on its rewritten
inputs (``make_node`` re-interns it), then tries the rules that track the node's Op.
When one fires, the replacement is itself visited, so rules keep applying to new
nodes until none fires. The total number of applications is bounded; hitting the
bound is an error that names the rewrites that kept firing.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence

from kiln_graph import (
    Apply,
    KilnError,
    TensorType,
    Variable,
    as_variable_list,
    infer_shape,
    toposort,
)
from kiln_graph import tensor as kt
from kiln_graph.helpers import uses_any
from kiln_rewrite._db import Rewrite, tracked_key
from kiln_rewrite._stats import RewriteStats


class RewriteLoopError(KilnError):
    """Rewrites kept firing past the bound of a phase (a rule cycle)."""


class RewriteTypeError(KilnError):
    """A rewrite returned a replacement whose type does not fit the variable it replaces."""


def _index(rules: Sequence[Rewrite]) -> tuple[dict[type, list[Rewrite]], list[Rewrite]]:
    by_type: dict[type, list[Rewrite]] = defaultdict(list)
    generic: list[Rewrite] = []
    for r in rules:
        if r.tracks:
            for t in r.tracks:
                by_type[t].append(r)
        else:
            generic.append(r)
    return by_type, generic


def fit_replacement(replacement: Variable, original: Variable, rule: str) -> Variable:
    """Make ``replacement`` usable in place of ``original`` (same dtype, same broadcasting).

    ``rule`` names the rewrite in the error raised when it cannot.
    """
    if replacement.type == original.type:
        return replacement
    ot, rt = original.type, replacement.type
    if not (isinstance(ot, TensorType) and isinstance(rt, TensorType)):
        if type(ot) is type(rt):
            return replacement
        raise RewriteTypeError(f"rewrite {rule!r} replaced {original!r} by type {rt}")
    if rt.ndim != ot.ndim:
        raise RewriteTypeError(
            f"rewrite {rule!r} replaced a {ot.ndim}-d {original!r} with a "
            f"{rt.ndim}-d {replacement!r}"
        )
    out = kt.as_tensor(replacement)
    if rt.dtype != ot.dtype:
        out = kt.cast(out, ot.dtype)
    if any(rb and not ob for rb, ob in zip(rt.broadcastable, ot.broadcastable, strict=True)):
        # The replacement broadcasts where the original does not: give it the full shape.
        out = kt.broadcast_to(out, infer_shape(original))
    return out


class _Firing:
    """The rules tried on each node, and how often they fired (bounded, for loops)."""

    def __init__(self, rules: Sequence[Rewrite], stats: RewriteStats | None, bound: int) -> None:
        self.by_type, self.generic = _index(rules)
        self.stats = stats
        self.bound = bound
        self.fired: Counter[str] = Counter()
        self.n_applied = 0

    def rules_for(self, node: Apply) -> list[Rewrite]:
        """Return the rules tracking ``node``'s op (or its scalar op), then the generic ones."""
        found: list[Rewrite] = []
        for key in tracked_key(node.op):
            found.extend(self.by_type.get(key, ()))
        found.extend(self.generic)
        return found

    def first(self, node: Apply) -> tuple[list[Variable] | None, str]:
        """Return the first firing rule's replacement of ``node``'s outputs, and its name."""
        stats = self.stats
        for rule in self.rules_for(node):
            start = time.perf_counter() if stats is not None else 0.0
            result = rule.fn(node)
            if stats is not None:
                stats.record_try(rule.name, time.perf_counter() - start, result is not None)
            if result is None:
                continue
            new_outs = [result] if isinstance(result, Variable) else list(result)
            if len(new_outs) != len(node.outputs):
                raise RewriteTypeError(
                    f"rewrite {rule.name!r} returned {len(new_outs)} replacements for "
                    f"{len(node.outputs)} outputs"
                )
            if all(a is b for a, b in zip(new_outs, node.outputs, strict=True)):
                continue
            replacement = [
                fit_replacement(r, o, rule.name)
                for r, o in zip(new_outs, node.outputs, strict=True)
            ]
            self.fired[rule.name] += 1
            self.n_applied += 1
            if self.n_applied > self.bound:
                top = ", ".join(f"{n} ({c}x)" for n, c in self.fired.most_common(5))
                raise RewriteLoopError(
                    f"rewrites applied more than {self.bound} times without reaching a fixed "
                    f"point; the rewrites that kept firing: {top}"
                )
            return replacement, rule.name
        return None, ""


def rewrite_graph(
    outputs: Sequence[Variable],
    rules: Sequence[Rewrite],
    stats: RewriteStats | None = None,
    max_applications: int | None = None,
) -> list[Variable]:
    """Apply the local ``rules`` to the graph of ``outputs`` until none fires.

    Returns the rewritten outputs (the input graph is unchanged). ``stats`` collects
    per-rewrite application counts and times.
    """
    outs = as_variable_list(outputs)
    bound = max_applications
    if bound is None:
        bound = 1000 + 50 * len(toposort(outs))
    firing = _Firing(rules, stats, bound)
    memo: dict[Variable, Variable] = {}
    redirect: dict[Variable, Variable] = {}
    redirect_rule: dict[Variable, str] = {}
    following: set[Variable] = set()
    for root in outs:
        stack = [root]
        while stack:
            v = stack[-1]
            if v in memo:
                stack.pop()
                continue
            target = redirect.get(v)
            if target is not None:
                if target in memo:
                    memo[v] = memo[target]
                    stack.pop()
                elif v in following:
                    cycle = sorted({redirect_rule[u] for u in following if u in redirect_rule})
                    raise RewriteLoopError(
                        f"rewrites undo each other (a cycle of replacements): {', '.join(cycle)}"
                    )
                else:
                    following.add(v)
                    stack.append(target)
                continue
            node = v.owner
            if node is None:
                memo[v] = v
                stack.pop()
                continue
            pending = [i for i in node.inputs if i not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            new_inputs = [memo[i] for i in node.inputs]
            if all(a is b for a, b in zip(new_inputs, node.inputs, strict=True)):
                new_node = node
            else:
                new_node = node.op.make_node(*new_inputs)
            replacement, fired_name = firing.first(new_node)
            if replacement is None:
                for o, o2 in zip(node.outputs, new_node.outputs, strict=True):
                    memo[o] = o2
                    memo[o2] = o2
                stack.pop()
            else:
                if uses_any(replacement, set(node.outputs) | set(new_node.outputs), memo):
                    raise RewriteTypeError(
                        f"rewrite {fired_name!r}: a replacement may not "
                        f"contain the variable it replaces ({v!r})"
                    )
                for o, r in zip(node.outputs, replacement, strict=True):
                    redirect[o] = r
                    redirect_rule[o] = fired_name
    return [memo[o] for o in outs]
