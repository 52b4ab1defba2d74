"""xarray's undocumented fast Variable constructor, and the versions it was checked on.

``xarray.Variable(dims, data, fastpath=True)`` takes an ``ndarray`` as it is. The
documented constructor first asks whether the data is a Dask array, and with Dask
installed that question imports ``dask.array`` (and SciPy through it): about 0.3 s
of a process that samples a small model, and 0.2 s more at its exit. For the
NumPy arrays of :func:`kiln_samplers._results.to_datatree` (numbers and strings) that
constructor returns the array unchanged, so the fast one gives the same Variable.

``fastpath`` was read on the xarray versions :data:`SUPPORTED` names (``pyproject.toml``
bounds xarray the same way; constraints.txt pins one of them). With another version
:func:`variable` uses the documented constructor, with one :class:`XarrayVersionWarning`.
"""

from __future__ import annotations

import functools
import warnings
from types import ModuleType
from typing import Any

import numpy as np

#: xarray versions (``>= first, < second``) whose ``Variable(fastpath=True)`` was checked.
SUPPORTED: tuple[tuple[int, ...], tuple[int, ...]] = ((2025, 6), (2027,))
#: dtype kinds the fast constructor takes (bool, numbers, strings): for an ``ndarray``
#: of these the documented one returns the array unchanged; it converts dates and objects.
_UNCHANGED = "biufcUS"


class XarrayVersionWarning(UserWarning):
    """The installed xarray is not one kiln's fast DataTree construction was checked on."""


def _parse(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return None


def supported(version: str) -> bool:
    """Whether xarray ``version`` is in :data:`SUPPORTED`."""
    parsed = _parse(version)
    return parsed is not None and SUPPORTED[0] <= parsed < SUPPORTED[1]


@functools.cache
def _fast(version: str) -> bool:
    if supported(version):
        return True
    low, high = (".".join(map(str, v)) for v in SUPPORTED)
    warnings.warn(
        f"xarray {version} is not a version kiln's results were checked on "
        f"(xarray>={low},<{high}); the results are built with xarray's documented "
        "constructors, which import dask.array when Dask is installed (slower, same data)",
        XarrayVersionWarning,
        stacklevel=3,
    )
    return False


def variable(xarray: ModuleType, dims: tuple[str, ...], array: np.ndarray) -> Any:
    """Return ``xarray.Variable(dims, array)``, without the Dask check where it is safe."""
    if _takes_fast(array) and _fast(xarray.__version__):
        return xarray.Variable(dims, array, fastpath=True)
    return xarray.Variable(dims, array)


def coordinate(xarray: ModuleType, dim: str, values: np.ndarray) -> Any:
    """Return the dimension coordinate ``dim`` with ``values``, as ``Dataset(coords=)`` takes.

    Wrapped in the ``pandas.Index`` xarray would make of them (``pandas.Index(values)``),
    so that making the Dataset's index asks nothing of Dask.
    """
    if values.ndim == 1 and _takes_fast(values) and _fast(xarray.__version__):
        import pandas

        return xarray.Variable((dim,), pandas.Index(values), fastpath=True)
    return xarray.Variable((dim,), values)


def _takes_fast(array: np.ndarray) -> bool:
    return (
        type(array) is np.ndarray
        and array.dtype.kind in _UNCHANGED
        and array.dtype != np.float16  # (xarray casts a float16 index, with a warning)
    )
