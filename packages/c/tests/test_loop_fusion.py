"""Loop fusion on C: loops over one length as one C loop, against the VM and unfused C.

Each graph is checked against the VM (``compare_with_vm``) and, where the fused loop
changes no rounding, against the same graph compiled without loop fusion, to the bit.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_compile.testing import compare_with_vm
from kiln_graph import KilnIndexError, ShapeMismatchError
from kiln_rewrite.loop_fusion import FusedLoop

C = kiln.FAST_RUN.with_linker("c")
UNFUSED = C.excluding("c_loop_fusion", "c_small_dot_to_sum")
VM = kiln.Mode(linker="vm")


def fused_loops(f: Any) -> list[FusedLoop]:
    """Return the FusedLoop ops of a compiled function's graph."""
    return [n.op for n in f.fgraph.nodes if isinstance(n.op, FusedLoop)]


def loops_over(f: Any, n: int) -> int:
    """Count the C ``for`` loops over ``n`` positions in a compiled function's source."""
    return len(re.findall(rf"j < {n}; j\+\+", f.thunk.generated.source))


def hierarchical(n_obs: int = 50, n_groups: int = 7) -> tuple[list, list, list]:
    """Return M2's math (varying intercept and slope, gathers) with its gradient, and values."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, n_groups, n_obs)
    x, y = rng.random(n_obs), rng.normal(size=n_obs)
    mu_a, mu_b, log_s = kt.scalar("mu_a"), kt.scalar("mu_b"), kt.scalar("log_s")
    z_a = kt.tensor("z_a", shape=(n_groups,))
    z_b = kt.tensor("z_b", shape=(n_groups,))
    a = mu_a + kt.exp(log_s) * z_a
    b = mu_b + 0.5 * z_b
    resid = (kt.as_tensor(y) - (a[idx] + b[idx] * x)) / kt.exp(log_s)
    logp = -0.5 * kt.sum(resid**2) - n_obs * log_s - 0.5 * kt.sum(z_a**2) - 0.5 * kt.sum(z_b**2)
    inputs = [mu_a, mu_b, log_s, z_a, z_b]
    values = [np.float64(0.3), np.float64(-0.2), np.float64(-0.1)]
    values += [rng.normal(size=n_groups), rng.normal(size=n_groups)]
    return inputs, [logp, *kt.grad(logp, inputs)], values


def test_the_hierarchical_gradient_is_one_loop_over_the_observations() -> None:
    inputs, outputs, values = hierarchical()
    result = compare_with_vm(inputs, outputs, values, C)
    f = kiln.function(inputs, outputs, mode=C)
    assert any(op.length == 50 for op in fused_loops(f))
    assert loops_over(f, 50) == 1
    g = kiln.function(inputs, outputs, mode=UNFUSED)
    assert not fused_loops(g)
    for got, want in zip(result, g(*values), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_a_gather_index_out_of_bounds_raises_the_vm_error() -> None:
    x = kt.tensor("x", shape=(5,))
    idx = kt.tensor("idx", shape=(4,), dtype="int64")
    w = kt.tensor("w", shape=(4,))
    outs = [kt.sum(x[idx] * w), x[idx] * w + 1.0]
    f = kiln.function([x, idx, w], outs, mode=C)
    assert fused_loops(f)
    good = [np.arange(5.0), np.array([0, 4, -1, -5]), np.linspace(0, 1, 4)]
    compare_with_vm([x, idx, w], outs, good, C)
    bad = [np.arange(5.0), np.array([0, 5, 1, 2]), np.ones(4)]
    with pytest.raises(KilnIndexError, match="out of bounds"):
        kiln.function([x, idx, w], outs, mode=VM)(*bad)
    with pytest.raises(KilnIndexError, match="index 5 is out of bounds"):
        f(*bad)


def test_an_input_of_another_length_raises_the_vm_error() -> None:
    x = kt.tensor("x", shape=(6,))
    w = kt.vector("w")
    outs = [kt.max(kt.exp(x) * w), kt.exp(x) * w + 1.0]
    f = kiln.function([x, w], outs, mode=C)
    assert fused_loops(f)
    compare_with_vm([x, w], outs, [np.arange(6.0), np.linspace(-1, 1, 6)], C)
    with pytest.raises(ShapeMismatchError, match="different length"):
        f(np.arange(6.0), np.ones(4))


@pytest.mark.parametrize("set_instead_of_inc", [False, True])
def test_scatters_into_a_copy_with_repeated_indices(set_instead_of_inc: bool) -> None:
    x = kt.tensor("x", shape=(4,))
    y = kt.tensor("y", shape=(6,))
    idx = np.array([0, 2, 2, 3, 0, -1])
    update = kt.set_subtensor if set_instead_of_inc else kt.inc_subtensor
    scattered = update(x[idx], kt.exp(y) * 2.0)
    outs = [scattered, kt.sum(kt.exp(y) * 2.0), x]
    values = [np.arange(4.0), np.linspace(-1, 1, 6)]
    result = compare_with_vm([x, y], outs, values, C)
    np.testing.assert_array_equal(result[2], values[0])  # the input is left as it was
    assert fused_loops(kiln.function([x, y], outs, mode=C))


def test_strided_inputs_and_float32() -> None:
    x = kt.tensor("x", shape=(8,), dtype="float32")
    y = kt.tensor("y", shape=(8,), dtype="float32")
    z = kt.exp(x) * y
    outs = [kt.sum(z), z - 1.0, kt.max(x - y)]
    f = kiln.function([x, y], outs, mode=C)
    assert fused_loops(f)
    base = np.linspace(-1, 1, 16, dtype="float32")
    values = [base[::2], base[1::2][::-1]]
    assert not values[0].flags.c_contiguous
    compare_with_vm([x, y], outs, values, C)


def test_a_small_dot_product_joins_the_loop() -> None:
    x = kt.tensor("x", shape=(12,))
    y = kt.tensor("y", shape=(12,))
    outs = [kt.dot(x, y), kt.sum(x), x * 2.0 - y]
    values = [np.linspace(0, 1, 12), np.linspace(-1, 3, 12)]
    compare_with_vm([x, y], outs, values, C)
    f = kiln.function([x, y], outs, mode=C)
    assert loops_over(f, 12) == 1 and not any("MatMul" in str(n.op) for n in f.fgraph.nodes)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int8"])
def test_nodes_of_zero_dimensional_values(dtype: str) -> None:
    a, b = kt.scalar("a", dtype=dtype), kt.scalar("b", dtype=dtype)
    outs = [a * b + a, kt.maximum(a, b) - b, (a + b) // 2 if dtype.startswith("int") else a / b]
    values = [np.asarray(7, dtype=dtype), np.asarray(-3, dtype=dtype)]
    compare_with_vm([a, b], outs, values, C)


def test_a_long_float32_sum_keeps_float32_accuracy() -> None:
    # One accumulator: in float64, so 5000 float32 terms are summed as closely as NumPy's
    # pairwise sum (a float32 accumulator would drift by about n * eps).
    x = kt.tensor("x", shape=(5000,), dtype="float32")
    outs = [kt.sum(kt.exp(x) * 0.5), kt.exp(x) - 1.0]
    f = kiln.function([x], outs, mode=C)
    assert fused_loops(f)
    values = [np.random.default_rng(1).normal(size=5000).astype("float32")]
    compare_with_vm([x], outs, values, C)
    exact = np.sum(np.exp(values[0].astype("float64")) * 0.5)
    assert abs(float(f(*values)[0]) - exact) <= 2e-7 * exact
