"""nutpie's private API that kiln's nutpie adapter drives, and the versions it was checked on.

The adapter (:mod:`kiln_samplers._nutpie`) builds nutpie's Rust model itself, as
nutpie's own PyMC integration does, through ``nutpie._lib``: ``LogpFunc`` and
``ExpandFunc`` (C callbacks), ``PyModel`` (Python callbacks), ``PySampler.from_pymc`` /
``from_pyfunc`` and ``PyNutsSettings``. Every use goes through :func:`private_lib`.

They were read on the nutpie versions :data:`SUPPORTED` names (``pyproject.toml``'s
``kiln[nutpie]`` extra bounds nutpie the same way; constraints.txt pins the lowest).
With another version the adapter uses nutpie's public API instead
(``nutpie.compiled_pyfunc.from_pyfunc`` and ``nutpie.sample``: nutpie calls the model
back through Python, its settings are checked by nutpie itself), with one
:class:`NutpieVersionWarning`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kiln_samplers._version_range import Range, requirement, within

#: nutpie versions (``>= first, < second``) whose ``nutpie._lib`` the adapter was checked on.
SUPPORTED: Range = ((0, 16, 11), (0, 17))


class NutpieVersionWarning(UserWarning):
    """The installed nutpie is not one kiln's nutpie adapter was checked on."""


def supported(version: str) -> bool:
    """Whether nutpie ``version`` is in :data:`SUPPORTED`."""
    return within(version, SUPPORTED)


def describe() -> str:
    """Return :data:`SUPPORTED` as a pip requirement (``nutpie>=0.16.11,<0.17``)."""
    return requirement("nutpie", SUPPORTED)


def private_lib(nutpie: ModuleType) -> Any:
    """Return ``nutpie._lib`` (the Rust extension) of a supported nutpie."""
    return nutpie._lib
