"""Random variables on JAX: generators as keys, NumPy's size and batch semantics.

Keys reproduce with a seed and advance with the updates; sizes, batch shapes and
batched core dimensions follow NumPy; the distributions themselves are checked against
SciPy by packages/random/tests/test_distributions.py on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import kiln_random as kr
from kiln_compile import Mode, function
from kiln_graph import tensor as kt

JAX = Mode(linker="jax")
VM = Mode(linker="vm")


def _normals(seed: int) -> object:
    r = kr.rng(seed)
    return r, function([], [kr.normal(0.0, 1.0, size=4, rng=r), kr.uniform(size=3, rng=r)], JAX)


def test_the_same_seed_reproduces_and_calls_advance():
    r1, f1 = _normals(11)
    _, f2 = _normals(11)
    _, f3 = _normals(12)
    state = r1.get_value().bit_generator.state
    first, second = f1(), f1()
    assert not np.array_equal(first[0], second[0])  # the update advanced the generator
    assert isinstance(r1.get_value(), np.random.Generator)
    assert r1.get_value().bit_generator.state != state
    again = f2()
    np.testing.assert_array_equal(again[0], first[0])  # same seed, same first draws
    np.testing.assert_array_equal(again[1], first[1])
    np.testing.assert_array_equal(f2()[0], second[0])
    assert not np.array_equal(f3()[0], first[0])


def test_without_updates_calls_repeat_their_draws():
    r = kr.rng(3)
    f = function([], kr.normal(size=5, rng=r), JAX, no_default_updates=True)
    np.testing.assert_array_equal(f(), f())


def test_chained_draws_of_one_function_are_independent():
    r = kr.rng(4)
    n = 20_000
    # Two different nodes (identical expressions would be one node, hence one draw).
    x, y = kr.normal(0.0, 1.0, size=n, rng=r), kr.normal(0.0, 2.0, size=n, rng=r)
    a, b = function([], [x, y], JAX)()
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(n)
    assert abs(a.mean()) < 5 / np.sqrt(n) and abs(b.std() - 2) < 0.06


def _shape_cases(r: object) -> list[object]:
    mu3 = kt.constant(np.array([0.0, 10.0, 100.0]))
    mvn_mu = kt.constant(np.array([[0.0, 1.0], [5.0, -5.0], [2.0, 2.0], [0.0, 0.0]]))
    cov = kt.constant(np.array([[1.0, 0.5], [0.5, 2.0]]))
    p = kt.constant(np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]))
    return [
        kr.normal(mu3, 1.0, rng=r),  # size None: the parameters' batch shape
        kr.normal(mu3, 1.0, size=(2, 3), rng=r),
        kr.normal(kt.constant(np.array([[1.0], [2.0]])), mu3 * 0 + 1, rng=r),  # (2,1) x (3,)
        kr.multivariate_normal(mvn_mu, cov, rng=r),  # (4, 2)
        kr.multivariate_normal(mvn_mu, cov, size=(5, 4), rng=r),  # (5, 4, 2)
        kr.dirichlet(kt.constant(np.ones((3, 4))), rng=r),
        kr.multinomial(kt.constant(np.array([5, 10, 20])), [0.2, 0.3, 0.5], rng=r),
        kr.categorical(p, size=(6, 2), rng=r),
    ]


def test_sizes_and_batch_shapes_follow_numpy_as_on_the_vm():
    jax_draws = function([], _shape_cases(kr.rng(1)), JAX)()
    vm_draws = function([], _shape_cases(kr.rng(1)), VM)()
    for i, (a, b) in enumerate(zip(jax_draws, vm_draws, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape, a.dtype)
    dirichlet, multinomial = jax_draws[5], jax_draws[6]
    np.testing.assert_allclose(dirichlet.sum(-1), 1.0)
    np.testing.assert_array_equal(multinomial.sum(-1), [5, 10, 20])


def test_batched_parameters_draw_each_batch_entry_from_its_own_parameters():
    n = 20_000
    r = kr.rng(8)
    mvn_mu = np.array([[0.0, 1.0], [5.0, -5.0]])
    cov = np.array([[1.0, 0.5], [0.5, 2.0]])
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    alpha = np.array([[1.0, 1.0, 8.0], [4.0, 2.0, 2.0]])
    outs = [
        kr.normal([0.0, 10.0, 100.0], [1.0, 2.0, 3.0], size=(n, 3), rng=r),
        kr.multivariate_normal(mvn_mu, cov, size=(n, 2), rng=r),
        kr.categorical(p, size=(n, 2), rng=r),
        kr.dirichlet(alpha, size=(n, 2), rng=r),
        kr.multinomial([10, 100], p, size=(n, 2), rng=r),
    ]
    normal, mvn, cat, dirichlet, multinomial = function([], outs, JAX)()
    se = 5 / np.sqrt(n)
    np.testing.assert_allclose(normal.mean(0), [0.0, 10.0, 100.0], atol=3 * se * 3)
    np.testing.assert_allclose(normal.std(0), [1.0, 2.0, 3.0], rtol=0.03)
    np.testing.assert_allclose(mvn.mean(0), mvn_mu, atol=2 * se * 2)
    for b in range(2):
        np.testing.assert_allclose(np.cov(mvn[:, b].T), cov, atol=0.08)
        freq = np.bincount(cat[:, b], minlength=3) / n
        np.testing.assert_allclose(freq, p[b], atol=se)
    np.testing.assert_allclose(dirichlet.mean(0), alpha / alpha.sum(-1, keepdims=True), atol=se)
    np.testing.assert_allclose(multinomial.mean(0), [[10], [100]] * p, rtol=0.02)


def test_size_from_a_traced_array_s_shape_needs_no_static_input():
    x = kt.vector("x")
    r = kr.rng(2)
    f = function([x], kr.normal(x, 1e-9, size=kt.shape(x), rng=r), JAX)
    np.testing.assert_allclose(f(np.arange(4.0)), np.arange(4.0), atol=1e-6)
    assert f.thunk.static == []
    np.testing.assert_allclose(f(np.arange(6.0)), np.arange(6.0), atol=1e-6)


def test_invalid_parameters_give_nan_where_the_vm_raises():
    sigma = kt.vector("sigma")
    r = kr.rng(5)
    f = function([sigma], kr.normal(0.0, sigma, rng=r), JAX)
    x = f(np.array([1.0, -1.0, 2.0]))
    assert np.isnan(x[1]) and np.isfinite(x[[0, 2]]).all()
    g = function([sigma], kr.normal(0.0, sigma, rng=kr.rng(5)), VM)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        g(np.array([1.0, -1.0, 2.0]))
