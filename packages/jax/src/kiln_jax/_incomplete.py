"""JAX derivatives of the regularized incomplete gamma and beta functions in their parameters.

``d/da P(a, x)`` is JAX's ``lax.igamma_grad_a``. JAX has no primitive for the
derivatives of ``I_x(a, b)``: :func:`betainc_da` and :func:`betainc_db` run the forward
recurrence of the continued fraction of ``I_x(a, b)`` with the recurrences of its
derivatives, as ``kiln_graph._incomplete`` does in NumPy (the VM's reference, with the
same special values), in a ``lax.while_loop`` over the whole array that stops when every
element has converged (at most 20,000 terms).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

_TOL = 1e-16
_MAX_TERMS = 20_000
_BIG = 2.0**500
#: B_2k / 2k: the coefficients of digamma's asymptotic series (in 1 / x**2k).
_PSI_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def gammainc_da(a: Any, x: Any) -> Any:
    """Return d/da P(a, x), NaN where the parameter is not positive and finite."""
    a, x = jnp.broadcast_arrays(a, x)
    ok = (a > 0) & (a < jnp.inf) & (x >= 0)
    safe_x = jnp.where((x > 0) & (x < jnp.inf), x, 1.0)
    safe_a = jnp.where(ok, a, 1.0)
    d = jax.lax.igamma_grad_a(safe_a, safe_x)
    d = jnp.where((x == 0) | (x == jnp.inf), 0.0, d)
    return jnp.where(ok, d, jnp.nan)


def gammaincc_da(a: Any, x: Any) -> Any:
    """Return d/da Q(a, x) = -d/da P(a, x)."""
    return -gammainc_da(a, x)


def digamma_diff(x: Any, h: Any) -> Any:
    """Return digamma(x + h) - digamma(x) without cancellation (shift above 10, asymptotics)."""
    out = jnp.zeros_like(x)
    for _ in range(10):
        low = x < 10.0
        out = out + jnp.where(low, h / (x * (x + h)), 0.0)
        x = jnp.where(low, x + 1.0, x)
    log_ratio = jnp.log1p(h / x)
    out = out + log_ratio + h / (2.0 * x * (x + h))
    inv2 = 1.0 / (x * x)
    power = jnp.ones_like(x)
    for k, c in enumerate(_PSI_ASYMPTOTIC, start=1):
        power = power * inv2
        out = out - c * power * jnp.expm1(-2.0 * k * log_ratio)
    return out


def _fraction_dlog(a: Any, b: Any, x: Any) -> tuple[Any, Any]:
    """Return (d/da I, d/db I) / I from the fraction of I_x(a, b) (x < (a+1)/(a+b+2))."""
    zero = jnp.zeros_like(a)
    one = jnp.ones_like(a)
    inf = jnp.full_like(a, jnp.inf)
    # A_{n-1}, A_n, B_{n-1}, B_n and their derivatives in a and b
    state = (1, one, one, zero, one, zero, zero, zero, zero, zero, zero, zero, zero)
    carry = (*state, inf, inf, inf, zero, zero, jnp.zeros(a.shape, bool))

    def cond(c: tuple[Any, ...]) -> Any:
        return (c[0] <= _MAX_TERMS) & ~jnp.all(c[-1])

    def body(c: tuple[Any, ...]) -> tuple[Any, ...]:
        n, ap, ac, bp, bc, daap, daac, dabp, dabc, dbap, dbac, dbbp, dbbc = c[:13]
        v_last, la_last, lb_last, res_a, res_b, done = c[13:]
        m = n // 2
        odd = n % 2 == 1
        den_o = (a + 2 * m) * (a + 2 * m + 1)
        d_o = -(a + m) * (a + b + m) * x / den_o
        den_e = (a + 2 * m - 1) * (a + 2 * m)
        d_e = m * (b - m) * x / den_e
        d = jnp.where(odd, d_o, d_e)
        d_a = jnp.where(
            odd,
            -(2 * a + b + 2 * m) * x / den_o - d_o * (2 * a + 4 * m + 1) / den_o,
            -d_e * (2 * a + 4 * m - 1) / den_e,
        )
        d_b = jnp.where(odd, -(a + m) * x / den_o, m * x / den_e)
        an, bn = ac + d * ap, bc + d * bp
        daan = daac + d_a * ap + d * daap
        dabn = dabc + d_b * ap + d * dabp
        dban = dbac + d_a * bp + d * dbap
        dbbn = dbbc + d_b * bp + d * dbbp
        vals = [ac, an, bc, bn, daac, daan, dabc, dabn, dbac, dban, dbbc, dbbn]
        scale = jnp.maximum(jnp.abs(an), jnp.abs(bn))
        s = jnp.where(scale > _BIG, 1.0 / scale, 1.0)
        vals = [v * s for v in vals]
        ap, ac, bp, bc, daap, daac, dabp, dabc, dbap, dbac, dbbp, dbbc = vals
        value = ac / bc
        la = daac / ac - dbac / bc
        lb = dabc / ac - dbbc / bc
        conv = (
            (jnp.abs(value - v_last) <= _TOL * jnp.abs(value))
            & (jnp.abs(la - la_last) <= _TOL * jnp.abs(la))
            & (jnp.abs(lb - lb_last) <= _TOL * jnp.abs(lb))
        ) | ~jnp.isfinite(value)
        conv = conv | (n == _MAX_TERMS)
        new = conv & ~done
        res_a = jnp.where(new, la, res_a)
        res_b = jnp.where(new, lb, res_b)
        return (n + 1, *vals, value, la, lb, res_a, res_b, done | conv)

    out = jax.lax.while_loop(cond, body, carry)
    return (
        jnp.log(x) + digamma_diff(a + 1.0, b - 1.0) - out[-3],
        jnp.log1p(-x) + digamma_diff(b, a) - out[-2],
    )


def betainc_dab(a: Any, b: Any, x: Any) -> tuple[Any, Any]:
    """Return (d/da, d/db) of I_x(a, b) (``kiln_graph._incomplete.betainc_dab``)."""
    a, b, x = jnp.broadcast_arrays(a, b, x)
    params = (a > 0) & (a < jnp.inf) & (b > 0) & (b < jnp.inf)
    inside = params & (x > 0) & (x < 1)
    edge = params & ((x == 0) | (x == 1))
    lower = x * (a + b + 2.0) < a + 1.0
    # The fraction runs on the side where it converges: (a, b, x) or (b, a, 1 - x).
    p = jnp.where(inside, jnp.where(lower, a, b), 1.0)
    q = jnp.where(inside, jnp.where(lower, b, a), 1.0)
    y = jnp.where(inside, jnp.where(lower, x, 1.0 - x), 0.5)
    value = jsp.betainc(p, q, y)
    lp, lq = _fraction_dlog(p, q, y)
    sign = jnp.where(lower, 1.0, -1.0)
    da = sign * value * jnp.where(lower, lp, lq)
    db = sign * value * jnp.where(lower, lq, lp)
    da = jnp.where(inside, da, jnp.where(edge, 0.0, jnp.nan))
    db = jnp.where(inside, db, jnp.where(edge, 0.0, jnp.nan))
    return da, db


def betainc_da(a: Any, b: Any, x: Any) -> Any:
    """Return d/da I_x(a, b)."""
    return betainc_dab(a, b, x)[0]


def betainc_db(a: Any, b: Any, x: Any) -> Any:
    """Return d/db I_x(a, b)."""
    return betainc_dab(a, b, x)[1]
