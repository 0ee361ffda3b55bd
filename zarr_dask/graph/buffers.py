"""Recycled memory for the blocks read tasks return.

A dask computation allocates every block it reads and frees it once the block has been consumed
(concatenated into a result, reduced, written). Fresh memory is expensive on virtual machines: the kernel
zeroes every page on first touch and, when freed memory has been handed back to the host, the host must
map it again -- measured here at 0.2-2.5 s per GiB, as much as reading and decoding the data. So the read
tasks of this process take their output buffers from a small pool of already-touched buffers, and a block's
buffer returns to the pool when the last reference to the block (or any view of it) is gone.

The pool keeps at most ``ZARR_DASK_BLOCK_POOL`` bytes of idle buffers (default 2 GiB, or an eighth of the
machine's memory when that is less; ``0`` disables it), drops buffers idle for more than a minute, and is not used inside distributed workers (their memory
manager must see what the process really holds). Buffers under 1 MiB come from NumPy directly.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np

from zarr_dask import config

__all__ = ["BlockPool", "POOL", "empty"]

_MIN_BYTES = 1 << 20
_IDLE_SECONDS = 60.0


def _limit() -> int:
    """The ``block_pool`` knob (:mod:`zarr_dask.config`)."""
    return int(config.get("block_pool"))


class _Owner:
    """Exposes a pooled buffer to NumPy; views keep it alive (NumPy does not collapse a base chain through a
    non-array object, unlike through plain views)."""

    __slots__ = ("__weakref__", "buf")

    def __init__(self, buf: np.ndarray[Any, Any]) -> None:
        self.buf = buf

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return self.buf.__array_interface__


class BlockPool:
    """Idle buffers by size; ``empty`` hands one out, its owner's death hands it back.

    Examples
    --------
    >>> pool = BlockPool(limit=64 << 20)
    >>> a = pool.empty((1024, 1024), np.float32)
    >>> a.shape, a.dtype, pool.idle_bytes
    ((1024, 1024), dtype('float32'), 0)
    >>> del a
    >>> pool.idle_bytes
    4194304
    >>> b = pool.empty((512, 2048), np.float32)  # the same 4 MiB, reused
    >>> view = b[::2]
    >>> del b
    >>> pool.idle_bytes  # a view still holds it
    0
    >>> del view
    >>> pool.idle_bytes
    4194304
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free: dict[int, list[tuple[float, np.ndarray[Any, Any]]]] = {}
        self._idle = 0
        self._lock = threading.RLock()  # the give-back may run from garbage collection inside a take
        self._timer: threading.Timer | None = None

    @property
    def idle_bytes(self) -> int:
        return self._idle

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
        """An uninitialised array, from an idle buffer of exactly its size when there is one."""
        dt = np.dtype(dtype)
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes < _MIN_BYTES or dt.hasobject or self.limit <= 0 or in_distributed_worker():
            return np.empty(shape, dtype=dt)
        buf = self._take(nbytes)
        if buf is None:
            buf = np.empty(nbytes, dtype=np.uint8)
        owner = _Owner(buf)  # every array handed out is based on it: its death returns the buffer
        weakref.finalize(owner, self._give, buf)
        out: np.ndarray[Any, Any] = np.asarray(owner).view(dt).reshape(shape)
        return out

    def _take(self, nbytes: int) -> np.ndarray[Any, Any] | None:
        with self._lock:
            self._trim(time.monotonic())
            stack = self._free.get(nbytes)
            if not stack:
                return None
            _, buf = stack.pop()
            self._idle -= nbytes
            return buf

    def _give(self, buf: np.ndarray[Any, Any]) -> None:
        with self._lock:
            now = time.monotonic()
            self._trim(now)
            if self._idle + buf.nbytes <= self.limit:
                self._free.setdefault(buf.nbytes, []).append((now, buf))
                self._idle += buf.nbytes
                self._schedule_trim()

    def _schedule_trim(self) -> None:
        """Drop idle buffers after their minute even if the pool is never used again (a daemon timer)."""
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Timer(_IDLE_SECONDS * 1.05, self._timed_trim)
            self._timer.daemon = True
            self._timer.start()

    def _timed_trim(self) -> None:
        with self._lock:
            self._timer = None
            self._trim(time.monotonic())
            if self._idle:
                self._schedule_trim()

    def _trim(self, now: float) -> None:
        for size in list(self._free):
            keep = [(t, b) for t, b in self._free[size] if now - t < _IDLE_SECONDS]
            self._idle -= (len(self._free[size]) - len(keep)) * size
            if keep:
                self._free[size] = keep
            else:
                del self._free[size]

    def clear(self) -> None:
        """Drop every idle buffer."""
        with self._lock:
            self._free.clear()
            self._idle = 0


def in_distributed_worker() -> bool:
    """Whether this code runs inside a task on a ``distributed`` worker."""
    worker = sys.modules.get("distributed.worker")
    if worker is None:
        return False
    try:
        worker.get_worker()
    except ValueError:
        return False
    return True


POOL = BlockPool(_limit())


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    """``np.empty`` from this process's block pool (see the module docstring)."""
    return POOL.empty(shape, dtype)
