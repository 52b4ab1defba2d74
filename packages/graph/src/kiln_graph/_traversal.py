"""Graph traversal: topological order, ancestors, inputs, and functional replacement."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence

from kiln_graph._errors import KilnTypeError
from kiln_graph._node import Apply, Constant, Variable, as_variable_list
from kiln_graph._types import TensorType


def toposort(
    outputs: Variable | Iterable[Variable], stop_at: Iterable[Variable] = ()
) -> list[Apply]:
    """Return the Apply nodes computing ``outputs``, each after the nodes it depends on.

    Variables in ``stop_at`` are treated as roots: their owners are not visited.
    """
    stop = set(stop_at)
    order: list[Apply] = []
    visited: set[Apply] = set()
    for out in as_variable_list(outputs):
        if out.owner is None or out in stop or out.owner in visited:
            continue
        stack: list[tuple[Apply, int]] = [(out.owner, 0)]
        visited.add(out.owner)
        while stack:
            node, i = stack[-1]
            if i < len(node.inputs):
                stack[-1] = (node, i + 1)
                parent = node.inputs[i].owner
                if parent is not None and parent not in visited and node.inputs[i] not in stop:
                    visited.add(parent)
                    stack.append((parent, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def schedule(
    outputs: Variable | Iterable[Variable], stop_at: Iterable[Variable] = ()
) -> list[Apply]:
    """Return the nodes computing ``outputs`` in the order a program runs them.

    A topological order (the nodes of :func:`toposort`) chosen so that values die soon
    after they are made, which is what the in-place phase can reuse, what a generated
    function keeps in registers, and what a function split into chunks
    (:mod:`kiln_numba`) passes from one chunk to another:

    - a depth-first walk from the outputs, the deepest output first. In a function
      returning a log density and its gradient, the gradient's graph reads most of the
      density's intermediate values, so the density's own nodes come next to them
      rather than all before the gradient starts;
    - a node that becomes the last reader not yet run of a value runs as soon as its
      inputs are ready, rather than where the walk reaches it, when it has one output
      with at most the dimensions of its largest input (so the value it frees is not
      traded for a larger one): the terms of a sum of log densities are taken where
      their residuals are made and used by the gradient.

    The VM, every linker and the in-place phase (:mod:`kiln_rewrite.inplace`) run nodes
    in this order. It depends only on the graph's structure and its variables' types,
    so a node whose Op is replaced by one of the same output types (an in-place variant)
    keeps its place.
    """
    outs = as_variable_list(outputs)
    stop = set(stop_at)
    depth: dict[Apply, int] = {}
    for node in toposort(outs, stop):
        depth[node] = 1 + max(
            (depth[v.owner] for v in node.inputs if v.owner is not None and v not in stop),
            default=0,
        )
    order = toposort(
        sorted(outs, key=lambda v: 0 if v in stop else -depth.get(v.owner, 0)),  # type: ignore[arg-type]
        stop,
    )
    return _pull_last_readers(order, stop)


def _pull_last_readers(order: Sequence[Apply], stop: Container[Variable]) -> list[Apply]:
    """Return ``order`` with each last reader of a value run as soon as it is ready.

    See :func:`schedule`; a reader is moved only where its single output has at most
    the dimensions of its largest input.
    """
    readers: dict[Variable, list[Apply]] = {}
    missing: dict[Apply, int] = {}
    for node in order:
        computed = [v for v in dict.fromkeys(node.inputs) if v.owner is not None and v not in stop]
        for v in computed:
            readers.setdefault(v, []).append(node)
        missing[node] = len(computed)
    unread = {v: len(r) for v, r in readers.items()}
    done: set[Apply] = set()
    result: list[Apply] = []

    def ready_last_reader(v: Variable) -> Apply | None:
        if unread.get(v) != 1:
            return None
        node = next(r for r in readers[v] if r not in done)
        if missing[node] or len(node.outputs) != 1:
            return None
        widest = max(getattr(i.type, "ndim", 0) for i in node.inputs)
        return node if getattr(node.outputs[0].type, "ndim", 0) <= widest else None

    for first in order:
        stack = [first]
        while stack:
            node = stack.pop()
            if node in done:
                continue
            result.append(node)
            done.add(node)
            for out in node.outputs:
                for reader in readers.get(out, ()):
                    missing[reader] -= 1
            values = [v for v in dict.fromkeys(node.inputs) if v in unread]
            for v in values:
                unread[v] -= 1
            for v in reversed([*values, *node.outputs]):
                pulled = ready_last_reader(v)
                if pulled is not None:
                    stack.append(pulled)
    return result


def ancestors(
    outputs: Variable | Iterable[Variable], stop_at: Iterable[Variable] = ()
) -> list[Variable]:
    """Return every variable that ``outputs`` depend on, including themselves."""
    stop = set(stop_at)
    outs = as_variable_list(outputs)
    seen: dict[Variable, None] = {}
    for node in toposort(outs, stop):
        for v in node.inputs:
            seen.setdefault(v, None)
        for v in node.outputs:
            seen.setdefault(v, None)
    for v in outs:
        seen.setdefault(v, None)
    return list(seen)


def graph_inputs(
    outputs: Variable | Iterable[Variable], include_constants: bool = False
) -> list[Variable]:
    """Return the root variables (no owner) of ``outputs``, in first-use order."""
    roots = [v for v in ancestors(outputs) if v.owner is None]
    if include_constants:
        return roots
    return [v for v in roots if not isinstance(v, Constant)]


def _check_replacement(old: Variable, new: Variable) -> None:
    if not isinstance(new, Variable):
        raise KilnTypeError(f"replacement for {old!r}: expected a Variable, got {new!r}")
    ot, nt = old.type, new.type
    if isinstance(ot, TensorType) and isinstance(nt, TensorType):
        if ot.dtype != nt.dtype or ot.ndim != nt.ndim:
            raise KilnTypeError(
                f"replacement for {old!r}: expected dtype {ot.dtype} with {ot.ndim} dims, "
                f"got {nt.dtype} with {nt.ndim} dims"
            )
        for a, b in zip(ot.shape, nt.shape, strict=True):
            if a is not None and b is not None and a != b:
                raise KilnTypeError(
                    f"replacement for {old!r}: static shape {nt.shape} conflicts with {ot.shape}"
                )
    elif type(ot) is not type(nt):
        raise KilnTypeError(f"replacement for {old!r}: expected type {ot}, got {nt}")


def graph_replace(
    outputs: Variable | Sequence[Variable],
    replace: Mapping[Variable, Variable],
    strict: bool = True,
) -> Variable | list[Variable]:
    """Return ``outputs`` rebuilt with each key of ``replace`` substituted by its value.

    The original graph is unchanged (nodes are immutable); rebuilt nodes go through
    each Op's ``make_node`` again, so types are re-checked and new static shapes
    propagate. With ``strict=True`` a replacement must match the dtype and number of
    dimensions of the variable it replaces.

    Examples
    --------
    >>> y2 = graph_replace(y, {x: x2})  # doctest: +SKIP
    """
    single = isinstance(outputs, Variable)
    outs = as_variable_list(outputs)
    memo: dict[Variable, Variable] = {}
    for old, new in replace.items():
        if strict:
            _check_replacement(old, new)
        memo[old] = new
    for node in toposort(outs, stop_at=memo):
        new_inputs = [memo.get(v, v) for v in node.inputs]
        if all(a is b for a, b in zip(new_inputs, node.inputs, strict=True)):
            continue
        new_node = node.op.make_node(*new_inputs)
        for old, new in zip(node.outputs, new_node.outputs, strict=True):
            memo.setdefault(old, new)
    result = [memo.get(v, v) for v in outs]
    return result[0] if single else result


def uses_any(
    roots: Iterable[Variable],
    targets: Container[Variable],
    stop: Container[Variable] = (),
    limit: int | None = None,
) -> bool:
    """Return whether the graph of ``roots``, above the variables in ``stop``, uses a target.

    With ``limit``, the walk is conservative: past ``limit`` visited nodes it answers
    ``True``.
    """
    stack = list(roots)
    seen: set[Variable] = set()
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if v in seen or v in stop or v.owner is None:
            continue
        seen.add(v)
        if limit is not None and len(seen) > limit:
            return True
        stack.extend(v.owner.inputs)
    return False
