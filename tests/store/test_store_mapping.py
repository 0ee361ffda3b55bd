"""``MappingStore``: the one store over a caller's ``MutableMapping`` (``{}``, zarr-python's MemoryStore dict),
for the dask gateway and the xarray backend alike. Writes never go to a copy in another process: a writable
store refuses to pickle and a write with a multi-process scheduler is refused before anything is written."""

from __future__ import annotations

import pickle
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store.mapping import MappingStore


def test_writable_refuses_to_pickle_read_only_pickles_a_snapshot() -> None:
    data: dict = {}
    store = MappingStore(data)
    store.set("k", b"v")
    with pytest.raises(UnsupportedFeatureError, match="cannot be sent to other processes"):
        pickle.dumps(store)
    snapshot = pickle.loads(pickle.dumps(store.with_read_only(True)))
    assert snapshot.get("k") == b"v" and snapshot.read_only
    data["k"] = b"changed"  # a snapshot: later changes are not in it
    assert snapshot.get("k") == b"v"


def test_two_stores_over_one_dict_share_compare_and_swap() -> None:
    data: dict = {}
    a, b = MappingStore(data), MappingStore(data)
    assert a.set_if_not_exists("k", b"1")
    assert not b.set_if_not_exists("k", b"2")
    assert data == {"k": b"1"}


def test_wrapped_values_read_as_stable_bytes() -> None:
    class Box:
        def __init__(self, raw: bytes) -> None:
            self.raw = raw

        def to_bytes(self) -> bytes:
            return self.raw

    data: dict = {}
    store = MappingStore(data, wrap=Box)
    store.set("k", b"abc")
    assert isinstance(data["k"], Box)
    first = store.get("k")
    assert first == b"abc" and store.get("k") is first  # the same object: the version conditional writes compare
    data["k"] = Box(b"xyz")
    assert store.get("k") == b"xyz"


@pytest.mark.parametrize("which", ["dask", "xarray"])
def test_a_multi_process_write_into_a_dict_is_refused_before_writing(tmp_path: Path, which: str) -> None:
    """Before, xarray's path pickled the dict into the process pool's workers: the write "succeeded" and read
    back as the fill value (every chunk went to a copy)."""
    store: dict = {}
    with dask.config.set(scheduler="processes"), pytest.raises(UnsupportedFeatureError, match="other processes"):
        if which == "dask":
            zarr_dask.to_zarr(da.arange(10.0, chunks=5), store)
        else:
            zarr_dask.to_zarr_dataset(xr.Dataset({"v": ("x", np.arange(10.0))}).chunk(x=5), store)
    assert store == {}
    with dask.config.set(scheduler="threads"):  # in this process: fine
        zarr_dask.to_zarr_dataset(xr.Dataset({"v": ("x", np.arange(10.0))}).chunk(x=5), store)
    np.testing.assert_array_equal(xr.open_dataset(store, engine="zarr_dask").v.values, np.arange(10.0))
