"""Covariance functions of Gaussian processes, with PyMC's names and arguments.

``cov(X)`` is the ``(n, n)`` covariance of the rows of ``X`` (``(n, input_dim)``, or a
vector for one input dimension), ``cov(X, Xs)`` the ``(n, m)`` cross-covariance and
``cov(X, diag=True)`` its diagonal. ``active_dims`` picks the columns a covariance
reads. Covariances combine as in PyMC: ``k1 + k2``, ``k1 * k2``, ``eta**2 * k`` (a
number or a random variable scales it), ``k ** p``.

Examples
--------
>>> import numpy as np
>>> import kiln as kl
>>> k = 2.0**2 * kl.gp.cov.ExpQuad(1, ls=0.5) + kl.gp.cov.WhiteNoise(0.1)
>>> X = np.linspace(0, 1, 4)[:, None]
>>> K = kl.draw(k(X))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model.gp._periodic_series import periodic_sqrt_psd

__all__ = [
    "Add",
    "BaseCovariance",
    "Circular",
    "Combination",
    "Constant",
    "Coregion",
    "Cosine",
    "Covariance",
    "ExpQuad",
    "Exponential",
    "Exponentiated",
    "Gibbs",
    "Kron",
    "Linear",
    "Matern12",
    "Matern32",
    "Matern52",
    "Periodic",
    "Polynomial",
    "Prod",
    "RatQuad",
    "ScaledCov",
    "Stationary",
    "WarpedInput",
    "WhiteNoise",
    "WrappedPeriodic",
]


def as_inputs(X: Any) -> TensorVariable:
    """Return ``X`` as a float64 matrix of inputs (a vector is one input dimension)."""
    x = kt.as_tensor(X, dtype="float64") if not isinstance(X, TensorVariable) else X
    if x.ndim == 1:
        return x[:, None]
    if x.ndim != 2:
        raise KilnValueError(
            f"X: expected the inputs as an (n, input_dim) matrix, got {x.ndim} dimensions"
        )
    return x


class BaseCovariance:
    """Covariance algebra: ``+``, ``*`` (with numbers, tensors and covariances), ``**``."""

    #: A tensor's ``+`` and ``*`` with a covariance defer to the covariance's.
    __kiln_defers__ = True

    def __call__(self, X: Any, Xs: Any = None, diag: bool = False) -> TensorVariable:
        """Return the covariance of ``X`` (with ``Xs``), or its diagonal (``diag``)."""
        if diag:
            if Xs is not None:
                raise KilnValueError("diag=True: give X only (the diagonal of cov(X))")
            return self.diag(as_inputs(X))
        X = as_inputs(X)
        return self.full(X, None if Xs is None else as_inputs(Xs))

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the ``(n, m)`` covariance (``Xs`` None: ``Xs = X``)."""
        raise NotImplementedError

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the ``(n,)`` diagonal of ``full(X)``."""
        raise NotImplementedError

    def __add__(self, other: Any) -> Add:
        return Add([self, other])

    __radd__ = __add__

    def __mul__(self, other: Any) -> Prod:
        return Prod([self, other])

    __rmul__ = __mul__

    def __pow__(self, power: Any) -> Exponentiated:
        return Exponentiated(self, power)


class Covariance(BaseCovariance):
    """A covariance over ``input_dim`` columns of the inputs (``active_dims`` of them)."""

    def __init__(self, input_dim: int, active_dims: Sequence[int] | None = None) -> None:
        if not isinstance(input_dim, int | np.integer) or input_dim < 1:
            raise KilnTypeError(f"input_dim: expected an int >= 1, got {input_dim!r}")
        self.input_dim = int(input_dim)
        if active_dims is None:
            active_dims = range(self.input_dim)
        self.active_dims = np.asarray(list(active_dims), dtype=np.int64)
        if self.active_dims.ndim != 1 or len(self.active_dims) == 0:
            raise KilnValueError(f"active_dims: expected column indices, got {active_dims!r}")

    def _slice(
        self, X: TensorVariable, Xs: TensorVariable | None
    ) -> tuple[TensorVariable, TensorVariable | None]:
        """Return the active columns of ``X`` and ``Xs``."""
        cols = X.type.shape[1]
        if cols is not None and cols < self.input_dim:
            raise KilnValueError(
                f"{type(self).__name__}: X has {cols} columns, fewer than input_dim="
                f"{self.input_dim}"
            )
        if len(self.active_dims) == cols and np.array_equal(self.active_dims, np.arange(cols)):
            return X, Xs
        index = kt.constant(self.active_dims)
        return X[:, index], None if Xs is None else Xs[:, index]


def _n(X: TensorVariable) -> Any:
    return X.shape[0]


class Constant(BaseCovariance):
    """``c`` everywhere."""

    def __init__(self, c: Any) -> None:
        self.c = c

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return ``c`` times a matrix of ones."""
        m = _n(X) if Xs is None else _n(Xs)
        return kt.alloc(kt.as_tensor(self.c, dtype="float64"), _n(X), m)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ``c`` times a vector of ones."""
        return kt.alloc(kt.as_tensor(self.c, dtype="float64"), _n(X))


class WhiteNoise(BaseCovariance):
    """``sigma**2`` on the diagonal of ``cov(X)``; 0 between different point sets."""

    def __init__(self, sigma: Any) -> None:
        self.sigma = sigma

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return ``sigma**2 I`` (``Xs`` None), else zeros."""
        if Xs is None:
            return kt.as_tensor(self.sigma, dtype="float64") ** 2 * kt.eye(_n(X))
        return kt.zeros((_n(X), _n(Xs)))

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ``sigma**2`` times a vector of ones."""
        return kt.alloc(kt.as_tensor(self.sigma, dtype="float64") ** 2, _n(X))


class Stationary(Covariance):
    """A function of the distance between inputs scaled by ``ls`` (or ``1 / ls_inv``)."""

    def __init__(
        self,
        input_dim: int,
        ls: Any = None,
        ls_inv: Any = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, active_dims)
        if (ls is None) == (ls_inv is None):
            raise KilnTypeError(f"{type(self).__name__}: give exactly one of ls and ls_inv")
        self.ls = (
            kt.as_tensor(ls, dtype="float64")
            if ls_inv is None
            else 1.0 / kt.as_tensor(ls_inv, dtype="float64")
        )

    def square_dist(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the squared distances between the scaled rows.

        From the differences of the rows, not PyMC's ``|x|**2 + |x'|**2 - 2 x . x'``:
        no cancellation, so the diagonal is exactly 0 and no clipping (with its kink at
        a value that is 0 only up to rounding) enters the gradient. XLA may compute one
        expression in several fusions that round differently, and a clip's gradient
        then differs between them (found on the JAX backend: a gradient off by 50%).
        """
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        return kt.sum(((X[:, None, :] - Xs[None, :, :]) / self.ls) ** 2, axis=2)

    def euclidean_dist(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the distances between the scaled rows (``sqrt(d**2 + 1e-12)``, as PyMC)."""
        return kt.sqrt(self.square_dist(X, Xs) + 1e-12)

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix: :meth:`full_from_distance` of the distances."""
        return self.full_from_distance(self.square_dist(X, Xs), squared=True)

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the scaled distances ``dist`` (squared ones: ``squared``)."""
        raise NotImplementedError

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ones: a stationary covariance is 1 at distance 0."""
        return kt.alloc(kt.constant(1.0), _n(X))


def _distance(dist: TensorVariable, squared: bool) -> TensorVariable:
    """Return the distance from a squared one as PyMC does (``sqrt(d**2 + 1e-12)``)."""
    return kt.sqrt(dist + 1e-12) if squared else dist


class ExpQuad(Stationary):
    """Exponentiated quadratic: ``exp(-r**2 / 2)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        return kt.exp(-0.5 * (dist if squared else dist**2))


class RatQuad(Stationary):
    """Rational quadratic: ``(1 + r**2 / (2 alpha)) ** -alpha``."""

    def __init__(
        self,
        input_dim: int,
        alpha: Any,
        ls: Any = None,
        ls_inv: Any = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, ls, ls_inv, active_dims)
        self.alpha = kt.as_tensor(alpha, dtype="float64")

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        r2 = dist if squared else dist**2
        return (1.0 + 0.5 * r2 / self.alpha) ** (-self.alpha)


class Matern52(Stationary):
    """Matérn 5/2: ``(1 + sqrt(5) r + 5 r**2 / 3) exp(-sqrt(5) r)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        r = _distance(dist, squared)
        s5 = math.sqrt(5.0)
        return (1.0 + s5 * r + 5.0 / 3.0 * r**2) * kt.exp(-s5 * r)


class Matern32(Stationary):
    """Matérn 3/2: ``(1 + sqrt(3) r) exp(-sqrt(3) r)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        r = _distance(dist, squared)
        s3 = math.sqrt(3.0)
        return (1.0 + s3 * r) * kt.exp(-s3 * r)


class Matern12(Stationary):
    """Matérn 1/2: ``exp(-r)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        return kt.exp(-_distance(dist, squared))


class Exponential(Stationary):
    """Exponential, as PyMC defines it: ``exp(-r / 2)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        return kt.exp(-0.5 * _distance(dist, squared))


class Cosine(Stationary):
    """Cosine: ``cos(2 pi r)``."""

    def full_from_distance(self, dist: TensorVariable, squared: bool = False) -> TensorVariable:
        """Return the covariance at the (squared) scaled distances ``dist``."""
        return kt.cos(2.0 * math.pi * _distance(dist, squared))


class Periodic(Stationary):
    """Periodic: ``exp(-sum_d (sin(pi (x_d - x'_d) / period) / ls_d)**2 / 2)``."""

    def __init__(
        self,
        input_dim: int,
        period: Any,
        ls: Any = None,
        ls_inv: Any = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, ls, ls_inv, active_dims)
        self.period = kt.as_tensor(period, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        r = math.pi * (X[:, None, :] - Xs[None, :, :]) / self.period
        return kt.exp(-0.5 * kt.sum((kt.sin(r) / self.ls) ** 2, axis=2))

    def power_spectral_density_approx(self, J: Any) -> TensorVariable:
        """Return the amplitudes ``sqrt(c_j ive(j, 1 / (4 ls**2)))`` of the orders ``J``.

        The standard deviations of the cosine series' coefficients (``c_0 = 1``, else 2)
        that ``kl.gp.HSGPPeriodic`` uses; ``J`` holds non-negative ints (not a tensor).
        PyMC's method of this name gives ``c_j ive(j, 1 / ls**2)``, which is not this
        kernel's expansion (see ``HSGPPeriodic``).
        """
        if isinstance(J, TensorVariable):
            raise KilnTypeError("J: expected the orders as non-negative ints, got a tensor")
        orders = np.asarray(J)
        if orders.ndim != 1 or orders.size == 0 or orders.dtype.kind not in "iu":
            raise KilnTypeError(f"J: expected a non-empty vector of ints, got {J!r}")
        if orders.min() < 0:
            raise KilnValueError(f"J: expected non-negative orders, got {orders.min()}")
        return periodic_sqrt_psd(self, int(orders.max()) + 1)[kt.constant(orders)]


class Linear(Covariance):
    """Linear: ``(x - c) . (x' - c)``."""

    def __init__(self, input_dim: int, c: Any, active_dims: Sequence[int] | None = None) -> None:
        super().__init__(input_dim, active_dims)
        self.c = kt.as_tensor(c, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        X, Xs = self._slice(X, Xs)
        Xc = X - self.c
        return kt.dot(Xc, (Xc if Xs is None else Xs - self.c).T)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ``|x - c|**2`` per row."""
        X, _ = self._slice(X, None)
        return kt.sum((X - self.c) ** 2, axis=1)


class Polynomial(Linear):
    """Polynomial: ``((x - c) . (x' - c) + offset) ** d``."""

    def __init__(
        self,
        input_dim: int,
        c: Any,
        d: Any,
        offset: Any,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, c, active_dims)
        self.d = kt.as_tensor(d, dtype="float64")
        self.offset = kt.as_tensor(offset, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        return (super().full(X, Xs) + self.offset) ** self.d

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return (super().diag(X) + self.offset) ** self.d


class Combination(BaseCovariance):
    """Covariances and factors (numbers, tensors) combined by :class:`Add` or :class:`Prod`."""

    def __init__(self, factors: Sequence[Any]) -> None:
        self.factors: list[Any] = []
        for f in factors:
            if isinstance(f, type(self)):  # flatten (a + b) + c
                self.factors.extend(f.factors)
            else:
                self.factors.append(f)

    @property
    def input_dim(self) -> int:
        """The largest ``input_dim`` of the covariances combined (PyMC's)."""
        dims = [f.input_dim for f in self.factors if isinstance(f, Covariance | Combination)]
        if not dims:
            raise KilnTypeError(f"{type(self).__name__}: combines no covariance")
        return max(dims)

    def _values(self, X: TensorVariable, Xs: TensorVariable | None, diag: bool) -> list[Any]:
        out = []
        for f in self.factors:
            if isinstance(f, BaseCovariance):
                out.append(f.diag(X) if diag else f.full(X, Xs))
            else:
                value = kt.as_tensor(f, dtype="float64")
                if value.ndim > 0:
                    raise KilnValueError(
                        f"{type(self).__name__}: a covariance combines with scalars only, got "
                        f"a {value.ndim}-dimensional factor"
                    )
                out.append(value)
        return out


class Add(Combination):
    """The sum of covariances (a number or a tensor adds to every entry)."""

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        return _fold(self._values(X, Xs, False), kt.add)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return _fold(self._values(X, None, True), kt.add)


class Prod(Combination):
    """The elementwise product of covariances (a number or a tensor scales)."""

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        return _fold(self._values(X, Xs, False), kt.mul)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return _fold(self._values(X, None, True), kt.mul)


def _fold(values: list[Any], op: Any) -> TensorVariable:
    out = values[0]
    for v in values[1:]:
        out = op(out, v)
    return out  # type: ignore[no-any-return]


class Exponentiated(BaseCovariance):
    """A covariance raised elementwise to ``power``."""

    def __init__(self, kernel: BaseCovariance, power: Any) -> None:
        self.kernel = kernel
        self.power = kt.as_tensor(power, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        return self.kernel.full(X, Xs) ** self.power

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return self.kernel.diag(X) ** self.power


class WrappedPeriodic(Covariance):
    """A stationary covariance of the wrapped distance ``sin(pi (x - x') / period)``."""

    def __init__(self, cov_func: Stationary, period: Any) -> None:
        if not isinstance(cov_func, Stationary):
            raise KilnTypeError(
                f"cov_func: expected a stationary covariance, got {type(cov_func).__name__}"
            )
        super().__init__(cov_func.input_dim, cov_func.active_dims.tolist())
        self.cov_func = cov_func
        self.period = kt.as_tensor(period, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        r = math.pi * (X[:, None, :] - Xs[None, :, :]) / self.period
        r2 = kt.sum((kt.sin(r) / self.cov_func.ls) ** 2, axis=2)
        return self.cov_func.full_from_distance(r2, squared=True)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ones."""
        return kt.alloc(kt.constant(1.0), _n(X))


class Circular(Covariance):
    """Weinland's covariance of the geodesic distance on a circle of ``period`` (1-d)."""

    def __init__(
        self, input_dim: int, period: Any, tau: Any = 4, active_dims: Sequence[int] | None = None
    ) -> None:
        super().__init__(input_dim, active_dims)
        self.c = kt.as_tensor(period, dtype="float64") / 2.0
        self.tau = kt.as_tensor(tau, dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        period = 2.0 * self.c
        t = kt.abs(kt.mod(X - Xs.T + self.c, period) - self.c)
        return (1.0 + self.tau * t / self.c) * kt.maximum(1.0 - t / self.c, 0.0) ** self.tau

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ones."""
        return kt.alloc(kt.constant(1.0), _n(X))


class ScaledCov(Covariance):
    """``s(x) k(x, x') s(x')`` for a scaling function ``s(X, *args) -> (n,)``."""

    def __init__(
        self,
        input_dim: int,
        cov_func: BaseCovariance,
        scaling_func: Any,
        args: tuple[Any, ...] = (),
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, active_dims)
        if not callable(scaling_func):
            raise KilnTypeError(f"scaling_func: expected a function, got {scaling_func!r}")
        self.cov_func, self.scaling_func, self.args = cov_func, scaling_func, tuple(args)

    def _scale(self, X: TensorVariable) -> TensorVariable:
        X, _ = self._slice(X, None)
        return kt.as_tensor(self.scaling_func(X, *self.args), dtype="float64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        sx = self._scale(X)
        ss = sx if Xs is None else self._scale(Xs)
        return sx[:, None] * self.cov_func.full(X, Xs) * ss[None, :]

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return self._scale(X) ** 2 * self.cov_func.diag(X)


class WarpedInput(Covariance):
    """``k(w(x), w(x'))`` for a warping function ``w(X, *args) -> (n, d)``."""

    def __init__(
        self,
        input_dim: int,
        cov_func: BaseCovariance,
        warp_func: Any,
        args: tuple[Any, ...] = (),
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, active_dims)
        if not callable(warp_func):
            raise KilnTypeError(f"warp_func: expected a function, got {warp_func!r}")
        self.cov_func, self.warp_func, self.args = cov_func, warp_func, tuple(args)

    def _warp(self, X: TensorVariable) -> TensorVariable:
        X, _ = self._slice(X, None)
        return as_inputs(self.warp_func(X, *self.args))

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        return self.cov_func.full(self._warp(X), None if Xs is None else self._warp(Xs))

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return self.cov_func.diag(self._warp(X))


class Gibbs(Covariance):
    """Gibbs's covariance with an input-dependent length scale ``l(X, *args) -> (n,)`` (1-d)."""

    def __init__(
        self,
        input_dim: int,
        lengthscale_func: Any,
        args: tuple[Any, ...] = (),
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, active_dims)
        if self.input_dim != 1 or len(self.active_dims) != 1:
            raise KilnValueError("Gibbs: one input dimension only (input_dim=1)")
        if not callable(lengthscale_func):
            raise KilnTypeError(f"lengthscale_func: expected a function, got {lengthscale_func!r}")
        self.lfunc, self.args = lengthscale_func, tuple(args)

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        rx = kt.as_tensor(self.lfunc(X, *self.args), dtype="float64").flatten()
        rz = kt.as_tensor(self.lfunc(Xs, *self.args), dtype="float64").flatten()
        r2 = (X - Xs.T) ** 2
        total = rx[:, None] ** 2 + rz[None, :] ** 2
        return kt.sqrt(2.0 * rx[:, None] * rz[None, :] / total) * kt.exp(-r2 / total)

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return ones."""
        return kt.alloc(kt.constant(1.0), _n(X))


class Coregion(Covariance):
    """``B[i, j]`` between the integer groups ``i``, ``j`` in one input column.

    ``B = W W^T + diag(kappa)`` (or ``B`` given), as PyMC's coregionalization matrix.
    """

    def __init__(
        self,
        input_dim: int,
        W: Any = None,  # noqa: N803 (PyMC's name)
        kappa: Any = None,
        B: Any = None,  # noqa: N803
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(input_dim, active_dims)
        if len(self.active_dims) != 1:
            raise KilnValueError("Coregion: one active dimension (the group index column)")
        if B is None:
            if W is None or kappa is None:
                raise KilnTypeError("Coregion: give W and kappa, or B")
            W_t = kt.as_tensor(W, dtype="float64")
            kappa_t = kt.as_tensor(kappa, dtype="float64")
            B = kt.dot(W_t, W_t.T) + kt.eye(W_t.shape[0]) * kappa_t  # + diag(kappa)
        elif W is not None or kappa is not None:
            raise KilnTypeError("Coregion: give W and kappa, or B, not both")
        self.B = kt.as_tensor(B, dtype="float64")

    def _index(self, X: TensorVariable) -> TensorVariable:
        X, _ = self._slice(X, None)
        return kt.cast(X[:, 0], "int64")

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        i = self._index(X)
        j = i if Xs is None else self._index(Xs)
        return self.B[i[:, None], j[None, :]]

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        i = self._index(X)
        return self.B[i, i]


class Kron(Covariance):
    """The product of covariances, each over its own consecutive block of input columns.

    On the Cartesian product of the factors' inputs this is their Kronecker product.
    """

    def __init__(self, factor_list: Sequence[BaseCovariance]) -> None:
        self.factor_list = list(factor_list)
        if not self.factor_list or not all(
            isinstance(f, Covariance | Combination) for f in self.factor_list
        ):
            raise KilnTypeError(
                f"Kron: expected a list of covariances (with input_dim), got {factor_list!r}"
            )
        self.input_dims = [
            f.input_dim for f in self.factor_list if isinstance(f, Covariance | Combination)
        ]
        super().__init__(sum(self.input_dims))

    def _blocks(self, X: TensorVariable) -> list[TensorVariable]:
        edges = np.cumsum([0, *self.input_dims])
        return [X[:, int(a) : int(b)] for a, b in zip(edges[:-1], edges[1:], strict=True)]

    def full(self, X: TensorVariable, Xs: TensorVariable | None = None) -> TensorVariable:
        """Return the covariance matrix."""
        xs = self._blocks(X)
        ys = [None] * len(xs) if Xs is None else self._blocks(Xs)
        return _fold(
            [f.full(a, b) for f, a, b in zip(self.factor_list, xs, ys, strict=True)], kt.mul
        )

    def diag(self, X: TensorVariable) -> TensorVariable:
        """Return the diagonal."""
        return _fold(
            [f.diag(a) for f, a in zip(self.factor_list, self._blocks(X), strict=True)], kt.mul
        )
