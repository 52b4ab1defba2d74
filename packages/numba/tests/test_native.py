"""kiln_numba.native: a model's logp and gradient as one native function, for samplers.

The native function is called from Python and from an njit function taking it through
an explicit ``types.FunctionType`` signature (as kiln's compiled NUTS does); its values
match the Function's. Its wrapper is cached beside the generated module: a new process
(a real subprocess) loads it without compiling anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numba import njit, types
from numba.core import sigutils

import kiln
import kiln.tensor as kt
from kiln_compile import config
from kiln_graph import Apply, KilnTypeError, Op
from kiln_numba import native_logp_grad
from kiln_numba._runtime import KilnRuntimeError
from kiln_numba.native import LOGP_GRAD_NUMBA_SIGNATURE, LOGP_GRAD_SIGNATURE, NativeLogpGrad

NUMBA = kiln.FAST_RUN.with_linker("numba")
FN_TYPE = types.FunctionType(LOGP_GRAD_NUMBA_SIGNATURE)


@njit(
    types.Tuple((types.float64, types.float64[::1]))(FN_TYPE, types.int64[::1], types.float64[::1])
)
def call_twice(fn, user_data, x):  # pragma: no cover (compiled)
    """Call the model through its function pointer, as a compiled sampler does."""
    grad = np.empty_like(x)
    lp = fn(x, grad, user_data)
    lp = fn(x, grad, user_data)
    return lp, grad


@njit(types.float64(FN_TYPE, types.int64[::1], types.float64[::1], types.int64))
def call_many(fn, user_data, x, n):  # pragma: no cover (compiled)
    grad = np.empty_like(x)
    total = 0.0
    for _ in range(n):
        total += fn(x, grad, user_data)
    return total


@pytest.fixture(autouse=True)
def _no_memo():
    with config.change(memo=False):
        yield


class PerformOnly(Op):
    """``hypot(x, x)``, with only a Python perform (runs in Numba's object mode)."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = kt.as_tensor(x)
        return Apply.create(self, [x], [x.type])

    def perform(self, node: Apply, inputs: Sequence[Any], outputs: list[Any]) -> None:
        outputs[0] = np.hypot(inputs[0], inputs[0])


W = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])
IDX = np.array([2, 0, 1, 2], dtype=np.int64)


def _model(data: np.ndarray) -> tuple[kiln.Function, object]:
    """Return a small model (x = (mu, log_sigma, z); data shared; a 2-d and an int64 constant)."""
    x = kt.vector("x")
    y = kt.shared(data, name="y")
    mu, log_sigma = x[0], x[1]
    resid = (y - mu) / kt.exp(log_sigma)
    lp = kt.sum(-0.5 * resid**2 - log_sigma) + kt.sum(
        kt.dot(kt.constant(W), x[kt.constant(IDX)][:3])
    )
    lp = lp - 0.5 * x[2] ** 2
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    return f, y


def _reference(x: np.ndarray, data: np.ndarray) -> tuple[float, np.ndarray]:
    mu, log_sigma, z = x
    s = np.exp(log_sigma)
    r = (data - mu) / s
    lin = W @ x[IDX][:3]
    lp = np.sum(-0.5 * r**2 - log_sigma) + np.sum(lin) - 0.5 * z**2
    g = np.zeros(3)
    g[0] = np.sum(r / s)
    g[1] = np.sum(r**2 - 1.0)
    g[2] = -z
    np.add.at(g, IDX[:3], W.sum(axis=0))
    return lp, g


X = np.array([0.3, -0.2, 0.7])
DATA = np.array([0.5, 1.5, -0.25, 2.0])


