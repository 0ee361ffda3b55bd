"""`ArrayHandle`: what a dask task holds to read or write one Zarr array.

A handle is the store (by configuration), the node path, the array metadata and two flags. It pickles to
that configuration, never to open files, sockets or codec objects; the codec pipeline and grids
(:class:`~zarr_dask.core.chunk_io.ChunkIO`) are built on first use in each process and shared by every
handle with the same configuration, so thousands of tasks unpickling the same handle build them once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from zarr_dask.core.batches import thread_pool
from zarr_dask.core.chunk_io import ChunkIO
from zarr_dask.core.indexing import (
    DimSelection,
    chunk_projections,
    finalize_output,
    normalize_selection,
)
from zarr_dask.core.lease import Fence
from zarr_dask.errors import ZarrDaskError
from zarr_dask.graph import buffers
from zarr_dask.spec import ArrayMetadata
from zarr_dask.spec.layout import sharding_of
from zarr_dask.store import MemoryStore, Store
from zarr_dask.store.uploads import WriteBehind

__all__ = ["ArrayHandle", "is_sharded"]

_CACHE_SIZE = 64
_CACHE: OrderedDict[Hashable, ArrayHandle] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def is_sharded(metadata: ArrayMetadata) -> bool:
    """True when the storage keys of the array are shards (:func:`zarr_dask.spec.layout.sharding_of`)."""
    return sharding_of(metadata) is not None


class ArrayHandle:
    """A picklable, tokenizable reference to one array, readable like a NumPy array (basic indexing).

    Parameters
    ----------
    store, path, metadata
        Where the array lives and what it is (the metadata is *not* re-read from the store).
    allow_unsafe_codecs
        Passed to :class:`~zarr_dask.core.chunk_io.ChunkIO`.
    write_empty_chunks
        Store chunks that equal the fill value everywhere (default: skip them, deleting any old value).

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://handle-doc", shape=(4, 4), dtype="i2", chunks=(2, 2))
    >>> a[:] = np.arange(16).reshape(4, 4)
    >>> h = ArrayHandle(a.store, a.path, a.metadata)
    >>> h[1:3, 1]
    array([5, 9], dtype=int16)
    """

    __slots__ = ("__dict__", "allow_unsafe_codecs", "fence", "fresh", "metadata", "path", "store", "write_empty_chunks")

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: ArrayMetadata,
        *,
        allow_unsafe_codecs: bool = False,
        write_empty_chunks: bool = False,
        fence: Fence | None = None,
        fresh: bool = False,
    ) -> None:
        self.store = store
        self.path = path
        self.metadata = metadata
        self.allow_unsafe_codecs = bool(allow_unsafe_codecs)
        self.write_empty_chunks = bool(write_empty_chunks)
        self.fence = fence
        self.fresh = bool(fresh)

    # ------------------------------------------------------------------ identity, pickling, tokens
    def _config(self) -> tuple[Any, ...]:
        return (
            self.store, self.path, self.metadata, self.allow_unsafe_codecs, self.write_empty_chunks, self.fence, self.fresh
        )  # fmt: skip

    def __dask_tokenize__(self) -> tuple[Hashable, ...]:
        return (
            "zarr_dask.ArrayHandle",
            self.store.__dask_tokenize__(),
            self.path,
            self.metadata.__dask_tokenize__(),
            self.allow_unsafe_codecs,
            self.write_empty_chunks,
            self.fence,
            self.fresh,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_rebuild, self._config())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayHandle) and other._config() == self._config()

    def __hash__(self) -> int:
        return hash(self._config())

    def __repr__(self) -> str:
        return f"ArrayHandle({self.store.url!r}, {'/' + self.path!r}, shape={self.shape}, dtype={self.dtype})"

    # ------------------------------------------------------------------ array-like
    @cached_property
    def io(self) -> ChunkIO:
        """The chunk reader/writer (built on first use in each process)."""
        return ChunkIO(
            self.store,
            self.path,
            self.metadata,
            allow_unsafe_codecs=self.allow_unsafe_codecs,
            write_empty_chunks=self.write_empty_chunks,
            fence=self.fence,
            fresh=self.fresh,
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.metadata.shape)

    @property
    def ndim(self) -> int:
        return len(self.metadata.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.metadata.data_type.numpy_dtype

    @property
    def sharded(self) -> bool:
        return is_sharded(self.metadata)

    def __getitem__(self, selection: Any) -> np.ndarray[Any, Any]:
        """Read a selection (what a dask task does for one block, or for a selection of it that dask fused
        into the read). Integers, slices and Ellipsis read just the keys they touch; integer or boolean
        arrays (NumPy semantics) read the bounding box of the selection, then index it."""
        if _is_fancy(selection):
            basic, relative = _split_fancy(selection, self.shape)
            return np.asarray(self[basic][relative])
        return self.read_selection(selection, threads=1)

    def read(self, dims: Sequence[DimSelection]) -> np.ndarray[Any, Any]:
        """Read a normalised selection (full rank) in the calling thread, into a buffer of the block pool."""
        out = buffers.empty(tuple(d.count for d in dims), self.dtype)
        if out.size:
            self.io.read_projections(out, list(chunk_projections(dims, self.io.grids, self.shape)), threads=1)
        return out

    def read_all(self, threads: int) -> np.ndarray[Any, Any]:
        """The whole array, read by ``threads`` threads straight into one result (not from a dask task).

        The result's memory comes from the block pool (:mod:`zarr_dask.graph.buffers`): once an earlier
        result of the same size has been dropped, its already-mapped memory is reused.
        """
        return self.read_selection(Ellipsis, threads)

    def read_selection(self, selection: Any, threads: int) -> np.ndarray[Any, Any]:
        """A basic selection (integers, slices, Ellipsis), read by ``threads`` threads straight into one result
        from the block pool: what ``compute()`` of ``from_zarr(...)[selection]`` gives, without dask. The
        batching and the threads are :class:`~zarr_dask.core.chunk_io.ChunkIO`'s (its ``"read"`` pool)."""
        try:
            dims = normalize_selection(selection, self.shape)
        except ZarrDaskError as e:
            raise e.with_context(store=self.store.url, path=self.path) from None
        out = buffers.empty(tuple(d.count for d in dims), self.dtype)
        if out.size:
            projections = list(chunk_projections(dims, self.io.grids, self.shape))
            pool = thread_pool("read", threads) if threads > 1 and not self.store.batched_io else None
            self.io.read_projections(out, projections, threads=threads, pool=pool)
        result: np.ndarray[Any, Any] = finalize_output(out, dims)
        return result

    def write_box(
        self, value: np.ndarray[Any, Any], box: Sequence[tuple[int, int]], *, behind: WriteBehind | None = None,
        sizes: dict[str, int] | None = None,
    ) -> int:  # fmt: skip
        """Write ``value`` into the array box ``[(start, stop), ...]`` in the calling thread; returns the number
        of storage keys.

        Keys only partly inside the box are read, merged and written back (inside this call, once). ``behind``:
        the write's deferred uploads (:class:`~zarr_dask.store.uploads.WriteBehind`), or None to store every key
        before returning; ``sizes``: where to note the size each key covered whole is stored with (-1: absent).
        """
        dims = [DimSelection(lo, hi, 1) for lo, hi in box]
        projections = list(chunk_projections(dims, self.io.grids, self.shape))
        self.io.write_projections(value, projections, threads=1, behind=behind, sizes=sizes)
        return len(projections)


