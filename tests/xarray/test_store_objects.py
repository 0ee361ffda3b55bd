"""The last store kinds xarray accepts (issue 16): ``store=None`` (an in-memory store, returned on the result),
zarr-python's ``ZipStore`` and ``ObjectStore`` (obstore), for reads and writes, against xarray's engine."""

from __future__ import annotations

import pickle
import warnings
import zipfile

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.dask_modes import expr_gap
from zarr_dask.errors import UnprotectedWriteWarning, UnsupportedFeatureError

zarr = pytest.importorskip("zarr")
# zarr-python's own warning when it writes the fixed-length strings of the tests' datasets as v3
_V3_STRINGS = "ignore:The data type .* does not have a Zarr V3 specification"
_V3_CONSOLIDATED = "ignore:Consolidated metadata is currently not part"  # and of its v3 consolidated metadata


def _ds(n=10):
    return xr.Dataset(
        {"v": (("t", "x"), da.from_array(np.arange(n * 6.0).reshape(n, 6), chunks=(7, 6))), "s": ("x", np.array(list("abcdef")))},
        coords={"t": np.arange(n), "x": np.arange(6) * 10},
        attrs={"title": "objects"},
    )


# ------------------------------------------------------------------------------------------ store=None
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_store_none_writes_an_in_memory_store_returned_on_the_result(zarr_format):
    ds = _ds()
    result = zarr_dask.to_zarr_dataset(ds, zarr_format=zarr_format)
    assert result.memory_store is not None and result.store == result.memory_store.url
    xr.testing.assert_identical(xr.open_dataset(result.memory_store, engine="zarr_dask").load(), ds.compute())
    other = zarr_dask.to_zarr_dataset(ds.isel(t=slice(2)), None, zarr_format=zarr_format)
    assert other.memory_store is not result.memory_store  # a new store every time, as xarray's
    assert xr.open_dataset(other.memory_store, engine="zarr_dask").sizes["t"] == 2


def test_store_none_lazy_write_and_accessors():
    ds = _ds()
    delayed = zarr_dask.to_zarr_dataset(ds, compute=False)
    result = delayed.compute()
    xr.testing.assert_identical(xr.open_dataset(result.memory_store, engine="zarr_dask").load(), ds.compute())
    via_accessor = ds.zarr_dask.to_zarr()
    assert xr.open_dataset(via_accessor.memory_store, engine="zarr_dask").v.values.sum() == ds.v.compute().values.sum()
    arr = xr.DataArray(np.arange(4), dims="z", name="a").zarr_dask.to_zarr()
    assert xr.open_dataarray(arr.memory_store, engine="zarr_dask").values.tolist() == [0, 1, 2, 3]
    dt = xr.DataTree.from_dict({"/": xr.Dataset(attrs={"k": 1}), "/g": ds.compute()})
    tree = zarr_dask.to_zarr_datatree(dt)
    back = xr.open_datatree(tree.memory_store, engine="zarr_dask")
    xr.testing.assert_identical(back["g"].to_dataset().load(), ds.compute())
    assert zarr_dask.to_zarr_dataset(ds, {}).memory_store is None  # a store given: nothing to hand back


def test_store_none_stays_in_this_process_and_takes_no_storage_options():
    result = zarr_dask.to_zarr_dataset(_ds())
    with pytest.raises(UnsupportedFeatureError, match="cannot be sent to other processes"):
        pickle.dumps(result.memory_store)
    with pytest.raises(ValueError, match="storage_options"):
        zarr_dask.to_zarr_dataset(_ds(), storage_options={"anon": True})


# ------------------------------------------------------------------------------------------- ZipStore
@pytest.mark.filterwarnings(_V3_STRINGS, _V3_CONSOLIDATED)
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("writer", ["zarr_dask", "zarr"])
def test_zip_store_either_engine(tmp_path, zarr_format, writer):
    ds = _ds()
    path = tmp_path / "d.zip"
    out = zarr.storage.ZipStore(path, mode="w")
    if writer == "zarr_dask":
        zarr_dask.to_zarr_dataset(ds, out, zarr_format=zarr_format)
    else:  # zarr-python writes some documents twice into a zip (zipfile warns); in-memory data: see below
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
            ds.compute().to_zarr(out, zarr_format=zarr_format)
    # the written data is readable through the very store object, before closing it
    xr.testing.assert_identical(xr.open_dataset(out, engine="zarr_dask").load(), ds.compute())
    out.close()
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        if writer == "zarr_dask":
            assert len(zf.namelist()) == len(set(zf.namelist()))  # every document written once
    for engine in ("zarr_dask", "zarr"):
        back = xr.open_dataset(zarr.storage.ZipStore(path, mode="r"), engine=engine)
        xr.testing.assert_identical(back.load(), ds.compute())