def _check(native: NativeLogpGrad, f: kiln.Function, x: np.ndarray, data: np.ndarray) -> None:
    lp_ref, g_ref = _reference(x, data)
    if data.dtype.isnative:  # (the Function itself does not take byte-swapped data)
        lp_f, g_f = f(x)
        np.testing.assert_allclose(lp_f, lp_ref, rtol=1e-12)
        np.testing.assert_allclose(g_f, g_ref, rtol=1e-12)
        lp_ref, g_ref = lp_f, g_f
    grad = np.full(3, np.nan)
    lp = native.fn(x, grad, native.user_data)  # from Python
    assert isinstance(lp, float)
    np.testing.assert_allclose(lp, lp_ref, rtol=1e-12)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-12)
    lp2, grad2 = call_twice(native.fn, native.user_data, x)  # from njit
    np.testing.assert_allclose(lp2, lp_ref, rtol=1e-12)
    np.testing.assert_allclose(grad2, g_ref, rtol=1e-12)


def test_logp_and_grad_from_python_and_njit(cache_dir):
    f, _ = _model(DATA.copy())
    native = native_logp_grad(f)
    assert native.stage2["cache"] == "miss"
    assert Path(native.stage2["module"]).parent == Path(f.thunk.stage2["module"]).parent
    assert native.user_data.dtype == np.int64
    assert len(native.keep_alive) == 1 + len(f.thunk.constants)
    _check(native, f, X, DATA)
    _check(native, f, np.array([-1.0, 0.4, 0.0]), DATA)
    args, ret = sigutils.normalize_signature(LOGP_GRAD_SIGNATURE)
    assert (args, ret) == (LOGP_GRAD_NUMBA_SIGNATURE.args, LOGP_GRAD_NUMBA_SIGNATURE.return_type)


def test_one_sampler_compile_serves_every_model(cache_dir):
    """Two models (other constants, other shapes) go through one compiled caller."""
    f, _ = _model(DATA.copy())
    x2 = kt.vector("x")
    c = kt.constant(np.array([[2.0, 0.0], [0.0, 0.5]]))
    lp2 = -0.5 * kt.sum(kt.dot(c, x2) ** 2)
    f2 = kiln.function([x2], [lp2, kiln.grad(lp2, x2)], mode=NUMBA)
    a, b = native_logp_grad(f), native_logp_grad(f2)
    _check(a, f, X, DATA)
    xv = np.array([1.0, -2.0])
    lp, grad = call_twice(b.fn, b.user_data, xv)
    np.testing.assert_allclose(lp, f2(xv)[0], rtol=1e-13)
    np.testing.assert_allclose(grad, f2(xv)[1], rtol=1e-13)
    assert len(call_twice.overloads) == 1
    assert call_many(b.fn, b.user_data, xv, 10) == pytest.approx(10 * lp)


def test_refresh_follows_set_value(cache_dir):
    f, y = _model(DATA.copy())
    native = native_logp_grad(f)
    _check(native, f, X, DATA)
    longer = np.linspace(-1.0, 3.0, 7)
    y.set_value(longer)
    ud = native.user_data
    assert native.refresh() is ud  # updated in place
    _check(native, f, X, longer)
    y.set_value(np.array([0.1]))
    native.refresh()
    _check(native, f, X, np.array([0.1]))
    # A second wrapper of the same model is the same compiled function.
    again = native_logp_grad(f)
    assert again.fn is native.fn and again.stage2["cache"] == "memory"


def test_non_contiguous_and_byte_swapped_values_are_copied(cache_dir):
    f, y = _model(DATA.copy())
    native = native_logp_grad(f)
    strided = np.linspace(-1.0, 3.0, 10)[::2]
    y.set_value(strided, borrow=True)
    native.refresh()
    assert all(a.flags.c_contiguous and a.dtype.isnative for a in native.keep_alive)
    _check(native, f, X, strided)
    swapped = np.linspace(0.0, 1.0, 3).astype(">f8")
    y.set_value(swapped, borrow=True)
    native.refresh()
    assert all(a.flags.c_contiguous and a.dtype.isnative for a in native.keep_alive)
    _check(native, f, X, swapped)


