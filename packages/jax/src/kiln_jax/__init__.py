"""kiln_jax: the JAX linker (``backend="jax"``), a whole graph in one ``jax.jit`` function.

``jax_funcify`` maps every Op of kiln_graph and kiln_random (and every scalar op) to a
JAX function, in modules that mirror kiln_graph's op families; the linker traces the
rewritten graph with them into one function that XLA compiles. See
:mod:`kiln_jax._linker` (inputs, data, float64 scoping, errors),
:mod:`kiln_jax.random` (generators as JAX keys) and :mod:`kiln_jax._cache` (JAX's
persistent compilation cache under kiln's cache root).

Examples
--------
>>> import kiln
>>> f = kiln.function([x], kt.exp(x).sum(), mode=kiln.Mode(linker="jax"))  # doctest: +SKIP
"""

from kiln_jax import (
    blockwise,
    elemwise,
    linalg,
    opfromgraph,
    random,
    reduce,
    scalar,
    shape,
    subtensor,
)
from kiln_jax._cache import enable_compilation_cache as enable_compilation_cache
from kiln_jax._funcify import JaxImpl as JaxImpl
from kiln_jax._funcify import NoJaxImplementation as NoJaxImplementation
from kiln_jax._funcify import has_jax_implementation as has_jax_implementation
from kiln_jax._funcify import jax_funcify as jax_funcify
from kiln_jax._funcify import shape_only as shape_only
from kiln_jax._funcify import static_inputs as static_inputs
from kiln_jax._graph import JaxGraph as JaxGraph
from kiln_jax._linker import JaxLinker as JaxLinker
from kiln_jax._linker import JaxThunk as JaxThunk
from kiln_jax._linker import needs_x64 as needs_x64
from kiln_jax._linker import x64_scope as x64_scope

__all__ = [
    "blockwise",
    "elemwise",
    "linalg",
    "opfromgraph",
    "random",
    "reduce",
    "scalar",
    "shape",
    "subtensor",
]
