"""The dense mass matrix of kiln's NUTS, as a change of coordinates.

NUTS with the inverse mass matrix ``L Lᵀ`` (``L`` lower triangular) on the model's
coordinates ``x`` is NUTS with the unit metric on ``y = L⁻¹ x``: every leapfrog step,
energy and U-turn check maps one to one. So the kernels run a dense metric unchanged:
their log-density is the model's at ``x = L y``, its gradient ``Lᵀ ∇logp(x)``, and
their inverse mass is ones. For a native model the map is C (``kiln_affine_logp`` in
``_nuts_kernel.c``, the same ABI as the model's function: the C and Numba kernels
call it in the model's place); otherwise it wraps the Python log-density.

The metric adapts over Stan's windows, as Stan's ``dense_e`` does: ``L Lᵀ`` becomes the
covariance of each window's draws, regularized as Stan does but free of the scale
(:meth:`DenseMetric.adapt`). :func:`prefers_dense` is the rule by which kiln's default,
``metric="auto"``, takes it or keeps the diagonal metric.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_samplers._protocol import NativePointers


class _Affine(ctypes.Structure):
    _fields_ = (
        ("fn", ctypes.c_void_p),
        ("user_data", ctypes.c_void_p),
        ("factor", ctypes.c_void_p),
        ("x", ctypes.c_void_p),
        ("grad", ctypes.c_void_p),
    )


class AffineNative:
    """A model's native log-density in a dense metric's coordinates (``NativePointers``).

    ``logp_cptr`` is ``kiln_affine_logp``; its ``user_data_ptr`` points at the model's
    function and data, the metric's factor and two work vectors of this chain's own.
    """

    def __init__(self, native: NativePointers, metric: DenseMetric, address: int) -> None:
        n = metric.factor.shape[0]
        self._native = native
        self._x, self._grad = np.empty(n), np.empty(n)
        self._struct = _Affine(
            native.logp_cptr, native.user_data_ptr, metric.factor.ctypes.data,
            self._x.ctypes.data, self._grad.ctypes.data,
        )  # fmt: skip
        self.logp_cptr = address
        self.expand_cptr: int | None = None  # draws are expanded by the model itself
        self.user_data_ptr = ctypes.addressof(self._struct)
        self.n = n
        self.keep_alive = (native, metric.factor, self._x, self._grad, self._struct)

    def describe(self, code: int) -> str:
        """Say what the model's return code ``code`` means."""
        describe = getattr(self._native, "describe", None)
        return describe(code) if describe is not None else f"code {code}"

    def refresh(self) -> None:
        """Nothing to do: the model's pointers were read after its own refresh."""


