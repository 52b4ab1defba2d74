"""kiln_mlx: the MLX linker (``backend="mlx"``), a whole graph in one ``mx.compile`` function.

``mlx_funcify`` maps every Op of kiln_graph and kiln_random (and every scalar op) to an
MLX function, in modules that mirror kiln_graph's op families; the linker traces the
rewritten graph with them into one function that ``mx.compile`` compiles. See
:mod:`kiln_mlx._linker` (inputs, data, float64, errors), :mod:`kiln_mlx._float64_math`
(the float64 functions MLX gets wrong), :mod:`kiln_mlx.random` (generators as MLX
keys) and :mod:`kiln_mlx._cache` (MLX's kernels under kiln's cache root).

Examples
--------
>>> import kiln
>>> f = kiln.function([x], kt.exp(x).sum(), mode=kiln.Mode(linker="mlx"))  # doctest: +SKIP
"""

from kiln_mlx import (  # noqa: F401 - _draws registers its samplers
    _draws,
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
from kiln_mlx._cache import kernel_folder as kernel_folder
from kiln_mlx._funcify import MlxImpl as MlxImpl
from kiln_mlx._funcify import NoMlxImplementation as NoMlxImplementation
from kiln_mlx._funcify import has_mlx_implementation as has_mlx_implementation
from kiln_mlx._funcify import mlx_funcify as mlx_funcify
from kiln_mlx._funcify import shape_only as shape_only
from kiln_mlx._funcify import static_inputs as static_inputs
from kiln_mlx._graph import MlxGraph as MlxGraph
from kiln_mlx._linker import EagerWarning as EagerWarning
from kiln_mlx._linker import MlxFloat32Linker as MlxFloat32Linker
from kiln_mlx._linker import MlxLinker as MlxLinker
from kiln_mlx._linker import MlxThunk as MlxThunk

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
