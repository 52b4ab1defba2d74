"""Neural-network style normalizations: softmax and log_softmax, built from existing ops.

Both subtract the maximum over ``axis`` before exponentiating (0 where that maximum is
infinite, as :func:`~kiln_graph._reduce.logsumexp` does), so they neither overflow nor
need an Op of their own: their gradients come from the ops they are made of, and the
stabilize phase recognizes ``log(softmax(x))`` by the graph :func:`softmax` builds and
rewrites it into the graph :func:`log_softmax` builds.
"""

from __future__ import annotations

from typing import Any

from kiln_graph import _elemwise, _math, _reduce
from kiln_graph._basic import as_tensor
from kiln_graph._errors import KilnTypeError
from kiln_graph._node import TensorVariable
from kiln_graph._types import FLOAT_DTYPES


def _shifted(x: Any, axis: Any, fn: str) -> tuple[TensorVariable, tuple[int, ...]]:
    """Return ``x - max(x, axis)`` (the max taken as 0 where infinite) and the axes."""
    x = as_tensor(x)
    if x.dtype.startswith("complex"):
        raise KilnTypeError(f"{fn}: complex input (dtype {x.dtype}) is not supported")
    if x.dtype not in FLOAT_DTYPES:
        x = _elemwise.cast(x, "float64")
    axes = _reduce.normalize_axes(axis, x.ndim)
    m = _reduce.max(x, axes, keepdims=True)
    m = _math.switch(_math.isinf(m), 0, m)
    return _math.sub(x, m), axes


def softmax(x: Any, axis: Any = -1) -> TensorVariable:
    """Compute ``exp(x) / sum(exp(x), axis)``, shifted by the maximum so it cannot overflow.

    ``axis`` is an int, a tuple of ints or ``None`` (all axes); the default is the last
    axis. Integer and boolean inputs give ``float64``. Equals ``scipy.special.softmax``.

    Examples
    --------
    >>> import kiln_graph.tensor as kt
    >>> from kiln_graph.testing import evaluate
    >>> x = kt.vector("x")
    >>> evaluate(kt.softmax(x), {x: [1000.0, 1000.0]})
    array([0.5, 0.5])
    """
    z, axes = _shifted(x, axis, "softmax")
    e = _math.exp(z)
    return _math.true_divide(e, _reduce.sum(e, axes, keepdims=True))


def log_softmax(x: Any, axis: Any = -1) -> TensorVariable:
    """Compute ``log(softmax(x, axis))`` as ``x - logsumexp(x, axis)``, without overflow.

    ``axis`` is an int, a tuple of ints or ``None`` (all axes); the default is the last
    axis. Integer and boolean inputs give ``float64``. Equals
    ``scipy.special.log_softmax``.

    Examples
    --------
    >>> import kiln_graph.tensor as kt
    >>> from kiln_graph.testing import evaluate
    >>> x = kt.vector("x")
    >>> evaluate(kt.log_softmax(x), {x: [0.0, -1000.0]})
    array([    0., -1000.])
    """
    z, axes = _shifted(x, axis, "log_softmax")
    return _math.sub(z, _math.log(_reduce.sum(_math.exp(z), axes, keepdims=True)))


__all__ = ["log_softmax", "softmax"]
