"""How an open talks to the store: which batches, in which order, and that the early coordinate read changes
nothing about the Dataset (order, values, errors). Timing is measured in ``benchmarks/bench_xarray.py``."""

from __future__ import annotations

import json
import pickle
import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.errors import InvalidPathError, ZarrDaskError
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.store import MemoryStore
from zarr_dask.xarray_backend.datastore import ZarrDaskDataStore
from zarr_dask.xarray_backend.hierarchy import load_hierarchy
from zarr_dask.xarray_backend.prefetch import CoordinatePrefetch, EarlyCoordinates, coordinate_metadata


class BatchLog(MemoryStore):
    """A read-only view of a MemoryStore that records every batched read and listing, in order."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store.name, read_only=True)
        self._data, self._lock = store._data, store._lock
        self.log: list[tuple[str, tuple[str, ...]]] = []
        self._log_lock = threading.Lock()

    def get_many(self, keys: Any) -> dict[str, bytes]:
        with self._log_lock:
            self.log.append(("get", tuple(keys)))
        return super().get_many(keys)

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        with self._log_lock:
            self.log.append(("list", (prefix,)))
        return super().list_dir(prefix)


def _dataset(nvars: int = 4) -> xr.Dataset:
    return xr.Dataset(
        {f"v{i}": (("time", "x"), np.arange(12.0).reshape(4, 3) + i) for i in range(nvars)},
        coords={
            "time": pd.date_range("2000-01-01", periods=4),
            "x": [10, 20, 30],
            "a_label": ("x", ["p", "q", "r"]),  # a non-dimension coordinate sorting before "time"
        },
        attrs={"title": "t"},
    )


def _batches(store: BatchLog) -> list[tuple[str, tuple[str, ...]]]:
    return [(kind, tuple(sorted(keys))) for kind, keys in store.log]


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_open_is_one_document_read_then_one_coordinate_read(fmt):
    written = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), written, zarr_format=fmt)
    store = BatchLog(written)
    ds = xr.open_dataset(store, engine="zarr_dask", chunks={}, zarr_format=fmt)
    chunk = "c/0" if fmt == 3 else "0"
    *_, coords = _batches(store)
    assert coords == ("get", (f"time/{chunk}", f"x/{chunk}"))
    assert len(store.log) == 2
    assert ds.time.values[0] == np.datetime64("2000-01-01") and list(ds.x.values) == [10, 20, 30]


def test_unconsolidated_open_is_listing_documents_then_coordinates():
    written = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), written, consolidated=False)
    store = BatchLog(written)
    xr.open_dataset(store, engine="zarr_dask", consolidated=False)
    kinds = [kind for kind, _ in store.log]
    assert sorted(kinds[:2]) == ["get", "list"]  # the group's document || the listing
    assert kinds[2:] == ["get", "get"]  # every member document, then every coordinate chunk
    assert store.log[-1][1] == ("time/c/0", "x/c/0")


def test_datatree_reads_the_coordinates_of_all_groups_in_one_batch():
    written = MemoryStore()
    tree = xr.DataTree.from_dict({f"/g{i}": _dataset(2) for i in range(4)})
    zarr_dask.to_zarr_datatree(tree, written)
    store = BatchLog(written)
    got = xr.open_datatree(store, engine="zarr_dask")
    assert len(store.log) == 2  # the consolidated document, then 4 groups x 2 coordinates at once
    assert len(store.log[1][1]) == 8
    xr.testing.assert_identical(got.load(), tree)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_group_below_consolidated_metadata_at_the_root(fmt):
    written = MemoryStore()
    sub = _dataset(2).rename(x="y", time="t")  # own coordinates (not inherited from the root)
    zarr_dask.to_zarr_datatree(xr.DataTree.from_dict({"/": _dataset(1), "/deep/sub": sub}), written, zarr_format=fmt)
    store = BatchLog(written)
    got = xr.open_dataset(store, engine="zarr_dask", group="deep/sub", zarr_format=fmt)
    chunk = "c/0" if fmt == 3 else "0"
    assert len(store.log) == 2 and store.log[1] == ("get", (f"deep/sub/t/{chunk}", f"deep/sub/y/{chunk}"))
    xr.testing.assert_identical(got, sub)


def test_variable_order_and_content_are_xarrays_own_decoding():
    """The coordinates are decoded last internally; the Dataset is what StoreBackendEntrypoint makes of the
    same data store (order included)."""
    from xarray.backends.store import StoreBackendEntrypoint

    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), store)
    ours = xr.open_dataset(store, engine="zarr_dask")
    plain = ZarrDaskDataStore(load_hierarchy(store), prefetch_coordinates=False)
    reference = xr.open_dataset(plain, engine=StoreBackendEntrypoint)
    assert list(ours.variables) == list(reference.variables)
    assert list(ours.coords) == list(reference.coords)
    xr.testing.assert_identical(ours, reference)


def test_dropped_coordinates_are_not_read():
    written = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), written)
    store = BatchLog(written)
    ds = xr.open_dataset(store, engine="zarr_dask", drop_variables=["x", "a_label"])
    assert "x" not in ds.variables and store.log[-1] == ("get", ("time/c/0",))


def test_a_corrupt_coordinate_fails_the_open_naming_it_and_only_it():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(), store)
    store.set("x/c/0", b"not zstd at all")
    with pytest.raises(ZarrDaskError, match="node '/x': chunk 'x/c/0'"):
        xr.open_dataset(store, engine="zarr_dask")
    ds = xr.open_dataset(store, engine="zarr_dask", drop_variables="x")  # the rest is fine
    assert ds.time.size == 4


def test_unsafe_member_names_are_left_to_the_full_parse():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(1), store)
    doc = json.loads(store.get("zarr.json"))
    entries = doc["consolidated_metadata"]["metadata"]
    entries["../evil"] = dict(entries["x"], dimension_names=["../evil"])
    store.set("zarr.json", json.dumps(doc).encode())
    with pytest.raises(InvalidPathError, match="evil"):
        xr.open_dataset(store, engine="zarr_dask")


# ------------------------------------------------------------------------------------- the pieces
def test_load_hierarchy_peeks_at_raw_members_per_batch():
    store = MemoryStore()
    sub = _dataset(1).rename(x="y", time="t")
    zarr_dask.to_zarr_datatree(xr.DataTree.from_dict({"/": _dataset(1), "/sub": sub}), store)
    seen: list[dict[str, Any]] = []
    load_hierarchy(store, consolidated=True, max_depth=None, peek=seen.append)
    assert len(seen) == 1 and set(seen[0]) == {"", "sub"}  # one batch: the consolidated document
    assert seen[0]["sub"]["y"]["zarr.json"]["dimension_names"] == ["y"]  # decoded JSON
    seen.clear()
    load_hierarchy(store, consolidated=False, max_depth=None, peek=seen.append)
    assert [set(batch) for batch in seen] == [{""}, {"sub"}]  # one batch per level
    assert isinstance(seen[0][""]["x"]["zarr.json"], bytes)  # as read
    seen.clear()
    load_hierarchy(store, consolidated=True, peek=seen.append)  # max_depth=1: the group's own members
    assert [set(batch) for batch in seen] == [{""}]


def test_coordinate_metadata_from_raw_documents():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(1), store, zarr_format=2)
    v2 = {name: store.get(f"x/{name}") for name in (".zarray", ".zattrs")}
    assert coordinate_metadata("x", v2) is not None
    assert coordinate_metadata("v0", {n: store.get(f"v0/{n}") for n in (".zarray", ".zattrs")}) is None
    assert coordinate_metadata("a_label", {n: store.get(f"a_label/{n}") for n in (".zarray", ".zattrs")}) is None
    assert coordinate_metadata("x", {".zarray": b"{not json", ".zattrs": v2[".zattrs"]}) is None
    assert coordinate_metadata("x", {"zarr.json": ["not", "an", "object"]}) is None


def test_prefetch_pickles_by_configuration_and_serves_each_array_once():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(1), store)
    x = ArrayHandle(store, "x", zarr_dask.open_array(store, path="x").metadata)
    prefetch = CoordinatePrefetch([x])
    prefetch.start()
    again = pickle.loads(pickle.dumps(prefetch))
    for p in (prefetch, again):
        assert p.holds(x)
        assert list(p.take(x, whole=False)) == [10, 20, 30]
        assert list(p.take(x, whole=True)) == [10, 20, 30]
        assert p.take(x, whole=True) is None


def test_early_coordinates_skip_what_the_open_would_skip():
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(1), store, consolidated=False)
    doc = json.loads(store.get("x/zarr.json"))
    doc["codecs"].append({"name": "made-up-codec"})
    store.set("x/zarr.json", json.dumps(doc).encode())
    early = EarlyCoordinates(store, "", drop_variables=["time"])
    load_hierarchy(store, consolidated=False, peek=early)
    assert early.get() is None  # time dropped, x unreadable: nothing to prefetch


def test_backend_array_unpickles_lazily_and_tokenizes_by_configuration():
    """dask tokenizes xarray's wrappers by pickling and unpickling them: that must not rebuild stores."""
    from dask.base import tokenize
    from xarray.core.indexing import BasicIndexer

    from zarr_dask.xarray_backend.backend_array import ZarrDaskBackendArray

    store = MemoryStore()
    zarr_dask.to_zarr_dataset(_dataset(2), store)
    v0 = ArrayHandle(store, "v0", zarr_dask.open_array(store, path="v0").metadata)
    array = ZarrDaskBackendArray(v0, name="v0")
    again = pickle.loads(pickle.dumps(array))
    assert again._handle is None and (again.shape, again.dtype, again.name) == (array.shape, array.dtype, "v0")
    assert tokenize(again) == tokenize(array) == tokenize(pickle.loads(pickle.dumps(again)))
    np.testing.assert_array_equal(again[BasicIndexer((slice(None), 1))], [1.0, 4.0, 7.0, 10.0])
    assert again.handle == v0
    first, second = (xr.open_dataset(store, engine="zarr_dask") for _ in range(2))
    assert tokenize(first.v0.variable._data) == tokenize(second.v0.variable._data)
    assert tokenize(first.v0.variable._data) != tokenize(first.v1.variable._data)


def test_sharded_and_empty_coordinates_come_through_the_prefetch():
    store = MemoryStore()
    g = zarr_dask.create_group(store)
    g.create_array("x", shape=(8,), dtype="i4", chunks=(2,), shards=(4,), dimension_names=["x"])[:] = np.arange(8)
    g.create_array("y", shape=(0,), dtype="f8", dimension_names=["y"])
    g.create_array("t", shape=(3,), dtype="f8", chunks=(2,), dimension_names=["t"])[:2] = [1.0, 2.0]  # 2nd missing
    g.create_array("v", shape=(8, 0), dtype="f4", dimension_names=["x", "y"])
    ds = xr.open_dataset(store, engine="zarr_dask", consolidated=False)
    assert list(ds.x.values) == list(range(8)) and ds.y.size == 0
    assert list(ds.t.values[:2]) == [1.0, 2.0] and ds.t.values[2] == 0.0  # fill value of a missing chunk
