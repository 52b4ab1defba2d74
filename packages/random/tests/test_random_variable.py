"""The RandomVariable op: size semantics, batched draws, errors, generator threading."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.tensor as kt
import kiln_random as kr
from kiln_compile import available_linkers
from kiln_graph import GradientError, KilnTypeError, KilnValueError, ShapeMismatchError

BACKENDS = [b for b in ("vm", "numba") if b in available_linkers()]


def compile_on(backend: str, inputs, outputs, **kwargs):
    return kiln.function(inputs, outputs, mode=kiln.Mode(linker=backend), **kwargs)


# --- shapes --------------------------------------------------------------------------------

SHAPE_CASES = [
    # (description, builder(rng, mu-vector input) -> draw, static shape, shape at mu=(3,))
    ("scalar", lambda r, mu: kr.normal(0.0, 1.0, rng=r), (), ()),
    ("size int", lambda r, mu: kr.normal(0.0, 1.0, size=4, rng=r), (4,), (4,)),
    ("size tuple", lambda r, mu: kr.normal(0.0, 1.0, size=(2, 3), rng=r), (2, 3), (2, 3)),
    ("size=()", lambda r, mu: kr.normal(0.0, 1.0, size=(), rng=r), (), ()),
    ("params broadcast", lambda r, mu: kr.normal(mu, np.ones((2, 1)), rng=r), (2, None), (2, 3)),
    ("size covers params", lambda r, mu: kr.normal(mu, 1.0, size=(5, 3), rng=r), (5, 3), (5, 3)),
    (
        "symbolic size",
        lambda r, mu: kr.normal(0.0, 1.0, size=(mu.shape[0], 2), rng=r),
        (None, 2),
        (3, 2),
    ),
    (
        "vonmises batch",
        lambda r, mu: kr.vonmises(mu, kt.exp(mu), size=(2, 3), rng=r),
        (2, 3),
        (2, 3),
    ),
    (
        "hypergeometric batched n",
        lambda r, mu: kr.hypergeometric(20, 7, np.array([0, 5, 20]), rng=r),
        (3,),
        (3,),
    ),
    ("mvn core", lambda r, mu: kr.multivariate_normal(mu, kt.eye(3), rng=r), (3,), (3,)),
    (
        "mvn batched size",
        lambda r, mu: kr.multivariate_normal(mu, kt.eye(mu.shape[0]), size=(4,), rng=r),
        (4, None),
        (4, 3),
    ),
    (
        "mvn batched cov",
        lambda r, mu: kr.multivariate_normal(mu, np.stack([np.eye(3)] * 2), rng=r),
        (2, 3),
        (2, 3),
    ),
    (
        "dirichlet batch of vectors",
        lambda r, mu: kr.dirichlet(np.ones((5, 4)), rng=r),
        (5, 4),
        (5, 4),
    ),
    (
        "dirichlet symbolic",
        lambda r, mu: kr.dirichlet(kt.exp(mu), size=(2,), rng=r),
        (2, None),
        (2, 3),
    ),
    (
        "multinomial batched n",
        lambda r, mu: kr.multinomial(np.array([5, 10]), [0.5, 0.5], rng=r),
        (2, 2),
        (2, 2),
    ),
    (
        "categorical batch",
        lambda r, mu: kr.categorical(kt.stack([kt.exp(mu)] * 2), rng=r),
        (2,),
        (2,),
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_draw_shapes(backend: str) -> None:
    """Static and run-time shapes for size=None, explicit sizes, broadcast and core params."""
    r = kr.rng(0)
    mu = kt.vector("mu")
    draws = [build(r, mu) for _, build, _, _ in SHAPE_CASES]
    for (what, _, static, _), d in zip(SHAPE_CASES, draws, strict=True):
        assert d.type.shape == static, what
    f = compile_on(backend, [mu], draws)
    values = f(np.zeros(3))
    for (what, _, _, shape), v in zip(SHAPE_CASES, values, strict=True):
        assert v.shape == shape, (backend, what)
    assert np.all(values[-1] >= 0) and np.all(values[-1] < 3)
    np.testing.assert_allclose(values[-3].sum(axis=-1), np.ones(2))
    np.testing.assert_array_equal(values[-2].sum(axis=-1), [5, 10])


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_parameters_draw_per_element(backend: str) -> None:
    """Each batch element uses its own parameters (means far apart tell them apart)."""
    r = kr.rng(1)
    mus = np.array([[-100.0, 0.0], [100.0, 1e4]])
    x = kr.normal(mus, 1.0, size=(500, 2, 2), rng=r)
    mv = kr.multivariate_normal(mus, np.stack([np.eye(2) * 1e-4] * 2), size=(300, 2), rng=r)
    f = compile_on(backend, [], [x, mv])
    xs, mvs = f()
    np.testing.assert_allclose(xs.mean(axis=0), mus, atol=0.5)
    np.testing.assert_allclose(mvs.mean(axis=0), mus, atol=0.01)


def test_numba_and_vm_agree_on_batched_draws() -> None:
    if "numba" not in BACKENDS:
        pytest.skip("kiln-numba is not installed")
    mu = kt.vector("mu")
    results = []
    for backend in ("vm", "numba"):
        r = kr.rng(11)
        outs = [build(r, mu) for _, build, _, _ in SHAPE_CASES]
        results.append(compile_on(backend, [mu], outs)(np.arange(3.0)))
    for (what, *_), a, b in zip(SHAPE_CASES, *results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, err_msg=what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_batches(backend: str) -> None:
    r = kr.rng(0)
    n = kt.scalar("n", dtype="int64")
    outs = [
        kr.normal(0.0, 1.0, size=(n, 2), rng=r),
        kr.multivariate_normal(np.zeros(3), np.eye(3), size=(n,), rng=r),
    ]
    a, b = compile_on(backend, [n], outs)(0)
    assert a.shape == (0, 2) and b.shape == (0, 3)


# --- errors at build time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (
            lambda r: kr.normal(np.zeros(3), 1.0, size=(2,), rng=r),
            ShapeMismatchError,
            "does not broadcast",
        ),
        (
            lambda r: kr.normal(np.zeros((2, 3)), 1.0, size=(3,), rng=r),
            ShapeMismatchError,
            "size has 1",
        ),
        (lambda r: kr.normal(np.zeros(3), 1.0, size=(), rng=r), ShapeMismatchError, "size=()"),
        (
            lambda r: kr.normal(0.0, -1.0, rng=r),
            KilnValueError,
            "sigma must be > 0, got sigma=-1.0",
        ),
        (lambda r: kr.beta(np.array([1.0, 0.0]), 1.0, rng=r), KilnValueError, "alpha must be > 0"),
        (lambda r: kr.binomial(2.5, 0.5, rng=r), KilnTypeError, "'n' must be an integer"),
        (lambda r: kr.normal(0.0, 1.0, size=(-1,), rng=r), KilnValueError, "non-negative"),
        (
            lambda r: kr.multivariate_normal(np.zeros(3), np.eye(2), rng=r),
            ShapeMismatchError,
            "core dimension 'n'",
        ),
        (
            lambda r: kr.multivariate_normal(np.zeros(3), np.zeros(3), rng=r),
            KilnValueError,
            "at least 2",
        ),
        (lambda r: kr.dirichlet(1.0, rng=r), KilnValueError, "at least 1"),
        (
            lambda r: kr.normal(0.0, 1.0, rng=np.random.default_rng(0)),
            KilnTypeError,
            "kiln.random.rng",
        ),
        (lambda r: kr.normal(0.0, 1.0, rng=kt.scalar("x")), KilnTypeError, "random generator"),
        (lambda r: kr.normal(0.0, rng=r, size=None, bogus=1), TypeError, "bogus"),
    ],
)
def test_bad_input_is_a_clear_error_at_build_time(build, error, match) -> None:
    with pytest.raises(error, match=match):
        build(kr.rng(0))


# --- errors at run time ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("build", "value"),
    [
        (lambda r, s: kr.normal(0.0, s, rng=r), -1.0),
        (lambda r, s: kr.normal(0.0, s, rng=r), np.nan),
        (lambda r, s: kr.poisson(s, size=3, rng=r), -2.0),
        (lambda r, s: kr.truncated_normal(0.0, 1.0, s, 0.0, rng=r), 1.0),
        (lambda r, s: kr.vonmises(0.0, s, rng=r), -1.0),
        (lambda r, s: kr.hypergeometric(10, 3, kt.cast(s, "int64"), rng=r), 11.0),
    ],
)
def test_invalid_parameter_values_raise_at_run_time(backend: str, build, value) -> None:
    s = kt.scalar("s")
    f = compile_on(backend, [s], build(kr.rng(0), s))
    with pytest.raises(KilnValueError, match="invalid parameter values"):
        f(value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_invalid_core_parameters_raise_at_run_time(backend: str) -> None:
    p = kt.vector("p")
    cov = kt.matrix("cov")
    r = kr.rng(0)
    f = compile_on(backend, [p], kr.categorical(p, rng=r))
    with pytest.raises(ValueError, match="p must be >= 0"):
        f(np.array([0.5, -0.1]))
    g = compile_on(backend, [cov], kr.multivariate_normal(np.zeros(2), cov, rng=r))
    with pytest.raises(np.linalg.LinAlgError):
        g(-np.eye(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_runtime_size_and_broadcast_errors(backend: str) -> None:
    n, mu = kt.scalar("n", dtype="int64"), kt.vector("mu")
    r = kr.rng(0)
    f = compile_on(backend, [n], kr.normal(0.0, 1.0, size=(n,), rng=r))
    with pytest.raises(KilnValueError, match="non-negative"):
        f(-1)
    g = compile_on(backend, [mu, n], kr.normal(mu, 1.0, size=(n,), rng=r))
    with pytest.raises(ShapeMismatchError):
        g(np.zeros(3), 4)


# --- generators: updates, threading, reproducibility ----------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_advance_the_shared_generator(backend: str) -> None:
    r = kr.rng(5)
    x = kr.normal(size=3, rng=r)
    f = compile_on(backend, [], x)
    a, b = f(), f()
    assert not np.array_equal(a, b)
    expected = np.random.default_rng(5)
    np.testing.assert_allclose(a, expected.normal(size=3), rtol=1e-15)
    np.testing.assert_allclose(b, expected.normal(size=3), rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_draws_from_one_generator_are_independent(backend: str) -> None:
    r = kr.rng(5)
    x, y = kr.normal(size=3, rng=r), kr.normal(0.0, 2.0, size=3, rng=r)
    a, b = compile_on(backend, [], [x, y])()
    expected = np.random.default_rng(5)
    np.testing.assert_allclose(a, expected.normal(size=3), rtol=1e-15)
    np.testing.assert_allclose(b, expected.normal(0.0, 2.0, size=3), rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_default_updates_repeats_the_draws(backend: str) -> None:
    r = kr.rng(5)
    f = compile_on(backend, [], kr.normal(size=3, rng=r), no_default_updates=True)
    np.testing.assert_array_equal(f(), f())


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_explicit_generator_input_is_not_mutated(backend: str) -> None:
    """A pure graph: a generator passed as an input keeps its state; next_rng is new."""
    g = kt.shared(np.random.default_rng(9))
    node = kr.OPS["normal"].make_node(g, None, 0.0, 1.0)
    f = compile_on(backend, [], [node.outputs[1], node.outputs[0]], no_default_updates=True)
    state = g.get_value().bit_generator.state
    draw, next_rng = f()
    assert g.get_value().bit_generator.state == state
    assert next_rng is not g.get_value()
    np.testing.assert_allclose(draw, np.random.default_rng(9).normal(), rtol=1e-15)


def test_the_first_draw_copies_and_the_rest_run_in_place() -> None:
    r = kr.rng(0)
    x, y = kr.normal(rng=r), kr.gamma(2.0, rng=r)
    f = kiln.function([], [x, y], mode=kiln.Mode(linker="vm"))
    rvs = [n.op for n in f.fgraph.nodes if isinstance(n.op, kr.RandomVariable)]
    assert [op.inplace for op in rvs] == [False, True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_draws_across_processes(backend: str) -> None:
    code = (
        "import kiln, kiln_random as kr\n"
        "r = kr.rng(123)\n"
        "outs = [kr.gamma(2.0, 1.0, size=4, rng=r), kr.dirichlet([1.0, 2.0], rng=r)]\n"
        f"f = kiln.function([], outs, mode=kiln.Mode(linker={backend!r}))\n"
        "a = f(); b = f()\n"
        "print(repr([a[0].tolist(), a[1].tolist(), b[0].tolist()]))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    other = code.replace("kr.rng(123)", "kr.rng(124)")
    third = subprocess.run(
        [sys.executable, "-c", other], capture_output=True, text=True, check=True
    )
    assert third.stdout != runs[0]


def test_draws_have_no_gradient() -> None:
    mu = kt.scalar("mu")
    x = kr.normal(mu, 1.0, rng=kr.rng(0))
    with pytest.raises(GradientError, match="no gradient"):
        kiln.grad(x, mu)


def test_a_constant_size_equal_to_the_batch_shape_is_dropped() -> None:
    r = kr.rng(0)
    x = kr.normal(np.zeros(3), 1.0, size=(3,), rng=r)
    f = kiln.function([], x, mode=kiln.Mode(linker="vm"))
    (node,) = [n for n in f.fgraph.nodes if isinstance(n.op, kr.RandomVariable)]
    assert node.inputs[1].type.shape == (0,)


def test_default_generator_when_none_is_given() -> None:
    x = kr.normal(size=2)
    f = kiln.function([], x, mode=kiln.Mode(linker="vm"))
    assert not np.array_equal(f(), f())
    assert x.owner.inputs[0] is kr.default_rng()


def test_functions_of_one_generator_do_not_depend_on_each_other() -> None:
    """Each function chains only its own draws: a draw needs no other function's input."""
    r = kr.rng(4)
    p = kt.vector("p")
    a = kr.categorical(p, rng=r)
    b = kr.normal(size=2, rng=r)
    f = kiln.function([], b, mode=kiln.Mode(linker="vm"))  # needs no p
    np.testing.assert_allclose(f(), np.random.default_rng(4).normal(size=2))
    g = kiln.function([p], [a, b], mode=kiln.Mode(linker="vm"))
    first, second = g(np.ones(3))
    assert first in (0, 1, 2) and second.shape == (2,)


def test_identical_draw_expressions_are_one_draw() -> None:
    r = kr.rng(4)
    assert kr.normal(size=2, rng=r) is kr.normal(size=2, rng=r)


def test_an_explicit_update_of_the_generator_wins() -> None:
    r = kr.rng(4)
    x = kr.normal(rng=r)
    f = kiln.function([], x, updates={r: r}, mode=kiln.Mode(linker="vm"))
    assert f() == f()
