"""The model's joint log-density as a graph of its value variables.

Variables are visited in creation order (a variable's parameters use only earlier
ones). Each draw is replaced by its value: an observed variable's data, a free
variable's value variable, mapped back to the constrained space through its
transform (whose bounds may themselves use earlier variables). Each variable then
contributes ``logp(value, *params)`` and, when transformed, the log-Jacobian.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from kiln_graph import TensorVariable, Variable, graph_replace
from kiln_graph import tensor as kt

if TYPE_CHECKING:
    from kiln_model._model import Model


@dataclasses.dataclass
class LogpGraph:
    """The pieces of a model's log-density, all in terms of value variables and data.

    ``constrained`` maps each free variable's name to its constrained value; ``terms``
    each variable's (and potential's) log-density term, elementwise, with the
    log-Jacobian added separately in ``jacobians``; ``deterministics`` the named
    expressions; ``replace`` maps every draw to its value.
    """

    constrained: dict[str, TensorVariable]
    terms: dict[str, TensorVariable]
    jacobians: dict[str, TensorVariable]
    deterministics: dict[str, TensorVariable]
    replace: dict[Variable, Variable]

    def total(self, jacobian: bool = True) -> TensorVariable:
        """Return the joint log-density, a float64 scalar (see :func:`nan_is_outside`)."""
        parts = [kt.sum(t) for t in self.terms.values()]
        if jacobian:
            parts += [kt.sum(j) for j in self.jacobians.values()]
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


def build_logp(model: Model) -> LogpGraph:
    """Return the log-density pieces of ``model`` (see :class:`LogpGraph`)."""
    replace: dict[Variable, Variable] = {}
    constrained: dict[str, TensorVariable] = {}
    terms: dict[str, TensorVariable] = {}
    jacobians: dict[str, TensorVariable] = {}

    def sub(x: Any) -> Any:
        return graph_replace(x, replace, strict=False) if replace else x

    for info in model.variables.values():
        params = [sub(p) for p in info.params]
        if info.observed or info.transform is None:
            value = info.value
        else:
            value = sub(info.transform.backward(info.value))
            jacobians[info.name] = sub(info.transform.log_jac_det(info.value))
        if value.dtype != info.rv.dtype and info.transform is None:
            value = kt.cast(value, info.rv.dtype)
        terms[info.name] = kt.as_tensor(info.distribution.logp(value, *params))
        if not info.observed:
            constrained[info.name] = value
        replace[info.rv] = value
    for name, pot in model.potentials.items():
        terms[name] = kt.as_tensor(sub(pot))
    deterministics = {name: kt.as_tensor(sub(d)) for name, d in model.deterministics.items()}
    return LogpGraph(constrained, terms, jacobians, deterministics, replace)
