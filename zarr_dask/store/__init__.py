"""The store layer: bytes in, bytes out (no arrays, no metadata).

``Store`` is the contract; :class:`LocalStore` (plain ``os`` calls, atomic writes), :class:`MemoryStore`
(a dict, for tests) and :class:`FsspecStore` (any fsspec filesystem, batched concurrent requests) implement
it, and :func:`open_store` picks one for a path or URL.  fsspec is imported only when a URL needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zarr_dask.store._counters import RequestCounters
from zarr_dask.store._keys import normalize_key
from zarr_dask.store.api import StoreLike, open_store
from zarr_dask.store.base import Store
from zarr_dask.store.local import LocalStore
from zarr_dask.store.memory import MemoryStore

if TYPE_CHECKING:
    from zarr_dask.store.fsspec_store import FsspecStore

__all__ = [
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "RequestCounters",
    "Store",
    "StoreLike",
    "normalize_key",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "FsspecStore":  # lazy: keeps ``import zarr_dask`` free of fsspec
        from zarr_dask.store.fsspec_store import FsspecStore

        return FsspecStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
