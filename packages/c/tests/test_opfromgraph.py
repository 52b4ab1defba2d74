"""OpFromGraph in C: the inner graph inlined (constants, nested graphs, gradients)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kiln_compile as kc
from kiln_c import FallbackWarning
from kiln_graph import OpFromGraph
from kiln_graph import tensor as kt

C = kc.Mode(linker="c")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_inner_graphs_match_the_vm(dtype: str) -> None:
    """Values and gradients of an inner graph with a constant, nested in another one."""
    p, q = kt.vector("p", dtype=dtype), kt.vector("q", dtype=dtype)
    offset = np.array([1.0, 2.0, 3.0], dtype=dtype)
    inner = OpFromGraph([p, q], [kt.exp(p) * q + offset, kt.sum(p - q), p])
    r, s = kt.vector("r", dtype=dtype), kt.vector("s", dtype=dtype)
    first, total, _ = inner(r, s)
    outer = OpFromGraph([r, s], [first * total, r])
    x, y = kt.vector("x", dtype=dtype), kt.vector("y", dtype=dtype)
    a, b, c = inner(x, y)
    d, e = outer(x, y)
    outs = [a, b, c, d, e, kt.grad(kt.sum(a) + b + kt.sum(d), x)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every op in C
        f = kc.function([x, y], outs, mode=C)
    xv = np.array([0.1, 0.2, 0.3], dtype=dtype)
    yv = np.array([1.0, -1.0, 2.0], dtype=dtype)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    got = f(xv, yv)
    for g, want in zip(got, kc.function([x, y], outs)(xv, yv), strict=True):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=rtol)
    np.testing.assert_allclose(got[0], np.exp(xv) * yv + offset, rtol=rtol)
    assert not np.shares_memory(got[2], xv) and not np.shares_memory(got[4], xv)
