"""FusedReduce: a reduction of an elementwise expression, in one op.

``FusedReduce(kind, axis, scalar_op)(*inputs)`` computes
``CAReduce(kind, axis)(Elemwise(scalar_op)(*inputs))``: the fusion phase builds it so
that ``sum(exp(x))`` traverses ``x`` once on a compiled backend (one loop that maps
and accumulates). The NumPy reference computes the elementwise part and then reduces
it, exactly as the two unfused nodes do, so the results are equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph._elemwise import Elemwise, ScalarOp, _check_runtime_shapes, broadcast_shape
from kiln_graph._errors import GradientError, KilnTypeError, KilnValueError
from kiln_graph._node import Apply, Op, Variable
from kiln_graph._reduce import CAReduce

#: The dtype kinds a fused reduction accepts for its elementwise part (no complex).
_REAL_KINDS = "biuf"


class FusedReduce(Op):
    """Reduce ``axis`` of ``scalar_op`` applied elementwise (with broadcasting) to the inputs.

    ``kind`` is one of :class:`CAReduce`'s (``sum``, ``prod``, ``max``, ``min``,
    ``all``, ``any``); dtypes follow the unfused pair: the elementwise result has
    ``scalar_op``'s dtype, the reduction :meth:`CAReduce.output_dtype` of it.

    Examples
    --------
    >>> FusedReduce("sum", (0,), Exp())(x)  # == kt.sum(kt.exp(x), axis=0)  # doctest: +SKIP
    """

    __props__ = ("kind", "axis", "scalar_op")

    def __init__(self, kind: str, axis: Sequence[int], scalar_op: ScalarOp) -> None:
        self.reduce = CAReduce(kind, tuple(axis))  # validates kind
        self.kind = kind
        self.axis = tuple(int(a) for a in axis)
        if not isinstance(scalar_op, ScalarOp):
            raise KilnTypeError(f"FusedReduce: scalar_op must be a ScalarOp, got {scalar_op!r}")
        if getattr(scalar_op, "nout", 1) != 1:
            raise KilnValueError(f"FusedReduce: {scalar_op} has several outputs")
        self.scalar_op = scalar_op
        self.elemwise = Elemwise(scalar_op)

    def __str__(self) -> str:
        return f"{self.kind.capitalize()}{{axis={self.axis}, of={self.scalar_op}}}"

    def make_node(self, *inputs: Any) -> Apply:
        """Type the unfused pair on ``inputs`` and return one node with its result type."""
        pre = self.elemwise.make_node(*inputs)
        pre_dtype = pre.outputs[0].type.dtype  # type: ignore[attr-defined]
        if np.dtype(pre_dtype).kind not in _REAL_KINDS:
            raise KilnTypeError(
                f"{self}: the elementwise result has dtype {pre_dtype}; only bool, integer "
                "and float results can be reduced in one op"
            )
        reduced = self.reduce.make_node(pre.outputs[0])
        return Apply.create(self, pre.inputs, [reduced.outputs[0].type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        """Compute the elementwise result as Elemwise does, then reduce it as CAReduce does."""
        _check_runtime_shapes(self, node.inputs, inputs)
        pre_dtype = self.scalar_op.output_dtype(*(v.type.dtype for v in node.inputs))  # type: ignore[attr-defined]
        with np.errstate(all="ignore"):
            pre = np.asarray(self.scalar_op.impl(*inputs), dtype=pre_dtype)
        # CAReduce.perform reads only the output dtype of the node, which is ours.
        self.reduce.perform(node, [pre], outputs)

    def infer_shape(
        self, node: Apply, input_shapes: Sequence[tuple[Variable, ...] | None]
    ) -> list[tuple[Variable, ...] | None]:
        """Return the broadcast shape of the inputs without the reduced axes."""
        full = broadcast_shape(node.inputs, input_shapes)
        return [tuple(dim for d, dim in enumerate(full) if d not in self.axis)]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        """Raise: FusedReduce is built by the fusion rewrite, after autodiff."""
        raise GradientError(
            f"{self} has no gradient: it is built by the fusion rewrite, which runs after "
            "autodiff; take the gradient of the unfused graph instead"
        )
