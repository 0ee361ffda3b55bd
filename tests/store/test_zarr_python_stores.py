"""Any zarr-python ``Store`` object works wherever zarr_dask takes a store (issue 24): zarr-python's wrappers
(``LoggingStore``, ``CacheStore``, ``WrapperStore``) and subclasses it does not know, through one recognition
path, for reads and writes, with batches sent concurrently through the store's async API."""

from __future__ import annotations

import asyncio
import logging
import pickle

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.store.zarr_python import ZarrPythonStore

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore, LoggingStore, MemoryStore, WrapperStore  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification"),
    # these stores make no conditional writes: merged keys say so once (docs/safe-writes.md)
    pytest.mark.filterwarnings("ignore::zarr_dask.errors.UnprotectedWriteWarning"),
]


def _cache_store(tmp_path):
    from zarr.experimental.cache_store import CacheStore

    return CacheStore(LocalStore(str(tmp_path / "data")), cache_store=MemoryStore())


KINDS = {
    "logging-local": lambda p: LoggingStore(LocalStore(str(p / "data")), log_level="DEBUG"),
    "cache": _cache_store,
    "wrapper-memory": lambda p: WrapperStore(MemoryStore()),
}


@pytest.fixture(params=sorted(KINDS))
def zstore(request, tmp_path):
    return KINDS[request.param](tmp_path)


def _ds(n=11):
    return xr.Dataset(
        {"v": (("t", "x"), da.from_array(np.arange(n * 6.0).reshape(n, 6), chunks=(3, 6)))},
        coords={"t": np.arange(n), "x": np.arange(6) * 10},
        attrs={"title": "wrapped"},
    )


def test_every_entry_point_opens_the_same_kind_of_store(zstore):
    assert type(zarr_dask.open_store(zstore)) is ZarrPythonStore
    from zarr_dask.xarray_backend.reading import as_store

    assert type(as_store(zstore)) is ZarrPythonStore  # the xarray side shares the one recognition path


def test_dask_arrays_write_append_and_read(zstore):
    x = da.arange(12 * 5, chunks=7).reshape(12, 5)
    zarr_dask.to_zarr(x, zstore, component="a", chunks=(4, 4), shards=(8, 4))
    zarr_dask.to_zarr(x[:2, :2] * 0 - 1, zstore, component="a", region=(slice(3, 5), slice(1, 3)))
    assert zarr_dask.append(x[:3], zstore, component="a") == (15, 5)
    expected = np.concatenate([x.compute(), x[:3].compute()])
    expected[3:5, 1:3] = -1
    np.testing.assert_array_equal(zarr_dask.from_zarr(zstore, component="a").compute(), expected)
    np.testing.assert_array_equal(zarr.open_array(zstore, path="a", mode="r")[...], expected)


def test_datasets_write_and_read_with_both_engines(zstore):
    ds = _ds()
    zarr_dask.to_zarr_dataset(ds.isel(t=slice(0, 7)), zstore, group="g", mode="w")
    zarr_dask.to_zarr_dataset(ds.isel(t=slice(7, None)), zstore, group="g", append_dim="t")
    ours = xr.open_dataset(zstore, engine="zarr_dask", group="g").load()
    theirs = xr.open_zarr(zstore, group="g").load()
    xr.testing.assert_identical(ours, ds.compute())
    xr.testing.assert_identical(theirs, ds.compute())


def test_zom_and_convert(zstore, tmp_path):
    zarr_dask.to_zarr_dataset(_ds(), zstore, zarr_format=3)
    out = tmp_path / "converted.zarr"
    zarr_dask.convert(zstore, str(out), chunks={"t": 5})
    xr.testing.assert_identical(xr.open_dataset(out, engine="zarr_dask").load(), _ds().compute())
    spec = zarr_dask.zom.GroupSpec.from_store(zstore)
    assert "v" in spec.members and spec.attributes["title"] == "wrapped"


