"""The NUTS functions of :mod:`kiln_samplers._nuts_core`, compiled by Numba once.

The model's log-density is an argument of type ``FunctionType(LOGP_GRAD_SIGNATURE)``
(a function pointer): ``sample_chunk`` has an explicit signature, so Numba compiles it
once, caches it on disk, and every model's native log-density (a function compiled
with that signature, e.g. by ``kiln_numba.native_logp_grad``) runs through it.
"""

from __future__ import annotations

import functools
import types as pytypes
from typing import Any

from numba import njit, types
from numba.core import sigutils

from kiln_samplers import _nuts_core as core
from kiln_samplers._protocol import LOGP_GRAD_SIGNATURE

_ARGS, _RETURN = sigutils.normalize_signature(LOGP_GRAD_SIGNATURE)
LOGP_GRAD = types.FunctionType(_RETURN(*_ARGS))

_F8 = types.float64[::1]
_F8_2D = types.float64[:, ::1]
SAMPLE_CHUNK_SIGNATURE = types.float64(
    LOGP_GRAD,
    types.int64[::1],
    types.npy_rng,
    _F8,
    _F8,
    types.float64,
    _F8,
    _F8,
    _F8_2D,
    types.int64,
    _F8_2D,
    _F8_2D,
    types.float64,
    types.int64,
    types.float64,
    types.boolean,
    types.boolean,
)

_HELPERS = ("kinetic", "is_turning", "leapfrog", "_ckpt_indices", "nuts_step", "dual_averaging")
_namespace: dict[str, Any] = dict(vars(core))


def _compiled(name: str, signature: Any = None) -> Any:
    fn = getattr(core, name)
    copy = pytypes.FunctionType(fn.__code__, _namespace, name, fn.__defaults__)
    copy.__qualname__ = fn.__qualname__
    if signature is None:
        return njit(cache=True, nogil=True, error_model="numpy")(copy)
    return njit(signature, cache=True, nogil=True, error_model="numpy")(copy)


@functools.cache
def compiled_sample_chunk() -> Any:
    """Return the compiled :func:`kiln_samplers._nuts_core.sample_chunk` (loaded or built once)."""
    for name in _HELPERS:
        _namespace[name] = _compiled(name)
    return _compiled("sample_chunk", SAMPLE_CHUNK_SIGNATURE)
