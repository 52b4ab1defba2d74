"""blackjax's window adaptation one transition at a time, from its public building blocks.

``blackjax.window_adaptation`` offers only ``run``: the whole warm-up as one scan, which
a stop flag cannot reach until it ends. kiln's chunked runner needs the warm-up as a
transition it can call ``n`` times and then stop. :func:`window_steps` builds it from
the pieces ``window_adaptation`` itself is made of, all public in blackjax 1.7: the
metric core of its recipe (``metric_recipes.lookup_recipe("welford_diag")`` or
``"welford_dense"``, ``.build_core()``), the step size's dual averaging
(``step_size.dual_averaging_adaptation``), Stan's schedule
(``window_adaptation.build_schedule``) and the NUTS kernel (``blackjax.nuts.build_kernel``).
A transition does what one step of ``window_adaptation``'s scan does, in the same order
and with the same keys (the warm-up key split into one key a transition), so the
adapted step size, mass matrix and chain state are those of ``run`` (tested bit for bit
in ``tests/test_jax_chunks.py``).

The schedule (a stage and a window-end flag per transition) is kept as its runs of equal
rows, a few dozen numbers whatever the warm-up's length, rather than as a constant of
``tune`` rows in the compiled program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


class WindowState(NamedTuple):
    """The warm-up's state beside the chain's: what a transition reads and updates."""

    step_size: Any  # the step size in force
    inverse_mass_matrix: Any  # the inverse mass matrix in force
    dual: Any  # the dual averaging's state (blackjax's DualAveragingAdaptationState)
    metric: Any  # the metric core's state (Welford's sums of the current slow window)
    index: Any  # the next transition's number
    keys: Any  # one key per transition


def _schedule_runs(tune: int) -> tuple[np.ndarray, np.ndarray]:
    """Stan's schedule for ``tune`` transitions as its runs: first rows and their values."""
    from blackjax.adaptation.window_adaptation import build_schedule

    rows = np.asarray(build_schedule(tune), dtype=np.int32).reshape(tune, 2)
    changed = np.flatnonzero(np.any(rows[1:] != rows[:-1], axis=1)) + 1
    starts = np.concatenate([[0], changed]).astype(np.int32)
    return starts, rows[starts]


def window_steps(
    logdensity: Callable[[Any], Any],
    tune: int,
    diagonal: bool,
    target_accept: float,
    max_depth: int,
) -> tuple[
    Callable[[Any, Any], tuple[Any, WindowState]],
    Callable[[Any, WindowState], tuple[Any, WindowState]],
    Callable[[WindowState], dict[str, Any]],
]:
    """Return blackjax's window adaptation of NUTS as ``(init, step, parameters)``.

    ``init(key, x0) -> (chain, window)`` starts a chain at ``x0`` with the warm-up keyed
    by ``key``; ``step(chain, window) -> (chain, window)`` is one warm-up transition (at
    most ``tune`` of them); ``parameters(window)`` is the adapted
    ``{"step_size", "inverse_mass_matrix"}`` for the draws. After ``tune`` steps these
    equal ``blackjax.window_adaptation(blackjax.nuts, logdensity,
    is_mass_matrix_diagonal=diagonal, target_acceptance_rate=target_accept,
    max_num_doublings=max_depth).run(key, x0, num_steps=tune)``'s state and parameters.
    All three are pure and traceable.
    """
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.adaptation.metric_recipes import lookup_recipe
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    if tune < 1:
        raise ValueError(f"tune: the window adaptation needs at least 1 transition, got {tune}")
    metric = lookup_recipe("welford_diag" if diagonal else "welford_dense").build_core()
    dual_init, dual_update, dual_final = dual_averaging_adaptation(target_accept)
    kernel = blackjax.nuts.build_kernel()
    starts, values = _schedule_runs(tune)

    def init(key: Any, x0: Any) -> tuple[Any, WindowState]:
        chain = blackjax.nuts.init(x0, logdensity)
        core = metric.init(x0.size)
        window = WindowState(
            jnp.asarray(1.0, x0.dtype),
            core.inverse_mass_matrix,
            dual_init(1.0),
            core,
            jnp.asarray(0, np.int32),
            jax.random.split(key, tune),
        )
        return chain, window

    def fast(chain: Any, accept: Any, window: WindowState) -> WindowState:
        dual = dual_update(window.dual, accept)
        return window._replace(dual=dual, step_size=jnp.exp(dual.log_step_size))

    def slow(chain: Any, accept: Any, window: WindowState) -> WindowState:
        core = metric.update(window.metric, chain.position, chain.logdensity_grad)
        dual = dual_update(window.dual, accept)
        return window._replace(
            dual=dual,
            metric=core,
            step_size=jnp.exp(dual.log_step_size),
            inverse_mass_matrix=core.inverse_mass_matrix,
        )

    def window_end(window: WindowState) -> WindowState:
        core = metric.final(window.metric)
        dual = dual_init(dual_final(window.dual))
        return window._replace(
            dual=dual,
            metric=core,
            step_size=jnp.exp(dual.log_step_size),
            inverse_mass_matrix=core.inverse_mass_matrix,
        )

    def step(chain: Any, window: WindowState) -> tuple[Any, WindowState]:
        chain, info = kernel(
            window.keys[window.index],
            chain,
            logdensity,
            window.step_size,
            window.inverse_mass_matrix,
            max_num_doublings=max_depth,
        )
        run = jnp.searchsorted(jnp.asarray(starts), window.index, side="right") - 1
        stage, ends = jnp.asarray(values)[run]
        window = jax.lax.switch(stage, (fast, slow), chain, info.acceptance_rate, window)
        window = jax.lax.cond(ends != 0, window_end, lambda w: w, window)
        return chain, window._replace(index=window.index + 1)

    def parameters(window: WindowState) -> dict[str, Any]:
        return {
            "step_size": dual_final(window.dual),
            "inverse_mass_matrix": window.metric.inverse_mass_matrix,
        }

    return init, step, parameters
