"""``kl.math`` against NumPy/SciPy (tails included), and the ``kl.distributions`` namespace."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

import kiln as kl
import kiln_model as km
from kiln_graph import tensor as kt

X = np.array([-40.0, -3.0, -0.5, 0.0, 0.7, 5.0, 40.0])
P = np.array([1e-12, 1e-3, 0.2, 0.5, 0.9, 1 - 1e-9])


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """Return log(1 - exp(x)) in the form accurate on each side of -log 2 (Maechler)."""
    return np.where(x < -np.log(2.0), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


#: (name, kl.math function of one input, reference, inputs)
UNARY = [
    ("invlogit", kl.math.invlogit, special.expit, X),
    ("logit", kl.math.logit, special.logit, P),
    ("invprobit", kl.math.invprobit, stats.norm.cdf, X),
    ("probit", kl.math.probit, stats.norm.ppf, P[1:-1]),
    ("log1pexp", kl.math.log1pexp, lambda x: np.logaddexp(0.0, x), X),
    ("log1mexp", kl.math.log1mexp, lambda x: _log1mexp(x), -np.abs(X[X != 0])),
    ("sqr", kl.math.sqr, np.square, X),
    ("sgn", kl.math.sgn, np.sign, X),
    ("abs", kl.math.abs, np.abs, X),
    ("exp", kl.math.exp, np.exp, X),
    ("erf", kl.math.erf, special.erf, X),
]


@pytest.mark.parametrize("name, fn, ref, values", UNARY, ids=[u[0] for u in UNARY])
def test_unary_functions_match_the_reference(name: str, fn, ref, values) -> None:  # type: ignore[no-untyped-def]
    x = kt.vector("x")
    got = kl.function([x], fn(x))(values)
    np.testing.assert_allclose(got, ref(values), rtol=1e-9, err_msg=name)


def test_log_difference_and_sums_keep_their_digits() -> None:
    a, b = kt.vector("a"), kt.vector("b")
    f = kl.function(
        [a, b], [kl.math.logdiffexp(a, b), kl.math.logaddexp(a, b), kl.math.logsumexp(a)]
    )
    av, bv = np.array([1000.0, 0.0, -5.0]), np.array([999.0, -1e-3, -50.0])
    diff, add, lse = f(av, bv)
    np.testing.assert_allclose(diff, av + np.log(-np.expm1(bv - av)), rtol=1e-12)
    np.testing.assert_allclose(add, np.logaddexp(av, bv), rtol=1e-12)
    np.testing.assert_allclose(lse, special.logsumexp(av), rtol=1e-12)


def test_linear_algebra_and_shapes() -> None:
    m = kt.matrix("m")
    value = np.array([[2.0, 0.3], [0.3, 1.0]])
    inv, det, logdet = kl.function(
        [m], [kl.math.matrix_inverse(m), kl.math.det(m), kl.math.logdet(m)]
    )(value)
    np.testing.assert_allclose(inv, np.linalg.inv(value), rtol=1e-12)
    np.testing.assert_allclose(det, np.linalg.det(value), rtol=1e-12)
    np.testing.assert_allclose(logdet, np.log(np.linalg.det(value)), rtol=1e-12)
    v = kt.vector("v")
    packed = np.arange(1.0, 7.0)
    tri = kl.function([v], kl.math.expand_packed_triangular(3, v))(packed)
    expect = np.zeros((3, 3))
    expect[np.tril_indices(3)] = packed
    np.testing.assert_array_equal(tri, expect)
    c = kl.function([m], kl.math.cumprod(m, axis=1))(np.array([[1.0, -2.0, 3.0], [0.0, 4.0, 5.0]]))
    np.testing.assert_array_equal(c, [[1.0, -2.0, -6.0], [0.0, 0.0, 0.0]])
    k = kl.function([m], kl.math.kron(m, m))(value)
    np.testing.assert_allclose(k, np.kron(value, value))


def test_comparisons_and_switch() -> None:
    x = kt.vector("x")
    out = kl.function(
        [x],
        [
            kl.math.switch(kl.math.gt(x, 0.0), x, 0.0),
            kl.math.where(kl.math.le(x, 0.0), 1.0, 2.0),
            kl.math.clip(x, -1.0, 1.0),
            kl.math.maximum(x, 0.5),
        ],
    )(X)
    np.testing.assert_array_equal(out[0], np.where(X > 0, X, 0.0))
    np.testing.assert_array_equal(out[1], np.where(X <= 0, 1.0, 2.0))
    np.testing.assert_array_equal(out[2], np.clip(X, -1, 1))
    np.testing.assert_array_equal(out[3], np.maximum(X, 0.5))


def test_distributions_namespace_holds_every_distribution() -> None:
    exported = {
        name
        for name in dir(km)
        if isinstance(getattr(km, name), type)
        and issubclass(getattr(km, name), km.Distribution)
        and getattr(km, name) is not km.Distribution
    }
    assert exported <= set(dir(kl.distributions))
    assert kl.distributions.Normal is kl.Normal
    assert kl.Lognormal is kl.LogNormal  # PyMC's other spelling
    assert kl.distributions.transforms.ordered is km.transforms.ordered


def test_a_missing_pymc_name_says_so() -> None:
    with pytest.raises(AttributeError, match="'Simulator' is a PyMC distribution kiln does not"):
        _ = kl.Simulator
    with pytest.raises(AttributeError, match="Normal"):
        _ = kl.Normel
