"""kiln.function threads shared random generators; linkers add their rewrite tags."""

from __future__ import annotations

import numpy as np

import kiln_random as kr
from kiln_compile import function, prepare, thread_generators
from kiln_compile._linkers import backend_query
from kiln_graph import tensor as kt
from kiln_rewrite import FAST_RUN_QUERY


def _rng_input(v):
    return v.owner.inputs[0]


def test_draws_from_one_generator_are_chained_in_program_order():
    r = kr.rng(0)
    x = kr.normal(size=2, rng=r)
    y = kr.gamma(2.0, size=2, rng=r)
    outs, updates = thread_generators([x, y])
    new_x, new_y = outs
    assert new_x is x  # the first draw reads the generator itself
    assert _rng_input(new_y) is new_x.owner.outputs[0]
    assert list(updates) == [r] and updates[r] is new_y.owner.outputs[0]


def test_generators_named_in_updates_or_other_states_are_left_alone():
    r = kr.rng(0)
    x = kr.normal(size=2, rng=r)
    y = kr.gamma(2.0, size=2, rng=r)
    outs, updates = thread_generators([x, y], skip=[r])
    assert outs == [x, y] and updates == {}
    # A draw from another draw's state is a pure chain already: nothing to thread.
    z = kr.OPS["normal"].make_node(x.owner.outputs[0], None, 0.0, 1.0).outputs[1]
    outs, updates = thread_generators([z])
    assert outs == [z] and updates[r] is z.owner.outputs[0]


def test_prepare_adds_the_generator_update_and_function_applies_it():
    r = kr.rng(3)
    x = kr.normal(size=3, rng=r)
    fgraph = prepare([], [x])
    assert fgraph.update_targets == (r,)
    f = function([], x, mode="FAST_COMPILE")
    expected = np.random.default_rng(3)
    np.testing.assert_allclose(f(), expected.normal(size=3))
    np.testing.assert_allclose(f(), expected.normal(size=3))
    assert prepare([], [x], no_default_updates=True).update_targets == ()


def test_draws_in_a_function_need_only_that_functions_inputs():
    r = kr.rng(3)
    mu = kt.vector("mu")
    kr.normal(mu, 1.0, rng=r)  # a draw of another function
    y = kr.normal(size=2, rng=r)
    f = function([], y, mode="FAST_COMPILE")
    np.testing.assert_allclose(f(), np.random.default_rng(3).normal(size=2))


class _Linker:
    name = "fake"
    rewrite_tags = ("fake_tag",)


def test_backend_query_selects_the_linkers_tags_unless_excluded():
    q = backend_query(FAST_RUN_QUERY, _Linker())
    assert "fake_tag" in q.include and "fast_run" in q.include
    excluded = FAST_RUN_QUERY.excluding("fake_tag")
    assert backend_query(excluded, _Linker()) == excluded
