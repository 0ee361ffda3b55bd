"""Stores in this process's memory (fsspec's ``memory://``, ``MemoryStore``, a Python mapping) and schedulers
that run tasks in other processes: a write is refused before anything is written, and a task that reaches
another process anyway fails instead of reading nothing or writing into a copy (both used to be silent: the
write "succeeded" and read back as fill values)."""

from __future__ import annotations

import os
import pickle
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store.api import open_store
from zarr_dask.store.memory import MemoryStore, _rebuild_memory_store


def _targets(tmp_name: str) -> list[Any]:
    return [f"memory://{tmp_name}", MemoryStore(), {}]


@pytest.mark.parametrize("kind", [0, 1, 2], ids=["memory-url", "MemoryStore", "dict"])
@pytest.mark.parametrize("api", ["dask", "xarray"])
def test_a_write_with_the_processes_scheduler_is_refused_before_writing(kind: int, api: str) -> None:
    target = _targets(f"refused-{api}-{kind}")[kind]
    with dask.config.set(scheduler="processes"), pytest.raises(UnsupportedFeatureError, match="other processes"):
        if api == "dask":
            zarr_dask.to_zarr(da.arange(10.0, chunks=5), target)
        else:
            zarr_dask.to_zarr_dataset(xr.Dataset({"v": ("x", np.arange(10.0))}).chunk(x=5), target)
    store = open_store(target)
    assert store.list_prefix("") == []  # nothing written
    with dask.config.set(scheduler="threads"):  # the same write in this process
        zarr_dask.to_zarr(da.arange(10.0, chunks=5), target)
    np.testing.assert_array_equal(zarr_dask.open_array(target)[:], np.arange(10.0))


def test_reading_fsspec_memory_in_another_process_fails_instead_of_reading_nothing() -> None:
    a = zarr_dask.create_array("memory://read-elsewhere", shape=(10,), dtype="f8", chunks=(5,))
    a[:] = np.arange(10.0)
    with pytest.raises(UnsupportedFeatureError, match="cannot see"):
        zarr_dask.from_zarr("memory://read-elsewhere").compute(scheduler="processes", num_workers=1)
    np.testing.assert_array_equal(zarr_dask.from_zarr("memory://read-elsewhere").compute(), np.arange(10.0))
    # in this process a pickled store is the same store
    assert pickle.loads(pickle.dumps(open_store("memory://read-elsewhere"))).get("zarr.json") is not None


def test_a_memory_store_copy_in_another_process_reads_its_snapshot_and_refuses_writes() -> None:
    copy = _rebuild_memory_store("m", False, {"k": b"v"}, home=os.getpid() + 1)  # as unpickled elsewhere
    assert copy.get("k") == b"v"
    with pytest.raises(UnsupportedFeatureError, match="would be lost with the copy"):
        copy.set("k", b"w")
    with pytest.raises(UnsupportedFeatureError, match="would be lost with the copy"):
        copy.delete_many(["k"])
    again = pickle.loads(pickle.dumps(copy))  # still a copy of the other process's store
    with pytest.raises(UnsupportedFeatureError):
        again.set("k", b"w")
    own = pickle.loads(pickle.dumps(MemoryStore("n")))  # this process's own: writable
    own.set("k", b"v")
    assert own.get("k") == b"v"


def test_process_local_is_reported() -> None:
    assert open_store("memory://x").process_local
    assert open_store("latency::memory://y", storage_options={"latency": {"seconds": 0}}).process_local
    assert MemoryStore().process_local and open_store({}).process_local
    assert not open_store("file:///tmp/zd-not-local").process_local


def test_an_fsspec_memory_store_unpickled_elsewhere_refuses_every_use() -> None:
    """Unpickling itself never fails (a distributed worker that cannot deserialize a task hangs the
    computation); the task that uses the store fails, naming why."""
    from zarr_dask.store.fsspec_store import ElsewhereStore, _rebuild_from_url

    store = _rebuild_from_url("memory://elsewhere", {}, False, home=os.getpid() + 1)
    assert isinstance(store, ElsewhereStore)
    for call in (lambda: store.get("k"), lambda: store.set("k", b"v"), lambda: store.list_dir("")):
        with pytest.raises(UnsupportedFeatureError, match="cannot see"):
            call()
    assert isinstance(pickle.loads(pickle.dumps(store)), ElsewhereStore)
