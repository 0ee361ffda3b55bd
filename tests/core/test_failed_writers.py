"""Rows a failed or killed writer left beyond an array's shape never show up as data (of anyone)."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

import zarr_dask
from zarr_dask.store import open_store


def _leave_garbage(a: Any) -> None:
    """What an append killed before its commit leaves: chunks beyond the shape, and the edge chunk's overhang."""
    grown = zarr_dask.core.array.Array(a.store, a.path, a._resized((a.shape[0] + 9, a.shape[1])))
    grown[a.shape[0] :, :] = 99  # written beyond the committed shape, never committed


def test_growing_shows_fill_not_a_failed_writers_rows(every_store_url: tuple[Any, Any]) -> None:
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    a = zarr_dask.create_array(store, shape=(6, 3), dtype="i4", chunks=(4, 3), fill_value=-1)
    a[:] = 1
    _leave_garbage(a)
    assert zarr_dask.open_array(store).shape == (6, 3)  # the failed append committed nothing
    a.resize((15, 3))
    got = zarr_dask.open_array(store)[:]
    assert (got[:6] == 1).all() and (got[6:] == -1).all()


def test_the_next_append_then_a_resize_show_only_real_rows(every_store_url: tuple[Any, Any]) -> None:
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    a = zarr_dask.create_array(store, shape=(5, 2), dtype="i4", chunks=(4, 2), fill_value=0)
    a[:] = 1
    _leave_garbage(a)
    assert zarr_dask.append(da.full((2, 2), 7, dtype="i4", chunks=1), store) == (7, 2)
    b = zarr_dask.open_array(store, mode="r+")
    np.testing.assert_array_equal(b[:, 0], [1, 1, 1, 1, 1, 7, 7])
    b.resize((14, 2))
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:, 0], [1] * 5 + [7, 7] + [0] * 7)
