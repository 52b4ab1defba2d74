import numpy as np
import pytest
import scipy.linalg as sla

import kiln_graph.tensor as kt
from kiln_graph import Blockwise, KilnTypeError, KilnValueError, ShapeMismatchError
from kiln_graph._linalg import Cholesky, MatMul, Solve, SolveTriangular
from kiln_graph.testing import check_infer_shape, evaluate, verify_grad

RNG = np.random.default_rng(42)


def spd(n, batch=()):
    x = RNG.normal(size=(*batch, n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def general(n, batch=()):
    return RNG.normal(size=(*batch, n, n)) + 3 * np.eye(n)


def var(name, value):
    """Return a symbolic input with unknown static shape of ``value``'s number of dimensions."""
    return kt.tensor(name, dtype=np.asarray(value).dtype, shape=(None,) * np.ndim(value))


# --- products ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((3, 4), (4, 2)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((5, 3, 4), (4, 2)),
        ((3, 4), (5, 4, 2)),
        ((5, 3, 4), (5, 4, 2)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((4,), (5, 4, 2)),
        ((5, 3, 4), (4,)),
    ],
)
def test_matmul_matches_numpy(sa, sb):
    a, b = RNG.normal(size=sa), RNG.normal(size=sb)
    # Dimensions of length 1 broadcast only when declared static.
    x = kt.tensor("x", shape=tuple(1 if n == 1 else None for n in sa))
    y = kt.tensor("y", shape=tuple(1 if n == 1 else None for n in sb))
    out = x @ y
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), np.matmul(a, b))
    assert out.ndim == np.matmul(a, b).ndim
    check_infer_shape(out, {x: a, y: b})


def test_matmul_static_shapes_and_core_op():
    x = kt.tensor("x", shape=(5, 3, 4))
    y = kt.tensor("y", shape=(4, 2))
    assert (x @ y).type.shape == (5, 3, 2)
    assert isinstance((x @ y).owner.op, Blockwise)
    m = kt.matrix("m", shape=(3, 4))
    assert (m @ y).type.shape == (3, 2)
    assert isinstance((m @ y).owner.op, MatMul)
    assert (m @ y) is kt.matmul(m, y)  # interned
    assert kt.matmul(kt.vector("v", shape=(4,)), y).type.shape == (2,)
    assert kt.dot(kt.vector("v", shape=(4,)), kt.vector("w")).type.shape == ()


def test_matmul_integer_dtype():
    a = np.arange(6).reshape(2, 3)
    x = kt.matrix("x", dtype="int64")
    out = x @ x.T
    assert out.dtype == "int64"
    np.testing.assert_array_equal(evaluate(out, {x: a}), a @ a.T)


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((), (3,)),
        ((3,), ()),
        ((4,), (4,)),
        ((3, 4), (4,)),
        ((4,), (4, 2)),
        ((3, 4), (4, 2)),
        ((5, 3, 4), (4, 2)),
        ((3, 4), (5, 4, 2)),
        ((4,), (5, 4, 2)),
        ((5, 3, 4), (4,)),
    ],
)
def test_dot_matches_numpy(sa, sb):
    a, b = RNG.normal(size=sa), RNG.normal(size=sb)
    x, y = var("x", a), var("y", b)
    out = kt.dot(x, y)
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), np.dot(a, b))
    check_infer_shape(out, {x: a, y: b})


def test_dot_grad():
    verify_grad(kt.dot, [RNG.normal(size=4), RNG.normal(size=4)])
    verify_grad(kt.dot, [RNG.normal(size=(3, 4)), RNG.normal(size=4)])
    verify_grad(kt.dot, [RNG.normal(size=(3, 4)), RNG.normal(size=(2, 4, 2))])


def test_dot_two_stacks_is_an_error():
    with pytest.raises(KilnValueError, match="matmul"):
        kt.dot(kt.tensor("a", shape=(2, 3, 4)), kt.tensor("b", shape=(2, 4, 3)))


def test_outer():
    a, b = RNG.normal(size=3), RNG.normal(size=(2, 2))
    x, y = var("x", a), var("y", b)
    np.testing.assert_allclose(evaluate(kt.outer(x, y), {x: a, y: b}), np.outer(a, b))
    verify_grad(kt.outer, [a, RNG.normal(size=4)])


@pytest.mark.parametrize(
    "sa, sb",
    [((3, 4), (4, 2)), ((4,), (4, 2)), ((4,), (4,)), ((5, 3, 4), (4, 2)), ((1, 3, 4), (2, 4, 2))],
)
def test_matmul_grad(sa, sb):
    verify_grad(kt.matmul, [RNG.normal(size=sa), RNG.normal(size=sb)])


