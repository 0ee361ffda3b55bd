"""Write-behind for dask writes to remote stores: writer tasks hand their encoded keys over and go on.

Over a network, a writer task that uploads its own keys spends most of its time waiting for the store, and a
local scheduler runs only as many writer tasks at once as it has threads: two threads writing one 1 MiB
chunk each keep two requests in flight, so a 256-chunk write pays the round trip 128 times. Here, a writer
task of a write computed on a local scheduler (threads or sync) encodes its keys and queues the ones it
covers whole; a few uploader threads send whatever is queued for the same store in one batched call
(``Store.set_many``, concurrent up to the process's request budget), so the round trip is paid once per
wave while the tasks go on encoding. The queued bytes are bounded by the ``write_behind`` knob (a task waits
for room), and the write's final task -- which every writer task precedes, and which commits metadata,
refreshes consolidated metadata and releases the write -- first waits for all of its write's uploads and
raises the first upload error. So nothing is reported written, committed or read back before it is stored.

What is never deferred: keys covered only partly (their read-merge-write is a conditional transaction that
must see the key's current bytes), deletions of all-fill keys, writes on a distributed cluster (the final
task may run in another process than the writer tasks) or in another process than the one that built the
graph (dask's multiprocessing scheduler), and stores without batched I/O (local files, memory), where a
write is not waiting on a network.

A key that must follow others -- a resumable write's receipt, which says its task's keys have all landed
(:mod:`zarr_dask.graph.journal`) -- is handed over with :meth:`WriteBehind.then`: it is queued only once the
uploads offered before it have landed, and dropped if one of them failed.

The writer task holds a :class:`WriteBehind` for its write and passes it down explicitly (the graph layer
makes it, ``ChunkIO`` offers its whole keys to it, the final task drains it): no thread-local state.

Examples
--------
>>> from zarr_dask.store import MemoryStore
>>> store = MemoryStore()
>>> behind = WriteBehind("doc-example-write")
>>> behind.offer(store, {"c/0": b"x"}, batched_io=True), behind.drain(), store.get("c/0")
(True, None, b'x')
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zarr_dask import config
from zarr_dask.store.base import value_nbytes

__all__ = ["WriteBehind", "pending_bytes"]

#: Uploader threads at most (each sends one batched call at a time).
_WORKERS = 8
#: How long an idle uploader thread waits for work before it ends.
_IDLE_SECONDS = 10.0

_cond = threading.Condition()
_queue: deque[_Upload] = deque()
_groups: dict[str, _Group] = {}
_used = 0  # bytes queued or being uploaded
_workers = 0
_idle = 0


@dataclass
class _Group:
    pending: int = 0
    error: BaseException | None = None


@dataclass(eq=False)
class _Upload:
    store: Any
    group: str
    items: dict[str, Any]  #: values: bytes, or Parts for a store that takes them
    nbytes: int = field(init=False)
    done: bool = False  #: sent (``failed`` if it met an error)
    failed: bool = False
    waits: int = 0  #: a follow-up (:meth:`WriteBehind.then`): uploads still to land before it is queued
    dropped: bool = False  #: a follow-up one of whose uploads failed: never sent
    followers: list[_Upload] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.nbytes = sum(value_nbytes(v) for v in self.items.values())


@dataclass(frozen=True)
class WriteBehind:
    r"""The deferred uploads of one write (``group``: the write's token): writer tasks :meth:`offer` their whole
    keys to it and go on; the write's final task :meth:`drain`\ s it. Picklable and cheap to make: the queue and
    the uploader threads are the process's."""

    group: str
    _offered: list[_Upload] = field(default_factory=list, compare=False, repr=False)  # by this handle

    def offer(self, store: Any, items: Mapping[str, Any], *, batched_io: bool) -> bool:
        """Queue ``items`` for upload; returns False, having done nothing, when the store is not batched or
        there is nothing to queue (the caller writes them itself). Waits for room under ``write_behind``."""
        global _used
        if not batched_io or not items:
            return False
        upload = _Upload(store, self.group, dict(items))
        limit = int(config.get("write_behind"))
        with _cond:
            while _used and _used + upload.nbytes > limit:  # room for it (one larger than the limit goes alone)
                _cond.wait()
            _used += upload.nbytes
            _groups.setdefault(self.group, _Group()).pending += 1
            self._offered.append(upload)
            _enqueue(upload)
        return True

    def then(self, store: Any, items: Mapping[str, bytes]) -> None:
        """Store ``items`` only once every upload offered through this handle has landed: queued behind them,
        never if one of them failed (the write's final task raises that error); when none is pending (the
        task stored its keys itself, e.g. an append's fenced creates), queued as an upload of their own on a
        batched store, else stored at once in this thread. A resumable write's receipt follows its task's
        keys this way, without a round trip of its own in the task."""
        global _used
        with _cond:
            if any(u.failed for u in self._offered):
                return
            waiting = [u for u in self._offered if not u.done]
            if waiting:
                follow = _Upload(store, self.group, dict(items))
                follow.waits = len(waiting)
                for u in waiting:
                    u.followers.append(follow)
                _used += follow.nbytes
                _groups.setdefault(self.group, _Group()).pending += 1
                return
        if not self.offer(store, items, batched_io=bool(getattr(store, "batched_io", False))):
            store.set_many(dict(items))

    def drain(self) -> None:
        """Wait until every upload queued under this write is stored; raise the first error one of them met."""
        with _cond:
            found = _groups.get(self.group)
            if found is None:
                return
            while found.pending:
                _cond.wait()
            if _groups.get(self.group) is found:
                del _groups[self.group]
        if found.error is not None:
            raise found.error


def pending_bytes() -> int:
    """Bytes queued or being uploaded now, over the whole process."""
    with _cond:
        return _used


def _enqueue(upload: _Upload) -> None:
    """Queue ``upload`` for the uploader threads (under ``_cond``), starting one if none is idle."""
    _queue.append(upload)
    if not _idle and _workers < _WORKERS:
        _start_worker()
    _cond.notify_all()


def _settle(upload: _Upload, error: BaseException | None) -> None:
    """Account for a sent upload (under ``_cond``): its group's count and first error, and its follow-ups:
    queued once all they wait for landed, dropped (and no longer pending) as soon as one of them failed."""
    global _used
    upload.done, upload.failed = True, error is not None
    _used -= upload.nbytes
    group = _groups.get(upload.group)
    if group is not None:
        group.pending -= 1
        if error is not None and group.error is None:
            group.error = error
    for follow in upload.followers:
        if follow.dropped:
            continue
        follow.waits -= 1
        if error is not None:
            follow.dropped = True
            _settle(follow, None)
        elif follow.waits == 0:
            _enqueue(follow)


def _start_worker() -> None:
    global _workers
    _workers += 1
    threading.Thread(target=_work, name="zarr_dask_upload", daemon=True).start()


def _take() -> list[_Upload] | None:
    """The next batch: the oldest queued upload and the ones queued after it for the same store, up to the
    request budget's worth of keys; None when the thread has been idle long enough to end."""
    global _workers, _idle
    with _cond:
        while not _queue:
            _idle += 1
            woke = _cond.wait(_IDLE_SECONDS)
            _idle -= 1
            if not woke and not _queue:
                _workers -= 1
                return None
        first = _queue.popleft()
        batch, keys = [first], len(first.items)
        cap = int(config.get("max_requests"))
        while _queue and _queue[0].store is first.store and keys + len(_queue[0].items) <= cap:
            keys += len(_queue[0].items)
            batch.append(_queue.popleft())
        return batch


def _work() -> None:
    while (batch := _take()) is not None:
        error: BaseException | None = None
        try:
            merged = {k: v for upload in batch for k, v in upload.items.items()}
            batch[0].store.set_many(merged)
        except BaseException as exc:  # noqa: BLE001 - reported by the write's final task
            error = exc
        with _cond:
            for upload in batch:
                _settle(upload, error)
            _cond.notify_all()
