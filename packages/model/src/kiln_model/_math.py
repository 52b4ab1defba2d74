"""Numerically careful building blocks of log-densities."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph import tensor as kt

LOG_2PI = float(np.log(2.0 * np.pi))
LOG_2 = float(np.log(2.0))
LOG_PI = float(np.log(np.pi))
_SQRT_HALF = float(np.sqrt(0.5))


def bound(logp: Any, *conditions: Any) -> Any:
    """Return ``logp`` where every condition holds, else ``-inf``."""
    ok = conditions[0]
    for c in conditions[1:]:
        ok = kt.logical_and(ok, c)
    return kt.switch(ok, logp, -np.inf)


def normal_lcdf(z: Any) -> Any:
    """Return ``log Phi(z)``, accurate in both tails (erfcx in the lower tail)."""
    z = kt.as_tensor(z)
    lower = kt.log(0.5 * kt.erfcx(-z * _SQRT_HALF)) - 0.5 * z * z
    upper = kt.log1p(-0.5 * kt.erfc(z * _SQRT_HALF))
    return kt.switch(z < -1.0, lower, upper)


def log_diff_exp(a: Any, b: Any) -> Any:
    """Return ``log(exp(a) - exp(b))`` for ``a >= b``."""
    return a + kt.log1mexp(b - a)


def xlogy(x: Any, y: Any) -> Any:
    """Return ``x * log(y)``, 0 where ``x == 0`` (even if ``y == 0``)."""
    x = kt.as_tensor(x)
    return kt.switch(kt.eq(x, 0), 0.0, x * kt.log(y))


def xlog1py(x: Any, y: Any) -> Any:
    """Return ``x * log1p(y)``, 0 where ``x == 0``."""
    x = kt.as_tensor(x)
    return kt.switch(kt.eq(x, 0), 0.0, x * kt.log1p(y))
