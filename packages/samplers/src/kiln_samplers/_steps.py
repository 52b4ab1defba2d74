"""Gradient-free step methods: a functional core per method, a thin class on top.

A step updates some entries (``indices``) of the flat vector ``x`` of a compiled model,
calling only its log-density ``logp(x)``. Each class is configuration only (shared by
every chain); :meth:`Step.init` makes a chain's mutable state and :meth:`Step.step`
advances ``x`` in place by one transition and returns the new log-density and the
step's statistics (in the order of ``stat_names``).

- :class:`Metropolis`: a Normal random walk on all its entries at once, rounded on
  integer entries, its ``scaling`` tuned from the acceptance rate during warm-up.
- :class:`Slice`: univariate slice sampling (stepping out, shrinking) per entry.

The steps of binary and categorical entries (BinaryMetropolis, CategoricalGibbsMetropolis)
live in :mod:`kiln_samplers._discrete_steps`, the population / history methods
(DEMetropolis, DEMetropolisZ) in :mod:`kiln_samplers._demetropolis`, NUTS as a step and
the chains' driver in :mod:`kiln_samplers._compound`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, override

import numpy as np

from kiln_samplers._protocol import CompiledModel

LogpFn = Callable[[np.ndarray], float]

#: PyMC's rule for the proposal scale: multiply it by the factor of the first row whose
#: test the acceptance rate of the last tuning interval passes.
SCALING_RULES: tuple[tuple[Callable[[float], bool], float], ...] = (
    (lambda a: a < 0.001, 0.1),
    (lambda a: a < 0.05, 0.5),
    (lambda a: a < 0.2, 0.9),
    (lambda a: a > 0.95, 10.0),
    (lambda a: a > 0.75, 2.0),
    (lambda a: a > 0.5, 1.1),
)


def tune_scaling(scaling: float, acceptance_rate: float) -> float:
    """Return the new proposal scale after an interval with ``acceptance_rate``."""
    for test, factor in SCALING_RULES:
        if test(acceptance_rate):
            return scaling * factor
    return scaling


def safe_logp(logp: LogpFn, x: np.ndarray) -> float:
    """Return ``logp(x)``, or -inf where it is NaN or raises (a point outside the support)."""
    try:
        value = float(logp(x))
    except Exception:  # e.g. a factorization that fails: the point is rejected, as in NUTS
        return -math.inf
    return value if not math.isnan(value) else -math.inf


def metropolis_accept(rng: np.random.Generator, log_ratio: float) -> tuple[bool, float]:
    """Return (accepted, acceptance probability) of a move with ``log_ratio``."""
    accept = math.exp(min(0.0, log_ratio)) if log_ratio == log_ratio else 0.0
    return bool(rng.random() < accept), accept


@dataclasses.dataclass(frozen=True)
class StepContext:
    """What a step's chain state may need: the warm-up length, the chains' points.

    ``points`` is the live ``(chains, ndim)`` array of every chain's current point when the
    chains run in lock-step (a population step needs the others); ``chain`` is this one.
    """

    tune: int
    chain: int = 0
    points: np.ndarray | None = None


def _as_indices(indices: Any) -> np.ndarray | None:
    if indices is None:
        return None
    arr = np.asarray(indices)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise ValueError(f"indices: expected a non-empty 1-d array of ints, got {indices!r}")
    if len(np.unique(arr)) != arr.size:
        raise ValueError(f"indices: an entry is given twice in {arr.tolist()}")
    return arr.astype(np.int64)


class Step:
    """A step method over some entries of the flat vector (configuration, no state).

    ``indices`` (``None``: every entry) are the positions it updates; the driver binds
    ``None`` to all the model's entries with :meth:`bind`.
    """

    name: ClassVar[str] = "Step"
    #: The statistics of each transition, and their dtypes.
    stats_dtypes: ClassVar[dict[str, Any]] = {}
    #: Whether the step needs the other chains' current points (runs chains in lock-step).
    population: ClassVar[bool] = False
    #: Whether the step can update integer entries.
    handles_discrete: ClassVar[bool] = True

    def __init__(self, indices: Sequence[int] | np.ndarray | None = None) -> None:
        self.indices = _as_indices(indices)

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The names of the step's statistics, in the order :meth:`step` returns them."""
        return tuple(self.stats_dtypes)

    def bind(self, model: CompiledModel) -> Step:
        """Return this step with its indices set (all entries when None) and checked."""
        out = self if self.indices is not None else _copy(self)
        if out.indices is None:
            out.indices = np.arange(model.ndim, dtype=np.int64)
        if out.indices.min() < 0 or out.indices.max() >= model.ndim:
            raise ValueError(
                f"{self.name}: indices {out.indices.tolist()} outside a vector of length "
                f"{model.ndim}"
            )
        mask = _discrete_mask(model)[out.indices]
        if mask.any() and not self.handles_discrete:
            raise ValueError(
                f"{self.name} samples continuous values only; entries {out.indices[mask].tolist()} "
                "are discrete: give them to Metropolis, BinaryMetropolis or "
                "CategoricalGibbsMetropolis"
            )
        return out

    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> Any:
        """Return a chain's state for this step, starting at ``x``."""
        return None

    def step(
        self,
        model: CompiledModel,
        state: Any,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        """Advance ``x`` in place by one transition; return its log-density and stats."""
        raise NotImplementedError

    def describe(self) -> str:
        """Return the step's name for the printed assignment."""
        return self.name


def _copy(step: Step) -> Step:
    """Return a shallow copy of ``step`` (its configuration)."""
    new = object.__new__(type(step))
    new.__dict__.update(step.__dict__)
    return new


def _discrete_mask(model: CompiledModel) -> np.ndarray:
    mask = getattr(model, "discrete_mask", None)
    return np.zeros(model.ndim, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)


# --- Metropolis --------------------------------------------------------------------------


@dataclasses.dataclass
class ScaleState:
    """A tuned proposal scale and the acceptance count of the current tuning interval."""

    scaling: float
    accepted: int = 0
    steps: int = 0


def metropolis_step(
    logp_fn: LogpFn,
    rng: np.random.Generator,
    x: np.ndarray,
    logp: float,
    indices: np.ndarray,
    sd: np.ndarray,
    integer: np.ndarray,
) -> tuple[float, float, bool]:
    """Propose ``x[indices] + sd * N(0, 1)`` (the jump rounded on ``integer`` entries).

    Accept it by Metropolis (the proposal is symmetric); update ``x`` in place.
    Returns (logp, acceptance probability, accepted).
    """
    delta = sd * rng.standard_normal(indices.size)
    delta[integer] = np.round(delta[integer])
    old = x[indices].copy()
    x[indices] = old + delta
    new_logp = safe_logp(logp_fn, x)
    accepted, accept = metropolis_accept(rng, new_logp - logp)
    if not accepted:
        x[indices] = old
        return logp, accept, False
    return new_logp, accept, True


def tune_interval_update(
    state: Any, accepted: bool, tuning: bool, interval: int, field: str = "scaling"
) -> None:
    """Count an acceptance; at the end of each tuning interval, retune ``state.<field>``.

    ``state`` holds ``steps`` and ``accepted`` (the interval's counts) and the scale
    ``field`` (a :class:`ScaleState`'s ``scaling``, or DE's ``lamb``).
    """
    if not tuning:
        return
    state.steps += 1
    state.accepted += int(accepted)
    if state.steps == interval:
        setattr(state, field, tune_scaling(getattr(state, field), state.accepted / interval))
        state.steps = state.accepted = 0


class Metropolis(Step):
    """Random-walk Metropolis with a Normal proposal (rounded on integer entries).

    Parameters
    ----------
    indices
        The entries it updates (all of them when None), proposed jointly.
    S
        The proposal's standard deviation per entry (a scalar or one per entry).
    scaling
        The initial scale multiplying ``S``; tuned during warm-up when ``tune``.
    tune
        Tune ``scaling`` every ``tune_interval`` warm-up steps from the acceptance rate
        (PyMC's rule, :func:`tune_scaling`).
    """

    name = "Metropolis"
    stats_dtypes = {"accept": np.float64, "accepted": np.bool_, "scaling": np.float64}

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        S: Any = 1.0,  # noqa: N803  (PyMC's name)
        scaling: float = 1.0,
        tune: bool = True,
        tune_interval: int = 100,
    ) -> None:
        super().__init__(indices)
        _check_positive("scaling", scaling)
        _check_interval(tune_interval)
        self.S = np.asarray(S, dtype="float64")
        if np.any(self.S <= 0) or self.S.ndim > 1:
            raise ValueError(f"S: expected positive standard deviations, got {S!r}")
        self.scaling = float(scaling)
        self.tune = bool(tune)
        self.tune_interval = int(tune_interval)

    @override
    def bind(self, model: CompiledModel) -> Step:
        out = super().bind(model)
        assert out.indices is not None
        if self.S.ndim == 1 and self.S.size != out.indices.size:
            raise ValueError(f"S: {self.S.size} values for {out.indices.size} entries")
        return out

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> ScaleState:
        return ScaleState(self.scaling)

    @override
    def step(
        self,
        model: CompiledModel,
        state: ScaleState,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        integer = _discrete_mask(model)[self.indices]
        sd = state.scaling * np.broadcast_to(self.S, self.indices.shape)
        logp, accept, accepted = metropolis_step(
            model.logp, rng, x, logp, self.indices, sd, integer
        )
        scaling = state.scaling
        tune_interval_update(state, accepted, tuning and self.tune, self.tune_interval)
        return logp, (accept, accepted, scaling)


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")


def _check_interval(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"tune_interval: expected an int >= 1, got {value!r}")


# --- Slice -------------------------------------------------------------------------------


@dataclasses.dataclass
class SliceState:
    """The slice widths per entry and how many tuning steps averaged them."""

    w: np.ndarray
    n_tuned: int = 0


def slice_step(
    logp_fn: LogpFn,
    rng: np.random.Generator,
    x: np.ndarray,
    logp: float,
    i: int,
    w: float,
    max_steps: int,
) -> tuple[float, int, int]:
    """Update ``x[i]`` by univariate slice sampling (Neal 2003: stepping out, shrinking).

    Returns (logp, steps out, steps in).
    """
    x0 = x[i]
    level = logp - rng.standard_exponential()  # log of a uniform height under the density
    left = x0 - rng.random() * w
    right = left + w
    n_out = 0
    x[i] = left
    while n_out < max_steps and safe_logp(logp_fn, x) > level:
        left -= w
        x[i] = left
        n_out += 1
    x[i] = right
    while n_out < 2 * max_steps and safe_logp(logp_fn, x) > level:
        right += w
        x[i] = right
        n_out += 1
    n_in = 0
    while True:
        n_in += 1
        x[i] = left + rng.random() * (right - left)
        new_logp = safe_logp(logp_fn, x)
        if new_logp > level:
            return new_logp, n_out, n_in
        if x[i] < x0:
            left = x[i]
        else:
            right = x[i]
        if right - left < 1e-12 * max(1.0, abs(x0)):  # the slice has collapsed onto x0
            x[i] = x0
            return logp, n_out, n_in


class Slice(Step):
    """Univariate slice sampling of each entry in turn (continuous entries only).

    Parameters
    ----------
    indices
        The entries it updates (all of them when None).
    w
        The initial width of the slice's bracket; during warm-up, when ``tune``, each
        entry's width becomes the running mean of twice its jumps (as PyMC does).
    iter_limit
        The most stepping-out steps per side.
    """

    name = "Slice"
    stats_dtypes = {"nstep_out": np.int64, "nstep_in": np.int64}
    handles_discrete = False

    def __init__(
        self,
        indices: Sequence[int] | np.ndarray | None = None,
        w: float = 1.0,
        tune: bool = True,
        iter_limit: int = 1000,
    ) -> None:
        super().__init__(indices)
        _check_positive("w", w)
        self.w = float(w)
        self.tune = bool(tune)
        self.iter_limit = int(iter_limit)

    @override
    def init(
        self, model: CompiledModel, x: np.ndarray, rng: np.random.Generator, context: StepContext
    ) -> SliceState:
        assert self.indices is not None
        return SliceState(np.full(self.indices.size, self.w))

    @override
    def step(
        self,
        model: CompiledModel,
        state: SliceState,
        x: np.ndarray,
        logp: float,
        rng: np.random.Generator,
        tuning: bool,
    ) -> tuple[float, tuple[Any, ...]]:
        assert self.indices is not None
        total_out = total_in = 0
        before = x[self.indices].copy()
        for k, i in enumerate(self.indices):
            logp, n_out, n_in = slice_step(
                model.logp, rng, x, logp, int(i), float(state.w[k]), self.iter_limit
            )
            total_out += n_out
            total_in += n_in
        if tuning and self.tune:
            n = state.n_tuned
            jump = 2.0 * np.abs(x[self.indices] - before)
            state.w = np.maximum((state.w * n + jump) / (n + 1), 1e-8)
            state.n_tuned += 1
        return logp, (total_out, total_in)