def test_matmul_errors():
    with pytest.raises(ShapeMismatchError, match="last dimension"):
        kt.matrix("a", shape=(3, 4)) @ kt.matrix("b", shape=(5, 2))
    with pytest.raises(ShapeMismatchError, match="last dimension"):
        kt.tensor("a", shape=(2, 3, 4)) @ kt.matrix("b", shape=(5, 2))
    with pytest.raises(KilnValueError, match="0-d"):
        kt.matmul(kt.scalar("s"), kt.vector("v"))
    with pytest.raises(ShapeMismatchError, match="incompatible"):
        kt.tensor("a", shape=(2, 3, 4)) @ kt.tensor("b", shape=(3, 4, 2))


def test_matmul_runtime_errors():
    x, y = kt.matrix("x"), kt.matrix("y")
    with pytest.raises(ValueError):
        evaluate(x @ y, {x: np.ones((3, 4)), y: np.ones((5, 2))})
    a, b = kt.tensor("a", shape=(None, None, None)), kt.tensor("b", shape=(None, None, None))
    with pytest.raises(ShapeMismatchError, match="core dimension 'k'"):
        evaluate(a @ b, {a: np.ones((2, 3, 4)), b: np.ones((2, 5, 2))})
    with pytest.raises(ShapeMismatchError, match="static length is 1"):
        evaluate(a @ b, {a: np.ones((2, 3, 4)), b: np.ones((1, 4, 2))})


# --- decompositions, solves, inverse, determinants ----------------------------------------


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_cholesky(lower, batch):
    s = spd(4, batch)
    x = var("x", s)
    out = kt.cholesky(x, lower=lower)
    expected = np.linalg.cholesky(s)
    if not lower:
        expected = np.swapaxes(expected, -1, -2)
    np.testing.assert_allclose(evaluate(out, {x: s}), expected, atol=1e-12)
    check_infer_shape(out, {x: s})
    verify_grad(lambda a: kt.cholesky(a, lower=lower), [s])


def test_cholesky_static_shape_and_props():
    assert kt.cholesky(kt.tensor("x", shape=(2, None, 3))).type.shape == (2, 3, 3)
    assert Cholesky(True) == Cholesky(lower=True) != Cholesky(False)
    assert kt.cholesky(kt.matrix("x", dtype="float32")).dtype == "float32"
    assert kt.cholesky(kt.matrix("x", dtype="int32")).dtype == "float64"


def test_cholesky_grad_of_symmetric_input():
    # The usual case: the matrix is built symmetric from parameters.
    def f(p):
        return kt.cholesky(p @ p.T + 3.0 * np.eye(3))

    verify_grad(f, [RNG.normal(size=(3, 3))])


@pytest.mark.parametrize("assume_a", ["gen", "sym", "pos"])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("b_shape", [(4,), (4, 2)])
def test_solve(assume_a, lower, b_shape):
    a = spd(4) if assume_a != "gen" else general(4)
    b = RNG.normal(size=b_shape)
    x, y = var("a", a), var("b", b)
    out = kt.solve(x, y, assume_a=assume_a, lower=lower)
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), np.linalg.solve(a, b), rtol=1e-10)
    check_infer_shape(out, {x: a, y: b})
    verify_grad(lambda p, q: kt.solve(p, q, assume_a=assume_a, lower=lower), [a, b])


def test_solve_reads_one_triangle():
    a = spd(3)
    junk = a + np.triu(RNG.normal(size=(3, 3)), 1)
    b = RNG.normal(size=3)
    x, y = var("a", a), var("b", b)
    out = kt.solve(x, y, assume_a="pos", lower=True)
    np.testing.assert_allclose(evaluate(out, {x: junk, y: b}), np.linalg.solve(a, b))


@pytest.mark.parametrize("assume_a", ["gen", "pos"])
def test_solve_batched(assume_a):
    a = spd(3, (2, 1)) if assume_a == "pos" else general(3, (2, 1))
    b = RNG.normal(size=(4, 3))  # batch (4,), vector right-hand sides
    x = kt.tensor("a", shape=(None, 1, None, None))
    y = kt.matrix("b")
    out = kt.solve(x, y, assume_a=assume_a, b_ndim=1)
    assert out.ndim == 3
    expected = np.linalg.solve(a, b[..., None])[..., 0]
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), expected, rtol=1e-10)
    check_infer_shape(out, {x: a, y: b})
    verify_grad(lambda p, q: kt.solve(p, q, assume_a=assume_a, b_ndim=1), [a, b])


