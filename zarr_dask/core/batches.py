"""Running batches of storage units in parallel: the thread pools of reads and writes, and how remote batches
are sized so that about the process's request budget is in flight while earlier batches decode.

:class:`~zarr_dask.core.chunk_io.ChunkIO` groups storage units into batches (one store call each) and hands them
to :func:`run_batches`; a dask task runs its batches in its own thread and never comes here.

Examples
--------
>>> seen = []
>>> run_batches(seen.extend, list(range(10)), threads=2, batched_io=False)
>>> sorted(seen) == list(range(10))
True
>>> threads, per_batch = remote_plan(256, 2)  # for 256 remote keys decoded by 2 threads
>>> threads >= 2 and threads * per_batch >= 256 // 4
True
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

from zarr_dask import config

__all__ = ["fetch_ahead", "io_threads", "remote_plan", "run_batches", "shutdown_pool", "thread_pool"]

_POOL_LOCK = threading.Lock()
T = TypeVar("T")
R = TypeVar("R")


def io_threads() -> int:
    """Threads used by direct (non-dask) reads and writes: the ``io_threads`` knob (:mod:`zarr_dask.config`)."""
    return int(config.get("io_threads"))


_POOLS: dict[tuple[str, int], ThreadPoolExecutor] = {}
_WORKER_PREFIXES = ("zarr_dask_io", "zarr_dask_read", "zarr_dask_remote", "zarr_dask_fetch")
#: Groups :func:`fetch_ahead` splits a read into (the first is decoded once about 1/AHEAD_GROUPS has arrived),
#: and the threads that wait on them (they only wait: the requests run on the event loop of the store).
AHEAD_GROUPS, AHEAD_THREADS = 8, 32


def thread_pool(kind: str, threads: int | None = None) -> ThreadPoolExecutor:
    """A lasting pool of ``threads`` threads (default: the ``io_threads`` knob): ``"io"`` for direct reads and
    writes, ``"read"`` for whole reads into one result (their per-thread read buffers are reused, see
    :mod:`zarr_dask.store.arena`), ``"remote"`` for the batches of remote reads and writes (mostly waiting on the
    network; see :func:`remote_plan`)."""
    size = io_threads() if threads is None else threads
    with _POOL_LOCK:
        pool = _POOLS.get((kind, size))
        if pool is None:
            pool = _POOLS[(kind, size)] = ThreadPoolExecutor(size, thread_name_prefix=f"zarr_dask_{kind}")
        return pool


def shutdown_pool() -> int:
    """Shut every thread pool of this module down (their threads and per-thread buffers end; new ones are made
    on the next use); returns how many there were. For :func:`zarr_dask.release_memory`."""
    with _POOL_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.shutdown(wait=True)
    return len(pools)


def remote_plan(keys: int, threads: int) -> tuple[int, int]:
    """``(threads, keys per batch)`` for reading ``keys`` storage keys of a remote store with ``threads``
    decoding threads.

    Each batch is one concurrent store call, then the decoding of what it fetched; running more batches at
    once than there are decoding threads keeps about ``max_requests`` requests in flight (the latency is paid
    once per wave, not once per batch) while earlier batches decode. Batches stay small enough that decoding
    starts early (at least four per thread), and the threads waiting on the network cost no CPU.
    """
    limit = int(config.get("max_requests"))
    step = max(1, min(-(-keys // (4 * threads)), limit // (2 * threads) or 1))
    batches = -(-keys // step)
    return max(1, min(batches, max(threads, -(-limit // step)))), step


def fetch_ahead(fetch: Callable[[Sequence[T]], R], items: Sequence[T]) -> Iterator[tuple[Sequence[T], R]]:
    """``(group, fetch(group))`` for up to :data:`AHEAD_GROUPS` contiguous groups of ``items``, in the order the
    fetches finish: every group's fetch starts at once (threads of the ``"fetch"`` pool, which only wait on the
    store), so the caller decodes what has arrived while the rest is in flight. The same requests as one
    ``fetch(items)``, as many in flight (each fetch takes its slots of the request budget). A fetch that
    raises ends the iteration with its error; fetches not started by then are dropped.

    >>> sorted(got for _, got in fetch_ahead(lambda g: [x * 2 for x in g], range(20)))[:3]
    [[0, 2, 4], [6, 8, 10], [12, 14, 16]]
    """
    n = len(items)
    if n <= 1:
        if n:
            yield items, fetch(items)
        return
    size = -(-n // AHEAD_GROUPS)
    pool = thread_pool("fetch", AHEAD_THREADS)
    futures = {pool.submit(fetch, items[i : i + size]): items[i : i + size] for i in range(0, n, size)}
    try:
        for done in as_completed(futures):
            yield futures[done], done.result()
    finally:
        for future in futures:
            future.cancel()


def run_batches(
    func: Callable[[Sequence[Any]], None],
    items: Sequence[Any],
    *,
    threads: int | None = None,
    batched_io: bool = True,
    pool: ThreadPoolExecutor | None = None,
    batch_size: int | None = None,
) -> None:
    """Run ``func`` over contiguous batches of ``items``, in parallel when worthwhile.

    With ``batched_io`` (remote stores) items are grouped into batches, each one concurrent store call, and
    more batches run at once than ``threads`` (see :func:`remote_plan`), so about the process's request budget
    is in flight while earlier batches decode or encode; without it (local files, memory) every item is its
    own task, which keeps each chunk's bytes hot in cache between reading and decoding. The calling thread
    works too, next to threads of ``pool`` (default: the shared I/O pool, or for remote stores a lasting pool
    of the planned size): no thread sits waiting, and a busy pool never stalls the call. ``batch_size`` sets
    the items per batch instead.
    """
    n = len(items)
    threads = io_threads() if threads is None else threads
    if n == 0:
        return
    if threads <= 1 or n == 1 or threading.current_thread().name.startswith(_WORKER_PREFIXES):
        func(items)
        return
    if batched_io and batch_size is None:
        threads, batch_size = remote_plan(n, threads)
        pool = pool or thread_pool("remote", threads)
    size = batch_size or 1
    batches = [items[i : i + size] for i in range(0, n, size)]
    claim = itertools.count()  # next() is atomic under the GIL: each batch runs exactly once
    failed: list[BaseException] = []

    def work() -> None:
        while not failed:
            i = next(claim)
            if i >= len(batches):
                return
            try:
                func(batches[i])
            except BaseException as e:  # noqa: BLE001 - stop every worker; the caller re-raises the first error
                failed.append(e)
                return

    helpers = [(pool or thread_pool("io")).submit(work) for _ in range(min(threads, len(batches)) - 1)]
    work()
    for f in helpers:
        if not f.cancel():  # a helper still queued behind other reads has nothing left to do: drop it
            f.result()
    if failed:
        raise failed[0]
