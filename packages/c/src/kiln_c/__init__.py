"""kiln_c: the C backend (``backend="c"``), a whole graph as one C99 file.

``c_funcify`` maps Ops of kiln_graph (and scalar ops) to C source, in modules that
mirror kiln_graph's op families; the linker writes the rewritten graph as one
translation unit (one small function per node or fused loop, no ``Python.h``), builds
it with the system C compiler into a shared library kept in kiln's cache, and calls it
through ctypes. See :mod:`kiln_c._codegen` (the file), :mod:`kiln_c._library` (the
cache), :mod:`kiln_c._linker` (calls, fallbacks, errors).

Examples
--------
>>> import kiln
>>> f = kiln.function([x], kt.exp(x).sum(), mode=kiln.Mode(linker="c"))  # doctest: +SKIP
"""

from kiln_c import (
    blockwise,
    elemwise,
    linalg,
    loop_fusion,
    opfromgraph,
    ranges,
    reduce,
    scalar,
    shape,
    subtensor,
)
from kiln_c._compiler import CompileError as CompileError
from kiln_c._compiler import CompilerNotFoundError as CompilerNotFoundError
from kiln_c._compiler import find_compiler as find_compiler
from kiln_c._funcify import THROUGH_PERFORM as THROUGH_PERFORM
from kiln_c._funcify import NoCImplementation as NoCImplementation
from kiln_c._funcify import NodeIO as NodeIO
from kiln_c._funcify import ScalarTemplate as ScalarTemplate
from kiln_c._funcify import c_funcify as c_funcify
from kiln_c._funcify import has_c_implementation as has_c_implementation
from kiln_c._linker import CLinker as CLinker
from kiln_c._linker import FallbackWarning as FallbackWarning
from kiln_c._thunk import CThunk as CThunk

__all__ = [
    "blockwise",
    "elemwise",
    "linalg",
    "loop_fusion",
    "opfromgraph",
    "ranges",
    "reduce",
    "scalar",
    "shape",
    "subtensor",
]
