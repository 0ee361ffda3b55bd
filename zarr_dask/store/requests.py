"""One budget of remote requests per process: the ``max_requests`` knob (:mod:`zarr_dask.config`).

Every batched call of a remote store (``FsspecStore`` reads, writes and deletes, S3 conditional batches) takes
*slots* from this budget for the requests it sends at once, and gives them back when it returns. A call that
finds the budget partly used takes what is left (at least one slot), sending its requests in that many
concurrent streams; a call that finds it exhausted waits. So however many threads, dask tasks and arrays of a
process read and write at the same time, at most ``max_requests`` requests are in flight, and a cluster of
N worker processes sends at most N times that to a bucket.

A thread already holding slots (a store call made from inside another) is not made to wait again: it works
within the slots it holds, so nested calls cannot deadlock.

Examples
--------
>>> with slots(10) as n:
...     n  # at most max_requests (64 by default)
10
>>> in_flight()
0
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from zarr_dask import config

__all__ = ["gather", "in_flight", "slots"]

_cond = threading.Condition()
_used = 0
_held = threading.local()


@contextmanager
def slots(wanted: int) -> Iterator[int]:
    """Hold up to ``wanted`` request slots (at least one) while the block runs; yields how many."""
    global _used
    inherited = getattr(_held, "n", 0)
    if inherited:
        yield max(1, min(wanted, inherited))
        return
    wanted = max(1, int(wanted))
    with _cond:
        limit = int(config.get("max_requests"))
        while _used >= limit:
            _cond.wait()
            limit = int(config.get("max_requests"))
        n = min(wanted, limit - _used)
        _used += n
    _held.n = n
    try:
        yield n
    finally:
        _held.n = 0
        with _cond:
            _used -= n
            _cond.notify_all()


def in_flight() -> int:
    """Request slots held now, over the whole process."""
    with _cond:
        return _used


async def gather(coros: Sequence[Coroutine[Any, Any, Any]], concurrency: int) -> list[Any]:
    """Await ``coros`` with at most ``concurrency`` running at once; results in order, an exception in place of
    the result of a coroutine that raised (for the caller to attribute to its key)."""
    limit = asyncio.Semaphore(max(1, concurrency))

    async def bounded(coro: Coroutine[Any, Any, Any]) -> Any:
        async with limit:
            return await coro

    return list(await asyncio.gather(*(bounded(c) for c in coros), return_exceptions=True))
