"""One budget of remote requests per process: the ``max_requests`` knob (:mod:`zarr_dask.config`).

Every batched call of a remote store (``FsspecStore`` reads, writes and deletes, S3 conditional batches) takes
*slots* from this budget for the requests it sends at once, and gives them back when it returns. A call that
finds the budget partly used takes what is left (at least one slot), sending its requests in that many
concurrent streams, and more as other calls free slots (:func:`gather` borrows them one request at a time);
a call that finds it exhausted waits. So however many threads, dask tasks and arrays of a
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
    """Await ``coros`` with ``concurrency`` of them running at once (the slots the caller holds), and more while
    the process's budget has free slots: results in order, an exception in place of the result of a coroutine
    that raised (for the caller to attribute to its key).

    A batch that began when the budget was nearly used up (two slots, say) does not stay that narrow: each
    time one of its requests ends it starts as many more as the caller's slots and the free part of the budget
    allow, taking a free slot for each extra request and giving it back when that request ends. The budget
    is never exceeded, and a slot is only ever taken without waiting, so no batch waits on another."""
    results: list[Any] = [None] * len(coros)
    queue = list(enumerate(coros))[::-1]
    running: dict[asyncio.Future[Any], tuple[int, bool]] = {}  # task -> (index, on a borrowed slot)
    own = max(1, concurrency)
    try:
        while queue or running:
            while queue:
                borrowed = sum(1 for _, b in running.values() if not b) >= own
                if borrowed and not _borrow():
                    break
                index, coro = queue.pop()
                running[asyncio.ensure_future(_outcome(coro))] = (index, borrowed)
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                index, borrowed = running.pop(task)
                if borrowed:
                    _give_back()
                results[index] = task.result()
    finally:
        for task, (_, borrowed) in running.items():  # cancelled: stop the rest, return what they borrowed
            task.cancel()
            if borrowed:
                _give_back()
        for _, coro in queue:
            coro.close()
    return results


async def _outcome(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except Exception as exc:  # noqa: BLE001 - every outcome is returned to the caller, which raises it
        return exc


def _borrow() -> bool:
    """Take one free slot of the budget if there is one (never waits)."""
    global _used
    with _cond:
        if _used < int(config.get("max_requests")):
            _used += 1
            return True
        return False


def _give_back() -> None:
    global _used
    with _cond:
        _used -= 1
        _cond.notify_all()
