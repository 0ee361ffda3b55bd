"""``xr.open_dataset(engine="zarr_dask")``: conventions, tolerance, errors, consolidated metadata, requests."""

from __future__ import annotations

import asyncio
import json
import pickle

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.store import MemoryStore, open_store
from zarr_dask.xarray_backend.datastore import SkippedVariableWarning
from zarr_dask.xarray_backend.entrypoint import ZarrDaskBackendEntrypoint


def _open(store, **kw):
    return xr.open_dataset(store, engine="zarr_dask", **kw)


def _dataset(nvars: int = 3) -> xr.Dataset:
    return xr.Dataset(
        {f"v{i}": (("time", "x"), np.arange(12.0).reshape(4, 3) + i, {"units": "K"}) for i in range(nvars)},
        coords={"time": pd.date_range("2000-01-01", periods=4), "x": [10, 20, 30], "lat": ("x", [1.0, 2.0, 3.0])},
        attrs={"title": "t"},
    )


def test_engine_is_registered_and_guesses_zarr_paths(tmp_path):
    assert "zarr_dask" in xr.backends.list_engines()
    entry = ZarrDaskBackendEntrypoint()
    zarr_dask.to_zarr_dataset(_dataset(1), tmp_path / "plain")  # no .zarr suffix: found by its metadata
    assert entry.guess_can_open(tmp_path / "plain")
    assert entry.guess_can_open("s3://bucket/data.zarr/")
    assert not entry.guess_can_open(tmp_path)
    assert not entry.guess_can_open(str(tmp_path / "file.nc"))
    assert not entry.guess_can_open(b"bytes")
    zarr_dask.to_zarr_dataset(_dataset(1), "memory://guess-me")
    assert entry.guess_can_open("memory://guess-me")
    assert not entry.guess_can_open("nosuchprotocol://x")


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_matches_written(fmt):
    store = MemoryStore()
    ds = _dataset()
    zarr_dask.to_zarr_dataset(ds, store, zarr_format=fmt)
    got = _open(store)
    xr.testing.assert_identical(got.load(), ds)
    assert "_ARRAY_DIMENSIONS" not in got.v0.attrs
    assert got.v0.encoding["preferred_chunks"] == {"time": 4, "x": 3}
    assert got.v0.encoding["compressors"]
    assert ("serializer" in got.v0.encoding) == (fmt == 3)


def test_missing_store_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        _open(tmp_path / "nothing.zarr")


def test_consolidated_none_falls_back_with_xarrays_warning():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), store, consolidated=False)
    with pytest.warns(RuntimeWarning, match="Failed to open Zarr store with consolidated metadata"):
        _open(store)
    with pytest.raises(FileNotFoundError, match="consolidated=True but no consolidated metadata"):
        _open(store, consolidated=True)
    _open(store, consolidated=False)  # no warning


def test_arrays_without_dimension_names_are_skipped_with_a_warning():
    store = MemoryStore()
    g = zarr_dask.create_group(store)
    g.create_array("named", shape=(3,), dtype="i4", dimension_names=["x"])[:] = [1, 2, 3]
    g.create_array("anonymous", shape=(3,), dtype="i4")
    g.create_array("half", shape=(3, 2), dtype="i4", dimension_names=["x", None])
    with pytest.warns(SkippedVariableWarning) as record:
        ds = _open(store, consolidated=False)
    assert set(ds.variables) == {"named"}
    messages = " ".join(str(w.message) for w in record)
    assert "'anonymous'" in messages and "'half'" in messages and "dimension_names" in messages


def test_no_openable_array_raises_xarrays_key_error():
    store = MemoryStore()
    zarr_dask.create_group(store).create_array("anonymous", shape=(3,), dtype="i4")
    with pytest.raises(KeyError, match="required for xarray to determine variable dimensions"):
        _open(store, consolidated=False)
    empty = MemoryStore()
    zarr_dask.create_group(empty)
    assert len(_open(empty, consolidated=False).variables) == 0  # an empty group is an empty dataset


def test_unknown_codec_skips_only_that_variable():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(2), store, consolidated=False)
    doc = json.loads(store.get("v1/zarr.json"))
    doc["codecs"].append({"name": "made-up-codec"})
    store.set("v1/zarr.json", json.dumps(doc).encode())
    with pytest.warns(SkippedVariableWarning, match="unknown codec 'made-up-codec'"):
        ds = _open(store, consolidated=False)
    assert "v0" in ds and "v1" not in ds
    with pytest.warns(SkippedVariableWarning, match="'v1'"):
        assert "v1" not in _open(store, consolidated=False, drop_variables="v0")


