"""kiln_numba.native_c: a model's logp and expand as C callbacks (what nutpie calls).

The callbacks are called here through ctypes, with the C signatures of DESIGN.md. Their
values equal the Function's and the compiled model's; bad points give return codes,
never an exception (a Numba cfunc cannot raise); the expanded values come flattened in
``out_names`` order as float64; a new process (a real subprocess) loads the callbacks'
machine code without compiling anything. Where the native wrappers come from their
shared libraries, the libraries' own C functions take the callbacks' place (no Numba):
they return the same codes and values.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cfunc, types

import kiln
import kiln.tensor as kt
from kiln_compile import config
from kiln_graph import KilnTypeError
from kiln_numba import _linker, _shared_library, native_c_pointers
from kiln_numba.native_c import (
    EXPAND_C_SIGNATURE,
    LOGP_C_SIGNATURE,
    RETURN_CODES,
    NativeCPointers,
)

NUMBA = kiln.FAST_RUN.with_linker("numba")
_P = ctypes.POINTER(ctypes.c_double)
#: The ABI's two signatures, as ctypes calls them.
LOGP_C = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, _P, _P, _P, ctypes.c_void_p)
EXPAND_C = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, _P, _P, ctypes.c_void_p)


@pytest.fixture(autouse=True)
def _no_memo():
    with config.change(memo=False):
        yield


def call_logp(
    ptrs: NativeCPointers, x: np.ndarray, n: int | None = None
) -> tuple[int, float, np.ndarray]:
    """Call the logp callback as nutpie does: (code, logp, gradient)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    grad = np.full(x.shape[0], np.nan)
    lp = np.full(1, np.nan)
    code = LOGP_C(ptrs.logp_cptr)(
        x.shape[0] if n is None else n,
        x.ctypes.data_as(_P),
        grad.ctypes.data_as(_P),
        lp.ctypes.data_as(_P),
        ctypes.c_void_p(ptrs.user_data_ptr),
    )
    return code, float(lp[0]), grad


