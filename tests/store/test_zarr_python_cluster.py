"""zarr-python stores on a ``distributed`` cluster of processes (issue 24): a ``LoggingStore`` over a
``LocalStore`` pickles to the workers, which write and read through it; one in this process's memory is
refused before anything is written."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.conftest import local_cluster_client
from zarr_dask.errors import UnsupportedFeatureError

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore, LoggingStore, MemoryStore, WrapperStore  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::zarr_dask.errors.UnprotectedWriteWarning")


@pytest.fixture(scope="module")
def cluster():
    with local_cluster_client() as client:
        yield client


def test_workers_write_and_read_through_a_wrapper(cluster, tmp_path):
    store = LoggingStore(LocalStore(str(tmp_path / "d")), log_level="DEBUG")
    x = da.arange(30 * 4, chunks=7).reshape(30, 4)
    zarr_dask.to_zarr(x, store, component="a", chunks=(4, 4), shards=(8, 4))
    assert zarr_dask.append(x[:5], store, component="a") == (35, 4)
    expected = np.concatenate([x.compute(), x[:5].compute()])
    np.testing.assert_array_equal(zarr_dask.from_zarr(store, component="a").compute(), expected)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(str(tmp_path / "d")), path="a", mode="r")[...], expected)
    ds = xr.Dataset({"v": (("t",), da.arange(20.0, chunks=6))}, coords={"t": np.arange(20)})
    zarr_dask.to_zarr_dataset(ds, store, group="g", mode="w")
    xr.testing.assert_identical(xr.open_dataset(store, engine="zarr_dask", group="g", chunks={}).compute(), ds.compute())


def test_a_memory_store_inside_a_wrapper_is_refused(cluster):
    store = WrapperStore(MemoryStore())
    with pytest.raises(UnsupportedFeatureError, match="memory"):
        zarr_dask.to_zarr(da.ones(10, chunks=3), store, component="a")
    assert not zarr_dask.open_store(store).list_prefix("")  # nothing was written
