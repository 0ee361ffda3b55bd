"""Where a read or write goes, for every location dask's ``from_zarr`` / ``to_zarr`` accept.

URLs, paths, fsspec mappers, ``MutableMapping`` objects and zarr-python stores become a
:class:`~zarr_dask.Store` (:func:`zarr_dask.store.open_store`); a zarr-python ``Array`` or ``Group``
becomes its store and path (zarr-python is never imported: its objects are recognised by their module).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zarr_dask.spec.paths import join_path, normalize_path
from zarr_dask.store import Store, open_store
from zarr_dask.store.foreign import is_zarr_python

__all__ = ["is_zarr_python_node", "locate"]


def is_zarr_python_node(obj: Any) -> bool:
    """A zarr-python ``Array`` or ``Group`` (they have a store and a path; stores have neither)."""
    return is_zarr_python(obj) and hasattr(obj, "store") and hasattr(obj, "path")


def locate(
    url: Any, component: str | None, storage_options: Mapping[str, Any] | None, read_only: bool = False
) -> tuple[Store, str]:
    """The store and node path of ``url`` (+ ``component`` below it).

    Examples
    --------
    >>> store, path = locate({}, "group/x", None)
    >>> type(store).__name__, path
    ('MappingStore', 'group/x')
    """
    if is_zarr_python_node(url):
        if storage_options:
            raise TypeError("storage_options= apply to URLs, not to a zarr-python array or group; drop them")
        store = open_store(url.store, read_only=read_only)
        return store, normalize_path(join_path(str(url.path or ""), component or ""))
    store = open_store(url, storage_options=dict(storage_options or {}), read_only=read_only)
    return store, normalize_path(component or "")