def call_expand(
    ptrs: NativeCPointers, x: np.ndarray, n_out: int | None = None
) -> tuple[int, np.ndarray]:
    """Call the expand callback as nutpie does: (code, flat float64 output)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n_out = ptrs.n_out if n_out is None else n_out
    out = np.full(n_out, np.nan)
    assert ptrs.expand_cptr is not None
    code = EXPAND_C(ptrs.expand_cptr)(
        x.shape[0],
        n_out,
        x.ctypes.data_as(_P),
        out.ctypes.data_as(_P),
        ctypes.c_void_p(ptrs.user_data_ptr),
    )
    return code, out


def _model(data: np.ndarray) -> tuple[kiln.Function, kiln.Function, object]:
    """Return logp over x = (mu, log_sigma, z0, z1) with shared data; expand with mixed dtypes."""
    x = kt.vector("x", shape=(4,))
    y = kt.shared(data, name="y")
    mu, log_sigma = x[0], x[1]
    sigma = kt.exp(log_sigma)
    lp = kt.sum(-0.5 * ((y - mu) / sigma) ** 2 - log_sigma) - 0.5 * kt.sum(x[2:] ** 2)
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    grid = kt.reshape(x, (2, 2)).T  # a non-contiguous 2-d output
    expand = kiln.function(
        [x],
        [mu, sigma, grid, kt.cast(kt.floor(x * 3.0), "int64"), x > 0.0, y - mu],
        mode=NUMBA,
    )
    return f, expand, y


DATA = np.array([0.5, 1.5, -0.25, 2.0])
X = np.array([0.3, -0.2, 0.7, -1.1])


def _expected_expand(x: np.ndarray, data: np.ndarray) -> np.ndarray:
    parts = [
        [x[0]],
        [np.exp(x[1])],
        x.reshape(2, 2).T.ravel(),
        np.floor(x * 3.0),
        (x > 0).astype(float),
        data - x[0],
    ]
    return np.concatenate([np.asarray(p, dtype=float) for p in parts])


def test_logp_and_gradient_equal_the_function(cache_dir):
    f, expand, _ = _model(DATA.copy())
    ptrs = native_c_pointers(f, expand)
    assert ptrs.stage2["cache"] == "miss"
    assert Path(ptrs.stage2["module"]).parent == Path(f.thunk.stage2["module"]).parent
    assert ptrs.ndim == 4 and ptrs.n_out == 1 + 1 + 4 + 4 + 4 + 4
    for x in (X, np.array([-1.0, 0.4, 0.0, 2.0])):
        code, lp, grad = call_logp(ptrs, x)
        lp_ref, g_ref = f(x)
        assert code == 0
        np.testing.assert_allclose(lp, lp_ref, rtol=1e-13)
        np.testing.assert_allclose(grad, g_ref, rtol=1e-13)


def test_the_compiled_model_gives_the_same_values(cache_dir):
    """Through CompiledModel: logp_dlogp and expand, in out_names order."""
    with kiln.Model(coords={"obs": range(3)}) as m:
        mu = kiln.Normal("mu", 0.0, 1.0)
        sigma = kiln.HalfNormal("sigma", 1.0)
        kiln.Deterministic("shifted", mu + kt.arange(3), dims="obs")
        kiln.Normal("y", mu, sigma, observed=np.array([0.1, -0.3, 0.8]), dims="obs")
    cm = m.logp_dlogp_function(mode=NUMBA)
    ptrs = native_c_pointers(cm.function, cm.expand_function)
    x = cm.initial_point(3)
    code, lp, grad = call_logp(ptrs, x)
    lp_ref, g_ref = cm.logp_dlogp(x)
    assert code == 0
    np.testing.assert_allclose(lp, lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)
    code, out = call_expand(ptrs, x)
    values = cm.expand(x)
    assert code == 0 and list(values) == cm.out_names == ["mu", "sigma", "shifted"]
    np.testing.assert_allclose(
        out, np.concatenate([np.ravel(v) for v in values.values()]), rtol=1e-13
    )


def test_expand_writes_every_output_flat_in_order_as_float64(cache_dir):
    f, expand, _ = _model(DATA.copy())
    ptrs = native_c_pointers(f, expand)
    code, out = call_expand(ptrs, X)
    assert code == 0 and out.dtype == np.float64
    np.testing.assert_allclose(out, _expected_expand(X, DATA), rtol=1e-13)
    # The expand wrapper itself, from Python: the same values.
    buf = np.empty(ptrs.n_out)
    assert ptrs.expand.fn(X, buf, ptrs.expand.user_data) == 0
    np.testing.assert_array_equal(buf, out)


def test_bad_points_and_lengths_are_return_codes(cache_dir):
    f, expand, y = _model(DATA.copy())
    ptrs = native_c_pointers(f, expand)
    assert call_logp(ptrs, X, n=3)[0] == -1  # n is not the model's length: fatal
    assert call_expand(ptrs, X, n_out=ptrs.n_out - 1)[0] == -1
    assert call_expand(ptrs, X, n_out=ptrs.n_out + 2)[0] == -1
    # A log-density of -inf (sigma = exp(-800) = 0): recoverable, 2.
    code, lp, _ = call_logp(ptrs, np.array([0.3, -800.0, 0.0, 0.0]))
    assert code == 2 and not np.isfinite(lp)
    # A NaN in the data makes the log-density NaN: 2 as well.
    y.set_value(np.array([np.nan, 1.0, 2.0, 3.0]))
    ptrs.refresh()
    assert call_logp(ptrs, X)[0] == 2


def test_a_raising_model_is_code_1_not_a_crash(cache_dir):
    """An error raised by the model's code (here Numba's own) becomes 1; in expand, -2."""
    x = kt.vector("x", shape=(2,))
    a = kt.shared(np.ones(3), name="a")
    b = kt.shared(np.ones(3), name="b")
    lp = -0.5 * kt.sum(x**2) + kt.sum(a * b)
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    expand = kiln.function([x], [x * 2.0, a * b], mode=NUMBA)
    ptrs = native_c_pointers(f, expand)
    xv = np.array([0.5, -1.0])
    assert call_logp(ptrs, xv)[0] == 0
    b.set_value(np.ones(4))  # a * b: shapes (3,) and (4,) do not broadcast
    ptrs.refresh()
    with pytest.raises(ValueError):  # the Function raises an error...
        f(xv)
    assert call_logp(ptrs, xv)[0] == 1  # ...the callback returns a code
    assert call_expand(ptrs, xv, n_out=5)[0] == -2


def test_a_non_finite_gradient_is_code_3(cache_dir):
    x = kt.vector("x", shape=(2,))
    lp = kt.sum(kt.sqrt(kt.abs(x)))  # finite at 0, its gradient is not
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    ptrs = native_c_pointers(f, kiln.function([x], [x], mode=NUMBA))
    assert call_logp(ptrs, np.array([1.0, 2.0]))[0] == 0
    code, lp_value, _ = call_logp(ptrs, np.array([0.0, 2.0]))
    assert code == 3 and np.isfinite(lp_value)


def test_an_exception_escaping_a_cfunc_is_not_an_error_code(monkeypatch):
    """Why the callbacks catch everything: Numba's cfunc reports and returns garbage."""
    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: seen.append(info.exc_value))

    @cfunc(LOGP_C_SIGNATURE)
    def raw(n, x_, grad_, logp_, user_data_):  # pragma: no cover (compiled)
        if n > 0:
            raise ValueError("a bad point")
        return 7

    grad, lp, x = np.zeros(1), np.zeros(1), np.zeros(1)
    code = raw.ctypes(1, x.ctypes.data_as(_P), grad.ctypes.data_as(_P), lp.ctypes.data_as(_P), None)
    assert code != 7  # not the function's value: whatever the return slot held (0: "ok")
    assert len(seen) == 1 and isinstance(seen[0], ValueError)  # "Exception ignored in ..."
    assert EXPAND_C_SIGNATURE.return_type == types.intc


