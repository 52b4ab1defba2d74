"""What the samplers consume: the compiled-model protocol of DESIGN.md.

``kiln_samplers`` never imports the graph packages: any object with these members
can be sampled (kiln_model's ``CompiledModel`` is one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


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


class NativePointers(Protocol):
    """A model's native log-density, the C ABI of DESIGN.md (``kiln_compile.NativeModel``).

    ``int logp(size_t n, const double* x, double* grad, double* logp, const void* ud)``
    at ``logp_cptr`` and, for samplers that need the draws' values (nutpie),
    ``int expand(size_t n, size_t n_out, const double* x, double* out, const void* ud)``
    at ``expand_cptr`` (the ``out_names`` values flattened, one after the other, as
    float64), both taking ``user_data_ptr``; 0 ok, > 0 a recoverable bad point (the
    point is rejected: a divergence), < 0 fatal. ``n`` is the length of ``x``;
    ``keep_alive`` owns what the addresses point into; ``refresh()`` points them at the
    model's current data before a run. An optional ``describe(code)`` says what a code
    means (for errors). kiln's C and Numba NUTS kernels call ``logp_cptr`` directly,
    nutpie's Rust threads both functions: no Python call per leapfrog step.
    """

    @property
    def logp_cptr(self) -> int: ...
    @property
    def expand_cptr(self) -> int | None: ...
    @property
    def user_data_ptr(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def keep_alive(self) -> Any: ...
    @property
    def refresh(self) -> Callable[[], Any]:
        """Point ``user_data_ptr`` at the current data (called with no argument)."""
        ...
