"""Independent writers of one array -- separate calls on threads, with no shared plan -- never lose data.

Every writer writes its own random, misaligned region (regions tile the array, so the expected result is known
exactly) by one of the three ways users write: eager ``to_zarr``, lazy ``to_zarr(compute=False)`` computed on
its own, or ``Array[region] = data``. Chunks and shards that several regions cut are merged by conditional
writes (see ``zarr_dask.store.versioned``), on every store kind. ``make test`` runs a fixed handful of seeds
(``make ci`` on GCS and Azure too); ``ZD_SLOW=1`` (``make test-slow``) runs 100 more per store kind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from zarr_dask.store import open_store

QUICK_SEEDS = [0, 1, 2]
SLOW_SEEDS = list(range(100, 200))


def _cuts(rng: np.random.Generator, n: int, pieces: int) -> list[int]:
    inner = sorted(rng.choice(np.arange(1, n), size=min(pieces - 1, n - 1), replace=False).tolist())
    return [0, *inner, n]


def region_case(seed: int) -> dict[str, Any]:
    """A random array layout and a tiling of it into misaligned rectangles, one per writer."""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(12, 40)), int(rng.integers(4, 16)))
    chunks = (int(rng.integers(2, 9)), int(rng.integers(2, 7)))
    sharded = bool(rng.integers(0, 3) == 0)
    shards = (chunks[0] * int(rng.integers(1, 3)), chunks[1] * int(rng.integers(1, 3))) if sharded else None
    rows, cols = _cuts(rng, shape[0], int(rng.integers(2, 6))), _cuts(rng, shape[1], int(rng.integers(1, 3)))
    regions = [
        (slice(r0, r1), slice(c0, c1)) for r0, r1 in zip(rows, rows[1:], strict=False) for c0, c1 in zip(cols, cols[1:], strict=False)
    ]
    return {"shape": shape, "chunks": chunks, "shards": shards, "regions": regions, "methods": rng.integers(0, 3, len(regions))}


def _write(method: int, target: Any, options: dict[str, Any] | None, region: tuple[slice, ...], data: np.ndarray) -> None:
    if method == 0:
        zarr_dask.to_zarr(da.from_array(data, chunks=3), target, storage_options=options, region=region)
    elif method == 1:
        w = zarr_dask.to_zarr(da.from_array(data, chunks=2), target, storage_options=options, region=region, compute=False)
        w.compute(scheduler="threads")
    else:
        zarr_dask.open_array(target, storage_options=options, mode="r+")[region] = data


def run_region_case(seed: int, target: Any, options: dict[str, Any] | None, pool: Callable[..., Any] | None = None) -> int:
    """Create the array, let every writer write its region at the same moment; returns the wrong elements."""
    case = region_case(seed)
    zarr_dask.create_array(
        target, storage_options=options, shape=case["shape"], dtype="i4", chunks=case["chunks"], shards=case["shards"],
        fill_value=-1, overwrite=True,
    )
    expected = np.full(case["shape"], -1, "i4")
    jobs = []
    for i, (region, method) in enumerate(zip(case["regions"], case["methods"], strict=True)):
        data = np.full(tuple(s.stop - s.start for s in region), i, "i4")
        expected[region] = data
        jobs.append((int(method), region, data))
    start = threading.Barrier(len(jobs))

    def job(args: tuple[int, tuple[slice, ...], np.ndarray]) -> None:
        start.wait(timeout=60)
        _write(args[0], target, options, args[1], args[2])

    with dask.config.set(scheduler="threads"), ThreadPoolExecutor(len(jobs)) as ex:
        list(ex.map(job, jobs))
    got = zarr_dask.open_array(target, storage_options=options)[:]
    return int((got != expected).sum())


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_threads_writing_misaligned_regions_lose_nothing(every_store_url: tuple[Any, Any], seed: int) -> None:
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    assert run_region_case(seed, store, None) == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_threads_writing_misaligned_regions_lose_nothing_slow(every_store_url: tuple[Any, Any], seed: int) -> None:
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    assert run_region_case(seed, store, None) == 0


def test_the_first_report_case_loses_nothing(every_store_url: tuple[Any, Any]) -> None:
    """The issue's repro: rows 0:15 and 15:40 by two threads into chunks of 10 rows, 20 times."""
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    wrong = 0
    for _ in range(20):
        a = zarr_dask.create_array(store, shape=(40, 6), dtype="i4", chunks=(10, 6), fill_value=0, overwrite=True)
        barrier = threading.Barrier(2)

        def write(region: slice, value: int, barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=60)
            zarr_dask.to_zarr(da.full((region.stop - region.start, 6), value, dtype="i4", chunks=5), store, region=(region,))

        with ThreadPoolExecutor(2) as ex:
            list(ex.map(write, [slice(0, 15), slice(15, 40)], [1, 2]))
        got = a[:]
        wrong += int((got[:15] != 1).sum() + (got[15:] != 2).sum())
    assert wrong == 0


