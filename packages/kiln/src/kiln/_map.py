"""``kl.find_MAP``: the mode of a model's posterior density, by ``scipy.optimize.minimize``.

The model's log-density without the log-Jacobians of its transforms (the density of
the constrained values, whose mode this is) is maximized over the flat vector of
unconstrained values of the compiled model (``model.logp_dlogp_function``), with its
compiled gradient. The result maps each free variable (constrained, and on its
sampling scale where transformed) and each deterministic to its value at the mode.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kiln._sampling import _mode
from kiln_compile import function
from kiln_graph import KilnTypeError, KilnValueError, Variable, graph_replace
from kiln_graph import tensor as kt
from kiln_model import CompiledModel, Model, VariableInfo, modelcontext
from kiln_samplers import progress_bar

__all__ = ["find_MAP"]

#: scipy.optimize.minimize's methods that use no gradient (the others are given one).
GRADIENT_FREE = frozenset({"nelder-mead", "powell", "cobyla", "cobyqa"})


class _Stop(Exception):
    """Raised inside the objective when ``maxeval`` evaluations are spent."""


def find_MAP(  # noqa: N802  (PyMC's name)
    start: Mapping[str, Any] | None = None,
    vars: Sequence[Any] | None = None,  # noqa: A002  (PyMC's name)
    method: str = "L-BFGS-B",
    model: Model | None = None,
    seed: Any = None,
    progressbar: bool = True,
    maxeval: int = 5000,
    return_raw: bool = False,
    include_transformed: bool = True,
    *,
    backend: str | None = None,
    compile_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, np.ndarray] | tuple[dict[str, np.ndarray], Any]:
    """Return the maximum a posteriori point of ``model`` (the one of the ``with`` block).

    Parameters
    ----------
    start
        Starting values: ``{variable name: constrained value}`` or ``{value name:
        unconstrained value}`` (``"sigma_log__"``); the others start at the model's
        initial point (support points, ``initval``). A previous result may be passed.
    vars
        The free variables (or their names) to optimize; the others stay at ``start``
        (default: all of them).
    method
        A method of ``scipy.optimize.minimize``. The gradient-based ones get the
        compiled gradient; discrete free variables need a gradient-free one
        (``"Powell"``, ``"Nelder-Mead"``).
    seed
        Jitters the starting point by Uniform(-1, 1) on the unconstrained scale when
        given (None: no jitter).
    progressbar
        Show the number of evaluations of the log-density and its current value.
    maxeval
        The most evaluations of the log-density; the best point so far is returned
        (with a warning) when they are spent.
    return_raw
        Return ``(point, scipy's OptimizeResult)`` instead of the point alone.
    include_transformed
        Include the values on the sampling scale (``"sigma_log__"``) too.
    backend, compile_kwargs
        As for :func:`kiln.sample` (default: the default backend).
    **kwargs
        Passed to ``scipy.optimize.minimize`` (e.g. ``options=``, ``tol=``).

    Returns
    -------
    ``{name: value}``: the free variables' constrained values (and unconstrained where
    transformed, with ``include_transformed``) and the deterministics, at the mode.

    Examples
    --------
    >>> with kl.Model():  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 10)
    ...     kl.Normal("y", mu, 1, observed=[0.5, 1.5])
    ...     kl.find_MAP()["mu"]
    """
    m = modelcontext(model)
    if not isinstance(method, str):
        raise KilnTypeError(f"method: expected the name of a scipy.optimize method, got {method!r}")
    for flag, value in [
        ("progressbar", progressbar),
        ("return_raw", return_raw),
        ("include_transformed", include_transformed),
    ]:
        if not isinstance(value, bool):
            raise KilnTypeError(f"{flag}: expected a bool, got {type(value).__name__}")
    if isinstance(maxeval, bool) or not isinstance(maxeval, int | np.integer) or maxeval < 1:
        raise KilnValueError(f"maxeval: expected a positive int, got {maxeval!r}")
    chosen = _chosen(m, vars)
    discrete = [i.name for i in m.free_variables if np.dtype(i.rv.dtype).kind in "iub"]
    uses_gradient = method.lower() not in GRADIENT_FREE
    if discrete and uses_gradient:
        raise KilnValueError(
            f"find_MAP: the free variables {discrete} are discrete and method={method!r} "
            "needs a gradient; pass method='Powell' (or 'Nelder-Mead'), or marginalize them out"
        )
    compiled = m.logp_dlogp_function(
        mode=_mode(backend, compile_kwargs), jacobian=False, jitter=False, discrete=bool(discrete)
    )
    x0 = _start(m, compiled, start)
    if seed is not None:
        noise = np.random.default_rng(seed).uniform(-1.0, 1.0, size=x0.shape)
        x0 = x0 + np.where(compiled.discrete_mask, 0.0, noise)
    index = np.concatenate(
        [np.arange(compiled.ndim)[b.slice] for b in compiled.layout if b.name in chosen]
        + [np.zeros(0, dtype=int)]
    )
    x_opt, raw = _minimize(compiled, x0, index, method, uses_gradient, progressbar, maxeval, kwargs)
    point = _result(compiled, x_opt, include_transformed)
    return (point, raw) if return_raw else point


def _chosen(m: Model, vars: Sequence[Any] | None) -> set[str]:  # noqa: A002
    """Return the value names of the free variables ``vars`` (default: all)."""
    free = {i.name: i for i in m.free_variables}
    if not free:
        raise KilnValueError("find_MAP: the model has no free variables")
    if vars is None:
        return {str(i.value.name) for i in free.values()}
    items = [vars] if isinstance(vars, Variable | str) else list(vars)
    if not items:
        raise KilnValueError("vars: no variables to optimize")
    by_rv = {i.rv: i for i in free.values()}
    out = set()
    for v in items:
        info = free.get(v) if isinstance(v, str) else by_rv.get(v)
        if info is None:
            raise KilnValueError(
                f"vars: {v!r} is not a free variable of the model; free variables: {list(free)}"
            )
        out.add(str(info.value.name))
    return out


def _start(m: Model, compiled: CompiledModel, start: Mapping[str, Any] | None) -> np.ndarray:
    """Return the flat unconstrained starting vector: the initial point, with ``start``."""
    x0 = compiled.initial_point()
    if start is None:
        return x0
    if not isinstance(start, Mapping):
        raise KilnTypeError(f"start: expected a dict of values, got {type(start).__name__}")
    free = m.free_variables
    value_names = {str(i.value.name) for i in free}
    constrained_given = {i.name for i in free if i.name in start}
    unknown = [
        k
        for k in start
        if k not in value_names and k not in m.named_dims  # results' extras
    ]
    if unknown:
        raise KilnValueError(
            f"start: {unknown} are not variables of the model; free variables: "
            f"{[i.name for i in free]} (or their value names {sorted(value_names)})"
        )
    point = compiled.array_to_point(x0)
    if constrained_given:
        current = compiled.expand(x0)
        constrained = {i.name: np.asarray(current[i.name]) for i in free}
        for name in constrained_given:
            constrained[name] = np.asarray(start[name])
        point.update(_unconstrained(free, constrained))
    for name in value_names & set(start):
        point[name] = np.asarray(start[name], dtype="float64")
    try:
        return compiled.point_to_array(
            {b.name: np.broadcast_to(point[b.name], b.shape) for b in compiled.layout}
        )
    except ValueError as exc:
        raise KilnValueError(f"start: a value does not fit its variable's shape ({exc})") from exc


def _unconstrained(free: list[VariableInfo], values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Return ``{value name: unconstrained value}`` of constrained ``values`` of ``free``."""
    inputs = {i.name: kt.tensor(i.name, dtype=i.rv.dtype, shape=(None,) * i.rv.ndim) for i in free}
    replace: dict[Variable, Variable] = {i.rv: inputs[i.name] for i in free}
    outputs = []
    for i in free:
        y = inputs[i.name] if i.transform is None else i.transform.forward(inputs[i.name])
        outputs.append(kt.as_tensor(graph_replace(kt.as_tensor(y), replace, strict=False)))
    f = function(list(inputs.values()), outputs, mode="FAST_COMPILE")
    args = [np.asarray(values[i.name], dtype=i.rv.dtype) for i in free]
    out = f(*args)
    out = out if isinstance(out, list) else [out]
    return {str(i.value.name): np.asarray(v) for i, v in zip(free, out, strict=True)}


