"""Stores made from what dask's ``from_zarr`` / ``to_zarr`` accept as a location besides a URL: an fsspec
mapper, any ``MutableMapping`` of keys to bytes (``{}`` included), and zarr-python's store objects.

zarr-python is never imported: its stores are recognised by their module and read through what they wrap
(the directory of a ``LocalStore``, the filesystem of an ``FsspecStore``, the dict of a ``MemoryStore``, the
open ``ZipFile`` of a ``ZipStore``, the obstore store of an ``ObjectStore``: :mod:`zarr_dask.store.wrapped`).
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from typing import Any

from zarr_dask.store.base import Store
from zarr_dask.store.mapping import MappingStore

__all__ = ["foreign_store", "is_zarr_python"]


def is_zarr_python(obj: Any) -> bool:
    """True for an object of zarr-python (``zarr.*`` classes), recognised without importing it."""
    return type(obj).__module__.split(".")[0] == "zarr"


def _zarr_python_store(obj: Any) -> Store | None:
    name = type(obj).__name__
    read_only = bool(getattr(obj, "read_only", False))
    if name == "LocalStore" and hasattr(obj, "root"):
        from zarr_dask.store.local import LocalStore

        return LocalStore(str(obj.root), read_only=read_only)
    if name == "MemoryStore" and isinstance(getattr(obj, "_store_dict", None), MutableMapping):
        buffer = getattr(sys.modules.get("zarr.core.buffer.cpu"), "Buffer", None)
        return MappingStore(obj._store_dict, read_only=read_only, wrap=None if buffer is None else buffer.from_bytes)
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
