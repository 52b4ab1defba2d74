"""Indexing on JAX: basic and advanced ``x[index]``, and their set / increment forms.

The index is rebuilt from ``idx_list`` as NumPy would (``jax.numpy`` follows NumPy's
indexing rules, advanced indices included); updates are ``x.at[index].set(y)`` /
``.add(y)``, so repeated indices accumulate as ``np.add.at`` does. Slice bounds decide
the result's shape and are static (known when tracing); integer and array indices may
be traced. XLA does not raise on an index out of bounds: it clamps gathers and drops
out-of-bounds updates (the VM raises ``KilnIndexError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp

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
from kiln_jax._funcify import JaxImpl, jax_funcify, static_inputs


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


def jax_index(idx_list: Sequence[Any], values: Sequence[Any]) -> tuple[Any, ...]:
    """Return the index tuple of ``idx_list`` with the index inputs' ``values``."""
    out: list[Any] = []
    for e, g in zip(idx_list, _index.group(idx_list, values), strict=True):
        if isinstance(e, tuple):
            out.append(slice(*(None if v is None else int(v) for v in g)))
        else:
            out.append(g)  # an integer or an index array (traced or not); None: new axis
    return tuple(out)


def _getter(idx_list: Sequence[Any], n_inputs: int) -> JaxImpl:
    def getitem(x: Any, *values: Any) -> Any:
        return jnp.asarray(x)[jax_index(idx_list, values)]

    return static_inputs(getitem, *_slice_positions(idx_list, 1))


def _setter(idx_list: Sequence[Any], set_instead_of_inc: bool) -> JaxImpl:
    def update(x: Any, y: Any, *values: Any) -> Any:
        at = jnp.asarray(x).at[jax_index(idx_list, values)]
        return at.set(y) if set_instead_of_inc else at.add(y)

    return static_inputs(update, *_slice_positions(idx_list, 2))


@jax_funcify.register(Subtensor)
def jax_funcify_Subtensor(op: Subtensor, node: Apply) -> JaxImpl:  # noqa: N802
    """``x[ints, slices, new axes]``."""
    return _getter(op.idx_list, len(node.inputs))


@jax_funcify.register(AdvancedSubtensor)
def jax_funcify_AdvancedSubtensor(op: AdvancedSubtensor, node: Apply) -> JaxImpl:  # noqa: N802
    """``x[arrays, slices, new axes]`` with NumPy's rules (a gather)."""
    return _getter(op.idx_list, len(node.inputs))


@jax_funcify.register(AdvancedSubtensor1)
def jax_funcify_AdvancedSubtensor1(op: AdvancedSubtensor1, node: Apply) -> JaxImpl:  # noqa: N802
    """``x[idx]`` for an integer vector on the first axis."""
    return lambda x, idx: jnp.asarray(x)[idx]


@jax_funcify.register(IncSubtensor)
def jax_funcify_IncSubtensor(op: IncSubtensor, node: Apply) -> JaxImpl:  # noqa: N802
    """``x.at[index].set(y)`` or ``.add(y)``, basic index."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@jax_funcify.register(AdvancedIncSubtensor)
def jax_funcify_AdvancedIncSubtensor(op: AdvancedIncSubtensor, node: Apply) -> JaxImpl:  # noqa: N802
    """``x.at[index].set(y)`` or ``.add(y)`` (repeated indices accumulate)."""
    return _setter(op.idx_list, op.set_instead_of_inc)


@jax_funcify.register(AdvancedIncSubtensor1)
def jax_funcify_AdvancedIncSubtensor1(op: AdvancedIncSubtensor1, node: Apply) -> JaxImpl:  # noqa: N802
    """``x.at[idx].set(y)`` or ``.add(y)`` on the first axis (a scatter)."""
    if op.set_instead_of_inc:
        return lambda x, y, idx: jnp.asarray(x).at[idx].set(y)
    return lambda x, y, idx: jnp.asarray(x).at[idx].add(y)
