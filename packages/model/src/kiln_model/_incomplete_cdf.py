"""Logs of the regularized incomplete gamma and beta functions, accurate in both tails.

Each takes the log of the function where it is below 1/2 and ``log1p(-complement)``
above, so that a CDF near 1 keeps its digits (``log(1 - 1e-12)`` is not 0). The branch a
switch does not select is computed at a stand-in value (1/2), so that its gradient,
multiplied by 0, stays finite (0 * inf would be NaN).
"""

from __future__ import annotations

from typing import Any

from kiln_graph import TensorVariable
from kiln_graph import tensor as kt


def _log_of_smaller(value: Any, complement: Any) -> TensorVariable:
    """Return ``log(value)`` given ``value`` and ``complement = 1 - value``, both accurate."""
    small = value < 0.5
    return kt.switch(
        small,
        kt.log(kt.switch(small, value, 0.5)),
        kt.log1p(-kt.switch(small, 0.5, complement)),
    )


def log_gammainc(a: Any, x: Any) -> TensorVariable:
    """Return ``log P(a, x)``, the log of the regularized lower incomplete gamma function."""
    return _log_of_smaller(kt.gammainc(a, x), kt.gammaincc(a, x))


def log_gammaincc(a: Any, x: Any) -> TensorVariable:
    """Return ``log Q(a, x)``, the log of the regularized upper incomplete gamma function."""
    return _log_of_smaller(kt.gammaincc(a, x), kt.gammainc(a, x))


def log_betainc(a: Any, b: Any, x: Any, y: Any) -> TensorVariable:
    """Return ``log I_x(a, b)`` given ``x`` and ``y = 1 - x`` (each computed accurately).

    Above 1/2 it is ``log1p(-I_y(b, a))``: ``I_x(a, b) = 1 - I_{1-x}(b, a)``.
    """
    return _log_of_smaller(kt.betainc(a, b, x), kt.betainc(b, a, y))
