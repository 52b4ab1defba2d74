"""The in-process memo: an identical function is rewritten and linked once per process."""

from __future__ import annotations

import numpy as np

import kiln_graph.tensor as kt
from kiln_compile import config, function, function_memo_stats


def _graph():
    x = kt.vector("x")
    return x, kt.exp(x).sum() * 2.0


def test_an_identical_function_reuses_the_compiled_one():
    x1, y1 = _graph()
    x2, y2 = _graph()
    assert x1 is not x2
    f1 = function([x1], y1)
    hits = function_memo_stats.hits
    f2 = function([x2], y2, profile=True)
    assert function_memo_stats.hits == hits + 1
    assert f2.thunk is f1.thunk
    assert f2.profile.cache == "memo"
    assert f2.inputs == (x2,)  # rebound to the new inputs
    np.testing.assert_allclose(f2([0.0, 1.0]), 2 * (1 + np.e))


def test_shared_variables_of_another_graph_are_read_through_the_reused_callable():
    a, b = kt.shared(np.ones(3)), kt.shared(np.arange(3.0))
    fa = function([], (a * 3.0).sum())
    fb = function([], (b * 3.0).sum())
    assert fb.thunk is fa.thunk
    assert fa() == 9.0 and fb() == 9.0
    b.set_value(np.full(4, 2.0))
    assert fb() == 24.0 and fa() == 9.0


def test_other_constants_or_modes_compile_anew():
    x = kt.vector("x")
    f = function([x], x * 2.0)
    assert function([x], x * 3.0).thunk is not f.thunk
    assert function([x], x * 2.0, mode="FAST_COMPILE").thunk is not f.thunk


def test_the_memo_can_be_turned_off():
    x1, y1 = _graph()
    f = function([x1], y1)
    with config.change(memo=False):
        g = function([x1], y1)
    assert g.thunk is not f.thunk
