"""The native ABI's description (NativeModel) and how a linker is asked for it."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kiln_compile as kc
from kiln_graph import KilnTypeError
from kiln_graph import tensor as kt

LOGP = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
    ctypes.POINTER(ctypes.c_double),
    ctypes.c_void_p,
)


def test_a_backend_without_the_capability_is_named_in_the_error():
    x = kt.vector("x", shape=(2,))
    logp = -0.5 * kt.sum(x**2)
    f = kc.function([x], [logp, -x], mode=kc.FAST_COMPILE.with_linker("vm"))
    assert not hasattr(kc.get_linker("vm"), "native")
    with pytest.raises(kc.NativeUnavailable, match="backend 'vm' does not provide the native ABI"):
        kc.native_model(f)
    assert issubclass(kc.NativeUnavailable, KilnTypeError)


def test_a_non_function_is_refused():
    with pytest.raises(kc.NativeUnavailable, match="expected a kiln Function, got a int"):
        kc.native_model(3)


def test_native_model_holds_a_callable_c_function_and_says_what_codes_mean():
    def logp(n, x, grad, out, user_data):
        if x[0] < 0:
            return 1
        for i in range(n):
            grad[i] = -x[i]
        out[0] = -0.5 * sum(x[i] * x[i] for i in range(n))
        return 0

    callback = LOGP(logp)
    native = kc.NativeModel(
        logp_cptr=ctypes.cast(callback, ctypes.c_void_p).value,
        expand_cptr=None,
        user_data_ptr=0,
        n=2,
        n_out=None,
        keep_alive=(callback,),
        codes={0: "ok", 1: "x[0] is negative"},
    )
    call = LOGP(native.logp_cptr)
    x, grad, out = np.array([0.5, 2.0]), np.empty(2), np.empty(1)
    as_ptr = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))  # noqa: E731
    assert call(2, as_ptr(x), as_ptr(grad), as_ptr(out), None) == 0
    np.testing.assert_array_equal(grad, -x)
    assert out[0] == -0.5 * (0.25 + 4.0)
    assert call(2, as_ptr(-x), as_ptr(grad), as_ptr(out), None) == 1
    assert native.describe(0) == "ok"
    assert native.describe(1) == "x[0] is negative (code 1)"
    assert "recover" in native.describe(7) and "fatal" in native.describe(-3)
    native.refresh()  # nothing to re-read: a no-op
    with pytest.raises(KilnTypeError, match="null pointer"):
        kc.NativeModel(0, None, 0, 2, None, ())
    with pytest.raises(KilnTypeError, match="negative length"):
        kc.NativeModel(1, None, 0, -1, None, ())