def test_logging_store_sees_every_request(tmp_path, caplog):
    store = LoggingStore(LocalStore(str(tmp_path / "d")), log_level="INFO")
    zarr_dask.to_zarr(da.arange(20, chunks=5), store, component="a", chunks=(5,))
    with caplog.at_level(logging.INFO, logger="zarr.storage._logging"):
        zarr_dask.from_zarr(store, component="a").compute()
    assert any("c/3" in r.getMessage() for r in caplog.records)  # reads went through the wrapper


class _Slow(WrapperStore):
    """A wrapper whose reads take a while, counting how many are in flight at once."""

    def __init__(self, store):
        super().__init__(store)
        self.now = self.most = 0

    async def get(self, key, prototype, byte_range=None):
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.02)
        self.now -= 1
        return await self._store.get(key, prototype, byte_range)


def test_batches_go_through_the_async_api_concurrently():
    inner = MemoryStore()
    store = zarr_dask.open_store(_Slow(inner))
    store.set_many({f"k/{i}": bytes([i]) * 10 for i in range(40)})
    got = store.get_many([f"k/{i}" for i in range(40)] + ["missing"])
    assert len(got) == 40 and got["k/7"] == b"\x07" * 10
    ranges = store.get_ranges([(f"k/{i}", 2, 4) for i in range(40)] + [("k/1", -3, None), ("k/1", None, -8)])
    assert ranges[:2] == [b"\x00\x00", b"\x01\x01"] and ranges[-2:] == [b"\x01" * 3, b"\x01" * 2]
    assert store.zarr_store.most > 10  # one batch: the reads were in flight together


def test_store_contract_listing_and_pickling(tmp_path):
    store = zarr_dask.open_store(LoggingStore(LocalStore(str(tmp_path / "d")), log_level="DEBUG"))
    store.set_many({"a/zarr.json": b"{}", "a/c/0": b"x", "b": b"yz"})
    assert store.list_dir("") == (["b"], ["a"]) and store.list_prefix("a") == ["a/c/0", "a/zarr.json"]
    assert store.list_prefix_sizes("a") == {"a/c/0": 1, "a/zarr.json": 2}
    assert store.set_if_not_exists("b", b"no") is False and store.get("b") == b"yz"
    store.delete_prefix("a")
    assert store.list_prefix("") == ["b"] and store.exists("b") and not store.exists("a/c/0")
    again = pickle.loads(pickle.dumps(store))
    assert again == store and again.get("b") == b"yz"
    assert zarr_dask.open_store(store.zarr_store) == store  # two wrappers of one object are equal
    view = zarr_dask.open_store(store.zarr_store, read_only=True)
    with pytest.raises(zarr_dask.errors.ReadOnlyError):
        view.set("c", b"1")


def test_a_memory_store_inside_wrappers_is_refused_for_a_cluster_of_processes():
    assert zarr_dask.open_store(WrapperStore(MemoryStore())).process_local


# ------------------------------------------------------------------------------------------ UPath
@pytest.mark.parametrize("kind", ["local", "memory", "s3"])
def test_upath_locations(kind, tmp_path, request, memory_url):
    upath = pytest.importorskip("upath")
    if kind == "local":
        where = upath.UPath(tmp_path / "u.zarr")
    elif kind == "memory":
        where = upath.UPath(memory_url + "/u.zarr")
    else:
        options = request.getfixturevalue("s3_storage_options")
        where = upath.UPath(request.getfixturevalue("s3_bucket_url"), **options)
    ds = _ds()
    zarr_dask.to_zarr_dataset(ds, where, mode="w")
    xr.testing.assert_identical(xr.open_dataset(where, engine="zarr_dask").load(), ds.compute())
    zarr_dask.to_zarr(da.arange(10, chunks=3), where, component="a", chunks=(4,))
    np.testing.assert_array_equal(zarr_dask.from_zarr(where, component="a").compute(), np.arange(10))
    assert zarr_dask.open_store(where).url.endswith("u.zarr") or kind == "s3"
