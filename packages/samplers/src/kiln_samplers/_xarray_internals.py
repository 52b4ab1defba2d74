"""xarray's fast ways to assemble a Dataset and a DataTree, and the versions checked.

The results of :func:`kiln_samplers._results.to_datatree` are NumPy arrays of numbers
(and string or number coordinates), laid out by kiln itself. xarray's documented
``Dataset(data_vars, coords=...)`` checks, converts and aligns each of them: about half
of the DataTree's cost at 10^4 draws on a small model (issue #21). Worse, with Dask
installed it asks of every array whether it is a Dask array, and that question imports
``dask.array`` (and SciPy through it): about 0.3 s of a process that samples a small
model, and 0.2 s more at its exit (issue #26).

:func:`dataset` assembles the same Dataset from its parts instead:
``Variable(dims, array, fastpath=True)`` (an undocumented keyword: the array as it is,
which is what the documented path returns for these dtypes), a ``PandasIndex`` per
coordinate (public) and ``Dataset._construct_direct`` (private). :func:`datatree`
hangs those Datasets under an empty root without the copy and alignment check each
child gets from ``DataTree.children`` (about half of the DataTree's cost on M1: a root
without coordinates cannot be misaligned with anything), setting the node's slots
(``DataTree._set_node_data``, ``_name``, ``_parent``, ``_children``; private). All of
them were read on xarray 2026.9 and are taken for the versions :data:`SUPPORTED`
names (``pyproject.toml`` bounds xarray the same way; constraints.txt pins one of
them). With another version, or arrays it does not take (dates, objects), it uses
the documented constructors; the version with one :class:`XarrayVersionWarning`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from kiln_samplers._version_range import Range, requirement, within

#: xarray versions (``>= first, < second``) whose ``Variable(fastpath=True)`` was checked.
SUPPORTED: Range = ((2025, 6), (2027,))
#: dtype kinds the fast constructor takes (bool, numbers, strings): for an ``ndarray``
#: of these the documented one returns the array unchanged; it converts dates and objects.
_UNCHANGED = "biufcUS"


class XarrayVersionWarning(UserWarning):
    """The installed xarray is not one kiln's fast DataTree construction was checked on."""


def supported(version: str) -> bool:
    """Whether xarray ``version`` is in :data:`SUPPORTED`."""
    return within(version, SUPPORTED)


@functools.cache
def _fast(version: str) -> bool:
    if supported(version):
        return True
    warnings.warn(
        f"xarray {version} is not a version kiln's results were checked on "
        f"({requirement('xarray', SUPPORTED)}); the results are built with xarray's documented "
        "constructors, which import dask.array when Dask is installed (slower, same data)",
        XarrayVersionWarning,
        stacklevel=3,
    )
    return False


def dataset(
    xarray: ModuleType,
    data_vars: Mapping[str, tuple[tuple[str, ...], np.ndarray]],
    coords: Mapping[str, np.ndarray],
) -> Any:
    """Return ``xarray.Dataset(data_vars, coords=coords)``; each coordinate is its dim's.

    ``data_vars`` maps each name to its dims and array, ``coords`` each dim to its
    values. Where every array takes the fast constructor, the Dataset is assembled
    from its parts (``Dataset._construct_direct``: the variables, each dim's
    ``PandasIndex``) after checking what the documented constructor would check here:
    each dim's one length, and no name that is both a variable and a coordinate.
    Anything else goes through the documented constructor, which says what is wrong.
    """
    sizes = _sizes(data_vars, coords)
    if sizes is None or not _fast(xarray.__version__):
        return xarray.Dataset(
            {name: xarray.Variable(dims, array) for name, (dims, array) in data_vars.items()},
            coords={dim: xarray.Variable((dim,), values) for dim, values in coords.items()},
        )
    import pandas

    variables: dict[str, Any] = {}
    indexes: dict[str, Any] = {}
    for dim, values in coords.items():
        index = xarray.indexes.PandasIndex(pandas.Index(values), dim)
        indexes[dim] = index
        variables.update(index.create_variables())
    for name, (dims, array) in data_vars.items():
        variables[name] = xarray.Variable(dims, array, fastpath=True)
    return xarray.Dataset._construct_direct(variables, set(coords), sizes, None, indexes)


def datatree(xarray: ModuleType, groups: Mapping[str, Any], attrs: Mapping[str, Any]) -> Any:
    """Return a DataTree: a root holding ``attrs``, one child per Dataset of ``groups``.

    The tree of ``root = DataTree(); root.children = {name: DataTree(ds), ...}``. Each
    child takes its Dataset as it is (the caller gives them up): there is nothing to
    copy, and nothing to align against a root without coordinates.
    """
    root = xarray.DataTree()
    root.attrs.update(attrs)
    if not _fast(xarray.__version__):
        root.children = {name: xarray.DataTree(group) for name, group in groups.items()}
        return root
    node_type = xarray.DataTree
    for name, group in groups.items():
        node = node_type.__new__(node_type)
        node._set_node_data(group)  # checks the variables' names, as DataTree(group) does
        node._name, node._parent, node._children = name, root, {}
        root._children[name] = node
    return root


def _sizes(
    data_vars: Mapping[str, tuple[tuple[str, ...], np.ndarray]], coords: Mapping[str, np.ndarray]
) -> dict[str, int] | None:
    """Return each dim's length, or None where the fast assembly does not apply."""
    if set(data_vars) & set(coords):
        return None
    sizes: dict[str, int] = {}
    for dim, values in coords.items():
        if values.ndim != 1 or not _takes_fast(values):
            return None
        sizes[dim] = values.shape[0]
    for dims, array in data_vars.values():
        if len(dims) != array.ndim or len(set(dims)) != len(dims) or not _takes_fast(array):
            return None
        for dim, length in zip(dims, array.shape, strict=True):
            if sizes.setdefault(dim, length) != length:
                return None
    if set(sizes) != set(coords):  # a dim without its coordinate: not what to_datatree builds
        return None
    return sizes


def _takes_fast(array: np.ndarray) -> bool:
    return (
        type(array) is np.ndarray
        and array.dtype.kind in _UNCHANGED
        and array.dtype != np.float16  # (xarray casts a float16 index, with a warning)
    )