def test_zip_store_append_adds_entries_and_reads_the_last(tmp_path):
    ds = _ds()
    out = zarr.storage.ZipStore(tmp_path / "d.zip", mode="w")
    zarr_dask.to_zarr_dataset(ds, out, encoding={"v": {"chunks": (5, 6)}})
    more = _ds(5).assign_coords(t=np.arange(10, 15))
    with pytest.warns(UserWarning, match="Duplicate name"):  # zip entries cannot be replaced: appended again
        zarr_dask.to_zarr_dataset(more, out, append_dim="t")
    out.close()
    # (the reference in memory: xarray.concat of dask-backed data meets array-expr's result_type gap)
    expected = xr.concat([ds.compute(), more.compute()], dim="t", data_vars="minimal")
    for engine in ("zarr_dask", "zarr"):
        back = xr.open_dataset(zarr.storage.ZipStore(tmp_path / "d.zip"), engine=engine).load()
        xr.testing.assert_identical(back, expected)


def test_zip_store_refuses_to_delete(tmp_path):
    out = zarr.storage.ZipStore(tmp_path / "d.zip", mode="w")
    zarr_dask.to_zarr_dataset(_ds(), out)
    with pytest.raises(UnsupportedFeatureError, match=r"zip archive cannot delete entries.*new ZipStore") as err:
        zarr_dask.to_zarr_dataset(_ds(), out, mode="w")
    assert "zip://" in str(err.value)
    out.close()
    with pytest.raises(Exception, match="read-only"):
        zarr_dask.to_zarr_dataset(_ds(), zarr.storage.ZipStore(tmp_path / "d.zip", mode="r"), mode="a")


# ---------------------------------------------------------------------------------------- ObjectStore
@pytest.fixture(params=["memory", "local"])
def object_store(request, tmp_path):
    pytest.importorskip("obstore", reason="obstore (zarr-python's ObjectStore backend) is not installed")
    from obstore.store import LocalStore, MemoryStore

    inner = MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path / "objects"), mkdir=True)
    return zarr.storage.ObjectStore(inner)


@pytest.mark.filterwarnings(_V3_STRINGS, _V3_CONSOLIDATED)
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("writer", ["zarr_dask", pytest.param("zarr", marks=expr_gap("store"))])
def test_object_store_either_engine(object_store, zarr_format, writer):
    ds = _ds()
    if writer == "zarr_dask":
        zarr_dask.to_zarr_dataset(ds, object_store, zarr_format=zarr_format)
    else:
        ds.to_zarr(object_store, zarr_format=zarr_format)
    for engine in ("zarr_dask", "zarr"):
        xr.testing.assert_identical(xr.open_dataset(object_store, engine=engine).load(), ds.compute())


def test_object_store_append_overwrite_and_region(object_store):
    ds = _ds()
    zarr_dask.to_zarr_dataset(ds, object_store, encoding={"v": {"chunks": (4, 6)}})
    more = _ds(5).assign_coords(t=np.arange(10, 15))
    # the append completes the partial last chunk: merged once, but with no conditional writes (and no append
    # lease) the store cannot arbitrate other writers, which the first such merge of an array says
    # (docs/safe-writes.md)
    with pytest.warns(UnprotectedWriteWarning, match="cannot make conditional writes"):
        zarr_dask.to_zarr_dataset(more, object_store, append_dim="t")
    # (the reference in memory: xarray.concat of dask-backed data meets array-expr's result_type gap)
    expected = xr.concat([ds.compute(), more.compute()], dim="t", data_vars="minimal")
    xr.testing.assert_identical(xr.open_dataset(object_store, engine="zarr_dask").load(), expected)
    patch = xr.Dataset({"v": (("t", "x"), da.full((3, 6), -1.0, chunks=3))})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprotectedWriteWarning)  # said once per array and process already
        zarr_dask.to_zarr_dataset(patch, object_store, region={"t": slice(3, 6)}, mode="r+")
    expected["v"][3:6] = -1.0
    xr.testing.assert_identical(xr.open_dataset(object_store, engine="zarr").load(), expected)
    zarr_dask.to_zarr_dataset(ds.isel(t=slice(2)), object_store, mode="w")
    assert xr.open_dataset(object_store, engine="zarr_dask").sizes["t"] == 2


# ------------------------------------------------------------------------------------ dask's to_zarr too
def test_dask_to_zarr_and_from_zarr_take_them(tmp_path, object_store):
    x = da.arange(20, chunks=6)
    archive = zarr.storage.ZipStore(tmp_path / "g.zip", mode="w")
    for store in (archive, object_store):
        zarr_dask.to_zarr(x, store, component="a")
        np.testing.assert_array_equal(zarr_dask.from_zarr(store, component="a").compute(), np.arange(20))
    archive.close()
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.ZipStore(tmp_path / "g.zip"), path="a")[:], np.arange(20))
    np.testing.assert_array_equal(zarr.open_array(object_store, path="a")[:], np.arange(20))
