"""Dataset and DataTree writes on a distributed cluster with worker processes (one cluster per module):
appends and region writes whose dask chunks straddle Zarr chunks, compared with the in-memory reference;
opened datasets travel to the workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarr_dask
from tests.conftest import local_cluster_client

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster_client(threads_per_worker=2) as c:
        yield c


def _part(start: int, stop: int, chunks: int) -> xr.Dataset:
    values = np.arange(start, stop, dtype="f8")[:, None] * np.arange(1, 5)[None, :]
    return xr.Dataset(
        {"v": (("time", "x"), da.from_array(values, chunks=(chunks, 2))), "n": ("time", np.arange(start, stop))},
        coords={"time": pd.date_range("2001-01-01", periods=stop)[start:], "x": [0, 1, 2, 3]},
    )


@pytest.mark.parametrize("fmt", [2, 3])
def test_appends_from_many_tasks(client, tmp_path, fmt):
    url = str(tmp_path / "append.zarr")
    first = _part(0, 13, 3)
    first.v.encoding["chunks"] = (5, 3)  # every dask block straddles Zarr chunks; the last chunk is partial
    zarr_dask.to_zarr_dataset(first, url, zarr_format=fmt)
    parts = [first]
    for start, stop, chunks in [(13, 21, 2), (21, 22, 1), (22, 40, 4)]:
        part = _part(start, stop, chunks)
        zarr_dask.to_zarr_dataset(part, url, append_dim="time")
        parts.append(part)
    expected = xr.concat([p.compute() for p in parts], dim="time", data_vars="minimal", coords="minimal")
    xr.testing.assert_identical(xr.open_dataset(url, engine="zarr_dask").load(), expected)
    xr.testing.assert_identical(xr.open_dataset(url, engine="zarr_dask", chunks={}).compute(), expected)


@pytest.mark.parametrize("fmt", [2, 3])
def test_region_writes_from_many_tasks(client, tmp_path, fmt):
    url = str(tmp_path / "region.zarr")
    full = _part(0, 40, 8)
    full.v.encoding["chunks"] = (6, 4)
    zarr_dask.to_zarr_dataset(full, url, zarr_format=fmt)
    expected = full.compute()
    for region, chunks in [(slice(1, 29), 3), (slice(31, 40), 2), (slice(0, 7), 7)]:
        n = region.stop - region.start
        new = xr.Dataset(
            {"v": (("time", "x"), da.from_array(np.full((n, 4), -float(region.start)), chunks=(chunks, 3)))}
        )
        zarr_dask.to_zarr_dataset(new, url, region={"time": region})
        expected["v"][region] = -float(region.start)
    xr.testing.assert_identical(xr.open_dataset(url, engine="zarr_dask").load(), expected)


def test_lazy_write_and_opened_datasets_on_workers(client, tmp_path):
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    zarr_dask.to_zarr_dataset(_part(0, 30, 7), src)
    opened = xr.open_dataset(src, engine="zarr_dask", chunks={})  # pickled to the workers
    delayed = zarr_dask.to_zarr_dataset(opened, dst, compute=False)
    client.compute(delayed).result()
    xr.testing.assert_identical(xr.open_dataset(dst, engine="zarr_dask").load(), _part(0, 30, 7).compute())


def test_datatree_append_on_workers(client, tmp_path):
    url = str(tmp_path / "tree.zarr")
    tree = xr.DataTree.from_dict({"/a": _part(0, 9, 4), "/b/c": _part(0, 9, 2)[["n"]]})
    zarr_dask.to_zarr_datatree(tree, url)
    more = xr.DataTree.from_dict({"/a": _part(9, 15, 5), "/b/c": _part(9, 15, 1)[["n"]]})
    zarr_dask.to_zarr_datatree(more, url, append_dim="time")
    got = xr.open_datatree(url, engine="zarr_dask")
    xr.testing.assert_identical(got["a"].to_dataset().load(), _part(0, 15, 4).compute())
    np.testing.assert_array_equal(got["b/c"].n.values, np.arange(15))
