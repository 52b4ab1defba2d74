"""The in-place phase: liveness with aliases, in-place variants, and their results."""

import numpy as np
import pytest

import kiln
import kiln_graph.tensor as kt
from kiln_compile import FAST_RUN
from kiln_graph import (
    AdvancedIncSubtensor1,
    Elemwise,
    IncSubtensor,
    KilnValueError,
    OpFromGraph,
    graph_inputs,
    schedule,
    toposort,
)
from kiln_graph._join import Split
from kiln_graph._math import Add, Exp, Mul
from kiln_graph.testing import evaluate
from kiln_rewrite.inplace import InplaceError, apply_inplace, check_inplace, plan_inplace

VM_RUN = FAST_RUN.with_linker("vm")
NO_FUSION = VM_RUN.excluding("fusion")
NO_INPLACE = VM_RUN.excluding("inplace")


def _inplace_nodes(f):
    return [n for n in toposort(f.fgraph.outputs, stop_at=f.fgraph.inputs) if n.op.destroy_map]


def _compile(inputs, outputs, mode, **kw):
    f = kiln.function(inputs, outputs, mode=mode, **kw)
    check_inplace(f.fgraph.inputs, f.fgraph.outputs)
    return f


# --- what is never overwritten -----------------------------------------------------------

x = kt.matrix("x", shape=(3, 3))
y = kt.matrix("y", shape=(3, 3))
v = kt.vector("v", shape=(3,))

PROTECTED = {
    "input": lambda: [kt.exp(x)],
    "transposed input": lambda: [x.T + 1],
    "sliced input": lambda: [x[0:2] * 2],
    "reshaped input": lambda: [kt.reshape(x, (9,)) + 1],
    "dimshuffled vector": lambda: [v[:, None] * x],
    "split piece of input": lambda: [Split(0, 2)(x, 1, 2)[1] + 1],
    "inc_subtensor of input": lambda: [kt.inc_subtensor(x[0:2], 1.0)],
    "set_subtensor of a view of input": lambda: [kt.set_subtensor(x.T[0], 0.0)],
    "advanced inc of input": lambda: [kt.inc_subtensor(x[[0, 2, 0]], 1.0)],
    "output read later": lambda: [kt.exp(x), kt.exp(x) + 1],
    "view of output read later": lambda: [kt.exp(x).T, kt.exp(x) * 2],
    "output that is a view": lambda: [kt.exp(x)[0], kt.exp(x) * 2],
    "two outputs of one chain": lambda: [kt.exp(x) * 2, kt.exp(x) * 2 + 1],
}


@pytest.mark.parametrize("mode", [VM_RUN, NO_FUSION], ids=["fast_run", "no_fusion"])
@pytest.mark.parametrize("case", sorted(PROTECTED))
def test_inputs_and_outputs_are_never_overwritten(case, mode):
    outs = PROTECTED[case]()
    ins = [w for w in (x, y, v) if w in graph_inputs(outs)]
    rng = np.random.default_rng(0)
    values = [rng.normal(size=w.type.shape) for w in ins]
    copies = [a.copy() for a in values]
    expected = kiln.function(ins, outs, mode=NO_INPLACE)(*copies)
    f = _compile(ins, outs, mode)
    for _ in range(2):
        got = f(*values)
        for a, b in zip(values, copies, strict=True):
            np.testing.assert_array_equal(a, b)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-13)


def test_shared_values_and_constants_are_never_overwritten():
    s = kt.shared(np.arange(9.0).reshape(3, 3), name="s")
    c_data = np.linspace(0.0, 1.0, 9).reshape(3, 3)
    c = kt.constant(c_data)
    outs = [s.T * 2, kt.exp(c) + x, kt.inc_subtensor(s[0], c[1])]
    f = _compile([x], outs, NO_FUSION)
    a = np.ones((3, 3))
    for _ in range(2):
        got = f(a)
        np.testing.assert_array_equal(s.get_value(), np.arange(9.0).reshape(3, 3))
        np.testing.assert_array_equal(c.data, c_data)
        np.testing.assert_allclose(got[0], np.arange(9.0).reshape(3, 3).T * 2)
        np.testing.assert_allclose(got[1], np.exp(c_data) + 1)
        want = np.arange(9.0).reshape(3, 3)
        want[0] += c_data[1]
        np.testing.assert_allclose(got[2], want)


