"""A store over any fsspec filesystem (S3, GCS, Azure, HTTP, zip, reference, memory, chained URLs)."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import fsspec
from fsspec.asyn import sync
from fsspec.spec import AbstractFileSystem

from zarr_dask.errors import StoreError, UnsupportedFeatureError
from zarr_dask.store import requests
from zarr_dask.store._keys import check_range, has_glob_magic, is_valid_key, resolve_range
from zarr_dask.store.arena import ReadArena
from zarr_dask.store.base import Buffer, ByteRange, Parts, Store, freeze, value_nbytes
from zarr_dask.store.fsspec_setup import (
    BUCKETED,
    canonical_url,
    fs_root,
    in_memory,
    protocol,
    takes_batch_size,
    unstrip,
    whole_value_kwargs,
    with_connection_pool,
)
from zarr_dask.store.obstore_reads import read_through_obstore

__all__ = ["FsspecStore"]

#: Exceptions that mean "no value under this key".
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


class FsspecStore(Store):
    """A store on an fsspec filesystem, below a root path.

    Batched calls are **one** fsspec call each (``cat``, ``cat_ranges``, ``pipe``, ``rm``), which
    asynchronous filesystems (s3fs, gcsfs, adlfs, HTTP...) run concurrently -- as many requests at once as
    the process's request budget allows (the ``max_requests`` knob, :mod:`zarr_dask.store.requests`).

    Parameters
    ----------
    fs
        The filesystem.
    path
        The store root on ``fs`` (protocol optional), e.g. ``"bucket/data.zarr"``; ``""`` = the
        filesystem root.
    read_only
        Refuse every mutating call.

    Notes
    -----
    * ``set_if_not_exists`` is best effort: an ``exists`` check, then a write with fsspec's
      ``mode="create"`` (S3 turns that into a conditional ``If-None-Match: *`` put, which is atomic;
      other filesystems may ignore it, so two concurrent creators can both "win").
    * Listings invalidate fsspec's listing cache for the listed path first, so they see writes made by
      other processes.  Names that are not valid keys are skipped.
    * On filesystems without directories (object stores) "directories" are key prefixes; on
      filesystems with directories (memory, local) ``delete`` may leave empty ones behind, which
      ``list_dir`` then reports; ``delete_prefix`` removes them.
    * Pickling: a store made with :meth:`from_url` pickles as ``(url, storage_options, read_only)``; one
      made from a filesystem object pickles as the filesystem's class and constructor arguments
      (fsspec's own configuration), never as a live filesystem or connection.

    Examples
    --------
    >>> store = FsspecStore.from_url("memory://doc-example")
    >>> store.set("a/b", b"xyz")
    >>> store.get_many(["a/b", "missing"])
    {'a/b': b'xyz'}
    >>> store.delete_prefix("")
    """

    def __new__(cls, fs: AbstractFileSystem, path: str = "", *, read_only: bool = False) -> FsspecStore:
        """A filesystem that can make conditional writes (S3, ``memory://``) gets the subclass that makes them
        (:mod:`zarr_dask.store.fsspec_conditional`), however the store is made."""
        if cls is FsspecStore:
            from zarr_dask.store.fsspec_conditional import conditional_class

            cls = conditional_class(fs) or cls
        return super().__new__(cls)

    def __init__(self, fs: AbstractFileSystem, path: str = "", *, read_only: bool = False) -> None:
        root = str(fs._strip_protocol(path)).rstrip("/") if path else ""
        super().__init__(unstrip(fs, root), read_only=read_only)
        self.fs = fs
        self.path = root
        self._url_config: tuple[str, dict[str, Any]] | None = None
        self._base = root + "/" if root else fs_root(fs)
        self._whole = whole_value_kwargs(fs)
        # fsspec's zip filesystem raised zipfile's KeyError for a missing member before fsspec 2026.9
        self._missing: tuple[type[BaseException], ...] = _MISSING + (KeyError,) if protocol(fs) == "zip" else _MISSING

    @classmethod
    def from_url(
        cls, url: str, *, storage_options: Mapping[str, Any] | None = None, read_only: bool = False
    ) -> FsspecStore:
        """Open a store from an fsspec URL.

        Parameters
        ----------
        url
            E.g. ``"s3://bucket/data.zarr"``, ``"memory://name"``, ``"zip::s3://b/x.zip"``,
            ``"reference://"`` (with ``storage_options={"fo": ...}``), ``"simplecache::https://..."``.
        storage_options
            Passed to ``fsspec.url_to_fs`` (credentials, endpoint, ``anon``...).
        read_only
            Refuse every mutating call.

        Returns
        -------
        FsspecStore

        Raises
        ------
        StoreError
            If fsspec cannot make a filesystem for the URL (unknown protocol, missing package...).
        """
        options = dict(storage_options or {})
        try:
            fs, path = fsspec.url_to_fs(url, **with_connection_pool(url, options))
        except (ImportError, ValueError, TypeError, OSError) as exc:
            raise StoreError(
                f"cannot open {url!r} with fsspec: {type(exc).__name__}: {exc}; check the URL, install the "
                "package for its protocol (s3fs, gcsfs, adlfs, aiohttp...) and check storage_options",
                store=url,
            ) from exc
        store = cls(fs, path, read_only=read_only)
        store.url = canonical_url(url)
        store._url_config = (url, options)
        return store

    # ---------------------------------------------------------------------------------------- reading
    def get(self, key: str) -> bytes | None:
        """Return the value of ``key`` or None (one ``cat_file``)."""
        path = self._path(key)
        self.counters.add(get=1)
        try:
            with self._slots(1):
                value = bytes(self.fs.cat_file(path, **self._whole))
        except self._missing:
            return None
        except Exception as exc:
            raise self._error("read", key, exc) from exc
        self.counters.add(bytes_read=len(value))
        return value

    @property
    def fetches_wait(self) -> bool:  # type: ignore[override]
        """True on asynchronous filesystems (requests in flight at once on fsspec's loop)."""
        return bool(self.fs.async_impl)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist, in one ``fs.cat`` (concurrent on async filesystems), or
        one obstore GET each where reads go through obstore (:mod:`zarr_dask.store.obstore_reads`)."""
        return self._get_many(keys, raw=False)

    def get_many_into(self, keys: Sequence[str], arena: ReadArena | None) -> dict[str, Buffer]:
        """:meth:`get_many` for decoders: a value obstore fetched is its own buffer, not copied into ``bytes``
        (``arena`` is not used)."""
        return self._get_many(keys, raw=True)

    def _get_many(self, keys: Sequence[str], raw: bool) -> dict[str, Any]:
        by_path = {self._path(key): key for key in keys}
        if not by_path:
            return {}
        self.counters.add(get=len(by_path))
        through_obstore = read_through_obstore(self.fs, self.url, [(p, None, None) for p in by_path], raw=raw)
        results: dict[str, Any] = {read[0]: value for read, value in through_obstore.items()}
        rest = [path for path in by_path if path not in results]
        try:
            if rest:
                with self._slots(len(rest)) as batch:
                    results.update(self._cat(rest, batch))
        except Exception as exc:
            raise self._error("read", by_path[rest[0]], exc) from exc
        found = {}
        for path, value in results.items():
            key = by_path.get(self.fs._strip_protocol(path), by_path.get(path))
            if key is None or value is None or isinstance(value, self._missing):
                continue
            if isinstance(value, BaseException):
                raise self._error("read", key, value) from value
            found[key] = value if raw else bytes(value)
        self.counters.add(bytes_read=sum(map(len, found.values())))
        return found

    def _cat(self, paths: list[str], batch: dict[str, int]) -> dict[str, Any]:
        """``fs.cat`` of literal paths (errors returned in place of values)."""
        if any(map(has_glob_magic, paths)):  # fs.cat would glob: ask for literal whole-file ranges
            values = self.fs.cat_ranges(paths, None, None, on_error="return", **batch, **self._whole)
            return dict(zip(paths, values, strict=True))
        return dict(self.fs.cat(paths, on_error="return", **batch, **self._whole))

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Read byte ranges in one ``fs.cat_ranges`` call (concurrent on async filesystems).

        Ranges whose bounds need the value's size (a negative ``end``, or a negative ``start`` with an
        ``end``) cost one extra ``fs.size`` call each; empty ranges are sent as one-byte probes so that
        missing keys still give None.
        """
        return self._get_ranges(requests, raw=False)

    def get_ranges_into(self, requests: Sequence[ByteRange], arena: ReadArena | None) -> list[Buffer | None]:
        """:meth:`get_ranges` for decoders: a range obstore fetched is its own buffer, not copied into
        ``bytes`` (``arena`` is not used)."""
        return self._get_ranges(requests, raw=True)

    def _get_ranges(self, requests: Sequence[ByteRange], raw: bool) -> list[Any]:
        plans = [self._plan_range(key, start, end) for key, start, end in requests]
        to_fetch = [plan for plan in plans if isinstance(plan, _RangePlan)]
        self.counters.add(get_range=len(plans))
        if to_fetch:
            self._fetch_ranges(to_fetch, raw)
        out = [plan.result() if isinstance(plan, _RangePlan) else plan for plan in plans]
        self.counters.add(bytes_read=sum(len(v) for v in out if v is not None))
        return out

    def exists(self, key: str) -> bool:
        """True if ``key`` is a file (``fs.isfile``)."""
        path = self._path(key)
        self.counters.add(exists=1)
        try:
            self.fs.invalidate_cache(path)
            return bool(self.fs.isfile(path))
        except Exception as exc:
            raise self._error("check", key, exc) from exc

    def _plan_range(self, key: str, start: int | None, end: int | None) -> _RangePlan | bytes | None:
        """Turn one request into a fetch plan, or into its answer when no fetch is needed."""
        path = self._path(key)
        check_range(key, start, end)
        if (end is not None and end < 0) or (start is not None and start < 0 and end is not None):
            try:
                size = int(self.fs.size(path))
            except self._missing:
                return None
            except Exception as exc:
                raise self._error("read", key, exc) from exc
            start, length = resolve_range(start, end, size)
            end = start + length
        if end is not None and end <= (start or 0):  # empty: a 1-byte probe tells missing from empty
            return _RangePlan(key, path, start or 0, (start or 0) + 1, empty=True)
        return _RangePlan(key, path, start, end)

    def _fetch_ranges(self, plans: list[_RangePlan], raw: bool = False) -> None:
        """One ``cat_ranges`` call for all plans (``raw``: see :meth:`get_ranges_into`); results are stored on
        the plans."""
        reads = [(plan.path, plan.start, plan.end) for plan in plans]
        done = read_through_obstore(self.fs, self.url, reads, ranges=True, raw=raw)
        for plan in plans:
            if (plan.path, plan.start, plan.end) in done:
                plan.value = done[(plan.path, plan.start, plan.end)]
        plans = [plan for plan in plans if (plan.path, plan.start, plan.end) not in done]
        if not plans:
            return
        paths = [plan.path for plan in plans]
        try:
            starts, ends = [p.start for p in plans], [p.end for p in plans]
            with self._slots(len(paths)) as batch:
                results = self.fs.cat_ranges(paths, starts, ends, on_error="return", **batch, **self._whole)
        except Exception as exc:
            raise self._error("read", plans[0].key, exc) from exc
        for plan, value in zip(plans, results, strict=True):
            if isinstance(value, self._missing):
                plan.value = None
            elif isinstance(value, BaseException):
                plan.value = self._range_after_error(plan, value)
            else:
                plan.value = bytes(value)

    def _range_after_error(self, plan: _RangePlan, error: BaseException) -> bytes | None:
        """An out-of-bounds range is an error on HTTP object stores (416); here it is ``b""``."""
        try:
            size = int(self.fs.size(plan.path))
        except self._missing:
            return None
        except Exception:  # noqa: BLE001 - any failure to size the file: report the original read error
            raise self._error("read", plan.key, error) from error
        if resolve_range(plan.start, plan.end, size)[1] == 0:
            return b""
        raise self._error("read", plan.key, error) from error

    # ---------------------------------------------------------------------------------------- writing
    def set(self, key: str, value: Buffer) -> None:
        """Write ``value`` (one ``pipe_file``)."""
        self._check_writable("set", key)
        path = self._path(key)
        data = bytes(value)
        try:
            with self._slots(1):
                self._with_parents([path], lambda: self.fs.pipe_file(path, data))
        except Exception as exc:
            raise self._error("write", key, exc) from exc
        self.counters.add(set=1, bytes_written=len(data))

    def set_many(self, items: Mapping[str, Buffer | Parts]) -> None:
        """Write several values in one ``fs.pipe`` call (concurrent on async filesystems)."""
        for key in items:
            self._check_writable("set", key)
        pieces = self.takes_parts  # Parts stay in pieces for puts that send them so (S3); else joined here
        data = {self._path(key): value if pieces and isinstance(value, Parts) else bytes(value) for key, value in items.items()}
        if not data:
            return
        if self.fs.async_impl:  # concurrent puts; an error names the key it happened to
            keys = dict(zip(data, items, strict=True))
            results = self._send_puts(data)
            failed = [(path, r) for path, r in zip(data, results, strict=True) if isinstance(r, BaseException)]
            if failed:
                path, exc = failed[0]
                raise self._error("write", keys[path], exc) from exc
        else:
            try:
                self._with_parents(list(data), lambda: self.fs.pipe(data))
            except Exception as exc:
                raise self._error("write", next(iter(items)), exc) from exc
        self.counters.add(set=len(data), bytes_written=sum(map(value_nbytes, data.values())))

    def _send_puts(self, data: dict[str, Any]) -> list[Any]:
        """Concurrent ``_pipe_file`` of every path on an async filesystem: results in order, an exception in
        place of the result of a put that failed."""
        with requests.slots(len(data)) as n:
            coros = [self.fs._pipe_file(path, value) for path, value in data.items()]
            return list(sync(self.fs.loop, requests.gather, coros, n))

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        """Best effort: ``exists`` check, then a ``mode="create"`` write (atomic on S3, see the class notes)."""
        self._check_writable("set", key)
        if self.exists(key):
            return False
        path = self._path(key)
        data = bytes(value)
        try:
            self._with_parents([path], lambda: self.fs.pipe_file(path, data, mode="create"))
        except FileExistsError:
            return False
        except Exception as exc:
            raise self._error("write", key, exc) from exc
        self.counters.add(set=1, bytes_written=len(data))
        return True

    def delete(self, key: str) -> None:
        """Remove ``key`` (missing is fine)."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove keys in one ``fs.rm`` call (S3: bulk deletes); missing keys are fine."""
        for key in keys:
            self._check_writable("delete", key)
        paths = list(dict.fromkeys(self._path(key) for key in keys))
        self.counters.add(delete=len(paths))
        self._remove(paths, keys[0] if keys else "")

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under ``prefix`` (one listing and one batched delete; never the root itself)."""
        self._check_writable("delete prefix", prefix)
        prefix = self._prefix(prefix)
        base = self._base + prefix + "/" if prefix else self._base
        files, dirs = self._find(base, prefix, withdirs=True)
        self.counters.add(list=1, delete=1)
        self._remove([path for path, _ in files], prefix)
        if not self.fs.async_impl:  # filesystems with real directories: remove the emptied ones
            self._remove_dirs(dirs)

    def _remove(self, paths: list[str], key: str) -> None:
        """``fs.rm`` of literal paths, falling back to one ``rm_file`` each if some are missing."""
        if not paths:
            return
        literal = [p for p in paths if not has_glob_magic(p)]
        single = [p for p in paths if has_glob_magic(p)]
        try:
            if literal:
                with self._slots(1):
                    self.fs.rm(literal)
        except _MISSING:
            single = paths
        except Exception as exc:
            raise self._error("delete", key, exc) from exc
        for path in single:
            try:
                self.fs.rm_file(path)
            except _MISSING:
                pass
            except Exception as exc:
                raise self._error("delete", key, exc) from exc

    def _remove_dirs(self, dirs: list[str]) -> None:
        """Remove emptied directories, deepest first (errors ignored: they are only empty shells)."""
        for directory in sorted(dirs, key=len, reverse=True):
            try:
                self.fs.rmdir(directory)
            except Exception:  # noqa: BLE001 - not empty (a concurrent write) or already gone
                continue

    def _with_parents(self, paths: list[str], write: Callable[[], object]) -> None:
        """Run ``write``; on filesystems with real directories (local, sftp) create parents and retry once.

        Not on asynchronous (object-store) filesystems, where ``makedirs`` could create a bucket.
        """
        try:
            write()
        except FileNotFoundError:
            if self.fs.async_impl:
                raise
            for parent in {p.rsplit("/", 1)[0] for p in paths if "/" in p}:
                self.fs.makedirs(parent, exist_ok=True)
            write()

    @contextmanager
    def _slots(self, wanted: int) -> Iterator[dict[str, int]]:
        """Hold request slots of the process budget for ``wanted`` requests (asynchronous filesystems only;
        others send one request at a time anyway); yields the ``batch_size=`` argument for fsspec's batched
        calls (empty when the filesystem's batched calls take none)."""
        if not self.fs.async_impl:
            yield {}
            return
        with requests.slots(wanted) as n:
            yield {"batch_size": n} if takes_batch_size(self.fs) else {}

    # ---------------------------------------------------------------------------------------- listing
    def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (one ``fs.find``), sorted."""
        return list(self.list_prefix_sizes(prefix))

    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` with its size (one ``fs.find(detail=True)``), sorted by key."""
        prefix = self._prefix(prefix)
        base = self._base + prefix + "/" if prefix else self._base
        self.counters.add(list=1)
        files, _ = self._find(base, prefix, withdirs=False)
        sizes = {path[len(self._base) :]: int(info.get("size") or 0) for path, info in files}
        return {key: sizes[key] for key in sorted(sizes) if is_valid_key(key)}

    def list_prefix_versions(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Every key under ``prefix`` with its size and version (one ``fs.find(detail=True)``): the ETag
        (S3, Azure), the generation (GCS), else the modification time the filesystem lists; sorted by key."""
        prefix = self._prefix(prefix)
        base = self._base + prefix + "/" if prefix else self._base
        self.counters.add(list=1)
        files, _ = self._find(base, prefix, withdirs=False)
        found = {path[len(self._base) :]: (int(info.get("size") or 0), _version(info)) for path, info in files}
        return {key: found[key] for key in sorted(found) if is_valid_key(key)}

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Names of the keys and child directories under ``prefix`` (one ``fs.ls``)."""
        prefix = self._prefix(prefix)
        base = self._base + prefix + "/" if prefix else self._base
        self.counters.add(list=1)
        keys: set[str] = set()
        dirs: set[str] = set()
        for entry in self._ls(base, prefix):
            path = self._strip(entry["name"])
            name = path[len(base) :].rstrip("/")
            if path.startswith(base) and "/" not in name and is_valid_key(name):
                (dirs if entry.get("type") == "directory" else keys).add(name)
        return sorted(keys), sorted(dirs)

    def _find(
        self, base: str, prefix: str, *, withdirs: bool
    ) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
        """``([(file path, info)], [directory path])`` strictly under ``base`` (which ends with '/')."""
        top = base.rstrip("/") or base
        try:
            self.fs.invalidate_cache(top)
            found = self.fs.find(top, withdirs=withdirs, detail=True)
        except _MISSING:
            return [], []
        except Exception as exc:
            raise self._error("list", prefix, exc) from exc
        files: list[tuple[str, dict[str, Any]]] = []
        dirs: list[str] = []
        for name, info in found.items():
            path = self._strip(name)
            if not path.startswith(base) or len(path) == len(base):
                continue
            if info.get("type") == "directory":
                dirs.append(path)
            else:
                files.append((path, info))
        return files, dirs

    def _ls(self, base: str, prefix: str) -> list[dict[str, Any]]:
        """``fs.ls(detail=True)`` of a directory, ``[]`` if it does not exist."""
        top = base.rstrip("/") or base
        try:
            self.fs.invalidate_cache(top)
            return list(self.fs.ls(top, detail=True))
        except _MISSING:
            return []
        except Exception as exc:
            raise self._error("list", prefix, exc) from exc

    # ------------------------------------------------------------------------------------------ paths
    def _path(self, key: str) -> str:
        """The filesystem path of a valid key."""
        return self._base + self._key(key)

    def _strip(self, name: str) -> str:
        """A path returned by the filesystem, spelled as our paths (without protocol)."""
        return name if name.startswith(self._base) else str(self.fs._strip_protocol(name))

    def _bucket(self) -> str | None:
        return self.path.split("/", 1)[0] if protocol(self.fs) in BUCKETED and self.path else None

    def _error(self, action: str, key: str, exc: BaseException) -> StoreError:
        """As :meth:`Store._error`; on an object store a write answered "not found" (gcsfs: a bare 404) can only
        mean that the bucket or container is missing: a write never needs the key to exist."""
        bucket = self._bucket()
        if bucket and action == "write" and isinstance(exc, FileNotFoundError):
            from zarr_dask.store.failures import classify, failure_error

            if classify(exc) is None:
                return failure_error("bucket", f"{type(exc).__name__}: {exc}", action=action, key=key, store=self.url, bucket=bucket)
        return super()._error(action, key, exc)

    def root_problem(self) -> str | None:
        """A bucket or container that does not exist (object stores), else None."""
        if protocol(self.fs) not in BUCKETED or not self.path:
            return None
        bucket = self.path.split("/", 1)[0]
        try:
            if self.fs.exists(bucket):
                return None
        except Exception:  # noqa: BLE001 - only to explain a missing node: no answer is no hint
            return None
        return (
            f"the bucket {bucket!r} does not exist, or these credentials cannot see it: create it, or fix the URL "
            "or the storage_options (endpoint, credentials)"
        )

    # ---------------------------------------------------------------------------------- configuration
    def with_read_only(self, read_only: bool = True) -> FsspecStore:
        """The same filesystem and root with ``read_only`` set (the filesystem object is shared)."""
        view = FsspecStore(self.fs, self.path, read_only=read_only)
        view.url = self.url
        view._url_config = self._url_config
        return view

    def _config(self) -> tuple[Hashable, ...]:
        if self._url_config is not None:
            url, options = self._url_config
            return ("url", url, freeze(options), self.read_only)
        return ("fs", type(self.fs).__qualname__, str(self.fs._fs_token), self.path, self.read_only)

    @property
    def process_local(self) -> bool:
        """True on fsspec's ``memory://`` filesystem (also under a chained or wrapping one): its files are in
        this process's memory."""
        return in_memory(self.fs)

    def __reduce__(self) -> tuple[object, tuple[Any, ...]]:
        home = os.getpid() if self.process_local else None  # other processes see another memory filesystem
        if self._url_config is not None:
            url, options = self._url_config
            return (_rebuild_from_url, (url, options, self.read_only, home))
        fs_config = (type(self.fs), tuple(self.fs.storage_args), dict(self.fs.storage_options))
        return (_rebuild_from_fs, (fs_config, self.path, self.read_only, home))


class _RangePlan:
    """One range to fetch and, once fetched, its value."""

    __slots__ = ("empty", "end", "key", "path", "start", "value")

    def __init__(
        self, key: str, path: str, start: int | None, end: int | None, *, empty: bool = False
    ) -> None:
        self.key, self.path, self.start, self.end, self.empty = key, path, start, end, empty
        self.value: bytes | None = None

    def result(self) -> bytes | None:
        """The fetched bytes (``b""`` for an empty range of an existing key), None if missing."""
        if self.value is None:
            return None
        return b"" if self.empty else self.value


def _rebuild_from_url(url: str, options: dict[str, Any], read_only: bool, home: int | None = None) -> Store:
    """Unpickle a store made by :meth:`FsspecStore.from_url`."""
    if home is not None and home != os.getpid():
        return ElsewhereStore(url, home, read_only)
    return FsspecStore.from_url(url, storage_options=options, read_only=read_only)


def _rebuild_from_fs(
    fs_config: tuple[type[AbstractFileSystem], tuple[Any, ...], dict[str, Any]],
    path: str,
    read_only: bool,
    home: int | None = None,
) -> Store:
    """Unpickle a store made from a filesystem object: rebuild the filesystem from its arguments."""
    cls, args, kwargs = fs_config
    if home is not None and home != os.getpid():
        return ElsewhereStore(f"{protocol(cast(Any, cls))}://{path}", home, read_only)
    return FsspecStore(cls(*args, **kwargs), path, read_only=read_only)


class ElsewhereStore(Store):
    """What a store on fsspec's in-memory filesystem becomes when unpickled in another process (a worker of
    the ``processes`` or ``distributed`` scheduler, a process pool): that process cannot see the filesystem,
    so every use raises :class:`~zarr_dask.errors.UnsupportedFeatureError` -- inside the task that uses it,
    which fails with the reason -- instead of reading nothing (fill values) or writing into its own memory
    (lost)."""

    batched_io = False

    def __init__(self, url: str, home: int, read_only: bool) -> None:
        super().__init__(url, read_only=read_only)
        self.home = home

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeatureError(
            f"this store is fsspec's in-memory filesystem of process {self.home}, which process {os.getpid()} (a "
            "worker of the processes or distributed scheduler, or a process pool) cannot see: it would read "
            "nothing and write into its own memory. Use the threaded scheduler, or a path or URL every process "
            "reaches",
            store=self.url,
        )

    get = get_many = get_ranges = exists = list_dir = list_prefix = list_prefix_sizes = _refuse
    set = set_many = set_if_not_exists = delete = delete_many = delete_prefix = _refuse

    def with_read_only(self, read_only: bool = True) -> ElsewhereStore:
        return ElsewhereStore(self.url, self.home, read_only)

    def _config(self) -> tuple[Hashable, ...]:
        return ("elsewhere", self.url, self.home, self.read_only)

    def __reduce__(self) -> tuple[object, tuple[str, int, bool]]:
        return (ElsewhereStore, (self.url, self.home, self.read_only))


def _version(info: Mapping[str, Any]) -> str:
    """The version of an object as a listing describes it (``""`` when it gives none)."""
    for field in ("ETag", "etag", "generation", "mtime", "LastModified", "last_modified", "updated", "created"):
        found = info.get(field)
        if found is not None and found != "":
            return str(found).strip('"')
    return ""
