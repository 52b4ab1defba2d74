"""PyMC's alternative parametrizations, declared on a distribution and resolved in one place.

A distribution lists its parameters in PyMC's order (``Normal(mu, sigma, tau)``) and
declares each other way of giving some of them as an :class:`Alternative`: the
parameters given together (``tau``), the ones they determine (``sigma``) and the
conversion (``sigma = 1 / sqrt(tau)``). :func:`resolve` turns the user's parameters
into the base ones (those no alternative names) before defaults apply, and raises,
naming the distribution, where PyMC does: both forms of one parameter given, or a form
given incomplete.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln_graph import KilnValueError, TensorVariable, Variable
from kiln_graph import tensor as kt
from kiln_model._validate import Check, check_constants


@dataclasses.dataclass(frozen=True)
class Alternative:
    """Parameters ``names``, given together, that determine ``replaces`` by ``convert``.

    ``convert(*values of names)`` returns the values of ``replaces`` (a tuple, in that
    order); ``checks`` are constraints on ``names`` checked where they are constants.
    ``keeps``: parameters of ``names`` that are base parameters too (Rice's ``sigma``
    in the form ``(b, sigma)``); a name another form replaces is one as well (Wald's
    ``mu`` in ``(mu, phi)``).
    """

    names: tuple[str, ...]
    replaces: tuple[str, ...]
    convert: Callable[..., tuple[Any, ...]]
    checks: tuple[Check, ...] = ()
    keeps: tuple[str, ...] = ()


def alternative_names(alternatives: Sequence[Alternative]) -> set[str]:
    """Return the parameters of ``alternatives`` that are not base parameters."""
    base = {n for a in alternatives for n in (*a.replaces, *a.keeps)}
    return {n for a in alternatives for n in a.names} - base


def resolve(what: str, alternatives: Sequence[Alternative], bound: dict[str, Any]) -> None:
    """Replace the alternative parameters given in ``bound`` by the base ones, in place.

    ``bound`` maps the names the user gave (``None``: not given). A form is used when
    all its parameters are given; it is an error to give it together with a parameter
    it determines, two forms of one parameter, or a parameter of no complete form.
    """
    given = {n for n, v in bound.items() if v is not None}
    pure = alternative_names(alternatives)
    chosen = [a for a in alternatives if set(a.names) <= given]
    for i, a in enumerate(chosen):
        for b in chosen[i + 1 :]:
            if set(a.replaces) & set(b.replaces):
                raise KilnValueError(
                    f"{what}: incompatible parametrization: give {_names(a.names)} or "
                    f"{_names(b.names)}, not both"
                )
    used = {n for a in chosen for n in a.names}
    stray = sorted((given & pure) - used)
    if stray:
        forms = " or ".join(_names(a.names) for a in alternatives if set(stray) & set(a.names))
        raise KilnValueError(
            f"{what}: incompatible parametrization: {_names(stray)} given without the rest "
            f"of its form (give {forms})"
        )
    for a in chosen:
        clash = [n for n in a.replaces if bound.get(n) is not None]
        if clash:
            raise KilnValueError(f"{what}: can't pass both {_names(a.names)} and {_names(clash)}")
        values = [bound[n] for n in a.names]
        check_constants(what, dict(zip(a.names, values, strict=True)), a.checks)
        bound.update(zip(a.replaces, a.convert(*values), strict=True))
    for n in pure:
        bound.pop(n, None)


def as_float(x: Any) -> TensorVariable:
    """Return ``x`` as a float64 tensor (a float tensor variable stays as it is)."""
    if isinstance(x, Variable):
        t = kt.as_tensor(x)
        return t if t.dtype.startswith("float") else kt.cast(t, "float64")
    return kt.as_tensor(np.asarray(x, dtype="float64"))


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def other_forms(alternatives: Sequence[Alternative], missing: Sequence[str]) -> str:
    """Return ``" (or give (mu, sigma))"``: the forms that determine ``missing``, or ``""``."""
    forms = [_names(a.names) for a in alternatives if set(a.replaces) & set(missing)]
    return f" (or give {' or '.join(forms)})" if forms else ""


def _positive(*names: str) -> tuple[Check, ...]:
    return tuple(((n,), lambda v: v > 0, f"{n} must be > 0") for n in names)


def precision(name: str, base: str) -> Alternative:
    """Return the form giving the scale ``base`` by the precision ``name`` (``1 / sqrt``)."""
    return Alternative((name,), (base,), lambda t: (1.0 / kt.sqrt(as_float(t)),), _positive(name))


def gamma_moments(mu: Any, sigma: Any) -> tuple[Any, Any]:
    """Return Gamma's (alpha, beta) of mean ``mu`` and standard deviation ``sigma``."""
    mu, sigma = as_float(mu), as_float(sigma)
    return mu * mu / (sigma * sigma), mu / (sigma * sigma)


def beta_moments(mu: Any, sigma: Any) -> tuple[Any, Any]:
    """Return Beta's (alpha, beta) of mean ``mu`` and standard deviation ``sigma``."""
    mu, sigma = as_float(mu), as_float(sigma)
    kappa = mu * (1.0 - mu) / (sigma * sigma) - 1.0
    return mu * kappa, (1.0 - mu) * kappa


def beta_concentration(mu: Any, nu: Any) -> tuple[Any, Any]:
    """Return Beta's (alpha, beta) of mean ``mu`` and concentration ``nu = alpha + beta``."""
    mu, nu = as_float(mu), as_float(nu)
    return mu * nu, (1.0 - mu) * nu


def inverse_gamma_moments(mu: Any, sigma: Any) -> tuple[Any, Any]:
    """Return InverseGamma's (alpha, beta) of mean ``mu`` and standard deviation ``sigma``."""
    mu, sigma = as_float(mu), as_float(sigma)
    alpha = 2.0 + mu * mu / (sigma * sigma)
    return alpha, mu * (alpha - 1.0)


MEAN_SD_CHECKS: tuple[Check, ...] = _positive("mu", "sigma")
UNIT_MEAN_CHECKS: tuple[Check, ...] = (
    (("mu",), lambda mu: (mu > 0) & (mu < 1), "mu must be in (0, 1)"),
)
BETA_SD_CHECKS: tuple[Check, ...] = (
    *UNIT_MEAN_CHECKS,
    *_positive("sigma"),
    (
        ("mu", "sigma"),
        lambda mu, sigma: sigma * sigma < mu * (1 - mu),
        "sigma must be < sqrt(mu * (1 - mu))",
    ),
)
BETA_NU_CHECKS: tuple[Check, ...] = (*UNIT_MEAN_CHECKS, *_positive("nu"))
