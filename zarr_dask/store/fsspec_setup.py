"""How zarr_dask sets up and names fsspec filesystems: S3's connection pool sized to the request budget, whole
values read in one request, which calls take ``batch_size``, protocols, URLs and buckets, and whether a
filesystem is fsspec's in-process memory filesystem.

Examples
--------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> protocol(fs), fs_root(fs), in_memory(fs), canonical_url("s3://bucket/data.zarr/")
('memory', '/', True, 's3://bucket/data.zarr')
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from fsspec.spec import AbstractFileSystem

__all__ = [
    "BUCKETED", "canonical_url", "fs_root", "in_memory", "protocol", "takes_batch_size", "unstrip",
    "whole_value_kwargs", "with_connection_pool",
]  # fmt: skip


#: Protocols whose filesystem keeps a pool of HTTP connections sized by botocore's ``max_pool_connections``.
_BOTOCORE_PROTOCOLS = ("s3", "s3a")


def with_connection_pool(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with S3's connection pool as large as the request budget (``max_requests``), unless the
    caller sized it (``config_kwargs={"max_pool_connections": n}``): botocore's default of 10 connections
    would cap the requests in flight at 10 however many the budget allows."""
    protocols = url.split("://", 1)[0].split("::") if "://" in url else []
    if not any(p in _BOTOCORE_PROTOCOLS for p in protocols):
        return options
    from zarr_dask import config

    def sized(opts: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(opts.get("config_kwargs") or {})
        kwargs.setdefault("max_pool_connections", int(config.get("max_requests")))
        return {**opts, "config_kwargs": kwargs}

    if len(protocols) == 1:
        return sized(options)
    out = dict(options)
    for p in protocols:  # chained URLs take each filesystem's options under its protocol
        if p in _BOTOCORE_PROTOCOLS:
            out[p] = sized(options.get(p) or {})
    return out


_BATCH_SIZE_TAKEN: dict[type, bool] = {}


def takes_batch_size(fs: AbstractFileSystem) -> bool:
    """Whether ``fs``'s batched calls (``_cat``, ``_cat_ranges``, ``_pipe``) all take ``batch_size=``."""
    cls = type(fs)
    found = _BATCH_SIZE_TAKEN.get(cls)
    if found is None:
        try:
            names = ("_cat", "_cat_ranges", "_pipe")
            found = all("batch_size" in inspect.signature(getattr(cls, n)).parameters for n in names)
        except (AttributeError, TypeError, ValueError):
            found = False
        _BATCH_SIZE_TAKEN[cls] = found
    return found


def in_memory(fs: Any) -> bool:
    """True for fsspec's memory filesystem, or one wrapping it (``latency::memory://``, caching layers)."""
    for _ in range(8):  # wrappers keep the filesystem they wrap as ``fs``; bounded against odd cycles
        if not isinstance(fs, AbstractFileSystem):
            return False
        if protocol(fs) == "memory":
            return True
        fs = getattr(fs, "fs", None)
        if fs is None:
            return False
    return False


def unstrip(fs: AbstractFileSystem, root: str) -> str:
    """A URL for ``root`` on ``fs`` (``protocol://root``)."""
    try:
        return str(fs.unstrip_protocol(root)).rstrip("/") if root else protocol(fs) + "://"
    except Exception:  # noqa: BLE001 - only for the URL in messages: never fail on it
        return f"{protocol(fs)}://{root}"


def whole_value_kwargs(fs: AbstractFileSystem) -> dict[str, Any]:
    """Extra ``cat`` arguments so that reading a whole value is one request.

    s3fs (``max_concurrency > 1``, its default) sends a HEAD before every whole-object GET to decide
    whether to split the download; chunk reads want one GET each (concurrency comes from batching).
    """
    reader = getattr(fs, "_cat_file", None) if fs.async_impl else None
    try:
        parameters = inspect.signature(reader).parameters if reader is not None else {}
    except (TypeError, ValueError):
        return {}
    return {"max_concurrency": 1} if "max_concurrency" in parameters else {}


#: Protocols whose first path element is a bucket (or container) that must exist before anything is stored.
BUCKETED = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2"})


def protocol(fs: AbstractFileSystem) -> str:
    name = fs.protocol
    return str(name if isinstance(name, str) else name[0])


def fs_root(fs: AbstractFileSystem) -> str:
    """The prefix of paths at the filesystem root: ``"/"`` where paths are absolute (memory, local)."""
    return "/" if str(fs._strip_protocol("x")).startswith("/") else ""


def canonical_url(url: str) -> str:
    """``url`` without trailing ``/`` (but ``"memory://"`` stays as is)."""
    stripped = url.rstrip("/")
    return url if stripped.endswith(":") else stripped
