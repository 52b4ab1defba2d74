"""The structure of an index, and the rules the indexing Ops share.

An index is split into its structure, ``idx_list`` (an Op prop), and its values, which
are the Op's inputs after ``x`` (and ``y``). A constant index is a constant input, so
``x[0]`` and ``x[i]`` apply the same Op. The entries of ``idx_list`` are

- ``"i"``: an integer scalar (one int scalar input); the dimension is dropped;
- ``(start, stop, step)``: a slice, each part ``"i"`` (an int scalar input) or ``None``;
- ``"x"``: a new dimension of length 1 (NumPy's ``None``); no input;
- ``"a"``: an integer array of any ndim (advanced indexing; one int input).

The result shape follows NumPy's rules, computed three ways from one layout: static
(when building), at run time, and symbolic (``infer_shape``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from kiln_graph import _elemwise, _math
from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import (
    KilnError,
    KilnIndexError,
    KilnTypeError,
    KilnValueError,
    ShapeMismatchError,
)
from kiln_graph._node import Constant, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, INTEGER_DTYPES

INT = "i"
ARRAY = "a"
NEWAXIS = "x"
FULL_SLICE: tuple[None, None, None] = (None, None, None)

# --- the structure of an index ---------------------------------------------------------


def check_idx_list(idx_list: Sequence[Any], allowed: tuple[str, ...], owner: str) -> tuple:
    """Return ``idx_list`` as a tuple after checking each entry's form."""
    out: list[Any] = []
    for e in idx_list:
        if isinstance(e, tuple | list):
            if len(e) != 3 or any(p not in (INT, None) for p in e):
                raise KilnValueError(f"{owner}: a slice entry must be 3 of 'i' or None, got {e!r}")
            out.append(tuple(e))
        elif e in allowed:
            out.append(e)
        else:
            raise KilnValueError(
                f"{owner}: invalid idx_list entry {e!r}; expected a slice tuple or one of "
                f"{list(allowed)}"
            )
    return tuple(out)


def idx_str(idx_list: Sequence[Any]) -> str:
    """Show ``idx_list`` as an index: ``i, i:, ::i, None, a``."""

    def part(p: Any) -> str:
        return "" if p is None else "i"

    items = []
    for e in idx_list:
        if isinstance(e, tuple):
            s = f"{part(e[0])}:{part(e[1])}"
            items.append(s + (f":{part(e[2])}" if e[2] is not None else ""))
        else:
            items.append("None" if e == NEWAXIS else e)
    return ", ".join(items)


def n_index_inputs(idx_list: Sequence[Any]) -> int:
    """Count the index inputs that ``idx_list`` takes."""
    return sum(
        sum(p == INT for p in e) if isinstance(e, tuple) else int(e in (INT, ARRAY))
        for e in idx_list
    )


