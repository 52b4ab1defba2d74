"""The model's joint log-density as a graph of its value variables.

Variables are visited in creation order (a variable's parameters use only earlier
ones). Each draw is replaced by its value: an observed variable's data, a free
variable's value variable, mapped back to the constrained space through its
transform (whose bounds may themselves use earlier variables). Each variable then
contributes ``logp(value, *params)`` and, when transformed, the log-Jacobian.

Scalars written in a loop (``[kl.Normal(f"x{i}", 0, s) for i in range(n)]``) share
one vector term: at least ``GROUP_MIN`` (:mod:`kiln_model._vectorize`) scalar
variables of one distribution, transform and dtypes (:func:`scalar_groups`) are ONE
``logp(stack(values), *stack(params))`` (one log-Jacobian of the stacked values), so
the graph and the code compiled from it hold a few vector nodes, not thousands of
scalar ones. Each member's term is its element of that vector (diagnostics still
name the variable); only the order in which the joint sum adds the terms changes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from kiln_graph import Constant, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_graph.ops import MakeVector
from kiln_model import _vectorize
from kiln_model._vectorize import item, stack

if TYPE_CHECKING:
    from kiln_model._model import Model, VariableInfo


@dataclasses.dataclass
class TermGroup:
    """Scalar variables whose log-density is one vector term (see the module docstring).

    ``names`` are the members in creation order; ``stacked`` is the vector of their
    values (a ``MakeVector`` of the value variables of free members, which a compiled
    model replaces by one slice of its flat vector, or of the observed data); ``terms``
    the log-densities as vectors (one per part of members whose parameters stack
    alike) and ``jacobian`` the vector log-Jacobian (None: no
    transform).
    """

    names: list[str]
    stacked: TensorVariable
    terms: list[TensorVariable]
    jacobian: TensorVariable | None
    free: bool


@dataclasses.dataclass
class LogpGraph:
    """The pieces of a model's log-density, all in terms of value variables and data.

    ``constrained`` maps each free variable's name to its constrained value; ``terms``
    each variable's (and potential's) log-density term, elementwise, with the
    log-Jacobian added separately in ``jacobians``; ``deterministics`` the named
    expressions; ``replace`` maps every draw to its value; ``groups`` the scalar
    variables evaluated as one vector term (their ``terms`` are its elements).
    """

    constrained: dict[str, TensorVariable]
    terms: dict[str, TensorVariable]
    jacobians: dict[str, TensorVariable]
    deterministics: dict[str, TensorVariable]
    replace: dict[Variable, Variable]
    groups: list[TermGroup] = dataclasses.field(default_factory=list)

    def total(self, jacobian: bool = True) -> TensorVariable:
        """Return the joint log-density, a float64 scalar (see :func:`nan_is_outside`).

        A group's members add up as the sums of its vector terms, in the place of its
        first member.
        """
        group_of = {n: g for g in self.groups for n in g.names}
        parts = []
        for name, term in self.terms.items():
            g = group_of.get(name)
            if g is None:
                parts.append(kt.sum(term))
            elif g.names[0] == name:
                parts.extend(kt.sum(t) for t in g.terms)
        if jacobian:
            for name, jac in self.jacobians.items():
                g = group_of.get(name)
                if g is None:
                    parts.append(kt.sum(jac))
                elif g.names[0] == name and g.jacobian is not None:
                    parts.append(kt.sum(g.jacobian))
        total: Any = kt.constant(0.0)
        for p in parts:
            total = total + p
        return kt.as_tensor(total)

    def variable_logp(self, name: str, jacobian: bool = True) -> TensorVariable:
        """Return one variable's summed term (with its log-Jacobian when asked)."""
        total = kt.sum(self.terms[name])
        if jacobian and name in self.jacobians:
            total = total + kt.sum(self.jacobians[name])
        return total


def nan_is_outside(logp: Any) -> TensorVariable:
    """Return ``logp`` with NaN replaced by -inf.

    A NaN log-density is an indeterminate form (``inf - inf``, ``0 * inf``) at a point
    where a value or parameter overflows float64 (an infinite shape, a scale that
    underflows to 0): it has no representable density, and every backend reports it as
    outside the support. Applied to a log-density that is an output, after its
    gradient is taken: the gradient does not depend on this test.
    """
    logp = kt.as_tensor(logp)
    return kt.switch(kt.isnan(logp), -np.inf, logp)


