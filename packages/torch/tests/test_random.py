"""Random variables on torch: generators, NumPy's sizes, and every distribution vs SciPy.

``torch.Generator`` draws reproduce with a seed and advance with the updates; sizes and
batch shapes follow NumPy (the VM's shapes and dtypes); each distribution of the shared
table (``packages/random/tests/test_distributions.py``, its cases reused) matches
SciPy's in mean, variance and a two-sample KS test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

import kiln_random as kr
from kiln_compile import Mode, function
from kiln_graph import KilnValueError
from kiln_graph import tensor as kt

TORCH = Mode(linker="torch")
VM = Mode(linker="vm")

_TABLE = Path(__file__).parents[2] / "random" / "tests" / "test_distributions.py"
_spec = importlib.util.spec_from_file_location("kiln_distribution_table", _TABLE)
assert _spec is not None and _spec.loader is not None
table: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = table  # its dataclasses look their module up
_spec.loader.exec_module(table)


@pytest.fixture(scope="module")
def draws() -> dict[str, np.ndarray]:
    return table._draw_all("torch")


@pytest.mark.parametrize("case", table.CASES, ids=lambda c: c.id)
def test_moments_match_scipy(draws: dict[str, np.ndarray], case: Any) -> None:
    table.test_moments_match_scipy(("torch", draws), case)


@pytest.mark.parametrize("case", table.CASES, ids=lambda c: c.id)
def test_two_sample_ks_against_scipy(draws: dict[str, np.ndarray], case: Any) -> None:
    table.test_two_sample_ks_against_scipy(("torch", draws), case)


def test_covariance_support_and_tiny_dirichlet(draws: dict[str, np.ndarray]) -> None:
    table.test_multivariate_normal_covariance(("torch", draws))
    table.test_draws_are_on_the_support(("torch", draws))
    x = function([], kr.dirichlet([0.01, 0.01, 0.01], size=2000, rng=kr.rng(3)), TORCH)()
    assert np.all(np.isfinite(x)) and np.all(x >= 0)
    np.testing.assert_allclose(x.sum(axis=1), 1.0)
    assert np.mean(x.max(axis=1) > 0.99) > 0.8


def _normals(seed: int) -> Any:
    r = kr.rng(seed)
    return r, function([], [kr.normal(0.0, 1.0, size=4, rng=r), kr.uniform(size=3, rng=r)], TORCH)


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


def test_chained_draws_of_one_function_are_independent():
    r = kr.rng(4)
    n = 20_000
    x, y = kr.normal(0.0, 1.0, size=n, rng=r), kr.normal(0.0, 2.0, size=n, rng=r)
    a, b = function([], [x, y], TORCH)()
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(n)
    assert stats.kstest(b / 2.0, "norm").pvalue > 1e-4


def test_sizes_and_batch_shapes_follow_numpy_as_on_the_vm():
    def cases(r: Any) -> list[Any]:
        mu3 = kt.constant(np.array([0.0, 10.0, 100.0]))
        mvn_mu = kt.constant(np.array([[0.0, 1.0], [5.0, -5.0], [2.0, 2.0], [0.0, 0.0]]))
        cov = kt.constant(np.array([[1.0, 0.5], [0.5, 2.0]]))
        p = kt.constant(np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]))
        return [
            kr.normal(mu3, 1.0, rng=r),
            kr.normal(mu3, 1.0, size=(2, 3), rng=r),
            kr.normal(kt.constant(np.array([[1.0], [2.0]])), mu3 * 0 + 1, rng=r),
            kr.multivariate_normal(mvn_mu, cov, size=(5, 4), rng=r),
            kr.dirichlet(kt.constant(np.ones((3, 4))), rng=r),
            kr.multinomial(kt.constant(np.array([5, 10, 20])), [0.2, 0.3, 0.5], rng=r),
            kr.categorical(p, size=(6, 2), rng=r),
        ]

    on_torch = function([], cases(kr.rng(1)), TORCH)()
    on_vm = function([], cases(kr.rng(1)), VM)()
    for i, (a, b) in enumerate(zip(on_torch, on_vm, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape, a.dtype)
    np.testing.assert_array_equal(on_torch[5].sum(-1), [5, 10, 20])


def test_invalid_parameters_raise_as_on_the_vm():
    sigma = kt.vector("sigma")
    f = function([sigma], kr.normal(0.0, sigma, rng=kr.rng(5)), TORCH)
    with pytest.raises(KilnValueError, match="sigma must be > 0") as info:
        f(np.array([1.0, -1.0, 2.0]))
    assert any("backend 'torch'" in n for n in info.value.__notes__)
