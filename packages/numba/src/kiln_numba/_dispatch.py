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
typed in a caller or called from Python. On a Numba whose internals were not checked
(:mod:`kiln_numba._numba_internals`) it is ``numba.njit(signatures)``, compiled at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

from kiln_compile import config
from kiln_numba import _numba_cache_internals as cache_internals
from kiln_numba import _numba_internals as internals
from kiln_numba._cache import attach_kernel_cache


def signature_njit(*signatures: str, cache: bool = False) -> Callable[[Any], Any]:
    """Return a decorator like ``numba.njit(signatures, cache=cache)``, compiled lazily.

    With ``cache``, the machine code is kept as :func:`kiln_numba._cache.kernel_njit`
    keeps it: under the kiln cache root, following the config at the first compile.
    """

    def decorate(fn: Callable[..., Any]) -> Any:
        if not internals.usable():
            return numba.njit(list(signatures), cache=cache and bool(config.cache))(fn)
        attach = attach_kernel_cache if cache else None
        return cache_internals.first_use_dispatcher(fn, signatures, attach)

    return decorate