def test_solve_matrix_rhs_batched():
    a, b = general(3, (2,)), RNG.normal(size=(2, 3, 2))
    x, y = var("a", a), var("b", b)
    out = kt.solve(x, y)
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), np.linalg.solve(a, b), rtol=1e-10)
    verify_grad(kt.solve, [a, b])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "C"])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("b_shape", [(4,), (4, 3)])
def test_solve_triangular(lower, trans, unit_diagonal, b_shape):
    a = general(4)
    b = RNG.normal(size=b_shape)
    x, y = var("a", a), var("b", b)
    kwargs = {"lower": lower, "trans": trans, "unit_diagonal": unit_diagonal}
    out = kt.solve_triangular(x, y, **kwargs)
    expected = sla.solve_triangular(a, b, **kwargs)
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), expected, rtol=1e-10)
    check_infer_shape(out, {x: a, y: b})
    verify_grad(lambda p, q: kt.solve_triangular(p, q, **kwargs), [a, b])


def test_solve_triangular_batched():
    a, b = general(3, (2,)), RNG.normal(size=(2, 3))
    x, y = var("a", a), var("b", b)
    out = kt.solve_triangular(x, y, lower=True, b_ndim=1)
    expected = np.stack([sla.solve_triangular(a[i], b[i], lower=True) for i in range(2)])
    np.testing.assert_allclose(evaluate(out, {x: a, y: b}), expected)
    verify_grad(lambda p, q: kt.solve_triangular(p, q, lower=True, b_ndim=1), [a, b])


def test_solve_triangular_props():
    assert SolveTriangular(trans="T") == SolveTriangular(trans=1) == SolveTriangular(trans=2)
    assert Solve("general") == Solve("gen") == Solve("gen", lower=True)
    assert Solve("pos", lower=True) != Solve("pos", lower=False)


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_inv(batch):
    a = general(3, batch)
    x = var("x", a)
    out = kt.inv(x)
    np.testing.assert_allclose(evaluate(out, {x: a}), np.linalg.inv(a), rtol=1e-10)
    check_infer_shape(out, {x: a})
    verify_grad(kt.inv, [a])


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_det(batch):
    a = general(3, batch)
    x = var("x", a)
    out = kt.det(x)
    assert out.ndim == len(batch)
    np.testing.assert_allclose(evaluate(out, {x: a}), np.linalg.det(a), rtol=1e-10)
    check_infer_shape(out, {x: a})
    verify_grad(kt.det, [a])


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_slogdet(batch):
    a = general(3, batch)
    a[..., 0, :] *= -1  # some negative determinants
    x = var("x", a)
    sign, logabsdet = kt.slogdet(x)
    expected = np.linalg.slogdet(a)
    got = evaluate([sign, logabsdet], {x: a})
    np.testing.assert_allclose(got[0], expected.sign)
    np.testing.assert_allclose(got[1], expected.logabsdet, rtol=1e-10)
    check_infer_shape([sign, logabsdet], {x: a})
    verify_grad(lambda p: kt.slogdet(p)[1], [a])
    verify_grad(lambda p: kt.slogdet(p)[0] * kt.slogdet(p)[1], [a])


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_eigh(batch):
    a = spd(4, batch)
    upper_junk = a + np.triu(RNG.normal(size=a.shape), 1)  # only the lower triangle is read
    x = var("x", a)
    w, v = kt.eigh(x)
    got_w, got_v = evaluate([w, v], {x: upper_junk})
    want_w, want_v = np.linalg.eigh(a)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12)
    # the same vectors up to sign; kiln's sign: each column's largest entry is positive
    np.testing.assert_allclose(np.abs(got_v), np.abs(want_v), atol=1e-12)
    biggest = np.take_along_axis(got_v, np.argmax(np.abs(got_v), axis=-2)[..., None, :], -2)
    assert (biggest > 0).all()
    np.testing.assert_allclose(got_v @ (got_w[..., None] * np.swapaxes(got_v, -1, -2)), a)
    check_infer_shape([w, v], {x: a})


def test_eigh_gradient_against_finite_differences():
    # A perturbation of the upper triangle changes nothing: its gradient is 0 there.
    a = spd(4)
    c, d = RNG.normal(size=4), RNG.normal(size=(4, 4))
    verify_grad(lambda p: kt.sum(kt.eigh(p)[0] * c) + kt.sum(kt.eigh(p)[1] * d), [a])
    verify_grad(lambda p: kt.eigh(p)[1][:, -1], [a])
    # through a symmetric matrix built from parameters, as a covariance is
    verify_grad(lambda p: kt.eigh(p @ p.T + 3.0 * np.eye(3))[1], [RNG.normal(size=(3, 3))])
    # nearly repeated eigenvalues: large but finite gradients, still right
    q = np.linalg.qr(RNG.normal(size=(3, 3)))[0]
    close = q @ np.diag([1.0, 1.0 + 1e-3, 2.0]) @ q.T
    verify_grad(lambda p: kt.eigh(p)[1], [close], rtol=1e-3, atol=1e-4)


