"""kiln_numba: the Numba linker, kiln's default backend.

A whole rewritten graph becomes one generated ``@njit`` function (elementwise chains
and reductions as explicit loops), cached on disk so a later compile of the same graph,
in any process, loads machine code instead of running LLVM.
"""

from kiln_numba import (
    blockwise,
    core_shape,
    elemwise,
    linalg,
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
from kiln_numba._linker import NumbaLinker as NumbaLinker
from kiln_numba._linker import NumbaThunk as NumbaThunk
from kiln_numba.native import native_expand as native_expand
from kiln_numba.native import native_logp_grad as native_logp_grad
from kiln_numba.native_c import native_c_pointers as native_c_pointers

__all__ = [
    "blockwise",
    "core_shape",
    "elemwise",
    "linalg",
    "opfromgraph",
    "random",
    "reduce",
    "shape",
    "subtensor",
]
