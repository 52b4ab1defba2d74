"""kiln_torch: the PyTorch linker (``backend="torch"``), a whole graph as one torch function.

``torch_funcify`` maps every Op of kiln_graph and kiln_random (and every scalar op) to a
torch function, in modules that mirror kiln_graph's op families; the linker generates
one module-level Python function calling them (:mod:`kiln_torch._program`), run eagerly
under ``torch.inference_mode()`` or, opted in with ``config.torch_compile``, through
``torch.compile``. See :mod:`kiln_torch._linker` (inputs, devices, dtypes, errors),
:mod:`kiln_torch.random` (generators as ``torch.Generator``) and :mod:`kiln_torch._cache`
(inductor's cache under kiln's cache root).

Examples
--------
>>> import kiln
>>> f = kiln.function([x], kt.exp(x).sum(), mode=kiln.Mode(linker="torch"))  # doctest: +SKIP
>>> with kiln.config.change(torch_device="cuda"):  # doctest: +SKIP
...     f(x_value)
"""

from kiln_torch import (
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
from kiln_torch._cache import enable_inductor_cache as enable_inductor_cache
from kiln_torch._funcify import NoTorchImplementation as NoTorchImplementation
from kiln_torch._funcify import TorchImpl as TorchImpl
from kiln_torch._funcify import has_torch_implementation as has_torch_implementation
from kiln_torch._funcify import torch_funcify as torch_funcify
from kiln_torch._linker import TorchLinker as TorchLinker
from kiln_torch._linker import TorchThunk as TorchThunk
from kiln_torch._program import TorchProgram as TorchProgram
from kiln_torch.scalar import HostComputationWarning as HostComputationWarning

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