def test_updates_of_shared_variables_stay_correct():
    s = kt.shared(np.ones(3), name="acc")
    f = _compile([v], kt.exp(v) * 2 + 1, NO_FUSION, updates={s: s * 2 + v})
    a = np.arange(3.0)
    f(a)
    f(a)
    np.testing.assert_allclose(s.get_value(), (np.ones(3) * 2 + a) * 2 + a)
    np.testing.assert_array_equal(a, np.arange(3.0))


# --- intermediate buffers are reused -----------------------------------------------------


def test_chain_reuses_the_intermediate_buffer():
    f = _compile([x], kt.exp(x) * 2 + 1, NO_FUSION)
    ops = [str(n.op) for n in toposort(f.fgraph.outputs)]
    assert ops == ["exp", "mul{inplace 0}", "add{inplace 0}"]
    a = np.random.default_rng(1).normal(size=(3, 3))
    np.testing.assert_allclose(f(a), np.exp(a) * 2 + 1)


def test_constant_first_operand_overwrites_the_second_input():
    f = _compile([x], 2.0 - kt.exp(x), NO_FUSION)
    (node,) = _inplace_nodes(f)
    assert node.op.destroy_map == {0: [1]}
    a = np.eye(3)
    np.testing.assert_allclose(f(a), 2.0 - np.exp(a))


def test_broadcast_or_other_dtype_inputs_are_not_overwritten():
    # exp(v) broadcasts against the matrix; the int intermediate has another dtype.
    row = kt.matrix("row", shape=(1, 3))
    n = kt.matrix("n", shape=(3, 3), dtype="int64")
    f = _compile([row, x], kt.exp(row) + x, NO_FUSION)
    assert not _inplace_nodes(f)
    g = _compile([n, x], (n * 2) + x, NO_FUSION)
    assert not _inplace_nodes(g)
    a, b = np.ones((1, 3)), np.arange(9).reshape(3, 3)
    np.testing.assert_allclose(g(b, np.ones((3, 3))), b * 2 + 1)
    np.testing.assert_allclose(f(a, np.ones((3, 3))), np.exp(a) + np.ones((3, 3)))


def test_a_value_with_two_readers_is_overwritten_only_by_the_last():
    t = kt.exp(x)
    out = (t * 2) * (t + 1)
    f = _compile([x], out, NO_FUSION)
    order = schedule(f.fgraph.outputs, stop_at=f.fgraph.inputs)
    t_new = order[0].outputs[0]
    readers = [i for i, n in enumerate(order) if t_new in n.inputs]
    assert len(readers) == 2
    assert not order[readers[0]].op.destroy_map
    assert order[readers[1]].op.destroy_map
    a = np.random.default_rng(2).normal(size=(3, 3))
    np.testing.assert_allclose(f(a), (np.exp(a) * 2) * (np.exp(a) + 1))


def test_a_view_keeps_its_base_alive():
    t = kt.exp(x)
    out = (t.T + 1) * t  # t is read after its view's reader
    f = _compile([x], out, NO_FUSION)
    order = schedule(f.fgraph.outputs, stop_at=f.fgraph.inputs)
    add = next(n for n in order if isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, Add))
    assert not add.op.destroy_map
    a = np.random.default_rng(3).normal(size=(3, 3))
    np.testing.assert_allclose(f(a), (np.exp(a).T + 1) * np.exp(a))


