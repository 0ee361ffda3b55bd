"""A :class:`Store` over any zarr-python ``Store`` object, through its asynchronous API.

zarr-python's wrappers (``LoggingStore``, ``CacheStore``, ``WrapperStore``), Icechunk's ``IcechunkStore``,
VirtualiZarr's ``ManifestStore`` and any other subclass of ``zarr.abc.store.Store`` are read and written
here: every batch of keys is one coroutine that gathers its requests (``get`` with byte ranges, ``set``,
``delete``, at most ``max_requests`` in flight), run on the one event loop zarr_dask owns
(:mod:`zarr_dask.store.aio`), never one key at a time. zarr-python is imported only when a user passes one of
its store objects (it is then installed).

Such a store makes no conditional writes (:mod:`zarr_dask.store.versioned`): within one call every key still
has one writer. Icechunk sessions add a transaction on top (:mod:`zarr_dask.store.icechunk`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from zarr_dask import config
from zarr_dask.errors import ReadOnlyError, StoreError
from zarr_dask.store import aio
from zarr_dask.store._counters import RequestCounters
from zarr_dask.store._keys import check_range, resolve_range
from zarr_dask.store.base import Buffer, ByteRange, Store

__all__ = ["ZarrPythonStore", "is_zarr_python_store"]

T = TypeVar("T")
_IDENTS: dict[int, tuple[Any, str]] = {}
_IDENTS_LOCK = threading.Lock()


def is_zarr_python_store(obj: Any) -> bool:
    """True for an instance of a subclass of ``zarr.abc.store.Store`` (checked without importing zarr)."""
    return any(c.__name__ == "Store" and c.__module__ == "zarr.abc.store" for c in type(obj).__mro__)


def _ident(obj: Any) -> str:
    """A name for ``obj`` that stays the same while it lives (wrappers of one object compare equal)."""
    with _IDENTS_LOCK:
        found = _IDENTS.get(id(obj))
        if found is not None and found[0]() is obj:
            return found[1]
        name, key = uuid.uuid4().hex, id(obj)
        try:
            ref = weakref.ref(obj, lambda _: _IDENTS.pop(key, None))
        except TypeError:
            return name
        _IDENTS[id(obj)] = (ref, name)
        return name


def _innermost(obj: Any) -> Any:
    """The store inside zarr-python's wrappers (``WrapperStore._store``, ``CacheStore._store``...)."""
    seen = 0
    while seen < 16 and is_zarr_python_store(getattr(obj, "_store", None)):
        obj, seen = obj._store, seen + 1
    return obj


