"""The lazy array xarray wraps for each variable, and the one-round-trip read of dimension coordinates.

:class:`ZarrDaskBackendArray` is an :class:`xarray.backends.BackendArray`: xarray hands it basic, outer or
vectorized indexers (``IndexingSupport.VECTORIZED``) and it reads just the storage units the selection
touches (:mod:`~zarr_dask.xarray_backend.indexers`). It pickles by configuration (store, path, metadata), so
opened datasets travel to ``distributed`` workers, and it supports ``async_getitem`` for
``Dataset.load_async``.

Unpickling is cheap: the handle (whose store may be rebuilt from a URL and options) is unpickled on first
use. That matters for dask's tokenizer, which reaches this array through xarray's wrappers (they have no
``__dask_tokenize__``) and so pickles *and unpickles* it -- ``Dataset.chunk`` of a lazily opened dataset
did that for every variable, rebuilding a filesystem each time.

Opening a dataset loads its dimension coordinates (xarray builds pandas indexes from them); an array that
belongs to a :class:`~zarr_dask.xarray_backend.prefetch.CoordinatePrefetch` takes its values from that one
batched read.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections.abc import Hashable
from typing import Any

import numpy as np
from xarray.backends.common import BackendArray
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing

from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.xarray_backend.indexers import read_basic, read_outer, read_vectorized
from zarr_dask.xarray_backend.prefetch import PREFETCH_LIMIT, CoordinatePrefetch

__all__ = ["PREFETCH_LIMIT", "CoordinatePrefetch", "ZarrDaskBackendArray", "backend_dtype"]


def backend_dtype(handle: ArrayHandle) -> np.dtype[Any]:
    """The dtype xarray sees: variable-length strings/bytes carry xarray's vlen marker (as the zarr engine)."""
    vlen = handle.metadata.data_type.vlen
    if vlen is not None:
        dtype: np.dtype[Any] = create_vlen_dtype(str if vlen == "str" else bytes)  # type: ignore[no-untyped-call]
        return dtype
    return handle.dtype


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

    __slots__ = ("_blob", "_handle", "dtype", "name", "prefetch", "shape")

    def __init__(self, handle: ArrayHandle, *, name: str = "", prefetch: CoordinatePrefetch | None = None) -> None:
        self._handle: ArrayHandle | None = handle
        self._blob: bytes | None = None
        self.name = name
        self.prefetch = prefetch
        self.shape = handle.shape
        self.dtype = backend_dtype(handle)

    @property
    def handle(self) -> ArrayHandle:
        """The array (store, path, metadata); after unpickling, rebuilt on first use."""
        handle = self._handle
        if handle is None:
            with _UNPICKLE_LOCK:
                if self._handle is None:
                    assert self._blob is not None
                    self._handle = pickle.loads(self._blob)
                    self._blob = None
                handle = self._handle
        return handle

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # the prefetch cache stays behind; the handle travels as its own pickle, unpickled on first use
        blob = self._blob if self._handle is None else pickle.dumps(self._handle, protocol=5)
        return (_rebuild, (blob, self.name, self.shape, self.dtype))

    def __dask_tokenize__(self) -> tuple[Hashable, ...]:
        return ("zarr_dask.ZarrDaskBackendArray", self.handle.__dask_tokenize__(), self.name)

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
            full = self.prefetch.take(self.handle, whole=_is_whole(key, self.shape))
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


_UNPICKLE_LOCK = threading.Lock()


def _rebuild(blob: bytes, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> ZarrDaskBackendArray:
    array = ZarrDaskBackendArray.__new__(ZarrDaskBackendArray)
    array._handle, array._blob = None, blob
    array.name, array.prefetch, array.shape, array.dtype = name, None, shape, dtype
    return array
