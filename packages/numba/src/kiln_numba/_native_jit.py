"""The Numba side of :mod:`kiln_numba.native`: its signatures and njit intrinsics.

Separate so that :mod:`kiln_numba.native` imports without Numba (a native wrapper
loaded from its shared library needs none); the generated wrappers import these.
"""

from __future__ import annotations

from typing import Any

from numba import carray, types
from numba.extending import intrinsic

from kiln_numba._numba_internals import intrinsic_helpers

cgutils, impl_ret_borrowed = intrinsic_helpers()

__all__ = [
    "EXPAND_NUMBA_SIGNATURE",
    "LOGP_GRAD_NUMBA_SIGNATURE",
    "address_as_void_pointer",
    "as_readonly",
    "carray",
]

#: ``LOGP_GRAD_SIGNATURE`` as a Numba ``Signature`` (``types.FunctionType`` of it is the
#: type of every model's native log-density).
LOGP_GRAD_NUMBA_SIGNATURE = types.float64(types.float64[::1], types.float64[::1], types.int64[::1])
#: ``EXPAND_SIGNATURE`` as a Numba ``Signature``.
EXPAND_NUMBA_SIGNATURE = types.int64(types.float64[::1], types.float64[::1], types.int64[::1])


@intrinsic
def address_as_void_pointer(typingctx: Any, src: Any) -> Any:
    """Return the integer ``src`` as a ``void*`` (for ``carray``), in njit code."""
    sig = types.voidptr(src)

    def codegen(cgctx: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return sig, codegen


@intrinsic
def as_readonly(typingctx: Any, array: Any) -> Any:
    """Return ``array`` typed read-only, in njit code (no copy).

    Constants reach the model's function read-only, as the Function passes them, so the
    wrapper calls the specialization the Function's own calls compiled (or will use).
    """
    if not isinstance(array, types.Array):
        return None
    sig = array.copy(readonly=True)(array)

    def codegen(cgctx: Any, builder: Any, signature: Any, args: Any) -> Any:
        return impl_ret_borrowed(cgctx, builder, signature.return_type, args[0])

    return sig, codegen
