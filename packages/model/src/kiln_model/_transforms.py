"""Value transforms: a bijection from a constrained space to all of R^n, and its Jacobian.

A transformed free variable is sampled as ``y = forward(x)``, unconstrained; its
log-density gains ``log |det d backward(y) / dy|`` (:meth:`Transform.log_jac_det`,
one term per draw: summed over the transform's core dimensions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln_graph import KilnValueError
from kiln_graph import tensor as kt


class Transform:
    """A bijection ``forward`` (constrained -> unconstrained) with its inverse ``backward``.

    ``core_ndim`` is the number of trailing dimensions one application mixes (0:
    elementwise; 1: a vector, such as a simplex). ``name`` suffixes the value
    variable's name (``sigma_log__``).
    """

    name: str = "transform"
    core_ndim: int = 0

    def forward(self, x: Any) -> Any:
        """Return the unconstrained value of the constrained ``x``."""
        raise NotImplementedError

    def backward(self, y: Any) -> Any:
        """Return the constrained value of the unconstrained ``y``."""
        raise NotImplementedError

    def log_jac_det(self, y: Any) -> Any:
        """Return ``log |det J|`` of ``backward`` at ``y`` (core dimensions summed)."""
        raise NotImplementedError

    def forward_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Return the shape of ``forward(x)`` for ``x`` of ``shape``."""
        return tuple(shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LogTransform(Transform):
    """``(0, inf) -> R``: ``y = log(x)``."""

    name = "log"

    def forward(self, x: Any) -> Any:
        return kt.log(x)

    def backward(self, y: Any) -> Any:
        return kt.exp(y)

    def log_jac_det(self, y: Any) -> Any:
        return kt.as_tensor(y)


class IntervalTransform(Transform):
    """``(lower, upper) -> R`` (log-odds), or a half-bounded interval through a log.

    ``lower`` and ``upper`` may be tensors (parameters of the distribution) or None for
    an unbounded side: ``(lower, inf)`` is ``y = log(x - lower)``, ``(-inf, upper)`` is
    ``y = log(upper - x)``.
    """

    name = "interval"

    def __init__(self, lower: Any = None, upper: Any = None) -> None:
        if lower is None and upper is None:
            raise KilnValueError("IntervalTransform: give lower, upper or both")
        self.lower, self.upper = lower, upper

    def forward(self, x: Any) -> Any:
        lo, hi = self.lower, self.upper
        if lo is not None and hi is not None:
            return kt.log(x - lo) - kt.log(hi - x)
        if lo is not None:
            return kt.log(x - lo)
        return kt.log(hi - x)

    def backward(self, y: Any) -> Any:
        lo, hi = self.lower, self.upper
        if lo is not None and hi is not None:
            return lo + (hi - lo) * kt.sigmoid(y)
        if lo is not None:
            return lo + kt.exp(y)
        return hi - kt.exp(y)

    def log_jac_det(self, y: Any) -> Any:
        lo, hi = self.lower, self.upper
        if lo is not None and hi is not None:
            # log((hi - lo) * s * (1 - s)) = log(hi - lo) - softplus(-y) - softplus(y)
            return kt.log(hi - lo) - kt.softplus(-y) - kt.softplus(y)
        return kt.as_tensor(y)


class LogOddsTransform(IntervalTransform):
    """``(0, 1) -> R``: ``y = logit(x)``."""

    name = "logodds"

    def __init__(self) -> None:
        super().__init__(0.0, 1.0)

    def forward(self, x: Any) -> Any:
        return kt.log(x) - kt.log1p(-x)

    def backward(self, y: Any) -> Any:
        return kt.sigmoid(y)

    def log_jac_det(self, y: Any) -> Any:
        return -kt.softplus(-y) - kt.softplus(y)


class OrderedTransform(Transform):
    """Increasing vectors -> R^n: ``y[0] = x[0]``, ``y[i] = log(x[i] - x[i-1])``."""

    name = "ordered"
    core_ndim = 1

    def forward(self, x: Any) -> Any:
        x = kt.as_tensor(x)
        return kt.concatenate([x[..., :1], kt.log(x[..., 1:] - x[..., :-1])], axis=-1)

    def backward(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        return kt.cumsum(kt.concatenate([y[..., :1], kt.exp(y[..., 1:])], axis=-1), axis=-1)

    def log_jac_det(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        return kt.sum(y[..., 1:], axis=-1)


class SimplexTransform(Transform):
    """The simplex of R^k -> R^(k-1): additive log-ratio against the last component.

    ``y_i = log(x_i) - log(x_k)`` for ``i < k``; ``backward`` is the softmax of
    ``(y, 0)``. The log-Jacobian is ``sum(log x)`` (all k components) of that softmax.
    """

    name = "simplex"
    core_ndim = 1

    def forward(self, x: Any) -> Any:
        x = kt.as_tensor(x)
        logx = kt.log(x)
        # The last component as a length-1 axis that is static, so that it broadcasts.
        return logx[..., :-1] - kt.expand_dims(logx[..., -1], -1)

    def backward(self, y: Any) -> Any:
        return kt.softmax(self._padded(y), axis=-1)

    def log_jac_det(self, y: Any) -> Any:
        return kt.sum(kt.log_softmax(self._padded(y), axis=-1), axis=-1)

    def forward_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        if not shape or shape[-1] < 1:
            raise KilnValueError(f"simplex: expected a last dimension of length >= 1, got {shape}")
        return (*shape[:-1], shape[-1] - 1)

    @staticmethod
    def _padded(y: Any) -> Any:
        y = kt.as_tensor(y)
        zeros = kt.zeros_like(y[..., :1])
        return kt.concatenate([y, zeros], axis=-1)


class ChainTransform(Transform):
    """Transforms applied in order: ``forward = t_n(...t_1(x))``."""

    def __init__(self, *transforms: Transform) -> None:
        if not transforms:
            raise KilnValueError("ChainTransform: give at least one transform")
        self.transforms = transforms
        self.name = "_".join(t.name for t in transforms)
        self.core_ndim = max(t.core_ndim for t in transforms)

    def forward(self, x: Any) -> Any:
        for t in self.transforms:
            x = t.forward(x)
        return x

    def backward(self, y: Any) -> Any:
        for t in reversed(self.transforms):
            y = t.backward(y)
        return y

    def log_jac_det(self, y: Any) -> Any:
        total: Any = 0.0
        for t in reversed(self.transforms):
            term = kt.as_tensor(t.log_jac_det(y))
            if t.core_ndim < self.core_ndim:  # an elementwise step inside a vector chain
                term = kt.sum(term, axis=-1)
            total = total + term
            y = t.backward(y)
        return total

    def forward_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        out = tuple(shape)
        for t in self.transforms:
            out = t.forward_shape(out)
        return out

    def __repr__(self) -> str:
        return f"ChainTransform({', '.join(map(repr, self.transforms))})"


log = LogTransform()
logodds = LogOddsTransform()
ordered = OrderedTransform()
simplex = SimplexTransform()


def interval(lower: Any = None, upper: Any = None) -> IntervalTransform:
    """Return the transform of the interval ``(lower, upper)`` (a side may be None)."""
    return IntervalTransform(lower, upper)
