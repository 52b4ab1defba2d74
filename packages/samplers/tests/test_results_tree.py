"""``to_datatree``: the groups as ArviZ lays them out (``arviz_base.from_dict``)."""

from __future__ import annotations

import numpy as np
import xarray
from arviz_base import from_dict

from kiln_samplers import Trace, to_datatree


def test_groups_equal_arviz_from_dict():
    rng = np.random.default_rng(0)
    posterior = {"a": rng.normal(size=(2, 50)), "b": rng.normal(size=(2, 50, 3, 2))}
    stats = {"diverging": rng.random((2, 50)) < 0.1, "tree_depth": np.full((2, 50), 3)}
    trace = Trace(posterior, stats, np.zeros((2, 50, 7)), 1.5, 10, False)
    dims = {"b": ["x"], "y": ["x"]}
    coords = {"x": ["p", "q", "r"]}
    data = {"y": np.arange(3.0)}, {"c": np.ones(2)}
    tree = to_datatree(
        trace, dims=dims, coords=coords, observed_data=data[0], constant_data=data[1]
    )
    reference = from_dict(
        {
            "posterior": posterior,
            "sample_stats": stats,
            "observed_data": data[0],
            "constant_data": data[1],
        },
        dims=dims,
        coords=coords,
    )
    assert list(tree.children) == ["posterior", "sample_stats", "observed_data", "constant_data"]
    for group in tree.children:
        xarray.testing.assert_identical(
            tree[group].to_dataset().drop_attrs(), reference[group].to_dataset().drop_attrs()
        )
    assert tree.attrs["sampling_time"] == tree["posterior"].attrs["sampling_time"] == 1.5
    tree["extra"] = xarray.Dataset({"v": ("k", np.arange(2))})  # the tree takes new groups
    assert "extra" in tree.children
