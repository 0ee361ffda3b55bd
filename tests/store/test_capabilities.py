"""``store.base.capable``: a store capability (a runtime-checkable Protocol) answered once per class, and
per instance for classes that forward attributes dynamically."""

from __future__ import annotations

from typing import Any

from zarr_dask.store import MemoryStore
from zarr_dask.store.base import capable
from zarr_dask.store.transactions import ForkingStore, task_store
from zarr_dask.store.versioned import ConditionalStore, conditional


class _Forwarding:
    """A wrapper that finds every attribute on the store it wraps: its capabilities are its instance's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Plain:
    def get(self, key: str) -> bytes | None:
        return None


def test_capabilities_agree_with_isinstance_for_every_instance_of_a_class() -> None:
    for _ in range(3):  # the first call decides for the class, the others read what it decided
        store = MemoryStore()
        assert capable(store, ConditionalStore) is isinstance(store, ConditionalStore) is True
        assert capable(store, ForkingStore) is isinstance(store, ForkingStore) is False
        assert conditional(store) is store
        assert task_store(store) is store
        assert capable(_Plain(), ConditionalStore) is False
        assert conditional(_Plain()) is None  # type: ignore[arg-type]


def test_a_forwarding_wrapper_is_asked_per_instance() -> None:
    over_memory, over_plain = _Forwarding(MemoryStore()), _Forwarding(_Plain())
    for _ in range(2):
        assert capable(over_memory, ConditionalStore) is True
        assert capable(over_plain, ConditionalStore) is False
        assert capable(over_memory, ConditionalStore) is True
