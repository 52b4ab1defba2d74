"""OpFromGraph: an Op whose computation is a symbolic inner graph.

The inner graph is given by its inputs and outputs. Two OpFromGraphs built from the
same computation are the same Op: equality and hashing use the inner graph's
structural digest with the inputs numbered by position, so the names and identities
of the inner inputs do not matter and outer nodes intern as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import _alloc, _elemwise, _grad, _shape_infer
from kiln_graph._basic import as_tensor
from kiln_graph._digest import encode
from kiln_graph._errors import KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._interp import Program
from kiln_graph._node import Apply, Constant, Op, TensorVariable, Variable, _hash_bytes
from kiln_graph._traversal import ancestors, graph_replace, toposort
from kiln_graph._types import FLOAT_DTYPES, TensorType


def graph_digest(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> str:
    """Return the structural digest of ``outputs`` with ``inputs`` numbered by position.

    Equal for the same computation in any process, whatever the inputs' names or
    identities. Constants enter by value; every other root must be among ``inputs``.
    """
    memo: dict[Variable, bytes] = {
        v: _hash_bytes(b"ofg-input", str(i).encode(), encode(v.type.key()))
        for i, v in enumerate(inputs)
    }

    def key(v: Variable) -> bytes:
        found = memo.get(v)
        return found if found is not None else v.digest_bytes

    for node in toposort(outputs, stop_at=inputs):
        d = _hash_bytes(b"apply", node.op.digest_bytes, *[key(i) for i in node.inputs])
        for j, o in enumerate(node.outputs):
            memo[o] = _hash_bytes(b"out", d, str(j).encode())
    return _hash_bytes(b"ofg", *[memo[v] for v in inputs], b"->", *[key(o) for o in outputs]).hex()


class OpFromGraph(Op):
    """An Op computing ``outputs`` from ``inputs``, a symbolic inner graph.

    Applying it to outer variables (of the same dtypes and dimensions as ``inputs``)
    gives one node whose outputs have the inner outputs' types. ``perform`` runs the
    inner graph with the reference interpreter; the gradient is the inner graph's
    gradient, inlined into the outer graph; shapes come from the inner graph's shape
    inference.

    Parameters
    ----------
    inputs
        The inner inputs: distinct, non-constant tensor variables.
    outputs
        The inner outputs; they may depend only on ``inputs`` and constants.

    Examples
    --------
    >>> x, y = kt.vector("x"), kt.vector("y")  # doctest: +SKIP
    >>> op = OpFromGraph([x, y], [kt.exp(x) * y])  # doctest: +SKIP
    >>> z = op(a, b)  # exp(a) * b, as one node  # doctest: +SKIP
    """

    __props__ = ("graph_digest",)

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        if isinstance(inputs, Variable) or isinstance(outputs, Variable):
            raise KilnTypeError(
                "OpFromGraph: inputs and outputs must be lists of variables, got a single "
                "variable; wrap it in a list"
            )
        ins, outs = tuple(inputs), tuple(outputs)
        if not outs:
            raise KilnValueError("OpFromGraph: outputs must not be empty")
        for role, group in (("inputs", ins), ("outputs", outs)):
            for i, v in enumerate(group):
                if not isinstance(v, TensorVariable):
                    raise KilnTypeError(
                        f"OpFromGraph: {role}[{i}] must be a tensor variable, got {v!r}"
                    )
        for i, v in enumerate(ins):
            if isinstance(v, Constant):
                raise KilnTypeError(
                    f"OpFromGraph: inputs[{i}] is the constant {v!r}; constants belong "
                    "inside the graph, not among its inputs"
                )
        if len(set(ins)) != len(ins):
            raise KilnValueError("OpFromGraph: an inner input is listed twice")
        in_set = set(ins)
        for v in ancestors(outs, stop_at=ins):
            if v.owner is None and v not in in_set and not isinstance(v, Constant):
                raise KilnValueError(
                    f"OpFromGraph: the outputs depend on {v!r} ({v.type}), which is not "
                    "among the inputs; add it to the inputs"
                )
        self.inner_inputs: tuple[TensorVariable, ...] = ins  # type: ignore[assignment]
        self.inner_outputs: tuple[TensorVariable, ...] = outs  # type: ignore[assignment]
        self.graph_digest = graph_digest(ins, outs)

    def __str__(self) -> str:
        return f"OpFromGraph{{{self.graph_digest[:8]}}}"

    __repr__ = __str__

    def make_node(self, *inputs: Any) -> Apply:
        if len(inputs) != len(self.inner_inputs):
            raise KilnValueError(
                f"{self}: expected {len(self.inner_inputs)} input(s), got {len(inputs)}"
            )
        outer = [as_tensor(x) for x in inputs]
        for i, (o, inner) in enumerate(zip(outer, self.inner_inputs, strict=True)):
            it = inner.type
            if o.dtype != it.dtype or o.ndim != it.ndim:
                raise KilnTypeError(
                    f"{self}: input {i} must have dtype {it.dtype} and {it.ndim} dimension(s) "
                    f"like the inner input, got {o.type}; cast or reshape it first"
                )
            for d, (a, b) in enumerate(zip(o.type.shape, it.shape, strict=True)):
                if a is not None and b is not None and a != b:
                    raise ShapeMismatchError(
                        f"{self}: input {i} has static shape {o.type.shape}, the inner input "
                        f"has {it.shape} (dimension {d} differs)"
                    )
        return Apply.create(self, outer, [v.type for v in self.inner_outputs])

    def _program(self) -> Program:
        try:
            return self.__dict__["_cached_program"]
        except KeyError:
            prog = Program(self.inner_inputs, self.inner_outputs)
            self.__dict__["_cached_program"] = prog
            return prog

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        for i, (value, inner) in enumerate(zip(inputs, self.inner_inputs, strict=True)):
            shape = np.shape(value)
            for d, n in enumerate(inner.type.shape):
                if n is not None and shape[d] != n:
                    raise ShapeMismatchError(
                        f"{self}: input {i} has shape {shape}, the inner graph was built for "
                        f"static shape {inner.type.shape}"
                    )
        results = self._program()(list(inputs))
        arrays = [v for v in inputs if isinstance(v, np.ndarray)]
        for k, r in enumerate(results):
            # Never hand out (a view of) an input buffer or a read-only constant as a
            # fresh output: the in-place phase may overwrite this output.
            if (
                not isinstance(r, np.ndarray)
                or not r.flags.writeable
                or any(np.may_share_memory(r, v) for v in arrays)
            ):
                r = np.array(r, copy=True)
            outputs[k] = r

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        inner_shapes = _shape_infer.infer_shape(list(self.inner_outputs), stop_at=self.inner_inputs)
        replace: dict[Variable, Variable] = {}
        for inner, outer, shp in zip(self.inner_inputs, node.inputs, input_shapes, strict=True):
            replace[inner] = outer
            if shp is None:
                continue
            for d, n in enumerate(inner.type.shape):
                if n is None:
                    replace[_alloc.shape_i(inner, d)] = shp[d]
        flat = [s for shp in inner_shapes for s in shp]
        new_flat = graph_replace(flat, replace) if flat else []
        it = iter(new_flat)  # type: ignore[arg-type]
        return [tuple(next(it) for _ in shp) for shp in inner_shapes]

    def L_op(  # noqa: N802
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        known: dict[Variable, Variable] = {}
        replace: dict[Variable, Variable] = dict(zip(self.inner_inputs, inputs, strict=True))
        for inner_out, g in zip(self.inner_outputs, output_grads, strict=True):
            if inner_out.dtype not in FLOAT_DTYPES or isinstance(inner_out, Constant):
                continue
            dummy = TensorVariable(TensorType(inner_out.dtype, inner_out.type.shape))
            g = as_tensor(g)
            if g.dtype != inner_out.dtype:
                g = _elemwise.cast(g, inner_out.dtype)
            replace[dummy] = g
            prev = known.get(inner_out)
            known[inner_out] = dummy if prev is None else prev + dummy
        wrt = [v for v in self.inner_inputs if v.dtype in FLOAT_DTYPES]
        connected = set(ancestors(list(known), stop_at=self.inner_inputs)) if known else set()
        wrt = [v for v in wrt if v in connected]
        if not wrt:
            return [None] * len(inputs)
        inner_grads = _grad.grad(None, wrt, known_grads=known, disconnected_inputs="ignore")  # type: ignore[arg-type]
        outer_grads = graph_replace(inner_grads, replace)
        by_input = dict(zip(wrt, outer_grads, strict=True))  # type: ignore[arg-type]
        return [by_input.get(v) for v in self.inner_inputs]
