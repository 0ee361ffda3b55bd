"""The :class:`Store` contract every storage backend implements (bytes only, no metadata, no arrays)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeAlias
from weakref import WeakKeyDictionary

from zarr_dask.errors import InvalidPathError, ReadOnlyError, StoreError
from zarr_dask.store._counters import RequestCounters
from zarr_dask.store._keys import normalize_key, normalize_prefix
from zarr_dask.store.arena import ReadArena

__all__ = ["Buffer", "ByteRange", "Parts", "Store", "capable", "freeze", "joined", "value_nbytes"]

#: What ``set`` accepts; stores keep and return ``bytes``.
Buffer: TypeAlias = bytes | bytearray | memoryview
#: One ``get_ranges`` request: ``(key, start, end)`` with fsspec semantics.
ByteRange: TypeAlias = tuple[str, int | None, int | None]


class Parts:
    """A value to store made of buffers, stored as their concatenation, in order: a shard's index and encoded
    inner chunks, never joined into one ``bytes`` on the way to a store that writes pieces
    (:attr:`Store.takes_parts`). Only such stores are ever given one, through ``set`` / ``set_many``.

    It is deliberately not a sequence and has no ``len()`` (a byte count mistaken for a part count would be
    silent): :attr:`nbytes` is its size, :func:`joined` its bytes, ``buffers`` its pieces.

    Examples
    --------
    >>> value = Parts([b"ab", memoryview(b"cde")])
    >>> value.nbytes, joined(value), value_nbytes(b"xyz")
    (5, b'abcde', 3)
    """

    __slots__ = ("buffers", "nbytes")

    def __init__(self, buffers: Sequence[Any]) -> None:  # anything with the buffer protocol
        self.buffers: tuple[memoryview, ...] = tuple(memoryview(b).cast("B") for b in buffers)
        self.nbytes: int = sum(b.nbytes for b in self.buffers)

    def __bytes__(self) -> bytes:
        return b"".join(self.buffers)

    def __repr__(self) -> str:
        return f"Parts({len(self.buffers)} buffers, {self.nbytes} bytes)"


def joined(value: Buffer | Parts) -> Buffer:
    """``value`` as one buffer (a :class:`Parts` joined; anything else as it is)."""
    return bytes(value) if isinstance(value, Parts) else value


def value_nbytes(value: Buffer | Parts) -> int:
    """The size in bytes of a value to store (a :class:`Parts` too)."""
    return value.nbytes if isinstance(value, Parts) else memoryview(value).nbytes


class Store(ABC):
    """A flat, byte-valued key/value store: the only thing the engine reads from and writes to.

    Keys are ``/``-separated strings relative to the store root (see :func:`normalize_key`); values are
    ``bytes``.  Missing keys are not errors for reads and deletes.  A store pickles by configuration
    (never open sockets or filesystem objects), compares and hashes by configuration, and has a
    deterministic ``__dask_tokenize__``, so it can travel inside dask graphs.

    Attributes
    ----------
    url : str
        Canonical URL, e.g. ``"file:///abs/path"``, ``"memory://name"``, ``"s3://bucket/prefix"``.
    read_only : bool
        If true every mutating method raises :class:`~zarr_dask.errors.ReadOnlyError`.
    counters : RequestCounters
        Requests made through this instance (not pickled).

    Notes
    -----
    Backend failures surface as :class:`~zarr_dask.errors.StoreError` (an ``OSError``) naming the store
    URL and the key, chained to the original exception; invalid keys as
    :class:`~zarr_dask.errors.InvalidPathError`.

    Examples
    --------
    >>> import zarr_dask
    >>> store = zarr_dask.open_store("memory://doc-store")
    >>> isinstance(store, zarr_dask.Store)
    True
    >>> store.set("a/b", b"xyz")
    >>> store.get("a/b"), store.get("missing")
    (b'xyz', None)
    """

    url: str
    read_only: bool
    counters: RequestCounters
    #: True when one batched call for many keys beats many calls (remote stores fan a batch out
    #: concurrently); False for stores where a call costs no round trip (local files, memory).
    batched_io: bool = True
    #: True when a batched call's requests wait on the network (fsspec's asynchronous filesystems: HTTP, S3,
    #: GCS, Azure): a read in one thread may then fetch its keys in groups at once and decode each group as it
    #: arrives (:func:`~zarr_dask.core.batches.fetch_ahead`) instead of after the whole batch.
    fetches_wait: bool = False
    #: True when ``set`` and ``set_many`` take :class:`Parts` values and write them in pieces, never joined
    #: (local files, S3): a write then hands a shard over as its index and inner chunks.
    takes_parts: bool = False
    #: ``os.open`` flags for :meth:`read_paths` (stores with files only).
    read_flags: int = 0

    @property
    def process_local(self) -> bool:
        """True when the data lives in this process's memory (``MemoryStore``, a Python mapping, fsspec's
        ``memory://``): other processes (the ``processes`` or ``distributed`` scheduler, a process pool)
        cannot write into it, and writes with such a scheduler are refused before anything is written."""
        return False

    def __init__(self, url: str, *, read_only: bool) -> None:
        self.url = url
        self.read_only = bool(read_only)
        self.counters = RequestCounters(url)

    # ----------------------------------------------------------------------------------------- reading
    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """Return the value of ``key``, or ``None`` if there is none.

        Parameters
        ----------
        key
            A store key such as ``"a/zarr.json"``.

        Returns
        -------
        bytes or None
        """

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for every key of ``keys`` that exists (missing keys are left out).

        On asynchronous filesystems (S3, GCS, HTTP...) this is one batched, concurrent request.

        Parameters
        ----------
        keys
            Store keys; duplicates are fetched once.
        """

    @abstractmethod
    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Read byte ranges, one result per request, in order (``None`` where the key is missing).

        Parameters
        ----------
        requests
            ``(key, start, end)`` tuples with fsspec semantics: ``start=None`` is 0, a negative
            ``start`` with ``end=None`` is the suffix of ``-start`` bytes, ``end=None`` is the end of
            the value, negative bounds count from the end; ranges are clipped to the value like Python
            slices.  On asynchronous filesystems this is one batched, concurrent request.

        Returns
        -------
        list of bytes or None
        """

    def get_many_into(self, keys: Sequence[str], arena: ReadArena | None) -> dict[str, Buffer]:
        """Like :meth:`get_many`, for decoders: a store may place the values in memory taken from ``arena``
        (valid only inside the caller's ``with read_arena()`` block, like :meth:`get_ranges_into`; None: not
        in an arena, e.g. a fetch in another thread), or return buffers of its transport that are not
        ``bytes`` (any object with the buffer protocol)."""
        return dict(self.get_many(keys))

    def get_ranges_into(self, requests: Sequence[ByteRange], arena: ReadArena | None) -> list[Buffer | None]:
        """Like :meth:`get_ranges`, for decoders: a store may place the bytes in memory taken from ``arena``
        (None: not in an arena), or return buffers of its transport that are not ``bytes``.

        The results are only valid inside the caller's ``with read_arena()`` block: use them (decode them)
        there and keep nothing that refers to them. Stores that cannot read into memory they did not
        allocate (remote, memory) return :meth:`get_ranges`' ``bytes``; local files are read into the arena,
        so a stream of large reads touches no new memory (see :mod:`zarr_dask.store.arena`).
        """
        return list(self.get_ranges(requests))

    def process_lock(self, name: str) -> AbstractContextManager[None]:
        """A lock shared by every process on this machine that opens this store, for short read-modify-writes
        of metadata (``name`` tells locks apart). Local directories lock a file outside the store; other
        stores have none (a ``distributed.Lock`` covers a cluster). Not reentrant: callers nest it inside
        their own thread lock."""
        return nullcontext()

    def _bucket(self) -> str | None:
        """The bucket or container this store lives in, for error messages (None: not an object store)."""
        return None

    def root_problem(self) -> str | None:
        """Why nothing can be stored under this store's root, if the store can tell (a bucket that does not
        exist, say), else None. Asked only to explain a node not found, so it may cost a request."""
        return None

    def read_paths(self, keys: Sequence[str]) -> list[str | None] | None:
        """The local file paths of ``keys``, for readers that open files themselves (the native reader,
        :mod:`zarr_dask.native`), or None for stores without local files (the default).

        A path is None where the key cannot exist; the reader opens paths with :attr:`read_flags` and hands
        anything unusual (symbolic links, errors) back to :meth:`get_many_into`, which applies the store's
        rules and raises its errors."""
        return None

    @abstractmethod
    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value (a "directory" prefix is not a key)."""

    # ----------------------------------------------------------------------------------------- writing
    @abstractmethod
    def set(self, key: str, value: Buffer) -> None:
        """Store ``value`` under ``key``, replacing any old value.

        Parameters
        ----------
        key
            A store key.
        value
            The bytes; bytes-like objects are copied.
        """

    @abstractmethod
    def set_many(self, items: Mapping[str, Buffer]) -> None:
        """Store several values at once (one concurrent batch on asynchronous filesystems).

        Parameters
        ----------
        items
            ``{key: value}``.
        """

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        """Store ``value`` under ``key`` only if ``key`` holds no value yet. This default checks, then writes
        (not atomic between writers); stores that can create atomically override it.

        Returns
        -------
        bool
            True if this call wrote the value, False if the key already existed.
        """
        self._check_writable("set", key)
        if self.exists(key):
            return False
        self.set(key, value)
        return True

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is fine."""

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove every key of ``keys``; missing keys are fine."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under ``prefix`` (``""`` = everything under the store root).

        Parameters
        ----------
        prefix
            A path such as ``"group/array"`` (a trailing ``/`` is allowed); keys *under* it are removed,
            i.e. ``"group/array/..."`` -- never a sibling such as ``"group/array2"``.
        """

    # ----------------------------------------------------------------------------------------- listing
    @abstractmethod
    def list_prefix(self, prefix: str) -> list[str]:
        """Return every key under ``prefix``, recursively, sorted, relative to the store root.

        Parameters
        ----------
        prefix
            ``""`` for the whole store, else a path; ``"a"`` lists ``"a/..."`` keys, not ``"a"`` itself
            nor ``"ab/..."``.
        """

    @abstractmethod
    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Like :meth:`list_prefix`, with each key's size in bytes (one listing; ``{key: size}``)."""

    def list_prefix_versions(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Like :meth:`list_prefix_sizes`, with each key's size and version as the listing gives it (one
        listing; ``{key: (size, version)}``): an S3/Azure ETag, a GCS generation, a local file's modification
        time and inode; ``""`` where the store's listing has none (then only the size tells a change)."""
        return {key: (size, "") for key, size in self.list_prefix_sizes(prefix).items()}

    @abstractmethod
    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """List one level below ``prefix``.

        Returns
        -------
        tuple of (list of str, list of str)
            ``(keys, dirs)``: the sorted names (relative to ``prefix``, without ``/``) of the keys directly
            under ``prefix`` and of the child "directories" (prefixes that hold keys).  A missing prefix
            gives two empty lists.
        """

    # ------------------------------------------------------------------------------ configuration etc.
    @abstractmethod
    def with_read_only(self, read_only: bool = True) -> Store:
        """Return a store on the same data with ``read_only`` set (fresh request counters)."""

    @abstractmethod
    def _config(self) -> tuple[Hashable, ...]:
        """The hashable, deterministic configuration that equality, hashing and tokens are based on."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Store) and type(other) is type(self) and self._config() == other._config()

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, self._config()))

    def __dask_tokenize__(self) -> tuple[Hashable, ...]:
        """Deterministic token: class and configuration (not the contents, not the counters)."""
        return (type(self).__module__, type(self).__qualname__, *self._config())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, read_only={self.read_only})"

    # ------------------------------------------------------------------------- helpers for subclasses
    def _key(self, key: str) -> str:
        """Validate ``key``, adding this store's URL to the error."""
        try:
            return normalize_key(key)
        except InvalidPathError as err:
            raise err.with_context(store=self.url) from None

    def _prefix(self, prefix: str) -> str:
        """Validate ``prefix`` (``""`` allowed), adding this store's URL to the error."""
        try:
            return normalize_prefix(prefix)
        except InvalidPathError as err:
            raise err.with_context(store=self.url) from None

    @property
    def read_only_advice(self) -> str:
        """How to write where this store is read-only: the fix that errors about a write to it give."""
        return "open it with read_only=False (mode='a' or 'w') to write"

    def _check_writable(self, action: str, key: str) -> None:
        """Raise ReadOnlyError if this store is read-only."""
        if self.read_only:
            raise ReadOnlyError(f"the store is read-only, cannot {action} {key!r}; {self.read_only_advice}", store=self.url)

    def _error(self, action: str, key: str, exc: BaseException) -> StoreError:
        """A StoreError naming this store, the key and the failure (raise it ``from exc``): a missing bucket,
        refused credentials, a denied request and throttling each get their own class and fix
        (:mod:`zarr_dask.store.failures`)."""
        from zarr_dask.store.failures import classify, failure_error

        known = classify(exc)
        if known is not None:
            return failure_error(*known, action=action, key=key, store=self.url, bucket=self._bucket())
        return StoreError(
            f"cannot {action} key {key!r}: {type(exc).__name__}: {exc}; check that the storage is "
            "reachable and that the credentials / storage_options allow it",
            store=self.url,
        )


