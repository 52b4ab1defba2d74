"""The native log-density ABI: one plain C interface that every native backend provides.

A compiled sampler outside Python (kiln's C NUTS kernel, nutpie's Rust threads) calls a
model through two C functions, whatever backend compiled it::

    int logp(size_t n, const double* x, double* grad, double* logp, const void* user_data)
    int expand(size_t n, size_t n_out, const double* x, double* out, const void* user_data)

``logp`` writes the log-density at the flat unconstrained point ``x`` (``n`` float64)
into ``*logp`` and its gradient into ``grad``; ``expand`` writes the constrained values
and deterministics, flattened in C order and cast to float64, one after the other, into
``out`` (``n_out`` entries). Both return 0 (ok), a positive code for a bad point the
sampler recovers from (the point is rejected: a divergence), or a negative code for a
fatal error; :meth:`NativeModel.describe` says what a code means. The model's data
travels through ``user_data``: the functions read it and never write it, so they are
re-entrant and callable from any thread without the GIL.

A linker that can produce these functions has a ``native`` method (see
:class:`kiln_compile.Linker`); :func:`kiln_compile.native_model` asks the linker of a compiled
function for it. It is a capability of the linker, never a check of its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kiln_graph import KilnTypeError

__all__ = ["NativeModel", "NativeUnavailable"]


class NativeUnavailable(KilnTypeError):
    """A linker cannot give a function as the native ABI (the message says why).

    For example a backend that does not provide the ABI, or a model running an Op
    that only Python can run (Numba's object mode). Callers fall back to calling the
    compiled function from Python.
    """


def _no_refresh() -> None:
    """Do nothing: the ``refresh`` of a model whose ``user_data`` never changes."""


def _describe_code(code: int) -> str:
    if code == 0:
        return "ok"
    if code > 0:
        return f"a bad point the sampler can recover from (code {code})"
    return f"a fatal error (code {code})"


@dataclasses.dataclass(frozen=True, eq=False)
class NativeModel:
    """A model's log-density (and expand function) as plain C function pointers.

    Attributes
    ----------
    logp_cptr
        Address of ``int logp(size_t n, const double* x, double* grad, double* logp,
        const void* user_data)``.
    expand_cptr
        Address of ``int expand(size_t n, size_t n_out, const double* x, double* out,
        const void* user_data)``, or None when no expand function was given.
    user_data_ptr
        The ``user_data`` both functions take (an address; its contents are the
        backend's). It stays the same for the life of the object: :attr:`refresh`
        updates what it points at.
    n
        The length of ``x`` (and of ``grad``).
    n_out
        The length of the expand output at the point the functions were built (None
        without an expand function); a deterministic whose shape follows the data
        changes it after ``set_data``.
    keep_alive
        Everything the addresses point into: hold it (or this object) while a sampler
        holds the pointers.
    refresh
        Re-reads the model's shared values (after ``set_data`` / ``set_value``) into
        what ``user_data_ptr`` points at. Call it before a run; it must not be called
        while a sampler is calling the functions.
    linker
        The name of the backend that compiled the functions.
    codes
        What each return code means (:meth:`describe` reads it).
    """

    logp_cptr: int
    expand_cptr: int | None
    user_data_ptr: int
    n: int
    n_out: int | None
    keep_alive: tuple[Any, ...]
    # A factory, so the class has no function attribute that autodoc would call a method.
    refresh: Callable[[], None] = dataclasses.field(default_factory=lambda: _no_refresh)
    linker: str = ""
    codes: dict[int, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.logp_cptr:
            raise KilnTypeError("NativeModel: logp_cptr is a null pointer")
        if self.n < 0 or (self.n_out is not None and self.n_out < 0):
            raise KilnTypeError(f"NativeModel: negative length n={self.n}, n_out={self.n_out}")

    def describe(self, code: int) -> str:
        """Return what ``code``, returned by ``logp`` or ``expand``, means."""
        known = self.codes.get(int(code))
        if known is not None:
            return f"{known} (code {int(code)})" if code else known
        return _describe_code(int(code))

    def __repr__(self) -> str:
        expand = "yes" if self.expand_cptr else "no"
        return (
            f"NativeModel(linker={self.linker!r}, n={self.n}, n_out={self.n_out}, expand={expand})"
        )
