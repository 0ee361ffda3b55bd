"""Interop with zarr-python (test-only oracle) and parity with dask.array.from_zarr / to_zarr."""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.dask_modes import expr_gap
from tests.graph._helpers import SHARDS_SUPPORTED, reference_data

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.oracle
ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_python_reads_what_we_write(tmp_path: Path, zarr_format: int) -> None:
    data = reference_data((33, 21))
    url = str(tmp_path / "ours.zarr")
    zarr_dask.to_zarr(da.from_array(data, chunks=(10, 8)), url, chunks=(7, 6), zarr_format=zarr_format)
    new = reference_data((12, 9), seed=1)
    zarr_dask.to_zarr(da.from_array(new, chunks=5), url, region=(slice(4, 16), slice(2, 11)))
    more = reference_data((5, 21), seed=2)
    zarr_dask.append(da.from_array(more, chunks=3), url)
    data[4:16, 2:11] = new
    expected = np.concatenate([data, more])
    np.testing.assert_array_equal(zarr.open_array(str(url), mode="r")[:], expected)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_we_read_what_zarr_python_writes(tmp_path: Path, zarr_format: int) -> None:
    data = reference_data((40, 30))
    z = zarr.create_array(str(tmp_path / "zp.zarr"), shape=data.shape, chunks=(9, 7), dtype="f8", zarr_format=zarr_format)
    z[:] = data
    x = zarr_dask.from_zarr(str(tmp_path / "zp.zarr"))
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_array_equal(x[3:35:2, -5:].compute(), data[3:35:2, -5:])


@pytest.mark.skipif(not SHARDS_SUPPORTED, reason="create_array(shards=) is not available yet")
def test_sharded_both_directions(tmp_path: Path) -> None:
    data = reference_data((48, 40))
    z = zarr.create_array(str(tmp_path / "zp.zarr"), shape=data.shape, chunks=(4, 5), shards=(16, 20), dtype="f8")
    z[:] = data
    x = zarr_dask.from_zarr(str(tmp_path / "zp.zarr"))
    assert all(c % 16 == 0 for c in x.chunks[0][:-1]) and all(c % 20 == 0 for c in x.chunks[1][:-1])
    np.testing.assert_array_equal(x.compute(), data)
    ours = str(tmp_path / "ours.zarr")
    zarr_dask.to_zarr(da.from_array(data, chunks=(7, 9)), ours, chunks=(4, 5), shards=(16, 20))
    np.testing.assert_array_equal(zarr.open_array(ours, mode="r")[:], data)


@pytest.mark.skipif(ZARR_VERSION < (3, 2), reason=f"zarr-python {zarr.__version__} has no rectilinear grids (3.2+)")
def test_rectilinear_output_from_irregular_blocks(tmp_path: Path) -> None:
    data = reference_data((10, 6))
    url = str(tmp_path / "r.zarr")
    zarr_dask.to_zarr(da.from_array(data, chunks=((3, 3, 4), (2, 4))), url, rectilinear=True)
    with zarr.config.set({"array.rectilinear_chunks": True}):
        np.testing.assert_array_equal(zarr.open_array(url, mode="r")[:], data)
    assert zarr_dask.from_zarr(url, chunks=None).chunks in {((3, 3, 4), (2, 4)), ((10,), (6,))}


@expr_gap("from_zarr")
def test_same_values_as_dask_from_zarr(tmp_path: Path) -> None:
    data = reference_data((25, 18))
    url = str(tmp_path / "d.zarr")
    z = zarr.create_array(url, shape=data.shape, chunks=(5, 6), dtype="f8")
    z[:] = data
    theirs = da.from_zarr(url)
    ours = zarr_dask.from_zarr(url)
    da.utils.assert_eq(ours, theirs)
    da.utils.assert_eq(ours[2:20:3, 1::4], theirs[2:20:3, 1::4])