def _coded_model() -> tuple[kiln.Function, kiln.Function, dict[str, object]]:
    """Return a model giving every return code at some point, and its shared values."""
    x = kt.vector("x", shape=(3,))
    a = kt.shared(np.ones(3), name="a")
    b = kt.shared(np.ones(3), name="b")
    idx = kt.shared(np.array([0, 2]), name="idx")
    lp = -0.5 * kt.sum(x[idx] ** 2) + kt.sum(kt.sqrt(kt.abs(x))) + kt.sum(a * b) - kt.exp(x[1])
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=NUMBA)
    expand = kiln.function([x], [x * 2.0, a * b, x[idx]], mode=NUMBA)
    return f, expand, {"a": a, "b": b, "idx": idx}


def _codes(ptrs: NativeCPointers, shared: dict) -> list[tuple]:
    """Every code (and the values at the good points) of the model of :func:`_coded_model`."""
    good = np.array([0.5, -1.0, 2.0])
    got: list[tuple] = [call_logp(ptrs, good), call_expand(ptrs, good)]
    got.append(call_logp(ptrs, good, n=2)[:1])  # n: fatal
    got.append(call_expand(ptrs, good, n_out=ptrs.n_out + 1)[:1])  # n_out: fatal
    got.append(call_logp(ptrs, np.array([0.5, 800.0, 2.0]))[:2])  # logp -inf
    got.append(call_logp(ptrs, np.array([0.0, -1.0, 2.0]))[:2])  # sqrt'(0): grad inf
    shared["idx"].set_value(np.array([0, 7]))  # out of bounds: kiln's IndexError
    ptrs.refresh()
    got += [call_logp(ptrs, good)[:1], call_expand(ptrs, good)[:1]]
    shared["idx"].set_value(np.array([0, 2]))
    shared["b"].set_value(np.ones(4))  # a * b: (3,) and (4,) do not broadcast (Numba's)
    ptrs.refresh()
    got += [call_logp(ptrs, good)[:1], call_expand(ptrs, good, n_out=ptrs.n_out)[:1]]
    shared["b"].set_value(np.ones(3))
    ptrs.refresh()
    return [tuple(np.asarray(v).tolist() for v in entry) for entry in got]


