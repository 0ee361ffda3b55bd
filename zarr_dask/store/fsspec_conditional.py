"""Conditional writes on fsspec filesystems that can make them: S3 (s3fs), GCS (gcsfs), Azure Blob (adlfs)
and fsspec's ``memory://``.

:class:`~zarr_dask.store.FsspecStore` becomes one of these classes when its filesystem is one of those, so
every way of making a store (a URL, a filesystem object, unpickling, ``with_read_only``) gets the capability.

* **S3**: versions are ETags. ``get_versioned`` is one concurrent batch of ``GetObject`` (body and ETag in
  one request); ``set_if_unchanged`` one concurrent batch of ``PutObject`` with ``If-Match: <etag>`` (or
  ``If-None-Match: *`` to create) and ``DeleteObject`` with ``If-Match``. A ``412 PreconditionFailed`` or
  ``409 ConditionalRequestConflict`` is a conflict, not an error.
* **GCS** (gcsfs) and **Azure Blob** (adlfs: ``az://``, ``abfs://``): generations (``ifGenerationMatch``)
  and ETags (``If-Match`` / ``If-None-Match: *``), sent through the filesystems' own clients, so the users'
  ``storage_options`` apply unchanged: :mod:`zarr_dask.store.cloud_conditional`
  (``docs/design/cloud-conditional.md``). :class:`RequestConditionalStore` is their common batching.
* **memory://**: fsspec's process-wide memory filesystem; versions are the values, compared and swapped
  under one process-wide lock that every write through a store takes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from fsspec.asyn import sync
from fsspec.spec import AbstractFileSystem

from zarr_dask.store import failures, requests, s3put
from zarr_dask.store.base import Buffer, Parts, joined
from zarr_dask.store.fsspec_store import FsspecStore
from zarr_dask.store.versioned import Versioned

__all__ = ["MemoryFsConditionalStore", "RequestConditionalStore", "S3ConditionalStore", "conditional_class"]

#: S3 error codes that mean "the condition did not hold" (NoSuchKey: If-Match on a key deleted meanwhile).
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409", "404"})

def conditional_class(fs: AbstractFileSystem) -> type[FsspecStore] | None:
    """The conditional store class for ``fs``, or None when its filesystem cannot make conditional writes."""
    module = type(fs).__module__ or ""
    if module.startswith("s3fs") and type(fs).__name__ == "S3FileSystem":
        return S3ConditionalStore
    if module.startswith("fsspec.implementations.memory"):
        return MemoryFsConditionalStore
    names = {cls.__name__ for cls in type(fs).__mro__ if (cls.__module__ or "").startswith(("gcsfs", "adlfs"))}
    if "GCSFileSystem" in names:  # gcsfs's own class and its ExtendedGcsFileSystem
        from zarr_dask.store.cloud_conditional import GCSConditionalStore

        return GCSConditionalStore
    if "AzureBlobFileSystem" in names:  # adlfs: az://, abfs://, abfss://
        from zarr_dask.store.cloud_conditional import AzureBlobConditionalStore

        return AzureBlobConditionalStore
    return None


def _client_error_code(exc: BaseException) -> str | None:
    """The S3 error code behind ``exc`` (s3fs translates botocore's ClientError and chains it)."""
    for err in (exc, exc.__cause__, exc.__context__):
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            code = error.get("Code")
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return str(code or status or "")
    return None


def is_conflict(exc: BaseException, *, create: bool) -> bool:
    """Whether ``exc`` only says that a conditional request's condition did not hold. A missing bucket, refused
    credentials, a denied request or throttling never do (:mod:`zarr_dask.store.failures`), and neither does a
    "not found" answer to a create (``create``: ``If-None-Match: *``), which can only be the bucket's."""
    if failures.classify(exc) is not None:
        return False
    if isinstance(exc, FileExistsError):  # If-None-Match: * on an existing key
        return True
    if isinstance(exc, FileNotFoundError):  # If-Match on a key gone meanwhile
        return not create
    code = _client_error_code(exc)
    if create and code in ("NoSuchKey", "404"):
        return False
    return code in _CONFLICT_CODES


class RequestConditionalStore(FsspecStore):
    """Conditional writes as one concurrent batch of single-key requests on the filesystem's event loop.

    Subclasses give ``_get_one(path) -> Versioned`` (absent: ``Versioned(None, None)``) and
    ``_put_one(path, value, version) -> bool`` (False: the condition did not hold); errors other than a failed
    condition propagate and name the key."""

    def get_versioned(self, keys: Sequence[str]) -> dict[str, Versioned]:
        """Values and versions, one concurrent batch of GETs (body and version in one request each)."""
        by_path = {self._path(key): key for key in keys}
        self.counters.add(get=len(by_path))
        results = self._gather_sync([self._get_one(path) for path in by_path])
        found: dict[str, Versioned] = {}
        for key, result in zip(by_path.values(), results, strict=True):
            if isinstance(result, BaseException):
                raise self._error("read", key, result) from result
            found[key] = result
        self.counters.add(bytes_read=sum(len(v.value) for v in found.values() if v.value is not None))
        return found

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """Conditional writes and deletes, one concurrent batch of requests."""
        plans = self._plans(items)
        results = self._gather_sync([self._put_one(path, value, version) for _, path, value, version in plans])
        return self._outcome(plans, results)

    def _plans(self, items: Mapping[str, tuple[Buffer | None, object]]) -> list[tuple[str, str, bytes | None, object]]:
        for key in items:
            self._check_writable("set", key)
        return [(key, self._path(key), None if value is None else bytes(value), version) for key, (value, version) in items.items()]

    def _outcome(self, plans: list[tuple[str, str, bytes | None, object]], results: list[Any]) -> dict[str, bool]:
        """What each conditional request did (an error other than a failed condition raised, naming its key)."""
        done: dict[str, bool] = {}
        for (key, path, _, _), result in zip(plans, results, strict=True):
            if isinstance(result, BaseException):
                raise self._error("write", key, result) from result
            done[key] = bool(result)
            self.fs.invalidate_cache(path)
        deletes = sum(value is None for _, _, value, _ in plans)
        written = sum(len(value) for _, _, value, _ in plans if value is not None)
        self.counters.add(set=len(plans) - deletes, delete=deletes, bytes_written=written)
        return done

    def _gather_sync(self, coros: list[Any]) -> list[Any]:
        """Run the request coroutines on fsspec's loop, as many at once as the process's request budget allows."""
        with requests.slots(len(coros)) as n:
            return list(sync(self.fs.loop, requests.gather, coros, n))

    async def _get_one(self, path: str) -> Versioned:
        raise NotImplementedError

    async def _put_one(self, path: str, value: bytes | None, version: object) -> bool:
        raise NotImplementedError


class S3ConditionalStore(RequestConditionalStore):
    """An :class:`FsspecStore` on S3 with versioned reads and conditional writes (ETags, ``If-Match``)."""

    #: direct ``PutObject`` requests send a :class:`~zarr_dask.store.base.Parts` value piece by piece
    takes_parts = True

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """Conditional ``PutObject`` / ``DeleteObject`` requests, one concurrent batch. Creates
        (``If-None-Match: *``) go out as direct requests where :mod:`zarr_dask.store.s3put` can send them (their
        bodies hashed here, in the calling thread), the rest through s3fs."""
        plans = self._plans(items)
        direct = s3put.direct_put(self.fs)
        prepared = {
            path: direct.prepare(path, value)
            for _, path, value, version in plans
            if direct is not None and version is None and value is not None
        }

        async def batch(n: int) -> list[Any]:
            buckets = {item.bucket for item in prepared.values() if item is not None}
            credentials = {bucket: await direct.credentials(bucket) for bucket in buckets} if direct else {}
            return await requests.gather(
                [self._put_one(path, value, version, prepared.get(path), credentials) for _, path, value, version in plans], n
            )

        with requests.slots(len(plans)) as n:
            results = list(sync(self.fs.loop, batch, n))
        return self._outcome(plans, results)

    def _send_puts(self, data: dict[str, Any]) -> list[Any]:
        """Plain puts: direct ``PutObject`` requests where :mod:`zarr_dask.store.s3put` can send them (bodies
        hashed here, in the calling thread), s3fs's ``_pipe_file`` for the rest and for any it hands back (a
        :class:`~zarr_dask.store.base.Parts` value joined for it)."""
        direct = s3put.direct_put(self.fs)
        if direct is None:
            return super()._send_puts({path: joined(value) for path, value in data.items()})
        prepared = []
        for path, value in data.items():
            item = direct.prepare(path, value)
            prepared.append((path, value if item is not None else joined(value), item))  # (joined here, not on the loop)
        buckets = {item.bucket for _, _, item in prepared if item is not None}

        async def one(path: str, value: Buffer | Parts, item: s3put.Prepared | None, credentials: dict[str, Any]) -> None:
            if item is None or not await direct.put(item, credentials[item.bucket]):
                await self.fs._pipe_file(path, joined(value))

        async def batch(n: int) -> list[Any]:
            credentials = {bucket: await direct.credentials(bucket) for bucket in buckets}
            return await requests.gather([one(path, value, item, credentials) for path, value, item in prepared], n)

        with requests.slots(len(data)) as n:
            return list(sync(self.fs.loop, batch, n))

    async def _get_one(self, path: str) -> Versioned:
        bucket, key, _ = self.fs.split_path(path)
        try:
            response = await self.fs._call_s3("get_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return Versioned(None, None)
        body = response["Body"]
        try:
            data = await body.read()
        finally:
            body.close()
        return Versioned(bytes(data), str(response["ETag"]))

    async def _put_one(
        self, path: str, value: bytes | None, version: object, item: s3put.Prepared | None = None,
        credentials: Mapping[str, Any] | None = None,
    ) -> bool:  # fmt: skip
        if item is not None and credentials is not None:
            direct = s3put.direct_put(self.fs)
            stored = None if direct is None else await direct.put(item, credentials[item.bucket], create_only=True)
            if stored is not False:  # True: created; None: the key exists (the condition did not hold)
                return bool(stored)
        bucket, key, _ = self.fs.split_path(path)
        try:
            if value is not None:
                condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": str(version)}
                await self.fs._call_s3("put_object", Bucket=bucket, Key=key, Body=value, **condition)
            elif version is not None:
                await self.fs._call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=str(version))
            else:  # "delete if absent": nothing to do unless it exists
                return not await self.fs._exists(path)
        except Exception as exc:
            if is_conflict(exc, create=version is None and value is not None):
                return False
            raise
        return True


_MEMORY_LOCK = threading.RLock()


class MemoryFsConditionalStore(FsspecStore):
    """An :class:`FsspecStore` on fsspec's ``memory://`` filesystem with conditional writes (in-process)."""

    def get_versioned(self, keys: Sequence[str]) -> dict[str, Versioned]:
        """Values, versioned by themselves."""
        with _MEMORY_LOCK:
            found = self.get_many(keys)
        return {key: Versioned(found.get(key), found.get(key)) for key in dict.fromkeys(keys)}

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """Compare and write (or delete) under the process-wide lock."""
        done: dict[str, bool] = {}
        with _MEMORY_LOCK:
            current = self._current(list(items))
            for key, (value, version) in items.items():
                ok = done[key] = current.get(key) == version
                if ok and value is not None:
                    super().set(key, value)
                elif ok and version is not None:
                    super().delete_many([key])
        return done

    def _current(self, keys: list[str]) -> dict[str, bytes]:
        """The values now, without counting requests (the comparison is part of the conditional write)."""
        out: dict[str, bytes] = {}
        for key in keys:
            try:
                out[key] = bytes(self.fs.cat_file(self._path(key)))
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue
        return out

    def set(self, key: str, value: Buffer) -> None:
        with _MEMORY_LOCK:
            super().set(key, value)

    def set_many(self, items: Mapping[str, Buffer | Parts]) -> None:
        with _MEMORY_LOCK:
            super().set_many(items)

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        with _MEMORY_LOCK:
            return super().set_if_not_exists(key, value)

    def delete_many(self, keys: Sequence[str]) -> None:
        with _MEMORY_LOCK:
            super().delete_many(keys)
