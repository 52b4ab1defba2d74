"""Differential-evolution Metropolis: jumps along differences of other points.

- :class:`DEMetropolis` (ter Braak 2006): a population method; each chain proposes
  ``x + lamb * (x_r1 - x_r2) + epsilon`` from two other chains' current points, so the
  chains run in lock-step (at least three of them).
- :class:`DEMetropolisZ` (ter Braak & Vrugt 2008): the same jump from two points of the
  chain's own past (its history, most of the warm-up part dropped when warm-up ends),
  so each chain runs on its own.

``epsilon`` is uniform in ``(-scaling, scaling)`` per entry; ``scaling`` or ``lamb`` is
tuned from the acceptance rate during warm-up (PyMC's rule, ``tune_scaling``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, override

import numpy as np

from kiln_samplers._protocol import CompiledModel
from kiln_samplers._steps import (
    LogpFn,
    Step,
    StepContext,
    _check_interval,
    _check_positive,
    metropolis_accept,
    safe_logp,
    tune_interval_update,
)


@dataclasses.dataclass
class DEState:
    """A chain's DE state: the tuned scales, the interval's counts, its own history."""

    scaling: float
    lamb: float
    chain: int
    points: np.ndarray | None
    accepted: int = 0
    steps: int = 0
    history: list[np.ndarray] = dataclasses.field(default_factory=list)
    dropped: bool = False


def de_step(
    logp_fn: LogpFn,
    rng: np.random.Generator,
    x: np.ndarray,
    logp: float,
    indices: np.ndarray,
    difference: np.ndarray,
    lamb: float,
    scaling: float,
) -> tuple[float, float, bool]:
    """Propose ``x[indices] + lamb * difference + U(-scaling, scaling)``; accept by Metropolis.

    Updates ``x`` in place; returns (logp, acceptance probability, accepted).
    """
    old = x[indices].copy()
    x[indices] = old + lamb * difference + rng.uniform(-scaling, scaling, indices.size)
    new_logp = safe_logp(logp_fn, x)
    accepted, accept = metropolis_accept(rng, new_logp - logp)
    if not accepted:
        x[indices] = old
        return logp, accept, False
    return new_logp, accept, True


class _DEBase(Step):
    stats_dtypes = {
        "accept": np.float64,
        "accepted": np.bool_,
        "lambda": np.float64,
        "scaling": np.float64,
    }
    handles_discrete = False

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        lamb: float | None = None,
        scaling: float = 0.001,
        tune: str | None = "scaling",
        tune_interval: int = 100,
    ) -> None:
        super().__init__(indices)
        _check_positive("scaling", scaling)
        if lamb is not None:
            _check_positive("lamb", lamb)
        if tune not in ("scaling", "lambda", None):
            raise ValueError(f"tune: expected 'scaling', 'lambda' or None, got {tune!r}")
        _check_interval(tune_interval)
        self.lamb = lamb
        self.scaling = float(scaling)
        self.tune = tune
        self.tune_interval = int(tune_interval)

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> DEState:
        assert self.indices is not None
        lamb = self.lamb if self.lamb is not None else 2.38 / math.sqrt(2 * self.indices.size)
        return DEState(self.scaling, lamb, context.chain, context.points)

    def _difference(self, state: DEState, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _after(self, state: DEState, x: np.ndarray, tuning: bool) -> None:
        """Run after each transition (DEMetropolisZ records its history)."""

    @override
    def step(
        self,
        model: CompiledModel,
        state: DEState,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        lamb, scaling = state.lamb, state.scaling
        difference = self._difference(state, rng)
        logp, accept, accepted = de_step(
            model.logp, rng, x, logp, self.indices, difference, lamb, scaling
        )
        if self.tune is not None:
            field = "scaling" if self.tune == "scaling" else "lamb"
            tune_interval_update(state, accepted, tuning, self.tune_interval, field)
        self._after(state, x, tuning)
        return logp, (accept, accepted, lamb, scaling)


class DEMetropolis(_DEBase):
    """Differential-evolution Metropolis over a population of chains (lock-step).

    Parameters
    ----------
    indices
        The (continuous) entries it updates, all of them when None.
    lamb
        The jump's factor on the difference of two other chains' points; default
        ``2.38 / sqrt(2 * d)`` for ``d`` entries.
    scaling
        The half-width of the uniform noise added to each entry.
    tune
        What warm-up tunes from the acceptance rate: ``"scaling"``, ``"lambda"`` or None.
    tune_interval
        Steps between two tuning updates.

    Needs three chains or more (each chain draws from two others).
    """

    name = "DEMetropolis"
    population = True

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> DEState:
        if context.points is None or context.points.shape[0] < 3:
            n = 1 if context.points is None else context.points.shape[0]
            raise ValueError(
                f"DEMetropolis draws from the other chains' points: it needs chains >= 3, "
                f"got {n}; use more chains or DEMetropolisZ (history-based, any number)"
            )
        return super().init(model, x, rng, context)

    @override
    def _difference(self, state: DEState, rng: np.random.Generator) -> np.ndarray:
        assert state.points is not None and self.indices is not None
        n = state.points.shape[0]
        r1, r2 = rng.choice(n - 1, 2, replace=False)
        r1, r2 = (r + (r >= state.chain) for r in (int(r1), int(r2)))  # skip this chain
        return state.points[r1, self.indices] - state.points[r2, self.indices]  # type: ignore[no-any-return]


class DEMetropolisZ(_DEBase):
    """Differential-evolution Metropolis from the chain's own past (DE-MCMC-Z).

    Parameters are those of :class:`DEMetropolis`, and ``tune_drop_fraction``: the
    fraction of the warm-up history (its oldest part) dropped when warm-up ends.
    """

    name = "DEMetropolisZ"

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        lamb: float | None = None,
        scaling: float = 0.001,
        tune: str | None = "scaling",
        tune_interval: int = 100,
        tune_drop_fraction: float = 0.9,
    ) -> None:
        super().__init__(indices, lamb, scaling, tune, tune_interval)
        if not 0.0 <= tune_drop_fraction < 1.0:
            raise ValueError(
                f"tune_drop_fraction: expected a number in [0, 1), got {tune_drop_fraction!r}"
            )
        self.tune_drop_fraction = float(tune_drop_fraction)

    @override
    def _difference(self, state: DEState, rng: np.random.Generator) -> np.ndarray:
        assert self.indices is not None
        n = len(state.history)
        if n < 2:
            return np.zeros(self.indices.size)
        r1, r2 = rng.choice(n, 2, replace=False)
        return state.history[int(r1)] - state.history[int(r2)]

    @override
    def _after(self, state: DEState, x: np.ndarray, tuning: bool) -> None:
        assert self.indices is not None
        if not tuning and not state.dropped:
            del state.history[: int(self.tune_drop_fraction * len(state.history))]
            state.dropped = True
        state.history.append(x[self.indices].copy())
