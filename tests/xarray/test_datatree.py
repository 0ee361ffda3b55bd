"""``to_zarr_datatree`` and ``open_datatree``: nested groups, ``group=``, appends and regions (which xarray's
DataTree writer refuses), one metadata batch for the whole tree."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.xarray._cases import tree
from tests.xarray._helpers import RecordingStore


def _open_tree(store, **kw):
    return xr.open_datatree(store, engine="zarr_dask", **kw)


@pytest.mark.parametrize("fmt", [2, 3])
def test_round_trip_and_each_document_written_once(fmt):
    store = RecordingStore()
    dt = tree()
    result = zarr_dask.to_zarr_datatree(dt, store, zarr_format=fmt)
    xr.testing.assert_identical(_open_tree(store).load(), dt)
    assert set(store.metadata_writes().values()) == {1}
    assert set(result.groups) == {"", "obs", "obs/deep", "obs/deep/er", "model"}
    xr.testing.assert_identical(_open_tree(store, consolidated=False).load(), dt)


def test_tree_below_a_group_and_encoding_per_node():
    store = RecordingStore()
    dt = tree()
    zarr_dask.to_zarr_datatree(dt, store, group="runs/1", encoding={"/obs": {"a": {"chunks": (2,)}}})
    got = _open_tree(store, group="runs/1")
    xr.testing.assert_identical(got.load(), dt)
    assert got["obs"].a.encoding["chunks"] == (2,)
    with pytest.raises(ValueError, match="unexpected encoding group name"):
        zarr_dask.to_zarr_datatree(dt, RecordingStore(), encoding={"/nope": {}})


def test_tree_append_and_region():
    store = RecordingStore()
    base = xr.DataTree.from_dict(
        {
            "/": xr.Dataset(attrs={"title": "run"}),
            "/a": xr.Dataset({"v": ("t", da.arange(7.0, chunks=3))}, coords={"t": np.arange(7)}),
            "/static": xr.Dataset({"s": ("y", [1, 2])}),
        }
    )
    base["a"].v.encoding["chunks"] = (4,)
    zarr_dask.to_zarr_datatree(base, store)
    more = xr.DataTree.from_dict({"/a": xr.Dataset({"v": ("t", da.arange(7.0, 12.0, chunks=2))}, coords={"t": np.arange(7, 12)})})
    zarr_dask.to_zarr_datatree(more, store, append_dim="t")  # xarray: NotImplementedError
    got = _open_tree(store)
    np.testing.assert_array_equal(got["a"].v.values, np.arange(12.0))
    assert list(got["static"].s.values) == [1, 2]
    patch = xr.DataTree.from_dict({"/a": xr.Dataset({"v": ("t", da.zeros(5, chunks=2))})})
    zarr_dask.to_zarr_datatree(patch, store, region={"t": slice(2, 7)})
    np.testing.assert_array_equal(_open_tree(store)["a"].v.values, [0, 1, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11])


def test_tree_modes():
    store = RecordingStore()
    zarr_dask.to_zarr_datatree(tree(), store)
    with pytest.raises(FileExistsError):
        zarr_dask.to_zarr_datatree(tree(), store)
    small = xr.DataTree.from_dict({"/only": xr.Dataset({"z": ("q", [1])})})
    zarr_dask.to_zarr_datatree(small, store, mode="w")
    assert sorted(xr.open_groups(store, engine="zarr_dask")) == ["/", "/only"]


def test_tree_region_skips_nodes_with_only_indexes():
    store = RecordingStore()
    dt = xr.DataTree.from_dict(
        {"/": xr.Dataset(coords={"t": np.arange(6)}), "/a": xr.Dataset({"v": ("t", np.arange(6.0))})}
    )
    zarr_dask.to_zarr_datatree(dt, store)
    patch = xr.DataTree.from_dict(
        {"/": xr.Dataset(coords={"t": np.arange(2, 4)}), "/a": xr.Dataset({"v": ("t", [-1.0, -1.0])})}
    )
    zarr_dask.to_zarr_datatree(patch, store, region="auto")
    np.testing.assert_array_equal(_open_tree(store)["a"].v.values, [0, 1, -1, -1, 4, 5])
    with pytest.raises(ValueError, match="nothing to write"):
        zarr_dask.to_zarr_datatree(xr.DataTree(xr.Dataset(coords={"t": [1]})), store, region={"t": slice(0, 1)})