@pytest.mark.skipif(
    not (
        sys.platform == "linux"
        and platform.machine() == "x86_64"
        and shutil.which("cc")
        and shutil.which("nm")
    ),
    reason="shared libraries are built on Linux x86-64 with cc and nm",
)
def _as_a_new_process() -> None:
    """Forget the generated modules and mapped libraries, as a new process starts without."""
    for name in [n for n in sys.modules if n.startswith(("kiln_numba_gen_", "kiln_numba_native"))]:
        del sys.modules[name]
    _linker._shared_loaded.clear()


def test_the_libraries_functions_return_what_the_callbacks_return(cache_dir, monkeypatch):
    """One model, every code: the cfuncs, the libraries built now, then mapped later."""
    monkeypatch.setattr(config, "shared_library", False)
    f, expand, shared = _coded_model()
    callbacks = native_c_pointers(f, expand)
    assert len(callbacks.callbacks) == 2 and callbacks.stage2["module"] != "shared library"
    from_callbacks = _codes(callbacks, shared)
    monkeypatch.setattr(config, "shared_library", True)
    # A process that finds the wrappers in Numba's cache builds their libraries at once,
    # with the ABI's C functions, instead of compiling callbacks.
    _as_a_new_process()
    f, expand, shared = _coded_model()
    built = native_c_pointers(f, expand)
    assert built.callbacks == () and built.stage2["module"] == "shared library"
    assert built.logp.stage2["library"] == built.expand.stage2["library"] == "built now"
    assert all(c.abi is None for _, _, c in _shared_library._queue)  # no wrapper for the exit
    from_built = _codes(built, shared)
    # A later process maps them: the wrappers and the generated code come from them.
    _as_a_new_process()
    f, expand, shared = _coded_model()
    library = native_c_pointers(f, expand)
    assert library.callbacks == () and library.stage2["module"] == "shared library"
    assert "library" not in library.logp.stage2
    assert library.logp.fn.abi_address == library.logp_cptr
    assert library.expand.fn.abi_address == library.expand_cptr
    from_library = _codes(library, shared)
    assert from_built == from_library == from_callbacks  # codes and values, to the bit
    codes = [entry[0] for entry in from_library]
    assert codes == [0, 0, -1, -1, 2, 3, 1, -2, 1, -2]
    assert set(codes) == set(RETURN_CODES)


def test_refresh_follows_set_value(cache_dir):
    f, expand, y = _model(DATA.copy())
    ptrs = native_c_pointers(f, expand)
    header = ptrs.user_data_ptr
    other = np.array([2.0, -1.0, 0.5, 0.25])
    y.set_value(other)
    assert ptrs.refresh() == header  # the same header, updated in place
    code, lp, grad = call_logp(ptrs, X)
    lp_ref, g_ref = f(X)
    assert code == 0
    np.testing.assert_allclose(lp, lp_ref, rtol=1e-13)
    np.testing.assert_allclose(grad, g_ref, rtol=1e-13)
    np.testing.assert_allclose(call_expand(ptrs, X)[1], _expected_expand(X, other), rtol=1e-13)


