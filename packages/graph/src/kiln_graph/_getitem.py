"""Indexing with NumPy's rules: ``x[index]``, ``set_subtensor`` and ``inc_subtensor``.

A Python index is parsed here into :class:`~kiln_graph._subtensor.Subtensor` (ints,
slices, new axes) or the integer-array ops of :mod:`kiln_graph._advanced_subtensor`.
Trailing full slices are left out, so ``x[0, :]`` and ``x[0]`` are the same node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _advanced_subtensor, _elemwise, _index, _shape
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import KilnIndexError, KilnTypeError, KilnValueError
from kiln_graph._node import Constant, TensorVariable, Variable
from kiln_graph._subtensor import IncSubtensor, Subtensor, fold
from kiln_graph._types import INTEGER_DTYPES

INT, ARRAY, NEWAXIS, FULL_SLICE = _index.INT, _index.ARRAY, _index.NEWAXIS, _index.FULL_SLICE

# --- building an index from Python values -----------------------------------------------

Parsed = tuple[str, Any]  # ("i", var) | ("a", var) | ("s", parts) | ("x", None) | ("mask", arr)


def _slice_part(v: Any, pos: int) -> Variable | None:
    if v is None:
        return None
    if isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_):
        return shape_constant(int(v))
    if isinstance(v, TensorVariable) and v.ndim == 0 and v.dtype in INTEGER_DTYPES:
        return v
    raise KilnTypeError(
        f"index {pos}: slice start, stop and step must be ints, None or integer scalar "
        f"variables, got {v!r}"
    )


def _stack_scalars(items: Sequence[Any], pos: int) -> TensorVariable:
    scalars = []
    for v in items:
        t = as_tensor(v) if isinstance(v, Variable | int | np.integer) else None
        if t is None or isinstance(v, bool) or t.ndim != 0 or t.dtype not in INTEGER_DTYPES:
            raise KilnTypeError(
                f"index {pos}: a list mixing values and variables must hold integer scalars "
                f"only, got {v!r}"
            )
        scalars.append(t)
    return _shape.MakeVector("int64")(*scalars)


def _parse_item(item: Any, pos: int) -> Parsed:
    if item is None:
        return ("x", None)
    if isinstance(item, slice):
        parts = tuple(_slice_part(v, pos) for v in (item.start, item.stop, item.step))
        if parts[2] is not None and _index.static_int(parts[2]) == 0:
            raise KilnValueError(f"index {pos}: slice step cannot be zero")
        return ("s", parts)
    if isinstance(item, bool | np.bool_):
        raise KilnTypeError(
            f"index {pos}: the boolean {item!r} is not a valid index; use an int, a slice, "
            "None, Ellipsis or an integer array"
        )
    if isinstance(item, int | np.integer):
        return ("i", shape_constant(int(item)))
    if isinstance(item, Variable):
        if not isinstance(item, TensorVariable):
            raise KilnTypeError(f"index {pos}: expected a tensor, got {item!r} of {item.type}")
        var = item
    elif isinstance(item, list | tuple) and any(isinstance(v, Variable) for v in item):
        var = _stack_scalars(item, pos)
    else:
        try:
            arr = np.asarray(item)
        except (TypeError, ValueError) as exc:
            raise KilnTypeError(f"index {pos}: cannot use {item!r} as an index") from exc
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype("int64")  # [] is an empty integer index, as in NumPy
        if arr.dtype.kind not in "biu":
            raise KilnTypeError(
                f"index {pos}: expected an int, a slice, None, Ellipsis or integers, got "
                f"{item!r} (dtype {arr.dtype}); cast floats to int first"
            )
        var = constant(arr)
    if var.dtype == "bool":
        if not isinstance(var, Constant) or var.ndim == 0:
            raise KilnTypeError(
                f"index {pos}: boolean mask indexing needs a constant mask of 1+ dimensions, "
                f"got {var!r}; for a symbolic mask use kt.where / kt.switch"
            )
        return ("mask", var.data)
    if var.dtype not in INTEGER_DTYPES:
        raise KilnTypeError(
            f"index {pos}: expected integers, got {var!r} of dtype {var.dtype}; cast it "
            "first (kt.cast(i, 'int64'))"
        )
    return ("i" if var.ndim == 0 else "a", var)


def _expand_masks(x: TensorVariable, entries: list[Parsed]) -> list[Parsed]:
    out: list[Parsed] = []
    d = 0
    for kind, payload in entries:
        if kind != "mask":
            out.append((kind, payload))
            d += kind != "x"
            continue
        dims = x.type.shape[d : d + payload.ndim]
        if dims != payload.shape:
            raise KilnIndexError(
                f"a boolean mask of shape {payload.shape} needs dimensions {d}.."
                f"{d + payload.ndim - 1} of {x!r} to have static lengths {payload.shape}, "
                f"got {dims}; give x a static shape or index with np.nonzero(mask)"
            )
        out.extend(("a", constant(ix)) for ix in np.nonzero(payload))
        d += payload.ndim
    return out


def parse_index(x: TensorVariable, index: Any) -> list[Parsed]:
    """Turn a Python index into entries, ellipsis expanded and trailing ``:`` dropped."""
    items = index if isinstance(index, tuple) else (index,)
    entries: list[Parsed] = []
    ellipsis_at: int | None = None
    for pos, item in enumerate(items):
        if item is Ellipsis:
            if ellipsis_at is not None:
                raise KilnIndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = len(entries)
        else:
            entries.append(_parse_item(item, pos))
    used = sum(p.ndim if k == "mask" else k != "x" for k, p in entries)
    if used > x.ndim:
        raise KilnIndexError(
            f"too many indices for {x!r}: it has {x.ndim} dimension(s), the index uses {used}"
        )
    if ellipsis_at is not None:
        entries[ellipsis_at:ellipsis_at] = [("s", FULL_SLICE)] * (x.ndim - used)
    entries = _expand_masks(x, entries)
    while entries and entries[-1] == ("s", FULL_SLICE):
        entries.pop()
    return entries


def getitem(x: Any, index: Any) -> TensorVariable:
    """Return ``x[index]`` with NumPy's indexing rules (what ``x[...]`` calls).

    ``index`` may hold ints, slices (with int or integer-scalar-variable parts),
    ``None``, ``Ellipsis``, integer scalar variables, integer arrays, lists or array
    variables, and constant boolean masks.

    Examples
    --------
    >>> x = kt.matrix("x")  # doctest: +SKIP
    >>> x[0, 1:3]  # doctest: +SKIP
    >>> x[idx]  # idx an int vector: a gather along the first axis  # doctest: +SKIP
    """
    x = as_tensor(x)
    entries = parse_index(x, index)
    kinds = [k for k, _ in entries]
    if "a" in kinds:
        return _advanced_subtensor.advanced_getitem(x, entries)
    if "x" in kinds and all(e in (("s", FULL_SLICE), ("x", None)) for e in entries):
        source = iter(range(x.ndim))
        pattern = ["x" if k == "x" else next(source) for k in kinds]
        return _elemwise.dimshuffle(x, pattern + list(source))
    idx_list, inputs = _index.encode(entries)
    return fold(Subtensor(idx_list)(x, *inputs))


def set_subtensor(x_indexed: Any, y: Any) -> TensorVariable:
    """Return a copy of ``x`` with ``x[index]`` set to ``y``, given ``x_indexed = x[index]``.

    ``y`` broadcasts to the region along missing leading dimensions and dimensions of
    static length 1. With repeated integer-array indices, the last write wins.

    Examples
    --------
    >>> z = set_subtensor(x[1:3], 0.0)  # x with entries 1 and 2 zeroed  # doctest: +SKIP
    """
    return _update(x_indexed, y, True, "set_subtensor")


def inc_subtensor(x_indexed: Any, y: Any) -> TensorVariable:
    """Return a copy of ``x`` with ``y`` added to ``x[index]``, given ``x_indexed = x[index]``.

    Repeated integer-array indices accumulate (``np.add.at``).

    Examples
    --------
    >>> z = inc_subtensor(x[idx], 1.0)  # counts of idx added to x  # doctest: +SKIP
    """
    return _update(x_indexed, y, False, "inc_subtensor")


def _update(x_indexed: Any, y: Any, set_: bool, fname: str) -> TensorVariable:
    node = x_indexed.owner if isinstance(x_indexed, TensorVariable) else None
    op = None if node is None else node.op
    if node is not None:
        x, *indices = node.inputs
        adv = _advanced_subtensor
        if isinstance(op, Subtensor):
            return IncSubtensor(op.idx_list, set_)(x, y, *indices)
        if isinstance(op, adv.AdvancedSubtensor1):
            return adv.AdvancedIncSubtensor1(set_)(x, y, *indices)
        if isinstance(op, adv.AdvancedSubtensor):
            return adv.AdvancedIncSubtensor(op.idx_list, set_)(x, y, *indices)
        if isinstance(op, _elemwise.DimShuffle) and _only_new_axes(op):  # x[None], x[:, None]
            idx = [NEWAXIS if o == "x" else FULL_SLICE for o in op.new_order]
            while idx and idx[-1] == FULL_SLICE:
                idx.pop()
            return IncSubtensor(idx, set_)(x, y)
    made_by = f" (computed by {op})" if op is not None else ""
    raise KilnTypeError(
        f"{fname}: the first argument must be the result of indexing a tensor, such as "
        f"x[1:3] or x[idx]; got {x_indexed!r}{made_by}"
    )


def _only_new_axes(op: _elemwise.DimShuffle) -> bool:
    return not op.drop and op.transposition == tuple(range(op.input_ndim))
