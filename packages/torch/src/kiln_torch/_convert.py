"""Values between NumPy and torch: dtypes, devices, and the copies a call needs.

On the CPU an input array is shared with torch without a copy (``torch.from_numpy``)
and an output tensor is returned as the NumPy view of its memory; on another device the
values are copied there and back. A read-only NumPy array is copied first (torch
tensors are writable).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from kiln_compile import FunctionGraph
from kiln_graph import KilnTypeError, KilnValueError, TensorType

#: The torch dtype of each NumPy dtype name kiln's graphs use.
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "complex128": torch.complex128,
    "complex64": torch.complex64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "bool": torch.bool,
}


def torch_dtype(dtype: str | np.dtype | None) -> torch.dtype | None:
    """Return the torch dtype of the NumPy ``dtype`` (None for None)."""
    if dtype is None:
        return None
    name = np.dtype(dtype).name
    found = DTYPES.get(name)
    if found is None:
        raise KilnTypeError(f"the torch backend has no dtype for {name!r}")
    return found


def to_device(value: Any, dtype: str | None, device: torch.device) -> torch.Tensor:
    """Return ``value`` (NumPy, Python or torch) as a tensor of ``dtype`` on ``device``."""
    if isinstance(value, torch.Tensor):
        tdtype = torch_dtype(dtype) if dtype is not None else value.dtype
        return value.to(device=device, dtype=tdtype)
    array = np.asarray(value, dtype=dtype)
    if not array.flags.writeable or array.dtype.byteorder not in "=|":
        array = np.array(array, dtype=array.dtype.newbyteorder("="))
    tensor = torch.from_numpy(array)
    return tensor if device.type == "cpu" else tensor.to(device)


def to_numpy(value: Any, dtype: str) -> np.ndarray:
    """Return the tensor ``value`` as a NumPy array of ``dtype`` (a view on the CPU)."""
    if not isinstance(value, torch.Tensor):
        return np.asarray(value, dtype=dtype)
    if value.device.type != "cpu":
        value = value.cpu()
    out = value.numpy()
    return out if out.dtype == np.dtype(dtype) else out.astype(dtype)


@functools.cache
def _available(kind: str) -> bool:
    if kind == "cpu":
        return True
    if kind == "cuda":
        return bool(torch.cuda.is_available())
    if kind == "mps":
        return bool(torch.backends.mps.is_available())
    return False


def check_device(name: str, fgraph: FunctionGraph | None = None) -> torch.device:
    """Return the torch device called ``name`` (``config.torch_device``), checked.

    Raises
    ------
    KilnValueError
        If the device is not known or not available here, or is ``mps`` and the graph
        has a float64 value (Apple's MPS has no float64).
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise KilnValueError(
            f"torch_device: {name!r} is not a torch device ({exc}); expected 'cpu', "
            "'cuda', 'cuda:<index>' or 'mps'"
        ) from None
    if not _available(device.type):
        raise KilnValueError(
            f"torch_device: {name!r} is not available in this torch installation "
            f"(torch {torch.__version__}); use 'cpu'"
        )
    if device.type == "mps" and fgraph is not None and _has_float64(fgraph):
        raise KilnValueError(
            "torch_device: 'mps' has no float64, and this function computes in float64; "
            "use 'cpu' or 'cuda', or build the model in float32"
        )
    return device


def _has_float64(fgraph: FunctionGraph) -> bool:
    return any(
        isinstance(v.type, TensorType) and v.type.dtype in ("float64", "complex128")
        for node in fgraph.nodes
        for v in node.outputs
    )
