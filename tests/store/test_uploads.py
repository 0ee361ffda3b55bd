"""Write-behind (zarr_dask/store/uploads.py): follow-ups land only after what they follow, never after a failure.
A failed write leaves nothing to land later: tests/graph/test_resume.py."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from zarr_dask.store import MemoryStore
from zarr_dask.store.uploads import WriteBehind


class GatedStore(MemoryStore):
    """A memory store whose batched writes wait at a gate (a slow network), recording the order keys land in;
    writes of keys in ``fail`` raise."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.landed: list[str] = []
        self.fail = fail

    def set_many(self, items: Mapping[str, Any]) -> None:
        if not any(k.startswith("receipt") for k in items):
            self.gate.wait(30)
        if set(items) & self.fail:
            raise OSError(f"{sorted(set(items) & self.fail)}: refused")
        super().set_many(items)
        self.landed.extend(sorted(items))


def _behind() -> WriteBehind:
    return WriteBehind(f"test-{uuid.uuid4().hex}")


def test_a_follow_up_lands_after_what_it_follows() -> None:
    store, behind = GatedStore(), _behind()
    assert behind.offer(store, {"c/0": b"a"}, batched_io=True)
    assert behind.offer(store, {"c/1": b"b"}, batched_io=True)
    behind.then(store, {"receipt": b""})
    time.sleep(0.2)
    assert store.get("receipt") is None  # its keys are still on their way
    store.gate.set()
    behind.drain()
    assert store.landed.index("receipt") > max(store.landed.index("c/0"), store.landed.index("c/1"))


def test_a_follow_up_with_nothing_pending_is_written_at_once() -> None:
    store, behind = GatedStore(), _behind()
    assert not behind.offer(store, {"c/0": b"a"}, batched_io=False)  # not batched: the caller writes it
    behind.then(store, {"receipt": b""})
    assert store.get("receipt") == b""


def test_a_follow_up_with_nothing_pending_is_queued_on_a_batched_store() -> None:
    """An append's writer task stores its keys itself (nothing deferred): its receipt is then an upload of its
    own, not a round trip in the task; the final task's drain lands it."""

    class SlowBatched(GatedStore):
        batched_io = True

        def set_many(self, items: Mapping[str, Any]) -> None:
            self.gate.wait(30)  # every write waits here, the receipt too
            super().set_many(items)

    store, behind = SlowBatched(), _behind()
    started = time.perf_counter()
    behind.then(store, {"receipt": b""})
    assert time.perf_counter() - started < 5  # the caller did not wait for the store
    assert store.get("receipt") is None
    store.gate.set()
    behind.drain()
    assert store.get("receipt") == b""


def test_a_failed_upload_drops_its_follow_up() -> None:
    store, behind = GatedStore(fail=frozenset({"c/1"})), _behind()
    behind.offer(store, {"c/1": b"b"}, batched_io=True)
    behind.then(store, {"receipt": b""})
    store.gate.set()
    with pytest.raises(OSError, match="refused"):
        behind.drain()
    assert store.get("receipt") is None
    behind.then(store, {"receipt-2": b""})  # after a failure nothing follows either
    assert store.get("receipt-2") is None