def _rebuild(
    store: Store, path: str, metadata: ArrayMetadata, allow_unsafe_codecs: bool, write_empty_chunks: bool,
    fence: Fence | None = None, fresh: bool = False,
) -> ArrayHandle:  # fmt: skip
    """Unpickle: reuse the handle (and so its codec pipeline) already built in this process."""
    key = (store, path, metadata, allow_unsafe_codecs, write_empty_chunks, fence, fresh)
    options: dict[str, Any] = {
        "allow_unsafe_codecs": allow_unsafe_codecs, "write_empty_chunks": write_empty_chunks, "fence": fence, "fresh": fresh
    }  # fmt: skip
    if isinstance(store, MemoryStore):  # pickles its contents: a cached copy could be stale
        return ArrayHandle(store, path, metadata, **options)
    with _CACHE_LOCK:
        handle = _CACHE.get(key)
        if handle is not None:
            _CACHE.move_to_end(key)
            return handle
        handle = ArrayHandle(store, path, metadata, **options)
        _CACHE[key] = handle
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return handle


def _is_fancy(selection: Any) -> bool:
    items = selection if isinstance(selection, tuple) else (selection,)
    return any(isinstance(s, list | np.ndarray) for s in items)


def _split_fancy(selection: Any, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A selection with integer/boolean arrays -> (basic bounding selection, NumPy index into its result).

    Indexing the bounding box with the relative index gives exactly what NumPy gives on the whole array:
    integers stay integers (0 in the box), arrays are shifted, slices become ``slice(None)``.
    """
    items = list(selection) if isinstance(selection, tuple) else [selection]
    if any(s is Ellipsis for s in items):
        i = items.index(Ellipsis)
        items[i : i + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    items += [slice(None)] * (len(shape) - len(items))
    basic: list[Any] = []
    relative: list[Any] = []
    for s, n in zip(items, shape, strict=False):
        if isinstance(s, slice):
            basic.append(s)
            relative.append(slice(None))
            continue
        idx = np.asarray(s)
        if idx.dtype == bool:
            basic.append(slice(None))
            relative.append(idx)
            continue
        idx = np.where(idx < 0, idx + n, idx).astype(np.intp)
        lo = int(idx.min()) if idx.size else 0
        hi = int(idx.max()) + 1 if idx.size else 0
        basic.append(slice(lo, hi))
        relative.append(idx - lo if idx.ndim else int(idx) - lo)
    return tuple(basic), tuple(relative)
