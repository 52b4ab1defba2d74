"""Modes: which rewrites run and which linker builds the callable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kiln_compile._fgraph import FunctionGraph
from kiln_graph import KilnTypeError, KilnValueError

RewritePass = Callable[[FunctionGraph], FunctionGraph]


class Mode:
    """A rewrite pass (``None``: none) plus a linker name (``"auto"``, ``"vm"``, ...).

    Examples
    --------
    >>> Mode(linker="vm")
    Mode(linker='vm', rewrites=None)
    """

    def __init__(
        self, rewrites: RewritePass | None = None, linker: str = "auto", name: str | None = None
    ) -> None:
        if not isinstance(linker, str):
            raise KilnTypeError(f"linker: expected a backend name, got {linker!r}")
        if rewrites is not None and not callable(rewrites):
            raise KilnTypeError(f"rewrites: expected a callable or None, got {rewrites!r}")
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

    def with_linker(self, linker: str) -> Mode:
        """Return this mode with another linker."""
        return Mode(self.rewrites, linker)


FAST_COMPILE = Mode(rewrites=None, linker="vm", name="FAST_COMPILE")
FAST_RUN = Mode(rewrites=None, linker="auto", name="FAST_RUN")

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
