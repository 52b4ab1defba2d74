"""Numerically careful building blocks of log-densities."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph import DimShuffle, Elemwise, Variable, graph_inputs
from kiln_graph import tensor as kt
from kiln_graph.scalar import Add, Exp, Mul, Sigmoid, TrueDivide

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
    # Each branch sees only its own side of -1, so the one a switch does not select stays
    # finite (erfcx(-z) overflows for large z, log1p(-1) for very negative z), and so does
    # its gradient: a switch's gradient multiplies the other branch's by 0, and 0 * inf
    # would be NaN. The clamps are switches with the test of the outer one, so that at
    # z == -1 the selected branch gets the whole gradient (maximum would split it).
    below = z < -1.0
    zl, zu = kt.switch(below, z, -1.0), kt.switch(below, -1.0, z)
    lower = kt.log(0.5 * kt.erfcx(-zl * _SQRT_HALF)) - 0.5 * zl * zl
    upper = kt.log1p(-0.5 * kt.erfc(zu * _SQRT_HALF))
    return kt.switch(below, lower, upper)


def log_diff_exp(a: Any, b: Any) -> Any:
    """Return ``log(exp(a) - exp(b))`` for ``a >= b``."""
    return a + kt.log1mexp(b - a)


#: From this on, :func:`log_gamma_ratio` takes Stirling's series: ``gammaln(z + k) -
#: gammaln(z)`` loses about ``1e-16 * z log z`` to cancellation (1e-10 at 1e5, 0.02 at
#: 1e12), the series' first omitted term is below ``1 / (360 z**3)`` (3e-18 at 1e5).
STIRLING_FROM = 1e5


def log_gamma_ratio(z: Any, k: Any) -> Any:
    """Return ``log Gamma(z + k) - log Gamma(z)`` for ``z > 0``, ``k >= 0``, without cancellation.

    Below :data:`STIRLING_FROM` it is the difference of ``gammaln``; above, the difference
    of Stirling's series, ``(z - 1/2) log1p(k / z) + k log(z + k) - k + 1/(12 (z + k)) -
    1/(12 z)``. Each branch reads its own clamp of
    ``z``, so the one a switch does not select is finite with a finite gradient.
    """
    big = kt.ge(z, STIRLING_FROM)
    zs, zg = kt.switch(big, z, STIRLING_FROM), kt.switch(big, 1.0, z)
    stirling = (
        (zs - 0.5) * kt.log1p(k / zs)
        + k * kt.log(zs + k)
        - k
        + (1.0 / (12.0 * (zs + k)) - 1.0 / (12.0 * zs))
    )
    return kt.switch(big, stirling, kt.gammaln(zg + k) - kt.gammaln(zg))


def _exact_log(factor: Any) -> Any:
    """Return ``log(factor)`` where ``factor`` is ``exp(z)`` or ``sigmoid(z)``, else None.

    Axes added to the factor are added to its log.
    """
    inner, expand = _expanded(factor)
    if (z := _elemwise_inputs(inner, Exp)) is not None:
        out = z[0]
    elif (z := _elemwise_inputs(inner, Sigmoid)) is not None:
        out = -kt.softplus(-z[0])
    else:
        return None
    return out if expand is None else expand(out)


def _log_split(y: Any) -> tuple[Any, Any]:
    """Return ``(log_part, rest)``: ``log(y) == log_part + log(rest)``; None where absent.

    ``log_part`` is the exact log of the factors of ``y`` that are ``exp(z)`` (``z``) or
    ``sigmoid(z)`` (``-softplus(-z)``); ``y`` may be one such factor, or a product (axes
    added to any factor, or to the whole, are kept).
    """
    base, expand = _expanded(y)
    factors = _elemwise_inputs(base, Mul) or [base]
    logs: list[Any] = []
    rest: list[Any] = []
    for factor in factors:
        exact = _exact_log(factor)
        (rest if exact is None else logs).append(factor if exact is None else exact)
    if not logs:
        return None, y
    log_part, others = logs[0], rest[0] if rest else None
    for more in logs[1:]:
        log_part = log_part + more
    for more in rest[1:]:
        others = others * more
    if expand is not None:
        log_part, others = expand(log_part), None if others is None else expand(others)
    return log_part, others


def _guarded(y: Any, unused: Any, fill: float) -> Any:
    """Return ``y``, ``fill`` where ``unused``: for ``x * log(y)`` at ``x == 0``.

    There the product is 0 whatever ``y``, but its gradient is ``0 * (1 / y)``: NaN at
    ``y == 0`` (a Poisson mean ``rate * exposure`` with an exposure of 0 and a count of
    0). Only a leaf or a product is guarded: the log of anything else may be what a
    stabilize rule rewrites (``log(sigmoid(x))``, ``log(1 + x)``).
    """
    return kt.switch(unused, fill, y) if _guardable(y) else y


def _guardable(y: Any) -> bool:
    """Whether ``y`` (axes added or not) is a leaf or a product, and not a constant.

    See :func:`_guarded`. A constant has no gradient to guard, and ``log`` of it is folded
    once at compile time; the guard's switch would make it a ``log`` per element per call
    (a Gamma likelihood's ``xlogy(shape - 1, data)``: 5x slower).
    """
    if not isinstance(y, Variable) or not graph_inputs(y):
        return False
    base = _expanded(y)[0]
    return base.owner is None or _elemwise_inputs(base, Mul) is not None


def log_of(y: Any, unused: Any = None) -> Any:
    """Return ``log(y)``, exact for each factor ``exp(z)`` or ``sigmoid(z)`` of ``y``.

    A rate given as ``exp(z)`` (times an exposure) is subnormal below ``z = -708``, where
    the gradient of ``log(exp(z))``, ``exp(z) / exp(z)``, overflows to ``inf / inf``.
    Where ``y`` has axes added (a random variable's parameter), the log is taken inside
    them, so that the stabilize phase sees ``log(softmax(x))`` too. ``unused``: where the
    caller multiplies the log by 0 (:func:`_guarded`).
    """
    log_part, rest = _log_split(y)
    if log_part is None:
        base, expand = _expanded(y)
        if expand is not None and (unused is None or not _guardable(base)):
            return expand(kt.log(base))
        return kt.log(y if unused is None else _guarded(y, unused, 1.0))
    if rest is not None:
        log_part = log_part + kt.log(rest if unused is None else _guarded(rest, unused, 1.0))
    if log_part.dtype == y.dtype or log_part.dtype.startswith("float"):
        return log_part
    return kt.cast(log_part, y.dtype)


def xlogy(x: Any, y: Any) -> Any:
    """Return ``x * log(y)`` (:func:`log_of`), 0 where ``x == 0`` (even if ``y == 0``).

    Its gradient is 0 there too, where ``y`` is a leaf or a product (:func:`_guarded`).
    """
    x = kt.as_tensor(x)
    zero = kt.eq(x, 0)
    return kt.switch(zero, 0.0, x * log_of(y, zero))


def xlog1py(x: Any, y: Any) -> Any:
    """Return ``x * log1p(y)``, 0 where ``x == 0``."""
    x = kt.as_tensor(x)
    return kt.switch(kt.eq(x, 0), 0.0, x * kt.log1p(y))


def _elemwise_inputs(x: Any, scalar_op: type) -> list[Any] | None:
    """Return the inputs of ``x``'s node if it is an ``Elemwise`` of ``scalar_op``, else None."""
    node = x.owner if isinstance(x, Variable) else None
    if (
        node is not None
        and isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, scalar_op)
    ):
        return list(node.inputs)
    return None


def _expanded(x: Any) -> tuple[Any, Any]:
    """Return ``(base, op)`` where ``x`` is ``op(base)``, a DimShuffle that only adds axes.

    Else ``(x, None)``. (A random variable's parameters reach its log-density so.)
    """
    node = x.owner if isinstance(x, Variable) else None
    if node is None or not isinstance(node.op, DimShuffle) or node.op.drop:
        return x, None
    kept = [o for o in node.op.new_order if o != "x"]
    return (node.inputs[0], node.op) if kept == list(range(node.op.input_ndim)) else (x, None)


def mean_of_dispersion_ratio(n: Any, p: Any) -> Any:
    """Return ``mu`` where ``p`` is the graph ``n / (mu + n)`` (axes added to both), else None.

    A NegativeBinomial given as ``(mu, alpha)`` reaches its log-density as ``(n, p) =
    (alpha, alpha / (mu + alpha))``; at a large ``alpha`` that ``p`` rounds to within
    1e-16 of 1, and ``n * log(p)`` (about ``-mu``) loses ``alpha * 1e-16``.
    """
    ratio_out, expand = _expanded(p)
    base = _expanded(n)[0]
    ratio = _elemwise_inputs(ratio_out, TrueDivide)
    if ratio is None or _expanded(ratio[0])[0] is not base:
        return None
    total = _elemwise_inputs(ratio[1], Add)
    if total is None or len(total) != 2 or _expanded(total[1])[0] is not base:
        return None
    mu = total[0]
    if expand is None:
        return mu
    return expand(mu) if mu.ndim == expand.input_ndim else None


def _sigmoid_input(p: Any) -> Any:
    """Return ``x`` where ``p`` is the graph ``sigmoid(x)``, else None."""
    inputs = _elemwise_inputs(p, Sigmoid)
    return None if inputs is None else inputs[0]


def log1m(p: Any) -> Any:
    """Return ``log(1 - p)``: ``log1p(-p)``, or ``-softplus(x)`` where ``p`` is ``sigmoid(x)``.

    A probability given by its logit (``logit_p=``) reaches a log-density as
    ``sigmoid(logit_p)``, which rounds to 1 above logit 37: ``log1p(-p)`` would be -inf.
    (``log(p)`` needs no such care: the stabilize phase rewrites ``log(sigmoid(x))``.)
    """
    x = _sigmoid_input(p)
    return -kt.softplus(x) if x is not None else kt.log1p(-p)


def xlog1m(x: Any, p: Any) -> Any:
    """Return ``x * log(1 - p)`` (see :func:`log1m`), 0 where ``x == 0``.

    Its gradient is 0 there too, at ``p == 1`` included (:func:`_guarded`).
    """
    x = kt.as_tensor(x)
    zero = kt.eq(x, 0)
    return kt.switch(zero, 0.0, x * log1m(_guarded(p, zero, 0.0)))
