"""``kl.distributions``: every distribution class of :mod:`kiln_model`, as PyMC's namespace.

``kl.distributions.Normal`` is ``kl.Normal``; the list is derived from the
:class:`~kiln_model.Distribution` subclasses :mod:`kiln_model` exports, so a new one
appears here by itself. ``logp``, ``logcdf``, ``icdf`` and ``transforms`` come along, as in
``pm.distributions``. A PyMC distribution kiln lacks raises an ``AttributeError``
that says so and names the closest kiln has.

Examples
--------
>>> import kiln as kl
>>> kl.distributions.Normal is kl.Normal
True
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import kiln_model as _km
from kiln_model import Distribution as Distribution
from kiln_model import WishartBartlett as WishartBartlett  # a function, as in PyMC
from kiln_model import icdf as icdf
from kiln_model import logcdf as logcdf
from kiln_model import logp as logp
from kiln_model import transforms as transforms


def _exported_distributions() -> dict[str, type]:
    """Return ``name -> class`` of every Distribution subclass ``kiln_model`` exports."""
    found: dict[str, type] = {}
    for name in dir(_km):
        obj = getattr(_km, name)
        if name.startswith("_") or not inspect.isclass(obj):
            continue
        if issubclass(obj, Distribution) or _is_distribution_like(obj):
            found[name] = obj
    return found


def _is_distribution_like(obj: type) -> bool:
    """Whether ``obj`` is a distribution factory not derived from ``Distribution``.

    ``CustomDist`` and ``Mixture``-like classes define ``dist`` and register draws
    themselves; they belong in the namespace too.
    """
    return callable(getattr(obj, "dist", None)) and obj.__module__.startswith("kiln_model.")


DISTRIBUTIONS: dict[str, type] = _exported_distributions()
globals().update(DISTRIBUTIONS)

#: PyMC distributions kiln does not provide (yet): the names the hint recognises.
PYMC_ONLY: frozenset[str] = frozenset({"BinaryGaussianGP", "DensityDist", "Simulator"})


def missing_name_error(module: str, name: str) -> AttributeError:
    """Return the ``AttributeError`` for ``module.name``, with a hint for PyMC names.

    A PyMC distribution kiln lacks is named as such, with the closest kiln
    distributions and the way out (``kl.CustomDist``).
    """
    close = difflib.get_close_matches(name, list(DISTRIBUTIONS), n=3, cutoff=0.6)
    if name in PYMC_ONLY - DISTRIBUTIONS.keys():
        hint = f"{name!r} is a PyMC distribution kiln does not provide yet"
        if close:
            hint += f"; close kiln distributions: {', '.join(close)}"
        hint += "; write its log-density with kl.CustomDist(..., logp=...)"
        return AttributeError(f"module {module!r} has no attribute {name!r}: {hint}")
    if close and name[:1].isupper():
        return AttributeError(
            f"module {module!r} has no attribute {name!r}; did you mean {', '.join(close)}?"
        )
    return AttributeError(f"module {module!r} has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    raise missing_name_error(__name__, name)


__all__ = [
    "Distribution",
    "WishartBartlett",
    "icdf",
    "logcdf",
    "logp",
    "transforms",
    *sorted(DISTRIBUTIONS),
]
