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
