"""Stores over zarr-python's ``ZipStore`` and ``ObjectStore`` objects that a user passes as the store.

Neither zarr-python nor obstore is imported unless the user gave one of these objects: a ``ZipStore`` is read
and written through the ``zipfile.ZipFile`` it holds open (under its own lock, so what we write is in the
archive the user closes), an ``ObjectStore`` through obstore's blocking functions on the obstore store it
wraps (``S3Store``, ``GCSStore``, ``AzureStore``, ``LocalStore``, ``MemoryStore``...).

Neither makes conditional writes (see :mod:`zarr_dask.store.versioned` and docs/safe-writes.md): within one
call every key still has one writer; merged keys are read, merged and written back once, and independent
writers must keep to whole chunks. A zip archive cannot delete or replace entries: a rewritten key is appended
again (readers see the last one, as with zarr-python's ``ZipStore``), and deleting a stored key raises
:class:`~zarr_dask.errors.UnsupportedFeatureError`.
"""

from __future__ import annotations

import os
import threading
import time
import zipfile
from abc import abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from zarr_dask.errors import StoreError, UnsupportedFeatureError
from zarr_dask.store._keys import check_range, resolve_range
from zarr_dask.store.base import Buffer, ByteRange, Store

__all__ = ["ObjectStoreStore", "ZipArchiveStore", "wrapped_store"]


