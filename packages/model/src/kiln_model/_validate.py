"""Checks of a model's input at build time, and the diagnosis of a failed initial point.

Everything here runs before anything is compiled (except :func:`check_initial_point`,
which runs after a sampler found no finite start): parameters given as constants are
checked against their distribution's constraints, observed data and ``kl.Data`` against
non-finite values and the parameters they depend on, ``set_data`` against the coords.
Every error names the variable (or argument), what it received and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kiln_graph import Constant, KilnValueError, Program, Variable
from kiln_model._errors import ModelError
from kiln_random import constraint_names, evaluate_constraint, show_value

if TYPE_CHECKING:
    from kiln_model._model import Model

#: A check of constant values: ``(names of the draw op's parameters, predicate, what
#: it expects)``; the predicate takes the values in that order (and the observed value
#: first, for an observed check) and returns a boolean (array).
Check = tuple[tuple[str, ...], Callable[..., Any], str]

#: At most this many nodes are evaluated to find the value of a constant expression
#: (``kt.cast(-1)``, ``kt.sigmoid(3.0)``, a softmax of a constant vector).
_MAX_NODES = 64


def constant_value(x: Any) -> np.ndarray | None:
    """Return the value of ``x`` when it is a small expression of constants, else None.

    Plain Python and NumPy values are their own value; a graph variable of at most
    ``_MAX_NODES`` nodes whose roots are all constants is run by the reference
    interpreter (:class:`kiln_graph.Program`).
    """
    if not isinstance(x, Variable):
        try:
            arr = np.asarray(x)
        except Exception:  # noqa: BLE001 (not array-like: nothing to check)
            return None
        return arr if arr.dtype.kind in "biuf" else None
    if isinstance(x, Constant):
        return np.asarray(x.data)
    if not _small_constant_graph(x):
        return None
    try:
        with np.errstate(all="ignore"):
            (value,) = Program([], [x])([])
    except Exception:  # noqa: BLE001 (left to the compiled function to report)
        return None
    return np.asarray(value)


def _small_constant_graph(x: Variable) -> bool:
    """Whether ``x`` has at most ``_MAX_NODES`` nodes above it, all rooted in constants.

    Walks up from ``x`` and stops at the first root that is not a constant (a random
    variable, Data, an input) or past ``_MAX_NODES`` nodes: a parameter that depends
    on a long chain of variables costs a few steps, not the whole chain.
    """
    nodes: set[Any] = set()
    stack = [x]
    while stack:
        v = stack.pop()
        if v.owner is None:
            if not isinstance(v, Constant):
                return False
        elif v.owner not in nodes:
            nodes.add(v.owner)
            if len(nodes) > _MAX_NODES:
                return False
            stack.extend(v.owner.inputs)
    return True


def _op_params(rv: Variable) -> dict[str, Any]:
    node = rv.owner
    names = getattr(node.op, "params", ()) if node is not None else ()
    return dict(zip(names, node.inputs[2:], strict=False)) if node is not None else {}


def op_checks(op: Any) -> list[Check]:
    """Return the constraints a draw op declares (``op.constraints``) as checks."""
    out: list[Check] = []
    for expr, description in getattr(op, "constraints", ()):
        names = constraint_names(expr)
        out.append((names, _evaluator(expr, names), description))
    return out


def check_constants(what: str, params: Mapping[str, Any], checks: Sequence[Check]) -> None:
    """Raise when parameters in ``params`` that are constants break one of ``checks``.

    ``params`` maps parameter names to values or graph variables; a parameter that is
    not a constant (a random variable, Data) is left to the log-density at run time.
    The message is ``"{what}: {the check's description}, got name=value"``.
    """
    folded: dict[str, np.ndarray | None] = {}

    def value(p: str) -> np.ndarray | None:
        if p not in folded:
            folded[p] = constant_value(params[p]) if params.get(p) is not None else None
        return folded[p]

    for names, predicate, description in checks:
        values = [value(p) for p in names]
        if any(v is None for v in values):
            continue
        with np.errstate(all="ignore"):
            ok = bool(np.all(predicate(*values)))
        if not ok:
            shown = ", ".join(f"{p}={show_value(v)}" for p, v in zip(names, values, strict=True))
            raise KilnValueError(f"{what}: {description}, got {shown}")
    for p, v in params.items():
        arr = value(p) if v is not None else None
        if arr is not None and arr.dtype.kind == "f" and np.isnan(arr).any():
            raise KilnValueError(f"{what}: parameter {p!r} holds NaN, got {p}={show_value(arr)}")


def check_draw_parameters(rv: Variable) -> None:
    """Raise when constant parameters of the draw ``rv`` break its op's constraints.

    The op checks parameters that are constants when the draw is built; this also sees
    constant expressions (an int parameter cast to float, a sigmoid of a constant).
    """
    node = rv.owner
    if node is not None:
        check_constants(getattr(node.op, "name", ""), _op_params(rv), op_checks(node.op))


def _evaluator(expr: str, names: tuple[str, ...]) -> Callable[..., Any]:
    def evaluate(*values: Any) -> Any:
        return evaluate_constraint(expr, dict(zip(names, values, strict=True)))

    return evaluate


def check_finite(what: str, value: np.ndarray, hint: str) -> None:
    """Raise when the float array ``value`` holds NaN or an infinity (``what`` names it)."""
    if value.dtype.kind != "f":
        return
    bad = ~np.isfinite(value)
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    first = value[index] if index else value
    kind = "NaN" if np.isnan(value).any() else "an infinite value"
    where = f" at index {index}" if index else ""
    raise KilnValueError(
        f"{what}: expected finite values, but the data holds {kind} ({int(bad.sum())} of "
        f"{value.size} values not finite; first {first}{where}); {hint}"
    )


def check_observed_values(
    name: str, rv: Variable, value: np.ndarray, checks: Sequence[Check]
) -> None:
    """Raise when observed ``value`` contradicts constant parameters (Binomial k > n...)."""
    params = _op_params(rv)
    for names, predicate, description in checks:
        values = [constant_value(params[p]) if p in params else None for p in names]
        if any(v is None for v in values):
            continue
        with np.errstate(all="ignore"):
            try:
                ok = np.broadcast_to(predicate(value, *values), np.shape(value))
            except ValueError:
                continue  # shapes that do not broadcast: the shape checks report it
        if not ok.all():
            index = tuple(int(i) for i in np.argwhere(~ok)[0])
            shown = ", ".join(f"{p}={show_value(v)}" for p, v in zip(names, values, strict=True))
            raise KilnValueError(
                f"{name}: {description}; the observed value {show_value(value[index])} at index "
                f"{index} is not ({shown})"
            )


def check_data_lengths(model: Model, new: Mapping[str, np.ndarray]) -> None:
    """Raise when new Data values contradict the lengths of their dims.

    A dim given in the model's coords has a fixed length; Data set together along one
    dim must agree on its length.
    """
    seen: dict[str, tuple[str, int]] = {}
    for full, arr in new.items():
        dims = model.named_dims.get(full)
        if not dims:
            continue
        for axis, d in enumerate(dims):
            if axis >= arr.ndim:
                break
            n = int(arr.shape[axis])
            fixed = model.dim_lengths.get(d)
            if isinstance(fixed, int | np.integer) and int(fixed) != n:
                raise ModelError(
                    f"set_data: {full!r} has length {n} along dim {d!r} (axis {axis}), but "
                    f"dim {d!r} has {fixed} labels in the model's coords, which fix its "
                    f"length; give data of length {fixed}, or to let the length change "
                    f"leave {d!r} out of coords= (a dim named only by Data dims takes its "
                    "length from the data)"
                )
            if d in seen and seen[d][1] != n:
                raise ModelError(
                    f"set_data: {full!r} has length {n} along dim {d!r}, but "
                    f"{seen[d][0]!r} has {seen[d][1]}; Data along one dim must have the "
                    "same length"
                )
            seen.setdefault(d, (full, n))


def check_initial_point(model: Model, point: Mapping[str, Any] | None = None) -> None:
    """Raise a :class:`ModelError` naming the variables whose log-density is not finite.

    ``point`` maps value-variable names to unconstrained values (default: the model's
    initial point). Returns None when every term is finite. The message lists each
    variable's term (as :meth:`Model.point_logps` gives them), the values tried, and
    what to check.

    Examples
    --------
    >>> import kiln_model as km
    >>> with km.Model() as m:
    ...     x = km.Normal("x", 0, 1)
    ...     km.Potential("never", -np.inf * (x * 0 + 1))  # doctest: +SKIP
    >>> check_initial_point(m)  # doctest: +SKIP
    Traceback (most recent call last):
    ModelError: the log-density is not finite at the initial point: Potential 'never' ...
    """
    logps = model.point_logps(point)
    bad = {n: v for n, v in logps.items() if not np.isfinite(v)}
    if not bad:
        return
    start = point if point is not None else model.initial_point()
    parts = []
    for n, v in bad.items():
        kind = "Potential" if n in model.potentials else "variable"
        parts.append(f"{kind} {n!r} has log-density {v}")
    shown = ", ".join(f"{k}={show_value(v)}" for k, v in start.items())
    hints = []
    if any(n in model.potentials for n in bad):
        hints.append("make the Potential finite where the sampler starts")
    if any(n in model.variables and model.variables[n].observed for n in bad):
        hints.append(
            "check the observed data against the distribution's support and its parameters"
        )
    if any(n in model.variables and not model.variables[n].observed for n in bad):
        hints.append(
            "check the parameters of the free variables named, or give them initval=... "
            "inside their support"
        )
    advice = "; ".join(hints)
    raise ModelError(
        f"the log-density is not finite at the initial point: {'; '.join(parts)}. "
        f"{advice[:1].upper()}{advice[1:]}. The point (unconstrained values): {shown}"
    )


__all__ = [
    "Check",
    "check_data_lengths",
    "check_finite",
    "check_initial_point",
    "check_constants",
    "check_draw_parameters",
    "check_observed_values",
    "op_checks",
    "constant_value",
]
