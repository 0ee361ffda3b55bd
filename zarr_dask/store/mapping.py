"""A store over a ``MutableMapping`` the caller owns: ``{}``, any mapping xarray or dask accept as a store, or
the dict inside zarr-python's ``MemoryStore``.

:class:`MappingStore` behaves as :class:`~zarr_dask.store.MemoryStore` (thread-safe, conditional writes) on
the caller's own mapping, so the data stays where the caller sees it. Values may be bytes-like, or objects
with ``to_bytes()`` (zarr-python's buffers); new values are stored as ``bytes`` unless the caller gives a
``wrap`` function (zarr-python's ``Buffer.from_bytes``, so that zarr-python reads what was written).

The mapping lives in this process. A read-only store pickles as a snapshot of its contents (a cluster can
read it); a writable one refuses to pickle, because writes made in another process would silently go to a
copy.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store.memory import MemoryStore, _rebuild_memory_store

__all__ = ["MappingStore"]

# one lock for every mapping store: two MappingStores over one dict must see each other's compare-and-swaps
_LOCK = threading.RLock()


class _BytesView(MutableMapping[str, bytes]):
    """The caller's mapping seen as ``str -> bytes``; the same stored object always reads as the same
    ``bytes`` object (identity is the version :class:`MemoryStore`'s conditional writes compare)."""

    def __init__(self, mapping: MutableMapping[Any, Any], wrap: Callable[[bytes], Any] | None) -> None:
        self.mapping = mapping
        self.wrap = wrap
        self._seen: dict[str, tuple[Any, bytes]] = {}
        self._lock = threading.Lock()

    def _bytes(self, key: str, raw: Any) -> bytes:
        if type(raw) is bytes:
            return raw
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and seen[0] is raw:
                return seen[1]
            value = bytes(raw.to_bytes() if hasattr(raw, "to_bytes") else memoryview(raw))
            self._seen[key] = (raw, value)
            return value

    def __getitem__(self, key: str) -> bytes:
        return self._bytes(key, self.mapping[key])

    def get(self, key: str, default: Any = None) -> Any:
        raw = self.mapping.get(key)
        return default if raw is None else self._bytes(key, raw)

    def __setitem__(self, key: str, value: bytes) -> None:
        if self.wrap is None:
            self.mapping[key] = value
            return
        raw = self.wrap(value)
        with self._lock:
            self._seen[key] = (raw, value)
        self.mapping[key] = raw

    def __delitem__(self, key: str) -> None:
        del self.mapping[key]
        with self._lock:
            self._seen.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.mapping))

    def __len__(self) -> int:
        return len(self.mapping)

    def __contains__(self, key: object) -> bool:
        return key in self.mapping


class MappingStore(MemoryStore):
    """A :class:`~zarr_dask.store.MemoryStore` whose contents live in the caller's mapping.

    Parameters
    ----------
    mapping
        Any ``MutableMapping`` of store keys to values (``{}`` to start empty).
    read_only
        Refuse every mutating call.
    wrap
        Turns the ``bytes`` of a new value into what the mapping should hold (default: keep ``bytes``).

    Examples
    --------
    >>> data = {}
    >>> store = MappingStore(data)
    >>> store.set("a/zarr.json", b"{}")
    >>> data
    {'a/zarr.json': b'{}'}
    """

    def __init__(
        self, mapping: MutableMapping[Any, Any], *, read_only: bool = False, wrap: Callable[[bytes], Any] | None = None
    ) -> None:
        super().__init__(f"mapping-{id(mapping):x}-{uuid.uuid4().hex[:8]}", read_only=read_only)
        self._data = _BytesView(mapping, wrap)  # type: ignore[assignment]
        self._lock = _LOCK

    def with_read_only(self, read_only: bool = True) -> MemoryStore:
        """A view of the same mapping (same data, lock and name) with ``read_only`` set."""
        view = MappingStore({}, read_only=read_only)
        view.name, view.url, view._data = self.name, self.url, self._data
        return view

    def __reduce__(self) -> Any:
        if self.read_only:  # a snapshot: readers elsewhere see what the mapping holds now
            with self._lock:
                data = dict(self._data)
            return (_rebuild_memory_store, (self.name, True, data))
        raise UnsupportedFeatureError(
            f"store {self.url!r} is a Python mapping of this process and cannot be sent to other processes "
            "(a distributed cluster, a process pool): their writes would go to a copy; write to a URL or path "
            "('memory://name' for threads in one process, a directory or an object store for a cluster)"
        )
