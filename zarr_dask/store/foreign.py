"""The one place where what users pass as a store, besides a path, a URL or a :class:`Store`, becomes a Store.

Every entry point (``from_zarr``, ``to_zarr``, ``append``, ``open_*``, ``xr.open_dataset(engine="zarr_dask")``,
``to_zarr_dataset`` / ``to_zarr_datatree``, ``convert``, the ZOM) reaches it through
:func:`zarr_dask.store.open_store`:

============================================  =================================================================
what                                          store
============================================  =================================================================
an Icechunk ``Session`` or ``IcechunkStore``  :class:`~zarr_dask.store.icechunk.IcechunkSessionStore`
zarr-python's ``LocalStore``, ``MemoryStore``,  read through what they wrap: the directory, the dict, the
``FsspecStore``, ``ZipStore``, ``ObjectStore``  filesystem, the open ``ZipFile``, the obstore store
                                                (:mod:`zarr_dask.store.wrapped`)
any other zarr-python ``Store`` (wrappers,     :class:`~zarr_dask.store.zarr_python.ZarrPythonStore` (its
VirtualiZarr's ``ManifestStore``...)           coroutines, batched, on zarr_dask's event loop)
a ``UPath``                                    a local path, or an fsspec store on its filesystem
an fsspec mapper (``FSMap``)                   :class:`~zarr_dask.store.fsspec_store.FsspecStore`
any other ``MutableMapping`` (``{}``)          :class:`~zarr_dask.store.mapping.MappingStore`
============================================  =================================================================

zarr-python and icechunk are never imported to recognise their objects (their classes and modules say it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import Any

from zarr_dask.store.base import Store
from zarr_dask.store.mapping import MappingStore

__all__ = ["foreign_store", "is_zarr_python"]

#: zarr-python's own store classes read through what they wrap (not subclasses defined elsewhere).
_NATIVE = ("LocalStore", "MemoryStore", "FsspecStore", "ZipStore", "ObjectStore")


def is_zarr_python(obj: Any) -> bool:
    """True for an object of zarr-python (``zarr.*`` classes), recognised without importing it."""
    return type(obj).__module__.split(".")[0] == "zarr"


def _zarr_python_store(obj: Any, read_only: bool) -> Store | None:
    name = type(obj).__name__
    read_only = read_only or bool(getattr(obj, "read_only", False))
    if not (is_zarr_python(obj) and name in _NATIVE):
        from zarr_dask.store.zarr_python import ZarrPythonStore, is_zarr_python_store

        return ZarrPythonStore(obj, read_only=read_only) if is_zarr_python_store(obj) else None
    if name == "LocalStore" and hasattr(obj, "root"):
        from zarr_dask.store.local import LocalStore

        return LocalStore(os.fspath(obj.root), read_only=read_only)
    if name == "MemoryStore" and isinstance(getattr(obj, "_store_dict", None), MutableMapping):
        buffer = getattr(sys.modules.get("zarr.core.buffer.cpu"), "Buffer", None)
        return MappingStore(obj._store_dict, read_only=read_only, wrap=None if buffer is None else buffer.from_bytes)
    if name == "FsspecStore" and hasattr(obj, "fs"):
        from zarr_dask.store.fsspec_store import FsspecStore

        return FsspecStore(blocking_filesystem(obj.fs), obj.path, read_only=read_only)
    from zarr_dask.store.wrapped import wrapped_store  # ZipStore, ObjectStore

    return wrapped_store(obj, read_only=read_only)


def blocking_filesystem(fs: Any) -> Any:
    """A filesystem usable with blocking calls: zarr-python hands out asynchronous instances bound to its own
    event loop, which must not be driven from here; rebuild them from their configuration."""
    if not getattr(fs, "asynchronous", False):
        return fs
    sync_fs = getattr(fs, "sync_fs", None)  # fsspec's AsyncFileSystemWrapper around a blocking filesystem
    if sync_fs is not None:
        return sync_fs
    options = {k: v for k, v in getattr(fs, "storage_options", {}).items() if k not in ("asynchronous", "loop")}
    return type(fs)(**options)


def _upath_store(obj: Any, read_only: bool) -> Store | None:
    """A ``UPath`` (universal-pathlib): a local path, or an fsspec store on its filesystem."""
    if type(obj).__module__.split(".")[0] != "upath" or not hasattr(obj, "fs"):
        return None
    if str(getattr(obj, "protocol", "")) in ("", "file", "local"):
        from zarr_dask.store.local import LocalStore

        return LocalStore(str(obj.path), read_only=read_only)
    from zarr_dask.store.fsspec_store import FsspecStore

    return FsspecStore(obj.fs, str(obj.path), read_only=read_only)


def foreign_store(obj: Any, read_only: bool = False) -> Store | None:
    """A :class:`Store` over an Icechunk session, a zarr-python store, a ``UPath``, an fsspec mapper or any
    ``MutableMapping``; None for anything else.

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
    from zarr_dask.store.icechunk import icechunk_store

    store: Store | None = icechunk_store(obj, read_only=read_only)
    if store is None:
        store = _zarr_python_store(obj, read_only) or _upath_store(obj, read_only)
    if store is None and type(obj).__name__ == "FSMap" and hasattr(obj, "fs") and hasattr(obj, "root"):
        from zarr_dask.store.fsspec_store import FsspecStore

        store = FsspecStore(obj.fs, obj.root, read_only=read_only)
    elif store is None and isinstance(obj, MutableMapping):
        store = MappingStore(obj, read_only=read_only)
    if store is not None and read_only and not store.read_only:
        store = store.with_read_only(True)
    return store