class DenseMetric:
    """A chain's dense metric ``L Lᵀ``: its factor ``L`` and the maps between coordinates.

    ``factor`` is updated in place (the C map reads it where it lies).
    """

    def __init__(self, n: int) -> None:
        self.factor = np.eye(n)

    def positions(self, y: np.ndarray) -> np.ndarray:
        """Return the model's coordinates ``L y`` of ``y`` (one point, or one per row)."""
        return y @ self.factor.T

    def coordinates(self, x: np.ndarray) -> np.ndarray:
        """Return the metric's coordinates ``L⁻¹ x`` of the point ``x``."""
        return np.linalg.solve(self.factor, x)

    def model_gradient(self, grad_y: np.ndarray) -> np.ndarray:
        """Return the model's gradient ``L⁻ᵀ g`` from the gradient ``g`` in ``y``."""
        return np.linalg.solve(self.factor.T, grad_y)

    def is_diagonal(self) -> bool:
        """Whether the metric is diagonal (its factor has no off-diagonal element)."""
        return bool(np.count_nonzero(self.factor - np.diag(np.diagonal(self.factor))) == 0)

    def python_fn(self, fn: Callable[..., float]) -> Callable[..., float]:
        """Return ``fn(x, grad, user_data)`` (the kernels' log-density) in ``y``."""
        factor, g = self.factor, np.empty(self.factor.shape[0])  # one chain: one caller

        def in_y(y: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
            logp = fn(factor @ y, g, user_data)
            np.matmul(factor.T, g, out=grad)
            return logp

        if hasattr(fn, "check"):  # a native function's fatal codes (_nuts._check_fatal)
            in_y.check = fn.check  # type: ignore[attr-defined]
        return in_y

    def native(self, native: NativePointers, address: int) -> AffineNative:
        """Return ``native`` in ``y`` through the C map at ``address``."""
        return AffineNative(native, self, address)

    def adapt(self, window: np.ndarray, diagonal: bool = False) -> bool:
        """Set ``L Lᵀ`` to the regularized covariance of ``window`` (one draw per row).

        :func:`regularized_covariance`; ``diagonal``: its variances only (a diagonal
        ``L``). Returns False (the metric unchanged) where it is not finite or not
        positive definite.
        """
        covariance = regularized_covariance(window, diagonal)
        if covariance is None:
            return False
        try:
            factor = np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            return False
        if not np.all(np.isfinite(factor)):
            return False
        self.factor[:] = factor
        return True


def regularized_covariance(window: np.ndarray, diagonal: bool = False) -> np.ndarray | None:
    """Return the regularized covariance of ``window`` (one draw per row), or None.

    Stan's regularization made scale-free: ``w Σ + (1 - w) 1e-3 D`` for ``m`` draws,
    ``w = m / (m + 5)``, ``Σ`` their covariance and ``D`` its diagonal (Stan adds
    ``1e-3 I``, which swamps a posterior whose standard deviations are 1e-3 or less; a
    coordinate that did not move gets Stan's 1e-3). A window of fewer than ``2 n``
    draws, or ``diagonal``, gives the variances only. None: fewer than two draws, or
    a covariance that is not finite.
    """
    m, n = window.shape
    if m < 2:
        return None
    covariance = np.atleast_2d(np.cov(window, rowvar=False))
    if not np.all(np.isfinite(covariance)):
        return None
    if diagonal or m < 2 * n:  # too few draws for the correlations: the variances only
        covariance = np.diag(np.diagonal(covariance))
    weight = m / (m + 5.0)
    variance = np.diagonal(covariance).copy()
    variance[~(variance > 0.0)] = 1.0
    covariance *= weight
    covariance[np.diag_indices(n)] += (1.0 - weight) * 1e-3 * variance
    return covariance


#: ``metric="auto"`` considers a dense mass matrix for at most this many coordinates
#: (it costs two n x n products per gradient, and an n x n eigen-decomposition per window).
AUTO_MAX_DIM = 100
#: How far the gradients may exceed a Gaussian's (the largest eigenvalue of ``Lᵀ F L``
#: against its sampling noise) where the dense metric is kept for the draws.
GAUSSIAN_SLACK = 3.0
#: How much smaller the dense metric's spread must be than the diagonal one's, for the
#: draws, and to try it over the next window of the warm-up (a diagonal metric's draws
#: spread slowly along correlations, and show less of them).
MIN_GAIN, TRY_GAIN = 4.0, 2.0
#: The number of coordinates at which the final gain asked is 4 times :data:`MIN_GAIN`.
COST_DIM = 100.0


def _whitened(covariance: np.ndarray, fisher: np.ndarray) -> np.ndarray:
    """Return the eigenvalues of ``Lᵀ F L`` (``L Lᵀ`` = ``covariance``, ``F`` = ``fisher``)."""
    factor = np.linalg.cholesky(covariance)
    return np.linalg.eigvalsh(factor.T @ fisher @ factor)


def _spread(eigenvalues: np.ndarray) -> float:
    return float(eigenvalues[-1] / eigenvalues[0]) if eigenvalues[0] > 0.0 else math.inf


def prefers_dense(
    window: np.ndarray, gradients: Callable[[np.ndarray], np.ndarray], final: bool
) -> bool | None:
    """Whether a window of draws (one per row) asks for a dense mass matrix.

    ``gradients(window)`` returns the log-density's gradient at each draw (called only
    where the window has enough draws); ``final``: the metric is the one the draws will
    use. None: too few draws (under ``2 n``) to say.

    For a Gaussian posterior of covariance ``Σ`` the gradients' covariance ``F`` is
    ``Σ⁻¹``: with a mass matrix whose inverse ``L Lᵀ`` is ``Σ``, ``Lᵀ F L`` is the
    identity. Its condition number is the spread that sets NUTS's step size against its
    trajectory length: the dense metric is worth it where the diagonal metric's spread
    is at least :data:`MIN_GAIN` times the dense one's (correlations that a diagonal
    metric cannot undo; :data:`TRY_GAIN` before the final window). The steps a
    trajectory needs go as the square root of the spread, and a step's two n x n
    products cost more against the model's gradient the more coordinates there are:
    the final gain asked grows as ``(1 + n / COST_DIM)²``. A funnel's gradients
    are far larger in its neck than its draws' covariance says (``Lᵀ F L`` has
    eigenvalues well above 1); there a dense estimate is a poor and unstable fit (a
    chain can end its warm-up with a step size too large for the neck). So for the
    ``final`` metric the largest eigenvalue must also be within :data:`GAUSSIAN_SLACK`
    of its sampling noise for ``m`` Gaussian draws of ``n`` coordinates, Marchenko and
    Pastur's ``(1 + √(n/m))²``. (Eigenvalues below 1 are a window that has not yet
    spread along some correlation, which the draws then explore with shorter steps
    than they could: slower, not unstable.)
    """
    m, n = window.shape
    if m < 2 * n:
        return None
    dense, diag = regularized_covariance(window), regularized_covariance(window, True)
    if dense is None or diag is None:
        return False
    fisher = _gradient_covariance(window, gradients)
    if fisher is None:
        return False
    try:
        whitened, diag_whitened = _whitened(dense, fisher), _whitened(diag, fisher)
    except np.linalg.LinAlgError:
        return False
    gain = MIN_GAIN * (1.0 + n / COST_DIM) ** 2 if final else TRY_GAIN
    if _spread(diag_whitened) < gain * _spread(whitened):
        return False
    return not final or _within_gaussian_noise(whitened, m)


def _gradient_covariance(
    window: np.ndarray, gradients: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray | None:
    """Return the covariance of the gradients at the window's draws (None: one not finite)."""
    at_draws = gradients(window)
    if not np.all(np.isfinite(at_draws)):
        return None
    return np.atleast_2d(np.cov(at_draws, rowvar=False))


def _within_gaussian_noise(whitened: np.ndarray, m: int) -> bool:
    """Whether ``Lᵀ F L``'s largest eigenvalue is a Gaussian posterior's sampling noise.

    ``whitened``: the eigenvalues, from ``m`` draws; within :data:`GAUSSIAN_SLACK` of
    Marchenko and Pastur's ``(1 + √(n/m))²``.
    """
    n = whitened.shape[0]
    return bool(whitened[-1] <= GAUSSIAN_SLACK * (1.0 + math.sqrt(n / m)) ** 2)


def looks_gaussian(window: np.ndarray, gradients: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Whether a window of draws (one per row) and their gradients fit a Gaussian posterior.

    The test :func:`prefers_dense` asks of its ``final`` metric: whitened by the draws'
    regularized covariance, the gradients' covariance has no eigenvalue far above its
    Gaussian sampling noise (a funnel's neck has). False where the window has under
    ``2 n`` draws or a gradient is not finite.
    """
    m, n = window.shape
    covariance = regularized_covariance(window) if m >= 2 * n else None
    fisher = _gradient_covariance(window, gradients) if covariance is not None else None
    if covariance is None or fisher is None:
        return False
    try:
        whitened = _whitened(covariance, fisher)
    except np.linalg.LinAlgError:
        return False
    return _within_gaussian_noise(whitened, m)
