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

Examples
--------
>>> from zarr_dask.store import MemoryStore
>>> store = MemoryStore()
>>> group = "doc-example-write"
>>> with behind(group):
...     deferred = set_many(store, {"c/0": b"x"}, batched_io=True)
>>> deferred, drain(group), store.get("c/0")
(True, None, b'x')
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from zarr_dask import config

__all__ = ["behind", "drain", "pending_bytes", "set_many"]

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
_local = threading.local()


@dataclass
class _Group:
    pending: int = 0
    error: BaseException | None = None


@dataclass
class _Upload:
    store: Any
    group: str
    items: dict[str, bytes]
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.nbytes = sum(len(v) for v in self.items.values())


@contextmanager
def behind(group: str | None) -> Iterator[None]:
    """While the block runs, whole-key writes of this thread to batched stores are queued under ``group``
    (None: written at once, as outside the block)."""
    previous = getattr(_local, "group", None)
    _local.group = group
    try:
        yield
    finally:
        _local.group = previous


def set_many(store: Any, items: Mapping[str, bytes], *, batched_io: bool) -> bool:
    """Queue ``items`` for upload under this thread's group (see :func:`behind`); returns False, having done
    nothing, when there is no group or the store is not batched (the caller writes them itself)."""
    global _used
    group = getattr(_local, "group", None)
    if group is None or not batched_io or not items:
        return False
    upload = _Upload(store, group, dict(items))
    limit = int(config.get("write_behind"))
    with _cond:
        while _used and _used + upload.nbytes > limit:  # room for it (one larger than the limit goes alone)
            _cond.wait()
        _used += upload.nbytes
        _groups.setdefault(group, _Group()).pending += 1
        _queue.append(upload)
        if not _idle and _workers < _WORKERS:
            _start_worker()
        _cond.notify_all()
    return True


def drain(group: str) -> None:
    """Wait until every upload queued under ``group`` is stored; raise the first error one of them met."""
    with _cond:
        found = _groups.get(group)
        if found is None:
            return
        while found.pending:
            _cond.wait()
        if _groups.get(group) is found:
            del _groups[group]
    if found.error is not None:
        raise found.error


def pending_bytes() -> int:
    """Bytes queued or being uploaded now, over the whole process."""
    with _cond:
        return _used


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
    global _used
    while (batch := _take()) is not None:
        error: BaseException | None = None
        try:
            merged = {k: v for upload in batch for k, v in upload.items.items()}
            batch[0].store.set_many(merged)
        except BaseException as exc:  # noqa: BLE001 - reported by the write's final task
            error = exc
        with _cond:
            for upload in batch:
                _used -= upload.nbytes
                group = _groups.get(upload.group)
                if group is not None:
                    group.pending -= 1
                    if error is not None and group.error is None:
                        group.error = error
            _cond.notify_all()
