"""The engine on a distributed cluster with worker processes: reads, region writes (property test), appends,
S3 through the moto server, retried tasks, and small pickled graphs. One cluster for the module."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import zarr_dask
from tests.conftest import local_cluster_client
from tests.graph._helpers import FlakyLocalStore, create, reference_data
from tests.graph.test_properties import write_cases

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster_client(threads_per_worker=1) as c:
        yield c


def test_read_and_write_local_dir(client: Any, tmp_path: Path) -> None:
    data = reference_data((40, 30))
    url = str(tmp_path / "a.zarr")
    zarr_dask.to_zarr(da.from_array(data, chunks=(7, 11)), url, chunks=(10, 10))
    np.testing.assert_array_equal(zarr_dask.from_zarr(url, chunks=(20, 10)).compute(), data)
    region = (slice(5, 27), slice(3, 19))
    new = reference_data((22, 16), seed=1)
    client.compute(zarr_dask.to_zarr(da.from_array(new, chunks=(6, 5)), url, region=region, compute=False)).result()
    data[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(url)[:], data)


@settings(deadline=None, max_examples=8, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=write_cases())
def test_region_writes_equal_numpy_distributed(client: Any, tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    old = rng.integers(0, 100, size=case["shape"]).astype("i4")
    url = str(tmp_path_factory.mktemp("prop") / "p.zarr")
    extra = {"shards": case["shards"]} if case["shards"] else {}
    create(url, case["shape"], case["chunks"], dtype="i4", zarr_format=case["zarr_format"], **extra)[:] = old
    region = case["region"]
    new = rng.integers(100, 200, size=old[region].shape).astype("i4")
    x = da.from_array(new, chunks=case["dask_chunks"])
    client.compute(zarr_dask.to_zarr(x, url, region=region, compute=False)).result()
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(url)[:], expected)


def test_append_distributed(client: Any, tmp_path: Path) -> None:
    url = str(tmp_path / "ap.zarr")
    old = reference_data((11, 4))
    zarr_dask.to_zarr(da.from_array(old, chunks=5), url, chunks=(4, 4))
    new = reference_data((6, 4), seed=2)
    shape = client.compute(zarr_dask.append(da.from_array(new, chunks=(4, 2)), url, compute=False)).result()
    assert shape == (17, 4)
    np.testing.assert_array_equal(zarr_dask.open_array(url)[:], np.concatenate([old, new]))


def test_s3_round_trip(client: Any, s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    data = reference_data((30, 20))
    zarr_dask.to_zarr(
        da.from_array(data, chunks=(7, 9)), s3_bucket_url, storage_options=s3_storage_options, chunks=(10, 10)
    )
    x = zarr_dask.from_zarr(s3_bucket_url, storage_options=s3_storage_options, chunks=(10, 20))
    np.testing.assert_array_equal(x.compute(), data)
    new = reference_data((9, 9), seed=3)
    zarr_dask.to_zarr(
        da.from_array(new, chunks=4), s3_bucket_url, storage_options=s3_storage_options, region=(slice(8, 17), slice(5, 14))
    )
    data[8:17, 5:14] = new
    np.testing.assert_array_equal(zarr_dask.from_zarr(s3_bucket_url, storage_options=s3_storage_options).compute(), data)


def test_failed_tasks_are_retried_to_a_correct_array(client: Any, tmp_path: Path) -> None:
    old = reference_data((30, 30), seed=4)
    root = tmp_path / "r.zarr"
    create(str(root), old.shape, (7, 7), dtype="f8")[:] = old
    markers = tmp_path / "markers"
    markers.mkdir()
    store = FlakyLocalStore(root, marker_dir=str(markers))
    new = reference_data((20, 21), seed=5)
    region = (slice(4, 24), slice(3, 24))
    delayed = zarr_dask.to_zarr(da.from_array(new, chunks=(6, 5)), store, region=region, compute=False)
    client.compute(delayed, retries=10).result()
    assert any(markers.iterdir())  # failures did happen (and were retried)
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(str(root))[:], expected)


def test_write_graph_pickles_small(tmp_path: Path) -> None:
    url = str(tmp_path / "g.zarr")
    delayed = zarr_dask.to_zarr(da.ones((200, 200), chunks=10), url, chunks=(20, 20), compute=False)
    graph = {k: v for k, v in dict(delayed.__dask_graph__()).items() if not str(k).startswith(("ones", "wrapped"))}
    assert len(pickle.dumps(graph)) / len(graph) < 400
