"""An in-process, dict-backed store for tests and small data."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Hashable, Mapping, Sequence

from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store._keys import check_range, resolve_range
from zarr_dask.store.base import Buffer, ByteRange, Store
from zarr_dask.store.versioned import Versioned

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A thread-safe store holding its values in a Python dict.

    Unlike ``open_store("memory://...")`` (fsspec's process-global memory filesystem) each MemoryStore
    owns its data.  It **pickles its contents** (so a dask worker in another process sees the data, and
    changes made there are not seen back): use it for tests and small data only.

    Parameters
    ----------
    name
        Identifies the store in its URL (``"memory-store://<name>"``), its equality and its dask token;
        a random name by default.  Two stores created with the same name compare equal but do *not*
        share data.
    read_only
        Refuse every mutating call.
    data
        Initial ``{key: value}`` contents (copied).

    Examples
    --------
    >>> store = MemoryStore()
    >>> store.set("a/zarr.json", b"{}")
    >>> store.get("a/zarr.json"), store.list_dir("")
    (b'{}', ([], ['a']))
    """

    batched_io = False
    #: The process whose store this is a pickled copy of (None: this process's own store).
    _home_pid: int | None = None

    def __init__(
        self, name: str | None = None, *, read_only: bool = False, data: Mapping[str, Buffer] | None = None
    ) -> None:
        self.name = uuid.uuid4().hex if name is None else str(name)
        super().__init__(f"memory-store://{self.name}", read_only=read_only)
        self._lock = threading.RLock()
        self._data: dict[str, bytes] = {}
        for key, value in (data or {}).items():
            self._data[self._key(key)] = bytes(value)

    # ---------------------------------------------------------------------------------------- reading
    def get(self, key: str) -> bytes | None:
        """Return the value of ``key`` or None."""
        key = self._key(key)
        with self._lock:
            value = self._data.get(key)
        self.counters.add(get=1, bytes_read=len(value or b""))
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist."""
        wanted = list(dict.fromkeys(self._key(key) for key in keys))
        with self._lock:
            found = {key: self._data[key] for key in wanted if key in self._data}
        self.counters.add(get=len(wanted), bytes_read=sum(map(len, found.values())))
        return found

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Read byte ranges (fsspec semantics)."""
        out: list[bytes | None] = []
        for key, start, end in requests:
            key = self._key(key)
            check_range(key, start, end)
            with self._lock:
                value = self._data.get(key)
            if value is None:
                out.append(None)
                continue
            offset, length = resolve_range(start, end, len(value))
            out.append(value[offset : offset + length])
        self.counters.add(get_range=len(out), bytes_read=sum(len(v) for v in out if v is not None))
        return out

    def get_versioned(self, keys: Sequence[str]) -> dict[str, Versioned]:
        """Values with versions (the stored ``bytes`` object: every write stores a new one)."""
        wanted = list(dict.fromkeys(self._key(key) for key in keys))
        with self._lock:
            found = {key: self._data.get(key) for key in wanted}
        self.counters.add(get=len(wanted), bytes_read=sum(len(v) for v in found.values() if v is not None))
        return {key: Versioned(value, value) for key, value in found.items()}

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """Conditional writes and deletes, each compared and applied under the store's lock."""
        for key in items:
            self._check_writable("set", key)
        new = {self._key(key): (None if value is None else bytes(value), version) for key, (value, version) in items.items()}
        done: dict[str, bool] = {}
        with self._lock:
            for key, (value, version) in new.items():
                ok = done[key] = self._data.get(key) is version
                if ok and value is None:
                    del self._data[key]
                elif ok and value is not None:
                    self._data[key] = value
        sets = [v for v, _ in new.values() if v is not None]
        self.counters.add(set=len(sets), delete=len(new) - len(sets), bytes_written=sum(map(len, sets)))
        return done

    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value."""
        key = self._key(key)
        self.counters.add(exists=1)
        with self._lock:
            return key in self._data

    # ---------------------------------------------------------------------------------------- writing
    def set(self, key: str, value: Buffer) -> None:
        """Store a copy of ``value`` under ``key``."""
        self.set_many({key: value})

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        """Store several values (all or nothing if a key is invalid)."""
        for key in items:
            self._check_writable("set", key)
        new = {self._key(key): bytes(value) for key, value in items.items()}
        with self._lock:
            self._data.update(new)
        self.counters.add(set=len(new), bytes_written=sum(map(len, new.values())))

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        """Store ``value`` unless ``key`` exists (atomic: under the store's lock)."""
        self._check_writable("set", key)
        key = self._key(key)
        data = bytes(value)
        with self._lock:
            if key in self._data:
                return False
            self._data[key] = data
        self.counters.add(set=1, bytes_written=len(data))
        return True

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove the keys that are present."""
        for key in keys:
            self._check_writable("delete", key)
        wanted = list(dict.fromkeys(self._key(key) for key in keys))
        with self._lock:
            for key in wanted:
                self._data.pop(key, None)
        self.counters.add(delete=len(wanted))

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under ``prefix``."""
        self._check_writable("delete prefix", prefix)
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        with self._lock:
            for key in [k for k in self._data if k.startswith(start)]:
                del self._data[key]
        self.counters.add(delete=1)

    # ---------------------------------------------------------------------------------------- listing
    def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)
        with self._lock:
            return sorted(k for k in self._data if k.startswith(start))

    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` with its size, sorted by key."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)
        with self._lock:
            return {k: len(self._data[k]) for k in sorted(self._data) if k.startswith(start)}

    def list_prefix_versions(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Every key under ``prefix`` with its size and version (a hash of the value: this process's memory),
        sorted by key."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)
        with self._lock:
            items = [(k, self._data[k]) for k in sorted(self._data) if k.startswith(start)]
        return {k: (len(v), format(hash(bytes(v)) & 0xFFFFFFFFFFFFFFFF, "x")) for k, v in items}

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Names of the keys and child directories directly under ``prefix``."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        keys: set[str] = set()
        dirs: set[str] = set()
        self.counters.add(list=1)
        with self._lock:
            for key in self._data:
                if key.startswith(start):
                    name, sep, _ = key[len(start) :].partition("/")
                    (dirs if sep else keys).add(name)
        return sorted(keys), sorted(dirs)

    # ---------------------------------------------------------------------------------- configuration
    def with_read_only(self, read_only: bool = True) -> MemoryStore:
        """A view sharing this store's data (and lock) with ``read_only`` set."""
        view = MemoryStore(self.name, read_only=read_only)
        view._data = self._data
        view._lock = self._lock
        return view

    def _config(self) -> tuple[Hashable, ...]:
        return (self.name, self.read_only)

    @property
    def process_local(self) -> bool:
        return True

    def _check_writable(self, action: str, key: str) -> None:
        home = self._home_pid
        if home is not None and home != os.getpid():
            raise UnsupportedFeatureError(
                f"cannot {action} {key!r}: this is a copy, in process {os.getpid()}, of an in-memory store of "
                f"process {home} (a worker of the processes or distributed scheduler, or a process pool); the "
                "write would be lost with the copy. Use the threaded scheduler, or a path or URL every process "
                "reaches",
                store=self.url,
            )
        super()._check_writable(action, key)

    def __reduce__(self) -> tuple[object, tuple[str, bool, dict[str, bytes], int]]:
        with self._lock:
            data = dict(self._data)
        home = os.getpid() if self._home_pid is None else self._home_pid
        return (_rebuild_memory_store, (self.name, self.read_only, data, home))


def _rebuild_memory_store(name: str, read_only: bool, data: dict[str, bytes], home: int | None = None) -> MemoryStore:
    """Unpickle a MemoryStore: its contents as they were (a snapshot, readable anywhere), fresh counters; in
    another process than its own, a copy that refuses writes (they would be lost with it)."""
    store = MemoryStore(name, read_only=read_only, data=data)
    if home is not None and home != os.getpid():
        store._home_pid = home
    return store