class ZarrPythonStore(Store):
    """Any zarr-python ``Store`` object, read and written through its coroutines on zarr_dask's event loop.

    Parameters
    ----------
    store
        The zarr-python store (an instance of a subclass of ``zarr.abc.store.Store``).
    read_only
        Refuse every mutating call (a read-only zarr-python store is read-only here too).

    Examples
    --------
    >>> import tempfile, zarr
    >>> inner = zarr.storage.LoggingStore(zarr.storage.LocalStore(tempfile.mkdtemp()), log_level="DEBUG")
    >>> store = ZarrPythonStore(inner)
    >>> store.set_many({"a/zarr.json": b"{}", "b": b"xyz"})
    >>> store.get_many(["a/zarr.json", "b", "missing"])
    {'a/zarr.json': b'{}', 'b': b'xyz'}
    >>> store.get_ranges([("b", 1, None), ("b", -1, None)]), store.list_dir("")
    ([b'yz', b'z'], (['b'], ['a']))
    """

    batched_io = True

    def __init__(self, store: Any, *, read_only: bool = False, ident: str | None = None) -> None:
        self.zarr_store = store
        self._ident = ident or _ident(store)
        text = str(store)
        url = text if "://" in text and len(text) < 512 else f"zarr-python://{type(store).__name__}/{self._ident[:12]}"
        super().__init__(url, read_only=read_only or bool(getattr(store, "read_only", False)))
        self._opened = False

    @property
    def supports_consolidated(self) -> bool:
        """False for stores that keep no consolidated metadata (zarr-python's ``supports_consolidated_metadata``:
        Icechunk); readers then list instead of looking for it."""
        return bool(getattr(self.zarr_store, "supports_consolidated_metadata", True))

    @property
    def process_local(self) -> bool:
        """True over zarr-python's ``MemoryStore`` (also inside wrappers): its dict lives in this process."""
        inner = _innermost(self.zarr_store)
        return type(inner).__name__ in ("MemoryStore", "GpuMemoryStore") and type(inner).__module__.startswith("zarr")

    # ------------------------------------------------------------------------------------------ plumbing
    def _run(self, action: str, key: str, coro: Callable[[], Awaitable[T]]) -> T:
        async def call() -> T:
            await self._open()
            return await coro()

        try:
            return aio.run(call())
        except (ReadOnlyError, StoreError):
            raise
        except Exception as exc:
            if "read-only" in str(exc).lower() or "read only" in str(exc).lower() or type(exc).__name__ == "ReadOnlyError":
                raise ReadOnlyError(
                    f"the store refused to {action} {key!r}: {exc}; open a writable session or store to write",
                    store=self.url,
                ) from exc
            raise self._error(action, key, exc) from exc

    async def _open(self) -> None:
        if self._opened:
            return
        if not getattr(self.zarr_store, "_is_open", True) and hasattr(self.zarr_store, "_open"):
            try:
                await self.zarr_store._open()
            except Exception:  # already opened by another thread, or a store that opens itself on use
                if not getattr(self.zarr_store, "_is_open", True):
                    raise
        self._opened = True

    async def _bounded(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Every call at once, at most ``max_requests`` in flight."""
        limit = asyncio.Semaphore(int(config.get("max_requests")))

        async def one(call: Callable[[], Awaitable[T]]) -> T:
            async with limit:
                return await call()

        return await aio.gather(one(c) for c in calls)

    @staticmethod
    def _prototype() -> Any:
        from zarr.core.buffer import default_buffer_prototype

        return default_buffer_prototype()

    @staticmethod
    def _request(start: int | None, end: int | None) -> Any:
        """zarr-python's byte request for an fsspec range, or ``"whole"`` when it has none (read, then slice)."""
        from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

        if start is None and end is None:
            return None
        if (start is None or start >= 0) and end is None:
            return OffsetByteRequest(start or 0)
        if start is not None and start < 0 and end is None:
            return SuffixByteRequest(-start)
        if (start or 0) >= 0 and end is not None and end > (start or 0):
            return RangeByteRequest(start or 0, end)
        return "whole"

    async def _get(self, key: str, start: int | None = None, end: int | None = None) -> bytes | None:
        request = self._request(start, end)
        proto = self._prototype()
        if request == "whole":
            value = await self.zarr_store.get(key, proto)
            if value is None:
                return None
            data = value.to_bytes()
            offset, length = resolve_range(start, end, len(data))
            return bytes(data[offset : offset + length])
        value = await self.zarr_store.get(key, proto, byte_range=request)
        return None if value is None else bytes(value.to_bytes())

    # ------------------------------------------------------------------------------------------ reading
    def get(self, key: str) -> bytes | None:
        """The value of ``key`` or None."""
        key = self._key(key)
        value = self._run("read", key, lambda: self._get(key))
        self.counters.add(get=1, bytes_read=len(value or b""))
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of the keys that exist (one concurrent batch)."""
        wanted = list(dict.fromkeys(self._key(k) for k in keys))
        if not wanted:
            return {}
        values = self._run("read", wanted[0], lambda: self._bounded([partial(self._get, k) for k in wanted]))
        found = {k: v for k, v in zip(wanted, values, strict=True) if v is not None}
        self.counters.add(get=len(wanted), bytes_read=sum(map(len, found.values())))
        return found

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Byte ranges (fsspec semantics), one result per request (one concurrent batch)."""
        todo: list[tuple[str, int | None, int | None]] = []
        for key, start, end in requests:
            key = self._key(key)
            check_range(key, start, end)
            todo.append((key, start, end))
        if not todo:
            return []
        out = self._run(
            "read", todo[0][0], lambda: self._bounded([partial(self._get, *r) for r in todo])
        )
        self.counters.add(get_range=len(out), bytes_read=sum(len(v) for v in out if v is not None))
        return out

    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value."""
        key = self._key(key)
        self.counters.add(exists=1)
        return bool(self._run("check", key, lambda: self.zarr_store.exists(key)))

    # ------------------------------------------------------------------------------------------ writing
    def set(self, key: str, value: Buffer) -> None:
        """Store ``value`` under ``key``."""
        self.set_many({key: value})

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        """Store several values (one concurrent batch)."""
        for key in items:
            self._check_writable("set", key)
        new = {self._key(k): bytes(v) for k, v in items.items()}
        if not new:
            return
        buffer = self._prototype().buffer

        def put(k: str, v: bytes) -> Callable[[], Awaitable[None]]:
            return lambda: self.zarr_store.set(k, buffer.from_bytes(v))

        self._run("write", next(iter(new)), lambda: self._bounded([put(k, v) for k, v in new.items()]))
        self.counters.add(set=len(new), bytes_written=sum(map(len, new.values())))

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove the keys that are present (one concurrent batch)."""
        for key in keys:
            self._check_writable("delete", key)
        wanted = list(dict.fromkeys(self._key(k) for k in keys))
        if not wanted:
            return

        async def drop(k: str) -> None:
            if await self.zarr_store.exists(k):
                await self.zarr_store.delete(k)

        self._run("delete", wanted[0], lambda: self._bounded([partial(drop, k) for k in wanted]))
        self.counters.add(delete=len(wanted))

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under ``prefix``."""
        self._check_writable("delete prefix", prefix)
        keys = self.list_prefix(prefix)
        if keys:
            self.delete_many(keys)
        self.counters.add(delete=1)

    # ------------------------------------------------------------------------------------------ listing
    async def _keys(self, start: str) -> list[str]:
        try:
            return [k async for k in self.zarr_store.list_prefix(start) if k.startswith(start)]
        except Exception:
            if not start:
                raise
        # Icechunk lists only prefixes that are a group or an array: list from the root (absent: no keys)
        return [k async for k in self.zarr_store.list_prefix("") if k.startswith(start)]

    def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, sorted."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)
        return sorted(self._run("list", start, lambda: self._keys(start)))

    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` with its size, sorted (sizes asked concurrently)."""
        keys = self.list_prefix(prefix)
        if not keys:
            return {}
        sizes = self._run("list", keys[0], lambda: self._bounded([partial(self.zarr_store.getsize, k) for k in keys]))
        return {k: int(s) for k, s in zip(keys, sizes, strict=True)}

    async def _is_key(self, key: str) -> bool:
        """True if ``key`` holds a value; a name the store refuses as a key (Icechunk: a group or array
        path) is a directory."""
        try:
            return bool(await self.zarr_store.exists(key))
        except Exception:  # noqa: BLE001 - a key the store refuses is not a value
            return False

    async def _has_keys(self, prefix: str) -> bool:
        """True if a key lies under ``prefix`` (an emptied directory of a local store holds none); a prefix the
        store refuses to list (Icechunk lists only groups and arrays) came from its own listing, so it has."""
        found = None
        try:
            found = self.zarr_store.list_prefix(prefix)
            async for _ in found:
                return True
            return False
        except Exception:  # noqa: BLE001 - cannot tell: keep what the store's own listing said
            return True
        finally:
            close = getattr(found, "aclose", None)
            if close is not None:
                await close()

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Names of the keys and child directories directly under ``prefix``."""
        start = self._prefix(prefix)
        start = start + "/" if start else ""
        self.counters.add(list=1)

        async def listing() -> tuple[list[str], list[str]]:
            names = sorted({n.rstrip("/") async for n in self.zarr_store.list_dir(start) if n.strip("/")})
            is_key = await self._bounded([partial(self._is_key, start + n) for n in names])
            keys = [n for n, k in zip(names, is_key, strict=True) if k]
            maybe = [n for n, k in zip(names, is_key, strict=True) if not k]
            held = await self._bounded([partial(self._has_keys, f"{start}{n}/") for n in maybe])
            return keys, [n for n, h in zip(maybe, held, strict=True) if h]

        return self._run("list", start, listing)

    # ------------------------------------------------------------------------------ configuration etc.
    def with_read_only(self, read_only: bool = True) -> ZarrPythonStore:
        """The same zarr-python store with ``read_only`` set (a read-only store is never made writable)."""
        if not read_only and bool(getattr(self.zarr_store, "read_only", False)):
            raise ReadOnlyError("the zarr-python store is read-only and cannot be written", store=self.url)
        return type(self)(self.zarr_store, read_only=read_only, ident=self._ident)

    def _config(self) -> tuple[Hashable, ...]:
        return (self._ident, self.read_only)

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.zarr_store, self.read_only, self._ident, self.url))


def _rebuild(cls: type[ZarrPythonStore], store: Any, read_only: bool, ident: str, url: str) -> ZarrPythonStore:
    """Unpickle: the same identity and URL (a copied in-memory store's own name changes)."""
    out = cls(store, read_only=read_only, ident=ident)
    out.url = url
    out.counters = RequestCounters(url)
    return out
