"""The lazy array xarray wraps for each variable, and the one-round-trip read of dimension coordinates.

:class:`ZarrDaskBackendArray` is an :class:`xarray.backends.BackendArray`: xarray hands it basic, outer or
vectorized indexers (``IndexingSupport.VECTORIZED``) and it reads just the storage units the selection
touches (:mod:`~zarr_dask.xarray_backend.selection`). It pickles by configuration (store, path, metadata), so
opened datasets travel to ``distributed`` workers, and it supports ``async_getitem`` for
``Dataset.load_async``.

Opening a dataset loads its dimension coordinates (xarray builds pandas indexes from them). Read one by one,
that is one round trip per coordinate; :class:`CoordinatePrefetch` reads all of them with one batched store
call the first time any of them is read, and hands each out once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from xarray.backends.common import BackendArray
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing

from zarr_dask.core.indexing import chunk_projections, normalize_selection
from zarr_dask.errors import ZarrDaskError
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.xarray_backend.selection import read_basic, read_outer, read_vectorized

__all__ = ["CoordinatePrefetch", "ZarrDaskBackendArray", "backend_dtype"]

#: Dimension coordinates larger than this (in total) are not prefetched together.
PREFETCH_LIMIT = 64 * 2**20


def backend_dtype(handle: ArrayHandle) -> np.dtype[Any]:
    """The dtype xarray sees: variable-length strings/bytes carry xarray's vlen marker (as the zarr engine)."""
    vlen = handle.metadata.data_type.vlen
    if vlen is not None:
        dtype: np.dtype[Any] = create_vlen_dtype(str if vlen == "str" else bytes)  # type: ignore[no-untyped-call]
        return dtype
    return handle.dtype


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _prefetch_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(4, thread_name_prefix="zarr_dask_prefetch")
        return _POOL


class CoordinatePrefetch:
    """Reads several small arrays of one store with a single batched store call, each handed out once.

    Parameters
    ----------
    handles
        Name -> handle of the arrays to read together (dimension coordinates of a group).
    """

    def __init__(self, handles: Mapping[str, ArrayHandle]) -> None:
        self._handles = dict(handles)
        self._cache: dict[str, np.ndarray[Any, Any]] | None = None
        self._lock = threading.Lock()
        self._future: Future[dict[str, np.ndarray[Any, Any]]] | None = None

    def start(self) -> None:
        """Start the joint read in the background now (xarray decodes and builds the dataset meanwhile)."""
        with self._lock:
            if self._future is None and self._cache is None:
                self._future = _prefetch_pool().submit(self._load)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._handles)

    def take(self, name: str, *, whole: bool) -> np.ndarray[Any, Any] | None:
        """Array ``name`` from the joint read (done on first use), or None once it was read whole.

        Partial reads (xarray peeks at the first and last time values before decoding) are served from the
        cache; the whole read (building the index) hands the array out and forgets it. If the joint read fails
        (say one coordinate has a corrupt chunk), nothing is cached and every array is read on its own, so the
        error is reported for the array it belongs to.
        """
        with self._lock:
            if self._cache is None:
                try:
                    self._cache = self._future.result() if self._future is not None else self._load()
                except (ZarrDaskError, OSError, ValueError):
                    self._cache = {}
                self._future = None
            return self._cache.pop(name, None) if whole else self._cache.get(name)

    def _load(self) -> dict[str, np.ndarray[Any, Any]]:
        outs: dict[str, np.ndarray[Any, Any]] = {}
        plans = []
        for name, h in self._handles.items():
            out = np.empty(h.shape, dtype=h.dtype)
            outs[name] = out
            if out.size == 0:
                continue
            if h.io.sharding is not None:  # shards need their index first: read them on their own
                out[...] = h.read(normalize_selection(Ellipsis, h.shape))
                continue
            projections = list(chunk_projections(normalize_selection(Ellipsis, h.shape), h.io.grids, h.shape))
            plans.append((h, out, [(h.io.chunk_key(p.coords), p) for p in projections]))
        if plans:
            store = plans[0][0].store
            got = store.get_many([k for _, _, kp in plans for k, _ in kp])
            for h, out, kp in plans:
                for key, p in kp:
                    data = got.get(key)
                    if data is None:
                        out[p.out_sel] = h.io.fill
                    else:
                        h.io.decode_chunk_into(key, data, p, out)
        return outs


