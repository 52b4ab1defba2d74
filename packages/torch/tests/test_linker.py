"""The torch linker: generated program, data, float64, devices, rewrites, errors, host ops."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest
import scipy.special as sp
import torch

import kiln_compile
import kiln_torch.scalar
from kiln_compile import FAST_RUN, Mode, function
from kiln_compile._linkers import backend_query, get_linker
from kiln_graph import KilnValueError
from kiln_graph import tensor as kt
from kiln_graph._basic import shared
from kiln_torch import HostComputationWarning, TorchLinker

TORCH = Mode(linker="torch")


def test_the_program_is_one_generated_module_level_function():
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum() * 2.0, TORCH)
    source = f.thunk.program.source
    assert source.startswith("def program(i0):")
    assert "exp(x)" in source  # each line names its node
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), 2.0 * (1.0 + np.e), rtol=1e-15)
    program = f.thunk._bound[("cpu", False)]
    assert program.__closure__ is None  # module-level: no closure cells for dynamo to guard
    assert inspect.getsource(program) == source  # registered in linecache


def test_shared_data_is_a_runtime_input_of_any_shape():
    data = shared(np.arange(4.0), name="data")
    x = kt.scalar("x")
    f = function([x], kt.sum(data * x), TORCH)
    assert f(2.0) == 12.0
    data.set_value(np.ones(4))
    assert f(2.0) == 8.0
    data.set_value(np.ones(6))  # a new shape: the same program
    assert f(1.0) == 6.0
    assert len(f.thunk._bound) == 1


def test_float64_stays_float64_and_float32_float32():
    x = kt.vector("x")
    f = function([x], kt.exp(x) * 1e-300, TORCH)
    out = f(np.array([1.0, 2.0]))
    assert out.dtype == np.float64  # 1e-300 would be 0 in float32
    np.testing.assert_allclose(out, np.exp([1.0, 2.0]) * 1e-300, rtol=1e-15)
    y = kt.vector("y", dtype="float32")
    g = function([y], kt.exp(y) + np.float32(1), TORCH)
    assert g(np.ones(2, dtype="float32")).dtype == np.float32
    assert torch.get_default_dtype() == torch.float32  # torch's global default untouched


def test_integer_division_follows_numpy_not_torch():
    i = kt.vector("i", dtype="int64")
    f = function([i], [i / 2, i // 2, i % 3], TORCH)
    a, b, c = f(np.array([-3, 4, 7]))
    assert a.dtype == np.float64  # torch would give float32
    np.testing.assert_array_equal(a, [-1.5, 2.0, 3.5])
    np.testing.assert_array_equal(b, [-2, 2, 3])
    np.testing.assert_array_equal(c, [0, 1, 1])


def test_read_only_inputs_and_negative_steps():
    x = kt.matrix("x")
    f = function([x], [x[::-2, 1:], x[:, ::-1].sum(0)], TORCH)
    value = np.arange(12.0).reshape(4, 3)
    value.flags.writeable = False  # torch.from_numpy would warn on it
    a, b = f(value)
    np.testing.assert_array_equal(a, value[::-2, 1:])
    np.testing.assert_array_equal(b, value[:, ::-1].sum(0))


def test_the_inplace_and_fusion_phases_are_excluded():
    linker = get_linker("torch")
    assert isinstance(linker, TorchLinker)
    query = backend_query(FAST_RUN.rewrites, linker)
    assert {"inplace", "fusion"} <= set(query.exclude)
    x = kt.vector("x")
    f = function([x], kt.exp(x) * 2.0 + kt.log(x), TORCH)
    names = {type(n.op.scalar_op).__name__ for n in f.fgraph.nodes if hasattr(n.op, "scalar_op")}
    assert "Composite" not in names
    assert not any(getattr(n.op, "destroy_map", None) for n in f.fgraph.nodes)


def test_linalg_against_numpy():
    a = kt.matrix("a")
    b = kt.vector("b")
    chol = kt.linalg.cholesky(a) if hasattr(kt, "linalg") else None
    outs = [
        kt.cholesky(a),
        kt.solve(a, b, assume_a="pos", b_ndim=1),
        kt.solve_triangular(kt.cholesky(a), b, lower=True, b_ndim=1),
        kt.slogdet(a)[1],
        kt.inv(a),
    ]
    del chol
    f = function([a, b], outs, TORCH)
    rng = np.random.default_rng(0)
    m = rng.normal(size=(4, 4))
    av = m @ m.T + 4 * np.eye(4)
    bv = rng.normal(size=4)
    l_, x, y, logdet, inv = f(av, bv)
    np.testing.assert_allclose(l_, np.linalg.cholesky(av), rtol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(av, bv), rtol=1e-12)
    np.testing.assert_allclose(y, np.linalg.solve(np.linalg.cholesky(av), bv), rtol=1e-12)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(av)[1], rtol=1e-12)
    np.testing.assert_allclose(inv, np.linalg.inv(av), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError) as info:
        f(-av, bv)
    assert any("backend 'torch'" in n and "Cholesky" in n for n in info.value.__notes__)


def test_an_error_inside_torch_names_the_node_and_the_backend():
    x = kt.matrix("x")
    y = kt.matrix("y")
    f = function([x, y], kt.dot(x, y).sum(), TORCH)
    with pytest.raises(RuntimeError) as info:
        f(np.ones((2, 3)), np.ones((2, 3)))
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "on backend 'torch'" in notes and "x" in notes


def test_ops_torch_lacks_compute_on_the_host_with_one_warning(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(kiln_torch.scalar, "_warned", set())  # once per process: start over
    a = kt.vector("a")
    f_args = [a, a, kt.constant(np.array([0.3, 0.6]))]
    with pytest.warns(HostComputationWarning, match="betainc"):
        f = function([a], kt.betainc(*f_args), TORCH)
    np.testing.assert_allclose(
        f(np.array([2.0, 3.0])), sp.betainc([2.0, 3.0], [2.0, 3.0], [0.3, 0.6]), rtol=1e-13
    )


def test_device_is_checked_with_a_clear_error():
    x = kt.vector("x")
    f = function([x], kt.exp(x), TORCH)
    with (
        kiln_compile.config.change(torch_device="tpu9"),
        pytest.raises(KilnValueError, match="torch_device"),
    ):
        f(np.ones(2))
    if not torch.cuda.is_available():
        with (
            kiln_compile.config.change(torch_device="cuda"),
            pytest.raises(KilnValueError, match="'cuda' is not available"),
        ):
            f(np.ones(2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_matches_cpu():  # pragma: no cover - only where a GPU is present
    x = kt.vector("x")
    f = function([x], [kt.exp(x).sum(), kt.gammaln(x)], TORCH)
    value = np.linspace(0.5, 3.0, 7)
    cpu = f(value)
    with kiln_compile.config.change(torch_device="cuda"):
        gpu = f(value)
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-13)


def test_missing_torch_is_the_clear_error(monkeypatch: pytest.MonkeyPatch):
    from kiln_compile import BackendNotInstalledError

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendNotInstalledError, match=r"pip install kiln\[torch\]"):
        TorchLinker()
