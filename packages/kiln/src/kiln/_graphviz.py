"""``kl.model_to_graphviz``: a model's variables and their dependencies as a Graphviz graph.

Nodes, as in PyMC: free variables are ellipses, observed ones filled ellipses,
deterministics boxes, potentials octagons and Data rounded filled boxes; each is
labelled ``name ~ distribution``. Variables of the same (non-scalar) shape share a
plate (a cluster) labelled with their dims and lengths. An edge runs from each model
variable to the variables whose graphs use it, found by walking each variable's graph
back to the first model variables on every path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kiln_compile import function
from kiln_graph import KilnTypeError, KilnValueError, SharedVariable, Variable, infer_shape
from kiln_graph import tensor as kt
from kiln_model import Model, modelcontext

__all__ = ["model_to_graphviz"]

_STYLE = {
    "free": {"shape": "ellipse"},
    "observed": {"shape": "ellipse", "style": "filled", "fillcolor": "gray"},
    "deterministic": {"shape": "box"},
    "potential": {"shape": "octagon"},
    "data": {"shape": "box", "style": "rounded, filled"},
}


def _import_graphviz() -> Any:
    try:
        import graphviz  # optional: only this function needs it
    except ImportError as exc:
        raise ImportError(
            "kl.model_to_graphviz needs the Python package graphviz: pip install graphviz "
            "(or pip install 'kiln[graphviz]'); rendering also needs Graphviz's dot program"
        ) from exc
    return graphviz


def _nodes(m: Model) -> dict[str, tuple[Variable, str, str]]:
    """Return ``{name: (variable, kind, label)}`` of every variable of the model."""
    nodes: dict[str, tuple[Variable, str, str]] = {}
    for name, data in m.data.items():
        nodes[name] = (data, "data", f"{name}\n~\nData")
    for info in m.variables.values():
        dist = getattr(info.distribution, "__name__", type(info.distribution).__name__)
        kind = "observed" if info.observed else "free"
        nodes[info.name] = (info.rv, kind, f"{info.name}\n~\n{dist}")
    for name, var in m.deterministics.items():
        nodes[name] = (var, "deterministic", f"{name}\n~\nDeterministic")
    for name, var in m.potentials.items():
        nodes[name] = (var, "potential", f"{name}\n~\nPotential")
    return nodes


def _parents(m: Model, nodes: dict[str, tuple[Variable, str, str]]) -> dict[str, list[str]]:
    """Return each variable's parents: the first model variables on its graph's paths."""
    names: dict[Variable, str] = {}
    for name, (var, kind, _) in nodes.items():
        if kind != "potential":
            names.setdefault(var, name)  # a Deterministic of a bare draw keeps the draw's name
    parents: dict[str, list[str]] = {}
    for name, (var, kind, _) in nodes.items():
        found: dict[str, None] = {}
        if names.get(var) not in (None, name):
            found[names[var]] = None  # the deterministic is the draw itself
        elif var.owner is not None:
            stack = list(var.owner.inputs)
            seen: set[Variable] = set()
            while stack:
                v = stack.pop()
                if v in seen:
                    continue
                seen.add(v)
                if v in names and names[v] != name:
                    found[names[v]] = None
                elif v.owner is not None:
                    stack.extend(v.owner.inputs)
        if kind == "observed":
            data = m.variables[name].value
            if data in names:
                found[names[data]] = None
        parents[name] = [p for p in nodes if p in found]
    return parents


def _shapes(nodes: dict[str, tuple[Variable, str, str]]) -> dict[str, tuple[int, ...]]:
    """Return each variable's shape (static where known, else evaluated from shape inference)."""
    shapes: dict[str, tuple[int, ...]] = {}
    unknown: list[str] = []
    for name, (var, _, _) in nodes.items():
        if isinstance(var, SharedVariable):
            shapes[name] = tuple(np.shape(var.get_value(borrow=True)))  # type: ignore[attr-defined]
            continue
        static = tuple(getattr(var.type, "shape", ()))
        if None in static:
            unknown.append(name)
        else:
            shapes[name] = static  # type: ignore[assignment]
    if unknown:
        exprs = [kt.stack(list(infer_shape(nodes[n][0]))) for n in unknown]
        values = function([], exprs, mode="FAST_COMPILE")()
        values = values if isinstance(values, list) else [values]
        for name, value in zip(unknown, values, strict=True):
            shapes[name] = tuple(int(s) for s in np.asarray(value))
    return shapes