def test_nczarr_dimension_names():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(xr.Dataset({"v": (("y", "x"), np.ones((2, 3)))}), store, zarr_format=2, consolidated=False)
    attrs = json.loads(store.get("v/.zattrs"))
    del attrs["_ARRAY_DIMENSIONS"]
    attrs["_nczarr_attr"] = {"types": {}}
    store.set("v/.zattrs", json.dumps(attrs).encode())
    zarray = json.loads(store.get("v/.zarray"))
    zarray["_NCZARR_ARRAY"] = {"dimrefs": ["/y", "/x"], "storage": "chunked"}
    store.set("v/.zarray", json.dumps(zarray).encode())
    store.set(".zgroup", json.dumps({"zarr_format": 2, "_nczarr_group": {"dims": {"y": 2, "x": 3}}}).encode())
    ds = _open(store, consolidated=False)
    assert ds.v.dims == ("y", "x") and "_nczarr_attr" not in ds.v.attrs


def test_fill_value_masking_defaults_and_switch():
    store = MemoryStore()
    zarr_dask.create_group(store, zarr_format=3).create_array(
        "a", shape=(3,), dtype="i2", fill_value=5, dimension_names=["x"]
    )[:] = [1, 5, 3]
    assert list(_open(store, consolidated=False).a.values) == [1, 5, 3]  # v3: fill_value is not a mask
    assert _open(store, consolidated=False).a.encoding["fill_value"] == 5
    masked = _open(store, consolidated=False, use_zarr_fill_value_as_mask=True).a.values
    assert np.isnan(masked[1]) and masked[0] == 1


def test_v3_numeric_float_fill_value_attribute_is_refused_like_xarray():
    store = MemoryStore()
    zarr_dask.create_group(store).create_array(
        "a", shape=(2,), dtype="f4", dimension_names=["x"], attributes={"_FillValue": -1.0}
    )
    with pytest.raises(TypeError, match="Failed to decode fill_value: expected str or bytes"):
        _open(store, consolidated=False)


def test_groups_and_implicit_groups():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(1), store, group="a/b")
    assert _open(store, group="a/b").v0.shape == (4, 3)
    # remove the intermediate group documents: "a" becomes an implicit group
    for key in [k for k in store.list_prefix("") if k in ("a/zarr.json", "zarr.json")]:
        store.delete(key)
    tree = xr.open_datatree(store, engine="zarr_dask", consolidated=False)
    assert tree["a/b"].v0.shape == (4, 3)
    with pytest.warns(RuntimeWarning, match="Failed to open Zarr store with consolidated metadata"):
        assert "v0" in _open(store, group="a/b")


def test_sharded_preferred_chunks_are_shards():
    store = MemoryStore()
    a = zarr_dask.create_group(store).create_array(
        "a", shape=(16, 6), dtype="i4", chunks=(2, 3), shards=(8, 6), dimension_names=["y", "x"]
    )
    a[:] = np.arange(96).reshape(16, 6)
    ds = _open(store, consolidated=False, chunks={})
    assert ds.a.encoding["chunks"] == (2, 3) and ds.a.encoding["shards"] == (8, 6)
    assert ds.a.chunks == ((8, 8), (6,))
    np.testing.assert_array_equal(ds.a.compute().values, np.arange(96).reshape(16, 6))


def test_opened_dataset_pickles_and_loads_async():
    store = open_store("memory://pickle-me")
    zarr_dask.to_zarr_dataset(_dataset(), store)
    for chunks in (None, {}):
        ds = _open("memory://pickle-me", chunks=chunks)
        again = pickle.loads(pickle.dumps(ds))
        xr.testing.assert_identical(again.load(), _dataset())
    lazy = _open("memory://pickle-me")
    loaded = asyncio.run(lazy.load_async())
    xr.testing.assert_identical(loaded, _dataset())


def test_request_count_of_a_60_variable_open_without_consolidated_metadata():
    """One listing, the root document, each member document once, each coordinate chunk once."""
    ds = xr.Dataset(
        {f"v{i:02d}": (("time", "y", "x"), np.zeros((4, 5, 6), "f4")) for i in range(60)},
        coords={"time": pd.date_range("2000", periods=4), "y": np.arange(5.0), "x": np.arange(6)},
    )
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(ds, store, consolidated=False)
    store = store.with_read_only(True)  # opened as given (a read-only view has its own counters)
    with store.counters.counting() as delta:
        opened = _open(store, chunks={}, consolidated=False)
    assert delta["list"] == 1
    assert delta["get"] == 1 + 63 + 3  # root zarr.json, 63 member documents, the 3 coordinate chunks
    assert delta["get_range"] == 0
    with store.counters.counting() as delta:
        opened["v00"].compute()  # data is read only when asked for
    assert delta["get"] == 1


