"""The native ABI's return codes and the C source of its functions over a Numba wrapper.

Shared by :mod:`kiln_numba.native` (which links the C functions into a wrapper's shared
library) and :mod:`kiln_numba.native_c` (whose ``numba.cfunc`` callbacks return the
same codes), so the two paths cannot drift.
"""

from __future__ import annotations

from kiln_numba import _numba_internals as _internals

__all__ = ["ABI_SYMBOLS", "ABI_VERSION", "CODES", "RETURN_CODES", "abi_source"]

#: Bumped whenever the C functions change meaning (part of their source, hence the key).
ABI_VERSION = 1

#: The return codes, by the name the C functions of :func:`abi_source` give them.
CODES: dict[str, int] = {
    "KILN_OK": 0,
    "KILN_RAISED": 1,
    "KILN_LOGP_NOT_FINITE": 2,
    "KILN_GRAD_NOT_FINITE": 3,
    "KILN_WRONG_LENGTH": -1,
    "KILN_EXPAND_RAISED": -2,
}

#: What the callbacks return: 0 ok, > 0 recoverable (a rejected point), < 0 fatal.
RETURN_CODES: dict[int, str] = {
    CODES["KILN_OK"]: "ok",
    CODES["KILN_RAISED"]: "the model raised an error at x (e.g. a failed parameter check)",
    CODES["KILN_LOGP_NOT_FINITE"]: "the log-density at x is not finite",
    CODES["KILN_GRAD_NOT_FINITE"]: "the gradient at x is not finite",
    CODES["KILN_WRONG_LENGTH"]: "n (or n_out) is not the length the model was compiled for",
    CODES["KILN_EXPAND_RAISED"]: "the expand function raised an error at x",
}

#: The symbols :func:`abi_source` defines, by kind.
ABI_SYMBOLS = {"logp": "kiln_abi_logp", "expand": "kiln_abi_expand"}


def abi_source(kind: str, ndim: int) -> tuple[str, str]:
    """Return ``(symbol, C source)`` of the ABI's ``logp`` or ``expand`` over a native wrapper.

    The C function computes what the ``kiln_logp`` / ``kiln_expand`` callbacks compute
    (the same codes, :data:`CODES`), calling the wrapper's entry in Numba's calling
    convention (:data:`kiln_numba._numba_internals.NATIVE_ABI_C`); it is linked into the
    wrapper's shared library (``kind`` is ``"logp"`` or ``"expand"``, ``ndim`` the length
    of ``x``).
    """
    defines = {**CODES, "KILN_ABI_N": ndim, f"KILN_ABI_{kind.upper()}": 1}
    head = "".join(f"#define {name} ({value})\n" for name, value in defines.items())
    return ABI_SYMBOLS[kind], f"/* kiln_numba.native_c, version {ABI_VERSION} */\n{head}" + (
        _internals.NATIVE_ABI_C
    )
