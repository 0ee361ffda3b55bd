"""The format of a new array written by ``to_zarr`` without ``zarr_format``: it follows the hierarchy."""

from __future__ import annotations

import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import zarr_dask


@pytest.mark.parametrize("root_format", [2, 3])
def test_a_new_array_follows_the_nearest_group(tmp_path: Path, root_format: int) -> None:
    url = str(tmp_path / "h.zarr")
    zarr_dask.create_group(url, zarr_format=root_format)
    x = da.arange(20, chunks=5)
    zarr_dask.to_zarr(x, url, component="sub/x")
    a = zarr_dask.open_array(f"{url}/sub/x")
    assert a.metadata.zarr_format == root_format
    sub = tmp_path / "h.zarr" / "sub"
    assert (sub / (".zgroup" if root_format == 2 else "zarr.json")).exists()  # the new parent too
    assert not (sub / ("zarr.json" if root_format == 2 else ".zgroup")).exists()
    np.testing.assert_array_equal(a[...], np.arange(20))


def test_nearest_group_wins(tmp_path: Path) -> None:
    url = str(tmp_path / "mixed.zarr")
    zarr_dask.create_group(url, zarr_format=3)
    zarr_dask.create_group(f"{url}/old", zarr_format=2)
    zarr_dask.to_zarr(da.ones(4, chunks=2), url, component="old/y")
    assert zarr_dask.open_array(f"{url}/old/y").metadata.zarr_format == 2


def test_overwrite_keeps_the_format_and_explicit_format_wins(tmp_path: Path) -> None:
    url = str(tmp_path / "o.zarr")
    zarr_dask.to_zarr(da.zeros(6, chunks=3), url, zarr_format=2)
    zarr_dask.to_zarr(da.ones(6, chunks=3), url, overwrite=True)
    assert json.loads((tmp_path / "o.zarr" / ".zarray").read_text())["zarr_format"] == 2
    zarr_dask.to_zarr(da.ones(6, chunks=3), url, overwrite=True, zarr_format=3)
    assert zarr_dask.open_array(url).metadata.zarr_format == 3


def test_no_hierarchy_means_v3(tmp_path: Path) -> None:
    url = str(tmp_path / "new.zarr")
    zarr_dask.to_zarr(da.ones(4, chunks=2), url, component="a/b")
    assert zarr_dask.open_array(f"{url}/a/b").metadata.zarr_format == 3
