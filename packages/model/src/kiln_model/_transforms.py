"""Value transforms: a bijection from a constrained space to all of R^n, and its Jacobian.

A transformed free variable is sampled as ``y = forward(x)``, unconstrained; its
log-density gains ``log |det d backward(y) / dy|`` (:meth:`Transform.log_jac_det`,
one term per draw: summed over the transform's core dimensions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import KilnValueError
from kiln_graph import tensor as kt
from kiln_model._triangular import (
    corr_cholesky,
    diagonal_positions,
    log_cosh,
    pack_tril,
    pack_triu,
    symmetric_from_triu,
)


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


class CircularTransform(Transform):
    """Angles: ``R -> [-pi, pi)``, ``backward(y) = y - 2 pi floor((y + pi) / (2 pi))``.

    Every real maps to the angle it points at, so a sampler moves around the circle
    with no wall at +-pi; the log-Jacobian is 0 (the wrap is a translation).
    """

    name = "circular"

    def forward(self, x: Any) -> Any:
        return kt.as_tensor(x)

    def backward(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        return y - 2.0 * np.pi * kt.floor((y + np.pi) / (2.0 * np.pi))

    def log_jac_det(self, y: Any) -> Any:
        return kt.zeros_like(y, dtype="float64")


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


class CholeskyCovPacked(Transform):
    """Packed lower-triangular Cholesky factors of order ``n`` -> R^(n (n + 1) / 2).

    The diagonal entries (positive) are logged, the others kept: ``LKJCholeskyCov``'s
    default transform. The log-Jacobian of ``backward`` is the sum of the logged entries.
    """

    name = "cholesky-cov-packed"
    core_ndim = 1

    def __init__(self, n: int) -> None:
        self.n = int(n)
        mask = np.zeros(self.n * (self.n + 1) // 2, dtype=bool)
        mask[diagonal_positions(self.n)] = True
        self._mask = mask

    def forward(self, x: Any) -> Any:
        m = kt.constant(self._mask)
        return kt.switch(m, kt.log(kt.switch(m, x, 1.0)), x)

    def backward(self, y: Any) -> Any:
        m = kt.constant(self._mask)
        return kt.switch(m, kt.exp(kt.switch(m, y, 0.0)), y)

    def log_jac_det(self, y: Any) -> Any:
        return kt.sum(kt.switch(kt.constant(self._mask), y, 0.0), axis=-1)

    def __repr__(self) -> str:
        return f"CholeskyCovPacked(n={self.n})"


class CholeskyCorr(Transform):
    """Packed correlations (strict upper triangle, row by row) of order ``n`` -> R^(n (n-1) / 2).

    ``backward`` maps each unconstrained entry through ``tanh`` to a canonical partial
    correlation (a C-vine), builds the correlation matrix's Cholesky factor from them and
    packs the strict upper triangle of ``W W^T``: every value is a positive-definite
    correlation matrix. The log-Jacobian is ``sum (n - i) / 2 * log(1 - z^2)`` over the
    partial correlations ``z`` of column ``i`` (``tanh`` gives 1 of it, the partial ->
    marginal correlations map ``(n - i - 2) / 2``: Lewandowski et al. 2009).
    """

    name = "cholesky-corr"
    core_ndim = 1

    def __init__(self, n: int) -> None:
        self.n = int(n)
        rows, cols = np.tril_indices(self.n, -1)
        self._weights = (self.n - cols) / 2.0
        index = np.full((self.n, self.n), len(rows), dtype=np.int64)
        index[rows, cols] = np.arange(len(rows))
        self._index = index

    def _matrix(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        padded = kt.concatenate([y, kt.zeros_like(y[..., :1])], axis=-1)
        return padded[..., kt.constant(self._index)]

    def forward(self, x: Any) -> Any:
        w = kt.cholesky(symmetric_from_triu(x, self.n))
        sq = w * w
        before = pack_tril(kt.cumsum(sq, axis=-1) - sq, self.n, -1)  # sum_{k<i} w[j, k]^2
        z = pack_tril(w, self.n, -1) / kt.sqrt(1.0 - before)
        return 0.5 * (kt.log1p(z) - kt.log1p(-z))

    def backward(self, y: Any) -> Any:
        ym = self._matrix(y)
        w = corr_cholesky(kt.tanh(ym), -2.0 * log_cosh(ym), self.n)
        corr = kt.matmul(w, kt.transpose(w, (*range(w.ndim - 2), w.ndim - 1, w.ndim - 2)))
        return pack_triu(corr, self.n, 1)

    def log_jac_det(self, y: Any) -> Any:
        return kt.sum(kt.constant(self._weights) * (-2.0 * log_cosh(y)), axis=-1)

    def __repr__(self) -> str:
        return f"CholeskyCorr(n={self.n})"


def _along(axis: int, index: Any) -> tuple[Any, ...]:
    """Return the index tuple that applies ``index`` to the negative ``axis``."""
    return (Ellipsis, index, *([slice(None)] * (-axis - 1)))


class ZeroSumTransform(Transform):
    """Arrays summing to zero over their last ``n_axes`` axes -> one entry fewer on each.

    Along each axis of length ``n``, ``backward`` maps ``y`` (length ``n - 1``) to the
    zero-sum vector ``H (y, 0)``, with ``H`` the Householder reflection that sends the
    last unit vector to ``-1 / sqrt(n)``: its other columns are an orthonormal basis
    of the zero-sum vectors, so the map is an isometry onto them (log-Jacobian 0 against
    the zero-sum subspace's own volume, which ``ZeroSumNormal``'s density is written in).
    """

    name = "zerosum"

    def __init__(self, n_axes: int = 1) -> None:
        if n_axes < 1:
            raise KilnValueError(f"ZeroSumTransform: n_axes must be >= 1, got {n_axes}")
        self.core_ndim = self.n_axes = int(n_axes)

    def forward(self, x: Any) -> Any:
        x = kt.as_tensor(x)
        for axis in range(-self.n_axes, 0):
            n = kt.cast(kt.shape_i(x, axis), "float64")
            last = x[_along(axis, slice(-1, None))]
            x = x[_along(axis, slice(None, -1))] - last / (kt.sqrt(n) + 1.0)
        return x

    def backward(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        for axis in range(-self.n_axes, 0):
            root = kt.sqrt(kt.cast(kt.shape_i(y, axis), "float64") + 1.0)
            total = kt.sum(y, axis=axis, keepdims=True)
            y = kt.concatenate([y - total / (root * root + root), -total / root], axis=axis)
        return y

    def log_jac_det(self, y: Any) -> Any:
        y = kt.as_tensor(y)
        return kt.zeros_like(y[(Ellipsis, *([0] * self.n_axes))])

    def forward_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        out = list(shape)
        for axis in range(-self.n_axes, 0):
            if out[axis] is None:
                continue
            if out[axis] < 1:
                raise KilnValueError(f"zerosum: expected axes of length >= 1, got {tuple(shape)}")
            out[axis] -= 1
        return tuple(out)

    def __repr__(self) -> str:
        return f"ZeroSumTransform(n_axes={self.n_axes})"


log = LogTransform()
logodds = LogOddsTransform()
ordered = OrderedTransform()
simplex = SimplexTransform()
circular = CircularTransform()


def interval(lower: Any = None, upper: Any = None) -> IntervalTransform:
    """Return the transform of the interval ``(lower, upper)`` (a side may be None)."""
    return IntervalTransform(lower, upper)
