"""Indexing on MLX: basic and advanced ``x[index]``, and their set / increment forms.

The index is rebuilt from ``idx_list`` as NumPy would; index arrays known when tracing
become int64 MLX arrays (boolean masks known when tracing become their positions;
a traced mask has no MLX form: the error says so). Increments are
``x.at[index].add(y)``, so repeated indices accumulate as ``np.add.at`` does; a set
writes into a copy of ``x``. Slice bounds decide the result's shape and are static;
integer and array indices may be traced. MLX does not raise on an index out of
bounds (the VM raises ``KilnIndexError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
import numpy as np

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
from kiln_mlx._dtypes import as_mx
from kiln_mlx._funcify import MlxImpl, mlx_funcify, no_implementation, static_inputs


def _slice_positions(idx_list: Sequence[Any], offset: int) -> list[int]:
    """Return the input positions of the slices' parts (the index inputs start at ``offset``)."""
    positions: list[int] = []
    k = offset
    for e in idx_list:
        if isinstance(e, tuple):
            for p in e:
                if p is not None:
                    positions.append(k)
                    k += 1
        elif e in (_index.INT, _index.ARRAY):
            k += 1
    return positions


def _array_index(value: Any) -> Any:
    if isinstance(value, mx.array):
        if value.dtype == mx.bool_:
            raise no_implementation("indexing with a computed boolean mask")
        return value
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        return tuple(mx.array(p, dtype=mx.int64) for p in np.nonzero(arr))
    return mx.array(arr.astype(np.int64), dtype=mx.int64)


def mlx_index(idx_list: Sequence[Any], values: Sequence[Any]) -> tuple[Any, ...]:
    """Return the index tuple of ``idx_list`` with the index inputs' ``values``."""
    out: list[Any] = []
    for e, g in zip(idx_list, _index.group(idx_list, values), strict=True):
        if isinstance(e, tuple):
            out.append(slice(*(None if v is None else int(v) for v in g)))
        elif e == _index.INT:
            out.append(int(g) if not isinstance(g, mx.array) else g.astype(mx.int64))
        elif e == _index.ARRAY:
            found = _array_index(g)
            out.extend(found if isinstance(found, tuple) else (found,))
        else:
            out.append(g)  # None: a new axis
    return tuple(out)


def _getter(idx_list: Sequence[Any]) -> MlxImpl:
    def getitem(x: Any, *values: Any) -> Any:
        return as_mx(x)[mlx_index(idx_list, values)]

    return static_inputs(getitem, *_slice_positions(idx_list, 1))


def _update(x: Any, index: Any, y: Any, set_instead_of_inc: bool) -> Any:
    x = as_mx(x)
    y = as_mx(y).astype(x.dtype)
    if set_instead_of_inc:
        out = mx.array(x)
        out[index] = y
        return out
    return x.at[index].add(y)


def _setter(idx_list: Sequence[Any], set_instead_of_inc: bool) -> MlxImpl:
    def update(x: Any, y: Any, *values: Any) -> Any:
        return _update(x, mlx_index(idx_list, values), y, set_instead_of_inc)

    return static_inputs(update, *_slice_positions(idx_list, 2))


@mlx_funcify.register(Subtensor)
def mlx_funcify_Subtensor(op: Subtensor, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[ints, slices, new axes]``."""
    return _getter(op.idx_list)


@mlx_funcify.register(AdvancedSubtensor)
def mlx_funcify_AdvancedSubtensor(op: AdvancedSubtensor, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[arrays, slices, new axes]`` with NumPy's rules (a gather)."""
    return _getter(op.idx_list)


@mlx_funcify.register(AdvancedSubtensor1)
def mlx_funcify_AdvancedSubtensor1(op: AdvancedSubtensor1, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[idx]`` for an integer vector on the first axis."""
    return lambda x, idx: mx.take(as_mx(x), as_mx(idx, "int64"), axis=0)


@mlx_funcify.register(IncSubtensor)
def mlx_funcify_IncSubtensor(op: IncSubtensor, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[index] = y`` on a copy, or ``x.at[index].add(y)``; basic index."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@mlx_funcify.register(AdvancedIncSubtensor)
def mlx_funcify_AdvancedIncSubtensor(op: AdvancedIncSubtensor, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[index] = y`` on a copy, or ``x.at[index].add(y)`` (repeated indices accumulate)."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@mlx_funcify.register(AdvancedIncSubtensor1)
def mlx_funcify_AdvancedIncSubtensor1(op: AdvancedIncSubtensor1, node: Apply) -> MlxImpl:  # noqa: N802
    """``x[idx] = y`` on a copy, or ``x.at[idx].add(y)`` on the first axis (a scatter)."""

    def update(x: Any, y: Any, idx: Any) -> Any:
        return _update(x, as_mx(idx, "int64"), y, op.set_instead_of_inc)

    return update