def test_request_count_of_a_consolidated_open():
    ds = xr.Dataset(
        {f"v{i:02d}": (("time", "x"), np.zeros((4, 6), "f4")) for i in range(60)},
        coords={"time": pd.date_range("2000", periods=4), "x": np.arange(6)},
    )
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(ds, store, zarr_format=2)
    store = store.with_read_only(True)
    with store.counters.counting() as delta:
        _open(store, chunks={})
    # v2 is found after one miss on zarr.json: zarr.json, .zgroup, .zattrs, .zarray, .zmetadata + 2 coordinates
    assert delta["list"] == 0 and delta["get"] == 5 + 2
    store3 = MemoryStore()
    zarr_dask.to_zarr_dataset(ds, store3)
    store3 = store3.with_read_only(True)
    with store3.counters.counting() as delta:
        _open(store3, chunks={})
    assert delta["list"] == 0 and delta["get"] == 1 + 2


def test_datatree_open_reads_the_hierarchy_once():
    store = MemoryStore()
    tree = xr.DataTree.from_dict(
        {f"/g{i}/sub": xr.Dataset({"v": ("x", np.arange(3))}) for i in range(5)} | {"/": xr.Dataset(attrs={"a": 1})}
    )
    zarr_dask.to_zarr_datatree(tree, store, consolidated=False)
    store = store.with_read_only(True)
    with store.counters.counting() as delta:
        got = xr.open_datatree(store, engine="zarr_dask", consolidated=False)
    xr.testing.assert_identical(got.load(), tree)
    assert delta["list"] == 1 + 5 + 5  # one listing per group, levels listed concurrently
    groups = xr.open_groups(store, engine="zarr_dask", consolidated=False, group="g1")
    assert sorted(groups) == ["/", "/sub"]


def test_wrong_zarr_format_and_missing_bucket_say_so(tmp_path, s3_storage_options):
    url = str(tmp_path / "v3.zarr")
    zarr_dask.to_zarr_dataset(xr.Dataset({"v": ("x", np.arange(3))}), url, zarr_format=3)
    with pytest.raises(FileNotFoundError, match="there is a Zarr v3 group there: pass zarr_format=3"):
        xr.open_dataset(url, engine="zarr_dask", zarr_format=2)
    with pytest.raises(FileNotFoundError, match="the bucket 'zd-no-such-bucket-either' does not exist"):
        xr.open_dataset("s3://zd-no-such-bucket-either/x.zarr", engine="zarr_dask",
                        storage_options=s3_storage_options)  # fmt: skip


@pytest.mark.parametrize("consolidated", [None, True, False])
def test_a_data_type_this_installation_cannot_decode_skips_only_that_variable(monkeypatch, consolidated):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    store = MemoryStore()
    ds = xr.Dataset({"ok": ("x", np.arange(3)), "bf": ("x", np.ones(3, dtype=ml_dtypes.bfloat16))})
    zarr_dask.to_zarr_dataset(ds, store, consolidated=consolidated is not False)
    monkeypatch.setitem(__import__("sys").modules, "ml_dtypes", None)  # as if not installed
    with pytest.warns(SkippedVariableWarning) as record:
        opened = _open(store, consolidated=consolidated)
    assert list(opened.data_vars) == ["ok"] and opened["ok"].values.tolist() == [0, 1, 2]
    (message,) = {str(w.message) for w in record}
    assert "'bf'" in message and "'bfloat16'" in message and "pip install 'zarr-dask[ml]'" in message
    assert message.count(store.url) == 1  # the store is named once


def test_an_unreadable_v2_consolidated_entry_skips_only_that_variable():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(2), store, zarr_format=2)
    doc = json.loads(store.get(".zmetadata"))
    doc["metadata"]["v1/.zarray"]["dtype"] = "<f3"  # no such float
    store.set(".zmetadata", json.dumps(doc).encode())
    with pytest.warns(SkippedVariableWarning, match=r"node '/v1': the array 'v1' was not opened.*'<f3'") as record:
        ds = _open(store, consolidated=True)
    assert "v0" in ds and "v1" not in ds and len(record) == 1
