"""Modes: which rewrites run (a rewrite query) and which linker builds the callable."""

from __future__ import annotations

from typing import Any

from kiln_graph import KilnTypeError, KilnValueError
from kiln_rewrite import FAST_COMPILE_QUERY, FAST_RUN_QUERY, Query


class Mode:
    """A rewrite :class:`~kiln_rewrite.Query` (``None``: no rewriting) plus a linker name.

    The linker is ``"auto"`` (the configured default backend), ``"vm"``, ``"numba"``...

    Examples
    --------
    >>> Mode(linker="vm").excluding("stabilize")  # doctest: +SKIP
    """

    def __init__(
        self, rewrites: Query | None = FAST_RUN_QUERY, linker: str = "auto", name: str | None = None
    ) -> None:
        if not isinstance(linker, str):
            raise KilnTypeError(f"linker: expected a backend name, got {linker!r}")
        if rewrites is not None and not isinstance(rewrites, Query):
            raise KilnTypeError(
                f"rewrites: expected a kiln_rewrite.Query or None, got {rewrites!r}"
            )
        self.rewrites = rewrites
        self.linker = linker
        self.name = name

    def __repr__(self) -> str:
        if self.name:
            return self.name
        return f"Mode(linker={self.linker!r}, rewrites={self.rewrites!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Mode)
            and self.linker == other.linker
            and self.rewrites == other.rewrites
        )

    def __hash__(self) -> int:
        return hash((self.linker, self.rewrites))

    def _query(self) -> Query:
        return self.rewrites if self.rewrites is not None else Query(include=frozenset())

    def including(self, *tags: str) -> Mode:
        """Return this mode with the rewrites tagged ``tags`` also selected."""
        return Mode(self._query().including(*tags), self.linker)

    def excluding(self, *tags: str) -> Mode:
        """Return this mode without the rewrites tagged ``tags`` (or named so)."""
        return Mode(self._query().excluding(*tags), self.linker)

    def with_linker(self, linker: str) -> Mode:
        """Return this mode with another linker."""
        return Mode(self.rewrites, linker)


#: Merge and cheap canonicalization, then the Python VM: compiles fastest.
FAST_COMPILE = Mode(rewrites=FAST_COMPILE_QUERY, linker="vm", name="FAST_COMPILE")
#: Every rewrite, then the default backend: runs fastest.
FAST_RUN = Mode(rewrites=FAST_RUN_QUERY, linker="auto", name="FAST_RUN")

_PREDEFINED = {"FAST_COMPILE": FAST_COMPILE, "FAST_RUN": FAST_RUN}


def get_mode(mode: Any) -> Mode:
    """Return the :class:`Mode` for ``mode``: a Mode, a predefined name, or ``None``.

    ``None`` is ``FAST_RUN``.
    """
    if mode is None:
        return FAST_RUN
    if isinstance(mode, Mode):
        return mode
    if isinstance(mode, str):
        if mode in _PREDEFINED:
            return _PREDEFINED[mode]
        raise KilnValueError(
            f"mode: unknown mode {mode!r}; expected one of {sorted(_PREDEFINED)} or a Mode"
        )
    raise KilnTypeError(f"mode: expected a Mode, a mode name or None, got {mode!r}")