class Substitution:
    """Replace draws by their values in graphs, one variable after another.

    ``graph_replace`` with the whole mapping costs time in its size at every call, so
    a model of ``n`` scalars would cost ``n**2``. Here the mapping only grows (a
    variable's parameters use only earlier variables, whose values are set first), so
    what was rebuilt once stays valid and is remembered: all calls together cost the
    size of the graphs they visit.
    """

    def __init__(self) -> None:
        self.replace: dict[Variable, Variable] = {}
        self._memo: dict[Variable, Variable] = {}

    def __setitem__(self, old: Variable, new: Variable) -> None:
        self.replace[old] = new
        self._memo[old] = new

    def __call__(self, x: Any) -> Any:
        """Return ``x`` with the draws set so far replaced by their values."""
        if not isinstance(x, Variable) or x.owner is None:
            return self._memo.get(x, x) if isinstance(x, Variable) else x
        memo = self._memo
        todo = [x]
        while todo:
            v = todo[-1]
            if v in memo:
                todo.pop()
                continue
            node = v.owner
            if node is None:
                memo[v] = v
                todo.pop()
                continue
            missing = [i for i in node.inputs if i not in memo]
            if missing:
                todo.extend(missing)
                continue
            todo.pop()
            new_inputs = [memo[i] for i in node.inputs]
            if all(a is b for a, b in zip(new_inputs, node.inputs, strict=True)):
                outputs = node.outputs
            else:
                outputs = node.op.make_node(*new_inputs).outputs
            for old, new in zip(node.outputs, outputs, strict=True):
                memo.setdefault(old, new)
        return memo[x]


def _transform_key(t: Any) -> tuple[Any, ...] | None:
    """Return what equal transforms share: their class and plain or constant bounds.

    None for a transform that mixes elements or holds a graph (bounds that are other
    variables): such a transform is applied to one variable at a time.
    """
    if t is None:
        return ()
    if getattr(t, "core_ndim", 1) != 0:
        return None
    attrs: list[tuple[Any, ...]] = []
    for name, v in sorted(vars(t).items()):
        if isinstance(v, Constant) and v.ndim == 0:  # type: ignore[attr-defined]
            attrs.append((name, str(v.dtype), np.asarray(v.data).item()))  # type: ignore[attr-defined]
        elif v is None or isinstance(v, int | float | str | bool):
            attrs.append((name, v))
        else:
            return None
    return (type(t), tuple(attrs))


def _group_key(info: VariableInfo) -> tuple[Any, ...] | None:
    """Return what scalar variables must share to share a vector term (None: never)."""
    dist = info.distribution
    if info.rv.ndim != 0 or info.value.ndim != 0 or not isinstance(dist, type):
        return None
    core_ndim = getattr(dist, "core_ndim", None)
    if core_ndim is None or core_ndim() != 0:
        return None
    if not all(isinstance(p, TensorVariable) and p.ndim == 0 for p in info.params):
        return None
    transform = _transform_key(None if info.observed else info.transform)
    if transform is None:
        return None
    dtypes = tuple(str(p.type.dtype) for p in info.params)  # type: ignore[attr-defined]
    return (dist, transform, info.observed, str(info.rv.dtype), str(info.value.dtype), dtypes)


def scalar_groups(model: Model) -> list[list[VariableInfo]]:
    """Return the scalar variables that share a vector term: groups of ``GROUP_MIN`` or more.

    Members share the distribution class (an elementwise density of scalar
    parameters), the transform (its class and constant bounds), observed or free,
    and the dtypes of the draw, the value and each parameter.
    """
    by_key: dict[tuple[Any, ...], list[VariableInfo]] = {}
    for info in model.variables.values():
        key = _group_key(info)
        if key is not None:
            by_key.setdefault(key, []).append(info)
    return [g for g in by_key.values() if len(g) >= _vectorize.GROUP_MIN]