def test_bad_functions_are_clear_errors(cache_dir):
    x = kt.vector("x", shape=(2,))
    lp = -0.5 * kt.sum(x**2)
    g = kiln.grad(lp, x)
    f = kiln.function([x], [lp, g], mode=NUMBA)
    vm = kiln.function([x], [x], mode=kiln.FAST_RUN.with_linker("vm"))
    with pytest.raises(KilnTypeError, match="native_expand expects.*linked by 'vm'"):
        native_c_pointers(f, vm)
    with pytest.raises(KilnTypeError, match="native_logp_grad expects"):
        native_c_pointers(vm, f)
    c = kiln.function([x], [kt.cast(x, "complex128")], mode=NUMBA)
    with pytest.raises(KilnTypeError, match="for output 0"):
        native_c_pointers(f, c)
    free = kt.vector("x")
    lp2 = -0.5 * kt.sum(free**2)
    f2 = kiln.function([free], [lp2, kiln.grad(lp2, free)], mode=NUMBA)
    with pytest.raises(KilnTypeError, match="no static length"):
        native_c_pointers(f2, kiln.function([free], [free], mode=NUMBA))


SCRIPT = textwrap.dedent(
    """
    import ctypes, json, time
    import numpy as np
    import numba.core.compiler as compiler
    compiles = []
    real = compiler.compile_extra
    def counting(*args, **kwargs):
        compiles.append(1)
        return real(*args, **kwargs)
    compiler.compile_extra = counting  # every Numba compile (njit or cfunc) goes here

    import kiln, kiln.tensor as kt
    from kiln_numba import native_c_pointers

    start = time.perf_counter()
    x = kt.vector("x", shape=(2,))
    y = kt.shared(np.array([0.5, 1.5, -0.25]), name="y")
    lp = -0.5 * kt.sum((y - x[0]) ** 2) - 0.5 * x[1] ** 2
    mode = kiln.FAST_RUN.with_linker("numba")
    f = kiln.function([x], [lp, kiln.grad(lp, x)], mode=mode)
    e = kiln.function([x], [x[0] + y, kt.exp(x[1])], mode=mode)
    ptrs = native_c_pointers(f, e)
    P = ctypes.POINTER(ctypes.c_double)
    xv = np.array([0.3, -0.1]); grad = np.zeros(2); out = np.zeros(1); flat = np.zeros(4)
    ud = ctypes.c_void_p(ptrs.user_data_ptr)
    code = ptrs.callbacks[0].ctypes(2, xv.ctypes.data_as(P), grad.ctypes.data_as(P),
                                    out.ctypes.data_as(P), ud)
    ecode = ptrs.callbacks[1].ctypes(2, 4, xv.ctypes.data_as(P), flat.ctypes.data_as(P), ud)
    assert [c.address for c in ptrs.callbacks] == [ptrs.logp_cptr, ptrs.expand_cptr]
    print(json.dumps({
        "cache": ptrs.stage2["cache"], "module": ptrs.stage2["module"],
        "wrappers": [ptrs.logp.stage2["cache"], ptrs.expand.stage2["cache"]],
        "compiles": len(compiles), "seconds": time.perf_counter() - start,
        "codes": [code, ecode], "lp": out[0], "grad": grad.tolist(), "expand": flat.tolist(),
    }))
    """
)


def test_new_process_loads_the_callbacks_without_compiling(tmp_path):
    """The second process runs no Numba compile at all (no LLVM): everything is a hit."""
    # The callbacks' own cache (with shared libraries the second process needs none).
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_FLAGS="shared_library=false")

    def run() -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first = run()
    assert first["cache"] == "miss" and first["compiles"] > 0
    assert Path(first["module"]).is_relative_to(tmp_path)
    second = run()
    assert second["cache"] == "hit" and second["wrappers"] == ["hit", "hit"]
    assert second["compiles"] == 0, second
    assert second["module"] == first["module"]
    assert second["codes"] == first["codes"] == [0, 0]
    assert second["lp"] == first["lp"] and second["grad"] == first["grad"]
    assert second["expand"] == first["expand"]
    print(f"cold {first['seconds']:.2f} s, warm {second['seconds']:.2f} s")
