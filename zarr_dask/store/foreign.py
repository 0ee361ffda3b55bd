"""Stores made from what dask's ``from_zarr`` / ``to_zarr`` accept as a location besides a URL: an fsspec
mapper, any ``MutableMapping`` of keys to bytes (``{}`` included), and zarr-python's store objects.

zarr-python is never imported: its stores are recognised by their module and read through what they wrap
(the directory of a ``LocalStore``, the filesystem of an ``FsspecStore``, the dict of a ``MemoryStore``, the
open ``ZipFile`` of a ``ZipStore``, the obstore store of an ``ObjectStore``: :mod:`zarr_dask.store.wrapped`).
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator, MutableMapping
from typing import Any

from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store.base import Store
from zarr_dask.store.memory import MemoryStore

__all__ = ["MappingStore", "foreign_store", "is_zarr_python"]


def is_zarr_python(obj: Any) -> bool:
    """True for an object of zarr-python (``zarr.*`` classes), recognised without importing it."""
    return type(obj).__module__.split(".")[0] == "zarr"


class _BytesView(MutableMapping[str, bytes]):
    """A mapping's values as ``bytes``; the same stored object always reads as the same ``bytes`` object
    (the version :class:`MemoryStore`'s conditional writes compare)."""

    def __init__(self, mapping: MutableMapping[Any, Any], buffer_class: Any = None) -> None:
        self.mapping = mapping
        self.buffer_class = buffer_class  # zarr-python's Buffer for a zarr-python MemoryStore's dict
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
        if self.buffer_class is None:
            self.mapping[key] = value
            return
        raw = self.buffer_class.from_bytes(value)
        with self._lock:
            self._seen[key] = (raw, value)
        self.mapping[key] = raw

    def __delitem__(self, key: str) -> None:
        del self.mapping[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.mapping))

    def __len__(self) -> int:
        return len(self.mapping)

    def __contains__(self, key: object) -> bool:
        return key in self.mapping


class MappingStore(MemoryStore):
    """A store over a ``MutableMapping`` the caller owns (``{}``, a zarr-python ``MemoryStore``'s dict):
    reads and writes go to that mapping, so the caller sees them. It lives in this process: pickling it (a
    ``distributed`` cluster, a process pool) raises :class:`~zarr_dask.errors.UnsupportedFeatureError`, since
    writes made elsewhere would silently go to a copy."""

    def __init__(self, mapping: MutableMapping[Any, Any], *, read_only: bool = False, buffer_class: Any = None) -> None:
        super().__init__(f"mapping-{id(mapping):x}-{uuid.uuid4().hex[:8]}", read_only=read_only)
        self._data = _BytesView(mapping, buffer_class)  # type: ignore[assignment]

    def with_read_only(self, read_only: bool = True) -> MemoryStore:
        view = MappingStore({}, read_only=read_only)
        view.name, view.url, view._data, view._lock = self.name, self.url, self._data, self._lock
        return view

    def __reduce__(self) -> Any:
        raise UnsupportedFeatureError(
            f"store {self.url!r} is a Python mapping of this process and cannot be sent to other processes "
            "(a distributed cluster, a process pool): their writes would go to a copy; write to a URL or path "
            "('memory://name' for threads in one process, a directory or an object store for a cluster)"
        )


def _zarr_python_store(obj: Any) -> Store | None:
    name = type(obj).__name__
    read_only = bool(getattr(obj, "read_only", False))
    if name == "LocalStore" and hasattr(obj, "root"):
        from zarr_dask.store.local import LocalStore

        return LocalStore(str(obj.root), read_only=read_only)
    if name == "MemoryStore" and isinstance(getattr(obj, "_store_dict", None), MutableMapping):
        cpu = sys.modules.get("zarr.core.buffer.cpu")
        return MappingStore(obj._store_dict, read_only=read_only, buffer_class=getattr(cpu, "Buffer", None))
    if name == "FsspecStore" and hasattr(obj, "fs"):
        from zarr_dask.store.fsspec_store import FsspecStore

        fs = obj.fs
        if getattr(fs, "asynchronous", False):  # zarr-python wraps filesystems for asyncio: reopen it
            proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
            url = f"{proto}://{obj.path}"
            return FsspecStore.from_url(url, storage_options=getattr(fs, "storage_options", {}), read_only=read_only)
        return FsspecStore(fs, obj.path, read_only=read_only)
    from zarr_dask.store.wrapped import wrapped_store  # ZipStore, ObjectStore

    return wrapped_store(obj, read_only=read_only)


def foreign_store(obj: Any, read_only: bool = False) -> Store | None:
    """A :class:`Store` over an fsspec mapper, a zarr-python store or any ``MutableMapping``; None for
    anything else.

    Examples
    --------
    >>> data = {}
    >>> store = foreign_store(data)
    >>> store.set("zarr.json", b"{}")
    >>> data
    {'zarr.json': b'{}'}
    >>> foreign_store(42) is None
    True
    """
    store: Store | None = None
    if is_zarr_python(obj):
        store = _zarr_python_store(obj)
    elif type(obj).__name__ == "FSMap" and hasattr(obj, "fs") and hasattr(obj, "root"):
        from zarr_dask.store.fsspec_store import FsspecStore

        store = FsspecStore(obj.fs, obj.root, read_only=read_only)
    elif isinstance(obj, MutableMapping):
        store = MappingStore(obj, read_only=read_only)
    if store is not None and read_only and not store.read_only:
        store = store.with_read_only(True)
    return store
