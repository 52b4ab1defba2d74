"""Loop fusion on Numba: loops over one length as one loop, against the VM and unfused Numba.

Each test builds one function (Numba compiles slowly) and checks its values against the
VM (``compare_with_vm``) and, where the fused loop must not change any rounding, against
the same graph compiled without loop fusion, to the bit.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile._serialize import dumps_graph, loads_graph
from kiln_compile.testing import compare_with_vm
from kiln_graph import KilnIndexError, ShapeMismatchError, toposort
from kiln_numba.loop_fusion import FusedLoop, fuse_loops
from kiln_rewrite import FAST_RUN_QUERY, rewrite

FAST = kiln.FAST_RUN.with_linker("numba")
UNFUSED = FAST.excluding("numba_loop_fusion", "numba_small_dot_to_sum")
VM = kiln.Mode(linker="vm")


def fused_loops(f: Any) -> list[FusedLoop]:
    """Return the FusedLoop ops of a compiled function's graph."""
    return [n.op for n in f.fgraph.nodes if isinstance(n.op, FusedLoop)]


def loops_over(f: Any, n: int) -> int:
    """Count the ``for`` loops over ``range(n)`` in a compiled function's Numba source."""
    return len(re.findall(rf"in range\({n}\):", f.thunk.source))


def hierarchical(n_obs: int = 50, n_groups: int = 7, seed: int = 0) -> tuple[list, list, list]:
    """Return M2's math (varying intercept and slope, gathers) with its gradient, and values."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_groups, n_obs)
    x = rng.random(n_obs)
    y = rng.normal(size=n_obs)
    mu_a, mu_b, log_s = kt.scalar("mu_a"), kt.scalar("mu_b"), kt.scalar("log_s")
    z_a = kt.tensor("z_a", shape=(n_groups,))
    z_b = kt.tensor("z_b", shape=(n_groups,))
    a = mu_a + kt.exp(log_s) * z_a
    b = mu_b + 0.5 * z_b
    s = kt.exp(log_s)
    resid = (kt.as_tensor(y) - (a[idx] + b[idx] * x)) / s
    logp = -0.5 * kt.sum(resid**2) - n_obs * log_s - 0.5 * kt.sum(z_a**2) - 0.5 * kt.sum(z_b**2)
    inputs = [mu_a, mu_b, log_s, z_a, z_b]
    grads = kt.grad(logp, inputs)
    values = [
        np.float64(0.3),
        np.float64(-0.2),
        np.float64(-0.1),
        rng.normal(size=n_groups),
        rng.normal(size=n_groups),
    ]
    return inputs, [logp, *grads], values


def test_hierarchical_model_is_one_loop_over_its_rows() -> None:
    inputs, outputs, values = hierarchical()
    result = compare_with_vm(inputs, outputs, values, FAST)
    f = kiln.function(inputs, outputs, mode=FAST)
    ops = fused_loops(f)
    rows = [op for op in ops if op.length == 50]
    assert len(rows) == 1 and rows[0].n_nodes >= 6  # gathers, residual, sum, two scatters
    assert loops_over(f, 50) == 1
    # Its indices are constants in bounds: the loop checks none.
    assert "index_error" not in f.thunk.source
    # The same additions in the same order as the unfused loops: equal to the bit.
    g = kiln.function(inputs, outputs, mode=UNFUSED)
    assert not fused_loops(g)
    for got, want in zip(result, g(*values), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_vm_runs_the_fused_graph_as_the_unfused_one() -> None:
    inputs, outputs, values = hierarchical(n_obs=30, n_groups=4, seed=1)
    fused = fuse_loops(inputs, rewrite(inputs, outputs, FAST_RUN_QUERY.excluding("inplace")))
    assert any(isinstance(n.op, FusedLoop) for n in toposort(fused))
    got = kiln.function(inputs, fused, mode=VM)(*values)
    want = kiln.function(inputs, outputs, mode=VM)(*values)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_a_loop_after_a_reduction_of_the_same_length_stays_apart() -> None:
    # The second loop needs the first one's sum: one loop cannot compute both.
    x = kt.tensor("x", shape=(40,))
    total = kt.sum(kt.exp(x))
    shifted = kt.exp(x) - total
    y = kt.sum(shifted * x) + kt.max(x)
    values = [np.linspace(-1, 1, 40)]
    compare_with_vm([x], [y, shifted], values, FAST)
    f = kiln.function([x], [y, shifted], mode=FAST)
    assert loops_over(f, 40) == 2


def test_scatters_set_and_add_with_negative_indices_and_broadcast_updates() -> None:
    x = kt.tensor("x", shape=(6,))
    w = kt.tensor("w", shape=(9,))
    c = kt.scalar("c")
    idx = np.array([0, -1, 2, 2, 5, -6, 3, 3, 1])
    base = kt.zeros((6,))
    added = kt.inc_subtensor(base[idx], w * c)
    replaced = kt.set_subtensor(x[idx], kt.exp(w))
    counted = kt.inc_subtensor(base[idx], c)  # a 0-d update, broadcast
    values = [np.arange(6.0), np.linspace(0, 2, 9), np.float64(1.5)]
    outs = [added, replaced, counted, kt.sum(w * x[idx])]
    compare_with_vm([x, w, c], outs, values, FAST)
    f = kiln.function([x, w, c], outs, mode=FAST)
    assert loops_over(f, 9) == 1
    assert "index_error" in f.thunk.source  # negative constants wrap: checked


def test_an_index_out_of_bounds_raises_the_vm_error() -> None:
    x = kt.tensor("x", shape=(5,))
    idx = kt.tensor("idx", dtype="int64", shape=(8,))
    out = kt.inc_subtensor(kt.zeros((5,))[idx], x[idx] * 2.0)
    f = kiln.function([x, idx], out, mode=FAST)
    assert fused_loops(f)
    good = np.array([0, 1, 2, 3, 4, -1, -5, 0])
    np.testing.assert_allclose(
        f(np.arange(5.0), good), kiln.function([x, idx], out, mode=VM)(np.arange(5.0), good)
    )
    bad = np.array([0, 1, 2, 3, 4, 5, 0, 0])
    with pytest.raises(KilnIndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        f(np.arange(5.0), bad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_of_every_kind_and_dtype(dtype: str) -> None:
    x = kt.tensor("x", dtype=dtype, shape=(300,))
    k = kt.tensor("k", dtype="int64", shape=(300,))
    e = kt.exp(x) * 0.5  # vector math: the folds take a second pass
    outs = [
        kt.sum(e),
        kt.prod(1.0 + x / 1000.0),
        kt.max(e * k),
        kt.min(x - k),
        kt.all(x > -10.0),
        kt.any(k > 5),
        kt.sum(k),
        e,
    ]
    rng = np.random.default_rng(3)
    values = [rng.normal(size=300).astype(dtype), rng.integers(0, 7, 300)]
    result = compare_with_vm([x, k], outs, values, FAST)
    f = kiln.function([x, k], outs, mode=FAST)
    # float64 exp is vector math: the folds take a second pass (one loop for float32).
    assert loops_over(f, 300) == (2 if dtype == "float64" else 1)
    g = kiln.function([x, k], outs, mode=UNFUSED)
    for got, want in zip(result, g(*values), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_small_dot_product_becomes_a_reduction_in_the_loop() -> None:
    x = kt.tensor("x", shape=(12,))
    y = kt.tensor("y", shape=(12,))
    outs = [kt.dot(x, y), kt.sum(x), x * 2.0 - y]
    values = [np.linspace(0, 1, 12), np.linspace(-1, 3, 12)]
    result = compare_with_vm([x, y], outs, values, FAST)
    f = kiln.function([x, y], outs, mode=FAST)
    assert loops_over(f, 12) == 1 and "MatMul" not in f.thunk.source
    g = kiln.function([x, y], outs, mode=UNFUSED)
    for got, want in zip(result, g(*values), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_fused_graph_survives_the_stage1_cache() -> None:
    inputs, outputs, _ = hierarchical(n_obs=20, n_groups=3)
    fused = fuse_loops(inputs, rewrite(inputs, outputs, FAST_RUN_QUERY.excluding("inplace")))
    loaded = loads_graph(dumps_graph(inputs, fused), inputs)
    ops = [n.op for n in toposort(loaded) if isinstance(n.op, FusedLoop)]
    assert ops and all(type(op) is FusedLoop for op in ops)
    assert sorted(op.graph_digest for op in ops) == sorted(
        n.op.graph_digest for n in toposort(fused) if isinstance(n.op, FusedLoop)
    )


def test_an_input_of_another_length_raises_the_vm_error() -> None:
    # ``w`` has no static length: the loop (over x's 6) checks it before reading it.
    x = kt.tensor("x", shape=(6,))
    w = kt.vector("w")
    outs = [kt.max(kt.exp(x) * w), kt.exp(x) * w + 1.0]
    f = kiln.function([x, w], outs, mode=FAST)
    assert fused_loops(f)
    compare_with_vm([x, w], outs, [np.arange(6.0), np.ones(6)], FAST)
    with pytest.raises(ShapeMismatchError):
        kiln.function([x, w], outs, mode=VM)(np.arange(6.0), np.ones(4))
    with pytest.raises(ShapeMismatchError, match="different length"):
        f(np.arange(6.0), np.ones(4))
