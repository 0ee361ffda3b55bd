"""A store over a user's ``MutableMapping`` (``{}``, or the dict inside zarr-python's ``MemoryStore``).

xarray accepts any ``MutableMapping`` as a Zarr store; :class:`MappingStore` is that, with the behaviour of
:class:`~zarr_dask.store.MemoryStore` (thread-safe, conditional writes) on the user's own mapping, so the data
stays where the user can see it. Values may be bytes-like, or objects with ``to_bytes()`` (zarr-python's
buffers); new values are stored as ``bytes`` unless the caller gives a ``wrap`` function (zarr-python's
``Buffer.from_bytes``, so zarr-python can read what was written).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from zarr_dask.store.memory import MemoryStore

__all__ = ["MappingStore"]

# one lock for every mapping store: two MappingStores over one dict must see each other's compare-and-swaps
_LOCK = threading.RLock()


class _BytesView(MutableMapping[str, bytes]):
    """The user's mapping seen as ``str -> bytes``; an unchanged value reads as the same ``bytes`` object (so
    identity works as a version, as in MemoryStore)."""

    def __init__(self, mapping: MutableMapping[str, Any], wrap: Callable[[bytes], Any] | None) -> None:
        self.mapping = mapping
        self.wrap = wrap
        self._seen: dict[str, tuple[Any, bytes]] = {}

    def __getitem__(self, key: str) -> bytes:
        raw = self.mapping[key]
        if isinstance(raw, bytes):
            return raw
        seen = self._seen.get(key)
        if seen is not None and seen[0] is raw:
            return seen[1]
        value = raw.to_bytes() if hasattr(raw, "to_bytes") else bytes(raw)
        self._seen[key] = (raw, value)
        return value

    def __setitem__(self, key: str, value: bytes) -> None:
        if self.wrap is None:
            self.mapping[key] = value
            return
        raw = self.wrap(value)
        self.mapping[key] = raw
        self._seen[key] = (raw, value)

    def __delitem__(self, key: str) -> None:
        del self.mapping[key]
        self._seen.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.mapping))

    def __len__(self) -> int:
        return len(self.mapping)

    def __contains__(self, key: object) -> bool:
        return key in self.mapping


class MappingStore(MemoryStore):
    """A :class:`~zarr_dask.store.MemoryStore` whose contents live in the caller's mapping.

    Like MemoryStore it pickles its contents (a copy): writes made in other processes (``distributed``
    workers) are not seen in the caller's mapping. Use a path or URL for data written by a cluster.

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
        self, mapping: MutableMapping[str, Any], *, read_only: bool = False, wrap: Callable[[bytes], Any] | None = None
    ) -> None:
        super().__init__(f"mapping-{id(mapping):x}", read_only=read_only)
        self._data = _BytesView(mapping, wrap)  # type: ignore[assignment]
        self._lock = _LOCK