def test_other_dtypes_of_shared_values(cache_dir):
    """Shared int32 counts and a bool mask are passed with their dtypes."""
    x = kt.vector("x")
    counts = kt.shared(np.array([1, 4, 2], dtype=np.int32), name="counts")
    mask = kt.shared(np.array([True, False, True]), name="mask")
    lp = kt.sum(kt.switch(mask, counts * x - kt.exp(x), 0.0))
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    native = native_logp_grad(f)
    xv = np.array([0.1, 0.5, -0.3])
    grad = np.empty(3)
    lp_ref, g_ref = f(xv)
    np.testing.assert_allclose(native.fn(xv, grad, native.user_data), lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)
    expected = np.where([True, False, True], [1, 4, 2] * xv - np.exp(xv), 0.0).sum()
    np.testing.assert_allclose(lp_ref, expected, rtol=1e-13)
    mask.set_value(np.array([True, True, True]))
    native.refresh()
    lp_ref, g_ref = f(xv)
    np.testing.assert_allclose(native.fn(xv, grad, native.user_data), lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)


def test_runtime_errors_propagate(cache_dir):
    """A model's errors and a wrong grad_out raise from the call, from Python and njit."""
    f, _ = _model(DATA.copy())
    native = native_logp_grad(f)
    with pytest.raises(ValueError, match="grad_out"):
        native.fn(X, np.empty(2), native.user_data)
    with pytest.raises(IndexError, match="out of bounds"):  # x too short for the index
        call_twice(native.fn, native.user_data, X[:2].copy())
    # An error the generated code raises with kiln_raise(code): error() names it.
    x = kt.vector("x")
    lp = -0.5 * kt.sum((x - kt.shared(np.array([1.0, 2.0, 3.0]))) ** 2)
    g = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    other = native_logp_grad(g)
    short = np.array([1.0, 2.0])
    with pytest.raises(KilnRuntimeError) as info:
        call_twice(other.fn, other.user_data, short)
    err = other.error(info.value)
    with pytest.raises(type(err)) as expected:
        g(short)
    assert str(err) == str(expected.value)
    assert type(err) is not KilnRuntimeError
    plain = ValueError("x")
    assert other.error(plain) is plain