class _WrappedStore(Store):
    """A Store from a few primitives: read a key (or a range of it), list sizes under a prefix, write, delete."""

    batched_io = False

    @abstractmethod
    def _read(self, key: str) -> bytes | None: ...

    @abstractmethod
    def _read_range(self, key: str, start: int | None, end: int | None) -> bytes | None: ...

    @abstractmethod
    def _sizes(self, prefix: str) -> dict[str, int]:
        """``{key: size}`` of every key starting with ``prefix`` (a plain string prefix)."""

    @abstractmethod
    def _write(self, items: Mapping[str, bytes]) -> None: ...

    @abstractmethod
    def _remove(self, keys: Sequence[str]) -> None:
        """Delete keys that exist."""

    def _guard(self, action: str, key: str, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except (UnsupportedFeatureError, StoreError):
            raise
        except Exception as exc:
            raise self._error(action, key, exc) from exc

    # ------------------------------------------------------------------------------------------ reading
    def get(self, key: str) -> bytes | None:
        """The value of ``key`` or None."""
        key = self._key(key)
        value: bytes | None = self._guard("read", key, self._read, key)
        self.counters.add(get=1, bytes_read=len(value or b""))
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of the keys that exist."""
        found: dict[str, bytes] = {}
        for key in dict.fromkeys(self._key(k) for k in keys):
            value = self._guard("read", key, self._read, key)
            if value is not None:
                found[key] = value
        self.counters.add(get=len(set(keys)), bytes_read=sum(map(len, found.values())))
        return found

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Byte ranges (fsspec semantics), one result per request."""
        out: list[bytes | None] = []
        for key, start, end in requests:
            key = self._key(key)
            check_range(key, start, end)
            out.append(self._guard("read", key, self._read_range, key, start, end))
        self.counters.add(get_range=len(out), bytes_read=sum(len(v) for v in out if v is not None))
        return out

    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value."""
        key = self._key(key)
        self.counters.add(exists=1)
        return key in self._guard("list", key, self._sizes, key)

    # ------------------------------------------------------------------------------------------ writing
    def set(self, key: str, value: Buffer) -> None:
        """Store ``value`` under ``key``."""
        self.set_many({key: value})

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        """Store several values."""
        for key in items:
            self._check_writable("set", key)
        new = {self._key(k): bytes(v) for k, v in items.items()}
        self._guard("write", next(iter(new), ""), self._write, new)
        self.counters.add(set=len(new), bytes_written=sum(map(len, new.values())))

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove the keys that are present."""
        for key in keys:
            self._check_writable("delete", key)
        wanted = list(dict.fromkeys(self._key(k) for k in keys))
        if wanted:
            self._guard("delete", wanted[0], self._remove, wanted)
        self.counters.add(delete=len(wanted))

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under ``prefix``."""
        self._check_writable("delete prefix", prefix)
        keys = self.list_prefix(prefix)
        if keys:
            self._guard("delete", keys[0], self._remove, keys)
        self.counters.add(delete=1)

    # ------------------------------------------------------------------------------------------ listing
    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` with its size, sorted."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)
        sizes: dict[str, int] = self._guard("list", start, self._sizes, start)
        return {k: sizes[k] for k in sorted(sizes) if k.startswith(start)}

    def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted."""
        return list(self.list_prefix_sizes(prefix))

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Names of the keys and child directories directly under ``prefix``."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        keys: set[str] = set()
        dirs: set[str] = set()
        for key in self.list_prefix(prefix):
            name, sep, _ = key[len(start) :].partition("/")
            (dirs if sep else keys).add(name)
        return sorted(keys), sorted(dirs)


class ZipArchiveStore(_WrappedStore):
    """The archive of a zarr-python ``ZipStore``, read and written through its open ``ZipFile`` and lock.

    It lives in this process: pickling a writable one raises (another process would reopen the archive and,
    in mode ``"w"``, truncate it); a read-only one pickles as the path of the archive, reopened to read.
    """

    def __init__(self, zip_store: Any, *, read_only: bool = False) -> None:
        self.zip_store = zip_store
        self.path = os.fspath(zip_store.path)
        super().__init__(f"zip://{self.path}", read_only=read_only or bool(getattr(zip_store, "read_only", False)))

    def _zip(self) -> tuple[zipfile.ZipFile, Any]:
        z = self.zip_store
        with _OPEN_LOCK:
            if not getattr(z, "_is_open", True):
                z._sync_open()
        return z._zf, z._lock

    def _read(self, key: str) -> bytes | None:
        zf, lock = self._zip()
        with lock:
            try:
                return zf.read(key)
            except KeyError:
                return None

    def _read_range(self, key: str, start: int | None, end: int | None) -> bytes | None:
        zf, lock = self._zip()
        with lock:
            try:
                info = zf.getinfo(key)
            except KeyError:
                return None
            offset, length = resolve_range(start, end, info.file_size)
            with zf.open(info) as f:
                f.seek(offset)
                return f.read(length)

    def _sizes(self, prefix: str) -> dict[str, int]:
        zf, lock = self._zip()
        with lock:
            return {i.filename: i.file_size for i in zf.infolist() if i.filename.startswith(prefix) and not i.is_dir()}

    def _write(self, items: Mapping[str, bytes]) -> None:
        zf, lock = self._zip()
        compression = getattr(self.zip_store, "compression", zipfile.ZIP_STORED)
        with lock:
            for key, value in items.items():
                try:
                    if zf.read(key) == value:  # the same bytes again (metadata written idempotently): no new entry
                        continue
                except KeyError:
                    pass
                info = zipfile.ZipInfo(filename=key, date_time=time.localtime(time.time())[:6])
                info.compress_type = compression
                info.external_attr = 0o644 << 16
                zf.writestr(info, value)

    def _remove(self, keys: Sequence[str]) -> None:
        zf, lock = self._zip()
        with lock:
            stored = [k for k in keys if k in zf.NameToInfo]
        if stored:
            raise UnsupportedFeatureError(
                f"cannot delete key {stored[0]!r}{f' and {len(stored) - 1} more' if len(stored) > 1 else ''}: a zip "
                "archive cannot delete entries; write into a new ZipStore (mode='w'), or write to a directory and "
                "zip it afterwards",
                store=self.url,
            )

    def with_read_only(self, read_only: bool = True) -> ZipArchiveStore:
        """The same archive with ``read_only`` set."""
        return ZipArchiveStore(self.zip_store, read_only=read_only)

    def _config(self) -> tuple[Hashable, ...]:
        return (self.path, id(self.zip_store), self.read_only)

    def __reduce__(self) -> Any:
        if self.read_only:
            return (_reopen_zip, (self.path,))
        raise UnsupportedFeatureError(
            f"store {self.url!r} is a zip archive open for writing in this process and cannot be sent to other "
            "processes (a distributed cluster, a process pool); write with threads (dask's default scheduler), "
            "or to a directory or an object store and zip it afterwards",
        )


_OPEN_LOCK = threading.Lock()


def _reopen_zip(path: str) -> ZipArchiveStore:
    """Unpickle a read-only ZipArchiveStore: the archive opened to read in this process."""
    return ZipArchiveStore(_ReadOnlyZip(path), read_only=True)


class _ReadOnlyZip:
    """What ZipArchiveStore needs of a ``ZipStore``: a path, an open ZipFile and its lock."""

    read_only = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._zf = zipfile.ZipFile(path, mode="r")
        self._lock = threading.RLock()


class ObjectStoreStore(_WrappedStore):
    """The obstore store inside a zarr-python ``ObjectStore``, through obstore's blocking functions.

    Pickles as the zarr-python object (obstore's remote stores pickle by configuration).
    """

    def __init__(self, object_store: Any, *, read_only: bool = False) -> None:
        self.object_store = object_store
        self.inner = object_store.store
        read_only = read_only or bool(getattr(object_store, "read_only", False))
        super().__init__(f"object_store://{self.inner!r}", read_only=read_only)

    def _read(self, key: str) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(self.inner, key).bytes())
        except FileNotFoundError:
            return None

    def _read_range(self, key: str, start: int | None, end: int | None) -> bytes | None:
        import obstore

        try:
            if start is not None and end is not None and 0 <= start < end:
                try:
                    return bytes(obstore.get_range(self.inner, key, start=start, end=end))
                except FileNotFoundError:
                    raise
                except Exception:  # noqa: BLE001 - a range past the end: clip it below, as fsspec does
                    pass
            size = int(obstore.head(self.inner, key)["size"])
        except FileNotFoundError:
            return None
        offset, length = resolve_range(start, end, size)
        if length == 0:
            return b""
        return bytes(obstore.get_range(self.inner, key, start=offset, length=length))

    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value (one HEAD request)."""
        import obstore

        key = self._key(key)
        self.counters.add(exists=1)
        try:
            obstore.head(self.inner, key)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._error("check", key, exc) from exc
        return True

    def _sizes(self, prefix: str) -> dict[str, int]:
        import obstore

        folder = prefix.rpartition("/")[0] if prefix else None
        found: dict[str, int] = {}
        for batch in obstore.list(self.inner, folder or None):
            for meta in batch:
                if meta["path"].startswith(prefix):
                    found[meta["path"]] = int(meta["size"])
        return found

    def _write(self, items: Mapping[str, bytes]) -> None:
        import obstore

        for key, value in items.items():
            obstore.put(self.inner, key, value)

    def _remove(self, keys: Sequence[str]) -> None:
        import obstore

        for key in keys:
            try:
                obstore.head(self.inner, key)  # a "directory" of a local store is no key: leave it
            except FileNotFoundError:
                continue
            obstore.delete(self.inner, key)

    def with_read_only(self, read_only: bool = True) -> ObjectStoreStore:
        """The same objects with ``read_only`` set."""
        return ObjectStoreStore(self.object_store, read_only=read_only)

    def _config(self) -> tuple[Hashable, ...]:
        return (self.url, self.read_only)  # the url holds the obstore store's repr (bucket, prefix, root)

    def __reduce__(self) -> Any:
        return (ObjectStoreStore, (self.object_store,), {"read_only": self.read_only})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.read_only = bool(state["read_only"])


def wrapped_store(obj: Any, *, read_only: bool = False) -> Store | None:
    """A Store over a zarr-python ``ZipStore`` or ``ObjectStore`` (recognised by name, nothing imported), or
    None for anything else.

    Examples
    --------
    >>> import tempfile, zarr
    >>> archive = zarr.storage.ZipStore(tempfile.mkdtemp() + "/d.zip", mode="w")
    >>> wrapped_store(archive).url.startswith("zip://")
    True
    >>> wrapped_store({}) is None  # not a zarr-python store (a MappingStore takes a dict)
    True
    """
    name = type(obj).__name__
    if type(obj).__module__.split(".")[0] != "zarr":
        return None
    if name == "ZipStore" and hasattr(obj, "path"):
        return ZipArchiveStore(obj, read_only=read_only)
    if name == "ObjectStore" and hasattr(obj, "store"):
        return ObjectStoreStore(obj, read_only=read_only)
    return None
