"""Reusable per-thread memory for the bytes a read fetches and decodes before it returns.

Reading a 64 MiB shard into a fresh ``bytes`` object costs more than decoding it on a virtual machine: the
kernel maps and zeroes 16,384 new pages (measured here: ~230,000 page faults and ~0.5-1 s of system time
per GiB read), and freed memory handed back to the host must be mapped again next time. A read that only
needs the fetched bytes until it has decoded them can take them from a :class:`ReadArena` instead: a
per-thread buffer reused from one read to the next, so a steady stream of shard reads touches no new
memory at all.

Each thread keeps at most ``ZARR_DASK_READ_ARENA`` bytes (default 128 MiB; ``0`` disables reuse) between
reads; a read that needs more gets one-off buffers, which NumPy backs with huge pages (still far fewer
faults than ``bytes``). Views handed out by an arena are valid until the ``with`` block that took them
ends; stores never return them to their callers' callers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from zarr_dask import config

__all__ = ["ReadArena", "read_arena", "release_read_arena"]

_LOCAL = threading.local()
_ALIGN = 64




def _limit() -> int:
    """The ``read_arena`` knob (:mod:`zarr_dask.config`): bytes (``134217728``) or a size (``128MiB``, ``1GB``);
    bad values warn."""
    return int(config.get("read_arena"))


class ReadArena:
    """A bump allocator over reusable buffers; see the module docstring.

    Examples
    --------
    >>> with read_arena() as arena:
    ...     a = arena.take(10)
    ...     b = arena.take(20)
    ...     len(a), len(b), a.readonly
    (10, 20, False)
    """

    __slots__ = ("_limit", "_used", "_view")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._view = memoryview(b"")  # the whole buffer, as bytes (views handed out keep their buffer alive)
        self._used = 0

    def take(self, nbytes: int) -> memoryview:
        """A writable view of ``nbytes`` bytes, valid until the arena's ``with`` block ends."""
        start = -(-self._used // _ALIGN) * _ALIGN
        if start + nbytes > len(self._view):
            if nbytes > self._limit:
                return np.empty(nbytes, dtype=np.uint8).data.cast("B")
            size = min(self._limit, max(nbytes, 2 * len(self._view), 1 << 20))
            self._view = np.empty(size, dtype=np.uint8).data.cast("B")
            start = 0
        self._used = start + nbytes
        return self._view[start : start + nbytes]

    def _reset(self) -> None:
        self._used = 0


@contextmanager
def read_arena() -> Iterator[ReadArena]:
    """This thread's arena for the duration of one read (a read nested inside another gets one-off buffers)."""
    if getattr(_LOCAL, "busy", False):
        yield ReadArena(0)
        return
    arena: ReadArena | None = getattr(_LOCAL, "arena", None)
    if arena is None:
        arena = _LOCAL.arena = ReadArena(_limit())
    _LOCAL.busy = True
    try:
        yield arena
    finally:
        arena._reset()
        _LOCAL.busy = False


def release_read_arena() -> None:
    """Drop this thread's arena (outside a read), so its memory goes back now rather than when the thread
    ends: for long-lived threads that must stay within a memory budget between tasks."""
    if not getattr(_LOCAL, "busy", False):
        _LOCAL.arena = None
