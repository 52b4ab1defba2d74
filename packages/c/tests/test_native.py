"""The native log-density ABI on the C backend: ``int logp(n, x, grad, logp, user_data)``."""

from __future__ import annotations

import ctypes
import warnings

import numpy as np
import pytest

import kiln as kl
import kiln_compile as kc
from kiln_c import FallbackWarning
from kiln_graph import Apply, Op

LOGP = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)
EXPAND = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_size_t,
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


def _model() -> kl.Model:
    with kl.Model() as m:
        data = kl.Data("data", np.array([0.5, -1.0, 2.0]))
        mu = kl.Normal("mu", 0.0, 5.0)
        tau = kl.HalfCauchy("tau", 5.0)
        z = kl.Normal("z", 0.0, 1.0, shape=3)
        kl.Deterministic("theta", mu + tau * z)
        kl.Normal("y", mu + tau * z, 2.0, observed=data)
    return m


def _call_logp(native: kc.NativeModel, x: np.ndarray) -> tuple[int, float, np.ndarray]:
    grad = np.empty(native.n)
    out = ctypes.c_double()
    code = LOGP(native.logp_cptr)(
        native.n, x.ctypes.data, grad.ctypes.data, ctypes.addressof(out), native.user_data_ptr
    )
    return code, out.value, grad


def test_logp_and_expand_through_the_abi_match_the_function() -> None:
    """The C entry points give the compiled function's log-density, gradient and values."""
    model = _model()
    compiled = model.logp_dlogp_function(mode=kc.Mode(linker="c"))
    native = kc.native_model(compiled.function, compiled.expand_function)
    assert native.linker == "c" and native.expand_cptr
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(size=native.n)
        code, logp, grad = _call_logp(native, x)
        expected_logp, expected_grad = compiled.logp_dlogp(x)
        assert code == 0
        assert logp == pytest.approx(float(expected_logp), rel=1e-14)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-14)
        values = np.empty(native.n_out)
        assert (
            EXPAND(native.expand_cptr)(
                native.n, native.n_out, x.ctypes.data, values.ctypes.data, native.user_data_ptr
            )
            == 0
        )
        flat = np.concatenate([np.ravel(v) for v in compiled.expand_function(x)]).astype(float)
        np.testing.assert_allclose(values, flat, rtol=1e-14)


def test_refresh_reads_new_data() -> None:
    """After ``set_data``, ``refresh`` points the native functions at the new values."""
    model = _model()
    compiled = model.logp_dlogp_function(mode=kc.Mode(linker="c"))
    native = kc.native_model(compiled.function)
    x = np.zeros(native.n) + 0.3
    before = _call_logp(native, x)[1]
    with model:
        kl.set_data({"data": np.array([3.0, 3.0, 3.0])})
    native.refresh()
    code, after, _ = _call_logp(native, x)
    assert code == 0 and after != before
    assert after == pytest.approx(float(compiled.logp_dlogp(x)[0]), rel=1e-14)


def test_wrong_length_is_a_fatal_code() -> None:
    """A point of another length: a negative code that ``describe`` explains."""
    compiled = _model().logp_dlogp_function(mode=kc.Mode(linker="c"))
    native = kc.native_model(compiled.function)
    x = np.zeros(native.n + 1)
    grad = np.empty(native.n + 1)
    out = ctypes.c_double()
    code = LOGP(native.logp_cptr)(
        native.n + 1, x.ctypes.data, grad.ctypes.data, ctypes.addressof(out), native.user_data_ptr
    )
    assert code < 0
    assert "wrong length" in native.describe(code)


class _Halve(Op):
    """An Op with no C code (defined here): its node runs through ``perform``."""

    def make_node(self, x: object) -> Apply:
        x = kl.tensor.as_tensor(x)
        return Apply.create(self, [x], [x.type])

    def perform(self, node: Apply, inputs: list, outputs: list) -> None:
        outputs[0] = inputs[0] / 2

    def grad(self, inputs: list, output_grads: list) -> list:
        return [output_grads[0] / 2]


def test_an_op_in_python_makes_the_abi_unavailable() -> None:
    """A graph that calls back into Python cannot be a native function: a clear error."""
    x = kl.tensor.vector("x", shape=(4,))
    a = kl.tensor.reshape(x, (2, 2))
    logp = kl.tensor.sum(kl.tensor.exp(_Halve()(a)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        f = kc.function([x], [logp, kl.tensor.grad(logp, x)], mode=kc.Mode(linker="c"))
    with pytest.raises(kc.NativeUnavailable, match="_Halve"):
        kc.native_model(f)


def test_a_matrix_lapack_rejects_is_a_recoverable_status() -> None:
    """A covariance that is not positive definite at ``x``: a code > 0 (a divergence)."""
    from kiln_graph import tensor as kt

    with kl.Model() as m:
        rho = kl.Normal("rho", 0.0, 1.0)
        cov = kt.stack([kt.stack([1.0, rho]), kt.stack([rho, 1.0])])
        kl.MvNormal("y", mu=np.zeros(2), cov=cov, observed=np.array([0.1, -0.2]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        compiled = m.logp_dlogp_function(mode=kc.Mode(linker="c"))
    native = kc.native_model(compiled.function, compiled.expand_function)
    code, logp, grad = _call_logp(native, np.array([0.3]))
    expected_logp, expected_grad = compiled.logp_dlogp(np.array([0.3]))
    assert code == 0
    assert logp == pytest.approx(float(expected_logp), rel=1e-13)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    code, _, _ = _call_logp(native, np.array([1.5]))
    assert code > 0
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        compiled.logp_dlogp(np.array([1.5]))
