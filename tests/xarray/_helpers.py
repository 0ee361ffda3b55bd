"""Helpers for the xarray backend tests: a store that records which keys are written."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

from zarr_dask.store import MemoryStore
from zarr_dask.store.base import Buffer

METADATA_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


class RecordingStore(MemoryStore):
    """A MemoryStore that counts every write per key (threaded scheduler only: it is not shared across
    processes)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: Counter[str] = Counter()
        self._write_lock = threading.Lock()

    def _record(self, keys: object) -> None:
        with self._write_lock:
            self.writes.update(keys)  # type: ignore[arg-type]

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        self._record(list(items))
        super().set_many(items)

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        won = super().set_if_unchanged(items)
        self._record([k for k, ok in won.items() if ok and items[k][0] is not None])
        return won

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        wrote = super().set_if_not_exists(key, value)
        if wrote:
            self._record([key])
        return wrote

    def metadata_writes(self) -> Counter[str]:
        return Counter({k: n for k, n in self.writes.items() if k.rsplit("/", 1)[-1] in METADATA_NAMES})