def test_inc_subtensor_on_an_intermediate_runs_in_place():
    t = kt.exp(x)
    out = kt.inc_subtensor(t[0:2], y[0:2]) * 3
    f = _compile([x, y], out, NO_FUSION)
    inc = [n for n in _inplace_nodes(f) if isinstance(n.op, IncSubtensor)]
    assert inc and inc[0].op.inplace and str(inc[0].op).endswith("[inplace]")
    a, b = np.eye(3), np.arange(9.0).reshape(3, 3)
    want = np.exp(a)
    want[0:2] += b[0:2]
    np.testing.assert_allclose(f(a, b), want * 3)
    np.testing.assert_array_equal(b, np.arange(9.0).reshape(3, 3))


def test_advanced_inc_subtensor1_on_an_intermediate_runs_in_place():
    idx = kt.vector("idx", dtype="int64")
    t = kt.exp(v)
    out = kt.inc_subtensor(t[idx], 1.0) + v
    f = _compile([v, idx], out, NO_FUSION)
    assert any(isinstance(n.op, AdvancedIncSubtensor1) for n in _inplace_nodes(f))
    a = np.array([0.0, 1.0, 2.0])
    want = np.exp(a)
    np.add.at(want, [0, 2, 0], 1.0)
    np.testing.assert_allclose(f(a, np.array([0, 2, 0])), want + a)


def test_inc_subtensor_does_not_overwrite_a_buffer_its_update_reads():
    t = kt.exp(x)
    out = kt.inc_subtensor(t[0:1], t[1:2])
    f = _compile([x], out, NO_FUSION)
    assert not any(isinstance(n.op, IncSubtensor) for n in _inplace_nodes(f))
    a = np.random.default_rng(4).normal(size=(3, 3))
    want = np.exp(a)
    want[0:1] += np.exp(a)[1:2]
    np.testing.assert_allclose(f(a), want)


# --- the order: each in-place op runs after every other reader -----------------------------


def test_check_inplace_rejects_an_op_that_overwrites_a_live_value():
    t = kt.exp(x)
    bad = Elemwise(Mul(), ((0, 0),))(t, 2.0)  # overwrites t, which is read afterwards
    with pytest.raises(InplaceError, match="read at step"):
        check_inplace([x], [bad + t])
    with pytest.raises(InplaceError, match="root"):
        check_inplace([x], [Elemwise(Exp(), ((0, 0),))(x)])
    with pytest.raises(InplaceError, match="graph output"):
        check_inplace([x], [t, Elemwise(Mul(), ((0, 0),))(t, 2.0)])


def test_rewritten_graph_runs_in_the_order_the_plan_assumed():
    t = kt.exp(x)
    u = kt.log1p(kt.abs(t))
    outs = [(t * u) + (u - t) * kt.sin(t), kt.sum(u * 2)]
    old_order = schedule(outs, stop_at=[x])
    chosen = plan_inplace([x], outs)
    assert chosen
    new_outs = apply_inplace([x], outs)
    new_order = schedule(new_outs, stop_at=[x])
    assert len(new_order) == len(old_order)
    for old, new in zip(old_order, new_order, strict=True):
        assert new.op == chosen.get(old, old.op)
    check_inplace([x], new_outs)


