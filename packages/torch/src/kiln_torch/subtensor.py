"""Indexing on torch: basic and advanced ``x[index]``, and their set / increment forms.

The index is rebuilt from ``idx_list`` as NumPy would; torch's indexing follows NumPy's
rules, advanced indices included. Torch has no negative slice steps: such a slice
reads the flipped axis with a positive step. Updates work on flat positions: the same
index applied to ``arange(x.numel())`` gives the positions it selects, then
``index_add`` (repeated indices accumulate, as ``np.add.at``) or an assignment writes
``y`` there, into a copy of ``x``. Slice bounds are host inputs (Python ints).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from kiln_graph import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Apply,
    IncSubtensor,
    Subtensor,
)
from kiln_graph import index as _index
from kiln_torch._funcify import TorchImpl, torch_funcify
from kiln_torch.shape import host_inputs


def _host_positions(idx_list: Sequence[Any], offset: int) -> list[int]:
    """Return the input positions of the slices' parts and integer indices (host values).

    The index inputs start at ``offset``.
    """
    positions: list[int] = []
    k = offset
    for e in idx_list:
        if isinstance(e, tuple):
            for p in e:
                if p is not None:
                    positions.append(k)
                    k += 1
        elif e == _index.INT:
            positions.append(k)
            k += 1
        elif e == _index.ARRAY:
            k += 1
    return positions


def _int(v: Any) -> int:
    return int(v.item()) if isinstance(v, torch.Tensor) else int(v)


def _tensor(v: Any, device: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.to(device)
    return torch.as_tensor(np.asarray(v), device=device)


def torch_index(x: Any, idx_list: Sequence[Any], values: Sequence[Any]) -> tuple[Any, tuple]:
    """Return ``(x', index)``: ``x'[index]`` is NumPy's ``x[idx_list with values]``.

    ``x'`` is ``x`` with the axes of negative-step slices flipped.
    """
    out: list[Any] = []
    dim = 0
    flips: list[int] = []
    for e, g in zip(idx_list, _index.group(idx_list, values), strict=True):
        if isinstance(e, tuple):
            sl = slice(*(None if v is None else _int(v) for v in g))
            start, stop, step = sl.indices(x.shape[dim])
            if step < 0:
                count = len(range(start, stop, step))
                first = x.shape[dim] - 1 - start
                flips.append(dim)
                sl = slice(first, first + count * -step, -step)
            out.append(sl)
            dim += 1
        elif e == _index.INT:
            out.append(_int(g))
            dim += 1
        elif e == _index.ARRAY:
            t = _tensor(g, x.device)
            out.append(t)
            dim += t.ndim if t.dtype == torch.bool else 1
        else:
            out.append(None)
    return (x.flip(flips) if flips else x), tuple(out)


def _getter(idx_list: Sequence[Any]) -> TorchImpl:
    def getitem(x: Any, *values: Any) -> Any:
        y, index = torch_index(x, idx_list, values)
        return y[index]

    return host_inputs(getitem, *_host_positions(idx_list, 1))


def _scatter(x: Any, y: Any, positions: Any, set_instead_of_inc: bool) -> Any:
    flat = x.reshape(-1).clone()
    where = positions.reshape(-1)
    values = torch.broadcast_to(y.to(x.dtype), positions.shape).reshape(-1)
    if set_instead_of_inc:
        flat[where] = values
    else:
        flat.index_add_(0, where, values)
    return flat.reshape(x.shape)


def _setter(idx_list: Sequence[Any], set_instead_of_inc: bool) -> TorchImpl:
    def update(x: Any, y: Any, *values: Any) -> Any:
        flat = torch.arange(x.numel(), device=x.device).reshape(x.shape)
        z, index = torch_index(flat, idx_list, values)
        return _scatter(x, y, z[index], set_instead_of_inc)

    return host_inputs(update, *_host_positions(idx_list, 2))


@torch_funcify.register(Subtensor)
def torch_funcify_Subtensor(op: Subtensor, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[ints, slices, new axes]``."""
    return _getter(op.idx_list)


@torch_funcify.register(AdvancedSubtensor)
def torch_funcify_AdvancedSubtensor(op: AdvancedSubtensor, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[arrays, slices, new axes]`` with NumPy's rules (a gather)."""
    return _getter(op.idx_list)


@torch_funcify.register(AdvancedSubtensor1)
def torch_funcify_AdvancedSubtensor1(op: AdvancedSubtensor1, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[idx]`` for an integer vector on the first axis."""
    return lambda x, idx: x[idx]


@torch_funcify.register(IncSubtensor)
def torch_funcify_IncSubtensor(op: IncSubtensor, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[index] = y`` or ``x[index] += y`` on a copy, basic index."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@torch_funcify.register(AdvancedIncSubtensor)
def torch_funcify_AdvancedIncSubtensor(op: AdvancedIncSubtensor, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[index] = y`` or ``+= y`` on a copy (repeated indices accumulate)."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@torch_funcify.register(AdvancedIncSubtensor1)
def torch_funcify_AdvancedIncSubtensor1(op: AdvancedIncSubtensor1, node: Apply) -> TorchImpl:  # noqa: N802
    """``x[idx] = y`` or ``+= y`` on the first axis, on a copy (a scatter)."""

    def update(x: Any, y: Any, idx: Any) -> Any:
        idx = torch.where(idx < 0, idx + x.shape[0], idx)
        y = torch.broadcast_to(y.to(x.dtype), (idx.shape[0], *x.shape[1:]))
        if op.set_instead_of_inc:
            out = x.clone()
            out[idx] = y
            return out
        return x.index_add(0, idx, y)

    return update