class ZarrDaskBackendArray(BackendArray):
    """A lazily read Zarr array for xarray (basic, outer and vectorized indexing; async; picklable).

    Parameters
    ----------
    handle
        The array (store, path, metadata).
    name
        The variable name (for the coordinate prefetch).
    prefetch
        A :class:`CoordinatePrefetch` holding this array, or None.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> from xarray.core.indexing import OuterIndexer
    >>> a = zarr_dask.create_array("memory://backend-array-doc", shape=(4, 6), dtype="i4", chunks=(2, 3))
    >>> a[:] = np.arange(24).reshape(4, 6)
    >>> arr = ZarrDaskBackendArray(ArrayHandle(a.store, a.path, a.metadata))
    >>> arr[OuterIndexer((np.array([0, 3]), slice(None, None, 2)))]
    array([[ 0,  2,  4],
           [18, 20, 22]], dtype=int32)
    """

    __slots__ = ("dtype", "handle", "name", "prefetch", "shape")

    def __init__(self, handle: ArrayHandle, *, name: str = "", prefetch: CoordinatePrefetch | None = None) -> None:
        self.handle = handle
        self.name = name
        self.prefetch = prefetch
        self.shape = handle.shape
        self.dtype = backend_dtype(handle)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_rebuild, (self.handle, self.name))  # the prefetch cache stays behind

    def get_array(self) -> ArrayHandle:
        return self.handle

    def _raw(self, key: tuple[Any, ...], kind: type) -> np.ndarray[Any, Any]:
        if kind is indexing.VectorizedIndexer:
            return read_vectorized(self.handle, key)
        if kind is indexing.OuterIndexer and any(not isinstance(k, slice | int | np.integer) for k in key):
            return read_outer(self.handle, key)
        return read_basic(self.handle, key)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        if self.prefetch is not None:
            full = self.prefetch.take(self.name, whole=_is_whole(key, self.shape))
            if full is not None:
                return indexing.apply_indexer(indexing.NumpyIndexingAdapter(full), key)  # type: ignore[no-untyped-call]
        kind = type(key)
        value = indexing.explicit_indexing_adapter(
            _empty_slices_forward(key, self.shape),
            self.shape,
            indexing.IndexingSupport.VECTORIZED,
            lambda k: self._raw(k, kind),
        )
        return value

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        """The same read in a worker thread (the store calls block), for ``Dataset.load_async``."""
        return await asyncio.to_thread(self.__getitem__, key)


def _empty_slices_forward(key: indexing.ExplicitIndexer, shape: tuple[int, ...]) -> indexing.ExplicitIndexer:
    """Empty slices with a negative step as ``slice(0, 0)``: xarray's slice decomposition fails on them
    (``range(...)[-1]`` of an empty range), and an empty selection is the same either way."""
    items = key.tuple
    if not any(isinstance(k, slice) and (k.step or 1) < 0 and not len(range(*k.indices(n))) for k, n in zip(items, shape, strict=True)):
        return key
    fixed = tuple(
        slice(0, 0) if isinstance(k, slice) and not len(range(*k.indices(n))) else k
        for k, n in zip(items, shape, strict=True)
    )
    return type(key)(fixed)


def _is_whole(key: indexing.ExplicitIndexer, shape: tuple[int, ...]) -> bool:
    """True when ``key`` selects the whole array (in order)."""
    if not isinstance(key, indexing.BasicIndexer):
        return False
    return all(
        isinstance(k, slice) and k.indices(n) == (0, n, 1) for k, n in zip(key.tuple, shape, strict=True)
    )


def _rebuild(handle: ArrayHandle, name: str) -> ZarrDaskBackendArray:
    return ZarrDaskBackendArray(handle, name=name)
