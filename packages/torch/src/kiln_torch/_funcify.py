"""``torch_funcify``: the one dispatcher from an Op (or a scalar op) to a torch function.

The torch linker generates ONE module-level Python function for a whole rewritten graph
(:mod:`kiln_torch._program`): one line per node, calling the node's function.
``torch_funcify(op, node)`` returns that function: it takes the node's input values
(torch tensors; a random generator as a ``torch.Generator``) and returns its output
value, or a tuple of them for several outputs. Scalar ops register too:
``torch_funcify(scalar_op)`` returns the torch function of already-cast arguments, which
:mod:`kiln_torch.elemwise` applies with kiln's dtype rules. Implementations live in
modules that mirror kiln_graph's op families and register with
``@torch_funcify.register(OpClass)``.

Shapes. Values that only shapes decide (``Shape``, ``ShapeI`` and the arithmetic on
them) are computed on the host in NumPy by the Op's reference ``perform``, as the VM
computes them (:mod:`kiln_torch._program`); an implementation receives such inputs as
NumPy values (a reshape's target, a slice's bounds, a draw's size).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any

from kiln_graph import Apply, Op, ScalarOp

#: What ``torch_funcify`` returns: a function of the node's input values.
TorchImpl = Callable[..., Any]


class NoTorchImplementation(NotImplementedError):
    """An Op (or scalar op) has no torch implementation: the graph cannot run on torch."""


def shape_only(fn: TorchImpl) -> TorchImpl:
    """Declare that ``fn`` reads only its inputs' shapes: its result is a host value.

    Returns ``fn`` (marked with ``fn.shape_only = True``).
    """
    fn.shape_only = True  # type: ignore[attr-defined]
    return fn


@singledispatch
def torch_funcify(op: Op | ScalarOp, node: Apply | None = None) -> TorchImpl:
    """Return the torch function computing ``node`` (an application of ``op``).

    For a scalar op (``node`` is None) it is the torch function of arguments already
    cast to the dtype the op computes in. The default raises
    :class:`NoTorchImplementation`, naming the Op.

    Examples
    --------
    >>> @torch_funcify.register(MyOp)  # doctest: +SKIP
    ... def torch_funcify_MyOp(op, node):
    ...     return lambda x: torch.exp(x)
    """
    raise NoTorchImplementation(
        f"the torch backend has no implementation of {type(op).__name__} ({op}); "
        "compile this graph with another backend (e.g. kiln.Mode(linker='numba'))"
    )


def has_torch_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (an Op or ScalarOp class) has a torch implementation."""
    return torch_funcify.dispatch(op_class) is not torch_funcify.dispatch(object)
