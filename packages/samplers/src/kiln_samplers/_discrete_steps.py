"""Step methods of binary and categorical entries (on the core of :mod:`kiln_samplers._steps`).

- :class:`BinaryMetropolis`: a flip of each 0/1 entry in turn, accepted by Metropolis.
- :class:`CategoricalGibbsMetropolis`: each categorical entry in turn, from its exact
  conditional (``"proportional"``) or a uniform proposal accepted by Metropolis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, override

import numpy as np

from kiln_samplers._protocol import CompiledModel
from kiln_samplers._steps import (
    LogpFn,
    Step,
    StepContext,
    metropolis_accept,
    safe_logp,
)  # fmt: skip


def binary_flip_step(
    logp_fn: LogpFn, rng: np.random.Generator, x: np.ndarray, logp: float, order: np.ndarray
) -> tuple[float, float, int]:
    """Flip each 0/1 entry of ``order`` in turn, each accepted by Metropolis.

    Returns (logp, mean acceptance probability, number of flips accepted).
    """
    total = 0.0
    n_accepted = 0
    for i in order:
        old = x[i]
        x[i] = 1.0 - old
        new_logp = safe_logp(logp_fn, x)
        accepted, accept = metropolis_accept(rng, new_logp - logp)
        total += accept
        if accepted:
            logp = new_logp
            n_accepted += 1
        else:
            x[i] = old
    return logp, total / max(len(order), 1), n_accepted


def categorical_gibbs_step(
    logp_fn: LogpFn,
    rng: np.random.Generator,
    x: np.ndarray,
    logp: float,
    order: np.ndarray,
    n_categories: np.ndarray,
    proportional: bool,
) -> tuple[float, float, int]:
    """Update each categorical entry of ``order`` in turn.

    ``proportional``: draw it from its exact conditional (the log-density at every
    category; a Gibbs step, always accepted). Otherwise propose one of the other
    categories uniformly and accept it by Metropolis (the proposal is symmetric).
    ``n_categories[k]`` is the number of categories of ``order[k]``.
    Returns (logp, mean acceptance probability, number of entries that changed).
    """
    total = 0.0
    n_changed = 0
    for k, i in enumerate(order):
        old = x[i]
        n = int(n_categories[k])
        if proportional:
            logps = np.empty(n)
            for c in range(n):
                x[i] = float(c)
                logps[c] = logp if c == old else safe_logp(logp_fn, x)
            top = logps.max()
            probs = np.exp(logps - top)
            probs /= probs.sum()
            choice = int(rng.choice(n, p=probs))
            x[i] = float(choice)
            logp = float(logps[choice])
            total += 1.0
            n_changed += int(choice != old)
            continue
        other = int(rng.integers(n - 1)) if n > 1 else 0
        proposal = other + 1 if n > 1 and other >= old else other
        x[i] = float(proposal)
        new_logp = safe_logp(logp_fn, x)
        accepted, accept = metropolis_accept(rng, new_logp - logp)
        total += accept
        if accepted and proposal != old:
            logp = new_logp
            n_changed += 1
        else:
            x[i] = old
    return logp, total / max(len(order), 1), n_changed


def _order(rng: np.random.Generator, indices: np.ndarray, order: str) -> np.ndarray:
    return rng.permutation(indices) if order == "random" else indices


def _check_order(order: Any) -> str:
    if order not in ("random", "sequential"):
        raise ValueError(f"order: expected 'random' or 'sequential', got {order!r}")
    return str(order)


class BinaryMetropolis(Step):
    """Flip each 0/1 entry in turn (random order by default), accepted by Metropolis.

    For Bernoulli variables: PyMC's ``BinaryGibbsMetropolis``. Statistics: ``accept``
    (the mean acceptance probability of the flips) and ``accepted`` (the fraction of
    flips accepted).
    """

    name = "BinaryMetropolis"
    stats_dtypes = {"accept": np.float64, "accepted": np.float64}

    def __init__(
        self, indices: Sequence[int] | np.ndarray | None = None, order: str = "random"
    ) -> None:
        super().__init__(indices)
        self.order = _check_order(order)

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> None:
        assert self.indices is not None
        values = x[self.indices]
        if not np.all((values == 0.0) | (values == 1.0)):
            raise ValueError(f"{self.name}: the start values {values.tolist()} are not all 0 or 1")

    @override
    def step(
        self,
        model: CompiledModel,
        state: None,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        order = _order(rng, self.indices, self.order)
        logp, accept, n = binary_flip_step(model.logp, rng, x, logp, order)
        return logp, (accept, n / order.size)


class CategoricalGibbsMetropolis(Step):
    """Update each categorical entry in turn (0 .. k-1) given the others.

    Parameters
    ----------
    indices
        The entries it updates.
    n_categories
        The number of categories of each entry (an int, or one per entry).
    proposal
        ``"proportional"`` (default): draw each entry from its exact conditional, a Gibbs
        step costing k log-density evaluations; ``"uniform"``: propose one of the other
        categories uniformly and accept by Metropolis (PyMC's default; one evaluation).
    order
        ``"random"`` (a new permutation each step) or ``"sequential"``.
    """

    name = "CategoricalGibbsMetropolis"
    stats_dtypes = {"accept": np.float64, "accepted": np.float64}

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        n_categories: int | Sequence[int] | np.ndarray = 2,
        proposal: str = "proportional",
        order: str = "random",
    ) -> None:
        super().__init__(indices)
        if proposal not in ("proportional", "uniform"):
            raise ValueError(f"proposal: expected 'proportional' or 'uniform', got {proposal!r}")
        k = np.asarray(n_categories)
        if k.dtype.kind not in "iu" or k.ndim > 1 or np.any(k < 1):
            raise ValueError(f"n_categories: expected ints >= 1, got {n_categories!r}")
        self.n_categories = k.astype(np.int64)
        self.proposal = proposal
        self.order = _check_order(order)

    @override
    def bind(self, model: CompiledModel) -> Step:
        out = super().bind(model)
        assert out.indices is not None
        if self.n_categories.ndim == 1 and self.n_categories.size != out.indices.size:
            raise ValueError(
                f"n_categories: {self.n_categories.size} values for {out.indices.size} entries"
            )
        return out

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> None:
        assert self.indices is not None
        values = x[self.indices]
        k = np.broadcast_to(self.n_categories, values.shape)
        if not np.all((values >= 0) & (values < k) & (values == np.round(values))):
            raise ValueError(
                f"{self.name}: the start values {values.tolist()} are not categories 0..k-1"
            )

    @override
    def step(
        self,
        model: CompiledModel,
        state: None,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        k = np.broadcast_to(self.n_categories, self.indices.shape)
        if self.order == "random":
            perm = rng.permutation(self.indices.size)
            order, k = self.indices[perm], k[perm]
        else:
            order = self.indices
        logp, accept, n = categorical_gibbs_step(
            model.logp, rng, x, logp, order, k, self.proposal == "proportional"
        )
        return logp, (accept, n / order.size)
