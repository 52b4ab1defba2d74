"""Random variables on Numba: the core-shape rewrite, in-place draws, the Stage-2 cache.

Distributions themselves are checked against SciPy and the VM in kiln_random's tests
and in the shared conformance table (family ``random``).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
import kiln_random as kr
from kiln_compile.testing import compare_with_vm
from kiln_graph import Blockwise
from kiln_graph.ops import Join
from kiln_numba.core_shape import CoreShape

NUMBA = kiln.Mode(linker="numba")


def _ops(f: kiln.Function) -> list:
    return [n.op for n in f.fgraph.nodes]


def test_draws_with_core_dimensions_get_their_core_shape_on_numba_only() -> None:
    r = kr.rng(0)
    mu = kt.vector("mu")
    draws = [
        kr.multivariate_normal(mu, kt.eye(mu.shape[0]), size=(4,), rng=r),
        kr.dirichlet(kt.exp(mu), rng=r),
        kr.normal(mu, 1.0, rng=r),  # no core dimensions: not wrapped
    ]
    f = kiln.function([mu], draws, mode=NUMBA)
    wrapped = [op for op in _ops(f) if isinstance(op, CoreShape)]
    assert [type(op.op).__name__ for op in wrapped] == ["MultivariateNormalRV", "DirichletRV"]
    assert all(op.op.inplace for op in wrapped[1:])  # later draws of the chain run in place
    vm = kiln.function([mu], draws, mode=kiln.Mode(linker="vm"))
    assert not any(isinstance(op, CoreShape) for op in _ops(vm))
    r.set_value(np.random.default_rng(0))
    a = f(np.arange(3.0))
    r.set_value(np.random.default_rng(0))
    b = vm(np.arange(3.0))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13)


def test_without_the_rewrite_core_shapes_come_from_parameter_dimensions() -> None:
    r = kr.rng(0)
    cov = kt.matrix("cov")
    draw = kr.multivariate_normal(np.zeros(2), cov, size=(3,), rng=r)
    f = kiln.function([cov], draw, mode=NUMBA.excluding("numba"))
    assert not any(isinstance(op, CoreShape) for op in _ops(f))
    assert f(np.eye(2)).shape == (3, 2)


def test_blockwise_with_a_new_core_dimension_uses_the_core_shape() -> None:
    """A Blockwise making a longer output: allocated from the shape graph.

    A Blockwise of the Join itself: ``kt.vectorize`` of a concatenation is batched into
    one Join along the shifted axis by canonicalize, leaving no Blockwise.
    """
    x = kt.matrix("x")
    y = Blockwise(Join(0), "(n),(k)->(m)")(x, x * 2.0)
    f = kiln.function([x], y, mode=NUMBA)
    assert any(isinstance(op, CoreShape) for op in _ops(f))
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(f(value), np.concatenate([value, 2 * value], axis=1))
    assert f(np.zeros((0, 3))).shape == (0, 6)  # an empty batch needs no first call
    compare_with_vm([x], y, [value], backend="numba")


def test_batched_cholesky_and_solve_run_in_numba() -> None:
    a = kt.tensor("a", shape=(None, 3, 3))
    b = kt.matrix("b")
    outs = [
        kt.vectorize(kt.cholesky, "(m,m)->(m,m)")(a),
        kt.vectorize(kt.solve, "(m,m),(m)->(m)")(a, b),
    ]
    rng = np.random.default_rng(0)
    m = rng.normal(size=(4, 3, 3))
    spd = m @ m.transpose(0, 2, 1) + 3 * np.eye(3)
    compare_with_vm([a, b], outs, [spd, rng.normal(size=(4, 3))], backend="numba")


def test_a_random_graph_is_cached_across_processes(tmp_path) -> None:
    code = (
        "import numpy as np, kiln, kiln_random as kr\n"
        "r = kr.rng(3)\n"
        "f = kiln.function([], [kr.normal(size=5, rng=r), kr.dirichlet(np.ones(3), rng=r)],"
        " mode=kiln.Mode(linker='numba'), profile=True)\n"
        "a = f()\n"
        "print(f.thunk.stage2['cache'], a[0].round(12).tolist())\n"
    )
    env = {**__import__("os").environ, "KILN_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        for _ in range(2)
    ]
    first, second = (run.stdout.split(" ", 1) for run in runs)
    assert (first[0], second[0]) == ("miss", "hit")
    assert first[1] == second[1]


@pytest.mark.parametrize("inplace", [False, True])
def test_the_input_generator_is_copied_unless_in_place(inplace: bool) -> None:
    g = kt.shared(np.random.default_rng(1))
    op = kr.NormalRV(inplace=inplace)
    node = op.make_node(g, (2,), 0.0, 1.0)
    f = kiln.function(
        [],
        [node.outputs[1], node.outputs[0]],
        mode=kiln.Mode(rewrites=None, linker="numba"),
        no_default_updates=True,
    )
    state = g.get_value().bit_generator.state
    draw, next_rng = f()
    assert (g.get_value().bit_generator.state == state) is not inplace
    assert (next_rng is g.get_value()) is inplace
    np.testing.assert_allclose(draw, np.random.default_rng(1).normal(size=2))
