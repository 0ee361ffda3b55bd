"""Array.resize / append / attribute updates keep the consolidated metadata of enclosing groups fresh."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import zarr_dask


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("change", ["resize", "append", "attrs"])
def test_metadata_changes_refresh_consolidated_metadata(
    memory_url: str, zarr_format: Literal[2, 3], change: str
) -> None:
    root = zarr_dask.create_group(memory_url, zarr_format=zarr_format)
    g = root.create_group("g")
    a = g.create_array("x", shape=(4, 3), dtype="i4", chunks=(2, 3))
    a[:] = np.arange(12).reshape(4, 3)
    zarr_dask.consolidate_metadata(memory_url)
    if change == "resize":
        a.resize((6, 3))
    elif change == "append":
        a.append(np.full((2, 3), 7, dtype="i4"))
    else:
        a.update_attributes({"units": "m"})
    seen = zarr_dask.open_group(memory_url, use_consolidated=True)["g/x"]
    assert seen.shape == a.shape
    assert dict(seen.attrs) == dict(a.attrs)
    assert zarr_dask.check_consolidated(memory_url) == []


def test_no_consolidated_metadata_is_started(memory_url: str) -> None:
    root = zarr_dask.create_group(memory_url)
    a = root.create_array("x", shape=(4,), dtype="i1")
    a.resize((8,))
    assert zarr_dask.open_group(memory_url).consolidated_metadata is None
