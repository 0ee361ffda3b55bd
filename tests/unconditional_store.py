"""A store without conditional writes, for tests of what happens on such stores (HTTP, zip, GCS...)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from zarr_dask.store import MemoryStore, Store
from zarr_dask.store.base import Buffer, ByteRange


class UnconditionalStore(Store):
    """A :class:`MemoryStore`'s data behind the plain :class:`Store` interface only (no ``get_versioned`` /
    ``set_if_unchanged``), so the engine treats it as a store that cannot make conditional writes."""

    batched_io = False

    def __init__(self, inner: MemoryStore | None = None) -> None:
        self.inner = inner if inner is not None else MemoryStore()
        super().__init__("plain+" + self.inner.url, read_only=self.inner.read_only)
        self.counters = self.inner.counters

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        return self.inner.get_many(keys)

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        return self.inner.get_ranges(requests)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def set(self, key: str, value: Buffer) -> None:
        self.inner.set(key, value)

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        self.inner.set_many(items)

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        return self.inner.set_if_not_exists(key, value)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)

    def list_prefix(self, prefix: str) -> list[str]:
        return self.inner.list_prefix(prefix)

    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        return self.inner.list_prefix_sizes(prefix)

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        return self.inner.list_dir(prefix)

    def with_read_only(self, read_only: bool = True) -> UnconditionalStore:
        return UnconditionalStore(self.inner.with_read_only(read_only))

    def _config(self) -> tuple[Hashable, ...]:
        return ("plain", *self.inner._config())

    def __reduce__(self) -> tuple[Any, ...]:
        return (UnconditionalStore, (self.inner,))
