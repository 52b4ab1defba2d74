"""What the samplers consume: the compiled-model protocol of DESIGN.md.

``kiln_samplers`` never imports the graph packages: any object with these members
can be sampled (kiln_model's ``CompiledModel`` is one).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

#: The native log-density protocol, in Numba types: ``logp = fn(x, grad_out, user_data)``.
LOGP_GRAD_SIGNATURE = "float64(float64[::1], float64[::1], int64[::1])"


class CompiledModel(Protocol):
    """A log-density over one flat float64 vector, and how to read its points.

    Optional members some samplers read: ``discrete_mask`` (bool[ndim]: entries that
    hold integer values, which step methods move in integer jumps and NUTS never
    moves; absent means all continuous), ``layout`` (blocks with ``support`` /
    ``lower`` / ``upper`` for the discrete steps), ``logp_jax`` / ``expand_jax`` (the
    JAX path, for numpyro and blackjax), ``expand_draws(xs)`` (``expand`` of every row
    of a ``(draws, ndim)`` array in one call, values shaped ``(draws, ...)``: the
    results of many draws then cost one call, not one per draw).
    """

    ndim: int
    out_names: list[str]
    dims: dict[str, Any]
    coords: dict[str, Any]

    def logp_dlogp(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Return the log-density at ``x`` and its gradient."""
        ...

    def logp(self, x: np.ndarray) -> float:
        """Return the log-density at ``x``."""
        ...

    def expand(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Return the constrained values and deterministics at ``x``."""
        ...

    def initial_point(self, seed: Any = None) -> np.ndarray:
        """Return a starting point."""
        ...


class NativeLogpGrad(Protocol):
    """A compiled ``fn(x, grad_out, user_data) -> logp`` for the compiled sampler loop.

    ``fn`` has the Numba signature ``LOGP_GRAD_SIGNATURE``; ``refresh()`` rebuilds
    ``user_data`` (addresses of the model's data) before a run. An optional
    ``native_address`` (int, or None) is ``fn``'s native entry point, which kiln's C
    kernel calls (without it, the Numba kernel runs).
    """

    fn: Any
    user_data: np.ndarray

    def refresh(self) -> Any:
        """Point ``user_data`` at the current data."""
        ...


class NativePointers(Protocol):
    """A model's C callbacks for a sampler outside Python (nutpie), per DESIGN.md.

    ``int logp(size_t n, const double* x, double* grad, double* logp, const void* ud)``
    at ``logp_cptr`` and ``int expand(size_t n, size_t n_out, const double* x, double*
    out, const void* ud)`` at ``expand_cptr`` (the ``out_names`` values flattened, one
    after the other, as float64), both taking ``user_data_ptr``; 0 ok, > 0 a
    recoverable bad point, < 0 fatal. ``keep_alive`` owns what the addresses point
    into; ``refresh()`` points them at the model's current data before a run.
    """

    logp_cptr: int
    expand_cptr: int
    user_data_ptr: int
    keep_alive: Any

    def refresh(self) -> Any:
        """Point ``user_data_ptr`` at the current data."""
        ...
