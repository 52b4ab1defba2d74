"""Elementwise Ops: scalar ops lifted over arrays with broadcasting, and DimShuffle.

Broadcasting follows NumPy, with one rule from the static types: a dimension is
broadcast only where its static length is 1. An input whose static length is unknown
(``None``) must match the other inputs' length at run time; this keeps gradients and
compiled loops free of run-time broadcasting decisions. Give the dimension a static
length of 1 (``shape=(1, None)``, ``x[None]``, ``expand_dims``) to broadcast it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from kiln_graph._basic import as_tensor, constant, shape_constant
from kiln_graph._errors import KilnValueError, ShapeMismatchError
from kiln_graph._node import Apply, Op, Props, TensorVariable, Variable
from kiln_graph._types import DISCRETE_DTYPES, TensorType, normalize_dtype


@functools.cache
def upcast(*dtypes: str) -> str:
    """NumPy's result dtype of ``dtypes``."""
    return np.result_type(*dtypes).name


@functools.cache
def upgrade_to_float(*dtypes: str) -> str:
    """Return the result dtype, made ``float64`` when all inputs are integer or bool."""
    out = np.result_type(*dtypes)
    return out.name if out.kind in "fc" else "float64"


def bool_out(*dtypes: str) -> str:
    """Return ``bool``, whatever the input dtypes."""
    return "bool"


class ScalarOp(Props):
    """A function of scalars, applied elementwise by :class:`Elemwise`.

    Subclasses set ``nin`` (``-1`` for any number of inputs), ``nfunc`` (the vectorized
    NumPy implementation), ``dtype_rule`` (output dtype from input dtypes), and
    ``grad`` (the gradient as tensor expressions of the Elemwise's inputs and output).
    """

    nin: ClassVar[int] = 1
    nfunc: ClassVar[Callable[..., Any]]
    dtype_rule: ClassVar[Callable[..., str]] = staticmethod(upcast)
    #: The function of this op as NumPy / SciPy name, for printing and backends.
    identity: ClassVar[str] = ""
    #: Whether ``impl(*inputs, out=buffer)`` writes the result into ``buffer`` (true of
    #: ufunc implementations); only such ops get in-place Elemwise variants.
    supports_out: bool = False

    def output_dtype(self, *dtypes: str) -> str:
        """Return the output dtype for inputs of ``dtypes``."""
        return self.dtype_rule(*dtypes)

    def impl(self, *inputs: np.ndarray, out: np.ndarray | None = None) -> Any:
        """Evaluate on arrays; with ``out`` (see :attr:`supports_out`), write into it."""
        if out is None:
            return type(self).nfunc(*inputs)
        return type(self).nfunc(*inputs, out=out)

    def grad(
        self, inputs: Sequence[TensorVariable], output: TensorVariable, gout: TensorVariable
    ) -> list[Variable | None]:
        """Gradient w.r.t. each input, given ``gout``, the gradient w.r.t. the output."""
        raise NotImplementedError(f"{self} has no gradient")

    def __str__(self) -> str:
        return type(self).__name__.lower() if not self.__props__ else super().__str__()


def static_broadcast(shapes: Sequence[tuple[int | None, ...]], op: Any) -> tuple[int | None, ...]:
    """Return the static broadcast shape of ``shapes`` (None: unknown); ``op`` names errors."""
    ndim = len(shapes[0])
    out: list[int | None] = []
    for d in range(ndim):
        dims = [s[d] for s in shapes]
        known = {n for n in dims if n is not None and n != 1}
        if len(known) > 1:
            raise ShapeMismatchError(
                f"{op}: incompatible shapes for broadcasting: "
                f"{', '.join(str(s) for s in shapes)} (dimension {d})"
            )
        if known:
            out.append(known.pop())
        elif all(n == 1 for n in dims):
            out.append(1)
        else:
            out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _inplace_elemwise(op: Elemwise, i: int) -> Elemwise:
    """Return ``op`` writing its output into input ``i`` (ops cached: they are values)."""
    return Elemwise(op.scalar_op, ((0, i),))


