"""Mean functions of Gaussian processes, with PyMC's names: ``Zero``, ``Constant``, ``Linear``."""

from __future__ import annotations

from typing import Any

from kiln_graph import TensorVariable
from kiln_graph import tensor as kt
from kiln_model.gp.cov import as_inputs

__all__ = ["Constant", "Linear", "Mean", "Zero"]


class Mean:
    """A mean function: ``mean(X)`` is the ``(n,)`` mean at the rows of ``X``."""

    def __call__(self, X: Any) -> TensorVariable:
        """Return the mean at the rows of ``X``."""
        raise NotImplementedError

    def __add__(self, other: Mean) -> Mean:
        return _Sum(self, other)


class Zero(Mean):
    """Zero everywhere."""

    def __call__(self, X: Any) -> TensorVariable:
        """Return zeros."""
        return kt.zeros((as_inputs(X).shape[0],))


class Constant(Mean):
    """``c`` everywhere."""

    def __init__(self, c: Any = 0) -> None:
        self.c = c

    def __call__(self, X: Any) -> TensorVariable:
        """Return ``c`` at every row."""
        return kt.alloc(kt.as_tensor(self.c, dtype="float64"), as_inputs(X).shape[0])


class Linear(Mean):
    """``X @ coeffs + intercept``."""

    def __init__(self, coeffs: Any, intercept: Any = 0) -> None:
        self.coeffs = coeffs
        self.intercept = intercept

    def __call__(self, X: Any) -> TensorVariable:
        """Return ``X @ coeffs + intercept``."""
        coeffs = kt.as_tensor(self.coeffs, dtype="float64")
        if coeffs.ndim == 0:
            coeffs = coeffs[None]
        return kt.dot(as_inputs(X), coeffs) + kt.as_tensor(self.intercept, dtype="float64")


class _Sum(Mean):
    def __init__(self, a: Mean, b: Mean) -> None:
        self.a, self.b = a, b

    def __call__(self, X: Any) -> TensorVariable:
        return self.a(X) + self.b(X)
