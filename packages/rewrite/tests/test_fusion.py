"""The fusion phase: which nodes fuse, and that fused graphs compute the unfused values.

Values are compared with the unrewritten graph on the reference interpreter, bit for
bit when only the fusion phase runs (each Composite step keeps its node's dtype).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import kiln
import kiln_graph.tensor as kt
from kiln_graph import (
    Composite,
    DimShuffle,
    Elemwise,
    FusedReduce,
    toposort,
)
from kiln_graph._math import Exp
from kiln_graph._reduce import CAReduce
from kiln_graph.testing import evaluate
from kiln_rewrite import Query, pipeline, rewrite
from kiln_rewrite.fusion import MAX_INPUTS, fuse_elemwise, fuse_reductions

FUSION_ONLY = Query(phases=("fusion",))


def fuse(inputs, outputs, **kwargs):
    """Run only the fusion rewrites (elementwise, then reductions)."""
    outs = fuse_elemwise(inputs, outputs, **kwargs)
    return fuse_reductions(inputs, outs)


def elemwise_nodes(outputs):
    return [n for n in toposort(outputs) if isinstance(n.op, Elemwise)]


def readers(outputs, v):
    return [n for n in toposort(outputs) if v in n.inputs]


def draw(rng, var):
    shape = tuple(3 if n is None else n for n in var.type.shape)
    dtype = var.dtype
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def assert_same_values(inputs, outputs, fused_outputs, seed=0):
    rng = np.random.default_rng(seed)
    givens = {v: draw(rng, v) for v in inputs}
    expected = evaluate(list(outputs), givens)
    got = evaluate(list(fused_outputs), givens)
    for e, g, o, f in zip(expected, got, outputs, fused_outputs, strict=True):
        assert f.type == o.type
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


# --- what fuses -------------------------------------------------------------------------------


def test_chain_becomes_one_elemwise_node():
    x, y, z = kt.vector("x"), kt.vector("y"), kt.vector("z")
    [out] = rewrite([x, y, z], [kt.exp(x) * y + z])
    (node,) = toposort(out)
    assert isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Composite)
    assert str(node.op) == "Composite{exp(i0) * i1 + i2}"
    assert node.inputs == (x, y, z)


def test_sum_of_elementwise_traverses_once():
    x = kt.matrix("x")
    [out] = rewrite([x], [kt.sum(kt.exp(x))])
    (node,) = toposort(out)
    assert isinstance(node.op, FusedReduce) and node.inputs == (x,)
    assert node.op.scalar_op == Exp()
    y = kt.matrix("y")
    outs = fuse([x, y], [kt.sum(kt.exp(x) * y + 1, axis=0)])
    (node,) = toposort(outs)
    assert str(node.op) == "Sum{axis=(0,), of=Composite{exp(i0) * i1 + 1.0}}"
    assert len(readers(outs, x)) == 1


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "all", "any"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "bool"])
def test_every_reduction_kind_fuses(kind, dtype):
    x, y = kt.matrix("x", dtype=dtype), kt.matrix("y", dtype=dtype)
    outs = [getattr(kt, kind)(x * y, axis=1), getattr(kt, kind)(kt.maximum(x, y))]
    fused = fuse([x, y], outs)
    assert all(isinstance(n.op, FusedReduce) for n in toposort(fused))
    assert_same_values([x, y], outs, fused)


def test_broadcast_producer_stays_outside_by_default():
    v, m = kt.vector("v"), kt.matrix("m")
    out = kt.exp(v)[None, :] * m + 1
    [fused] = rewrite([v, m], [out])
    nodes = elemwise_nodes(fused)
    assert [str(n.op) for n in nodes] == ["exp", "Composite{i0 * i1 + 1.0}"]
    # The consumer takes the DimShuffle's output (the broadcast exp(v)) as an input.
    ds = nodes[1].inputs[0]
    assert isinstance(ds.owner.op, DimShuffle) and ds.owner.inputs[0] is nodes[0].outputs[0]
    assert_same_values([v, m], [out], [fused])


def test_broadcast_producer_fuses_when_asked():
    v, m = kt.vector("v"), kt.matrix("m")
    out = kt.exp(v)[None, :] * m + 1
    [fused] = fuse_elemwise([v, m], [out], recompute_broadcast=True)
    (node,) = elemwise_nodes(fused)
    assert str(node.op) == "Composite{exp(i0) * i1 + 1.0}"
    assert node.inputs[0].owner.op == DimShuffle(1, ("x", 0))
    assert node.inputs[0].owner.inputs[0] is v
    assert_same_values([v, m], [out], [fused])


def test_fusion_through_dimshuffle_of_the_same_size():
    # exp(v)[None, :] has as many elements as the (1, n) result: it fuses, and the
    # Composite reads v[None, :].
    v, r = kt.vector("v"), kt.tensor("r", shape=(1, None))
    out = kt.exp(v)[None, :] * r
    [fused] = rewrite([v, r], [out])
    (node,) = elemwise_nodes(fused)
    assert str(node.op) == "Composite{exp(i0) * i1}"
    assert_same_values([v, r], [out], [fused])
    # Dropping a length-1 dimension: (exp(a) + 1)[0] * w.
    a, w = kt.tensor("a", shape=(1, None)), kt.vector("w")
    out2 = kt.squeeze(kt.exp(a) + 1, 0) * w
    [fused2] = rewrite([a, w], [out2])
    (node2,) = elemwise_nodes(fused2)
    assert str(node2.op) == "Composite{(exp(i0) + 1.0) * i1}"
    assert_same_values([a, w], [out2], [fused2])


def test_transposition_is_a_boundary():
    m, n = kt.matrix("m"), kt.matrix("n")
    out = kt.exp(m).T * n
    fused = fuse([m, n], [out])
    assert len(elemwise_nodes(fused)) == 2
    assert_same_values([m, n], [out], fused)


def test_intermediate_with_another_client_is_not_fused():
    x, y, z = kt.vector("x"), kt.vector("y"), kt.vector("z")
    e = kt.exp(x)
    outs = fuse([x, y, z], [e * y + z, e])
    nodes = elemwise_nodes(outs)
    assert [str(n.op) for n in nodes] == ["exp", "Composite{i0 * i1 + i2}"]
    assert outs[1] is e and nodes[1].inputs[0] is e
    # Used by a node outside the group (here a reduction): neither fuses into the other.
    outs2 = fuse([x, y], [e * y, kt.sum(e)])
    assert isinstance(outs2[1].owner.op, CAReduce)
    assert [str(n.op) for n in elemwise_nodes(outs2)] == ["exp", "mul"]
    assert_same_values([x, y], [e * y, kt.sum(e)], outs2)


def test_intermediate_used_twice_inside_the_group_is_fused():
    x, y = kt.vector("x"), kt.vector("y")
    e = kt.exp(x)
    out = (e * y + e) * kt.log(e)
    [fused] = fuse([x, y], [out])
    (node,) = toposort(fused)
    program = node.op.scalar_op
    assert sum(isinstance(op, Exp) for op, _ in program.steps) == 1
    assert str(program) == "Composite{t0 = exp(i0); (t0 * i1 + t0) * log(t0)}"
    assert_same_values([x, y], [out], [fused])


def test_number_of_inputs_is_bounded():
    xs = [kt.vector(f"x{k}") for k in range(40)]
    out = xs[0]
    for k, x in enumerate(xs[1:]):
        out = out * x if k % 2 else out + x
    [fused] = fuse(xs, [out])
    nodes = elemwise_nodes(fused)
    assert len(nodes) == 2
    assert all(len(n.inputs) <= MAX_INPUTS for n in nodes)
    assert_same_values(xs, [out], [fused])
    [small] = fuse(xs, [out], max_inputs=4)
    nodes = elemwise_nodes(small)
    assert all(len(n.inputs) <= 4 for n in nodes)
    assert len(nodes) == 13  # 40 leaves, 3 new ones per node after the first's 4
    assert_same_values(xs, [out], [small])


def test_graph_outputs_count_as_clients():
    x, y = kt.vector("x"), kt.vector("y")
    a = x + 1
    b = a * y
    outs = fuse([x, y], [b, a])
    assert [str(n.op) for n in elemwise_nodes(outs)] == ["add", "mul"]


def test_single_elemwise_nodes_are_left_alone():
    x = kt.vector("x")
    out = kt.exp(kt.cumsum(kt.log(x)))
    [fused] = fuse([x], [out])
    assert [str(n.op) for n in elemwise_nodes(fused)] == ["log", "exp"]
    assert fused is out


def test_fusion_is_idempotent():
    x, y, z = kt.vector("x"), kt.vector("y"), kt.matrix("z")
    outs = [kt.exp(x) * y + 1, kt.sum(kt.log(z) * 2, axis=1)]
    once = fuse([x, y, z], outs)
    assert fuse([x, y, z], once) == once


def test_all_constant_group_is_left_unfused():
    out = kt.exp(kt.constant(1.0)) * 2.0 + 1.0
    [fused] = rewrite([], [out], FUSION_ONLY)
    assert len(elemwise_nodes(fused)) == 3  # constant folding's job, not fusion's
    assert float(evaluate(fused, {})) == float(evaluate(out, {}))


def test_complex_results_are_not_reduced_in_one_op():
    c = kt.vector("c", dtype="complex128")
    [out] = fuse([c], [kt.sum(c * 2)])
    assert isinstance(out.owner.op, CAReduce)


def test_long_chain_fuses_in_linear_time():
    x = kt.vector("x")
    out = x
    for k in range(3000):
        out = out * 0.999 + k if k % 2 else kt.sin(out)
    start = time.perf_counter()
    [fused] = fuse([x], [out])
    elapsed = time.perf_counter() - start
    assert len(toposort(fused)) == 1
    assert elapsed < 10
    assert_same_values([x], [out], [fused])


def test_pipeline_lists_the_fusion_rewrites():
    text = pipeline()
    assert "elemwise_fusion" in text and "reduce_fusion" in text


# --- values: fused == unfused, bit for bit ------------------------------------------------------


def _vars(*specs):
    return [kt.tensor(name, dtype=dtype, shape=shape) for name, dtype, shape in specs]


V64 = ("float64", (None,))
M64 = ("float64", (None, None))

# name -> (input specs, function building the outputs)
CASES = {
    "float64": ([("x", *V64), ("y", *V64)], lambda x, y: [kt.exp(x) * y + x / 3]),
    "float32": (
        [("x", "float32", (None,)), ("y", "float32", (None,))],
        lambda x, y: [kt.tanh(x) * 0.1 + kt.sqrt(kt.abs(y)) * 2.5],
    ),
    "ints": (
        [("a", "int32", (None,)), ("b", "int64", (None,))],
        lambda a, b: [(a * b - 3) // 2 + a % 4, kt.sum(a * a, axis=0)],
    ),
    "int8_overflow": (
        [("a", "int8", (None,)), ("b", "int8", (None,))],
        lambda a, b: [a * b * 50 + a],
    ),
    "comparisons_switch": (
        [("x", *V64), ("y", *V64), ("k", "int32", (None,))],
        lambda x, y, k: [kt.switch((x > y) | (k == 2), kt.exp(x), y * k), kt.all(x < y + 1)],
    ),
    "mixed_casts": (
        [("x", "float32", (None,)), ("y", *V64), ("k", "int16", (None,))],
        lambda x, y, k: [kt.cast(x * 3, "int32") + k, kt.cast(y, "float32") * x + k],
    ),
    "broadcasting": (
        [("v", *V64), ("m", *M64), ("s", "float64", ())],
        lambda v, m, s: [kt.exp(v)[None, :] * m + s, kt.max(kt.log1p(m * m) - s, axis=0)],
    ),
    "shared_intermediates": (
        [("x", *V64), ("y", *V64)],
        lambda x, y: [kt.exp(x) * y, kt.exp(x) + 1, kt.sum(kt.exp(x) * 2)],
    ),
    "logsumexp_like": (
        [("m", *M64)],
        lambda m: [
            kt.log(kt.sum(kt.exp(m - kt.max(m, axis=1, keepdims=True)), axis=1)) + kt.max(m, axis=1)
        ],
    ),
    "normal_logp": (
        [("x", *M64), ("mu", *V64), ("sigma", "float64", ())],
        lambda x, mu, sigma: [
            kt.sum(-0.5 * ((x - mu[None, :]) / sigma) ** 2 - kt.log(sigma) - 0.9189385332046727)
        ],
    ),
    "bool_float": (
        [("b", "bool", (None,)), ("x", *V64)],
        lambda b, x: [kt.switch(~b, x * 2, -x) + kt.cast(b, "float64"), kt.any(b & (x > 0))],
    ),
    "gradient_graph": (
        [("x", *V64), ("y", *V64)],
        lambda x, y: [kt.grad(kt.sum(kt.sigmoid(x * y) * kt.exp(-x)), [x, y])[0]],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_values_equal_unfused(name, seed):
    specs, build = CASES[name]
    inputs = _vars(*specs)
    outs = build(*inputs)
    fused = rewrite(inputs, outs, FUSION_ONLY)
    assert any(
        isinstance(n.op, FusedReduce)
        or (isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, Composite))
        for n in toposort(fused)
    )
    assert_same_values(inputs, outs, fused, seed)


# --- end to end ---------------------------------------------------------------------------------


def test_function_fast_run_on_the_vm():
    x, y, m = kt.vector("x"), kt.vector("y"), kt.matrix("m")
    outs = [
        kt.exp(x) * y + 2.0,
        kt.sum(kt.exp(m) * 0.5, axis=1),
        kt.exp(kt.dot(m, x)) * 3 + 1,  # an intermediate buffer the in-place phase may reuse
    ]
    fast = kiln.function([x, y, m], outs, mode="FAST_RUN")
    slow = kiln.function([x, y, m], outs, mode="FAST_COMPILE")
    assert fast.linker == "vm"
    ops = [n.op for n in fast.fgraph.nodes]
    assert any(isinstance(op, FusedReduce) for op in ops)
    assert any(isinstance(op, Elemwise) and isinstance(op.scalar_op, Composite) for op in ops)
    rng = np.random.default_rng(3)
    xv, yv, mv = rng.normal(size=4), rng.normal(size=4), rng.normal(size=(3, 4))
    keep = xv.copy(), yv.copy(), mv.copy()
    for _ in range(2):
        got = fast(xv, yv, mv)
        expected = slow(xv, yv, mv)
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-15, atol=0)
    for before, after in zip(keep, (xv, yv, mv), strict=True):
        np.testing.assert_array_equal(before, after)
