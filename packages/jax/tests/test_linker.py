"""The JAX linker: data, float64, static inputs, excluded rewrites, errors, fused Ops.

Data as runtime inputs, scoped float64, static shape inputs, the rewrites it leaves
out, errors that name the node, and the Ops the fusion phase would build.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from kiln_compile import FAST_RUN, Mode, function
from kiln_compile._linkers import backend_query, get_linker
from kiln_compile.testing import compare_with_vm
from kiln_graph import Composite, Elemwise, FusedReduce, ShapeMismatchError
from kiln_graph import _math as m
from kiln_graph import tensor as kt
from kiln_graph._basic import shared
from kiln_jax import NoJaxImplementation, needs_x64

JAX = Mode(linker="jax")


def test_shared_data_is_a_runtime_input_new_values_do_not_recompile():
    data = shared(np.arange(4.0), name="data")
    x = kt.scalar("x")
    f = function([x], kt.sum(data * x), JAX)
    assert f(2.0) == 12.0
    data.set_value(np.ones(4))
    assert f(2.0) == 8.0
    data.set_value(np.full(4, 3.0))
    assert f(1.0) == 12.0
    assert f.thunk.traces == 1  # one XLA compilation for three data values
    data.set_value(np.ones(6))  # a new shape retraces, as in JAX
    assert f(1.0) == 6.0 and f.thunk.traces == 2


def test_float64_is_scoped_the_global_flag_is_unchanged():
    assert not jax.config.jax_enable_x64
    x = kt.vector("x")
    f = function([x], kt.exp(x) * 1e-300, JAX)
    out = f(np.array([1.0, 2.0]))
    assert out.dtype == np.float64  # 1e-300 would be 0 in float32
    np.testing.assert_allclose(out, np.exp([1.0, 2.0]) * 1e-300, rtol=1e-14)
    assert not jax.config.jax_enable_x64
    assert f.thunk.x64
    y = kt.vector("y", dtype="float32")
    g = function([y], kt.exp(y) + np.float32(1), JAX)
    assert not needs_x64(g.fgraph) and not g.thunk.x64
    assert g(np.ones(2, dtype="float32")).dtype == np.float32


def test_inputs_that_decide_a_shape_are_static_each_value_compiles_once():
    n = kt.scalar("n", dtype="int64")
    x = kt.vector("x")
    f = function([n, x], [kt.arange(n) * 2, kt.reshape(x, (n, -1))], JAX)
    assert f.thunk.static == [0]
    a, b = f(3, np.arange(6.0))
    np.testing.assert_array_equal(a, [0, 2, 4])
    assert b.shape == (3, 2)
    f(3, np.arange(6.0) + 1)
    assert f.thunk.traces == 1
    a, b = f(2, np.arange(6.0))
    assert a.shape == (2,) and b.shape == (2, 3) and f.thunk.traces == 2


def test_the_jax_mode_leaves_out_in_place_and_fusion():
    linker = get_linker("jax")
    query = backend_query(FAST_RUN.rewrites, linker)  # type: ignore[arg-type]
    assert {"inplace", "fusion"} <= query.exclude and "jax" in query.include
    x, y = kt.vector("x"), kt.vector("y")
    f = function([x, y], kt.exp(x) * y + kt.sin(x) / 2 - kt.sqrt(y * y + 1), JAX)
    ops = [node.op for node in f.fgraph.nodes]
    assert not any(getattr(op, "destroy_map", None) for op in ops)
    assert not any(isinstance(op, Elemwise) and isinstance(op.scalar_op, Composite) for op in ops)
    numba = backend_query(FAST_RUN.rewrites, get_linker("vm"))  # type: ignore[arg-type]
    assert "inplace" not in numba.exclude


def test_fused_ops_built_by_hand_run_on_jax():
    """FusedReduce and Composites of mixed dtypes (the fusion phase is off on JAX)."""
    x, y = kt.matrix("x", dtype="float32"), kt.tensor("y", dtype="int16", shape=(1, None))
    vals = [
        np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4),
        np.arange(4, dtype="int16")[None],
    ]
    fused = [FusedReduce("sum", (1,), m.Mul())(x, y), FusedReduce("max", (0, 1), m.Sub())(y, y)]
    a, b = kt.scalar("a", dtype="float32"), kt.scalar("b", dtype="int16")
    composite = Elemwise(Composite.from_graph([a, b], [kt.exp(a) * b + b // 2]))(x, y)
    compare_with_vm([x, y], [*fused, composite], vals, backend="jax")


def test_an_error_while_tracing_names_the_node_and_the_backend():
    x = kt.vector("x")
    f = function([x], kt.reshape(x, (2, 3)), JAX)
    with pytest.raises(TypeError, match="cannot reshape") as info:
        f(np.arange(5.0))  # JAX's own error, raised while tracing
    assert "while computing Reshape{2}(x, [2, 3]) on backend 'jax'" in info.value.__notes__
    n = kt.scalar("n", dtype="int64")
    g = function([x, n], kt.reshape(kt.ones((n,)), (2, 3)) + x[0], JAX)
    with pytest.raises(ShapeMismatchError) as info1:
        g(np.ones(1), 5)  # known when tracing: NumPy's perform raises kiln's error
    assert any("on backend 'jax'" in note for note in info1.value.__notes__)
    y = kt.vector("y")
    g = function([x, y], x + y, JAX)
    with pytest.raises(TypeError) as info2:
        g(np.ones(3), np.ones(4))  # kiln's static broadcasting; JAX refuses 3 vs 4
    assert any("while computing" in n and "'jax'" in n for n in info2.value.__notes__)


def test_an_op_without_implementation_is_an_error_when_linking():
    from kiln_graph import Apply, Op, TensorType

    class Twice(Op):
        def make_node(self, x):
            x = kt.as_tensor(x)
            return Apply.create(self, [x], [TensorType(x.dtype, x.type.shape)])

        def perform(self, node, inputs, outputs):
            outputs[0] = inputs[0] * 2

    x = kt.vector("x")
    with pytest.raises(NoJaxImplementation, match="Twice") as info:
        function([x], Twice()(x) + 1, JAX)
    assert any("on backend 'jax'" in note for note in info.value.__notes__)


def test_a_batched_reshape_maps_its_values_not_its_target_shape() -> None:
    """Blockwise(Reshape): the constant target shape reaches the core op as NumPy.

    (Mapped by ``jax.vmap`` it was a tracer, which a reshape's static shape cannot be:
    a latent Kronecker GP's draws failed to expand on JAX.)
    """
    from kiln_graph import Blockwise
    from kiln_graph.ops import Reshape

    x = kt.matrix("x")
    out = Blockwise(Reshape(2), "(n),(k)->(a,b)")(x, kt.constant(np.array([[2, -1]])))
    f = function([x], out, mode=Mode(linker="jax"))
    value = np.arange(12.0).reshape(2, 6)
    np.testing.assert_array_equal(f(value), value.reshape(2, 2, 3))
