"""Stan's windowed warm-up schedule for the diagonal mass matrix."""

from __future__ import annotations

import numpy as np


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


def regularized_variance(welford: np.ndarray) -> np.ndarray:
    """Return Stan's regularized variance estimate from Welford sums (count, mean, M2)."""
    n = welford[0, 0]
    var = welford[2] / max(n - 1.0, 1.0)
    return (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
