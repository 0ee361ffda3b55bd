"""run_batches: every batch runs once, the caller works too, errors surface, a busy pool never stalls it; and\nthe per-thread decode buffers can be released."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarr_dask.core.batches import run_batches


@pytest.mark.parametrize("batched_io", [False, True])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_every_item_runs_exactly_once(threads: int, batched_io: bool) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def func(batch: list[int]) -> None:
        with lock:
            seen.extend(batch)

    items = list(range(103))
    run_batches(func, items, threads=threads, batched_io=batched_io)
    assert sorted(seen) == items


def test_the_calling_thread_works_too() -> None:
    workers: set[str] = set()

    def func(batch: list[int]) -> None:
        workers.add(threading.current_thread().name)
        time.sleep(0.005)

    run_batches(func, list(range(20)), threads=2, batched_io=False)
    assert threading.current_thread().name in workers


def test_the_first_error_is_raised_and_stops_the_rest() -> None:
    done: list[int] = []

    def func(batch: list[int]) -> None:
        if batch[0] == 3:
            raise ValueError("bad chunk 3")
        done.extend(batch)

    with pytest.raises(ValueError, match="bad chunk 3"):
        run_batches(func, list(range(200)), threads=2, batched_io=False)
    assert len(done) < 199  # the workers stopped claiming batches


def test_a_busy_pool_does_not_stall_the_call() -> None:
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(release.wait, 10)  # the pool's only thread is busy elsewhere
        seen: list[int] = []
        t0 = time.monotonic()
        run_batches(seen.extend, list(range(50)), threads=2, batched_io=False, pool=pool)
        elapsed = time.monotonic() - t0
        release.set()
    assert sorted(seen) == list(range(50))
    assert elapsed < 5.0  # done by the caller alone, not after the other work


def test_release_scratch_drops_this_threads_decode_buffers() -> None:
    import zarr_dask
    from zarr_dask.core import chunk_io

    arr = zarr_dask.create_array("memory://release-scratch", shape=(4, 4), dtype="f4", chunks=(2, 2), overwrite=True)
    buf = arr._io._scratch((2, 2))
    assert arr._io._scratch((2, 2)) is buf  # reused
    chunk_io.release_scratch()
    assert arr._io._scratch((2, 2)) is not buf
