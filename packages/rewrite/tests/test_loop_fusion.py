"""Loop fusion's decision: which loop nodes fuse, within which limits, and the values.

Each fused graph is evaluated with the reference interpreter (a FusedLoop runs its
inner graph) against the graph before fusion, to the bit: the members keep their order.
"""

from __future__ import annotations

import numpy as np

import kiln_graph.tensor as kt
from kiln_graph import toposort
from kiln_graph.ops import Alloc
from kiln_graph.testing import evaluate
from kiln_rewrite import FAST_RUN_QUERY, rewrite
from kiln_rewrite.loop_fusion import (
    REDUCE,
    FusedLoop,
    LoopLimits,
    fuse_loops,
    loop_kind,
    small_dot_to_sum,
)

FUSED_PHASES = FAST_RUN_QUERY.excluding("inplace")


def hierarchical(n_obs: int = 40, n_groups: int = 5) -> tuple[list, list, list]:
    """Return M2's math (gathers, a sum of squares, scatter-adds in the gradient)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, n_groups, n_obs)
    x, y = rng.random(n_obs), rng.normal(size=n_obs)
    mu, log_s = kt.scalar("mu"), kt.scalar("log_s")
    z = kt.tensor("z", shape=(n_groups,))
    a = mu + kt.exp(log_s) * z
    resid = kt.as_tensor(y) - a[idx] * kt.as_tensor(x)
    logp = -0.5 * kt.sum(resid**2) - 0.5 * kt.sum(z**2)
    inputs = [mu, log_s, z]
    outputs = [logp, *kt.grad(logp, inputs)]
    values = [np.float64(0.3), np.float64(-0.1), rng.normal(size=n_groups)]
    return inputs, rewrite(inputs, outputs, FUSED_PHASES), values


def loops(outputs: list) -> list[FusedLoop]:
    return [n.op for n in toposort(outputs) if isinstance(n.op, FusedLoop)]


def assert_same_values(inputs: list, before: list, after: list, values: list) -> None:
    givens = dict(zip(inputs, values, strict=True))
    for got, want in zip(evaluate(after, givens), evaluate(before, givens), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_observation_loop_becomes_one_fused_loop_with_the_unfused_values() -> None:
    inputs, outputs, values = hierarchical()
    fused = fuse_loops(inputs, outputs)
    by_length = {op.length: op for op in loops(fused)}
    assert 40 in by_length and by_length[40].n_nodes >= 4  # gather, map, fold, scatter
    assert_same_values(inputs, outputs, fused, values)


def test_limits_bound_the_members_and_a_large_graph_stays_unfused() -> None:
    inputs, outputs, values = hierarchical()
    small = fuse_loops(inputs, outputs, LoopLimits(max_members=2))
    assert loops(small) and all(op.n_nodes <= 2 for op in loops(small))
    assert_same_values(inputs, outputs, small, values)
    assert not loops(fuse_loops(inputs, outputs, LoopLimits(max_loop_nodes=1)))


def test_a_value_read_after_a_reduction_does_not_join_its_loop() -> None:
    # ``x - mean(x)`` needs the whole sum first: two loops, never one.
    x = kt.tensor("x", shape=(6,))
    centered = x - kt.sum(x) / 6.0
    outputs = rewrite([x], [kt.sum(centered**2), centered], FUSED_PHASES)
    fused = fuse_loops([x], outputs)
    assert loops(fused)
    for op in loops(fused):
        inner = toposort(list(op.inner_outputs), stop_at=list(op.inner_inputs))
        folded = {o for n in inner if loop_kind(n) == REDUCE for o in n.outputs}
        assert not any(v in folded for n in inner for v in n.inputs)
    assert_same_values([x], outputs, fused, [np.linspace(-1.0, 2.0, 6)])


def test_a_small_dot_product_becomes_a_sum_of_products() -> None:
    x, y = kt.tensor("x", shape=(5,)), kt.tensor("y", shape=(5,))
    (out,) = rewrite([x, y], [kt.dot(x, y)], FUSED_PHASES.excluding("numba", "c"))
    node = out.owner
    assert node is not None
    (summed,) = small_dot_to_sum(node, 16) or [None]
    assert summed is not None and small_dot_to_sum(node, 4) is None
    xv, yv = np.linspace(0, 1, 5), np.linspace(-1, 3, 5)
    got = evaluate(summed, {x: xv, y: yv})
    np.testing.assert_allclose(got, xv @ yv, rtol=1e-15)


def test_a_guarded_likelihoods_gradient_reads_no_array_of_ones_or_zeros() -> None:
    """The model layer's ``switch(sigma > 0, logp, -inf)``: its gradient's weights.

    ``grad`` gives ``switch(cond, ones_like(terms), zeros_like(terms))``: before the
    rewrite that lifts it through its Allocs, the observation loop read two arrays of
    ``n_obs`` ones and zeros (folded to constants up to 10^4 rows, allocated at every
    call above that).
    """
    n_obs = 40
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 5, n_obs)
    x, y = rng.random(n_obs), rng.normal(size=n_obs)
    mu, log_s = kt.scalar("mu"), kt.scalar("log_s")
    z = kt.tensor("z", shape=(5,))
    s = kt.exp(log_s)
    terms = -0.5 * ((kt.as_tensor(y) - (mu + z)[idx] * kt.as_tensor(x)) / s) ** 2 - log_s
    logp = kt.sum(kt.switch(s > 0, terms, -np.inf))
    inputs = [mu, log_s, z]
    outputs = rewrite(inputs, [logp, *kt.grad(logp, inputs)], FUSED_PHASES)
    fused = fuse_loops(inputs, outputs)
    (loop,) = [n for n in toposort(fused) if isinstance(n.op, FusedLoop) and n.op.length == n_obs]
    uniform = [
        i
        for i in loop.inputs
        if np.size(getattr(i, "data", ())) == n_obs and np.unique(i.data).size == 1
    ]
    allocated = [  # (the scatter-add's target, zeros of the 5 groups, is one)
        i
        for i in loop.inputs
        if i.owner is not None and isinstance(i.owner.op, Alloc) and i.type.shape == (n_obs,)
    ]
    assert not uniform and not allocated
    assert_same_values(
        inputs, outputs, fused, [np.float64(0.3), np.float64(-0.1), rng.normal(size=5)]
    )
