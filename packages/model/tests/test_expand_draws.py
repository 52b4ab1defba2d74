"""CompiledModel.expand_draws: every draw's values in one call, as expand gives them."""

from __future__ import annotations

import numpy as np
import pytest

import kiln as kl
import kiln.tensor as kt
from kiln_compile import FAST_RUN
from kiln_graph import KilnValueError


@pytest.mark.parametrize("linker", ["vm", "numba"])
def test_expand_draws_equals_expand_of_each_draw(linker):
    with kl.Model() as m:
        mu = kl.Normal("mu", 0.0, 1.0)
        tau = kl.HalfNormal("tau", 1.0)
        z = kl.Normal("z", 0.0, 1.0, shape=3)
        kl.Deterministic("theta", mu + tau * z)
        kl.Deterministic("total", kl.tensor.sum(z))
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker(linker))
    xs = np.random.default_rng(0).normal(size=(7, compiled.ndim))
    batched = compiled.expand_draws(xs)
    assert list(batched) == compiled.out_names
    for k, x in enumerate(xs):
        for name, value in compiled.expand(x).items():
            np.testing.assert_allclose(batched[name][k], value, rtol=1e-14)
    assert batched["theta"].shape == (7, 3) and batched["total"].shape == (7,)
    with pytest.raises(KilnValueError, match="draws"):
        compiled.expand_draws(xs[0])
    # NumPy over all the draws, whatever the model's backend: nothing to compile.
    assert compiled._expand_draws.linker == "vm"


@pytest.mark.parametrize("linker", ["vm", "numba"])
def test_deterministics_of_data_are_batched_too(linker):
    """Data (shared variables) enter the batched function unbatched: no per-draw loop."""
    with kl.Model() as m:
        x = kl.Data("x", np.array([0.5, -1.0, 2.0, 3.0]))
        a = kl.Normal("a", 0.0, 1.0)
        b = kl.Normal("b", 0.0, 1.0)
        kl.Deterministic("line", a + b * x)
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker(linker))
    xs = np.random.default_rng(1).normal(size=(5, compiled.ndim))
    batched = compiled.expand_draws(xs)
    assert compiled.expand_draws_problem is None
    for k, row in enumerate(xs):
        np.testing.assert_allclose(batched["line"][k], compiled.expand(row)["line"], rtol=1e-14)
    kl.set_data({"x": np.array([1.0, 2.0, 3.0, 4.0])}, model=m)
    again = compiled.expand_draws(xs)
    np.testing.assert_allclose(again["line"][0], compiled.expand(xs[0])["line"], rtol=1e-14)


def test_variables_without_a_transform_are_views_of_the_draws():
    """No copy of an untransformed variable's columns; the transformed ones computed."""
    with kl.Model() as m:
        kl.Normal("mu", 0.0, 1.0)
        kl.HalfNormal("tau", 1.0)
        kl.Normal("z", 0.0, 1.0, shape=(2, 3))
        kl.Poisson("k", 3.0)  # discrete: rounded from its float column, so computed
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker("vm"), discrete=True)
    xs = np.random.default_rng(2).normal(size=(6, compiled.ndim))
    xs[:, compiled.discrete_mask] = 2.0
    batched = compiled.expand_draws(xs)
    assert list(batched) == compiled.out_names
    for name in ("mu", "z"):
        assert np.shares_memory(batched[name], xs)
    assert not np.shares_memory(batched["tau"], xs)
    assert not np.shares_memory(batched["k"], xs)
    for k, x in enumerate(xs):
        for name, value in compiled.expand(x).items():
            np.testing.assert_allclose(batched[name][k], value, rtol=1e-14)
    assert batched["z"].shape == (6, 2, 3) and batched["mu"].shape == (6,)


def test_a_model_of_untransformed_variables_only_compiles_no_batched_function():
    with kl.Model() as m:
        kl.Normal("a", 0.0, 1.0)
        kl.Normal("b", 0.0, 1.0, shape=2)
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker("vm"))
    xs = np.arange(9.0).reshape(3, 3)
    batched = compiled.expand_draws(xs)
    np.testing.assert_array_equal(batched["a"], [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(batched["b"], [[1.0, 2.0], [4.0, 5.0], [7.0, 8.0]])
    assert compiled.expand_draws_problem is None


@pytest.mark.parametrize(
    ("kind", "linker"),
    [
        ("dirichlet", "vm"),
        ("zerosum", "vm"),
        ("regression", "vm"),
        ("lkj", "vm"),
        ("cholesky", "numba"),
    ],
)
def test_the_batched_graph_runs_on_the_vm_unless_it_would_loop_there(kind, linker):
    """Reductions, joins, gathers and products batch into NumPy calls.

    A Blockwise that does not (a Cholesky factor per draw) is compiled by the backend.
    """
    with kl.Model() as m:
        if kind == "dirichlet":
            kl.Dirichlet("w", a=np.ones(4))
        elif kind == "zerosum":
            kl.ZeroSumNormal("z", sigma=1.0, shape=5)
        elif kind == "regression":
            beta = kl.Normal("beta", 0.0, 1.0, shape=3)
            kl.Deterministic("mu", np.arange(15.0).reshape(5, 3) @ beta)
        elif kind == "lkj":
            kl.LKJCholeskyCov("c", n=3, eta=2.0, sd_dist=kl.Exponential.dist(1.0, shape=3))
        else:
            s = kl.HalfNormal("s", 1.0, shape=2)
            kl.Deterministic("L", kt.cholesky(kt.outer(s, s) + kt.eye(2)))
    compiled = m.logp_dlogp_function(mode=FAST_RUN.with_linker("numba"))
    xs = np.random.default_rng(1).normal(size=(6, compiled.ndim)) * 0.5
    batched = compiled.expand_draws(xs)
    assert compiled._expand_draws.linker == linker
    for k, x in enumerate(xs):
        for name, value in compiled.expand(x).items():
            np.testing.assert_allclose(batched[name][k], value, rtol=1e-13, atol=1e-15)
