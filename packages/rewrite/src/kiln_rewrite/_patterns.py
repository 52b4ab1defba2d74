"""Declarative rewrite patterns: ``log(add(1, x)) -> log1p(x)`` written as data.

A pattern is a tree of :class:`Pat` (an Op, or an Elemwise of a ScalarOp class, with
argument patterns), :class:`PVar` (binds any variable; the same name must bind the same
variable) and numbers (match a constant whose elements all equal the number, seen
through broadcasting). :func:`register_pattern` turns ``(pattern, build)`` into a local
rewrite.

Examples
--------
>>> x = PVar("x")  # doctest: +SKIP
>>> register_pattern("stabilize", E(Log)(E(Add)(1, x)), lambda x: kt.log1p(x),
...                  identity="log(1 + x) -> log1p(x)")  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph import Apply, Constant, DimShuffle, Elemwise, Op, ScalarOp, Variable
from kiln_graph.ops import Alloc
from kiln_rewrite._db import Rewrite, _normalize_tags, db


def scalar_constant(v: Variable) -> float | int | bool | None:
    """Return the value of ``v`` if it is a constant with all elements equal, else ``None``.

    Looks through broadcasting (DimShuffle and Alloc of a constant).
    """
    while v.owner is not None and isinstance(v.owner.op, DimShuffle | Alloc):
        v = v.owner.inputs[0]
    if not isinstance(v, Constant):
        return None
    data = v.data
    if data.size == 0:
        return None
    first = data.reshape(-1)[0]
    if data.size > 1 and not np.all(data == first):
        return None
    return first.item()


class PVar:
    """A pattern variable: binds any variable (that passes ``where``)."""

    def __init__(self, name: str, where: Callable[[Variable], bool] | None = None) -> None:
        self.name = name
        self.where = where

    def __repr__(self) -> str:
        return self.name


class Pat:
    """A pattern node: ``op`` applied to argument patterns.

    ``op`` is an Op class, or a ScalarOp class for an Elemwise; ``commutative`` tries
    every order of the arguments (up to three).
    """

    def __init__(self, op: type, args: tuple[Any, ...], commutative: bool = False) -> None:
        self.op = op
        self.args = args
        self.commutative = commutative

    def __repr__(self) -> str:
        return f"{self.op.__name__.lower()}({', '.join(map(repr, self.args))})"


def E(scalar_op: type[ScalarOp], commutative: bool | None = None) -> Callable[..., Pat]:  # noqa: N802
    """Return a builder of patterns matching ``Elemwise(scalar_op)`` nodes."""
    comm = scalar_op.__name__ in ("Add", "Mul") if commutative is None else commutative

    def build(*args: Any) -> Pat:
        return Pat(scalar_op, args, comm)

    return build


def match(pattern: Any, v: Variable, bindings: dict[str, Variable] | None = None) -> dict | None:
    """Return the bindings under which ``pattern`` matches ``v``, or ``None``."""
    env: dict[str, Variable] = {} if bindings is None else bindings
    return env if _match(pattern, v, env) else None


def _match(pattern: Any, v: Variable, env: dict[str, Variable]) -> bool:
    if isinstance(pattern, PVar):
        if pattern.name in env:
            return env[pattern.name] is v
        if pattern.where is not None and not pattern.where(v):
            return False
        env[pattern.name] = v
        return True
    if isinstance(pattern, bool | int | float):
        value = scalar_constant(v)
        return value is not None and value == pattern
    if isinstance(pattern, Pat):
        node = v.owner
        if node is None or not _op_matches(pattern.op, node):
            return False
        if len(node.inputs) != len(pattern.args):
            return False
        orders = (
            itertools.permutations(range(len(node.inputs)))
            if pattern.commutative and len(node.inputs) <= 3
            else [tuple(range(len(node.inputs)))]
        )
        for order in orders:
            trial = dict(env)
            if all(
                _match(p, node.inputs[i], trial) for p, i in zip(pattern.args, order, strict=True)
            ):
                env.clear()
                env.update(trial)
                return True
        return False
    raise TypeError(f"not a pattern: {pattern!r}")


def _op_matches(op_cls: type, node: Apply) -> bool:
    op = node.op
    if issubclass(op_cls, ScalarOp):
        return isinstance(op, Elemwise) and isinstance(op.scalar_op, op_cls)
    return isinstance(op, op_cls)


def register_pattern(
    phase: str,
    pattern: Pat,
    build: Callable[..., Variable],
    *tags: str,
    identity: str,
    name: str,
    where: Callable[..., bool] | None = None,
) -> Rewrite:
    """Register the local rewrite ``pattern -> build(**bindings)`` (when ``where`` holds).

    ``tags`` default to ``("fast_run",)``.
    """

    def fn(node: Apply) -> Variable | None:
        env = match(pattern, node.outputs[0])
        if env is None or (where is not None and not where(**env)):
            return None
        return build(**env)

    tracks: tuple[type, ...] = (pattern.op,)
    return db.register(
        Rewrite(
            name=name,
            phase=phase,
            tags=_normalize_tags(phase, tags or ("fast_run",)),
            identity=identity,
            fn=fn,
            tracks=tracks,
        )
    )


__all__ = ["E", "Op", "PVar", "Pat", "match", "register_pattern", "scalar_constant"]
