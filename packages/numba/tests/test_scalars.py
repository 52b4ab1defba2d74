"""Passes over generated bodies (``kiln_numba._scalars``): 0-d arrays to scalars, copies."""

from __future__ import annotations

import numpy as np

import kiln
import kiln.tensor as kt
from kiln_numba._scalars import promote_scalars, propagate_copies


def test_a_local_zero_d_array_becomes_a_scalar():
    lines = [
        "v_1 = empty((), np.float64)",
        "a_2 = i0[()]",
        "v_1[()] = (a_2 / 10.0)",
        "v_3 = v_1",  # an in-place alias of it
        "v_3[()] = v_1[()] + 1.0",
        "r = empty((1,), np.float64)",
        "r[0] = v_3[()]",
        "return (r, )",
    ]
    assert promote_scalars(lines) == [
        "a_2 = i0[()]",
        "v_1 = np.float64((a_2 / 10.0))",
        "v_1 = np.float64(v_1 + 1.0)",
        "r = empty((1,), np.float64)",
        "r[0] = v_1",
        "return (r, )",
    ]


def test_arrays_that_leave_the_body_keep_their_storage():
    decl = "v_1 = empty((), np.float64)"
    store = "v_1[()] = 2.0"
    kept = [
        [decl, store, "return (v_1, )"],  # returned
        [decl, store, "(t, ) = helper_3(v_1)"],  # passed to a function
        [decl, "x = v_1[()]", store],  # read before its first store
        [decl, "if c:", "    v_1[()] = 2.0", "y = v_1[()]"],  # first stored in a branch
        [decl, store, "v_2 = v_1", "return (v_2, )"],  # returned through an alias
        [decl, store, "n = v_1.shape"],  # an attribute
    ]
    for lines in kept:
        assert promote_scalars(lines) == lines


def test_scalar_graphs_keep_their_values_and_dtypes():
    x = kt.scalar("x", dtype="float64")
    n = kt.scalar("n", dtype="int64")
    y = kt.exp(x) / 5.0 + kt.cast(n, "float64")
    z = kt.switch(x > 0, y, -y) * 2
    f = kiln.function([x, n], [y, z, kt.cast(z, "float32")], mode=kiln.Mode(linker="numba"))
    out = f(0.5, 3)
    y_ref = np.exp(0.5) / 5.0 + 3.0
    np.testing.assert_allclose(out[0], y_ref, rtol=1e-15)
    np.testing.assert_allclose(out[1], 2 * y_ref, rtol=1e-15)
    assert out[2].dtype == np.float32 and out[0].shape == ()


def _loops_function(n_loops: int) -> kiln.Function:
    x = kt.vector("x", dtype="float64")
    outs = [kt.sum(kt.exp(x * float(k + 1))) for k in range(n_loops)]
    return kiln.function([x], outs, mode=kiln.Mode(linker="numba"))


def test_a_small_graph_has_its_loops_inlined_and_a_large_one_does_not():
    from kiln_numba._outline import MAX_INLINED_LOOPS

    small = _loops_function(2)
    assert small.thunk.source.count("inline='always'") >= 1
    large = _loops_function(MAX_INLINED_LOOPS + 1)
    assert "inline='always'" not in large.thunk.source
    x = np.array([0.1, -0.2, 0.3])
    for f, n in ((small, 2), (large, MAX_INLINED_LOOPS + 1)):
        out = f(x)
        np.testing.assert_allclose(out, [np.exp(x * (k + 1)).sum() for k in range(n)], rtol=1e-14)


def test_loops_read_broadcast_scalars_without_one_element_arrays():
    x = kt.vector("x")
    s = kt.scalar("s")
    out = [kt.exp(x) * s + kt.square(s), kt.sum(x / (s + 1.0))]
    f = kiln.function([x, s], out, mode=kiln.Mode(linker="numba"))
    assert "empty((1, )" not in f.thunk.source
    xv = np.array([0.1, -0.2, 0.3])
    got = f(xv, 1.5)
    np.testing.assert_allclose(got[0], np.exp(xv) * 1.5 + 2.25, rtol=1e-15)
    np.testing.assert_allclose(got[1], np.sum(xv / 2.5), rtol=1e-15)


def test_copies_are_replaced_by_what_they_copy():
    lines = [
        "a_1 = i0[()]",
        "s_2 = -0.5",
        "a_3 = a_1",
        "a_4 = a_3",  # a copy of a copy
        "s_5 = (s_2 * a_4 ** s_2)",
        "g = -np.inf",
        "kiln_raise('a_3 is not replaced in a string')",
        "return (s_5, g, a_3, )",
    ]
    assert propagate_copies(lines) == [
        "a_1 = i0[()]",
        "s_5 = ((-0.5) * a_1 ** (-0.5))",
        "kiln_raise('a_3 is not replaced in a string')",
        "return (s_5, (-np.inf), a_1, )",
    ]


def test_copies_whose_value_could_change_are_kept():
    kept = [
        ["acc = 0.0", "for j in range(3):", "    acc += x[j]", "return (acc, )"],  # rebound
        ["a = b", "b = 2.0", "b = 3.0", "return (a, )"],  # the source is bound twice
        ["if c:", "    a = b", "return (a, )"],  # not at the top level
        ["(t, ) = helper_3(x)", "t = t + 1.0", "u = t", "return (u, )"],  # bound twice
    ]
    for lines in kept:
        out = propagate_copies(lines)
        assert out[: len(lines) - 1] == lines[:-1], lines
    # A parameter rebound by a copy: what read it before (a copy of it, an expression)
    # still reads the parameter; what reads it after reads the new value.
    assert propagate_copies(["c = i1", "y = i1 + 1.0", "i1 = v", "return (c, y, i1, )"]) == [
        "c = i1",
        "y = i1 + 1.0",
        "return (c, y, v, )",
    ]
