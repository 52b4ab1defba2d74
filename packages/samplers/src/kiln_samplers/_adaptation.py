"""The warm-up schedules of kiln's NUTS for its diagonal mass matrix.

``"stan"``: Stan's windowed adaptation (the variance of the draws over doubling
windows). ``"grad"``: nutpie's (nuts-rs's) gradient-based estimate over short
switching windows.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kiln_samplers import _nuts_core as core


def warmup_schedule(
    tune: int, init_buffer: int = 75, term_buffer: int = 50, base: int = 25
) -> tuple[int, list[int]]:
    """Return where the first slow window starts, and where each window ends.

    The mass matrix is re-estimated after each window end.

    Stan's schedule: a fast initial buffer (step size only), then windows of doubling
    length (25, 50, 100, ...; the last one stretched to the terminal buffer), then a
    fast terminal buffer. Short warm-ups shrink the buffers to 15% / 10% of ``tune``;
    below 20 iterations only the step size adapts.
    """
    if tune < 20:
        return tune, []
    if init_buffer + term_buffer + base > tune:
        init_buffer, term_buffer = int(0.15 * tune), int(0.1 * tune)
        base = tune - init_buffer - term_buffer
    ends = []
    start, size = init_buffer, base
    last = tune - term_buffer
    while start < last:
        end = start + size
        if end + 2 * size > last:  # the next window would not fit: stretch this one
            end = last
        ends.append(end)
        start, size = end, 2 * size
    return init_buffer, ends


#: The share of the warm-up that ends kiln's default one (``metric="auto"``) adapting
#: the step size only: nutpie's, at least Stan's 50 iterations.
FINAL_STEP_SHARE = 0.15
#: Where the final dual averaging of the default warm-up starts counting, on a
#: posterior whose last window looks Gaussian. Restarted at 0, its gain of about
#: 1/(γ√t) for t = 1..150 moves the log step by 0.3-0.8 per iteration, and the average
#: of such iterates accepts more than the target (acceptance is concave in the log
#: step): 0.84-0.87 at 0.8 on the posteriordb regressions. Counted from 3000 (the
#: averaged step restarted with it), the gain stays near 1/(γ√3000), the iterates move
#: little and the chains accept 0.80-0.81 (400 and 1500: 0.81-0.83). On a funnel the
#: larger step costs divergences, so there the count restarts at 0.
GAUSSIAN_FINAL_COUNT = 3000.0


def final_buffer(tune: int) -> int:
    """Return the step-size-only iterations that end kiln's default warm-up.

    ``max(50, 0.15 tune)``: Stan's 50 leave the dual averaging too little time to settle,
    and its averaged step size ends smaller than ``target_accept`` asks for (an
    acceptance of 0.85-0.91 at a target of 0.8 on M1-M3, where nutpie reaches 0.80-0.82).
    """
    return max(50, int(FINAL_STEP_SHARE * tune))


def regularized_variance(welford: np.ndarray) -> np.ndarray:
    """Return Stan's regularized variance estimate from Welford sums (count, mean, M2)."""
    n = welford[0, 0]
    var = welford[2] / max(n - 1.0, 1.0)
    return (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))


def gradient_variance(welford: np.ndarray) -> np.ndarray:
    """Return nutpie's inverse-mass estimate from Welford sums: sqrt(Var[draws] / Var[grads]).

    For a Gaussian both estimate its variances; where the scales change across the
    posterior (hierarchical scales), the gradients' variance weighs the regions the
    draws visit less often. An element whose estimate is zero or not finite (or a
    window of fewer than 3 draws) takes :func:`regularized_variance`'s; the others
    are clamped to :data:`INV_MASS_LIMITS` (nutpie's).
    """
    fallback = regularized_variance(welford)
    if welford[0, 0] < 3.0:
        return fallback
    var_draws, var_grads = welford[2], welford[4]
    ok = (var_draws > 0.0) & (var_grads > 0.0) & np.isfinite(var_draws) & np.isfinite(var_grads)
    with np.errstate(over="ignore"):  # an overflow is past the upper limit
        ratio = np.sqrt(np.where(ok, var_draws, 1.0) / np.where(ok, var_grads, 1.0))
    return np.where(ok, np.clip(ratio, *INV_MASS_LIMITS), fallback)