def build_logp(model: Model) -> LogpGraph:
    """Return the log-density pieces of ``model`` (see :class:`LogpGraph`)."""
    sub = Substitution()
    replace = sub.replace
    values: dict[str, TensorVariable] = {}
    terms: dict[str, TensorVariable] = {}
    jacobians: dict[str, TensorVariable] = {}

    groups = scalar_groups(model)
    # A group's values need no other variable (constant bounds): set them first, so
    # that a member may be a parameter of a variable created before the group ends.
    group_of: dict[str, tuple[int, int]] = {}
    stacked: list[TensorVariable] = []
    group_values: list[TensorVariable] = []
    jac_vectors: list[TensorVariable | None] = []
    for j, members in enumerate(groups):
        first = members[0]
        vec = MakeVector(str(first.value.dtype))(*[i.value for i in members])
        jac = None
        if first.observed or first.transform is None:
            value = vec
            if value.dtype != first.rv.dtype:
                value = kt.cast(value, first.rv.dtype)
        else:
            value = kt.as_tensor(first.transform.backward(vec))
            jac = kt.as_tensor(first.transform.log_jac_det(vec))
        stacked.append(vec)  # type: ignore[arg-type]
        group_values.append(value)
        jac_vectors.append(jac)
        for k, info in enumerate(members):
            group_of[info.name] = (j, k)
            values[info.name] = item(value, k)
            sub[info.rv] = values[info.name]
            if jac is not None:
                jacobians[info.name] = item(jac, k)
    for info in model.variables.values():
        if info.name in group_of:
            continue
        params = [sub(p) for p in info.params]
        if info.observed or info.transform is None:
            value = info.value
        else:
            value = sub(info.transform.backward(info.value))
            jacobians[info.name] = sub(info.transform.log_jac_det(info.value))
        if value.dtype != info.rv.dtype and info.transform is None:
            value = kt.cast(value, info.rv.dtype)
        terms[info.name] = kt.as_tensor(info.distribution.logp(value, *params))
        values[info.name] = value
        sub[info.rv] = value
    # Every draw has its value now: a member's parameters may use any variable.
    vector_terms = [_vector_terms(g, v, sub) for g, v in zip(groups, group_values, strict=True)]
    for name, (j, k) in group_of.items():
        vectors, where = vector_terms[j]
        part, position = where[k]
        terms[name] = item(vectors[part], position)
    order = list(model.variables)  # terms and Jacobians in creation order
    terms = {n: terms[n] for n in order}
    jacobians = {n: jacobians[n] for n in order if n in jacobians}
    constrained = {i.name: values[i.name] for i in model.variables.values() if not i.observed}
    for name, pot in model.potentials.items():
        terms[name] = kt.as_tensor(sub(pot))
    deterministics = {name: kt.as_tensor(sub(d)) for name, d in model.deterministics.items()}
    term_groups = [
        TermGroup(
            [i.name for i in members],
            stacked[j],
            vector_terms[j][0],
            jac_vectors[j],
            not members[0].observed,
        )
        for j, members in enumerate(groups)
    ]
    return LogpGraph(constrained, terms, jacobians, deterministics, replace, term_groups)


def _vector_terms(
    members: list[VariableInfo], value: TensorVariable, sub: Any
) -> tuple[list[TensorVariable], list[tuple[int, int]]]:
    """Return the members' log-densities at ``value`` (their values) as vectors.

    One vector per part of members whose parameters have one form (a slice of one
    vector, constants, one variable: :func:`kiln_model._vectorize.kind`), so that
    each part's parameters stack into vector expressions; members of parts smaller
    than ``GROUP_MIN`` share one more part. Also returns where each member's term is:
    ``(part, position)``.
    """
    params = [[sub(p) for p in info.params] for info in members]
    parts: dict[object, list[int]] = {}
    for k, ps in enumerate(params):
        parts.setdefault(tuple(_vectorize.kind(p) for p in ps), []).append(k)
    big = [ks for ks in parts.values() if len(ks) >= _vectorize.GROUP_MIN]
    rest = sorted(k for ks in parts.values() if len(ks) < _vectorize.GROUP_MIN for k in ks)
    vectors: list[TensorVariable] = []
    where: list[tuple[int, int]] = [(0, 0)] * len(members)
    for j, ks in enumerate(sorted(big + ([rest] if rest else []))):
        v = value if len(ks) == len(members) else _vectorize.take(value, ks)
        columns = [stack([params[k][p] for k in ks]) for p in range(len(params[0]))]
        term = kt.as_tensor(members[0].distribution.logp(v, *columns))
        if term.ndim != 1:
            term = kt.broadcast_to(term, (len(ks),))
        vectors.append(term)
        for position, k in enumerate(ks):
            where[k] = (j, position)
    return vectors, where
