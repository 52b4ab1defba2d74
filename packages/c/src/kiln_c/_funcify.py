"""``c_funcify``: the one dispatcher from an Op (or a scalar op) to C source.

The C linker writes a whole rewritten graph as ONE C99 file. ``c_funcify(op, node,
io)`` returns the body of the node's own small function ``static int node_K(kiln_ctx
*ctx, kiln_array *v)``: C statements that read the node's inputs and set its outputs,
named by ``io`` (:class:`NodeIO`), returning 0 or a ``kiln_fail(...)`` status.
Scalar ops register too: ``c_funcify(scalar_op)`` returns a :class:`ScalarTemplate`,
which :mod:`kiln_c.elemwise` writes into fused loops with kiln's dtype rules.
Implementations live in modules that mirror kiln_graph's op families and register with
``@c_funcify.register(OpClass)``.

An Op (or a scalar op inside an Elemwise) with no C implementation raises
:class:`NoCImplementation`; the linker then runs that node's ``perform`` through a
callback into Python (one warning naming the ops).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import singledispatch
from typing import Any

import numpy as np

from kiln_graph import Apply, Op, ScalarOp, TensorType, Variable

#: The dtype codes of the runtime (``kiln_runtime.h``), in order.
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64",
)  # fmt: skip
#: The code of a Python object (a random generator...) held in a side table.
OBJECT = len(DTYPES)
DTYPE_CODE = {name: i for i, name in enumerate(DTYPES)}
#: The C type of each dtype's elements.
CTYPE = {
    "bool": "uint8_t",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
}


#: The Op and scalar op classes of kiln_graph and kiln_random with no C code yet: their
#: nodes run ``perform`` through the callback (a test keeps this list exact). Those
#: random draws stay NumPy's, so they draw the VM's stream; the native ABI needs none.
THROUGH_PERFORM = frozenset(
    {
        # random variables with core dimensions whose VM draw is a Python loop over
        # ``core_fn`` (kiln_c.random)
        "DirichletRV", "MultivariateNormalRV",
    }
)  # fmt: skip


#: Op classes whose C code takes Python objects (a random generator) among its values;
#: other nodes with such values run through ``perform``.
OBJECT_OPS: list[type] = []


class NoCImplementation(NotImplementedError):
    """An Op (or scalar op) has no C implementation: its node runs through ``perform``."""


@dataclasses.dataclass(frozen=True)
class NodeIO:
    """The C names of one node's values: ``ins[i]`` and ``outs[j]`` are ``kiln_array *``.

    ``index`` is the node's position in the graph (the ``K`` of ``node_K``).
    """

    index: int
    ins: tuple[str, ...]
    outs: tuple[str, ...]


class CCode(str):
    """A node's C statements (the ``str``) and the top-level functions they call.

    For Ops with inner graphs (Blockwise, OpFromGraph): each inner node's code is a
    ``static`` function of its own in ``helpers``, written before the node's function.
    """

    helpers: tuple[str, ...] = ()
    #: Nodes (not of the graph) whose ``perform`` the statements run through the context's
    #: callback, called as ``ctx->fallback(KILN_CALLBACK(j), ins, outs)`` for the j-th.
    callbacks: tuple[Apply, ...] = ()

    @staticmethod
    def with_helpers(body: str, helpers: Sequence[str]) -> CCode:
        """Return ``body`` carrying ``helpers``."""
        code = CCode(body)
        code.helpers = tuple(helpers)
        return code


@dataclasses.dataclass(frozen=True)
class ScalarTemplate:
    """How a scalar op class is written in C (what ``c_funcify(scalar_op)`` returns).

    ``template(args, dtype)`` writes the expression for arguments already converted to
    ``dtype`` (the output's; a float output) or of their own dtypes (others); None when
    it cannot for that dtype. Arguments at ``keep_args`` are not converted (a
    condition). ``common_args``: convert the arguments to their common dtype (not the
    output's, a comparison's bool).
    """

    template: Callable[[Sequence[str], str], str | None]
    keep_args: tuple[int, ...] = ()
    common_args: bool = False


@singledispatch
def c_funcify(op: Op | ScalarOp, node: Apply | None = None, io: NodeIO | None = None) -> Any:
    """Return the C code computing ``node`` (an application of ``op``).

    For an Op: the statements of the node's function (see the module docstring); for
    a scalar op (``node`` is None): its :class:`ScalarTemplate`. The default raises
    :class:`NoCImplementation`, naming the Op.

    Examples
    --------
    >>> @c_funcify.register(MyOp)  # doctest: +SKIP
    ... def c_funcify_MyOp(op, node, io):
    ...     return f"kiln_view({io.outs[0]}, {io.ins[0]});"
    """
    raise NoCImplementation(f"the C backend has no implementation of {type(op).__name__} ({op})")


def has_c_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (an Op or ScalarOp class) has a C implementation."""
    return c_funcify.dispatch(op_class) is not c_funcify.dispatch(object)


def dtype_of(v: Variable) -> str:
    """Return the dtype of the tensor ``v``; raise :class:`NoCImplementation` for others."""
    if not isinstance(v.type, TensorType) or v.type.dtype not in DTYPE_CODE:
        raise NoCImplementation(f"the C backend has no arrays of type {v.type}")
    return str(v.type.dtype)


def ndim_of(v: Variable) -> int:
    """Return the number of dimensions of the tensor ``v``."""
    return int(v.type.ndim)  # type: ignore[attr-defined]


def literal(value: Any, dtype: str) -> str:
    """Return a C literal of ``value`` as ``dtype`` (NaN and infinities included)."""
    if dtype == "bool":
        return "1" if bool(value) else "0"
    if dtype.startswith(("int", "uint")):
        i = int(value)
        if dtype == "int64" and i == -(2**63):
            return "INT64_MIN"
        return f"(({CTYPE[dtype]}){i}{'ULL' if dtype.startswith('uint') else 'LL'})"
    v = float(np.asarray(value, dtype=dtype))
    if v != v:
        text = "NAN"
    elif v in (float("inf"), float("-inf")):
        text = "INFINITY" if v > 0 else "(-INFINITY)"
    else:
        text = repr(v) if dtype == "float64" else repr(float(np.float32(v))) + "f"
        text = f"({text})"
    return f"(({CTYPE[dtype]}){text})"