# The gradient-based diagonal adaptation (nutpie's, from nuts-rs): the inverse mass of
# each coordinate is sqrt(Var[draws] / Var[gradients]) (for a Gaussian, its variance),
# estimated from short windows of recent draws; the kernel updates it after each draw
# (_nuts_core.grad_metric), this module says when the windows switch.

#: The limits of an inverse-mass element (nuts-rs's).
INV_MASS_LIMITS = (core.INV_MASS_LOWER, core.INV_MASS_UPPER)


class GradSchedule(NamedTuple):
    """The phases of the gradient-based warm-up (draw indices, 0-based).

    Draws before ``early_end`` switch the estimators every ``early_switch`` draws;
    later ones after windows of ``switch`` draws at first, each next one ``growth``
    times longer; from ``final_start`` on only the step size adapts.
    """

    early_end: int
    final_start: int
    early_switch: int
    switch: int
    growth: float


def grad_schedule(
    tune: int,
    early_window: float = 0.3,
    step_size_window: float = 0.15,
    early_switch: int = 10,
    switch: int = 80,
    growth: float = 1.5,
) -> GradSchedule:
    """Return nutpie's schedule for ``tune`` warm-up draws (its defaults).

    The first ``early_window`` of the warm-up is the early phase (short windows: the
    metric follows the chain quickly from its start); the last ``step_size_window`` adapts
    the step size only.
    """
    return GradSchedule(
        int(early_window * tune), tune - int(step_size_window * tune), early_switch, switch, growth
    )


class GradWindows:
    """When the windows of the gradient-based warm-up switch: nuts-rs's rule, decided online.

    The current (background) window switches once it holds the phase's window size
    (draws that did not move are not counted; the start point counts in the first) and
    the next window still fits before the final phase; otherwise it keeps growing. The
    main phase's first window is at least what the background holds when the early
    phase ends; each next one is ``growth`` times longer.
    """

    def __init__(self, schedule: GradSchedule) -> None:
        self.schedule = schedule
        self.window = schedule.switch  # the main phase's current window size

    def size(self, draw: int) -> int:
        """Return how many points the background needs before a switch after ``draw``."""
        early = draw < self.schedule.early_end
        return self.schedule.early_switch if early else self.window

    def start(self, draw: int, count: int) -> None:
        """Note the background's ``count`` before ``draw`` runs (the early phase's end)."""
        if draw == self.schedule.early_end:
            self.window = max(self.window, count)

    def following(self, draw: int) -> int:
        """Return the size of the window that a switch after ``draw`` would start."""
        every = self.size(draw)
        if draw < self.schedule.early_end:
            return every
        return max(every + 1, math.floor(every * self.schedule.growth + 0.5))

    def late(self, draw: int) -> bool:
        """Whether no window started after ``draw`` would end before the final phase."""
        return draw + self.following(draw) > self.schedule.final_start

    def switches(self, draw: int, count: int) -> bool:
        """Whether the windows switch after ``draw``, the background holding ``count`` points."""
        if count < self.size(draw) or self.late(draw):
            return False
        if draw >= self.schedule.early_end:
            self.window = self.following(draw)
        return True


def switch_draws(schedule: GradSchedule) -> list[int]:
    """Return the draws after which the windows switch when every draw moves."""
    windows, out, count = GradWindows(schedule), [], 1
    for draw in range(schedule.final_start):
        windows.start(draw, count)
        count += 1
        if windows.switches(draw, count):
            out.append(draw)
            count = 0
    return out


def new_welford(n: int) -> np.ndarray:
    """Return empty Welford sums of ``n`` coordinates (``_nuts_core.WELFORD_ROWS`` rows)."""
    return np.zeros((core.WELFORD_ROWS, n))


def initial_inv_mass(grad: np.ndarray) -> np.ndarray:
    """Return the first inverse mass: 1 / |gradient| at the start point (clamped).

    A zero or non-finite gradient element gives 1.
    """
    size = np.abs(grad)
    ok = np.isfinite(size) & (size > 0.0)
    return np.where(ok, 1.0 / np.clip(np.where(ok, size, 1.0), *INV_MASS_LIMITS), 1.0)
