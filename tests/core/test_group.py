"""Groups: hierarchy creation, members, implicit groups, consolidated metadata."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import GroupNotFoundError, NodeNotFoundError


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def zarr_format(request):
    return request.param


def build(store, zarr_format):
    root = zarr_dask.create_group(store, zarr_format=zarr_format, attributes={"title": "t"})
    root.create_array("temp", shape=(4, 3), dtype="f4", chunks=(2, 3), dimension_names=["y", "x"])
    sub = root.create_group("sub", attributes={"k": 1})
    sub.create_array("deep/arr", shape=(2,), dtype="i8")
    return root


def test_hierarchy(zarr_format):
    store = zarr_dask.MemoryStore()
    build(store, zarr_format)
    root = zarr_dask.open_group(store)
    assert root.zarr_format == zarr_format
    assert root.attrs["title"] == "t"
    assert root.array_keys() == ["temp"]
    assert root.group_keys() == ["sub"]
    assert sorted(dict(root.members(max_depth=None))) == ["sub", "sub/deep", "sub/deep/arr", "temp"]
    assert isinstance(root["sub/deep/arr"], zarr_dask.Array)
    assert "sub" in root and "nope" not in root
    # the parent 'sub/deep' was created explicitly (write-if-absent)
    assert not root["sub/deep"].implicit
    tree = root.tree()
    assert "temp (4, 3) float32" in tree and "arr (2,) int64" in tree


def test_parents_are_not_clobbered(zarr_format):
    store = zarr_dask.MemoryStore()
    root = zarr_dask.create_group(store, zarr_format=zarr_format, attributes={"keep": True})
    root.create_array("a/b/c", shape=(1,), dtype="i1")
    assert zarr_dask.open_group(store).attrs["keep"] is True


def test_implicit_groups(zarr_format):
    store = zarr_dask.MemoryStore()
    build(store, zarr_format)
    doc = "zarr.json" if zarr_format == 3 else ".zgroup"
    store.delete(f"sub/{doc}")
    store.delete("sub/.zattrs")
    root = zarr_dask.open_group(store)
    assert root.group_keys() == ["sub"]
    sub = root["sub"]
    assert sub.implicit and "implicit" in root.tree()
    assert zarr_dask.open_group(store, path="sub", mode="r").implicit
    with pytest.raises(GroupNotFoundError):
        zarr_dask.open_group(store, path="nothing", mode="r")


def test_consolidated(zarr_format):
    store = zarr_dask.MemoryStore()
    build(store, zarr_format)
    g = zarr_dask.consolidate_metadata(store)
    assert g.consolidated_metadata is not None
    before = store.counters.snapshot()
    assert sorted(dict(g.members(max_depth=None))) == ["sub", "sub/deep", "sub/deep/arr", "temp"]
    after = store.counters.snapshot()
    assert after.get("list", 0) == before.get("list", 0)  # no listing with consolidated metadata
    reopened = zarr_dask.open_group(store, use_consolidated=True)
    np.testing.assert_array_equal(reopened["temp"][:], np.zeros((4, 3), "f4"))
    if zarr_format == 2:
        zmeta = json.loads(store.get(".zmetadata"))
        assert zmeta["zarr_consolidated_format"] == 1
        assert "sub/deep/arr/.zarray" in zmeta["metadata"]
    else:
        root_doc = json.loads(store.get("zarr.json"))
        assert "sub/deep/arr" in root_doc["consolidated_metadata"]["metadata"]


def test_open_group_modes(zarr_format):
    store = zarr_dask.MemoryStore()
    with pytest.raises(NodeNotFoundError):
        zarr_dask.open_group(store, mode="r")
    g = zarr_dask.open_group(store, mode="a", zarr_format=zarr_format)
    assert g.zarr_format == zarr_format
    g.create_array("x", shape=(1,), dtype="i1")
    g2 = zarr_dask.open_group(store, mode="w", zarr_format=zarr_format)
    assert g2.array_keys() == []
    assert isinstance(zarr_dask.open(store), zarr_dask.Group)
