"""Special functions in C (``kiln_special.h``) against SciPy and the VM, with edge values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special as sp

import kiln_compile as kc
from kiln_c import FallbackWarning
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")
EDGES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -2.5, 1e-300, 0.5, 1.0, 7.3, 1e3])


def _c_function(inputs: list, outputs: list) -> kc.Function:
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every op in C
        return kc.function(inputs, outputs, mode=C)


@pytest.mark.parametrize(
    ("build", "reference"),
    [
        (kt.erfcx, sp.erfcx),
        (kt.erfinv, sp.erfinv),
        (kt.i0, sp.i0),
        (kt.i0e, sp.i0e),
        (kt.i1, sp.i1),
        (kt.i1e, sp.i1e),
    ],
    ids=["erfcx", "erfinv", "i0", "i0e", "i1", "i1e"],
)
def test_unary_functions_match_scipy(build, reference) -> None:
    """Edge values (NaN, infinities, zeros, negatives) and a range of ordinary ones."""
    x = kt.vector("x")
    values = np.concatenate([EDGES, np.linspace(-0.999, 0.999, 41), np.linspace(-30, 30, 41)])
    with np.errstate(all="ignore"):
        expected = reference(values)
    np.testing.assert_allclose(
        _c_function([x], [build(x)])(values)[0], expected, rtol=1e-13, atol=1e-300
    )


@pytest.mark.parametrize(
    ("build", "reference"),
    [
        (kt.betaln, sp.betaln),
        (kt.gammainc, sp.gammainc),
        (kt.gammaincc, sp.gammaincc),
        (lambda a, b: kt.polygamma(2, b), lambda a, b: sp.polygamma(2, b)),
    ],
    ids=["betaln", "gammainc", "gammaincc", "polygamma"],
)
def test_binary_functions_match_scipy(build, reference) -> None:
    """All pairs of edge and ordinary values (absolute accuracy 1e-15 near 0: Q = 1 - P)."""
    a, b = kt.vector("a"), kt.vector("b")
    grid = np.concatenate([EDGES, [0.1, 2.0, 15.0, 150.0]])
    av, bv = (g.ravel() for g in np.meshgrid(grid, grid))
    with np.errstate(all="ignore"):
        expected = reference(av, bv)
    got = _c_function([a, b], [build(a, b)])(av, bv)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-15)


def test_betainc_and_its_gradients_match_scipy_and_the_vm() -> None:
    """I_x(a, b) against SciPy; d/da, d/db and d/dx against the VM's graph (float32 too)."""
    rng = np.random.default_rng(3)
    for dtype, rtol in (("float64", 1e-10), ("float32", 1e-4)):
        a, b, x = (kt.vector(n, dtype=dtype) for n in "abx")
        av, bv = (rng.uniform(0.2, 30.0, 40).astype(dtype) for _ in "ab")
        xv = rng.uniform(0.0, 1.0, 40).astype(dtype)
        value = kt.betainc(a, b, x) + kt.gammainc(a, b) + kt.gammaincc(b, a)
        grads = kt.grad(kt.sum(value), [a, b, x])
        got = _c_function([a, b, x], [value, *grads])(av, bv, xv)
        vm = kc.function([a, b, x], [value, *grads])(av, bv, xv)
        for g, v in zip(got, vm, strict=True):
            assert g.dtype == v.dtype == dtype
            np.testing.assert_allclose(g, v, rtol=rtol, atol=rtol * 1e-2)
        ref = sp.betainc(av, bv, xv) + sp.gammainc(av, bv) + sp.gammaincc(bv, av)
        np.testing.assert_allclose(got[0], ref, rtol=rtol)


def test_the_special_header_is_pasted_only_when_called() -> None:
    """A graph without special functions compiles without kiln_special.h."""
    x = kt.vector("x")
    plain = _c_function([x], [kt.exp(x)]).thunk.generated.source
    special = _c_function([x], [kt.erfcx(x)]).thunk.generated.source
    assert "kiln_erfcx_nonneg" not in plain and "kiln_erfcx_nonneg" in special
