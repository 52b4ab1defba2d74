"""``Model.debug``: name the variables whose log-density, gradient or draws are not finite.

``fn="logp"`` evaluates each term of the joint log-density at a point (the terms of
:meth:`Model.point_logps`) and, for each one that is not finite, the variable's value
and parameters there: which parameters break their distribution's constraints, whether
the value lies outside the support, and the first entry where the term fails.
``fn="dlogp"`` does the same for the gradient, ``fn="random"`` for forward draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kiln_compile import function
from kiln_graph import KilnValueError, Variable, graph_replace
from kiln_graph import tensor as kt
from kiln_model._compiled import compile_point_function
from kiln_model._logprob import build_logp
from kiln_model._validate import op_checks
from kiln_random import RandomVariable, show_value
from kiln_rewrite import stable_grad

if TYPE_CHECKING:
    from kiln_model._model import Model, VariableInfo

#: What ``Model.debug`` can evaluate.
DEBUG_FNS = ("logp", "dlogp", "random")


def debug_model(
    model: Model, point: Mapping[str, Any] | None = None, fn: str = "logp", verbose: bool = False
) -> dict[str, str]:
    """Print and return ``{name: why}`` for each term of ``model`` that is not finite.

    See :meth:`Model.debug`.
    """
    if fn not in DEBUG_FNS:
        raise KilnValueError(f"debug: fn: expected one of {list(DEBUG_FNS)}, got {fn!r}")
    lines: list[str] = []
    if fn == "random":
        problems = _debug_random(model, lines, verbose)
    else:
        start = dict(point) if point is not None else model.initial_point()
        lines.append(f"point (unconstrained values): {_show_point(start)}")
        if fn == "logp":
            problems = _debug_logp(model, start, lines, verbose)
        else:
            problems = _debug_dlogp(model, start, lines, verbose)
    if problems:
        lines += [f"{name}: {why}" for name, why in problems.items()]
    else:
        what = {"logp": "log-density term", "dlogp": "gradient", "random": "draw"}[fn]
        lines.append(f"every {what} is finite")
    print("\n".join(lines))
    return problems


def _show_point(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={show_value(np.asarray(v))}" for k, v in point.items())


def _debug_logp(
    model: Model, point: dict[str, Any], lines: list[str], verbose: bool
) -> dict[str, str]:
    logps = model.point_logps(point, round_vals=8)
    if verbose:
        lines += [f"  log-density of {n}: {v}" for n, v in logps.items()]
    graph = build_logp(model)
    problems = {}
    for name, total in logps.items():
        if np.isfinite(total):
            continue
        term = graph.terms[name]
        if name in graph.jacobians:
            term = term + graph.jacobians[name]
        if name in model.potentials:
            (value,) = compile_point_function(model, [kt.as_tensor(term)], mode="FAST_COMPILE")(
                point
            )
            problems[name] = f"the Potential is {total}{_first_bad(np.asarray(value), {})}"
            continue
        info = model.variables[name]
        value = graph.replace[info.rv]
        params = [graph_replace(p, graph.replace, strict=False) for p in info.params]
        outputs = [kt.as_tensor(x) for x in [value, term, *params]]
        value_v, term_v, *param_v = compile_point_function(model, outputs, mode="FAST_COMPILE")(
            point
        )
        kind = "observed" if info.observed else "free"
        head = f"its log-density is {total} ({kind}, {_dist_name(info)})"
        problems[name] = head + _explain(info, np.asarray(value_v), np.asarray(term_v), param_v)
    return problems


def _debug_dlogp(
    model: Model, point: dict[str, Any], lines: list[str], verbose: bool
) -> dict[str, str]:
    free = model.free_variables
    if not free:
        raise KilnValueError("debug: the model has no free variables: it has no gradient")
    _, grads = stable_grad(build_logp(model).total(), model.value_vars)
    values = compile_point_function(model, list(grads), mode="FAST_COMPILE")(point)
    values = values if isinstance(values, list) else [values]
    problems = {}
    for info, g in zip(free, values, strict=True):
        arr = np.asarray(g)
        if verbose:
            lines.append(f"  gradient for {info.value.name}: {show_value(arr)}")
        if not np.all(np.isfinite(arr)):
            value = np.asarray(point[str(info.value.name)])
            problems[info.name] = (
                f"the gradient of the log-density with respect to {info.value.name!r} is not "
                f"finite{_first_bad(arr, {'value': value})}"
            )
    return problems


def _debug_random(model: Model, lines: list[str], verbose: bool) -> dict[str, str]:
    infos = list(model.variables.values())
    outputs: list[Variable] = []
    for info in infos:
        outputs += [info.rv, *info.params]
    dets = list(model.deterministics.items())
    outputs += [d for _, d in dets]
    if not outputs:
        raise KilnValueError("debug: the model has no variables to draw")
    try:
        values = function([], [kt.as_tensor(o) for o in outputs], mode="FAST_COMPILE")()
    except KilnValueError as exc:  # a draw op refused its parameters
        return _failing_draw(infos, exc)
    values = values if isinstance(values, list) else [values]
    problems = {}
    k = 0
    for info in infos:
        draw, *params = values[k : k + 1 + len(info.params)]
        k += 1 + len(info.params)
        draw = np.asarray(draw)
        if verbose:
            lines.append(f"  draw of {info.name}: {show_value(draw)}")
        if not _finite(draw):
            head = f"its forward draw is not finite ({_dist_name(info)})"
            problems[info.name] = head + _explain(info, draw, None, params)
    for (name, _), value in zip(dets, values[k:], strict=True):
        arr = np.asarray(value)
        if verbose:
            lines.append(f"  value of {name}: {show_value(arr)}")
        if not _finite(arr):
            problems[name] = f"the Deterministic is not finite at the draws{_first_bad(arr, {})}"
    return problems


def _failing_draw(infos: list[VariableInfo], error: Exception) -> dict[str, str]:
    """Return the first variable, in model order, whose draw refuses its parameters."""
    for info in infos:
        params = [kt.as_tensor(p) for p in info.params]
        try:
            function([], [*params, kt.as_tensor(info.rv)], mode="FAST_COMPILE")()
        except KilnValueError as exc:
            reason = str(exc).splitlines()[0]
            try:
                values = function([], params, mode="FAST_COMPILE")() if params else []
            except KilnValueError:
                continue  # an earlier draw fails: reported when its turn comes
            values = values if isinstance(values, list) else [values]
            head = f"its forward draw fails ({_dist_name(info)}: {reason})"
            return {info.name: head + _explain(info, None, None, values)}
    return {"draws": f"a forward draw fails: {str(error).splitlines()[0]}"}


def _finite(x: np.ndarray) -> bool:
    return x.dtype.kind not in "fc" or bool(np.all(np.isfinite(x)))


def _dist_name(info: VariableInfo) -> str:
    dist = info.distribution
    return getattr(dist, "__name__", type(dist).__name__)


def _param_names(info: VariableInfo) -> list[str]:
    """Return the names of ``info.params``: the draw op's, the distribution's, or numbers."""
    node = info.rv.owner
    if node is not None and isinstance(node.op, RandomVariable):
        if list(node.inputs[2:]) == list(info.params):
            return list(getattr(node.op, "params", ()))[: len(info.params)] or _numbered(info)
    names = getattr(info.distribution, "params", None)
    if isinstance(names, Sequence) and len(names) == len(info.params):
        return [str(n) for n in names]
    return _numbered(info)


def _numbered(info: VariableInfo) -> list[str]:
    return [f"parameter {i}" for i in range(len(info.params))]


def _explain(
    info: VariableInfo,
    value: np.ndarray | None,
    term: np.ndarray | None,
    params: list[Any],
) -> str:
    """Say why ``info``'s term (or draw) fails: constraints, support, the first bad entry."""
    names = _param_names(info)
    values = {n: np.asarray(v) for n, v in zip(names, params, strict=False)}
    reasons = [
        f"parameter {n} is not finite ({show_value(v)})"
        for n, v in values.items()
        if not _finite(v)
    ]
    node = info.rv.owner
    if (
        node is not None
        and isinstance(node.op, RandomVariable)
        and names == list(getattr(node.op, "params", ()))[: len(names)]
    ):
        for check_names, predicate, description in op_checks(node.op):
            if not all(c in values for c in check_names):
                continue
            with np.errstate(all="ignore"):
                ok = np.all(predicate(*[values[c] for c in check_names]))
            if not ok:
                shown = ", ".join(f"{c}={show_value(values[c])}" for c in check_names)
                reasons.append(f"the parameters break a constraint: {description} ({shown})")
    check = getattr(info.distribution, "check_observed", None)
    if term is not None and value is not None and check is not None:
        try:
            check(info.name, value)
        except KilnValueError as exc:
            reasons.append(f"the value lies outside the support ({exc})")
    text = "; " + "; ".join(reasons) if reasons else ""
    if value is None:
        return text
    bad = term if term is not None else value
    return text + _first_bad(bad, {"value": value, **values})


def _first_bad(x: np.ndarray, shown: Mapping[str, np.ndarray]) -> str:
    """Say where ``x`` is first not finite, with ``shown`` at that entry (where they fit)."""
    if x.ndim == 0 or x.dtype.kind not in "fc":
        at = {k: show_value(v) for k, v in shown.items() if np.ndim(v) == 0}
        return f"; at {_kv(at)}" if at else ""
    bad = ~np.isfinite(x)
    if not bad.any():
        return ""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    at = {}
    for k, v in shown.items():
        try:
            at[k] = show_value(np.broadcast_to(v, x.shape)[index])
        except ValueError:
            continue  # a parameter that does not broadcast elementwise (a core dimension)
    where = f", first at index {index}" + (f": {_kv(at)}" if at else "")
    return f"; not finite at {int(bad.sum())} of {x.size} entries{where}"


def _kv(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


__all__ = ["DEBUG_FNS", "debug_model"]
