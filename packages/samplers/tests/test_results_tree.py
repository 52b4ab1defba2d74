"""``to_datatree``: the groups as ArviZ lays them out (``arviz_base.from_dict``)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray
from arviz_base import from_dict

from kiln_samplers import Trace, _xarray_internals, to_datatree


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


def _tree_and_reference(coords: dict) -> tuple:
    rng = np.random.default_rng(1)
    posterior = {"a": rng.normal(size=(2, 20, 3)), "k": rng.integers(0, 5, size=(2, 20))}
    stats = {"diverging": np.zeros((2, 20), dtype=bool)}
    trace = Trace(posterior, stats, np.zeros((2, 20, 4)), 0.1, 5, False)
    dims = {"a": ["t"]}
    tree = to_datatree(trace, dims=dims, coords=coords)
    reference = from_dict({"posterior": posterior, "sample_stats": stats}, dims=dims, coords=coords)
    return tree, reference


def test_dates_and_numbers_as_coordinates_give_arviz_layout():
    """Dates take xarray's documented constructor, numbers the fast one: the same tree."""
    for values in (
        np.array(["2020-01-01", "2020-02-01", "2020-03-01"], dtype="datetime64[D]"),
        np.array([0.5, 1.5, 2.5]),
        np.array([True, False, True]),
        np.array([b"x", b"y", b"z"]),
    ):
        tree, reference = _tree_and_reference({"t": values})
        for group in ("posterior", "sample_stats"):
            xarray.testing.assert_identical(
                tree[group].to_dataset().drop_attrs(), reference[group].to_dataset().drop_attrs()
            )
        assert tree.posterior.sel(t=values[1])["a"].shape == (2, 20)


def test_an_unchecked_xarray_version_builds_the_same_tree_with_one_warning(monkeypatch):
    fast_tree, _ = _tree_and_reference({"t": ["p", "q", "r"]})
    _xarray_internals._fast.cache_clear()
    monkeypatch.setattr(xarray, "__version__", "2031.1.0")
    try:
        with pytest.warns(_xarray_internals.XarrayVersionWarning, match=r"xarray 2031\.1\.0"):
            slow_tree, _ = _tree_and_reference({"t": ["p", "q", "r"]})
    finally:
        _xarray_internals._fast.cache_clear()
    for group in ("posterior", "sample_stats"):
        xarray.testing.assert_identical(
            slow_tree[group].to_dataset().drop_attrs(), fast_tree[group].to_dataset().drop_attrs()
        )
    assert _xarray_internals.supported(xarray.__version__) is False
    monkeypatch.undo()
    assert _xarray_internals.supported(xarray.__version__)


def _documented(data_vars: dict, coords: dict) -> xarray.Dataset:
    return xarray.Dataset(data_vars, coords={d: ((d,), v) for d, v in coords.items()})


@pytest.mark.parametrize(
    ("data_vars", "coords"),
    [
        (  # the fast assembly: numbers, strings, a strided view, a 0-d array
            {
                "a": (("chain", "draw", "g"), np.arange(24.0).reshape(2, 3, 4)),
                "b": (("chain", "draw"), np.ones((2, 6))[:, ::2]),
                "c": ((), np.array(3)),
            },
            {"chain": np.arange(2), "draw": np.arange(3), "g": np.array(["p", "q", "r", "s"])},
        ),
        (  # dates: the documented constructor
            {"a": (("t",), np.arange(2.0))},
            {"t": np.array(["2020-01-01", "2021-01-01"], dtype="datetime64[ns]")},
        ),
    ],
)
def test_assembled_dataset_is_the_documented_one(data_vars, coords):
    ours = _xarray_internals.dataset(xarray, data_vars, coords)
    xarray.testing.assert_identical(ours, _documented(data_vars, coords))
    assert list(ours.indexes) == list(coords)


def test_what_the_documented_constructor_refuses_gets_its_error():
    data_vars = {"a": (("chain", "x"), np.zeros((2, 3))), "b": (("chain", "x"), np.zeros((2, 4)))}
    with pytest.raises(ValueError, match="conflicting sizes for dimension 'x'"):
        _xarray_internals.dataset(xarray, data_vars, {"chain": np.arange(2), "x": np.arange(3)})
    with pytest.raises(ValueError, match="found in both data_vars and coords"):
        _xarray_internals.dataset(xarray, {"g": (("g",), np.zeros(3))}, {"g": np.arange(3)})


def _groups() -> dict[str, xarray.Dataset]:
    coords = {"chain": np.arange(2), "draw": np.arange(3), "g": np.array(["p", "q"])}
    return {
        "posterior": _xarray_internals.dataset(
            xarray, {"a": (("chain", "draw", "g"), np.arange(12.0).reshape(2, 3, 2))}, coords
        ),
        "observed_data": _xarray_internals.dataset(
            xarray, {"y": (("g",), np.array([1.0, 2.0]))}, {"g": coords["g"]}
        ),
    }


def test_assembled_tree_is_the_documented_one_and_behaves_as_it():
    attrs = {"sampling_time": 0.5}
    ours = _xarray_internals.datatree(xarray, _groups(), attrs)
    documented = xarray.DataTree()
    documented.children = {name: xarray.DataTree(g) for name, g in _groups().items()}
    documented.attrs.update(attrs)
    xarray.testing.assert_identical(ours, documented)
    assert [node.path for node in ours.subtree] == ["/", "/posterior", "/observed_data"]
    assert ours["posterior"].parent is ours and ours["posterior"].name == "posterior"
    xarray.testing.assert_identical(ours.copy(), documented.copy())
    xarray.testing.assert_identical(
        ours.map_over_datasets(lambda ds: ds * 2), documented.map_over_datasets(lambda ds: ds * 2)
    )
    xarray.testing.assert_identical(ours.posterior.sel(g="q"), documented.posterior.sel(g="q"))
    ours["posterior"]["b"] = ours.posterior["a"] + 1  # nodes take new variables
    assert float(ours.posterior["b"].sum()) == float(documented.posterior["a"].sum()) + 12
    del ours["observed_data"]
    assert list(ours.children) == ["posterior"]


def test_a_variable_name_with_a_slash_is_refused_as_datatree_refuses_it():
    groups = {"posterior": xarray.Dataset({"a/b": ("x", np.zeros(2))})}
    with pytest.raises(ValueError, match="'/' character"):
        _xarray_internals.datatree(xarray, groups, {})
