"""Conditional writes on Google Cloud Storage (gcsfs) and Azure Blob Storage (adlfs).

Both go through the filesystem's own client -- its session, credentials, endpoint and retries, built from the
``storage_options`` users pass -- so nothing of a user's configuration has to be translated (the decision:
``docs/design/cloud-conditional.md``).

* **GCS**: versions are object *generations*. ``get_versioned`` is one media ``GET`` per key (the body and
  its ``X-Goog-Generation`` header); writes are multipart uploads with ``ifGenerationMatch=<generation>``
  (``0``: create only), deletes ``DELETE`` with ``ifGenerationMatch``. ``412 Precondition Failed`` (and a
  ``404`` on a conditional delete) is a conflict.
* **Azure Blob**: versions are ETags. ``get_versioned`` is one ``Get Blob`` per key (body and ETag);
  writes are ``Put Blob`` (``Put Block List`` for large values) with ``If-Match: <etag>`` or
  ``If-None-Match: *``, deletes ``Delete Blob`` with ``If-Match``. ``412 ConditionNotMet``,
  ``409 BlobAlreadyExists`` and ``404 BlobNotFound`` are conflicts.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any
from urllib.parse import quote

from zarr_dask.store.base import Buffer
from zarr_dask.store.fsspec_conditional import RequestConditionalStore, is_conflict
from zarr_dask.store.versioned import Versioned

__all__ = ["AzureBlobConditionalStore", "GCSConditionalStore"]


class _CreateOnly(RequestConditionalStore):
    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        """One create-only request (atomic on the service: no ``exists`` check first)."""
        return self.set_if_unchanged({key: (value, None)})[key]


class GCSConditionalStore(_CreateOnly):
    """An :class:`FsspecStore` on GCS with versioned reads and conditional writes (generations,
    ``ifGenerationMatch``), sent through gcsfs's own session."""

    async def _get_one(self, path: str) -> Versioned:
        try:
            headers, data = await self.fs._call("GET", self.fs.url(path))
        except FileNotFoundError:
            return Versioned(None, None)
        return Versioned(bytes(data), int(headers["X-Goog-Generation"]))

    async def _put_one(self, path: str, value: bytes | None, version: object) -> bool:
        bucket, key, _ = self.fs.split_path(path)
        try:
            if value is not None:
                await self._upload(bucket, key, value, 0 if version is None else int(str(version)))
            elif version is not None:
                await self.fs._call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=str(int(str(version))))
            else:  # "delete if absent": nothing to do unless it exists
                return not await self.fs._exists(path)
        except Exception as exc:
            if is_conflict(exc, create=version is None and value is not None):  # gcsfs: FileExistsError for 412, FileNotFoundError for 404
                return False
            raise
        return True

    async def _upload(self, bucket: str, key: str, value: bytes, generation: int) -> None:
        """One multipart upload (metadata and body in one request) with ``ifGenerationMatch``."""
        boundary = uuid.uuid4().hex
        head = (
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
            f'{{"name": {json.dumps(key)}}}\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        body = head.encode() + value + f"\r\n--{boundary}--".encode()
        await self.fs._call(
            "POST", f"{self.fs._location}/upload/storage/v1/b/{quote(bucket)}/o", uploadType="multipart",
            ifGenerationMatch=str(generation), headers={"Content-Type": f'multipart/related; boundary="{boundary}"'},
            data=io.BytesIO(body),  # a stream: aiohttp sends it in pieces (and rewinds it for a retry)
        )  # fmt: skip


class AzureBlobConditionalStore(_CreateOnly):
    """An :class:`FsspecStore` on Azure Blob Storage with versioned reads and conditional writes (ETags,
    ``If-Match`` / ``If-None-Match: *``), sent through adlfs's own ``BlobServiceClient``."""

    def _blob(self, path: str) -> Any:
        container, blob, _ = self.fs.split_path(path)
        return self.fs.service_client.get_blob_client(container, blob)

    async def _get_one(self, path: str) -> Versioned:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            downloader = await self._blob(path).download_blob()
            data = await downloader.readall()
        except ResourceNotFoundError:
            return Versioned(None, None)
        return Versioned(bytes(data), str(downloader.properties.etag))

    async def _put_one(self, path: str, value: bytes | None, version: object) -> bool:
        from azure.core import MatchConditions

        client = self._blob(path)
        try:
            if value is not None and version is None:
                await client.upload_blob(io.BytesIO(value), length=len(value), overwrite=False)  # If-None-Match: *
            elif value is not None:
                await client.upload_blob(
                    io.BytesIO(value), length=len(value), overwrite=True, etag=str(version), match_condition=MatchConditions.IfNotModified
                )
            elif version is not None:
                await client.delete_blob(etag=str(version), match_condition=MatchConditions.IfNotModified)
            else:  # "delete if absent": nothing to do unless it exists
                return not await client.exists()
        except Exception as exc:
            if _azure_conflict(exc):
                return False
            raise
        return True


#: Azure error codes that mean "the condition did not hold".
_AZURE_CONFLICTS = frozenset({"ConditionNotMet", "BlobAlreadyExists", "BlobNotFound", "TargetConditionNotMet"})


def _azure_conflict(exc: BaseException) -> bool:
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # azure-storage-blob's StorageErrorCode is a str Enum
    if code is not None:
        return str(code) in _AZURE_CONFLICTS
    return getattr(exc, "status_code", None) in (409, 412) or is_conflict(exc, create=False)