def test_the_plan_follows_the_schedule_where_it_is_not_a_plain_walk():
    """A log density written as a loop and its gradient: schedule reorders the walk."""
    mu, sigma = kt.vector("mu"), kt.vector("sigma")
    terms = [kt.sum(((np.arange(3.0) + k) - mu[k]) ** 2 / sigma[k]) for k in range(6)]
    value = terms[0]
    for t in terms[1:]:
        value = value + t
    outs = [value, *kt.grad(value, [mu, sigma])]
    order = schedule(outs, stop_at=[mu, sigma])
    assert order != toposort(outs, stop_at=[mu, sigma])
    chosen = plan_inplace([mu, sigma], outs)
    assert chosen
    new_outs = apply_inplace([mu, sigma], outs)
    new_order = schedule(new_outs, stop_at=[mu, sigma])
    assert len(new_order) == len(order)
    for old, new in zip(order, new_order, strict=True):
        assert new.op == chosen.get(old, old.op)
    check_inplace([mu, sigma], new_outs)
    givens = {mu: np.linspace(-1.0, 1.0, 6), sigma: np.linspace(0.5, 2.0, 6)}
    for got, want in zip(evaluate(new_outs, givens), evaluate(outs, givens), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_vm_runs_the_nodes_in_the_order_the_analysis_used():
    t = kt.exp(x)
    f = _compile([x, y], [(t * 2) * (t + y), kt.inc_subtensor(t[0], y[1]) - 1], NO_FUSION)
    assert _inplace_nodes(f)
    assert f.thunk.nodes == schedule(f.fgraph.outputs, stop_at=f.fgraph.inputs)


def test_a_graph_that_already_has_inplace_nodes_is_left_valid():
    outs = apply_inplace([x], [kt.exp(x) * 2 + 1])
    again = apply_inplace([x], outs)
    assert again == outs
    check_inplace([x], again)


# --- the in-place implementations -----------------------------------------------------


def test_inplace_elemwise_prints_and_checks_its_pattern():
    assert str(Elemwise(Add(), ((0, 1),))) == "add{inplace 1}"
    assert Elemwise(Add(), ((0, 1),)).destroy_map == {0: [1]}
    assert Elemwise(Add()).destroy_map == {}
    with pytest.raises(KilnValueError, match="in place"):
        Elemwise(Add(), ((0, 0),))(v, x)  # v is broadcast to the matrix


def test_inplace_elemwise_writes_into_its_input_and_copies_a_read_only_one():
    a, b, c = (np.arange(3.0) + k for k in range(3))
    node = Elemwise(Add(), ((0, 2),)).make_node(v, v * 1, v * 2)
    out = [None]
    node.op.perform(node, [a, b, c], out)
    assert out[0] is c
    np.testing.assert_array_equal(c, np.arange(3.0) * 3 + 3)  # a + b + old c, in order
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    node = Elemwise(Exp(), ((0, 0),)).make_node(v)
    node.op.perform(node, [frozen], out)
    assert out[0] is not frozen
    np.testing.assert_allclose(out[0], np.exp(np.arange(3.0)))


def test_sum_and_product_folds_are_bitwise_identical_in_place():
    rng = np.random.default_rng(5)
    for k in range(4):
        arrays = [rng.normal(size=7) for _ in range(4)]
        want = ((arrays[0] + arrays[1]) + arrays[2]) + arrays[3]
        got = Add().impl(*arrays, out=arrays[k])
        assert got is arrays[k]
        np.testing.assert_array_equal(got, want)
    single = np.arange(3.0)
    assert Add().impl(single) is not single


# --- views are declared -----------------------------------------------------------------


def _audit_views(outputs, inputs, values):
    """Run each node's perform; an output sharing memory with an undeclared input fails."""
    env = dict(zip(inputs, values, strict=True))
    for node in toposort(outputs, stop_at=inputs):
        args = [env[i] if i in env else i.data for i in node.inputs]
        results = [None] * len(node.outputs)
        node.op.perform(node, args, results)
        for k, r in enumerate(results):
            allowed = set(node.op.view_map.get(k, ())) | set(node.op.destroy_map.get(k, ()))
            for j, a in enumerate(args):
                if j not in allowed and isinstance(a, np.ndarray) and isinstance(r, np.ndarray):
                    assert not np.may_share_memory(r, a), f"{node.op} output {k} views input {j}"
            env[node.outputs[k]] = r


def test_every_op_output_that_shares_memory_declares_it():
    m = kt.matrix("m", shape=(4, 4))
    idx = kt.vector("idx", dtype="int64")
    inner = OpFromGraph([m], [m.T, m[0]])
    exprs = [
        m.T,
        m[1:3],
        m[0],
        kt.reshape(m, (2, 8)),
        kt.flatten(m),
        m[None],
        kt.squeeze(m[0:1]),
        kt.expand_dims(m, 0),
        *Split(1, 2)(m, 1, 3),
        kt.concatenate([m, m]),
        kt.broadcast_to(m[0], (4, 4)),
        kt.sum(m, axis=0),
        kt.max(m, axis=1),
        kt.cumsum(m, axis=0),
        m[idx],
        m[idx, 1:3],
        kt.inc_subtensor(m[0], 1.0),
        kt.inc_subtensor(m[idx], 1.0),
        kt.add(m),
        kt.mul(m),
        kt.cast(m, "float32"),
        kt.matmul(m, m),
        kt.switch(m > 0, m, 0.0),
        kt.clip(m, -1.0, 1.0),
        *inner(m),
        kt.softmax(m, axis=-1),
    ]
    values = [np.random.default_rng(6).normal(size=(4, 4)), np.array([0, 3, 0])]
    _audit_views(exprs, [m, idx], values)


# --- random expressions against the graph without in-place ----------------------------------


def _random_graph(rng, leaves):
    """Build a random expression DAG over square matrices; intermediates are reused."""
    pool = list(leaves)
    unary = [
        kt.exp,
        lambda a: kt.log1p(kt.abs(a)),
        kt.sin,
        lambda a: a.T,
        lambda a: -a,
        lambda a: kt.reshape(kt.reshape(a, (9,)), (3, 3)),
        lambda a: kt.set_subtensor(a[1], a[0]),
        lambda a: kt.inc_subtensor(a[0:2], 1.5),
        lambda a: kt.inc_subtensor(a[[0, 2, 0]], a[1]),
        lambda a: kt.concatenate([a[0:1], a[1:]]),
        lambda a: a * 0.5,
        lambda a: 1.0 - a,
    ]
    binary = [kt.add, kt.mul, kt.sub, lambda a, b: a * b + a, lambda a, b: kt.maximum(a, b.T)]
    for _ in range(rng.integers(3, 9)):
        if rng.random() < 0.5:
            f = unary[rng.integers(len(unary))]
            new = f(pool[rng.integers(len(pool))])
        else:
            f = binary[rng.integers(len(binary))]
            new = f(pool[rng.integers(len(pool))], pool[rng.integers(len(pool))])
        pool.append(new)
    k = int(rng.integers(1, 3))
    picks = rng.choice(np.arange(len(leaves), len(pool)), size=k, replace=False)
    return [pool[i] for i in picks]


@pytest.mark.parametrize("seed", range(40))
def test_random_expressions_match_the_graph_without_inplace(seed):
    rng = np.random.default_rng(seed)
    s = kt.shared(rng.normal(size=(3, 3)), name="s")
    s0 = s.get_value()
    outs = _random_graph(rng, [x, y, s, kt.constant(np.full((3, 3), 0.25))])
    ins = [w for w in (x, y) if w in graph_inputs(outs)]
    values = [rng.normal(size=(3, 3)) for _ in ins]
    copies = [a.copy() for a in values]
    expected = kiln.function(ins, outs, mode=NO_INPLACE)(*copies)
    for mode in (NO_FUSION, VM_RUN):
        f = _compile(ins, outs, mode)
        for _ in range(2):
            got = f(*values)
            for g, e in zip(got, expected, strict=True):
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
            for a, b in zip(values, copies, strict=True):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(s.get_value(), s0)


def test_random_expressions_use_inplace_nodes():
    found = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        outs = _random_graph(rng, [x, y])
        ins = [w for w in (x, y) if w in graph_inputs(outs)]
        found += len(_inplace_nodes(kiln.function(ins, outs, mode=NO_FUSION)))
    assert found >= 40
