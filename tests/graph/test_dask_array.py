"""zarr_dask with the ``dask-array`` package (the ``dask_array`` module, dask's separate expression arrays)
installed and registered as xarray's chunk manager (``dask_array.xarray.register()``), as its users run it:
``import dask_array as da`` in place of ``dask.array``. ``make test-dask-array`` runs these with the graph,
xarray and docs tests in that mode (tests/conftest.py registers it when ``ZD_DASK_ARRAY=1``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.dask_modes import DASK_ARRAY
from zarr_dask.graph import gateway

pytestmark = pytest.mark.skipif(
    not DASK_ARRAY, reason="needs the dask-array package registered: run by make test-dask-array"
)


@pytest.fixture
def da() -> Any:
    import dask_array

    return dask_array


def test_from_zarr_gives_dask_array_arrays_that_mix_with_its_own(tmp_path: Path, da: Any) -> None:
    url = str(tmp_path / "a.zarr")
    data = np.arange(48.0).reshape(6, 8)
    zarr_dask.to_zarr(da.from_array(data, chunks=(3, 4)), url, chunks=(2, 4))
    x = zarr_dask.from_zarr(url, chunks=(2, 4))
    assert isinstance(x, da.Array) and gateway.is_dask_array(x) and x.chunks == ((2, 2, 2), (4, 4))
    other = da.from_array(np.ones((6, 8)), chunks=3)
    assert type(x + other) is da.Array
    np.testing.assert_array_equal((x + other).compute(), data + 1)
    np.testing.assert_array_equal(x[1:3, 2:6].compute(), data[1:3, 2:6])
    np.testing.assert_array_equal(np.asarray(x), data)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    import dask

    np.testing.assert_array_equal(dask.compute(x)[0], data)


def test_writes_appends_explain_and_convert(tmp_path: Path, da: Any) -> None:
    url = str(tmp_path / "w.zarr")
    x = da.from_array(np.arange(24.0).reshape(4, 6), chunks=(2, 3))
    lazy = zarr_dask.to_zarr(x * 2, url, chunks=(2, 6), compute=False)
    assert isinstance(lazy, da.Array)  # like dask's to_zarr(compute=False), of this package
    lazy.compute()
    np.testing.assert_array_equal(zarr_dask.from_zarr(url).compute(), np.arange(24.0).reshape(4, 6) * 2)
    stored = zarr_dask.to_zarr(x, str(tmp_path / "s.zarr"), return_stored=True)
    assert isinstance(stored, da.Array)
    np.testing.assert_array_equal(stored.compute(), x.compute())
    zarr_dask.append(x + 100, url, axis=0)
    back = zarr_dask.from_zarr(url).compute()
    assert back.shape == (8, 6) and back[4, 0] == 100.0
    assert zarr_dask.explain_write(x, "memory://dask-array-explain", chunks=(4, 6)).keys == 1
    zarr_dask.convert(url, str(tmp_path / "c.zarr"), chunks=(8, 3))
    np.testing.assert_array_equal(zarr_dask.from_zarr(str(tmp_path / "c.zarr")).compute(), back)


def test_dask_arrays_of_dask_itself_are_still_written(tmp_path: Path, da: Any) -> None:
    import dask.array

    url = str(tmp_path / "legacy.zarr")
    zarr_dask.to_zarr(dask.array.ones((4, 4), chunks=2), url)
    assert isinstance(zarr_dask.from_zarr(url), da.Array)
    assert float(zarr_dask.from_zarr(url).sum().compute()) == 16.0


def test_the_xarray_backend_reads_and_writes_dask_array_arrays(tmp_path: Path, da: Any) -> None:
    import xarray as xr

    ds = xr.Dataset({"v": (("t", "x"), np.arange(20.0).reshape(4, 5))}, coords={"t": np.arange(4)}).chunk({"t": 2})
    assert isinstance(ds.v.data, da.Array)  # xarray's chunk manager is dask-array's
    url = str(tmp_path / "ds.zarr")
    zarr_dask.to_zarr_dataset(ds, url)
    back = xr.open_dataset(url, engine="zarr_dask", chunks={})
    assert isinstance(back.v.data, da.Array)
    xr.testing.assert_identical(back.load(), ds.compute())
    more = (ds.isel(t=slice(2)) + 1).assign_coords(t=[4, 5])  # (in order: an out-of-order append warns)
    zarr_dask.to_zarr_dataset(more, url, append_dim="t")
    assert xr.open_dataset(url, engine="zarr_dask").sizes["t"] == 6
