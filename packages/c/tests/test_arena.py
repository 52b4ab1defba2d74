"""Each call's intermediates cut from an arena on its own stack frame (``kiln_ctx.arena``).

The arena holds what fits of the node outputs of static shape; the rest is malloc'd;
outputs that outlive the call are copied out of it. Calls from several threads at once
each have their own arena.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import kiln as kl
import kiln_compile as kc
from kiln_c._codegen import ARENA_MAX, arena_bytes, generate
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
VM = kc.Mode(linker="vm")
P = ctypes.c_void_p
LOGP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, P, P, P, P)


def test_outputs_outlive_the_call_that_made_them() -> None:
    """Outputs of static and of unknown shape stay intact through later calls."""
    y = kt.vector("y", shape=(4,))
    x = kt.vector("x")
    outputs = [kt.exp(y) * 2.0, x[:2] + kt.sum(kt.exp(y))]
    c = kc.function([x, y], outputs, mode=C)
    vm = kc.function([x, y], outputs, mode=VM)
    first_in = (np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3, 0.4]))
    first = c(*first_in)
    second = c(np.array([-5.0, 7.0, 1.0]), np.array([1.0, -1.0, 0.5, 2.0]))
    for got, want in zip(first, vm(*first_in), strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(first[1], second[1])


def test_intermediates_beyond_the_arena_are_malloced() -> None:
    """A graph whose intermediates exceed ``ARENA_MAX`` gives the VM's values."""
    n = ARENA_MAX // 8 + 100
    x = kt.vector("x", shape=(n,))
    outputs = [kt.sum(kt.exp(x) * kt.log1p(kt.exp(x))), kt.sin(x) * kt.cos(x) + 1.0]
    value = np.linspace(-3.0, 3.0, n)
    c = kc.function([x], outputs, mode=C)(value)
    vm = kc.function([x], outputs, mode=VM)(value)
    np.testing.assert_allclose(c[0], vm[0], rtol=1e-12)
    np.testing.assert_array_equal(c[1], vm[1])


def test_the_arena_is_sized_from_static_shapes_and_capped() -> None:
    """Static node outputs count (header and 16-byte rounding); unknown shapes do not."""
    assert arena_bytes([kt.vector("a", shape=(3,)), kt.vector("b")]) == 32 + 32
    assert arena_bytes([kt.vector("c", shape=(10**6,))]) == ARENA_MAX
    x = kt.vector("x", shape=(5,))
    fgraph = kc.function([x], [kt.exp(x) + 1.0], mode=C).thunk.fgraph
    assert "arena_mem[" in generate(fgraph).source


def test_native_calls_from_several_threads_at_once() -> None:
    """The native ABI run concurrently (no GIL in ctypes calls) gives each point's values."""
    with kl.Model() as model:
        mu = kl.Normal("mu", 0.0, 5.0)
        z = kl.Normal("z", 0.0, 1.0, shape=300)
        kl.Normal("y", mu + z, 2.0, observed=np.linspace(-1.0, 1.0, 300))
    compiled = model.logp_dlogp_function(mode=C)
    native = kc.native_model(compiled.function)
    rng = np.random.default_rng(1)
    points = [rng.normal(size=native.n) for _ in range(8)]
    expected = [compiled.logp_dlogp(x) for x in points]
    logp_fn = LOGP(native.logp_cptr)
    failures: list[str] = []

    def work(k: int) -> None:
        x = points[k]
        for _ in range(200):
            grad = np.empty(native.n)
            out = ctypes.c_double()
            code = logp_fn(
                native.n, x.ctypes.data, grad.ctypes.data, ctypes.addressof(out),
                native.user_data_ptr,
            )  # fmt: skip
            if code != 0 or out.value != pytest.approx(float(expected[k][0]), rel=1e-14):
                failures.append(f"point {k}: code {code}, logp {out.value}")
                return
            if not np.allclose(grad, expected[k][1], rtol=1e-14, atol=0):
                failures.append(f"point {k}: gradient differs")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(points))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
