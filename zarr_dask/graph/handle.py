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
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

import numpy as np

from zarr_dask.core.chunk_io import ChunkIO, run_batches
from zarr_dask.core.indexing import (
    ChunkProjection,
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
        """Read a normalised selection (full rank) in the calling thread."""
        out = buffers.empty(tuple(d.count for d in dims), self.dtype)
        if out.size:
            self.read_projections(out, list(chunk_projections(dims, self.io.grids, self.shape)))
        return out

    def read_all(self, threads: int) -> np.ndarray[Any, Any]:
        """The whole array, read by ``threads`` threads straight into one result (not from a dask task).

        The result's memory comes from the block pool (:mod:`zarr_dask.graph.buffers`): once an earlier
        result of the same size has been dropped, its already-mapped memory is reused.
        """
        return self.read_selection(Ellipsis, threads)

    def read_selection(self, selection: Any, threads: int) -> np.ndarray[Any, Any]:
        """A basic selection (integers, slices, Ellipsis), read by ``threads`` threads straight into one result
        from the block pool: what ``compute()`` of ``from_zarr(...)[selection]`` gives, without dask."""
        try:
            dims = normalize_selection(selection, self.shape)
        except ZarrDaskError as e:
            raise e.with_context(store=self.store.url, path=self.path) from None
        out = buffers.empty(tuple(d.count for d in dims), self.dtype)
        projections = list(chunk_projections(dims, self.io.grids, self.shape)) if out.size else []
        if threads <= 1 or len(projections) <= 1:
            self.read_projections(out, projections)
        else:
            remote = self.store.batched_io  # batches as run_batches plans them for remote stores
            run_batches(
                lambda batch: self.read_projections(out, batch), projections, threads=threads,
                batch_size=None if remote else self.local_batch, pool=None if remote else _read_pool(threads),
            )
        result: np.ndarray[Any, Any] = finalize_output(out, dims)
        return result

    def read_projections(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
        """One store call for every key on remote stores; small batches on local ones (cache locality)."""
        if self.store.batched_io:
            self.io.read_into(out, projections)
            return
        n = self.local_batch
        for i in range(0, len(projections), n):
            self.io.read_into(out, projections[i : i + n])

    def write_box(
        self, value: np.ndarray[Any, Any], box: Sequence[tuple[int, int]], *, behind: WriteBehind | None = None
    ) -> int:
        """Write ``value`` into the array box ``[(start, stop), ...]``; returns the number of storage keys.

        Keys only partly inside the box are read, merged and written back (inside this call, once). ``behind``:
        the write's deferred uploads (:class:`~zarr_dask.store.uploads.WriteBehind`), or None to store every key
        before returning.
        """
        dims = [DimSelection(lo, hi, 1) for lo, hi in box]
        projections = list(chunk_projections(dims, self.io.grids, self.shape))
        if self.store.batched_io:
            self.io.write_from(value, projections, behind=behind)
        else:
            n = self.local_batch
            for i in range(0, len(projections), n):
                self.io.write_from(value, projections[i : i + n], behind=behind)
        return len(projections)

    @property
    def local_batch(self) -> int:
        return self.io.local_batch


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _read_pool(threads: int) -> ThreadPoolExecutor:
    """A lasting pool of ``threads`` reader threads (their per-thread read buffers are reused, see
    :mod:`zarr_dask.store.arena`)."""
    with _CACHE_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="zarr_dask_read")
        return pool


def shutdown_read_pools() -> int:
    """Shut the reader thread pools down (their threads and per-thread buffers end; new ones are made on the
    next compute); returns how many there were. For :func:`zarr_dask.release_memory`."""
    with _CACHE_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.shutdown(wait=True)
    return len(pools)


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
