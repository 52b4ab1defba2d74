"""kiln's NUTS: a functional core over a typed chain state, and a thin class on top.

``init_chain`` makes a :class:`ChainState`; ``run_chain`` advances it through warm-up
(a diagonal mass matrix, by Stan's windowed adaptation or nutpie's gradient-based one,
or a dense one where the warm-up finds correlations it can fit, and a dual-averaging
step size) and sampling, in chunks: each chunk runs in compiled code (a kernel calling
the model's native log-density, GIL released) or, for models without one, in Python
calling ``model.logp_dlogp``. The kernel is C
(:mod:`kiln_samplers._c_nuts`), or Numba's without a C compiler; while Numba's first
compile is still running in the background, the chunks run the same functions in
Python on the native log-density (:class:`_UntilCompiled`). Between chunks the schedule
is applied; a chunk runs in pieces of at most :data:`PIECE_S` (:class:`_Pieces`),
between which progress is reported and a stop request ends the chain early.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_samplers import _nuts_core as core
from kiln_samplers._adaptation import (
    GAUSSIAN_FINAL_COUNT,
    GradWindows,
    final_buffer,
    grad_schedule,
    gradient_variance,
    initial_inv_mass,
    new_welford,
    regularized_variance,
    warmup_schedule,
)
from kiln_samplers._dense_metric import (
    AUTO_MAX_DIM,
    DenseMetric,
    looks_gaussian,
    prefers_dense,
    regularized_covariance,
)
from kiln_samplers._native import NativeLogp
from kiln_samplers._nuts_settings import (
    ChainResult,
    ChainState,
    NutsSettings,
    is_dense,
    jitter_of,
)
from kiln_samplers._protocol import CompiledModel, NativePointers

#: The statistic the step size targets in the final buffer of ``metric="auto"`` where
#: the chain keeps the dense metric: nuts-rs's symmetric acceptance
#: (``_nuts_core.ADAPT_SYMMETRIC``).
AUTO_FINAL_STEP = core.ADAPT_SYMMETRIC


#: The warnings said once per process (``_warn_once``), by key.
_WARNINGS = {
    "dense": (
        "metric='dense': kiln's C NUTS kernel is not available here (no C compiler, or "
        "its build failed), so the chains run NUTS in Python on the model's native "
        "log-density, which is much slower; install a C compiler (cc) for the compiled "
        "kernel"
    ),
    "auto": (
        "metric='auto': the warm-up found correlations that a dense mass matrix would "
        "fit, but kiln's C NUTS kernel is not available here (no C compiler), and "
        "without it the dense metric's chains would run in Python; the chains keep the "
        "diagonal mass matrix (metric='dense' runs them in Python)"
    ),
}
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str) -> None:
    """Say the warning ``_WARNINGS[key]`` once per process (chains run in threads)."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(_WARNINGS[key], RuntimeWarning, stacklevel=4)


