"""Arrays and groups on every kind of store: memory, local files, fsspec memory://, S3 (moto server)."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_hierarchy_on_every_store(any_store_url, zarr_format):
    url, options = any_store_url
    root = zarr_dask.create_group(url, zarr_format=zarr_format, attributes={"a": 1}, storage_options=options)
    arr = root.create_array("x/y", shape=(9, 7), dtype="f8", chunks=(4, 3), compressors="zstd", fill_value=np.nan)
    data = np.arange(63.0).reshape(9, 7)
    arr[:, :5] = data[:, :5]
    arr[2:, 5:] = data[2:, 5:]
    again = zarr_dask.open_array(url, path="x/y", mode="r", storage_options=options)
    expected = data.copy()
    expected[:2, 5:] = np.nan
    np.testing.assert_array_equal(again[:], expected)
    np.testing.assert_array_equal(again[1:8:3, ::-2], expected[1:8:3, ::-2])
    g = zarr_dask.consolidate_metadata(url, storage_options=options)
    assert sorted(dict(g.members(max_depth=None))) == ["x", "x/y"]
    assert zarr_dask.open_group(url, mode="r", storage_options=options).attrs["a"] == 1
    assert again.nchunks_initialized == 9


def test_batched_reads_are_one_call_per_batch(any_store_url):
    url, options = any_store_url
    a = zarr_dask.create_array(url, shape=(64,), dtype="i4", chunks=(4,), storage_options=options)
    a[:] = np.arange(64)
    store = zarr_dask.open_array(url, mode="r", storage_options=options).store
    reader = zarr_dask.Array(store, "", a.metadata)
    with store.counters.counting() as delta:
        np.testing.assert_array_equal(reader[:], np.arange(64))
    assert delta["get"] == 16  # one request per chunk key, never more
