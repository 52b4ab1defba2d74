"""The options, state and result of a chain of kiln's NUTS, and its step-size jitter.

:class:`NutsSettings` (what a user sets), :class:`ChainState` (what a chain carries
between chunks), :class:`ChainResult` (what it returns) and :func:`jitter_of`, the
jitter a chain's transitions get under its settings and current mass matrix. The warm-up
and the chunks that use them are :mod:`kiln_samplers._nuts`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kiln_samplers._dense_metric import DenseMetric

#: The statistics of each draw, in the order of the stats array (kiln's names).
STAT_NAMES = (
    "diverging",
    "energy",
    "energy_error",
    "max_energy_error",
    "tree_depth",
    "n_steps",
    "step_size",
    "acceptance_rate",
    "lp",
    "step_size_bar",
)


#: The warm-up schedules of the mass matrix (``NutsSettings.adaptation``).
ADAPTATIONS = ("stan", "grad")
#: The mass matrices (``NutsSettings.metric``).
METRICS = ("auto", "diag", "dense")
#: ``NutsSettings.step_size_jitter=None``'s jitter where it jitters: nutpie's default.
GAUSSIAN_JITTER = 0.1


def jitter_of(settings: NutsSettings, dense: DenseMetric | None) -> float:
    """Return the step-size jitter of a chain with ``settings``, now in the ``dense`` metric.

    An explicit ``settings.step_size_jitter``; else :data:`GAUSSIAN_JITTER` under a dense
    mass matrix (one that is not diagonal: the posterior looked Gaussian) or nutpie's
    schedule, and 0 under Stan's diagonal one. Measured with
    ``benchmarks/warmup_efficiency.py``: where the default keeps the dense metric, the
    jitter and the symmetric statistic of the final buffer give 4% to 42% more effective
    draws per gradient on five regressions of six (mesquite -4%; seeds 1-15, one
    sitting). Under the diagonal metric they gave +7% on M2 and low_dim_gauss_mix but
    -5% on M1 and -14% on the centred eight schools, with 39% more divergences there and
    58% more on gp_pois_regr (funnels; seeds 1-40, ``benchmarks/results/
    warmup-diag-jitter-symmetric-20261207T001200Z.json``).
    """
    if settings.step_size_jitter is not None:
        return float(settings.step_size_jitter)
    return GAUSSIAN_JITTER if is_dense(dense) or settings.adaptation == "grad" else 0.0


def is_dense(dense: DenseMetric | None) -> bool:
    """Whether ``dense`` is a mass matrix that is not diagonal."""
    return dense is not None and not dense.is_diagonal()


@dataclasses.dataclass(frozen=True)
class NutsSettings:
    """NUTS options: the target acceptance, tree depth, divergence bound, step-size jitter...

    Fields: target_accept, max_treedepth, max_energy_error, step_size_jitter, adaptation,
    metric.

    ``adaptation`` is the warm-up of the diagonal mass matrix: ``"stan"`` (Stan's
    windows of doubling length, the variance of the draws) or ``"grad"`` (nutpie's:
    sqrt(Var[draws] / Var[gradients]) over short switching windows, from the first
    draws on). ``metric="dense"`` adapts a dense mass matrix instead, over Stan's
    windows (the covariance of the draws, Stan's ``dense_e``; PyMC's ``adapt_full``):
    for correlated posteriors, at two n x n triangular products per gradient
    (:mod:`kiln_samplers._dense_metric`). ``metric="auto"`` (the default) starts
    diagonal, tries the dense metric where a window of Stan's finds correlations it
    undoes, and keeps it for the draws where the last window also looks Gaussian
    (:func:`~kiln_samplers._dense_metric.prefers_dense`; models of at most
    :data:`~kiln_samplers._dense_metric.AUTO_MAX_DIM` coordinates); otherwise its
    diagonal metric is the last window's nutpie estimate, sqrt(Var[draws] /
    Var[gradients]) (the draws' variances where it leaves the dense metric after the
    last window: a funnel). Its warm-up ends with the last 15% adapting the step size
    only (at least Stan's 50; :func:`~kiln_samplers._adaptation.final_buffer`), which
    targets nuts-rs's symmetric acceptance statistic
    (:func:`~kiln_samplers._nuts_core.symmetric_accept`; Stan's is the leaves' mean
    Metropolis acceptance, which the dual averaging's mean step size overshoots) where
    it keeps the dense metric. With ``adaptation="grad"`` it is the diagonal metric, and
    the step size targets the symmetric statistic from the last window on, as in
    nuts-rs; ``metric="diag"`` and ``"dense"`` are Stan's windows exactly.

    ``step_size_jitter``: each transition's step size is the adapted one times a
    uniform draw from [1 - jitter, 1 + jitter], in the warm-up and after it. ``None``
    (the default) is :data:`GAUSSIAN_JITTER` while the chain runs a dense mass matrix
    or nutpie's schedule (``adaptation="grad"``, as nutpie), 0 otherwise: a step size
    that varies breaks the near-periodic trajectories of a fixed one on a posterior that
    the metric makes nearly a standard Gaussian, but on a funnel a larger step reaches
    the neck more often (:func:`jitter_of`).
    """

    target_accept: float = 0.8
    max_treedepth: int = 10
    max_energy_error: float = 1000.0
    step_size_jitter: float | None = None
    chunk: int = 50
    adaptation: str = "stan"
    metric: str = "auto"

    def __post_init__(self) -> None:
        if not 0.0 < self.target_accept < 1.0:
            raise ValueError(
                f"target_accept: expected a number in (0, 1), got {self.target_accept}"
            )
        if not (isinstance(self.max_treedepth, int) and 1 <= self.max_treedepth <= 30):
            raise ValueError(f"max_treedepth: expected an int in [1, 30], got {self.max_treedepth}")
        jitter = self.step_size_jitter
        if jitter is not None and not (isinstance(jitter, int | float) and 0.0 <= jitter < 1.0):
            raise ValueError(
                f"step_size_jitter: expected None or a number in [0, 1), got {jitter!r}"
            )
        if self.adaptation not in ADAPTATIONS:
            raise ValueError(
                f"adaptation: expected one of {', '.join(map(repr, ADAPTATIONS))}, "
                f"got {self.adaptation!r}"
            )
        if self.metric not in METRICS:
            raise ValueError(
                f"metric: expected one of {', '.join(map(repr, METRICS))}, got {self.metric!r}"
            )
        if self.metric == "dense" and self.adaptation != "stan":
            raise ValueError(
                f"adaptation: metric='dense' adapts over Stan's windows (adaptation='stan'); "
                f"got adaptation={self.adaptation!r}, which is for the diagonal metric only"
            )


@dataclasses.dataclass
class ChainState:
    """One chain: position, log-density and gradient, metric, step-size state, generator."""

    q: np.ndarray
    logp: float
    grad: np.ndarray
    inv_mass: np.ndarray
    adapt: np.ndarray  # the dual-averaging slots of _nuts_core (LOG_EPS, ...)
    welford: np.ndarray  # (5, n): Welford sums of the current window (_nuts_core.sample_chunk)
    rng: np.random.Generator


@dataclasses.dataclass
class ChainResult:
    """What a chain drew: unconstrained draws, per-draw statistics, draws completed.

    ``stats`` holds the columns of :data:`STAT_NAMES` but the last: the step size of
    the draws, ``step_size_bar``, is one number per chain.
    """

    draws: np.ndarray
    stats: np.ndarray
    n_done: int
    warmup_done: bool
    #: Leapfrog steps taken (warm-up included) and the kernel that took them:
    #: ``"c"``, ``"numba"`` (the compiled kernels) or ``"python"``.
    n_leapfrog: int = 0
    kernel: str = "python"
    step_size_bar: float = math.nan
    #: The mass matrix adapted: ``"diag"`` or ``"dense"``.
    metric: str = "diag"
