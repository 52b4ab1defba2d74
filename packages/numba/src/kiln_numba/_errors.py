"""The exception generated code raises (importable without Numba)."""

from __future__ import annotations

__all__ = ["KilnRuntimeError"]


class KilnRuntimeError(Exception):
    """Raised by generated code; its argument indexes the module's table of errors.

    Generated functions call ``kiln_raise(code)`` instead of raising their errors
    directly: a ``raise`` in a large Numba function costs much compile time (its
    clean-up code), a call to this one compiled function little. The linker turns
    it back into the error of the table (class and message) when the call returns.
    """