def test_eigh_of_non_finite_matrix_is_nan():
    x = kt.matrix("x")
    a = spd(3)
    a[2, 1] = np.inf
    got = evaluate(list(kt.eigh(x)), {x: a})
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()
    a[2, 1], a[1, 2] = 0.0, np.nan  # the upper triangle is not read
    assert np.isfinite(evaluate(kt.eigh(x)[0], {x: a})).all()


def test_second_derivative_through_linalg():
    # d/dA of sum(grad(logdet(A))) = d/dA sum(inv(A).T): check against finite differences.
    def f(a):
        return kt.grad(kt.slogdet(a)[1], a)

    verify_grad(f, [spd(3)])

    def g(a):
        return kt.grad(kt.sum(kt.cholesky(a)), a)

    verify_grad(g, [spd(3)], rtol=1e-3, atol=1e-5)


def test_grad_with_unknown_static_shapes():
    # Same gradient with and without static shapes (batch broadcasting, Blockwise).
    a, b = spd(3, (2, 1)), RNG.normal(size=(4, 3))
    x = kt.tensor("a", shape=(None, 1, None, None))
    y = kt.matrix("b")
    cost = kt.sum(kt.solve(kt.cholesky(x), y, b_ndim=1) ** 2)
    gx, gy = kt.grad(cost, [x, y])
    xs, ys = kt.tensor("a", shape=a.shape), kt.tensor("b", shape=b.shape)
    cost_s = kt.sum(kt.solve(kt.cholesky(xs), ys, b_ndim=1) ** 2)
    gxs, gys = kt.grad(cost_s, [xs, ys])
    got = evaluate([gx, gy], {x: a, y: b})
    want = evaluate([gxs, gys], {xs: a, ys: b})
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1])
    assert got[0].shape == a.shape and got[1].shape == b.shape


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [kt.cholesky, kt.inv, kt.det, kt.slogdet, kt.eigh])
def test_non_square_is_an_error(fn):
    with pytest.raises(ShapeMismatchError, match="square"):
        fn(kt.matrix("x", shape=(3, 4)))
    with pytest.raises(ShapeMismatchError, match="square"):
        fn(kt.tensor("x", shape=(2, 3, 4)))


@pytest.mark.parametrize("fn", [kt.cholesky, kt.inv, kt.det, kt.slogdet, kt.eigh])
def test_too_few_dims_is_an_error(fn):
    with pytest.raises(KilnValueError, match="at least 2 dimension"):
        fn(kt.vector("x"))


def test_solve_errors():
    with pytest.raises(ShapeMismatchError, match="first dimension"):
        kt.solve(kt.matrix("a", shape=(3, 3)), kt.vector("b", shape=(4,)))
    with pytest.raises(ShapeMismatchError, match="first dimension"):
        kt.solve_triangular(kt.tensor("a", shape=(2, 3, 3)), kt.matrix("b", shape=(4, 2)))
    with pytest.raises(ShapeMismatchError, match="square"):
        kt.solve(kt.matrix("a", shape=(3, 2)), kt.vector("b"))
    with pytest.raises(KilnValueError, match="at least 2"):
        kt.solve(kt.vector("a"), kt.vector("b"))
    with pytest.raises(KilnValueError, match="assume_a"):
        kt.solve(kt.matrix("a"), kt.vector("b"), assume_a="banded")
    with pytest.raises(KilnValueError, match="trans"):
        kt.solve_triangular(kt.matrix("a"), kt.vector("b"), trans=3)
    with pytest.raises(KilnValueError, match="b_ndim"):
        kt.solve(kt.matrix("a"), kt.matrix("b"), b_ndim=3)
    with pytest.raises(KilnValueError, match="at least 1"):
        kt.solve(kt.matrix("a"), kt.scalar("b"), b_ndim=1)


def test_unsupported_dtype_is_an_error():
    with pytest.raises(KilnTypeError, match="float16"):
        kt.inv(kt.matrix("x", dtype="float16"))
    with pytest.raises(KilnTypeError, match="complex128"):
        kt.cholesky(kt.matrix("x", dtype="complex128"))


def test_not_positive_definite_raises_at_run_time():
    x = kt.matrix("x")
    with pytest.raises(np.linalg.LinAlgError):
        evaluate(kt.cholesky(x), {x: -np.eye(2)})
