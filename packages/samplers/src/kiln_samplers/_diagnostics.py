"""Rank-normalized split R-hat and bulk ESS of many parameters at once.

The same statistics as ArviZ's defaults (``arviz_stats.rhat(method="rank")`` and
``arviz_stats.ess(method="bulk")``; Vehtari et al. 2021, https://arxiv.org/abs/1903.08008),
computed over every element of a variable in one pass of array operations. ArviZ runs
its per-element code once per scalar parameter (about 2 ms each), which on a model with
a few hundred parameters costs more than sampling it; the tests check that these
functions return ArviZ's numbers.

:func:`rhat_ess` takes draws shaped ``(chain, draw, *shape)`` and returns two arrays
shaped ``shape``. Internally every array is ``(k, chain, draw)``: one row per element,
so that sorts and FFTs run over contiguous memory.
"""

from __future__ import annotations

import numpy as np

_MIN_DRAWS = 4


def _as_rows(samples: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """Return ``samples`` as a contiguous float ``(k, chain, draw)`` array, and ``shape``."""
    ary = np.asarray(samples, dtype=float)
    if ary.ndim < 2:
        raise ValueError(f"samples: expected an array shaped (chain, draw, ...), got {ary.shape}")
    rows = ary.reshape(ary.shape[0], ary.shape[1], -1).transpose(2, 0, 1)
    return np.ascontiguousarray(rows), ary.shape[2:]


def _split_chains(ary: np.ndarray) -> np.ndarray:
    """Split every chain into its first and last halves (a middle odd draw is dropped)."""
    half = ary.shape[2] // 2
    return np.concatenate((ary[:, :, :half], ary[:, :, ary.shape[2] - half :]), axis=1)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Return the 1-based ranks along the last axis of ``values``, ties given their mean.

    ``scipy.stats.rankdata(values, method="average", axis=-1)``, without importing
    scipy.stats (half a second).
    """
    n = values.shape[-1]
    order = np.argsort(values, axis=-1)
    ordered = np.take_along_axis(values, order, axis=-1)
    position = np.broadcast_to(np.arange(n), values.shape)
    ranks = np.empty(values.shape)
    tie = ordered[..., 1:] == ordered[..., :-1]
    if not tie.any():  # continuous draws: the ranks are the inverse permutation
        np.put_along_axis(ranks, order, position + 1.0, axis=-1)
        return ranks
    starts = np.ones(values.shape, dtype=bool)
    starts[..., 1:] = ~tie
    ends = np.ones(values.shape, dtype=bool)
    ends[..., :-1] = ~tie
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position, n - 1), -1), -1), -1)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=-1)
    return ranks


def _z_scale(ary: np.ndarray) -> np.ndarray:
    """Replace each row's values by the normal quantiles of their pooled ranks."""
    from scipy import special

    k, chains, draws = ary.shape
    size = chains * draws
    rank = average_ranks(ary.reshape(k, size))
    return special.ndtri((rank - 0.375) / (size + 0.25)).reshape(k, chains, draws)


def _rhat(ary: np.ndarray) -> np.ndarray:
    """Return the basic potential scale reduction of each row of ``(k, chain, draw)``."""
    draws = ary.shape[2]
    between = draws * np.var(ary.mean(axis=2), axis=1, ddof=1)
    within = np.var(ary, axis=2, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + draws - 1) / draws)


def _ess(ary: np.ndarray) -> np.ndarray:
    """Return the effective sample size of each row (Geyer's initial monotone sequence)."""
    from scipy import fft

    k, chains, draws = ary.shape
    total = chains * draws
    n_fft = fft.next_fast_len(2 * draws)
    centred = ary - ary.mean(axis=2, keepdims=True)
    spectrum = np.fft.rfft(centred, n=n_fft, axis=2)
    acov = np.fft.irfft(spectrum * np.conjugate(spectrum), n=n_fft, axis=2)[..., :draws] / draws
    mean_acov = acov.mean(axis=1)  # (k, draw)
    mean_var = mean_acov[:, 0] * draws / (draws - 1.0)
    var_plus = mean_var * (draws - 1.0) / draws
    if chains > 1:
        var_plus = var_plus + np.var(ary.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - mean_acov) / var_plus[:, None]
    rho[:, 0] = 1.0
    # Pairs (rho[2j], rho[2j+1]) for j = 0..last; the sequence stops at the first pair
    # whose sum is not positive (that pair's even term still counts when positive).
    last = max((draws - 3) // 2, 0)
    pairs = rho[:, 0 : 2 * last + 1 : 2] + rho[:, 1 : 2 * last + 2 : 2]
    nonpositive = pairs <= 0.0
    stop = np.where(nonpositive.any(axis=1), nonpositive.argmax(axis=1), last)
    monotone = np.minimum.accumulate(pairs, axis=1)
    kept = np.arange(pairs.shape[1]) < stop[:, None]
    rows = np.arange(k)
    even = rho[rows, 2 * stop]
    tail = np.where((stop == 0) | (pairs[rows, stop] >= 0.0) | (even > 0.0), even, 0.0)
    tau = -1.0 + 2.0 * np.where(kept, monotone, 0.0).sum(axis=1) + tail
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = total / tau
    constant = (ary.max(axis=(1, 2)) - ary.min(axis=(1, 2))) < np.finfo(float).resolution
    return np.where(constant, float(total), ess)


def rhat_ess(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each element's rank-normalized split R-hat and bulk ESS.

    NaN where ArviZ answers NaN: an element with a NaN draw, fewer than 4 draws, and
    (R-hat only) a single chain.
    """
    ary, shape = _as_rows(samples)
    chains, draws = ary.shape[1], ary.shape[2]
    invalid = np.isnan(ary).any(axis=(1, 2)) | (draws < _MIN_DRAWS)
    if invalid.all():
        return np.full(shape, np.nan), np.full(shape, np.nan)
    split = _split_chains(np.where(invalid[:, None, None], 0.0, ary))
    z = _z_scale(split)
    ess = np.where(invalid, np.nan, _ess(z))
    if chains < 2:
        return np.full(shape, np.nan), ess.reshape(shape)
    bulk = _rhat(z)
    tail = _rhat(_z_scale(np.abs(split - np.median(split, axis=(1, 2), keepdims=True))))
    with np.errstate(invalid="ignore"):
        rhat = np.where(tail > bulk, tail, bulk)  # Python's max(bulk, tail), as ArviZ
    return np.where(invalid, np.nan, rhat).reshape(shape), ess.reshape(shape)
