"""Writes called inside ``distributed`` worker tasks (``client.map`` / ``client.submit``) run in the task, on a
local scheduler, never as a graph submitted back to the cluster; appends from many tasks at once all land
(the waiting ones never starve the lease holder), on a 2-process LocalCluster with 1 and 2 threads per
worker, on moto S3 and local files."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.conftest import CLOUD_KINDS, local_cluster_client, store_of_kind

distributed = pytest.importorskip("distributed")

DAYS = 8
PER_DAY = 4


@pytest.fixture(scope="module", params=[1, 2], ids=["1-thread", "2-threads"])
def client(request: pytest.FixtureRequest) -> Iterator[Any]:
    with local_cluster_client(threads_per_worker=request.param) as c:
        yield c


#: 2-thread workers only on the GCS / Azure emulators by default (tests/conftest.py; ZD_SLOW=1 runs 1 thread too)
EMULATOR_PARAMS = {"client": 2}


def _store(tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> tuple[Any, Any]:
    return store_of_kind(request, kind, "a.zarr")


KINDS = ["local", pytest.param("s3", marks=pytest.mark.s3), *CLOUD_KINDS]

#: the blocks' own task keys, seen by the function that makes them (a module global of the worker process)
SEEN: list[Any] = []


def _block(x: Any) -> Any:
    if x.size:  # not dask's meta inference
        SEEN.append(getattr(distributed.worker.thread_state, "key", None))
    return x + 1


def _write_in_task(url: str, options: Any, config_scheduler: str | None) -> tuple[Any, list[Any], dict[str, Any]]:
    import dask
    import dask.array as da

    from zarr_dask.graph.in_task import compute_options

    SEEN.clear()
    x = da.zeros((8, 4), chunks=(2, 4), dtype="i4").map_blocks(_block, meta=np.empty((0, 0), "i4"))
    with dask.config.set(scheduler=config_scheduler):
        zarr_dask.to_zarr(x, url, storage_options=options, region=(slice(0, 8),))
        used = compute_options()
    return distributed.worker.thread_state.key, list(SEEN), used


def test_compute_options_outside_a_task_leave_dask_alone() -> None:
    from zarr_dask.graph.in_task import compute_options, in_worker_task

    assert not in_worker_task()
    assert compute_options() == {}


def test_importing_zarr_dask_does_not_import_distributed() -> None:
    code = "import sys, zarr_dask, zarr_dask.graph.in_task, zarr_dask.xarray_backend.to_zarr; print('distributed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("config_scheduler", [None, "distributed", "sync"])
def test_a_write_in_a_task_runs_in_that_task(client: Any, tmp_path: Path, config_scheduler: str | None) -> None:
    """Every block of the write is made in the task's own process, by a local scheduler: in threads of its
    own (no task key) or, with ``scheduler="sync"`` set by the user in the task, in the task's thread. Before,
    the write was a graph run by the cluster: its blocks ran as cluster tasks (their own keys)."""
    url = str(tmp_path / "a.zarr")
    zarr_dask.create_array(url, shape=(8, 4), dtype="i4", chunks=(2, 4))
    key, seen, used = client.submit(_write_in_task, url, None, config_scheduler, pure=False).result()
    assert len(seen) == 4
    assert set(seen) <= {None, key}  # never another task's key: nothing ran as a cluster task
    if config_scheduler == "sync":
        assert used == {} and set(seen) == {key}  # the user's local scheduler is honoured
    else:
        assert used == {"scheduler": "threads"} and set(seen) == {None}
    np.testing.assert_array_equal(zarr_dask.open_array(url)[:], np.ones((8, 4), "i4"))


def _one_day(day: int) -> Any:
    import pandas as pd
    import xarray as xr

    time = pd.date_range("2024-01-01", periods=PER_DAY, freq="6h") + pd.Timedelta(days=day)
    values = np.arange(PER_DAY * 3, dtype="f4").reshape(PER_DAY, 3) + 100 * day
    return xr.Dataset({"v": (("time", "x"), values)}, coords={"time": time, "x": [10, 20, 30]})


def _append_day(url: str, options: Any, day: int) -> int:
    from zarr_dask.errors import NonMonotonicCoordinateWarning

    with warnings.catch_warnings():  # days land in whatever order the tasks get their turn
        warnings.simplefilter("ignore", NonMonotonicCoordinateWarning)
        zarr_dask.to_zarr_dataset(_one_day(day), url, append_dim="time", storage_options=options)
    return day


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
def test_tasks_appending_days_at_once_all_land(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> None:
    import xarray as xr

    url, options = _store(tmp_path, request, kind)
    zarr_dask.to_zarr_dataset(_one_day(0), url, mode="w", storage_options=options, encoding={"v": {"chunks": (3, 3)}})
    futures = client.map(_append_day, [url] * DAYS, [options] * DAYS, range(1, DAYS + 1), pure=False)
    assert sorted(client.gather(futures)) == list(range(1, DAYS + 1))
    got = xr.open_dataset(url, engine="zarr_dask", storage_options=options, chunks=None).sortby("time")
    want = xr.concat([_one_day(d) for d in range(DAYS + 1)], dim="time")
    xr.testing.assert_identical(got.drop_encoding(), want)
    assert zarr_dask.check_consolidated(url, storage_options=options) == []


def _append_rows(url: str, options: Any, value: int) -> int:
    import dask.array as da

    zarr_dask.append(da.full((3, 2), value, dtype="i4", chunks=2), url, storage_options=options)
    return value


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
def test_tasks_appending_dask_arrays_at_once_all_land(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> None:
    url, options = _store(tmp_path, request, kind)  # no array yet: the first appends race to create it
    futures = client.map(_append_rows, [url] * DAYS, [options] * DAYS, range(1, DAYS + 1), pure=False)
    assert sorted(client.gather(futures)) == list(range(1, DAYS + 1))
    got = zarr_dask.open_array(url, storage_options=options)[:]
    assert got.shape == (3 * DAYS, 2)
    blocks = got.reshape(DAYS, 3, 2)  # each append's rows together, in whatever order they landed
    assert sorted(int(b[0, 0]) for b in blocks) == list(range(1, DAYS + 1))
    assert all((b == b[0, 0]).all() for b in blocks)
