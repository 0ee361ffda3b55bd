"""The one event loop zarr_dask owns: a daemon thread per process that runs the coroutines of asynchronous
stores (zarr-python ``Store`` objects: Icechunk, VirtualiZarr's ``ManifestStore``, zarr-python's wrappers).

Blocking callers (dask tasks, the engine's reader threads) hand a coroutine to :func:`run` and wait for its
result; a batch of keys is one coroutine that gathers every request, so the requests are in flight together.
The loop is started on first use and started again in a child process after ``fork`` (a loop and its thread do
not survive a fork).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ["gather", "loop", "run"]

T = TypeVar("T")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def loop() -> asyncio.AbstractEventLoop:
    """This process's store loop, started on first use (a daemon thread named ``zarr_dask_aio``)."""
    with _LOCK:
        current = _STATE.get("loop")
        if current is not None and _STATE.get("pid") == os.getpid():
            return current  # type: ignore[no-any-return]
        new = asyncio.new_event_loop()
        thread = threading.Thread(target=new.run_forever, name="zarr_dask_aio", daemon=True)
        thread.start()
        _STATE.update(loop=new, pid=os.getpid(), thread=thread)
        return new


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the store loop and return its result (or raise its exception) in the calling thread.

    Examples
    --------
    >>> import asyncio
    >>> async def double(x):
    ...     await asyncio.sleep(0)
    ...     return 2 * x
    >>> run(double(21))
    42
    """
    target = loop()
    if threading.current_thread() is _STATE.get("thread"):
        coro.close()
        raise RuntimeError("zarr_dask.store.aio.run was called from the store loop itself; await the coroutine")
    return asyncio.run_coroutine_threadsafe(coro, target).result()


async def gather(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Every awaitable at once (``asyncio.gather``), results in order."""
    return list(await asyncio.gather(*awaitables))