def _minimize(
    compiled: CompiledModel,
    x0: np.ndarray,
    index: np.ndarray,
    method: str,
    uses_gradient: bool,
    progressbar: bool,
    maxeval: int,
    kwargs: dict[str, Any],
) -> tuple[np.ndarray, Any]:
    """Minimize ``-logp`` over the entries ``index`` of the flat vector from ``x0``."""
    from scipy import optimize  # a quarter of `import kiln`'s time, so on use

    best: dict[str, Any] = {"x": x0.copy(), "logp": -np.inf}
    evaluations = 0

    def full(z: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[index] = z
        return x

    def track(x: np.ndarray, logp: float) -> None:
        nonlocal evaluations
        evaluations += 1
        if logp > best["logp"]:
            best["x"], best["logp"] = x, logp
        bar.update()
        bar.set_postfix(logp=f"{best['logp']:.4g}", refresh=False)
        if evaluations >= maxeval:
            raise _Stop

    def with_gradient(z: np.ndarray) -> tuple[float, np.ndarray]:
        x = full(z)
        logp, grad = compiled.logp_dlogp(x)
        track(x, logp)
        return -logp, -grad[index]

    def without_gradient(z: np.ndarray) -> float:
        x = full(z)
        logp = compiled.logp(x)
        track(x, logp)
        return -logp

    raw: Any = None
    with progress_bar(maxeval, "find_MAP", enabled=progressbar) as bar:
        try:
            if uses_gradient:
                raw = optimize.minimize(with_gradient, x0[index], jac=True, method=method, **kwargs)
            else:
                raw = optimize.minimize(without_gradient, x0[index], method=method, **kwargs)
        except _Stop:
            warnings.warn(
                f"find_MAP: stopped after maxeval={maxeval} evaluations of the log-density; "
                "the best point so far is returned (raise maxeval, or check the model)",
                UserWarning,
                stacklevel=3,
            )
    if raw is not None and np.isfinite(raw.fun) and -raw.fun >= best["logp"]:
        return full(raw.x), raw
    if raw is None:
        raw = optimize.OptimizeResult(
            x=best["x"][index],
            fun=-best["logp"],
            success=False,
            message=f"stopped after maxeval={maxeval} evaluations",
            nfev=evaluations,
        )
    return best["x"], raw


def _result(compiled: CompiledModel, x: np.ndarray, include_transformed: bool) -> dict[str, Any]:
    """Return the point of ``x``: transformed values, constrained values, deterministics."""
    out: dict[str, Any] = {}
    constrained = compiled.expand(x)
    if include_transformed:
        for name, value in compiled.array_to_point(x).items():
            if name not in constrained:
                out[name] = value
    out.update(constrained)
    return out
