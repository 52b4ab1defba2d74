"""The rewrite database: named rewrites with tags, each in one phase, and tag queries."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kiln_graph import Apply, Elemwise, KilnValueError, Op, ScalarOp, Variable

#: The phases, in the order they run.
PHASES: tuple[str, ...] = (
    "merge",
    "canonicalize",
    "stabilize",
    "specialize",
    "fusion",
    "inplace",
)

#: The local rules each phase applies: its own, plus canonicalize's in the phases where
#: new algebra appears (so ``x * 1`` produced by a stabilizing rule is simplified too).
PHASE_RULES: dict[str, tuple[str, ...]] = {
    "merge": ("merge",),
    "canonicalize": ("canonicalize",),
    "stabilize": ("stabilize", "canonicalize"),
    "specialize": ("specialize", "canonicalize"),
    "fusion": ("fusion",),
    "inplace": ("inplace",),
}

LocalFn = Callable[[Apply], Sequence[Variable] | Variable | None]
GlobalFn = Callable[[list[Variable], list[Variable]], list[Variable]]


@dataclasses.dataclass(frozen=True, eq=False)
class Rewrite:
    """One rewrite.

    A *local* rewrite (``fn(node) -> replacement | None``) looks at one node and returns
    the variable(s) replacing its output(s), or ``None`` when it does not apply;
    ``tracks`` lists the Op classes (or, for Elemwise, ScalarOp classes) it looks at
    (empty: every node). A *global* rewrite (``fn(inputs, outputs) -> outputs``) sees
    the whole graph (fusion, in-place).
    """

    name: str
    phase: str
    tags: frozenset[str]
    identity: str
    fn: Callable[..., Any]
    tracks: tuple[type, ...] = ()
    is_global: bool = False

    def __repr__(self) -> str:
        return f"Rewrite({self.name!r}, phase={self.phase!r})"


@dataclasses.dataclass(frozen=True)
class Query:
    """Which rewrites run: those with a tag (or name) in ``include`` and none in ``exclude``.

    ``phases`` limits the phases that run (default: all, in order).
    """

    include: frozenset[str] = frozenset({"fast_run"})
    exclude: frozenset[str] = frozenset()
    phases: tuple[str, ...] = PHASES

    def including(self, *tags: str) -> Query:
        """Return this query with ``tags`` added to ``include``."""
        return dataclasses.replace(
            self, include=self.include | set(tags), exclude=self.exclude - set(tags)
        )

    def excluding(self, *tags: str) -> Query:
        """Return this query with ``tags`` added to ``exclude``."""
        return dataclasses.replace(self, exclude=self.exclude | set(tags))

    def key(self) -> str:
        """Return a stable text form of the query (part of the Stage-1 cache key)."""
        return (
            f"include={sorted(self.include)};exclude={sorted(self.exclude)};"
            f"phases={list(self.phases)}"
        )

    def selects(self, rewrite: Rewrite) -> bool:
        """Return whether ``rewrite`` runs: a tag or its name included, none excluded."""
        included = bool(rewrite.tags & self.include) or rewrite.name in self.include
        excluded = bool(rewrite.tags & self.exclude) or rewrite.name in self.exclude
        return included and not excluded


class RewriteDB:
    """All registered rewrites, by phase, in registration order."""

    def __init__(self) -> None:
        self._rewrites: dict[str, Rewrite] = {}

    def register(self, rewrite: Rewrite) -> Rewrite:
        """Add ``rewrite``; its name must be new and its phase one of :data:`PHASES`."""
        if rewrite.phase not in PHASES:
            raise KilnValueError(
                f"rewrite {rewrite.name!r}: unknown phase {rewrite.phase!r}; phases: {PHASES}"
            )
        if rewrite.name in self._rewrites:
            raise KilnValueError(f"a rewrite named {rewrite.name!r} is already registered")
        self._rewrites[rewrite.name] = rewrite
        return rewrite

    def __iter__(self) -> Any:
        return iter(self._rewrites.values())

    def __getitem__(self, name: str) -> Rewrite:
        return self._rewrites[name]

    def __contains__(self, name: str) -> bool:
        return name in self._rewrites

    def in_phase(self, phase: str, query: Query) -> list[Rewrite]:
        """Return the rewrites registered in ``phase`` that ``query`` selects."""
        return [r for r in self._rewrites.values() if r.phase == phase and query.selects(r)]


#: The one rewrite database.
db = RewriteDB()


def _normalize_tags(phase: str, tags: Iterable[str]) -> frozenset[str]:
    out = set(tags)
    out.add(phase)
    return frozenset(out)


def register_local(
    phase: str,
    *tags: str,
    identity: str,
    tracks: Sequence[type] = (),
    name: str | None = None,
) -> Callable[[LocalFn], LocalFn]:
    """Register a local rewrite (a function of one node) in ``phase`` with ``tags``.

    Examples
    --------
    >>> @register_local("stabilize", "fast_run", identity="log(1 + x) -> log1p(x)",
    ...                 tracks=[Log])  # doctest: +SKIP
    ... def local_log1p(node): ...
    """

    def decorator(fn: LocalFn) -> LocalFn:
        db.register(
            Rewrite(
                name=name or fn.__name__,
                phase=phase,
                tags=_normalize_tags(phase, tags),
                identity=identity,
                fn=fn,
                tracks=tuple(tracks),
            )
        )
        return fn

    return decorator


def register_global(
    phase: str, *tags: str, identity: str, name: str | None = None
) -> Callable[[GlobalFn], GlobalFn]:
    """Register a global rewrite (a function of the whole graph) in ``phase``."""

    def decorator(fn: GlobalFn) -> GlobalFn:
        db.register(
            Rewrite(
                name=name or fn.__name__,
                phase=phase,
                tags=_normalize_tags(phase, tags),
                identity=identity,
                fn=fn,
                is_global=True,
            )
        )
        return fn

    return decorator


def tracked_key(op: Op) -> tuple[type, ...]:
    """Return the classes under which rewrites of a node with ``op`` are indexed.

    An Op's class and its Op base classes (a rewrite tracking ``RandomVariable`` sees
    every distribution); for Elemwise, also the scalar op's class.
    """
    if isinstance(op, Elemwise):
        return (type(op), type(op.scalar_op))
    return _op_classes(type(op))  # type: ignore[arg-type]


@functools.cache
def _op_classes(cls: type) -> tuple[type, ...]:
    return tuple(c for c in cls.__mro__ if issubclass(c, Op) and c is not Op)


def check_tracks(tracks: Sequence[type]) -> None:
    """Raise if ``tracks`` holds something other than Op or ScalarOp classes."""
    for t in tracks:
        if not (isinstance(t, type) and issubclass(t, Op | ScalarOp)):
            raise KilnValueError(f"tracks: expected Op or ScalarOp classes, got {t!r}")
