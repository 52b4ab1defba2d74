"""kiln_mlx's special functions against SciPy, over wider ranges than the table's.

The incomplete gamma/beta functions, their parameter derivatives (against kiln_graph's
NumPy ones) and the modified Bessel functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
import scipy.special as sp

from kiln_compile import Mode, function
from kiln_graph import _incomplete as reference  # noqa: PLC2701 - the VM's own implementation
from kiln_graph import tensor as kt
from kiln_mlx import EagerWarning
from kiln_mlx import _special as special

RNG = np.random.default_rng(20261204)
N = 3000


def _f64(x: np.ndarray) -> Any:
    return mx.array(x, dtype=mx.float64)


def _worst_relative(got: Any, want: np.ndarray, floor: float = 1e-300) -> float:
    got = np.asarray(got)
    assert np.isnan(got).sum() == np.isnan(want).sum()
    return float(np.nanmax(np.abs(got - want) / np.maximum(np.abs(want), floor)))


def _gamma_args(high: float) -> list[np.ndarray]:
    a = RNG.uniform(1e-2, high, N)
    return [a, a * RNG.uniform(0.0, 2.0, N)]


def _beta_args(high: float) -> list[np.ndarray]:
    return [RNG.uniform(1e-2, high, N), RNG.uniform(1e-2, high, N), RNG.uniform(0.0, 1.0, N)]


CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], Callable[[], list[Any]], float]] = [
    ("gammainc", special.gammainc, sp.gammainc, lambda: _gamma_args(400.0), 2e-11),
    ("gammaincc", special.gammaincc, sp.gammaincc, lambda: _gamma_args(400.0), 2e-11),
    ("gammainc_da", special.gammainc_da, reference.gammainc_da, lambda: _gamma_args(400.0), 2e-11),
    ("gammainc_small", special.gammainc, sp.gammainc, lambda: _gamma_args(20.0), 1e-13),
    ("betainc", special.betainc, sp.betainc, lambda: _beta_args(1000.0), 2e-11),
    ("betainc_da", special.betainc_da, reference.betainc_da, lambda: _beta_args(1000.0), 2e-11),
    ("betainc_db", special.betainc_db, reference.betainc_db, lambda: _beta_args(1000.0), 2e-11),
    ("betainc_small", special.betainc, sp.betainc, lambda: _beta_args(10.0), 3e-13),
    ("i0", special.i0, sp.i0, lambda: [RNG.uniform(-700.0, 700.0, N)], 1e-14),
    ("i1", special.i1, sp.i1, lambda: [RNG.uniform(-700.0, 700.0, N)], 1e-14),
    ("i0e", special.i0e, sp.i0e, lambda: [RNG.uniform(-40.0, 40.0, N)], 1e-14),
    ("i1e", special.i1e, sp.i1e, lambda: [RNG.uniform(-40.0, 40.0, N)], 1e-14),
]


@pytest.mark.parametrize(("name", "fn", "ref", "args", "rtol"), CASES, ids=[c[0] for c in CASES])
def test_against_scipy(
    name: str, fn: Callable[..., Any], ref: Callable[..., Any], args: Any, rtol: float
) -> None:
    xs = args()
    with np.errstate(all="ignore"):
        want = np.asarray(ref(*xs), dtype=np.float64)
    # Relative errors of values above 1e-250: below, SciPy's betainc loses its accuracy
    # (at a=330, b=36, x=0.104 it is 30% off mpmath, kiln_mlx 1e-13) and then underflows.
    assert _worst_relative(fn(*map(_f64, xs)), want, floor=1e-250) < rtol


def test_special_values_follow_scipy() -> None:
    a = np.array([0.0, -1.0, np.nan, 2.0, 2.0, 2.0, 2.0, 3.0])
    x = np.array([1.0, 1.0, 1.0, 0.0, np.inf, -1.0, np.nan, 1e-3])
    for fn, ref in ((special.gammainc, sp.gammainc), (special.gammaincc, sp.gammaincc)):
        np.testing.assert_allclose(np.asarray(fn(_f64(a), _f64(x))), ref(a, x), rtol=1e-13)
    b = np.array([2.0, 2.0, 0.0, -1.0, 2.0, 2.0, 0.0, 2.0])
    y = np.array([0.0, 1.0, 0.5, 0.5, 1.5, np.nan, 1.0, 0.5])
    a2 = np.array([3.0] * 7 + [0.0])
    np.testing.assert_allclose(
        np.asarray(special.betainc(_f64(a2), _f64(b), _f64(y))), sp.betainc(a2, b, y)
    )
    derivatives = (
        (special.betainc_da, reference.betainc_da),
        (special.betainc_db, reference.betainc_db),
    )
    for fn, ref in derivatives:
        np.testing.assert_allclose(np.asarray(fn(_f64(a2), _f64(b), _f64(y))), ref(a2, b, y))
    z = np.array([0.0, np.inf, -np.inf, np.nan, -3.0])
    bessel = (
        (special.i0, sp.i0),
        (special.i1, sp.i1),
        (special.i0e, sp.i0e),
        (special.i1e, sp.i1e),
    )
    for fn, ref in bessel:
        np.testing.assert_allclose(np.asarray(fn(_f64(z))), ref(z), rtol=1e-14)


def test_beyond_the_range_of_the_fixed_terms_is_nan_not_a_wrong_number() -> None:
    a = np.array([special.GAMMA_MAX_A * 2.0])
    assert np.isnan(np.asarray(special.gammainc(_f64(a), _f64(a))))
    assert np.isnan(np.asarray(special.gammainc_da(_f64(a), _f64(a))))
    big = np.array([special.BETA_MAX_AB * 2.0])
    assert np.isnan(np.asarray(special.betainc(_f64(big), _f64(big), _f64(np.array([0.5])))))


def test_gammainc_and_betainc_run_eagerly_with_a_warning_and_match_the_vm() -> None:
    """With their gradients; ``mx.compile`` would build hundreds of kernels for them."""
    a, b, x = kt.vector("a"), kt.vector("b"), kt.vector("x")
    cost = (kt.gammainc(a, x) + kt.betainc(a, b, x / (x + 1.0)) + kt.i1e(x)).sum()
    outs = [cost, *kt.grad(cost, [a, b, x])]
    values = [RNG.uniform(0.5, 5.0, 7), RNG.uniform(0.5, 5.0, 7), RNG.uniform(0.1, 5.0, 7)]
    with pytest.warns(EagerWarning, match="eagerly.*Betainc.*Gammainc.*I1e"):
        f = function([a, b, x], outs, mode=Mode(linker="mlx"))
    assert not f.thunk.compiled
    got = f(*values)
    want = function([a, b, x], outs, mode=Mode(linker="vm"))(*values)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10)
