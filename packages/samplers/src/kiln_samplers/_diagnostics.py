"""Rank-normalized split R-hat and bulk ESS of many parameters at once.

The same statistics as ArviZ's defaults (``arviz_stats.rhat(method="rank")`` and
``arviz_stats.ess(method="bulk")``; Vehtari et al. 2021, https://arxiv.org/abs/1903.08008),
computed over every element of a variable in one pass of array operations. ArviZ runs
its per-element code once per scalar parameter (about 2 ms each), which on a model with
a few hundred parameters costs more than sampling it; the tests check that these
functions return ArviZ's numbers.

:func:`rhat_ess` takes draws shaped ``(chain, draw, *shape)`` and returns two arrays
shaped ``shape``. Two implementations compute the same numbers (a test compares them,
and both to ArviZ): the C library of the NUTS kernel (``_diagnostics_kernel.c``, loaded
by :mod:`kiln_samplers._c_nuts`), one call without the GIL that sorts, ranks and sums
each element in a few linear passes (:func:`start_screened_rhat_ess`; it also runs the
screen of :func:`kiln_samplers.check_diagnostics`); and NumPy, used where the library is
not loaded, where every array is ``(k, chain, draw)``: one row per element, so that
sorts and FFTs run over contiguous memory.

Only NumPy and the standard library: importing ``scipy.special`` and ``scipy.fft`` would
cost about 0.25 s of a process that samples a small model. The normal quantiles come
from :class:`statistics.NormalDist` (Wichura's AS241, about 1e-15 from
``scipy.special.ndtri``), the transforms from ``numpy.fft``.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

_MIN_DRAWS = 4


def _split_chains(ary: np.ndarray) -> np.ndarray:
    """Split every chain into its first and last halves (a middle odd draw is dropped).

    The halves of chain ``c`` are chains ``2c`` and ``2c + 1`` (the statistics do not
    depend on the chains' order); for an even number of draws, a view.
    """
    k, chains, draws = ary.shape
    half = draws // 2
    if draws % 2 == 0:
        return ary.reshape(k, 2 * chains, half)
    return np.stack((ary[:, :, :half], ary[:, :, draws - half :]), axis=2).reshape(
        k, 2 * chains, half
    )


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


def _ndtri(p: np.ndarray) -> np.ndarray:
    """Return the standard normal quantile of each probability in ``p`` (all in (0, 1))."""
    inv_cdf = statistics.NormalDist().inv_cdf
    return np.array([inv_cdf(x) for x in p.tolist()], dtype=np.float64)


def next_fast_len(target: int) -> int:
    """Return the smallest length >= ``target`` whose prime factors are all <= 11.

    ``numpy.fft`` (pocketfft) transforms such lengths fastest; the same numbers as
    ``scipy.fft.next_fast_len``.
    """
    n = max(int(target), 1)
    while True:
        rest = n
        for prime in (2, 3, 5, 7, 11):
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return n
        n += 1


@functools.lru_cache(maxsize=8)
def _normal_scores(size: int) -> np.ndarray:
    """Return the normal quantiles of the ranks ``1..size`` (Blom's offsets, as ArviZ)."""
    scores = _ndtri((np.arange(1.0, size + 1.0) - 0.375) / (size + 0.25))
    scores.flags.writeable = False
    return scores  # type: ignore[no-any-return]


def _z_scale(at: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Return each row's values replaced by the normal quantiles of their average ranks.

    ``ordered`` holds the sorted rows, ``(k, size)``, and ``at`` where each sorted value
    is in the rows laid end to end (row ``i``'s sort order plus ``i * size``).
    The ``size`` quantiles of the ranks ``1..size`` are computed once (per size) and
    scattered by each row's order; a run of tied values (discrete draws, the two values
    either side of the median once folded) gets the quantile of its mean rank instead,
    the value ``scipy.stats.rankdata(method="average")`` then the quantile would give.
    """
    k, size = ordered.shape
    z = np.empty(k * size)
    z[at] = _normal_scores(size)  # each row's scores, scattered by its order
    tie = ordered[:, 1:] == ordered[:, :-1]
    if tie.any():
        row, pos = np.nonzero(tie)  # a tie between positions pos and pos + 1 of a row
        flat = row * size + pos  # ascending; no run crosses rows (pos < size - 1)
        starts = np.ones(flat.size, dtype=bool)
        starts[1:] = flat[1:] != flat[:-1] + 1
        ends = np.ones(flat.size, dtype=bool)
        ends[:-1] = starts[1:]
        run = np.cumsum(starts) - 1
        first, last = pos[starts][run], pos[ends][run] + 1
        rank = (first + last) / 2.0 + 1.0
        value = _ndtri((rank - 0.375) / (size + 0.25))
        z[at[row, pos]] = value
        z[at[row, pos + 1]] = value
    return z.reshape(k, size)


def _folded_order(
    at: np.ndarray, ordered: np.ndarray, median: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`_z_scale`'s ``at`` and ``ordered`` of each row's ``|x - median|``.

    From the rows' own sort (``at``, ``ordered``): along ``ordered`` the folded values
    fall until the median and rise after it, so reversing the first part gives two
    sorted runs, which a stable sort (timsort) merges in one linear pass instead of a
    new sort. Where every row has as many values below its median as above (no tie
    at the median), the runs are two slices; otherwise each row's split is gathered.
    """
    k, size = ordered.shape
    rows = (np.arange(k) * size)[:, None]
    below = (ordered < median[:, None]).sum(axis=1)
    half = size // 2
    if size % 2 == 0 and (below == half).all():
        runs = np.empty_like(ordered)
        np.subtract(median[:, None], ordered[:, half - 1 :: -1], out=runs[:, :half])
        np.subtract(ordered[:, half:], median[:, None], out=runs[:, half:])
        runs_at = np.concatenate((at[:, half - 1 :: -1], at[:, half:]), axis=1)
    else:
        j = np.arange(size)
        flat_at = np.where(j < below[:, None], below[:, None] - 1 - j, j) + rows
        runs = np.abs(ordered - median[:, None]).ravel()[flat_at]
        runs_at = at.ravel()[flat_at]
    merge_at = np.argsort(runs, axis=1, kind="stable")
    merge_at += rows
    return runs_at.ravel()[merge_at], runs.ravel()[merge_at]


def _chain_moments(ary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each chain's mean and variance (``ddof=1``) of ``(k, chain, draw)`` rows.

    From the sums of the values and of their squares (one pass each; the values here
    are normal scores, whose squares' sum loses nothing that matters to cancellation).
    """
    draws = ary.shape[2]
    mean = ary.sum(axis=2) / draws
    squares = np.einsum("kcd,kcd->kc", ary, ary)
    return mean, (squares - draws * mean * mean) / (draws - 1)


def _rhat(mean: np.ndarray, var: np.ndarray, draws: int) -> np.ndarray:
    """Return the basic potential scale reduction from the chains' means and variances."""
    between = draws * np.var(mean, axis=1, ddof=1)
    within = var.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + draws - 1) / draws)  # type: ignore[no-any-return]


def _ess(ary: np.ndarray, mean: np.ndarray, constant: np.ndarray) -> np.ndarray:
    """Return the effective sample size of each row (Geyer's initial monotone sequence).

    ``mean`` holds the chains' means (:func:`_chain_moments`) and ``constant`` marks the
    rows whose values are all equal (their ESS is the number of draws, as ArviZ's).
    ``ary`` is centred in place (fresh memory is much of what this costs).
    """
    k, chains, draws = ary.shape
    total = chains * draws
    n_fft = next_fast_len(2 * draws)
    ary -= mean[:, :, None]
    spectrum = np.fft.rfft(ary, n=n_fft, axis=2)
    # The chains' mean autocovariance: one inverse transform of their mean power.
    re, im = spectrum.real, spectrum.imag
    power = (np.einsum("kcf,kcf->kf", re, re) + np.einsum("kcf,kcf->kf", im, im)) / chains
    mean_acov = np.fft.irfft(power, n=n_fft, axis=1)[:, :draws] / draws  # (k, draw)
    mean_var = mean_acov[:, 0] * draws / (draws - 1.0)
    var_plus = mean_var * (draws - 1.0) / draws
    if chains > 1:
        var_plus = var_plus + np.var(mean, axis=1, ddof=1)
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
    return np.where(constant, float(total), total / tau)


def rhat_ess(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each element's rank-normalized split R-hat and bulk ESS.

    NaN where ArviZ answers NaN: an element with a NaN draw, fewer than 4 draws, and
    (R-hat only) a single chain. Computed by the C library when this process has
    loaded it (:func:`start_screened_rhat_ess`), by NumPy otherwise: the same numbers.
    """
    ary = np.asarray(samples, dtype=float)
    if ary.ndim < 2:
        raise ValueError(f"samples: expected an array shaped (chain, draw, ...), got {ary.shape}")
    chains, draws, shape = ary.shape[0], ary.shape[1], ary.shape[2:]
    if draws < _MIN_DRAWS:
        return np.full(shape, np.nan), np.full(shape, np.nan)
    columns = ary.reshape(chains, draws, -1)
    pending = start_screened_rhat_ess([columns])
    if pending is None:
        return _numpy_rhat_ess_of(columns, shape)
    rhat, ess, status = pending()
    left = np.flatnonzero(status == _LEFT_TO_NUMPY)
    if left.size:
        rhat[left], ess[left] = _numpy_rhat_ess_of(columns[:, :, left], (left.size,))
    if chains < 2:
        rhat[:] = np.nan
    return rhat.reshape(shape), ess.reshape(shape)


def _numpy_rhat_ess_of(
    columns: np.ndarray, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`rhat_ess` of ``(chain, draw, k)`` columns, computed by NumPy."""
    ary = np.ascontiguousarray(columns.transpose(2, 0, 1))
    chains = ary.shape[1]
    invalid = np.isnan(ary).any(axis=(1, 2))
    if invalid.all():
        return np.full(shape, np.nan), np.full(shape, np.nan)
    split = _split_chains(np.where(invalid[:, None, None], 0.0, ary) if invalid.any() else ary)
    # the one sort, of every row's pooled draws
    order = np.argsort(split.reshape(split.shape[0], -1), axis=1)
    rhat, ess = _numpy_rhat_ess(split, order, with_rhat=chains > 1)
    if chains < 2:
        rhat = np.full(rhat.shape, np.nan)
    return np.where(invalid, np.nan, rhat).reshape(shape), np.where(invalid, np.nan, ess).reshape(
        shape
    )


#: Lags the C library sums before it leaves an element's ESS to NumPy's transforms (an
#: element whose draws are far from independent: summing lag by lag would cost more).
_MAX_LAG = 64
#: :func:`start_screened_rhat_ess`'s status of an element: its screen's values, its values on
#: every draw, or its values on every draw left to NumPy (more than ``_MAX_LAG`` lags).
SCREENED, EXACT, _LEFT_TO_NUMPY = 0, 1, 2


def _native_library() -> Any:
    """Return the C library holding ``kiln_screened_rhat_ess`` if loaded, else None.

    The library of the C NUTS kernel (:mod:`kiln_samplers._c_nuts`): loaded by a process
    that sampled with it; never built nor loaded here.
    """
    from kiln_samplers._c_nuts import loaded_library

    return loaded_library()


def native_available() -> bool:
    """Whether :func:`start_screened_rhat_ess` computes (the C library is loaded)."""
    return _native_library() is not None


class PendingRhatEss:
    """:func:`start_screened_rhat_ess`'s work in threads of the C library; call it to wait.

    The threads are POSIX threads that never take the GIL: Python threads run
    meanwhile. The object holds every array they read and write until they are done
    (waited for when called, or when the object is collected).
    """

    def __init__(
        self,
        lib: Any,
        handles: list[int | None],
        held: list[Any],
        leases: contextlib.ExitStack,
        out: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        self._library, self._handles, self._held, self._leases = lib, handles, held, leases
        self._out = out

    def __call__(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Wait for the threads; return R-hat, ESS and status of every element."""
        self._join()
        return self._out

    def _join(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            self._library.kiln_screened_rhat_ess_join(handle)  # (ctypes: without the GIL)
        self._held = []
        self._leases.close()

    def __del__(self) -> None:
        self._join()


def start_screened_rhat_ess(
    columns: list[np.ndarray],
    step: int = 1,
    kept: int = 0,
    rhat_above: float = np.inf,
    ess_below: float = 0.0,
    extremes: bool = False,
) -> PendingRhatEss | None:
    """Start computing R-hat, bulk ESS and status of every element of ``columns``.

    ``columns`` are ``(chain, draw, k_i)`` arrays (views of any strides; at least 4
    draws), their elements taken one after the other. With ``step >= 2`` each element
    is first screened on its draws ``t * step``, ``t < kept``, and computed on every draw
    where the screen gives an R-hat above ``rhat_above`` (or NaN) or an ESS below
    ``ess_below`` (and, with ``extremes``, for the largest R-hat and the smallest ESS);
    the status says which (``SCREENED``, ``EXACT``; the third value: left to NumPy, the
    values not set). With ``step < 2`` every element on every draw.

    Computed by the C library (``kiln_screened_rhat_ess`` in ``_diagnostics_kernel.c``)
    in threads of its own: call the returned :class:`PendingRhatEss` for the results.
    Two threads, half the elements each, when there are many values to read and no
    ``extremes`` (which are of all the elements); one otherwise. None when this process
    has not loaded the library (:func:`native_available`).
    """
    lib = _native_library()
    if lib is None:
        return None
    columns = [np.asarray(c, dtype=np.float64) for c in columns]
    chains, draws = columns[0].shape[:2]
    address = np.concatenate(
        [c.ctypes.data + np.arange(c.shape[2], dtype=np.int64) * c.strides[2] for c in columns]
    )
    chain_stride = np.concatenate([np.full(c.shape[2], c.strides[0]) for c in columns])
    draw_stride = np.concatenate([np.full(c.shape[2], c.strides[1]) for c in columns])
    n = address.size
    size = 2 * chains * (draws // 2)
    scores = _normal_scores(size)
    kept_scores = _normal_scores(2 * chains * (kept // 2)) if step >= 2 else scores
    rhat, ess, status = np.empty(n), np.empty(n), np.empty(n, dtype=np.int8)
    read = n * chains * (min(draws, kept) if step >= 2 else draws)
    parts = [slice(0, n)]
    if not extremes and n > 1 and read >= _THREADED_VALUES:
        parts = [slice(0, n // 2), slice(n // 2, n)]
    leases = contextlib.ExitStack()
    held = [columns, address, chain_stride, draw_stride, scores, kept_scores]
    handles: list[int | None] = []
    # (made first: whatever happens next, it holds the arrays until the threads end)
    pending = PendingRhatEss(lib, handles, held, leases, (rhat, ess, status))
    for part in parts:
        work = leases.enter_context(scratch("work", 7 * size + 4 * chains))
        handles.append(
            lib.kiln_screened_rhat_ess_start(
                part.stop - part.start, chains, draws, address[part].ctypes.data,
                chain_stride[part].ctypes.data, draw_stride[part].ctypes.data, step, kept,
                rhat_above, ess_below, bool(extremes), scores.ctypes.data,
                kept_scores.ctypes.data, _MAX_LAG, work.ctypes.data, rhat[part].ctypes.data,
                ess[part].ctypes.data, status[part].ctypes.data,
            )
        )  # fmt: skip
    return pending


#: Values read (elements x chains x draws) above which :func:`start_screened_rhat_ess`
#: uses two threads.
_THREADED_VALUES = 200_000


#: The scratch arrays of the diagnostics (the C library's work array, the rows the
#: NumPy screen reads), kept for the next call, whichever thread makes it, when at most
#: ``_KEPT_SCRATCH`` doubles (4 MB): fresh memory costs a page fault per 4 kB, which is
#: much of what the diagnostics of a small model cost.
_kept_scratch: dict[str, np.ndarray] = {}
_scratch_lock = threading.Lock()
_KEPT_SCRATCH = 1 << 19


@contextlib.contextmanager
def scratch(name: str, size: int) -> Iterator[np.ndarray]:
    """Lend a float array ``name`` of ``size`` elements (its contents: any) for a block.

    Kept for the next block that asks for ``name`` (one at a time: a block that asks
    while another holds it gets a new array). Keep no view of it after the block.
    """
    with _scratch_lock:
        kept = _kept_scratch.pop(name, None)
    array = kept if kept is not None and kept.size >= size else np.empty(size)
    try:
        yield array[:size]
    finally:
        if array.size <= _KEPT_SCRATCH:
            with _scratch_lock:
                _kept_scratch[name] = array


def _numpy_rhat_ess(
    split: np.ndarray, order: np.ndarray, with_rhat: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Return R-hat and ESS of the split ``(k, chain, draw)`` rows, given their ``order``.

    ``order`` is each row's argsort (consumed).
    """
    k = split.shape[0]
    flat = split.reshape(k, -1)
    size = flat.shape[1]
    at = order  # positions in the rows laid end to end
    at += (np.arange(k) * size)[:, None]
    ordered = flat.ravel()[at]
    z = _z_scale(at, ordered).reshape(split.shape)
    mean, var = _chain_moments(z)
    constant = ordered[:, 0] == ordered[:, -1]  # all ties: the normal scores are too
    ess = _ess(z, mean, constant)  # (centres z)
    if not with_rhat:
        return np.full(k, np.nan), ess
    half = split.shape[2]
    bulk = _rhat(mean, var, half)
    median = 0.5 * (ordered[:, (size - 1) // 2] + ordered[:, size // 2])  # np.median's
    folded = _z_scale(*_folded_order(at, ordered, median)).reshape(split.shape)
    tail = _rhat(*_chain_moments(folded), half)
    with np.errstate(invalid="ignore"):
        return np.where(tail > bulk, tail, bulk), ess  # Python's max(bulk, tail), as ArviZ
