"""Independent writers in separate worker processes of a ``distributed.LocalCluster`` (each task its own
``to_zarr`` / ``append`` / ``to_zarr_dataset`` call, no shared plan), on local files and on S3 (moto):
nothing lost, nothing duplicated, no task failing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.conftest import CLOUD_KINDS, gather_or_stacks, local_cluster_client, store_of_kind
from tests.graph.test_concurrent_writers import QUICK_SEEDS, SLOW_SEEDS, region_case, run_append_case

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster_client(threads_per_worker=2) as c:
        yield c


def _region_write(target: Any, options: Any, region: tuple[slice, ...], value: int, method: int) -> int:
    import dask

    from tests.graph.test_concurrent_writers import _write

    with dask.config.set(scheduler="threads"):
        data = np.full(tuple(s.stop - s.start for s in region), value, "i4")
        _write(method, target, options, region, data)
    return value


def _run_cluster_regions(client: Any, seed: int, target: Any, options: Any) -> int:
    case = region_case(seed)
    zarr_dask.create_array(
        target, storage_options=options, shape=case["shape"], dtype="i4", chunks=case["chunks"], shards=case["shards"],
        fill_value=-1, overwrite=True,
    )
    expected = np.full(case["shape"], -1, "i4")
    futures = []
    for i, (region, method) in enumerate(zip(case["regions"], case["methods"], strict=True)):
        expected[region] = i
        futures.append(client.submit(_region_write, target, options, region, i, int(method), pure=False))
    assert gather_or_stacks(client, futures) == list(range(len(futures)))
    return int((zarr_dask.open_array(target, storage_options=options)[:] != expected).sum())


def _stores(tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> tuple[Any, Any]:
    return store_of_kind(request, kind, "a.zarr")


KINDS = ["local", pytest.param("s3", marks=pytest.mark.s3), *CLOUD_KINDS]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", QUICK_SEEDS[:2])
def test_worker_processes_writing_misaligned_regions(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str, seed: int) -> None:
    target, options = _stores(tmp_path, request, kind)
    assert _run_cluster_regions(client, seed, target, options) == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_worker_processes_writing_misaligned_regions_slow(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str, seed: int) -> None:
    target, options = _stores(tmp_path, request, kind)
    assert _run_cluster_regions(client, seed, target, options) == 0


def _submitter(client: Any) -> Any:
    def submit(func: Any, *args: Any) -> Any:
        return client.submit(func, *args, pure=False)

    return submit


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", QUICK_SEEDS[:2])
def test_worker_processes_appending_at_once(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str, seed: int) -> None:
    target, options = _stores(tmp_path, request, kind)
    from zarr_dask.store import open_store

    store = open_store(target, storage_options=options)
    problem = run_append_case(seed, store, submit=_submitter(client), gather=client.gather)
    assert problem is None


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_worker_processes_appending_at_once_slow(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str, seed: int) -> None:
    target, options = _stores(tmp_path, request, kind)
    from zarr_dask.store import open_store

    assert run_append_case(seed, open_store(target, storage_options=options), submit=_submitter(client), gather=client.gather) is None


def _write_row(url: str, options: Any, i: int) -> int:
    import xarray as xr

    ds = xr.Dataset({"v": (("t", "x"), np.full((1, 4), i, "f8"))}, coords={"t": [i]})
    zarr_dask.to_zarr_dataset(ds.drop_vars("t"), url, region={"t": slice(i, i + 1)}, storage_options=options)
    return i


@pytest.mark.parametrize("kind", KINDS)
def test_xarray_region_pattern_96_one_row_tasks(client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> None:
    """xarray's documented pattern: a template written once, then one region write per task (one row each,
    into 8-row chunks), from 96 client.map tasks on 2 worker processes."""
    import dask.array as da
    import xarray as xr

    url, options = _stores(tmp_path, request, kind)
    template = xr.Dataset(
        {"v": (("t", "x"), da.full((96, 4), np.nan, chunks=(8, 4)))}, coords={"t": np.arange(96)}
    )
    zarr_dask.to_zarr_dataset(template, url, mode="w", compute=False, storage_options=options, encoding={"v": {"chunks": (8, 4)}})
    futures = client.map(_write_row, [url] * 96, [options] * 96, range(96), pure=False)
    assert sorted(gather_or_stacks(client, futures)) == list(range(96))
    got = xr.open_dataset(url, engine="zarr_dask", storage_options=options, chunks=None)["v"].values
    np.testing.assert_array_equal(got, np.repeat(np.arange(96.0), 4).reshape(96, 4))


def _create_arrays(url: str, options: Any, tag: str, n: int) -> int:
    for i in range(n):
        zarr_dask.create_array(url, storage_options=options, name=f"{tag}/a{i}", shape=(i + 1,), dtype="i2")
    return n


@pytest.mark.parametrize("kind", KINDS)
def test_two_processes_creating_arrays_in_one_consolidated_hierarchy(
    client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    url, options = _stores(tmp_path, request, kind)
    zarr_dask.create_group(url, storage_options=options)
    zarr_dask.consolidate_metadata(url, storage_options=options)
    futures = [client.submit(_create_arrays, url, options, tag, 24, pure=False) for tag in "pq"]
    assert gather_or_stacks(client, futures) == [24, 24]
    fresh = zarr_dask.open_group(url, storage_options=options, use_consolidated=True)
    assert all(fresh[f"{tag}/a{i}"].shape == (i + 1,) for tag in "pq" for i in range(24))
    assert zarr_dask.check_consolidated(url, storage_options=options) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_lazy_append_computed_on_the_cluster_gives_its_lease_back(
    client: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    import dask.array as da

    from zarr_dask.core.lease import lease_key
    from zarr_dask.store import open_store

    target, options = _stores(tmp_path, request, kind)
    store = open_store(target, storage_options=options)
    zarr_dask.create_array(store, shape=(3, 2), dtype="i4", chunks=(2, 2), fill_value=0)
    lazy = zarr_dask.append(da.full((3, 2), 5, dtype="i4", chunks=1), store, compute=False)
    assert store.exists(lease_key(""))  # held from the call until the commit (on a worker) gives it back
    assert client.compute(lazy).result() == (6, 2)
    assert not store.exists(lease_key(""))
    assert zarr_dask.append(da.full((1, 2), 7, dtype="i4", chunks=1), store) == (7, 2)  # the next one goes on
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:, 0], [0, 0, 0, 5, 5, 5, 7])


def test_in_memory_stores_are_refused_on_worker_processes(client: Any) -> None:
    """A store in this process's memory cannot be written by the cluster's worker processes (they would write
    into copies: before, the write "succeeded" and read back as fill values). Refused before anything is
    written; a task that reaches a worker anyway fails instead of reading or writing a copy."""
    import dask.array as da

    from zarr_dask.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="other processes"):
        zarr_dask.to_zarr(da.arange(10.0, chunks=5), "memory://cluster-refused.zarr")
    assert zarr_dask.open_store("memory://cluster-refused.zarr").list_prefix("") == []
    a = zarr_dask.create_array("memory://cluster-read.zarr", shape=(10,), dtype="f8", chunks=(5,))
    a[:] = np.arange(10.0)
    with pytest.raises(UnsupportedFeatureError, match="cannot see"):
        zarr_dask.from_zarr("memory://cluster-read.zarr").sum().compute()
