"""Graph serialization for the Stage-1 cache: round trips over every op family."""

import copy
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

import kiln_graph.tensor as kt
from kiln_compile import (
    FAST_RUN,
    CorruptGraphError,
    GraphNotSerializableError,
    Mode,
    dumps_graph,
    function,
    loads_graph,
    prepare,
)
from kiln_compile._serialize import dumps_graph_parts
from kiln_graph import KilnTypeError, OpFromGraph, TensorType, Variable, graph_replace
from kiln_graph.testing import evaluate

RNG = np.random.default_rng(0)


def _fresh_inputs(inputs):
    """Return new root variables of the same types (names kept)."""
    return [kt.tensor(v.name, dtype=v.type.dtype, shape=v.type.shape) for v in inputs]


def _roundtrip(inputs, outputs, values):
    """Serialize, then rebuild on the same and on new inputs; check structure and values."""
    blob = dumps_graph(inputs, outputs)
    # On the same inputs, rebuilding gives the very same interned nodes.
    again = loads_graph(blob, inputs)
    assert all(a is b for a, b in zip(again, outputs, strict=True))
    # On new inputs, the same structure (digest) and the same values.
    new_inputs = _fresh_inputs(inputs)
    rebuilt = loads_graph(blob, new_inputs)
    expected = graph_replace(list(outputs), dict(zip(inputs, new_inputs, strict=True)))
    assert all(a is b for a, b in zip(rebuilt, expected, strict=True))
    assert prepare(new_inputs, rebuilt).digest == prepare(inputs, list(outputs)).digest
    got = evaluate(rebuilt, dict(zip(new_inputs, values, strict=True)))
    want = evaluate(list(outputs), dict(zip(inputs, values, strict=True)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    return blob


def test_elemwise_dimshuffle_and_constants():
    x = kt.matrix("x")
    y = kt.vector("y")
    c = kt.constant(np.arange(3.0))
    outs = [
        kt.exp(x) * y[None, :] + c,
        kt.switch(x > 0, kt.sigmoid(x), kt.log1p(kt.abs(x))),
        kt.cast(x, "float32") ** 2,
        x.T.dimshuffle(0, "x", 1),
    ]
    _roundtrip([x, y], outs, [RNG.normal(size=(2, 3)), RNG.normal(size=3)])


def test_reductions_and_shapes():
    x = kt.matrix("x")
    outs = [
        kt.sum(x, axis=0),
        kt.max(x, axis=1, keepdims=True),
        kt.argmax(x, axis=1),
        kt.cumsum(x, axis=0),
        kt.logsumexp(x),
        kt.mean(x) + kt.std(x),
        kt.reshape(x, (3, 2)),
        kt.flatten(x) * kt.cast(x.shape[0], "float64"),
        kt.alloc(kt.sum(x), 2, 4),
        kt.arange(5, dtype="int64"),
        kt.eye(3),
    ]
    _roundtrip([x], outs, [RNG.normal(size=(2, 3))])


def test_indexing_and_join():
    x = kt.matrix("x")
    i = kt.vector("i", dtype="int64")
    outs = [
        x[1:, ::-1],
        x[i],
        x[i, 0],
        kt.set_subtensor(x[0], 5.0),
        kt.inc_subtensor(x[i], 1.0),
        kt.concatenate([x, x * 2], axis=0),
        kt.stack([x[0], x[1]]),
    ]
    _roundtrip([x, i], outs, [RNG.normal(size=(2, 3)), np.array([1, 0, 1])])


def test_linalg_and_blockwise():
    a = kt.tensor("a", shape=(3, 3))
    b = kt.vector("b", shape=(3,))
    batch = kt.tensor("batch", shape=(4, 3, 3))
    spd = kt.dot(a, a.T) + 3 * kt.eye(3)
    sign, logdet = kt.slogdet(spd)
    outs = [
        kt.cholesky(spd),
        kt.solve(spd, b),
        kt.solve_triangular(kt.cholesky(spd), b, lower=True),
        kt.inv(spd),
        kt.det(spd),
        sign,
        logdet,
        kt.matmul(batch, batch),
        kt.cholesky(kt.matmul(batch, kt.transpose(batch, (0, 2, 1))) + 3 * kt.eye(3)),
        kt.outer(b, b),
        *kt.eigh(spd),
    ]
    values = [RNG.normal(size=(3, 3)), RNG.normal(size=3), RNG.normal(size=(4, 3, 3))]
    _roundtrip([a, b, batch], outs, values)


def test_opfromgraph_inner_graph_is_stored_and_rebuilt():
    u, v = kt.vector("u"), kt.vector("v")
    op = OpFromGraph([u, v], [kt.exp(u) * v, u - v])
    inner2 = OpFromGraph([u], [op(u, u)[0] + 1])  # nested
    x, y = kt.vector("x"), kt.vector("y")
    first, second = op(x, y)
    blob = _roundtrip([x, y], [first, second, inner2(x)], [np.ones(3), np.arange(3.0)])
    # The rebuilt Op is equal (same inner-graph digest) but carries its own inner graph.
    rebuilt = loads_graph(blob, _fresh_inputs([x, y]))
    assert rebuilt[0].owner.op == op


def test_shared_variables_updates_and_multiple_outputs():
    w = kt.shared(np.ones(3), name="w")
    count = kt.shared(np.array(0, dtype="int64"), name="count")
    x = kt.vector("x")
    fg = prepare([x], [kt.sum(w * x), w * 2], updates={w: w - 0.1 * x, count: count + 1})
    assert fg.inputs[1:] == (w, count)
    blob = dumps_graph(fg.inputs, fg.outputs)
    # Rebuilt on the same shared variables: the same graph.
    assert loads_graph(blob, fg.inputs) == list(fg.outputs)
    # A compiled function (cache hit) updates them as before.
    f = function([x], [kt.sum(w * x), w * 2], updates={w: w - 0.1 * x, count: count + 1})
    f(np.ones(3))
    np.testing.assert_allclose(w.get_value(), 0.9 * np.ones(3))
    assert count.get_value() == 1


def test_rewritten_fast_run_graph_roundtrips():
    # Fused (Composite) and in-place ops, as the Stage-1 cache stores them.
    x, y = kt.vector("x"), kt.vector("y")
    outs = [kt.exp(x) * y + kt.log1p(kt.exp(y)), kt.sum(kt.sigmoid(x) ** 2)]
    f = function([x, y], outs, mode=FAST_RUN.with_linker("vm"))
    values = [RNG.normal(size=4), RNG.normal(size=4)]
    _roundtrip(list(f.fgraph.inputs), list(f.fgraph.outputs), values)


def test_ops_pickle_across_processes():
    # Hashes of strings and classes differ between processes: an Op or a TensorType
    # unpickled elsewhere must hash like a freshly built one (so nodes intern).
    x = kt.matrix("x")
    a = kt.tensor("a", shape=(4, 3, 3))
    outs = [
        kt.logsumexp(kt.exp(x).T[0:2], axis=0),
        kt.cholesky(kt.matmul(a, kt.transpose(a, (0, 2, 1))) + kt.eye(3)),
        x[kt.constant(np.array([1, 0]))],
    ]
    f = function([x, a], outs, mode=Mode(linker="vm"))
    blob = dumps_graph(f.fgraph.inputs, f.fgraph.outputs)
    values = [RNG.normal(size=(2, 3)), RNG.normal(size=(4, 3, 3))]
    expected = [np.asarray(r).tolist() for r in f(*values)]
    script = (
        "import sys, json, pickle, numpy as np\n"
        "import kiln_graph.tensor as kt\n"
        "from kiln_compile import loads_graph, prepare\n"
        "from kiln_graph.testing import evaluate\n"
        "blob, values, digest = pickle.loads(sys.stdin.buffer.read())\n"
        "ins = [kt.matrix('x'), kt.tensor('a', shape=(4, 3, 3))]\n"
        "outs = loads_graph(blob, ins)\n"
        "assert prepare(ins, outs).digest == digest\n"
        "res = evaluate(outs, dict(zip(ins, values)))\n"
        "print(json.dumps([np.asarray(r).tolist() for r in res]))\n"
    )
    digest = prepare(list(f.fgraph.inputs), list(f.fgraph.outputs)).digest
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps((blob, values, digest)),
        capture_output=True,
        check=True,
    )
    got = json.loads(out.stdout)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_variables_and_nodes_refuse_plain_pickling():
    x = kt.vector("x")
    y = kt.exp(x)
    with pytest.raises(KilnTypeError, match="interned"):
        pickle.dumps(x)
    with pytest.raises(KilnTypeError, match="interned"):
        pickle.dumps(y.owner)
    with pytest.raises(KilnTypeError, match="interned"):
        copy.deepcopy(y)
    # Ops and types pickle, without their per-process cached hash.
    op = pickle.loads(pickle.dumps(y.owner.op))
    assert "_cached_hash" not in op.__dict__
    assert op == y.owner.op and hash(op) == hash(y.owner.op)
    t = pickle.loads(pickle.dumps(TensorType("float32", (None, 2))))
    assert t == TensorType("float32", (None, 2)) and hash(t) == hash(
        TensorType("float32", (None, 2))
    )


def test_root_that_is_not_an_input_is_not_serializable():
    x, z = kt.vector("x"), kt.vector("z")
    with pytest.raises(GraphNotSerializableError, match="neither an input nor a constant"):
        dumps_graph([x], [x + z])


def test_damaged_payloads_raise_corrupt_graph_error():
    x = kt.vector("x")
    blob = dumps_graph([x], [kt.exp(x)])
    for bad in (blob[: len(blob) // 2], b"garbage", blob[:-1] + b"\x00"):
        with pytest.raises(CorruptGraphError):
            loads_graph(bad, [x])
    with pytest.raises(CorruptGraphError, match="input 0"):
        loads_graph(blob, [kt.vector("x", dtype="float32")])
    with pytest.raises(CorruptGraphError, match="inputs stored"):
        loads_graph(blob, [x, kt.vector("y")])
    # A payload that unpickles to something else entirely.
    with pytest.raises(CorruptGraphError):
        loads_graph(pickle.dumps({"not": "a graph"}), [x])


def test_outputs_that_are_inputs_or_constants():
    x = kt.vector("x")
    c = kt.constant(np.array([1.0, 2.0]))
    _roundtrip([x], [x, c, x + c], [np.array([3.0, 4.0])])
    assert isinstance(loads_graph(dumps_graph([x], [c]), [x])[0], Variable)


def test_a_graph_read_back_copies_no_data_its_constants_already_hold() -> None:
    """A warm start reads a model's data from the Stage-1 entry: no transient copies.

    The read used to copy each array constant three times (the stored bytes, an owned
    array, the constant's own copy) before finding the equal constant the model's graph
    already holds; for M3 at 10^6 rows that was 300 MB of a 850 MB peak.
    """
    import tracemalloc

    data = np.random.default_rng(0).normal(size=(1000, 1000))  # 8 MB
    x = kt.vector("x")
    out = kt.sum(kt.dot(kt.as_tensor(data), x))
    payload = dumps_graph([x], [out])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        (back,) = loads_graph(payload, [x])
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert back is out  # the same interned nodes, constants included
    assert peak < data.nbytes / 4, peak


def test_large_constants_the_reader_holds_are_stored_by_digest() -> None:
    data = np.random.default_rng(1).normal(size=(200, 100))  # 160 kB
    small = np.array([1.0, 2.0])
    x = kt.vector("x")
    big_c, small_c = kt.as_tensor(data), kt.as_tensor(small)
    out = kt.sum(kt.dot(big_c, x)) + kt.sum(small_c)
    known = [big_c, small_c]
    stored = b"".join(dumps_graph_parts([x], [out], known))
    assert len(stored) < 4096 < data.nbytes  # the data is not in it
    assert len(dumps_graph([x], [out])) > data.nbytes  # without `known` it is
    (back,) = loads_graph(stored, [x], known)
    assert back is out
    y = kt.vector("y")
    (rebuilt,) = loads_graph(stored, [y], known)
    value = np.linspace(-1.0, 1.0, 100)
    np.testing.assert_allclose(
        evaluate([rebuilt], {y: value})[0], data.dot(value).sum() + 3.0, rtol=1e-12
    )
    with pytest.raises(CorruptGraphError, match="refers to a constant not given"):
        loads_graph(stored, [x])  # a reader without the constant cannot use the entry
    other = kt.as_tensor(data + 1.0)
    with pytest.raises(CorruptGraphError, match="refers to a constant not given"):
        loads_graph(stored, [x], [other])