def run_append_case(
    seed: int, store: Any, writers: int = 2, submit: Callable[..., Any] | None = None, gather: Callable[..., Any] = list
) -> str | None:
    """Independent appends at the same moment; returns what is wrong (None: every writer's rows landed once,
    contiguous, after the old rows). ``submit(func, *args)`` runs an append elsewhere (e.g. a cluster)."""
    rng = np.random.default_rng(seed)
    n0, width = int(rng.integers(0, 12)), 5
    zarr_dask.create_array(store, shape=(n0, width), dtype="i4", chunks=(int(rng.integers(2, 7)), 3), fill_value=-1, overwrite=True)
    if n0:
        zarr_dask.open_array(store, mode="r+")[:] = 100
    sizes = [int(rng.integers(1, 15)) for _ in range(writers)]
    blocks = [int(rng.integers(1, 5)) for _ in range(writers)]
    if submit is not None:
        results = gather([submit(append_rows, store, i, n, b, width) for i, (n, b) in enumerate(zip(sizes, blocks, strict=True))])
    else:
        start = threading.Barrier(writers)

        def job(i: int) -> tuple[int, ...]:
            start.wait(timeout=60)
            return append_rows(store, i, sizes[i], blocks[i], width)

        with ThreadPoolExecutor(writers) as ex:
            results = list(ex.map(job, range(writers)))
    got = zarr_dask.open_array(store)[:]
    if got.shape != (n0 + sum(sizes), width):
        return f"shape {got.shape}, expected {(n0 + sum(sizes), width)} (results {results})"
    if (got[:n0] != 100).any():
        return "old rows changed"
    rows, runs = got[n0:, 0], []
    if (got[n0:] != rows[:, None]).any():
        return "rows mixed within a row"
    for value in rows.tolist():
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    if sorted((v, n) for v, n in runs) != sorted(enumerate(sizes)):
        return f"rows {runs} but writers appended {list(enumerate(sizes))}"
    return None


def append_rows(store: Any, value: int, rows: int, block: int, width: int) -> tuple[int, ...]:
    with dask.config.set(scheduler="threads"):
        shape: tuple[int, ...] = zarr_dask.append(da.full((rows, width), value, dtype="i4", chunks=block), store)
    return shape


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_concurrent_appends_both_land(every_store_url: tuple[Any, Any], seed: int) -> None:
    target, options = every_store_url
    assert run_append_case(seed, open_store(target, storage_options=options), writers=2 + seed % 2) is None


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_concurrent_appends_both_land_slow(every_store_url: tuple[Any, Any], seed: int) -> None:
    target, options = every_store_url
    assert run_append_case(seed, open_store(target, storage_options=options)) is None


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_concurrent_xarray_appends_both_land(every_store_url: tuple[Any, Any], seed: int) -> None:
    xr = pytest.importorskip("xarray")
    target, options = every_store_url
    store = open_store(target, storage_options=options)
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 9)) for _ in range(3)]
    base = xr.Dataset({"v": (("t", "x"), np.full((5, 3), -5.0))})
    zarr_dask.to_zarr_dataset(base, store, mode="w", encoding={"v": {"chunks": (int(rng.integers(2, 5)), 3)}})
    start = threading.Barrier(len(sizes))

    def job(i: int) -> None:
        ds = xr.Dataset({"v": (("t", "x"), da.full((sizes[i], 3), float(i), chunks=2))})
        start.wait(timeout=60)
        with dask.config.set(scheduler="threads"):
            zarr_dask.to_zarr_dataset(ds, store, append_dim="t")

    with ThreadPoolExecutor(len(sizes)) as ex:
        list(ex.map(job, range(len(sizes))))
    got = xr.open_dataset(store, engine="zarr_dask", chunks=None)["v"].values
    assert got.shape == (5 + sum(sizes), 3) and (got[:5] == -5).all()
    runs: list[list[float]] = []
    for value in got[5:, 0].tolist():
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    assert sorted((int(v), n) for v, n in runs) == sorted(enumerate(sizes))


def test_a_store_without_conditional_writes_warns_once_and_does_not_arbitrate() -> None:
    from tests.unconditional_store import UnconditionalStore
    from zarr_dask.errors import UnprotectedWriteWarning

    store = UnconditionalStore()
    a = zarr_dask.create_array(store, shape=(20, 4), dtype="i4", chunks=(8, 4), fill_value=0)
    with pytest.warns(UnprotectedWriteWarning, match="cannot make conditional writes") as record:
        zarr_dask.to_zarr(da.ones((5, 4), dtype="i4", chunks=5), store, region=(slice(3, 8),))
    assert len(record) == 1 and store.url in str(record[0].message) and "docs/safe-writes.md" in str(record[0].message)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per array and process: the second merge is silent
        zarr_dask.to_zarr(da.ones((5, 4), dtype="i4", chunks=5), store, region=(slice(9, 14),))
        zarr_dask.to_zarr(da.ones((8, 4), dtype="i4", chunks=8), store, region=(slice(0, 8),))  # whole keys
    assert zarr_dask.append(da.ones((3, 4), dtype="i4", chunks=3), store) == (23, 4)  # no lease: not arbitrated
    assert not any(k.endswith(".zd-append-lease") for k in store.list_prefix(""))
    assert a.shape == (20, 4) and zarr_dask.open_array(store).shape == (23, 4)


def test_a_dead_appenders_lapsed_lease_is_taken_over_and_a_live_one_waited_for() -> None:
    import json
    import time

    from zarr_dask.core.lease import AppendLease, lease_key
    from zarr_dask.errors import WriteConflictError
    from zarr_dask.store import MemoryStore

    store = MemoryStore()
    zarr_dask.create_array(store, shape=(2, 2), dtype="i4", chunks=(2, 2), fill_value=0)
    dead = {"owner": "killed", "host": "elsewhere", "pid": 1, "expires": time.time() - 1}
    store.set(lease_key(""), json.dumps(dead).encode())  # what a killed appender leaves
    assert zarr_dask.append(da.ones((1, 2), dtype="i4", chunks=1), store) == (3, 2)
    assert not store.exists(lease_key(""))
    live = pytest.raises(WriteConflictError, match="another append to this array has been in progress")
    with AppendLease(store, "", ttl=30), live:  # a live holder: another append waits, then gives up clearly
        AppendLease(store, "", wait=0.2).acquire()
    assert zarr_dask.open_array(store).shape == (3, 2)
