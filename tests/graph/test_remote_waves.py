"""Remote stores pay their latency once per wave of requests: one request budget per process, whole-array reads
and writes with many batches in flight, dask writes uploading behind their tasks (docs/tuning.md)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from typing import Any

import dask
import dask.array as da
import fsspec
import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import StoreError
from zarr_dask.graph import layers
from zarr_dask.store import open_store, requests, uploads
from zarr_dask.testing.latency import LatencyFileSystem

DELAY = 0.02


class CountingFS(LatencyFileSystem):  # type: ignore[misc]
    """The latency filesystem, counting requests in flight (class-wide) and failing writes of chosen keys."""

    protocol = "zdcount"
    now = 0
    peak = 0
    fail_on: tuple[str, ...] = ()
    lock = threading.Lock()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with CountingFS.lock:
            CountingFS.now += 1
            CountingFS.peak = max(CountingFS.peak, CountingFS.now)
        try:
            if name == "pipe_file" and any(str(args[0]).endswith(k) for k in CountingFS.fail_on):
                await asyncio.sleep(self.seconds)
                raise OSError("injected upload failure")
            return await super()._call(name, *args, **kwargs)
        finally:
            with CountingFS.lock:
                CountingFS.now -= 1

    @classmethod
    def _strip_protocol(cls, path: str) -> str:  # type: ignore[override]
        path = str(path)
        for prefix in ("zdcount::", "zdcount://"):
            path = path.removeprefix(prefix)
        return path

    @classmethod
    def reset(cls) -> None:
        cls.now = cls.peak = 0
        cls.fail_on = ()


fsspec.register_implementation("zdcount", CountingFS, clobber=True)
OPTIONS = {"zdcount": {"seconds": DELAY}}


@pytest.fixture
def url():
    CountingFS.reset()
    name = f"zdcount::memory://waves-{uuid.uuid4().hex[:8]}"
    yield name
    CountingFS.reset()
    memory = fsspec.filesystem("memory")
    if memory.exists(name.split("://", 1)[1]):
        memory.rm(name.split("://", 1)[1], recursive=True)


def test_the_request_budget_bounds_requests_in_flight_over_all_threads(url):
    store = open_store(url, storage_options=OPTIONS)
    keys = [f"k/{i}" for i in range(30)]
    store.set_many({k: k.encode() for k in keys})
    CountingFS.reset()
    results: list[dict[str, bytes]] = []
    with dask.config.set({"zarr_dask.max-requests": 4}):
        threads = [threading.Thread(target=lambda: results.append(store.get_many(keys))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [len(r) for r in results] == [30, 30, 30] and results[0]["k/7"] == b"k/7"
    assert 2 <= CountingFS.peak <= 4
    assert requests.in_flight() == 0


def test_a_thread_holding_slots_is_not_made_to_wait_again():
    with dask.config.set({"zarr_dask.max-requests": 2}), requests.slots(5) as outer:
        with requests.slots(9) as inner:  # nested in the same thread: works within what it holds
            assert (outer, inner) == (2, 2)
        assert requests.in_flight() == 2
    assert requests.in_flight() == 0


def _gauge() -> tuple[dict[str, int], Any]:
    seen = {"now": 0, "peak": 0, "budget_peak": 0}

    async def request(i: int) -> int:
        seen["now"] += 1
        seen["peak"] = max(seen["peak"], seen["now"])
        seen["budget_peak"] = max(seen["budget_peak"], requests.in_flight())
        await asyncio.sleep(0.002)
        seen["now"] -= 1
        if i == 5:
            raise ValueError("request 5 failed")
        return i

    return seen, request


def test_a_narrow_batch_widens_while_the_budget_has_room():
    """A batch that got two slots (the budget was nearly used) runs more at once as slots are free, never more
    than the budget, and gives back every slot it borrowed; errors come back in place."""
    seen, request = _gauge()
    with dask.config.set({"zarr_dask.max-requests": 8}), requests.slots(2) as n:
        results = asyncio.run(requests.gather([request(i) for i in range(40)], n))
        assert requests.in_flight() == 2
    assert results[:5] == [0, 1, 2, 3, 4] and isinstance(results[5], ValueError) and results[39] == 39
    assert seen["peak"] == 8 and seen["budget_peak"] == 8
    assert requests.in_flight() == 0
    seen, request = _gauge()
    held, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        with requests.slots(2):  # the rest of the budget, held while the batch runs
            held.set()
            done.wait(10)

    with dask.config.set({"zarr_dask.max-requests": 4}), requests.slots(2) as n:
        other = threading.Thread(target=other_thread)
        other.start()
        held.wait(10)
        try:
            results = asyncio.run(requests.gather([request(i) for i in range(10)], n))
        finally:
            done.set()
            other.join()
    assert seen["peak"] == 2 and len(results) == 10  # nothing free to borrow: the batch's own two slots
    assert requests.in_flight() == 0


def test_a_cancelled_batch_gives_back_what_it_borrowed():
    async def slow() -> None:
        await asyncio.sleep(10)

    async def main(n: int) -> None:
        task = asyncio.ensure_future(requests.gather([slow() for _ in range(20)], n))
        await asyncio.sleep(0.01)
        assert requests.in_flight() == 8
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with dask.config.set({"zarr_dask.max-requests": 8}), requests.slots(1) as n:
        asyncio.run(main(n))
        assert requests.in_flight() == 1
    assert requests.in_flight() == 0


@pytest.mark.parametrize("sharded", [False, True])
def test_whole_array_reads_keep_many_requests_in_flight(url, sharded):
    data = np.arange(128 * 128, dtype="f8").reshape(128, 128)
    extra = {"shards": (32, 32)} if sharded else {}
    slow = {"zdcount": {"seconds": 0.1}}  # longer than a loaded machine takes to issue the next requests
    a = zarr_dask.create_array(url, shape=data.shape, dtype="f8", chunks=(16, 16), storage_options=slow, **extra)
    a[:] = data
    for read in (lambda: zarr_dask.from_zarr(url, storage_options=slow).compute(num_workers=2), lambda: a[:]):
        CountingFS.reset()
        with dask.config.set({"zarr_dask.io-threads": 2}):
            np.testing.assert_array_equal(read(), data)
        # 16 shards or 64 chunks over 2 decoding threads: far more than 2 batches' requests at once
        assert CountingFS.peak >= (16 if sharded else 32), CountingFS.peak


def _source(shape=(64, 256), chunks=(16, 32)):
    data = np.random.default_rng(5).standard_normal(shape).cumsum(axis=1)
    return data, da.from_array(data, chunks=chunks)


def test_dask_writes_upload_behind_their_tasks(url):
    data, src = _source()  # 32 chunks, one per task
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr(src, url, storage_options=OPTIONS, chunks=(16, 32))
    assert CountingFS.peak > 4, CountingFS.peak  # more than the two scheduler threads' own requests
    assert uploads.pending_bytes() == 0
    np.testing.assert_array_equal(zarr_dask.from_zarr(url, storage_options=OPTIONS).compute(), data)


def test_an_upload_error_fails_the_write_and_an_append_commits_nothing(url):
    data, src = _source()
    zarr_dask.to_zarr(src, url, storage_options=OPTIONS, chunks=(16, 32))
    CountingFS.fail_on = ("c/5/0",)  # a chunk of the appended rows
    with dask.config.set(scheduler="threads", num_workers=2), pytest.raises(StoreError, match="c/5/0"):
        zarr_dask.append(src, url, storage_options=OPTIONS, axis=0)
    assert zarr_dask.open_array(url, storage_options=OPTIONS).shape == (64, 256)  # the shape was not grown
    CountingFS.fail_on = ("c/1/1",)
    with dask.config.set(scheduler="threads", num_workers=2), pytest.raises(StoreError, match="c/1/1"):
        zarr_dask.to_zarr(src * 2, url, storage_options=OPTIONS, region=(slice(0, 64), slice(0, 256)))
    CountingFS.fail_on = ()
    assert uploads.pending_bytes() == 0


def test_queued_bytes_stay_within_the_write_behind_budget(url):
    data, src = _source((64, 512), (8, 64))  # 64 chunks of 4 KiB each
    seen = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(uploads.pending_bytes())
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with dask.config.set({"zarr_dask.write-behind": "16KiB"}, scheduler="threads", num_workers=2):
            zarr_dask.to_zarr(src, url, storage_options=OPTIONS, chunks=(8, 64), compressors=None)
    finally:
        stop.set()
        watcher.join()
    assert 0 < max(seen) <= (16 << 10) + 4096 + 1024
    np.testing.assert_array_equal(zarr_dask.from_zarr(url, storage_options=OPTIONS).compute(), data)


def test_uploads_are_deferred_only_where_the_final_task_surely_runs():
    assert layers._may_defer(os.getpid())
    assert not layers._may_defer(os.getpid() + 1)  # a task in another process than the graph's builder
    with dask.config.set({"zarr_dask.write-behind": 0}):
        assert not layers._may_defer(os.getpid())


def test_a_write_on_the_processes_scheduler_writes_in_each_task(tmp_path):
    data, src = _source()
    target = f"latency::file://{tmp_path}/p.zarr"
    options = {"latency": {"seconds": 0.001}, "file": {"auto_mkdir": True}}
    zarr_dask.to_zarr(src, target, storage_options=options, chunks=(16, 32), compute=False).compute(
        scheduler="processes", num_workers=2
    )
    np.testing.assert_array_equal(zarr_dask.from_zarr(target, storage_options=options).compute(), data)
