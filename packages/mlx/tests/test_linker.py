"""The MLX linker: compiled functions against the VM, data, float32 mode, keys, errors, cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

import kiln_random as kr
from kiln_compile import Mode, function
from kiln_compile._linkers import get_linker
from kiln_graph import grad
from kiln_graph import tensor as kt
from kiln_graph._basic import shared
from kiln_mlx import MlxLinker, NoMlxImplementation

MLX = Mode(linker="mlx")
VM = Mode(linker="vm")


def _both(inputs, outputs, values, mode=MLX):
    got = function(inputs, outputs, mode=mode)(*values)
    want = function(inputs, outputs, mode=VM)(*values)
    return got, want


def test_a_compiled_logp_and_gradient_match_the_vm_in_float64():
    x = kt.vector("x")
    s = kt.scalar("s")
    logp = kt.sum(-0.5 * ((x - 1.3) / kt.exp(s)) ** 2 - s) + kt.sum(kt.sigmoid(x) * kt.sin(x))
    g = grad(logp, [x, s])
    values = [np.linspace(-2.0, 3.0, 7), np.array(0.3)]
    got, want = _both([x, s], [logp, *g], values)
    for a, b in zip(got, want, strict=True):
        assert np.asarray(a).dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_shared_data_is_a_runtime_input_new_values_do_not_retrace():
    data = shared(np.arange(4.0), name="data")
    x = kt.scalar("x")
    f = function([x], kt.sum(data * x), MLX)
    assert f(2.0) == 12.0
    data.set_value(np.ones(4))
    assert f(2.0) == 8.0
    assert f.thunk.traces == 1
    data.set_value(np.ones(6))  # a new shape retraces
    assert f(1.0) == 6.0 and f.thunk.traces == 2


def test_excluded_rewrites_and_linker_doc():
    linker = get_linker("mlx")
    assert linker.excluded_rewrites == ("inplace", "fusion")
    assert "mx.compile" in linker.doc.compiles and "mlx/" in linker.doc.cache


def test_float32_mode_computes_in_float32_and_returns_the_graph_dtype():
    x = kt.vector("x")
    out = kt.exp(x) * kt.erf(x)
    values = [np.linspace(-2.0, 2.0, 9)]
    got, want = _both([x], [out], values, mode=Mode(linker="mlx_float32"))
    assert got[0].dtype == np.float64
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert not np.array_equal(got[0], want[0])  # float32 rounding shows


def test_draws_are_reproducible_per_seed_and_advance_the_generator():
    rng = kr.rng(5)
    draw = kr.normal(1.0, 2.0, size=(20000,), rng=rng)
    f = function([], draw, mode=MLX)
    a, b = f(), f()
    assert not np.array_equal(a, b)
    rng.set_value(np.random.default_rng(5))
    np.testing.assert_array_equal(f(), a)
    assert stats.kstest(a, stats.norm(1.0, 2.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    ("make", "dist"),
    [
        (lambda r: kr.gamma(0.6, 2.0, size=(20000,), rng=r), stats.gamma(0.6, scale=2.0)),
        (lambda r: kr.gamma(3.0, 0.5, size=(20000,), rng=r), stats.gamma(3.0, scale=0.5)),
        (lambda r: kr.beta(2.0, 0.7, size=(20000,), rng=r), stats.beta(2.0, 0.7)),
        (lambda r: kr.uniform(-1.0, 3.0, size=(20000,), rng=r), stats.uniform(-1.0, 4.0)),
        (lambda r: kr.studentt(4.0, 0.0, 1.0, size=(20000,), rng=r), stats.t(4.0)),
    ],
)
def test_draws_follow_their_distribution(make, dist):
    f = function([], make(kr.rng(11)), mode=MLX)
    assert stats.kstest(f(), dist.cdf).pvalue > 1e-3


class _UnknownRV(kr.RandomVariable):
    """A random variable kiln_mlx has no sampler for."""

    name, signature, dtype = "unknown", "()->()", "float64"
    params = ("mu",)

    @staticmethod
    def core_fn(rng, mu):
        return rng.normal(mu)

    def rng_fn(self, rng, size, mu):
        return rng.normal(mu, size=size)


def test_a_draw_mlx_cannot_make_names_the_op_and_backend():
    draw = _UnknownRV()(kr.rng(0), np.array([3]), np.array(3.0))[1]
    with pytest.raises(NoMlxImplementation, match="MLX backend.*_UnknownRV"):
        function([], draw, mode=MLX)


@pytest.mark.parametrize("compiled", [True, False])
def test_errors_while_mlx_evaluates_name_the_node_and_backend(monkeypatch, compiled):
    monkeypatch.setattr(MlxLinker, "compile", compiled)
    a = kt.matrix("a")
    f = function([a], kt.exp(kt.inv(a)).sum(), mode=MLX)
    with pytest.raises(RuntimeError, match="LU factorization failed") as info:
        f(np.array([[1.0, 2.0], [2.0, 4.0]]))
    notes = info.value.__notes__
    assert any(n.startswith("while computing") and "Inv" in n for n in notes), notes
    assert any("backend 'mlx'" in n for n in notes)


def test_errors_while_tracing_name_the_node_and_backend():
    x = kt.matrix("x")
    f = function([x], kt.reshape(x, (5, 5)), mode=MLX)
    with pytest.raises(Exception) as info:
        f(np.ones((2, 3)))
    assert any("backend 'mlx'" in note for note in info.value.__notes__)


def test_eager_mode_agrees_with_compiled(monkeypatch):
    x = kt.vector("x")
    out = kt.gammaln(x) + kt.digamma(x)
    values = [np.linspace(0.2, 7.0, 11)]
    compiled = function([x], out, mode=MLX)(*values)
    monkeypatch.setattr(MlxLinker, "compile", False)
    eager = function([x], out * 1.0, mode=MLX)(*values)
    np.testing.assert_allclose(compiled, eager, rtol=1e-15)


SCRIPT = r"""
import json, os
import numpy as np
from kiln_compile import Mode, function
from kiln_graph import grad
from kiln_graph import tensor as kt
x = kt.vector("x")
f = function([x], (kt.log1p(x * x) + kt.tanh(x) * 3.0).sum(), mode=Mode(linker="mlx"),
             profile=True)