def group(idx_list: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    """Split index inputs (or their values) by entry.

    Each entry gets its value (``"i"``, ``"a"``), a ``(start, stop, step)`` tuple
    (a slice; ``None`` where a part is absent) or ``None`` (``"x"``).
    """
    it = iter(values)
    out: list[Any] = []
    for e in idx_list:
        if isinstance(e, tuple):
            out.append(tuple(None if p is None else next(it) for p in e))
        elif e == NEWAXIS:
            out.append(None)
        else:
            out.append(next(it))
    return out


def numpy_index(idx_list: Sequence[Any], values: Sequence[Any]) -> tuple[Any, ...]:
    """Build the NumPy index tuple from ``idx_list`` and the index inputs' values."""
    out: list[Any] = []
    for e, g in zip(idx_list, group(idx_list, values), strict=True):
        if isinstance(e, tuple):
            out.append(slice(*(None if v is None else int(v) for v in g)))
        elif e == INT:
            out.append(int(g))
        else:
            out.append(g)  # an index array, or None for a new axis
    return tuple(out)


def writeable(x: Any) -> bool:
    """Whether ``x`` is an array an in-place update may write into."""
    return isinstance(x, np.ndarray) and bool(x.flags.writeable)


def encode(entries: Sequence[tuple[str, Any]]) -> tuple[tuple[Any, ...], list[Variable]]:
    """Split parsed entries into ``idx_list`` and the index inputs."""
    idx_list: list[Any] = []
    inputs: list[Variable] = []
    for kind, payload in entries:
        if kind == "s":
            idx_list.append(tuple(None if p is None else INT for p in payload))
            inputs.extend(p for p in payload if p is not None)
        elif kind == "x":
            idx_list.append(NEWAXIS)
        else:
            idx_list.append(kind)
            inputs.append(payload)
    return tuple(idx_list), inputs


def layout(idx_list: Sequence[Any], ndim: int) -> list[tuple[Any, ...]]:
    """Describe each output dimension with NumPy's rules.

    Each is ``("new",)``, ``("dim", d)`` (dimension ``d`` of ``x``), ``("slice", d, k)``
    (dimension ``d`` sliced by entry ``k``) or ``("adv",)``, the place of the broadcast
    index arrays' dimensions: where the first array is when the arrays are adjacent in
    the index, else first.
    """
    out: list[tuple[Any, ...]] = []
    arrays: list[int] = []
    first = 0
    d = 0
    for k, e in enumerate(idx_list):
        if e == NEWAXIS:
            out.append(("new",))
            continue
        if isinstance(e, tuple):
            out.append(("slice", d, k))
        elif e == ARRAY:
            if not arrays:
                first = len(out)
            arrays.append(k)
        d += 1
    out.extend(("dim", j) for j in range(d, ndim))
    if arrays:
        adjacent = arrays[-1] - arrays[0] + 1 == len(arrays)
        out.insert(first if adjacent else 0, ("adv",))
    return out


def _result_shape(
    idx_list: Sequence[Any],
    x_shape: Sequence[Any],
    slice_len: Callable[[int, Any], Any],
    adv_shape: Sequence[Any],
    one: Any,
) -> tuple[Any, ...]:
    out: list[Any] = []
    for desc in layout(idx_list, len(x_shape)):
        if desc[0] == "new":
            out.append(one)
        elif desc[0] == "dim":
            out.append(x_shape[desc[1]])
        elif desc[0] == "slice":
            out.append(slice_len(desc[2], x_shape[desc[1]]))
        else:
            out.extend(adv_shape)
    return tuple(out)


_UNKNOWN = object()


def static_int(v: Variable) -> Any:
    """Return the value of a constant int scalar, else a marker of 'unknown'."""
    return int(v.data) if isinstance(v, Constant) else _UNKNOWN


def static_shape(
    idx_list: Sequence[Any],
    x: TensorVariable,
    inputs: Sequence[Variable],
    adv_shape: Sequence[int | None] = (),
) -> tuple[int | None, ...]:
    """Return the static shape of ``x[index]`` (``None`` where not known yet)."""
    groups = group(idx_list, inputs)

    def slice_len(k: int, n: int | None) -> int | None:
        start, stop, step = (None if p is None else static_int(p) for p in groups[k])
        if n is not None and _UNKNOWN not in (start, stop, step):
            return len(range(n)[slice(start, stop, step)])
        if start is None and stop is None and step in (None, 1, -1):
            return n
        return None

    return _result_shape(idx_list, x.type.shape, slice_len, adv_shape, 1)


def runtime_shape(
    idx_list: Sequence[Any],
    x_shape: tuple[int, ...],
    values: Sequence[Any],
    adv_shape: Sequence[int] = (),
) -> tuple[int, ...]:
    """Return the shape of ``x[index]`` computed from the index values."""
    groups = group(idx_list, values)

    def slice_len(k: int, n: int) -> int:
        return len(range(n)[slice(*(None if v is None else int(v) for v in groups[k]))])

    return _result_shape(idx_list, x_shape, slice_len, adv_shape, 1)


def symbolic_shape(
    idx_list: Sequence[Any],
    x_shape: Sequence[Variable],
    inputs: Sequence[Variable],
    adv_shape: Sequence[Variable] = (),
) -> tuple[Variable, ...]:
    """Return the shape of ``x[index]`` as int64 scalar variables (``infer_shape``)."""
    groups = group(idx_list, inputs)

    def slice_len(k: int, n: Variable) -> Variable:
        parts = [None if p is None else _int_or_var(p) for p in groups[k]]
        length = slice_length(parts[0], parts[1], parts[2], _int_or_var(n))
        return shape_constant(length) if isinstance(length, int) else length

    return _result_shape(idx_list, x_shape, slice_len, adv_shape, shape_constant(1))


# --- slice lengths on ints or int64 variables ------------------------------------------

IntOrVar = Any  # a Python int or an int64 scalar variable


def _int_or_var(v: Variable) -> IntOrVar:
    return int(v.data) if isinstance(v, Constant) else _elemwise.cast(v, "int64")


def _ints(*values: IntOrVar) -> bool:
    return all(isinstance(v, int) for v in values)


# Python ints fold; anything else builds int64 graph nodes.
def _add(a: IntOrVar, b: IntOrVar) -> IntOrVar:
    return a + b if _ints(a, b) else _math.add(a, b)


def _sub(a: IntOrVar, b: IntOrVar) -> IntOrVar:
    return a - b if _ints(a, b) else _math.sub(a, b)


def _floordiv(a: IntOrVar, b: IntOrVar) -> IntOrVar:
    return a // b if _ints(a, b) else _math.floor_divide(a, b)


def _max(a: IntOrVar, b: IntOrVar) -> IntOrVar:
    return max(a, b) if _ints(a, b) else _math.maximum(a, b)


def _min(a: IntOrVar, b: IntOrVar) -> IntOrVar:
    return min(a, b) if _ints(a, b) else _math.minimum(a, b)


def _neg(v: IntOrVar) -> IntOrVar:
    return -v if isinstance(v, int) else _math.neg(v)


def _normalize(v: IntOrVar, n: IntOrVar) -> IntOrVar:
    # A negative index counts from the end.
    if isinstance(v, int):
        return _add(v, n) if v < 0 else v
    return _math.switch(_math.lt(v, 0), _math.add(v, n), v)


def _clamp(v: IntOrVar, lo: IntOrVar, hi: IntOrVar) -> IntOrVar:
    return _min(_max(v, lo), hi)


def slice_length(
    start: IntOrVar | None, stop: IntOrVar | None, step: IntOrVar | None, n: IntOrVar
) -> IntOrVar:
    """Return the length of ``range(n)[start:stop:step]`` (ints or int64 scalar variables).

    Follows CPython's slice rules; Python ints are folded, so constant parts cost no
    nodes.
    """
    if (
        start is None
        and stop is None
        and (step is None or (isinstance(step, int) and step in (1, -1)))
    ):
        return n
    if step is None:
        step = 1
    if isinstance(step, int):
        return _signed_slice_length(start, stop, step, n, step > 0)
    positive = _signed_slice_length(start, stop, step, n, True)
    negative = _signed_slice_length(start, stop, step, n, False)
    return _math.switch(_math.gt(step, 0), positive, negative)


def _signed_slice_length(
    start: IntOrVar | None, stop: IntOrVar | None, step: IntOrVar, n: IntOrVar, positive: bool
) -> IntOrVar:
    if positive:
        a = 0 if start is None else _clamp(_normalize(start, n), 0, n)
        b = n if stop is None else _clamp(_normalize(stop, n), 0, n)
        span, stride = _sub(b, a), step
    else:
        last = _sub(n, 1)
        a = last if start is None else _clamp(_normalize(start, n), -1, last)
        b = -1 if stop is None else _clamp(_normalize(stop, n), -1, last)
        span, stride = _sub(a, b), _neg(step)
    if isinstance(stride, int) and stride == 1:
        return _max(span, 0)
    return _max(_add(_floordiv(_sub(span, 1), stride), 1), 0)


# --- checks shared by the indexing Ops --------------------------------------------------


def check_bounds(op: Any, x: TensorVariable, dim: int, index: Variable) -> None:
    """Raise if a constant ``index`` is out of bounds for a static length of ``x``."""
    n = x.type.shape[dim]
    if n is None or not isinstance(index, Constant) or index.data.size == 0:
        return
    lo, hi = int(index.data.min()), int(index.data.max())
    bad = lo if lo < -n else hi if hi >= n else None
    if bad is not None:
        raise KilnIndexError(
            f"{op}: index {bad} is out of bounds for dimension {dim} of {x!r}, which has length {n}"
        )


def check_index_inputs(
    op: Any, x: TensorVariable, idx_list: Sequence[Any], indices: Sequence[Any]
) -> list[TensorVariable]:
    """Check the index inputs against ``idx_list`` and ``x``; return them as tensors."""
    expected = n_index_inputs(idx_list)
    if len(indices) != expected:
        raise KilnValueError(
            f"{op}: expected {expected} index input(s) after x, got {len(indices)}"
        )
    used = sum(e != NEWAXIS for e in idx_list)
    if used > x.ndim:
        raise KilnIndexError(
            f"too many indices for {x!r}: it has {x.ndim} dimension(s), the index uses {used}"
        )
    inputs = [as_tensor(v) for v in indices]
    d = 0
    for k, (e, g) in enumerate(zip(idx_list, group(idx_list, inputs), strict=True)):
        if e == NEWAXIS:
            continue
        for p in g if isinstance(e, tuple) else (g,):
            if p is not None and (p.dtype not in INTEGER_DTYPES or (e != ARRAY and p.ndim)):
                kind = "an integer array" if e == ARRAY else "an integer scalar"
                raise KilnTypeError(f"{op}: index entry {k} must be {kind}, got {p.type}")
        if isinstance(e, tuple) and g[2] is not None and static_int(g[2]) == 0:
            raise KilnValueError(f"{op}: slice step cannot be zero (index entry {k})")
        if e in (INT, ARRAY):
            check_bounds(op, x, d, g)
        d += 1
    return inputs


@contextmanager
def index_errors(op: Any) -> Iterator[None]:
    """Re-raise NumPy's indexing errors as kiln errors that name ``op``."""
    try:
        yield
    except KilnError:
        raise
    except IndexError as exc:
        raise KilnIndexError(f"{op}: {exc}") from exc
    except ValueError as exc:
        raise KilnValueError(f"{op}: {exc}") from exc


def as_update_value(op: Any, y: Any, dtype: str) -> TensorVariable:
    """Return ``y`` as a tensor of ``dtype``; only casts that keep its values are done."""
    if isinstance(y, Variable) and not isinstance(y, Constant):
        yv = as_tensor(y)
        if yv.dtype == dtype:
            return yv
        if np.can_cast(yv.dtype, dtype, "safe"):
            return _elemwise.cast(yv, dtype)
        raise KilnTypeError(
            f"{op}: y has dtype {yv.dtype}, which x of dtype {dtype} cannot hold without "
            f"loss; cast it first (kt.cast(y, {dtype!r}))"
        )
    arr = np.asarray(y.data if isinstance(y, Constant) else y)
    if arr.dtype.kind not in "biufc":
        raise KilnTypeError(f"{op}: y must be numeric, got {y!r}")
    target = np.dtype(dtype)
    with np.errstate(all="ignore"):
        cast = arr.astype(target)
    if not (
        np.can_cast(arr.dtype, target, "safe")
        or (arr.dtype.kind == "f" and target.kind in "fc")
        or np.array_equal(cast, arr)
    ):
        raise KilnTypeError(
            f"{op}: y = {y!r} cannot be stored in x of dtype {dtype} without changing it"
        )
    return constant(cast)


def check_static_update(op: Any, y: TensorVariable, target: tuple[int | None, ...]) -> None:
    """Check when building that ``y`` broadcasts to the indexed region's shape."""
    if y.ndim > len(target):
        raise ShapeMismatchError(
            f"{op}: y has {y.ndim} dimensions but the indexed region x[...] has "
            f"{len(target)} (static shape {target})"
        )
    offset = len(target) - y.ndim
    for n, t in zip(y.type.shape, target[offset:], strict=True):
        if n is not None and n != 1 and t is not None and n != t:
            raise ShapeMismatchError(
                f"{op}: y of static shape {y.type.shape} cannot be broadcast to the indexed "
                f"region's static shape {target}"
            )


def check_update(op: Any, y_var: Variable, y: np.ndarray, target: tuple[int, ...]) -> None:
    """Check at run time that ``y`` fits the region (broadcasting static 1s only)."""
    offset = len(target) - y.ndim
    static = y_var.type.shape  # type: ignore[attr-defined]
    for d, (n, t) in enumerate(zip(y.shape, target[offset:], strict=True)):
        if n != t and static[d] != 1:
            raise ShapeMismatchError(
                f"{op}: y has shape {y.shape} but the indexed region x[...] has shape "
                f"{target} (dimension {d} of y differs); kiln broadcasts y only along "
                "dimensions whose static length is 1"
            )


def update_grads(
    x: Variable,
    y: Variable,
    g: Variable,
    indices: Sequence[Variable],
    get: Callable[..., Variable],
    set_zero: Callable[..., Variable] | None,
) -> list[Variable | None]:
    """Return the gradients w.r.t. ``x`` and ``y`` of ``x`` with ``x[index]`` set / incremented.

    ``get(g, *indices)`` reads the region; ``set_zero(g, 0, *indices)`` (for set) zeroes
    it, since the old values there no longer reach the output.
    """
    none: list[Variable | None] = [None] * len(indices)
    if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
        return [None, None, *none]
    g = _elemwise.cast(g, x.type.dtype)  # type: ignore[attr-defined]
    zero = constant(np.zeros((), dtype=x.type.dtype))  # type: ignore[attr-defined]
    gx = g if set_zero is None else set_zero(g, zero, *indices)
    gy = get(g, *indices)  # grad sums it to y's shape
    return [gx, gy, *none]
