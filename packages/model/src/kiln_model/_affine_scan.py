"""The affine recursion ``s_t = a_t s_{t-1} + c_t`` solved without a loop (a doubling scan).

AR and GARCH draws, and the GARCH variances given an observed path, are affine in
their state, so kiln draws and scores them on every backend without a scan op.
"""

from __future__ import annotations

from typing import Any

from kiln_graph import KilnValueError, TensorVariable
from kiln_graph import tensor as kt
from kiln_model._series import _along


def affine_scan(a: Any, c: Any, s0: Any, matrix: bool = False) -> TensorVariable:
    """Return ``s_1..s_n`` of ``s_t = a_t s_{t-1} + c_t`` (time: the axis before the core).

    Scalar (``matrix=False``): ``a``, ``c`` are ``(..., n)`` and ``s0`` is ``(...)``.
    Matrix: ``a`` is ``(..., n, p, p)``, ``c`` ``(..., n, p)``, ``s0`` ``(..., p)``.
    Each doubling round composes every step's affine map with the one ``d`` steps
    earlier (Hillis-Steele prefix scan), so ``ceil(log2 n)`` rounds of vectorized
    products give every prefix; the products are those of the sequential recursion.
    """
    a_t, c_t = kt.as_tensor(a), kt.as_tensor(c)
    n = c_t.type.shape[-2 if matrix else -1]
    if n is None:
        raise KilnValueError("affine_scan: the time axis needs a static length")
    ka, kc = (2, 1) if matrix else (0, 0)

    def compose(later: Any, earlier: Any) -> Any:
        return kt.matmul(later, earlier) if matrix else later * earlier

    def apply(m: Any, v: Any) -> Any:
        return kt.matmul(m, v[..., None])[..., 0] if matrix else m * v

    d = 1
    while d < n:
        late_a = _along(a_t, slice(d, None), ka)
        a_next = compose(late_a, _along(a_t, slice(None, -d), ka))
        c_next = apply(late_a, _along(c_t, slice(None, -d), kc)) + _along(c_t, slice(d, None), kc)
        a_t = kt.concatenate([_along(a_t, slice(None, d), ka), a_next], axis=-1 - ka)
        c_t = kt.concatenate([_along(c_t, slice(None, d), kc), c_next], axis=-1 - kc)
        d *= 2
    s0_t = kt.as_tensor(s0)
    return apply(a_t, s0_t[..., None, :] if matrix else s0_t[..., None]) + c_t