value = float(f(np.arange(3.0)))
print(json.dumps({"value": value, "dir": f.profile.stage2["kernel_dir"],
                  "tmpdir": os.environ.get("TMPDIR")}))
"""


def _run(root) -> dict:
    env = dict(os.environ, KILN_CACHE_DIR=str(root), TMPDIR=str(root / "elsewhere"))
    (root / "elsewhere").mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kernels_live_under_the_cache_root_and_a_new_process_reuses_them(tmp_path):
    first = _run(tmp_path)
    assert first["dir"] == str(tmp_path / "mlx")
    assert first["tmpdir"] == str(tmp_path / "elsewhere")  # restored after the call
    kernels = {p: p.stat().st_mtime_ns for p in (tmp_path / "mlx").rglob("*.so")}
    assert kernels and not any((tmp_path / "elsewhere").iterdir())
    second = _run(tmp_path)
    assert second["value"] == first["value"]
    # none new and none built again: the second process loaded the first one's kernels
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "mlx").rglob("*.so")} == kernels
    assert not list((tmp_path / "mlx").rglob(".tmp-*"))


def test_blockwise_maps_the_core_with_vmap_and_falls_back_where_mlx_has_no_rule(monkeypatch):
    """Batched cholesky goes through ``mx.vmap``; batched solve (LU: no rule) loops."""
    import mlx.core as mx

    calls = []
    vmap = mx.vmap

    def counting(fn, *args, **kwargs):
        calls.append(fn)
        return vmap(fn, *args, **kwargs)

    monkeypatch.setattr(mx, "vmap", counting)
    monkeypatch.setattr(MlxLinker, "compile", False)
    a, b = kt.tensor("a", shape=(None, None, None)), kt.tensor("b", shape=(None, None, None))
    outs = [kt.cholesky(a), kt.solve(a, b)]
    rng = np.random.default_rng(2)
    m = rng.normal(size=(4, 3, 3))
    values = [m @ m.transpose(0, 2, 1) + 3 * np.eye(3), rng.normal(size=(4, 3, 2))]
    got, want = _both([a, b], outs, values, mode=MLX)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert len(calls) == 2  # tried for both; the solve fell back to the loop
