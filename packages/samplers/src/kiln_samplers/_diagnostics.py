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
    order = np.argsort(values, axis=-1)
    return _average_ranks(values, order, np.take_along_axis(values, order, axis=-1))


def _average_ranks(values: np.ndarray, order: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Return :func:`average_ranks` given the sort ``order`` and the ``ordered`` values."""
    n = values.shape[-1]
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


def _z_scale(flat: np.ndarray, order: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Replace each row's values by the normal quantiles of their ranks.

    ``flat`` is ``(k, size)`` (only its shape is read), ``order`` its rows' sort order
    and ``ordered`` the sorted rows. Without ties (continuous draws) the ranks are a
    permutation of ``1..size``: the ``size`` quantiles are computed once and scattered
    by each row's order.
    """
    from scipy import special

    k, size = flat.shape
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        rank = _average_ranks(flat, order, ordered)
        return special.ndtri((rank - 0.375) / (size + 0.25))  # type: ignore[no-any-return]
    quantiles = special.ndtri((np.arange(1.0, size + 1.0) - 0.375) / (size + 0.25))
    z = np.empty(k * size)
    z[(order + (np.arange(k) * size)[:, None]).ravel()] = np.tile(quantiles, k)
    return z.reshape(k, size)


def _folded_order(
    order: np.ndarray, ordered: np.ndarray, median: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return an array shaped like the rows, the sort order of ``|x - median|``, sorted.

    From the rows' own sort: along ``ordered`` the folded values fall until the median
    and rise after it, so reversing the first part gives two sorted runs, which a
    stable sort (timsort) merges in one linear pass instead of a new sort.
    """
    size = ordered.shape[1]
    folded_sorted_x = np.abs(ordered - median[:, None])
    below = (ordered < median[:, None]).sum(axis=1)[:, None]
    j = np.arange(size)
    runs_index = np.where(j < below, below - 1 - j, j)
    runs = np.take_along_axis(folded_sorted_x, runs_index, axis=1)
    merge = np.argsort(runs, axis=1, kind="stable")
    order_f = np.take_along_axis(order, np.take_along_axis(runs_index, merge, axis=1), axis=1)
    # The folded rows themselves are not needed (only their shape): the sorted x's.
    return folded_sorted_x, order_f, np.take_along_axis(runs, merge, axis=1)


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
    flat = split.reshape(split.shape[0], -1)
    order = np.argsort(flat, axis=1)  # the one sort (of every row's pooled draws)
    ordered = np.take_along_axis(flat, order, axis=1)
    z = _z_scale(flat, order, ordered).reshape(split.shape)
    ess = np.where(invalid, np.nan, _ess(z))
    if chains < 2:
        return np.full(shape, np.nan), ess.reshape(shape)
    bulk = _rhat(z)
    size = flat.shape[1]
    median = 0.5 * (ordered[:, (size - 1) // 2] + ordered[:, size // 2])  # np.median's
    tail = _rhat(_z_scale(*_folded_order(order, ordered, median)).reshape(split.shape))
    with np.errstate(invalid="ignore"):
        rhat = np.where(tail > bulk, tail, bulk)  # Python's max(bulk, tail), as ArviZ
    return np.where(invalid, np.nan, rhat).reshape(shape), ess.reshape(shape)
