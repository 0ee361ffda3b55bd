"""Icechunk repositories on the command line: ``icechunk:LOCATION[?branch=NAME|tag=NAME|snapshot=ID]``.

LOCATION is a local directory (``icechunk:/data/repo``, ``icechunk:file:///data/repo``) or an S3 prefix
(``icechunk:s3://bucket/prefix``, with icechunk's ``s3_storage`` keywords as the command's storage options:
``{"endpoint_url": ..., "region": ..., "allow_http": true, ...}``; credentials from the environment otherwise).
A source is read from a read-only session of the branch (default ``main``), tag or snapshot; a destination is
opened (created if absent), written in a writable session of the branch, and committed once at the end.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

from zarr_dask.errors import UnsupportedFeatureError

__all__ = ["PREFIX", "is_repository_url", "readable", "repository_session"]

PREFIX = "icechunk:"


def is_repository_url(url: Any) -> bool:
    """True for an ``icechunk:...`` location.

    Examples
    --------
    >>> is_repository_url("icechunk:/data/repo?branch=dev"), is_repository_url("data.zarr")
    (True, False)
    """
    return isinstance(url, str) and url.startswith(PREFIX)


def _parse(url: str) -> tuple[str, dict[str, str]]:
    location, _, query = url[len(PREFIX) :].partition("?")
    refs = {k: v[-1] for k, v in parse_qs(query, strict_parsing=bool(query)).items()}
    unknown = sorted(set(refs) - {"branch", "tag", "snapshot"})
    if unknown or len(refs) > 1 or not location:
        raise ValueError(
            f"cannot read the repository location {url!r}: write icechunk:PATH or icechunk:s3://bucket/prefix, "
            "optionally followed by one of ?branch=NAME, ?tag=NAME, ?snapshot=ID"
        )
    return location, refs


def _storage(icechunk: Any, location: str, options: Mapping[str, Any]) -> Any:
    if location.startswith("s3://"):
        bucket, _, prefix = location[len("s3://") :].partition("/")
        return icechunk.s3_storage(bucket=bucket, prefix=prefix or None, **dict(options))
    if "://" in location and not location.startswith("file://"):
        raise UnsupportedFeatureError(
            f"icechunk locations are a local path or s3://bucket/prefix on the command line, not {location!r}; "
            "open other repositories in Python and pass the session to zarr_dask.convert"
        )
    if options:
        raise TypeError("storage options apply to icechunk:s3:// repositories, not to local ones; drop them")
    return icechunk.local_filesystem_storage(location.removeprefix("file://"))


@contextmanager
def repository_session(url: str, options: Mapping[str, Any] | None, *, write: bool, message: str) -> Iterator[Any]:
    """The session of an ``icechunk:`` location: read-only for a source; for a destination a writable session
    of the branch, committed with ``message`` when the block ends without an error and changed something."""
    try:
        icechunk: Any = importlib.import_module("icechunk")
    except ImportError:
        raise UnsupportedFeatureError(
            f"{url!r} is an Icechunk repository, but icechunk is not installed: pip install 'zarr-dask[icechunk]' "
            "(Python >= 3.12)"
        ) from None
    location, refs = _parse(url)
    storage = _storage(icechunk, location, options or {})
    if not write:
        repo = icechunk.Repository.open(storage)
        ref = {"snapshot_id" if k == "snapshot" else k: v for k, v in refs.items()} or {"branch": "main"}
        yield repo.readonly_session(**ref)
        return
    if set(refs) - {"branch"}:
        raise ValueError(f"a destination repository is written on a branch (?branch=NAME), not {url!r}")
    repo = icechunk.Repository.open_or_create(storage)
    session = repo.writable_session(refs.get("branch", "main"))
    yield session
    if session.has_uncommitted_changes:
        session.commit(message)


@contextmanager
def readable(url: str, options: Mapping[str, Any] | None) -> Iterator[tuple[Any, dict[str, Any] | None]]:
    """``(source, storage options)`` for a command that reads ``url``: an ``icechunk:`` location's read-only
    session (its options went to the repository's storage), or the URL and its options as given."""
    if is_repository_url(url):
        with repository_session(url, options, write=False, message="") as session:
            yield session, None
    else:
        yield url, dict(options) if options else None