def test_new_process_loads_the_wrapper_from_the_cache(tmp_path):
    """The second process compiles nothing: the wrapper's machine code is a cache hit."""
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        import kiln, kiln.tensor as kt
        from kiln_numba import native_logp_grad

        x = kt.vector("x")
        y = kt.shared(np.array([0.5, 1.5, -0.25]), name="y")
        w = kt.constant(np.array([[1.0, 2.0], [3.0, 4.0]]))
        idx = kt.constant(np.array([1, 0], dtype="int64"))
        lp = -0.5 * kt.sum((y - x[0]) ** 2) + kt.sum(kt.dot(w, x[idx]))
        f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=kiln.FAST_RUN.with_linker("numba"))
        native = native_logp_grad(f)
        stats = native.fn.stats
        grad = np.empty(2)
        lp = native.fn(np.array([0.3, -0.1]), grad, native.user_data)
        print(json.dumps({
            "cache": native.stage2["cache"],
            "module": native.stage2["module"],
            "hits": sum(stats.cache_hits.values()),
            "misses": sum(stats.cache_misses.values()),
            "kiln_fn_compiled": len(f.thunk.jit_fn.overloads),
            "lp": lp, "grad": grad.tolist(),
            "ref": [float(f(np.array([0.3, -0.1]))[0])],
        }))
        """
    )
    # Numba's cache (the shared-library load is test_shared_library's).
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_FLAGS="shared_library=false")

    def run() -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first = run()
    assert (first["cache"], first["hits"], first["misses"]) == ("miss", 0, 1)
    assert Path(first["module"]).is_relative_to(tmp_path)
    second = run()
    assert (second["cache"], second["hits"], second["misses"]) == ("hit", 1, 0)
    assert second["kiln_fn_compiled"] == 0  # the model's function was not compiled either
    assert second["module"] == first["module"]
    assert second["lp"] == first["lp"] == pytest.approx(first["ref"][0], rel=1e-13)
    assert second["grad"] == first["grad"]


def test_uncached_wrapper_compiles_in_memory(cache_dir):
    with config.change(cache=False):
        f, _ = _model(DATA.copy())
        native = native_logp_grad(f)
    assert native.stage2["module"] == "in memory"
    assert native.stage2["cache"] == "disabled"
    _check(native, f, X, DATA)


def test_object_mode_model_gets_an_in_memory_wrapper(cache_dir):
    x = kt.vector("x")
    h = PerformOnly()(x)
    lp = kt.sum(h) + kt.sum(x**2)
    g = kiln.grad(kt.sum(x**2), x) * 1.0 + 0.0 * x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = kiln.function([x], [lp, g], mode=NUMBA)
        native = native_logp_grad(f)
    assert native.stage2["cache"] == "uncacheable"
    xv = np.array([1.0, -2.0])
    grad = np.empty(2)
    lp_ref, g_ref = f(xv)
    np.testing.assert_allclose(native.fn(xv, grad, native.user_data), lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)


def test_bad_functions_are_clear_errors(cache_dir):
    x = kt.vector("x")
    lp = -0.5 * kt.sum(x**2)
    g = kiln.grad(lp, x)
    vm = kiln.function([x], [lp, g], mode=kiln.FAST_RUN.with_linker("vm"))
    with pytest.raises(KilnTypeError, match="Numba linker.*got a Function linked by 'vm'"):
        native_logp_grad(vm)
    with pytest.raises(KilnTypeError, match="Numba linker"):
        native_logp_grad(lambda x: x)
    with pytest.raises(KilnTypeError, match="got 1 outputs"):
        native_logp_grad(kiln.function([x], [lp], mode=NUMBA))
    with pytest.raises(KilnTypeError, match="got 1 outputs"):
        native_logp_grad(kiln.function([x], lp, mode=NUMBA))
    with pytest.raises(KilnTypeError, match="for grad"):
        native_logp_grad(kiln.function([x], [lp, lp], mode=NUMBA))
    with pytest.raises(KilnTypeError, match="for logp"):
        native_logp_grad(kiln.function([x], [g, g], mode=NUMBA))
    y = kt.vector("y")
    with pytest.raises(KilnTypeError, match="got 2 inputs"):
        native_logp_grad(kiln.function([x, y], [lp, g], mode=NUMBA))
    m = kt.matrix("m")
    lpm = kt.sum(m**2)
    with pytest.raises(KilnTypeError, match="got the input"):
        native_logp_grad(kiln.function([m], [lpm, kt.sum(m, axis=0)], mode=NUMBA))
    x32 = kt.vector("x32", dtype="float32")
    lp32 = kt.sum(x32**2)
    with pytest.raises(KilnTypeError, match="got the input"):
        native_logp_grad(kiln.function([x32], [lp32, x32 * 2], mode=NUMBA))
    s = kt.shared(np.array(0.0), name="s")
    with pytest.raises(KilnTypeError, match="updates"):
        native_logp_grad(kiln.function([x], [lp, g], mode=NUMBA, updates={s: s + 1.0}))


def test_refresh_rejects_a_value_of_another_dtype(cache_dir):
    f, y = _model(DATA.copy())
    native = native_logp_grad(f)
    y._value = np.arange(3)  # bypassing the type's filter
    with pytest.raises(KilnTypeError, match="expected a 1-d float64 array"):
        native.refresh()


def test_the_wrapper_holds_the_graph_code_so_the_function_itself_is_not_compiled(cache_dir):
    """Only the wrapper is compiled: the model's statements are written into it."""
    f, _ = _model(DATA)
    native = native_logp_grad(f)
    assert not f.thunk.jit_fn.overloads  # kiln_fn never compiled on its own
    assert "kiln_fn(" not in Path(native.stage2["module"]).read_text()
    grad = np.empty(3)
    logp = native.fn(X, grad, native.user_data)
    lp_ref, g_ref = _reference(X, DATA)
    np.testing.assert_allclose(logp, lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)