class Elemwise(Op):
    """Apply a :class:`ScalarOp` elementwise, with NumPy broadcasting.

    ``inplace_pattern`` holds ``(output, input)`` pairs: that output is written into
    that input's buffer (set only by the in-place phase; the input must have the
    output's dtype and broadcasting).
    """

    __props__ = ("scalar_op", "inplace_pattern")

    def __init__(
        self, scalar_op: ScalarOp, inplace_pattern: Sequence[tuple[int, int]] = ()
    ) -> None:
        self.scalar_op = scalar_op
        self.inplace_pattern = tuple((int(o), int(i)) for o, i in inplace_pattern)
        if any(o != 0 for o, _ in self.inplace_pattern) or len(self.inplace_pattern) > 1:
            raise KilnValueError(
                f"Elemwise: inplace_pattern {self.inplace_pattern} must be () or ((0, i),): "
                "an Elemwise has one output"
            )
        if self.inplace_pattern:
            self.destroy_map = {o: [i] for o, i in self.inplace_pattern}

    def __str__(self) -> str:
        if self.inplace_pattern:
            return f"{self.scalar_op}{{inplace {self.inplace_pattern[0][1]}}}"
        return str(self.scalar_op)

    def inplace_variants(self, node: Apply) -> list[tuple[int, Op]]:
        """Write the output into an input of its dtype and shape (one variant per input)."""
        if self.inplace_pattern or len(node.outputs) != 1 or not self.scalar_op.supports_out:
            return []
        out = node.outputs[0].type
        return [
            (i, _inplace_elemwise(self, i))
            for i, v in enumerate(node.inputs)
            if can_overwrite(v.type, out)
        ]

    def make_node(self, *inputs: Any) -> Apply:
        nin = self.scalar_op.nin
        if nin >= 0 and len(inputs) != nin:
            raise KilnValueError(f"{self}: expected {nin} input(s), got {len(inputs)}")
        if not inputs:
            raise KilnValueError(f"{self}: expected at least one input")
        tensors = [as_tensor(x) for x in inputs]
        ndim = max(t.ndim for t in tensors)
        padded = [
            t if t.ndim == ndim else dimshuffle(t, ("x",) * (ndim - t.ndim) + tuple(range(t.ndim)))
            for t in tensors
        ]
        shape = static_broadcast([t.type.shape for t in padded], self)
        dtype = self.scalar_op.output_dtype(*(t.dtype for t in padded))
        out_type = TensorType(dtype, shape)
        for _, i in self.inplace_pattern:
            if not 0 <= i < len(padded) or not can_overwrite(padded[i].type, out_type):
                raise KilnValueError(
                    f"{self}: input {i} cannot hold the output {out_type} in place"
                )
        return Apply.create(self, padded, [out_type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        _check_runtime_shapes(self, node.inputs, inputs)
        dtype = node.outputs[0].type.dtype  # type: ignore[attr-defined]
        if self.inplace_pattern:
            buf = inputs[self.inplace_pattern[0][1]]
            # A read-only buffer (a view of a constant) gets a new one.
            if isinstance(buf, np.ndarray) and buf.flags.writeable and buf.dtype == dtype:
                with np.errstate(all="ignore"):
                    if self.scalar_op.supports_out:
                        self.scalar_op.impl(*inputs, out=buf)
                    else:
                        np.copyto(buf, self.scalar_op.impl(*inputs), casting="unsafe")
                outputs[0] = buf
                return
        with np.errstate(all="ignore"):
            result = self.scalar_op.impl(*inputs)
        outputs[0] = np.asarray(result, dtype=dtype)

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        return [broadcast_shape(node.inputs, input_shapes)]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        grads = self.scalar_op.grad(inputs, outputs[0], output_grads[0])  # type: ignore[arg-type]
        result: list[Variable | None] = []
        for x, g in zip(inputs, grads, strict=True):
            if g is None or x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
                result.append(None)
            else:
                result.append(g)  # grad sums it to x's shape and dtype
        return result


def can_overwrite(source: Any, target: Any) -> bool:
    """Whether a value of type ``source`` can be overwritten by an output of type ``target``.

    Both must be tensors of the same dtype and broadcasting pattern, so that at run time
    the value has the output's exact shape and dtype.
    """
    return (
        isinstance(source, TensorType)
        and isinstance(target, TensorType)
        and source.dtype == target.dtype
        and source.broadcastable == target.broadcastable
    )


def broadcast_shape(
    inputs: Sequence[Variable], input_shapes: Sequence[tuple[Variable, ...] | None]
) -> tuple[Variable, ...]:
    """Return the symbolic broadcast shape of same-ndim ``inputs``.

    Each dimension is the length of the first input that does not broadcast along it
    (static length other than 1), or 1 when they all do.
    """
    out: list[Variable] = []
    for d in range(inputs[0].type.ndim):  # type: ignore[attr-defined]
        dim: Variable = shape_constant(1)
        for var, shp in zip(inputs, input_shapes, strict=True):
            if not var.type.broadcastable[d] and shp is not None:  # type: ignore[attr-defined]
                dim = shp[d]
                break
        out.append(dim)
    return tuple(out)


def _check_runtime_shapes(op: Op, variables: Sequence[Variable], values: Sequence[Any]) -> None:
    """Check, before computing, that every input not broadcast has the same lengths."""
    shapes = [np.shape(v) for v in values]
    for d in range(len(shapes[0])):
        first: int | None = None
        length = 0
        for i, (var, shape) in enumerate(zip(variables, shapes, strict=True)):
            if var.type.shape[d] == 1:  # type: ignore[attr-defined]
                continue
            if first is None:
                first, length = i, shape[d]
            elif shape[d] != length:
                raise ShapeMismatchError(
                    f"{op}: input {i} ({var!r}) has length {shape[d]} in dimension {d} "
                    f"but input {first} ({variables[first]!r}) has length {length}; kiln "
                    "broadcasts only dimensions whose static length is 1 (declare "
                    "shape=(..., 1, ...) or use expand_dims)"
                )


class DimShuffle(Op):
    """Reorder dimensions, insert broadcastable ones (``"x"``), drop length-1 ones.

    ``new_order`` lists, for each output dimension, the input dimension it takes or
    ``"x"`` for a new dimension of length 1. Input dimensions left out must have static
    length 1.
    """

    __props__ = ("input_ndim", "new_order")
    view_map = {0: [0]}

    def __init__(self, input_ndim: int, new_order: Sequence[int | str]) -> None:
        self.input_ndim = int(input_ndim)
        order = tuple(o if o == "x" else int(o) for o in new_order)
        used = [o for o in order if o != "x"]
        if len(set(used)) != len(used):
            raise KilnValueError(f"dimshuffle: repeated dimension in pattern {order}")
        for o in used:
            if not 0 <= int(o) < self.input_ndim:
                raise KilnValueError(
                    f"dimshuffle: dimension {o} out of range for {self.input_ndim} dims"
                )
        self.new_order = order
        self.drop = tuple(d for d in range(self.input_ndim) if d not in used)
        self.transposition = tuple(int(o) for o in used)
        self.augment = tuple(i for i, o in enumerate(order) if o == "x")

    def __str__(self) -> str:
        return f"DimShuffle{{{','.join(map(str, self.new_order))}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor(x)
        if x.ndim != self.input_ndim:
            raise KilnValueError(f"{self}: expected a {self.input_ndim}-d input, got {x.ndim}-d")
        for d in self.drop:
            if x.type.shape[d] != 1:
                raise KilnValueError(
                    f"{self}: cannot drop dimension {d} of {x!r} whose static length is "
                    f"{x.type.shape[d]} (only length-1 dimensions can be dropped)"
                )
        shape = tuple(1 if o == "x" else x.type.shape[o] for o in self.new_order)
        return Apply.create(self, [x], [TensorType(x.dtype, shape)])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        (x,) = inputs
        res = np.transpose(x, self.transposition + self.drop)
        outputs[0] = res.reshape(_runtime_shape(res, self))

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        (shp,) = input_shapes
        assert shp is not None
        return [tuple(shape_constant(1) if o == "x" else shp[int(o)] for o in self.new_order)]

    def grad(
        self, inputs: Sequence[Variable], output_grads: Sequence[Variable]
    ) -> list[Variable | None]:
        (x,) = inputs
        (g,) = output_grads
        if x.type.dtype in DISCRETE_DTYPES:  # type: ignore[attr-defined]
            return [None]
        # Drop the inserted dims, undo the transposition, re-insert the dropped ones.
        kept = [i for i, o in enumerate(self.new_order) if o != "x"]
        g2 = dimshuffle(g, kept) if len(kept) != len(self.new_order) else g
        inverse: list[int | str] = []
        for d in range(self.input_ndim):
            inverse.append("x" if d in self.drop else self.transposition.index(d))
        return [dimshuffle(g2, inverse)]


def _runtime_shape(res: np.ndarray, op: DimShuffle) -> tuple[int, ...]:
    kept = iter(res.shape[: len(op.transposition)])
    return tuple(1 if o == "x" else next(kept) for o in op.new_order)


def dimshuffle(x: Any, pattern: Sequence[int | str]) -> TensorVariable:
    """Return ``x`` with dimensions reordered, ``"x"`` inserted, length-1 ones dropped.

    Examples
    --------
    >>> dimshuffle(matrix, (1, "x", 0))  # doctest: +SKIP
    """
    x = as_tensor(x)
    pattern = tuple(pattern)
    if pattern == tuple(range(x.ndim)):
        return x
    return DimShuffle(x.ndim, pattern)(x)


class Cast(ScalarOp):
    """Convert to ``dtype``."""

    __props__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = normalize_dtype(dtype)

    def output_dtype(self, *dtypes: str) -> str:
        return self.dtype

    def impl(self, x: np.ndarray) -> Any:  # type: ignore[override]  # unary
        return np.asarray(x).astype(self.dtype)

    def grad(
        self, inputs: Sequence[TensorVariable], output: TensorVariable, gout: TensorVariable
    ) -> list[Variable | None]:
        (x,) = inputs
        if x.dtype in DISCRETE_DTYPES or self.dtype in DISCRETE_DTYPES:
            return [None]
        return [cast(gout, x.dtype)]


def cast(x: Any, dtype: Any) -> TensorVariable:
    """Return ``x`` converted to ``dtype`` (no-op when it already has it)."""
    x = as_tensor(x)
    dtype = normalize_dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.owner is None and hasattr(x, "data"):
        return constant(np.asarray(x.data).astype(dtype))  # type: ignore[attr-defined]
    return Elemwise(Cast(dtype))(x)