def _node_id(name: str) -> str:
    """Return a node name without ``:`` (Graphviz reads ``a:b`` as node ``a``, port ``b``)."""
    return name.replace(":", "&")


def _plate_label(m: Model, name: str, shape: tuple[int, ...]) -> str:
    dims = m.named_dims.get(name)
    if dims is not None and len(dims) == len(shape):
        return " x ".join(f"{d} ({n})" for d, n in zip(dims, shape, strict=True))
    return " x ".join(str(n) for n in shape)


def model_to_graphviz(
    model: Model | None = None,
    var_names: Sequence[str] | None = None,
    formatting: str = "plain",
) -> Any:
    """Return the graph of ``model``'s variables as a ``graphviz.Digraph`` (PyMC's layout).

    Parameters
    ----------
    model
        The model (default: the one of the ``with`` block).
    var_names
        Draw only these variables and the model variables they depend on (default: all).
    formatting
        ``"plain"`` (the only format kiln draws).

    Returns
    -------
    A ``graphviz.Digraph``: render it with ``.render()`` or show it in a notebook
    (Graphviz's ``dot`` program must be installed to render). Needs the Python package
    ``graphviz`` (``pip install graphviz``).

    Examples
    --------
    >>> with kl.Model() as m:  # doctest: +SKIP
    ...     mu = kl.Normal("mu", 0, 1)
    ...     kl.Normal("y", mu, 1, observed=[0.1, 0.2])
    >>> print(kl.model_to_graphviz(m).source)  # doctest: +SKIP
    """
    graphviz = _import_graphviz()
    if formatting != "plain":
        raise KilnValueError(f"formatting: kiln draws 'plain' only, got {formatting!r}")
    m = modelcontext(model)
    nodes = _nodes(m)
    parents = _parents(m, nodes)
    if var_names is not None:
        wanted = [var_names] if isinstance(var_names, str) else list(var_names)
        if not all(isinstance(n, str) for n in wanted):
            raise KilnTypeError(f"var_names: expected variable names, got {var_names!r}")
        unknown = [n for n in wanted if n not in nodes]
        if unknown:
            raise KilnValueError(
                f"var_names: {unknown} are not variables of the model: {list(nodes)}"
            )
        keep: set[str] = set()
        stack = list(wanted)
        while stack:
            n = stack.pop()
            if n not in keep:
                keep.add(n)
                stack.extend(parents[n])
        nodes = {n: v for n, v in nodes.items() if n in keep}
    shapes = _shapes(nodes)
    graph = graphviz.Digraph(m.name)
    plates: dict[str, list[str]] = {}
    for name in nodes:
        shape = shapes[name]
        if shape:
            plates.setdefault(_plate_label(m, name, shape), []).append(name)
        else:
            _, kind, label = nodes[name]
            graph.node(_node_id(name), label=label, **_STYLE[kind])
    for label, members in plates.items():
        with graph.subgraph(name="cluster" + label) as plate:
            plate.attr(label=label, labeljust="r", labelloc="b", style="rounded")
            for name in members:
                _, kind, node_label = nodes[name]
                plate.node(_node_id(name), label=node_label, **_STYLE[kind])
    for child in nodes:
        for parent in parents[child]:
            if parent in nodes:
                graph.edge(_node_id(parent), _node_id(child))
    return graph
