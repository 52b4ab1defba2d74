"""Shape Ops on torch: shapes, shape vectors, reshape, alloc, join/split, ranges.

``Shape`` and ``ShapeI`` read a tensor's shape into a host (NumPy) value, and the
arithmetic on shapes runs on the host (:mod:`kiln_torch._program`). The inputs that
decide a shape (a reshape's target, an alloc's lengths, split sizes, a range's bounds)
are declared host inputs: they arrive as NumPy values, or, where the graph computes
them from tensor values, are read back from the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kiln_graph import Apply, ShapeMismatchError
from kiln_graph.ops import Alloc, ARange, Eye, Join, MakeVector, Reshape, Shape, ShapeI, Split
from kiln_torch._convert import DTYPES
from kiln_torch._funcify import TorchImpl, shape_only, torch_funcify


def host_inputs(fn: TorchImpl, *positions: int) -> TorchImpl:
    """Declare that ``fn`` takes inputs ``positions`` as host (NumPy) values when known.

    Returns ``fn`` (with the positions recorded as ``fn.host_inputs``).
    """
    fn.host_inputs = tuple(positions)  # type: ignore[attr-defined]
    return fn


def ints(values: Any) -> tuple[int, ...]:
    """Return integer ``values`` (NumPy, or a tensor read back) as a tuple of Python ints."""
    if isinstance(values, torch.Tensor):
        return tuple(int(v) for v in values.reshape(-1).tolist())
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


@torch_funcify.register(Shape)
def torch_funcify_Shape(op: Shape, node: Apply) -> TorchImpl:  # noqa: N802
    """Return the shape as an int64 NumPy vector (a host value)."""
    return shape_only(lambda x: np.array(tuple(x.shape), dtype="int64"))


@torch_funcify.register(ShapeI)
def torch_funcify_ShapeI(op: ShapeI, node: Apply) -> TorchImpl:  # noqa: N802
    """One length as an int64 NumPy scalar (a host value)."""
    return shape_only(lambda x: np.array(x.shape[op.i], dtype="int64"))


@torch_funcify.register(MakeVector)
def torch_funcify_MakeVector(op: MakeVector, node: Apply) -> TorchImpl:  # noqa: N802
    """Stack the scalars into a vector of the op's dtype."""
    tdtype = DTYPES[op.dtype]
    return lambda *xs: torch.stack([x.to(tdtype) for x in xs])


@torch_funcify.register(Reshape)
def torch_funcify_Reshape(op: Reshape, node: Apply) -> TorchImpl:  # noqa: N802
    """``reshape`` to the shape vector."""
    return host_inputs(lambda x, shape: x.reshape(ints(shape)), 1)


@torch_funcify.register(Alloc)
def torch_funcify_Alloc(op: Alloc, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.broadcast_to`` the lengths."""

    def alloc(x: Any, *shape: Any) -> Any:
        return torch.broadcast_to(x, tuple(int(ints(s)[0]) for s in shape))

    return host_inputs(alloc, *range(1, len(node.inputs)))


@torch_funcify.register(Join)
def torch_funcify_Join(op: Join, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.cat`` along the axis."""
    return lambda *xs: torch.cat(xs, dim=op.axis)


@torch_funcify.register(Split)
def torch_funcify_Split(op: Split, node: Apply) -> TorchImpl:  # noqa: N802
    """``torch.split`` into the sizes."""

    def split(x: Any, *sizes: Any) -> Any:
        lengths = [ints(s)[0] for s in sizes]
        if any(n < 0 for n in lengths) or sum(lengths) != x.shape[op.axis]:
            raise ShapeMismatchError(
                f"split: cannot cut a length-{x.shape[op.axis]} dimension {op.axis} "
                f"into pieces of lengths {lengths}"
            )
        return tuple(torch.split(x, lengths, dim=op.axis))

    return host_inputs(split, *range(1, len(node.inputs)))


@torch_funcify.register(ARange)
def torch_funcify_ARange(op: ARange, node: Apply) -> TorchImpl:  # noqa: N802
    """NumPy's ``arange`` of the bounds, on the bounds' device."""

    def arange(start: Any, stop: Any, step: Any) -> Any:
        values = (start, stop, step)
        bounds = [v.item() if isinstance(v, torch.Tensor) else np.asarray(v).item() for v in values]
        device = next((v.device for v in values if isinstance(v, torch.Tensor)), None)
        return torch.from_numpy(np.arange(*bounds, dtype=op.dtype)).to(device)

    return host_inputs(arange, 0, 1, 2)


@torch_funcify.register(Eye)
def torch_funcify_Eye(op: Eye, node: Apply) -> TorchImpl:  # noqa: N802
    """Ones where ``column - row == k``."""
    tdtype = DTYPES[op.dtype]

    def eye(n: Any, m: Any, k: Any) -> Any:
        rows = torch.arange(ints(n)[0], device=k.device)[:, None]
        cols = torch.arange(ints(m)[0], device=k.device)[None, :]
        return (cols - rows == k).to(tdtype)

    return host_inputs(eye, 0, 1)