def _python_fn(model: CompiledModel) -> Callable[..., float]:
    def fn(x: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
        logp, g = model.logp_dlogp(x)
        grad[:] = g
        return logp

    return fn


#: How long one Python piece of a chunk should take while the kernel compiles (seconds).
_PYTHON_PIECE_S = 0.05
#: The most that one transition's Python overhead may cost at the maximum tree depth.
_PYTHON_TRANSITION_S = 0.1
_PYTHON_CHUNK: Callable[..., float] = core.sample_chunk


def _python_step_overhead(state: ChainState) -> float:
    """Estimate the seconds a leapfrog step spends in Python beyond the log-density."""
    n = state.q.shape[0]
    q1, p1, g1 = np.empty(n), np.empty(n), np.empty(n)
    p = np.zeros(n)

    def free(x: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
        return 0.0

    start = time.perf_counter()
    for _ in range(3):
        core.leapfrog(free, None, state.q, p, state.grad, 0.0, state.inv_mass, q1, p1, g1)
    return (time.perf_counter() - start) / 3


class _UntilCompiled:
    """Run chunks in Python while the Numba kernel is being compiled, then compiled.

    Python and the compiled kernel do the same arithmetic in the same order and draw
    the same numbers from the generator, so a chain that starts in Python continues
    bit for bit as one compiled throughout (a test checks it). The Python pieces are
    sized to take about ``_PYTHON_PIECE_S``, so the switch waits for at most one. One
    transition cannot be cut: with ``python=False`` (a model whose transitions at the
    maximum tree depth would spend more than ``_PYTHON_TRANSITION_S`` in Python) the
    chain waits for the compiled kernel instead.
    """

    def __init__(
        self, load: Callable[[], Any], pending: Callable[[], bool], python: bool = True
    ) -> None:
        self._load, self._pending, self._python = load, pending, python
        self._compiled: Any = None
        self._piece = 1

    def __call__(self, *args: Any) -> float:
        """Run ``sample_chunk(*args)`` (its arguments, in its order)."""
        head, (n_draws, draws, stats), rest = list(args[:9]), args[9:12], args[12:]
        done = 0
        while done < n_draws:
            if self._compiled is None and not (self._python and self._pending()):
                self._compiled = self._load()
            if self._compiled is not None:
                return float(
                    self._compiled(*head, n_draws - done, draws[done:], stats[done:], *rest)
                )
            k = min(self._piece, n_draws - done)
            start = time.perf_counter()
            piece = (draws[done : done + k], stats[done : done + k])
            head[5] = _PYTHON_CHUNK(*head, k, *piece, *rest)  # the new logp
            per_draw = max((time.perf_counter() - start) / k, 1e-9)
            self._piece = max(1, min(n_draws, int(_PYTHON_PIECE_S / per_draw)))
            done += k
        return float(head[5])


def _check_fatal(fn: Any) -> None:
    """Raise the error of a fatal code the model's native function returned in Python."""
    check = getattr(fn, "check", None)
    if check is not None:
        check()


def _find_step_size(fn: Callable[..., float], user_data: Any, state: ChainState) -> float:
    """Stan's heuristic: double or halve the step until one leapfrog's acceptance crosses 0.8."""
    n = state.q.shape[0]
    rng = state.rng
    p = rng.standard_normal(n) / np.sqrt(state.inv_mass)
    h0 = -state.logp + core.kinetic(p, state.inv_mass)
    q1, p1, g1 = np.empty(n), np.empty(n), np.empty(n)

    def delta(eps: float) -> float:
        logp = core.leapfrog(fn, user_data, state.q, p, state.grad, eps, state.inv_mass, q1, p1, g1)
        h1 = -logp + core.kinetic(p1, state.inv_mass)
        return h0 - h1 if math.isfinite(h1) else -np.inf

    eps = 1.0
    up = delta(eps) > math.log(0.8)
    for _ in range(60):
        eps = eps * 2.0 if up else eps / 2.0
        if (delta(eps) > math.log(0.8)) != up:
            break
    _check_fatal(fn)
    return eps


def _logp_grad(
    model: CompiledModel, native: NativePointers | None, q: np.ndarray
) -> tuple[float, np.ndarray]:
    """Return the log-density and its gradient at ``q``, natively when ``native`` is given.

    The native function is the one the kernel calls: the model's Python-level function
    is then not compiled at all. A point the native function rejects is evaluated again
    in Python, which raises the model's own error (or gives the same non-finite values).
    """
    if native is not None:
        grad = np.empty_like(q)
        code, logp = NativeLogp(native).status(q, grad)
        if code == 0:
            return logp, grad
    return model.logp_dlogp(q)


def init_chain(
    model: CompiledModel, seed: Any, max_tries: int = 20, native: NativePointers | None = None
) -> ChainState:
    """Return a chain's initial state: a jittered start with a finite log-density."""
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        q = np.ascontiguousarray(model.initial_point(rng.integers(2**63)), dtype="float64")
        logp, grad = _logp_grad(model, native, q)
        if math.isfinite(logp) and np.all(np.isfinite(grad)):
            break
    else:
        raise ValueError(
            f"no initial point with a finite log-density in {max_tries} tries (last logp "
            f"{logp}); check the model's support points (point_logps names the culprit)"
        )
    n = q.shape[0]
    return ChainState(
        q=q,
        logp=float(logp),
        grad=np.ascontiguousarray(grad, dtype="float64").copy(),
        inv_mass=np.ones(n),
        adapt=np.zeros(core.N_ADAPT),
        welford=new_welford(n),
        rng=rng,
    )


def _restart_step_size(state: ChainState, eps: float, count: float = 0.0) -> None:
    """Restart the dual averaging at step size ``eps`` and its count at ``count``.

    The averaged step starts anew with the count; a count ``N`` gives a gain of about
    1/(γ√N) per iteration from the first.
    """
    a = state.adapt
    a[core.LOG_EPS] = math.log(eps)
    a[core.MU] = math.log(10.0 * eps)
    a[core.LOG_EPS_BAR] = 0.0
    a[core.H_BAR] = 0.0
    a[core.COUNT] = count
    a[core.AVERAGE_FROM] = count


def prefetch_native_kernel() -> None:
    """Start building the compiled NUTS kernel in the background when no cache holds it.

    Call it before compiling a model whose native log-density will feed the kernel:
    both compiles then run at once, on two cores. The kernel is the C one
    (:mod:`kiln_samplers._c_nuts`, about 0.3 s); without a C compiler, the Numba one
    (:mod:`kiln_samplers._numba_nuts`, seconds).
    """
    from kiln_samplers import _c_nuts

    if not _c_nuts.prefetch():
        from kiln_samplers._numba_nuts import prefetch

        prefetch()


def _native_kernel(
    native: NativePointers, state: ChainState, settings: NutsSettings
) -> tuple[Any, NativeLogp]:
    """Return the compiled ``sample_chunk`` calling ``native`` (C, or else Numba's) and its ``fn``.

    Both kernels call the model's ``logp_cptr`` (the native ABI); ``fn`` is the same
    function called from Python (:class:`~kiln_samplers._native.NativeLogp`), for the
    step-size search. Numba's kernel may still be compiling in the background (no C
    compiler): the chain then starts in Python (:class:`_UntilCompiled`).
    """
    from kiln_samplers._c_nuts import sample_chunk_for

    fn = NativeLogp(native)
    kernel = sample_chunk_for(fn)
    if kernel is not None:
        return kernel, fn
    # Numba is optional (a model without a native log-density runs in Python): the
    # kernel's module imports it, so it is imported only when used.
    from kiln_samplers._numba_nuts import NumbaNativeLogp, compiled_sample_chunk, kernel_pending

    python = kernel_pending() and (
        3.0 * _python_step_overhead(state) * 2**settings.max_treedepth <= _PYTHON_TRANSITION_S
    )  # a Python transition's overhead is about 3 leapfrogs' per step
    return _UntilCompiled(compiled_sample_chunk, kernel_pending, python), NumbaNativeLogp(native)


def run_chain(
    model: CompiledModel,
    state: ChainState,
    draws: int,
    tune: int,
    settings: NutsSettings,
    native: NativePointers | None = None,
    progress: Callable[[int, np.ndarray, bool], None] | None = None,
    stop: threading.Event | None = None,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> ChainResult:
    """Warm up for ``tune`` iterations, then draw ``draws`` points; return the draws.

    ``progress(n_new, stats_of_new, tuning)`` is called after each piece of a chunk;
    setting ``stop`` ends the chain within about :data:`PIECE_S` (after the current piece,
    or inside a Python transition): the result then holds the draws made after warm-up
    (none when stopped during warm-up, ``warmup_done=False``). ``out``: the contiguous
    ``(draws, ndim)`` and ``(draws, N_STATS)`` arrays the draws are written to (the
    result's arrays are views of them; default: new arrays).
    """
    # Overflow in a trajectory (a momentum or an energy that becomes inf) is a divergence,
    # reported as one: not as NumPy's RuntimeWarning, in the Python pieces of a chain.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _run_chain(model, state, draws, tune, settings, native, progress, stop, out)


#: The longest a piece of a chunk should take (seconds): a stop request (Ctrl-C) is seen
#: between pieces, so a chain stops about this long after it.
PIECE_S = 0.2


class _Stopped(BaseException):
    """A stop request seen inside a Python log-density call (ends the transition).

    A ``BaseException``: ``leapfrog`` turns an ``Exception`` into a rejected point.
    """


def _stoppable(fn: Callable[..., float], stop: threading.Event | None) -> Callable[..., float]:
    """Return ``fn`` raising :class:`_Stopped` once ``stop`` is set (Python kernels only)."""
    if stop is None:
        return fn

    def checked(x: np.ndarray, grad: np.ndarray, user_data: Any) -> float:
        if stop.is_set():
            raise _Stopped
        return fn(x, grad, user_data)

    return checked


@dataclasses.dataclass
class _Pieces:
    """Runs a chunk of transitions in pieces of at most ``PIECE_S``, watching ``stop``.

    The pieces are sized from the last one's time per draw (one draw first): a compiled
    kernel runs whole chunks, Python a few transitions at a time. Cutting a chunk
    changes no draw (the kernel's state lives in the chain's arrays and generator).
    """

    #: The kernel, its log-density and user data, and the kernel's kind, in the
    #: coordinates of a dense metric (None: the model's); None where that cannot run.
    functions: Callable[[DenseMetric | None], _Functions | None]
    state: ChainState
    settings: NutsSettings
    stop: threading.Event | None
    progress: Callable[[int, np.ndarray, bool], None] | None
    per_draw: float = math.inf
    #: Leapfrog steps of the transitions run so far.
    n_leapfrog: int = 0
    #: The dense metric whose coordinates the chain runs in, if any.
    dense: DenseMetric | None = None
    #: ``metric="auto"`` keeps the diagonal metric (no dense kernel can run).
    diagonal_only: bool = False
    kernel: Callable[..., float] = dataclasses.field(init=False)
    fn: Callable[..., float] = dataclasses.field(init=False)
    user_data: Any = dataclasses.field(init=False)
    kind: str = dataclasses.field(init=False)
    #: The last window ``model_gradients`` evaluated, and its gradients.
    _gradients_of: tuple[np.ndarray, np.ndarray] | None = dataclasses.field(
        init=False, default=None
    )

    def __post_init__(self) -> None:
        made = self.functions(self.dense)
        assert made is not None  # the model's own coordinates always run
        self.kernel, self.fn, self.user_data, self.kind = made

    def use_dense(self) -> bool:
        """Run on in a new dense metric's coordinates (the identity: the point stays).

        False (nothing changed) where its kernel cannot run.
        """
        n = self.state.q.shape[0]
        dense = DenseMetric(n)
        made = self.functions(dense)
        if made is None:
            return False
        self.kernel, self.fn, self.user_data, self.kind = made
        self.dense, self.state.inv_mass = dense, np.ones(n)
        return True

    def use_diagonal(self, inv_mass: np.ndarray) -> None:
        """Run on in the model's coordinates with the diagonal inverse mass ``inv_mass``."""
        assert self.dense is not None
        state = self.state
        state.q[:] = self.dense.positions(state.q)
        made = self.functions(None)
        assert made is not None
        self.kernel, self.fn, self.user_data, self.kind = made
        self.dense, state.inv_mass = None, inv_mass
        state.logp = float(self.fn(state.q, state.grad, self.user_data))
        _check_fatal(self.fn)

    def positions(self, y: np.ndarray) -> np.ndarray:
        """Return the model's coordinates of the chain's ``y`` (points, one per row)."""
        return y if self.dense is None else self.dense.positions(y)

    def model_gradients(self, x: np.ndarray) -> np.ndarray:
        """Return the log-density's gradient at each row of ``x`` (the model's coordinates).

        The last window's two tests (:func:`prefers_dense` and :func:`looks_gaussian`)
        ask for the same ``x``: it is evaluated once.
        """
        if self._gradients_of is not None and self._gradients_of[0] is x:
            return self._gradients_of[1]
        from kiln_samplers._c_nuts import gradients as c_gradients

        dense = self.dense
        y = np.ascontiguousarray(x if dense is None else np.linalg.solve(dense.factor, x.T).T)
        out = c_gradients(self.fn, y) if isinstance(self.fn, NativeLogp) else None
        if out is None:
            out, grad = np.empty_like(x), np.empty(x.shape[1])
            for i in range(x.shape[0]):
                self.fn(y[i], grad, self.user_data)
                out[i] = grad
            _check_fatal(self.fn)
        out = out if dense is None else np.linalg.solve(dense.factor.T, out.T).T
        self._gradients_of = (x, out)
        return out

    def run(
        self,
        m: int,
        draws: np.ndarray,
        stats: np.ndarray,
        adapt_step: int,
        collect: bool,
        update_metric: bool = False,
    ) -> int:
        """Run up to ``m`` transitions into ``draws`` / ``stats``; return how many ran.

        ``adapt_step``, ``collect`` and ``update_metric`` are ``sample_chunk``'s
        ``adapt_step_size``, ``collect_variance`` and ``update_metric``.
        """
        state, settings = self.state, self.settings
        jitter = jitter_of(settings, self.dense)
        done = 0
        while done < m:
            if self.stop is not None and self.stop.is_set():
                return done
            k = m - done
            if self.per_draw * k > PIECE_S:
                k = max(1, min(k, int(PIECE_S / self.per_draw)))
            begin = time.perf_counter()
            try:
                state.logp = self.kernel(
                    self.fn, self.user_data, state.rng, state.q, state.grad, state.logp,
                    state.inv_mass, state.adapt, state.welford, k, draws[done : done + k],
                    stats[done : done + k], settings.target_accept, settings.max_treedepth,
                    settings.max_energy_error, jitter, adapt_step, collect, update_metric,
                )  # fmt: skip
            except _Stopped:  # the piece is dropped (a Python chain; at most PIECE_S)
                return done
            _check_fatal(self.fn)
            self.per_draw = max((time.perf_counter() - begin) / k, 1e-9)
            self.n_leapfrog += int(stats[done : done + k, core.N_STEPS].sum())
            if self.progress is not None:
                self.progress(k, stats[done : done + k], adapt_step != core.ADAPT_OFF)
            done += k
        return done


def _warm_up_stan(
    pieces: _Pieces, tune: int, warm_draws: np.ndarray, warm_stats: np.ndarray
) -> tuple[int, bool]:
    """Run Stan's windowed warm-up; return the leapfrog steps and whether it completed.

    The step size is searched again and its dual averaging restarted after each window,
    and the mass matrix re-estimated (:func:`_end_window`). ``metric="auto"`` ends with
    :func:`~kiln_samplers._adaptation.final_buffer` iterations adapting the step size
    only; ``"diag"`` and ``"dense"`` with Stan's 50. Under ``"auto"``, where the last
    window's draws look Gaussian (:func:`~kiln_samplers._dense_metric.looks_gaussian`),
    the final dual averaging counts from
    :data:`~kiln_samplers._adaptation.GAUSSIAN_FINAL_COUNT`, or from the square of the
    iterations left where that is less (a short warm-up).
    """
    state, settings = pieces.state, pieces.settings
    _restart_step_size(state, _find_step_size(pieces.fn, pieces.user_data, state))
    term_buffer = final_buffer(tune) if settings.metric == "auto" else 50
    window_start, ends = warmup_schedule(tune, term_buffer=term_buffer)
    last_end = ends[-1] if ends else 0
    boundaries = sorted({window_start, *ends, tune} - {0})
    keep = settings.metric == "dense" or (
        settings.metric == "auto" and state.q.shape[0] <= AUTO_MAX_DIM
    )
    window: list[np.ndarray] = []  # the window's draws, in the model's coordinates
    i = 0
    while i < tune:
        stop_at = min([b for b in boundaries if b > i] + [i + settings.chunk])
        m = stop_at - i
        collect = window_start <= i < last_end
        sums = collect and pieces.dense is None
        step = core.ADAPT_ACCEPT
        if i >= last_end and settings.metric == "auto" and is_dense(pieces.dense):
            step = AUTO_FINAL_STEP
        if pieces.run(m, warm_draws, warm_stats, step, sums) < m:
            return pieces.n_leapfrog, False
        if collect and keep:
            window.append(pieces.positions(warm_draws[:m]))
        i = stop_at
        if i in ends:
            drawn = np.concatenate(window) if window else None
            _end_window(pieces, drawn, i == last_end)
            window = []
            gaussian = (
                i == last_end
                and settings.metric == "auto"
                and drawn is not None
                and looks_gaussian(drawn, pieces.model_gradients)
            )
            # The step starts near 10x the searched one; a count N brings it back in
            # about 0.15 √N iterations: at most the square of those left keeps that short.
            count = min(GAUSSIAN_FINAL_COUNT, float(tune - i) ** 2) if gaussian else 0.0
            _restart_step_size(state, _find_step_size(pieces.fn, pieces.user_data, state), count)
    return pieces.n_leapfrog, True


def _end_window(pieces: _Pieces, window: np.ndarray | None, last: bool) -> None:
    """Set the mass matrix from a window of Stan's warm-up (``last``: the last window).

    The diagonal metric takes the regularized variance of the kernel's Welford sums
    (:func:`~kiln_samplers._adaptation.regularized_variance`); after the last window,
    under ``metric="auto"``, nutpie's sqrt(Var[draws] / Var[gradients]) of the same sums
    (:func:`~kiln_samplers._adaptation.gradient_variance`: 25% more effective draws per
    gradient on M2's hierarchical scales, 15 seeds). A chain that leaves the dense
    metric after the last window failed its Gaussian test (a funnel), where the
    gradients misjudge the scales: it takes the draws' variances. The dense one the regularized
    covariance of ``window`` (the draws, in the model's coordinates), and the chain
    moves to its new coordinates. ``metric="auto"`` tries the dense metric where
    :func:`~kiln_samplers._dense_metric.prefers_dense` says so, and keeps it for the
    draws only where it has been tried and still pays after the last window (for a
    posterior that looks Gaussian); otherwise the chain goes back to the diagonal
    metric. The choice depends on the draws only, so a seed gives the same chains.
    """
    state, settings = pieces.state, pieces.settings
    dense = settings.metric == "dense"
    if settings.metric == "auto" and window is not None and not pieces.diagonal_only:
        tried = pieces.dense is not None
        choice = False if last and not tried else None
        if tried or not last:
            choice = prefers_dense(window, pieces.model_gradients, last)
        if choice is None:  # too few draws to say: as it was
            dense = tried
        elif choice and not tried and not pieces.use_dense():
            _warn_once("auto")
            pieces.diagonal_only = True
        elif tried and not choice:
            covariance = regularized_covariance(window, diagonal=True)
            inv_mass = np.diagonal(covariance).copy() if covariance is not None else None
            pieces.use_diagonal(inv_mass if inv_mass is not None else np.ones(window.shape[1]))
            return
        else:
            dense = choice
    if pieces.dense is None:
        nutpie_estimate = last and settings.metric == "auto"
        estimate = gradient_variance if nutpie_estimate else regularized_variance
        state.inv_mass = estimate(state.welford)
        state.welford[:] = 0.0
        return
    assert window is not None  # a dense metric keeps its windows
    x = pieces.dense.positions(state.q)
    if pieces.dense.adapt(window, diagonal=not dense):
        state.q[:] = pieces.dense.coordinates(x)
        state.logp = float(pieces.fn(state.q, state.grad, pieces.user_data))
        _check_fatal(pieces.fn)


def _warm_up_grad(
    pieces: _Pieces, tune: int, warm_draws: np.ndarray, warm_stats: np.ndarray
) -> tuple[int, bool]:
    """Run nutpie's gradient-based warm-up; return the leapfrog steps and whether it completed.

    The schedule of nuts-rs (:func:`~kiln_samplers._adaptation.grad_schedule`): the
    inverse mass starts at 1 / |gradient| at the start point; before the final window,
    the kernel collects each draw that moved and its gradient into the current
    (background) window and the foreground sample (the previous window and the current;
    the start point counts in both at first), and sets the inverse mass to the
    foreground's sqrt(Var[draws] / Var[gradients]) after each draw. At a switch
    (:class:`~kiln_samplers._adaptation.GradWindows`) the background becomes the
    foreground and a new window starts. The step size is searched at the start and
    again at the first estimate (the foreground's third point); its dual averaging then
    runs on, not restarted, to the end of the warm-up, whose final window adapts the
    step size only.
    """
    state, settings, fn, user_data = pieces.state, pieces.settings, pieces.fn, pieces.user_data
    schedule = grad_schedule(tune)
    windows = GradWindows(schedule)
    final, fg = schedule.final_start, core.FOREGROUND
    state.inv_mass = initial_inv_mass(state.grad)
    welford = state.welford = new_welford(state.q.shape[0])
    core.welford_add(welford, 0, state.q, state.grad)
    core.welford_add(welford, fg, state.q, state.grad)
    _restart_step_size(state, _find_step_size(fn, user_data, state))
    searched = False  # the step size searched again at the first estimate
    i = 0
    while i < tune:
        stops = [tune, i + settings.chunk]
        if i < final:
            windows.start(i, int(welford[0, 0]))
            stops.append(final)
            if not windows.late(i):  # the first draw that may complete the window
                stops.append(i + max(1, windows.size(i) - int(welford[0, 0])))
                stops.append(final + 1 - windows.following(i))  # the first late draw
            stops += [schedule.early_end] if i < schedule.early_end else []
            stops += [] if searched else [i + max(1, 3 - int(welford[fg, 0]))]  # 1st estimate
        stop_at = min(stops)
        m = stop_at - i
        mass = i < final
        late = not mass or windows.late(i)  # nuts-rs targets its symmetric statistic then
        step = core.ADAPT_SYMMETRIC if late else core.ADAPT_ACCEPT
        if pieces.run(m, warm_draws, warm_stats, step, mass, mass) < m:
            return pieces.n_leapfrog, False
        i = stop_at
        if mass and windows.switches(i - 1, int(welford[0, 0])):
            welford[fg:] = welford[:fg]  # the background becomes the foreground
            welford[:fg] = 0.0
            core.grad_metric(welford, state.inv_mass)
        if not searched and welford[fg, 0] >= 3.0:
            searched = True
            _restart_step_size(state, _find_step_size(fn, user_data, state))
    return pieces.n_leapfrog, True


#: A chain's kernel, its log-density and user data, and the kernel's kind.
_Functions = tuple[Callable[..., float], Callable[..., float], Any, str]


def _run_chain(
    model: CompiledModel,
    state: ChainState,
    draws: int,
    tune: int,
    settings: NutsSettings,
    native: NativePointers | None,
    progress: Callable[[int, np.ndarray, bool], None] | None,
    stop: threading.Event | None,
    out: tuple[np.ndarray, np.ndarray] | None,
) -> ChainResult:
    def functions(dense: DenseMetric | None) -> _Functions | None:
        model_native, python_fn = native, _python_fn(model)
        if native is not None and dense is not None:
            from kiln_samplers._c_nuts import affine_logp_address

            address = affine_logp_address()
            if address is not None:
                model_native = dense.native(native, address)
            elif settings.metric == "auto":  # not worth a chain in Python
                return None
            else:  # no C kernel to call the map natively: Python calls it
                python_fn, model_native = NativeLogp(native), None
                _warn_once("dense")
        if model_native is not None:
            kernel, native_fn = _native_kernel(model_native, state, settings)
            kind = "numba" if isinstance(kernel, _UntilCompiled) else "c"
            return kernel, native_fn, native_fn.user_data, kind
        user_data = getattr(python_fn, "user_data", None)
        fn = python_fn if dense is None else dense.python_fn(python_fn)
        return core.sample_chunk, _stoppable(fn, stop), user_data, "python"

    dense = DenseMetric(state.q.shape[0]) if settings.metric == "dense" else None
    pieces = _Pieces(functions, state, settings, stop, progress, dense=dense)
    try:
        return _warm_up_and_draw(pieces, draws, tune, out)
    finally:
        if pieces.dense is not None:  # the chain's state back in the model's coordinates
            state.q[:] = pieces.dense.positions(state.q)
            state.grad[:] = pieces.dense.model_gradient(state.grad)


def _warm_up_and_draw(
    pieces: _Pieces,
    draws: int,
    tune: int,
    out: tuple[np.ndarray, np.ndarray] | None,
) -> ChainResult:
    state, settings = pieces.state, pieces.settings
    n = state.q.shape[0]
    warm_draws = np.empty((min(settings.chunk, max(tune, 1)), n))
    warm_stats = np.empty((min(settings.chunk, max(tune, 1)), core.N_STATS))
    try:
        if settings.adaptation == "grad":
            n_leapfrog, done = _warm_up_grad(pieces, tune, warm_draws, warm_stats)
        else:
            n_leapfrog, done = _warm_up_stan(pieces, tune, warm_draws, warm_stats)
    except _Stopped:
        n_leapfrog, done = pieces.n_leapfrog, False
    dense = pieces.dense
    metric = "dense" if dense is not None and not dense.is_diagonal() else "diag"
    if not done:  # stopped during warm-up: nothing kept
        empty = np.empty((0, n)), np.empty((0, core.N_STATS))
        return ChainResult(*empty, 0, False, n_leapfrog, pieces.kind, metric=metric)
    if state.adapt[core.COUNT] == 0:
        # No adaptation ran (tune=0): draw with the step size of the initial search.
        state.adapt[core.LOG_EPS_BAR] = state.adapt[core.LOG_EPS]
    if out is None:
        out_draws, out_stats = np.empty((draws, n)), np.empty((draws, core.N_STATS))
    else:
        out_draws, out_stats = out
    i = 0
    while i < draws:
        m = min(settings.chunk, draws - i)
        ran = pieces.run(m, out_draws[i : i + m], out_stats[i : i + m], core.ADAPT_OFF, False)
        if dense is not None:
            out_draws[i : i + ran] = dense.positions(out_draws[i : i + ran])
        i += ran
        if ran < m:
            break
    n_leapfrog = pieces.n_leapfrog
    eps_bar = math.exp(state.adapt[core.LOG_EPS_BAR])
    return ChainResult(
        out_draws[:i], out_stats[:i], i, True, n_leapfrog, pieces.kind, eps_bar, metric
    )
