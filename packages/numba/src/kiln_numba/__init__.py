"""kiln_numba: the Numba linker, kiln's default backend.

A whole rewritten graph becomes one generated ``@njit`` function (elementwise chains
and reductions as explicit loops), cached on disk so a later compile of the same graph,
in any process, loads machine code instead of running LLVM.
"""

from typing import Any

from kiln_numba import (
    _fused_loop_code,  # noqa: F401  (registers FusedLoop's Numba code)
    blockwise,
    core_shape,
    elemwise,
    linalg,
    loop_fusion,
    opfromgraph,
    random,
    reduce,
    shape,
    subtensor,
)
from kiln_numba._codegen import ObjectModeWarning as ObjectModeWarning
from kiln_numba._codegen import generate as generate
from kiln_numba._funcify import CodeContext as CodeContext
from kiln_numba._funcify import has_numba_implementation as has_numba_implementation
from kiln_numba._funcify import numba_funcify as numba_funcify
from kiln_numba._linker import NumbaThunk as NumbaThunk
from kiln_numba._numba_internals import NumbaVersionWarning as NumbaVersionWarning
from kiln_numba._numba_internals import version_supported as _version_supported
from kiln_numba._numba_linker import NumbaLinker as NumbaLinker

# One NumbaVersionWarning at import when the installed Numba is not one whose internals
# kiln_numba was checked on (it then uses Numba's public API only).
_version_supported()

# Importing this package does not import Numba: a function whose machine code is in the
# cache loads without it (kiln_numba._shared_library). The native wrappers need Numba.
_LAZY = {
    "native_expand": "kiln_numba.native",
    "native_logp_grad": "kiln_numba.native",
    "native_c_pointers": "kiln_numba.native_c",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kiln_numba' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "blockwise",
    "core_shape",
    "elemwise",
    "linalg",
    "loop_fusion",
    "NumbaVersionWarning",
    "native_c_pointers",
    "native_expand",
    "native_logp_grad",
    "opfromgraph",
    "random",
    "reduce",
    "shape",
    "subtensor",
]
