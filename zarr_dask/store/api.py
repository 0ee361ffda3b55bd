"""``open_store``: turn a path, a URL or a Store into a Store."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeAlias

from zarr_dask.store.base import Store
from zarr_dask.store.local import LocalStore

__all__ = ["StoreLike", "open_store"]

#: What the public API accepts wherever a store is expected.
StoreLike: TypeAlias = str | os.PathLike[str] | Store

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def open_store(
    store: StoreLike, *, storage_options: Mapping[str, Any] | None = None, read_only: bool = False
) -> Store:
    """Open a store from a path, a URL or an existing store.

    Parameters
    ----------
    store
        * a local path (``str`` or ``os.PathLike``) or a ``file://`` / ``local://`` URL: a
          :class:`LocalStore` (plain ``os`` calls, atomic writes);
        * ``"memory://name"``: an :class:`FsspecStore` on fsspec's process-wide memory filesystem;
        * any other fsspec URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``zip::...``,
          ``reference://``, chained ``a::b``): an :class:`FsspecStore`;
        * an Icechunk ``Session`` (or ``session.store``), any zarr-python store (``LocalStore``,
          ``MemoryStore``, ``FsspecStore``, ``ZipStore``, ``ObjectStore``, the ``LoggingStore`` /
          ``CacheStore`` / ``WrapperStore`` wrappers, VirtualiZarr's ``ManifestStore``...), a ``UPath``, an
          fsspec mapper or any ``MutableMapping`` of keys to bytes (``{}``): a store over it (the one
          recognition path of every entry point: :mod:`zarr_dask.store.foreign`);
        * a :class:`Store`: returned as is, or as a read-only view if ``read_only`` is true.  A read-only
          store is never made writable by this function (``read_only=False`` means "as given").
    storage_options
        fsspec options for URLs (credentials, endpoint...).  Not allowed with a Store, nor with a local
        path or ``file://`` URL (open those with fsspec explicitly: ``FsspecStore(fs, path)``).
    read_only
        Refuse every mutating call.

    Returns
    -------
    Store

    Raises
    ------
    TypeError
        For an unsupported ``store`` type, or ``storage_options`` where they do not apply.
    StoreError
        If fsspec cannot open the URL.

    Examples
    --------
    >>> open_store("memory://open-store-example").url
    'memory://open-store-example'
    >>> import tempfile
    >>> open_store(tempfile.mkdtemp(), read_only=True).read_only
    True
    """
    if isinstance(store, Store):
        _no_options(storage_options, "an already opened Store")
        return store.with_read_only(True) if read_only and not store.read_only else store
    if isinstance(store, os.PathLike) and type(store).__module__.split(".")[0] != "upath":
        store = os.fspath(store)
    if not isinstance(store, str):
        from zarr_dask.store.foreign import foreign_store

        found = foreign_store(store, read_only=read_only)
        if found is None:
            raise TypeError(
                f"cannot open a store from {type(store).__name__}; pass a path, a URL such as "
                "'s3://bucket/data.zarr', an Icechunk session, a zarr-python store, an fsspec mapper, a MutableMapping "
                "or a Store"
            )
        _no_options(storage_options, f"a {type(store).__name__}")
        return found
    local = _local_path(store)
    if local is not None:
        _no_options(storage_options, f"the local path {store!r}")
        return LocalStore(local, read_only=read_only)
    from zarr_dask.store.fsspec_store import FsspecStore  # imports fsspec only when a URL needs it

    return FsspecStore.from_url(store, storage_options=storage_options, read_only=read_only)


def _local_path(store: str) -> str | None:
    """The filesystem path if ``store`` is a plain path or a ``file://``/``local://`` URL, else None."""
    if "::" in store:
        return None
    for scheme in ("file://", "local://"):
        if store.startswith(scheme):
            path = store[len(scheme) :]
            return path[len("localhost") :] if path.startswith("localhost/") else path
    return None if _URL.match(store) else store


def _no_options(storage_options: Mapping[str, Any] | None, what: str) -> None:
    if storage_options:
        raise TypeError(
            f"storage_options apply to fsspec URLs, not to {what}; drop them, or open the data with "
            "FsspecStore(fs, path) / a URL"
        )
