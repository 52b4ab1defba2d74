"""``jax_funcify``: the one dispatcher from an Op (or a scalar op) to a JAX function.

The JAX linker traces a whole rewritten graph into ONE function that ``jax.jit``
compiles. ``jax_funcify(op, node)`` returns a function of the node's input values
(JAX arrays, or NumPy arrays for values known when tracing) that returns its output
value, or a tuple of them for several outputs. Scalar ops register too:
``jax_funcify(scalar_op)`` returns the ``jax.numpy`` function of already-cast
arguments, which :mod:`kiln_jax.elemwise` applies with kiln's dtype rules.
Implementations live in modules that mirror kiln_graph's op families and register with
``@jax_funcify.register(OpClass)``.

An implementation declares, with :func:`static_inputs`, which of its inputs decide a
shape (a reshape's target, a slice's bounds, a draw's size): JAX needs them when it
traces. The linker makes such values known at trace time (see :mod:`kiln_jax._graph`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any

from kiln_graph import Apply, Op, ScalarOp

#: What ``jax_funcify`` returns: a function of the node's input values.
JaxImpl = Callable[..., Any]


class NoJaxImplementation(NotImplementedError):
    """An Op (or scalar op) has no JAX implementation: the graph cannot be linked on JAX."""


def static_inputs(fn: JaxImpl, *positions: int) -> JaxImpl:
    """Declare that ``fn`` needs inputs ``positions`` as values known when tracing.

    Returns ``fn`` (with the positions recorded as ``fn.static_inputs``).
    """
    fn.static_inputs = tuple(positions)  # type: ignore[attr-defined]
    return fn


def shape_only(fn: JaxImpl) -> JaxImpl:
    """Declare that ``fn`` reads only its inputs' shapes: its result is always known.

    JAX arrays have static shapes while tracing, so such a node (``Shape``, ``ShapeI``)
    gives a NumPy value even of a traced input.
    """
    fn.shape_only = True  # type: ignore[attr-defined]
    return fn


@singledispatch
def jax_funcify(op: Op | ScalarOp, node: Apply | None = None) -> JaxImpl:
    """Return the JAX function computing ``node`` (an application of ``op``).

    For a scalar op (``node`` is None) it is the ``jax.numpy`` function of arguments
    already cast to the dtype the op computes in. The default raises
    :class:`NoJaxImplementation`, naming the Op.

    Examples
    --------
    >>> @jax_funcify.register(MyOp)  # doctest: +SKIP
    ... def jax_funcify_MyOp(op, node):
    ...     return lambda x: jnp.exp(x)
    """
    raise NoJaxImplementation(
        f"the JAX backend has no implementation of {type(op).__name__} ({op}); "
        "compile this graph with another backend (e.g. kiln.Mode(linker='numba'))"
    )


def has_jax_implementation(op_class: type) -> bool:
    """Whether ``op_class`` (an Op or ScalarOp class) has a JAX implementation."""
    return jax_funcify.dispatch(op_class) is not jax_funcify.dispatch(object)
