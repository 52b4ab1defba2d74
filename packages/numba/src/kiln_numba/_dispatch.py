"""Numba dispatchers with explicit signatures that compile at first use, not at import.

``numba.njit("int64(int64, unicode_type)", cache=True)`` compiles (or loads from
Numba's cache) when the module defining the function is imported: every process that
imports :mod:`kiln_numba` would pay for it, and loading from Numba's cache also
refreshes all of Numba's registries (about 0.2 s), even when the function is never
called, e.g. when a whole generated function is loaded from the Stage-2 cache (the
machine code of the functions it calls is linked into it).

:func:`signature_njit` keeps what an explicit signature gives (one compiled version, a
literal argument such as a label string or an axis converted to the signature's type
instead of a new specialization per literal) and compiles when the function is first
typed in a caller or called from Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba.core import typeinfer
from numba.core.registry import CPUDispatcher


class FirstUseDispatcher(CPUDispatcher):  # type: ignore[misc]  # Numba is untyped
    """A CPU dispatcher compiled for its signatures when it is first used."""

    _kiln_signatures: tuple[str, ...] = ()

    def _compile_signatures(self) -> None:
        signatures, self._kiln_signatures = self._kiln_signatures, ()
        if not signatures:
            return
        with typeinfer.register_dispatcher(self):
            for sig in signatures:
                self.compile(sig)
        self.disable_compile()

    def get_call_template(self, args: Any, kws: Any) -> Any:
        """Compile the signatures, then type a call from compiled code (as Numba does)."""
        self._compile_signatures()
        return super().get_call_template(args, kws)

    def _compile_for_args(self, *args: Any, **kws: Any) -> Any:
        """Compile the signatures at the first call from Python, then dispatch it."""
        if self._kiln_signatures:
            self._compile_signatures()
            return self(*args, **kws)
        return super()._compile_for_args(*args, **kws)  # type: ignore[misc]


def signature_njit(*signatures: str, cache: bool = False) -> Callable[[Any], Any]:
    """Return a decorator like ``numba.njit(signatures, cache=cache)``, compiled lazily."""

    def decorate(fn: Callable[..., Any]) -> FirstUseDispatcher:
        dispatcher = FirstUseDispatcher(py_func=fn, locals={}, targetoptions={"nopython": True})
        if cache:
            dispatcher.enable_caching()
        dispatcher._kiln_signatures = signatures
        return dispatcher

    return decorate
