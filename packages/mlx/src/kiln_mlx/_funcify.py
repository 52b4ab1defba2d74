"""``mlx_funcify``: the one dispatcher from an Op (or a scalar op) to an MLX function.

The MLX linker traces a whole rewritten graph into ONE function that ``mx.compile``
compiles. ``mlx_funcify(op, node)`` returns a function of the node's input values
(MLX arrays, or NumPy arrays for values known when tracing) that returns its output
value, or a tuple of them for several outputs. Scalar ops register too:
``mlx_funcify(scalar_op)`` returns the function of already-cast MLX arguments, which
:mod:`kiln_mlx.elemwise` applies with kiln's dtype rules. Implementations live in
modules that mirror kiln_graph's op families and register with
``@mlx_funcify.register(OpClass)``.

An implementation declares, with :func:`static_inputs`, which of its inputs decide a
shape (a reshape's target, a slice's bounds, a draw's size): they must be known when
tracing (see :mod:`kiln_mlx._graph`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any

from kiln_graph import Apply, Op, ScalarOp

#: What ``mlx_funcify`` returns: a function of the node's input values.
MlxImpl = Callable[..., Any]


class NoMlxImplementation(NotImplementedError):
    """An Op (or scalar op) has no MLX implementation: the graph cannot be linked on MLX."""


def static_inputs(fn: MlxImpl, *positions: int) -> MlxImpl:
    """Declare that ``fn`` needs inputs ``positions`` as values known when tracing.

    Returns ``fn`` (with the positions recorded as ``fn.static_inputs``).
    """
    fn.static_inputs = tuple(positions)  # type: ignore[attr-defined]
    return fn


def shape_only(fn: MlxImpl) -> MlxImpl:
    """Declare that ``fn`` reads only its inputs' shapes: its result is always known."""
    fn.shape_only = True  # type: ignore[attr-defined]
    return fn


def no_implementation(what: str, why: str = "") -> NoMlxImplementation:
    """Return the error saying that ``what`` cannot be computed on MLX (and ``why``)."""
    reason = f" ({why})" if why else ""
    return NoMlxImplementation(
        f"the MLX backend has no implementation of {what}{reason}; compile this graph "
        "with another backend (e.g. kiln.Mode(linker='numba'))"
    )


@singledispatch
def mlx_funcify(op: Op | ScalarOp, node: Apply | None = None) -> MlxImpl:
    """Return the MLX function computing ``node`` (an application of ``op``).

    For a scalar op (``node`` is None) it is the function of MLX arrays already cast
    to the dtype the op computes in. The default raises :class:`NoMlxImplementation`,
    naming the Op.

    Examples
    --------
    >>> @mlx_funcify.register(MyOp)  # doctest: +SKIP
    ... def mlx_funcify_MyOp(op, node):
    ...     return lambda x: mx.abs(x)
    """
    raise no_implementation(f"{type(op).__name__} ({op})")


def has_mlx_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (an Op or ScalarOp class) has an MLX implementation."""
    return mlx_funcify.dispatch(op_class) is not mlx_funcify.dispatch(object)