_CAPABLE: WeakKeyDictionary[type, dict[type, bool]] = WeakKeyDictionary()


def capable(store: object, capability: type) -> bool:
    """``isinstance(store, capability)`` for a store capability (a runtime-checkable Protocol such as
    :class:`~zarr_dask.store.versioned.ConditionalStore`), remembered per class.

    A capability is a store class's methods, so the answer holds for every instance of the class; checking
    a Protocol costs 10-25 us, paid per chunk written before. A class that finds attributes dynamically
    (``__getattr__``: a wrapper forwarding to another store) is checked every time.

    >>> from zarr_dask.store import MemoryStore
    >>> from zarr_dask.store.versioned import ConditionalStore
    >>> capable(MemoryStore(), ConditionalStore), capable(object(), ConditionalStore)
    (True, False)
    """
    cls = type(store)
    if hasattr(cls, "__getattr__"):
        return isinstance(store, capability)
    known = _CAPABLE.get(cls)
    if known is None:
        known = _CAPABLE.setdefault(cls, {})
    got = known.get(capability)
    if got is None:
        got = known[capability] = isinstance(store, capability)
    return got


def freeze(value: Any) -> Hashable:
    """A hashable, deterministic stand-in for a (nested) configuration value.

    Dicts become sorted tuples of pairs, lists/tuples/sets become tuples; other unhashable objects are
    represented by their type and ``repr``.

    Examples
    --------
    >>> freeze({"b": [1, 2], "a": {"x": None}})
    (('a', (('x', None),)), ('b', (1, 2)))
    """
    if isinstance(value, Mapping):
        return tuple(sorted(((str(k), freeze(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((freeze(v) for v in value), key=repr))
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return value
    return (type(value).__qualname__, repr(value))
