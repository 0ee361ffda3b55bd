"""The read planner: :func:`from_zarr` maps storage keys (chunks or shards) onto dask blocks.

* Default blocks are whole storage units merged up to dask's ``array.chunk-size``, trailing dimension first
  (blocks are contiguous pieces of the C-ordered result); a unit is never split unless the caller asks
  (``chunks=``), and then a :class:`~dask.array.core.PerformanceWarning` says what it costs. Rectilinear
  grids give irregular blocks directly.
* The graph is one lazy ``Blockwise`` layer of ``getter(handle, block_slices)`` tasks: nothing is
  built per block until dask culls the graph to the blocks a computation needs, and dask's slice fusion
  pushes a later ``x[0, :10]`` into the read, so only the keys the selection touches are fetched.
* A task reads its block with one batched store call (concurrent on remote stores; small batches on local
  files, which keeps the bytes in cache) and decodes each chunk straight into the block where its place is
  contiguous; block memory is recycled (:mod:`zarr_dask.graph.buffers`).
* ``compute()`` of a whole, untransformed array on a local scheduler skips the blocks and dask's
  concatenation of them: it reads straight into the result (:class:`ZarrArray`).
"""

from __future__ import annotations

import itertools
import math
import os
import uuid
import warnings
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from dask import config
from dask._task_spec import DataNode, TaskRef
from dask.array.core import Array as DaskArray
from dask.array.core import PerformanceWarning, getter, normalize_chunks
from dask.base import tokenize
from dask.blockwise import blockwise as core_blockwise
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.layers import ArrayBlockwiseDep
from dask.utils import parse_bytes

from zarr_dask.core.api import open_array
from zarr_dask.core.array import Array
from zarr_dask.errors import ZarrDaskError
from zarr_dask.graph import buffers
from zarr_dask.graph.chunking import (
    Chunks,
    Units,
    check_block_counts,
    chunks_token,
    default_chunks,
    dim_units,
    is_regular,
    split_amplification,
)
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.spec.paths import join_path, normalize_path
from zarr_dask.store import Store

__all__ = ["ZarrArray", "from_zarr", "handle_of", "read_chunks", "unit_chunks"]


_blockwise: Any = core_blockwise


class _BlockSlices(ArrayBlockwiseDep):
    """Block index -> the block's slices, computed on demand (nothing is stored per block)."""

    def __init__(self, chunks: Chunks) -> None:
        super().__init__(chunks)
        self._regular = [is_regular(c) for c in chunks]
        self._starts = [
            None if reg else np.concatenate([[0], np.cumsum(np.asarray(c, dtype=np.int64))])
            for reg, c in zip(self._regular, chunks, strict=True)
        ]
        self._extent = [sum(c) for c in chunks]

    def __getitem__(self, idx: tuple[int, ...]) -> tuple[slice, ...]:
        out = []
        for d, i in enumerate(idx):
            starts = self._starts[d]
            if starts is None:
                size = self.chunks[d][0]
                out.append(slice(i * size, min((i + 1) * size, self._extent[d]), None))
            else:
                out.append(slice(int(starts[i]), int(starts[i + 1]), None))
        return tuple(out)

    def __dask_tokenize__(self) -> Any:
        return ("zarr_dask.BlockSlices", chunks_token(self.chunks))


class ZarrArray(DaskArray):
    """What :func:`from_zarr` returns: a dask array in every respect (operations on it return plain dask
    arrays), except that ``compute()`` of the whole, untransformed array on a local scheduler (threads or
    sync) reads every chunk straight into the result with the scheduler's number of threads -- one
    allocation and no per-block copies, instead of reading blocks and concatenating them."""

    def compute(self, **kwargs: Any) -> Any:
        handle = self.__dict__.get("_zarr_handle")
        threads = _local_threads(self, kwargs)
        if handle is None or threads is None:
            return cast(Any, super()).compute(**kwargs)
        return handle.read_all(threads)

    def __dask_postcompute__(self) -> Any:
        """Assemble the computed blocks into memory from the block pool (``dask.compute(x)``, distributed
        ``client.compute(x)``), like the direct ``compute()`` result, instead of fresh memory."""
        return _assemble, (self.chunks, self.dtype)


def _assemble(results: Any, chunks: Chunks, dtype: np.dtype[Any]) -> Any:
    """The blocks (nested lists, one level per dimension) copied into one pooled array; anything but the
    expected NumPy blocks goes to dask's own ``finalize``."""
    from dask.array import core

    finalize: Any = core.finalize

    def leaves(nested: Any, depth: int, index: tuple[int, ...]) -> Any:
        if depth == len(chunks):
            yield index, nested
            return
        for i, sub in enumerate(nested):
            yield from leaves(sub, depth + 1, (*index, i))

    if not chunks or not isinstance(results, list | tuple):
        return finalize(results)
    found = list(leaves(results, 0, ()))
    expected = list(itertools.product(*(range(len(c)) for c in chunks)))
    if len(found) <= 1 or [i for i, _ in found] != expected:
        return finalize(results)
    starts = [np.concatenate([[0], np.cumsum(c)]).astype(int).tolist() for c in chunks]
    for index, block in found:
        shape = tuple(chunks[d][i] for d, i in enumerate(index))
        if type(block) is not np.ndarray or block.dtype != dtype or block.shape != shape:
            return finalize(results)
    out = buffers.empty(tuple(int(sum(c)) for c in chunks), dtype)
    for index, block in found:
        out[tuple(slice(starts[d][i], starts[d][i + 1]) for d, i in enumerate(index))] = block
    return out


_DIRECT_KWARGS = frozenset({"scheduler", "num_workers", "optimize_graph", "traverse"})


def _local_threads(x: DaskArray, kwargs: dict[str, Any]) -> int | None:
    """Threads of the local scheduler ``compute(**kwargs)`` would use; None for any other scheduler."""
    if set(kwargs) - _DIRECT_KWARGS:
        return None
    from dask import local, threaded
    from dask.base import get_scheduler

    get = cast(Any, get_scheduler)(scheduler=kwargs.get("scheduler"), collections=[x])
    if get is local.get_sync:
        return 1
    if get is threaded.get:
        return int(kwargs.get("num_workers") or config.get("num_workers", None) or os.cpu_count() or 1)
    return None


def handle_of(
    url_or_array: Any,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    mode: str = "r",
    **open_kwargs: Any,
) -> ArrayHandle:
    """The :class:`ArrayHandle` of a URL / path / Store (+ ``component``), an :class:`Array` or a handle."""
    if isinstance(url_or_array, ArrayHandle):
        return url_or_array
    if isinstance(url_or_array, Array):
        if component:
            raise TypeError("component= applies to URLs and stores, not to an opened Array; drop it")
        return ArrayHandle(
            url_or_array.store,
            url_or_array.path,
            url_or_array.metadata,
            allow_unsafe_codecs=open_kwargs.get(
                "allow_unsafe_codecs", getattr(url_or_array, "_allow_unsafe_codecs", False)
            ),
            write_empty_chunks=open_kwargs.get("write_empty_chunks", getattr(url_or_array, "_write_empty_chunks", False)),
        )
    if not isinstance(url_or_array, str | os.PathLike | Store):
        raise TypeError(
            f"cannot read from {type(url_or_array).__name__}; pass a URL or path ('s3://bucket/x.zarr'), "
            "a zarr_dask Store or a zarr_dask Array (for a zarr-python array, pass its store URL and path)"
        )
    path = normalize_path(join_path(open_kwargs.pop("path", "") or "", component or ""))
    array = open_array(url_or_array, path=path, mode=mode, storage_options=storage_options, **open_kwargs)  # type: ignore[arg-type]
    return handle_of(array)


def unit_chunks(handle: ArrayHandle) -> tuple[Units, ...]:
    """The storage units (shards or chunks) along each dimension."""
    return tuple(dim_units(g, n) for g, n in zip(handle.io.grids, handle.shape, strict=True))


def _check_user_chunks(chunks: Any, shape: tuple[int, ...], itemsize: int) -> None:
    """Count the blocks of ``chunks`` given as sizes (an int, per-dimension ints / -1 / None, a dict) or as a
    byte size, before dask builds a tuple per dimension."""
    if isinstance(chunks, str):  # "64MiB": the busiest dimension has at least the ndim-th root of all blocks
        blocks = math.prod(shape) * max(itemsize, 1) / max(parse_bytes(chunks), 1)
        if shape and blocks > 1:
            check_block_counts([math.ceil(blocks ** (1 / len(shape)))], shape, f"chunks={chunks!r}")
        return
    if isinstance(chunks, Mapping):
        sizes = [chunks.get(d, chunks.get(str(d), -1)) for d in range(len(shape))]
    elif isinstance(chunks, int | np.integer) and not isinstance(chunks, bool):
        sizes = [chunks] * len(shape)
    elif isinstance(chunks, tuple | list) and len(chunks) == len(shape):
        sizes = list(chunks)
    else:
        return
    counts = [
        -(-n // int(c)) if isinstance(c, int | np.integer) and not isinstance(c, bool) and c > 0 else 1
        for n, c in zip(shape, sizes, strict=True)
    ]
    check_block_counts(counts, shape, f"chunks={chunks!r}")


def read_chunks(handle: ArrayHandle, chunks: Any = None) -> Chunks:
    """The dask chunks :func:`from_zarr` uses: whole units merged up to ``array.chunk-size`` by default,
    else ``chunks`` normalised by dask (with a :class:`PerformanceWarning` if they split units)."""
    units = unit_chunks(handle)
    try:
        if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
            target = parse_bytes(config.get("array.chunk-size"))
            return default_chunks(units, handle.dtype.itemsize, target)
        _check_user_chunks(chunks, handle.shape, handle.dtype.itemsize)
    except ZarrDaskError as e:
        raise e.with_context(store=handle.store.url, path=handle.path) from None
    normalized: Chunks = cast(Any, normalize_chunks)(
        chunks, handle.shape, dtype=handle.dtype, previous_chunks=tuple(max(u.largest, 1) for u in units)
    )
    amp = split_amplification(normalized, units)
    if amp > 1.0 + 1e-9:
        what = "shard" if handle.sharded else "chunk"
        unit_shape = tuple(u.largest for u in units)
        warnings.warn(
            f"store {handle.store.url!r}, node {'/' + handle.path!r}: the requested dask chunks split the "
            f"storage {what}s {unit_shape}, so each {what} is fetched and decoded {amp:.2f} times on average "
            f"(~{amp:.2f}x the I/O and decoding of {what}-aligned blocks); pass chunks=None for blocks of "
            f"whole {what}s, or multiples of {unit_shape}",
            PerformanceWarning,
            stacklevel=3,
        )
    return normalized


def _graph(handle: ArrayHandle, chunks: Chunks, name: str, inline_array: bool) -> HighLevelGraph:
    out_ind = tuple(range(len(chunks)))
    slices = _BlockSlices(chunks)
    if inline_array:
        layer = _blockwise(
            getter, name, out_ind, handle, None, slices, out_ind, numblocks={}, _data_producer=True
        )
        return HighLevelGraph.from_collections(name, layer, dependencies=())
    original = "original-" + name
    layers = {
        # a DataNode, not a bare object: a legacy layer would make dask's culling visit every key
        original: MaterializedLayer({original: DataNode(original, handle)}),
        name: _blockwise(
            getter,
            name,
            out_ind,
            TaskRef(original),
            None,
            slices,
            out_ind,
            numblocks={},
            _data_producer=True,
        ),
    }
    return HighLevelGraph(layers, {original: set(), name: {original}})


def from_zarr(
    url_or_array: Any,
    component: str | None = None,
    chunks: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    name: str | bool | None = None,
    inline_array: bool = False,
    **open_kwargs: Any,
) -> ZarrArray:
    """Load a Zarr array (v2 or v3) as a dask array; a drop-in for :func:`dask.array.from_zarr`.

    Parameters
    ----------
    url_or_array
        A URL or path (``"s3://bucket/data.zarr"``, ``"/data/x.zarr"``), a :class:`~zarr_dask.Store`, or
        an opened :class:`~zarr_dask.Array`.
    component
        The array's path inside the store (for URLs and stores).
    chunks
        ``None`` / ``"auto"`` (default): blocks of whole storage units (the shard when the array is
        sharded, else the chunk) merged up to dask's ``array.chunk-size``; irregular for rectilinear grids.
        Anything :func:`dask.array.core.normalize_chunks` takes is honoured as given; chunks that cut
        storage units raise a :class:`~dask.array.core.PerformanceWarning` naming the cost.
    storage_options
        fsspec options for URLs (credentials, endpoint...).
    name
        The dask name; default a deterministic token of store, path, metadata and chunks (``False``: random).
    inline_array
        Embed the array reference in every task instead of one shared graph key (both pickle small).
    **open_kwargs
        Passed to :func:`~zarr_dask.open_array` (``zarr_format``, ``allow_unsafe_codecs``...).

    Returns
    -------
    dask.array.Array
        A :class:`ZarrArray`: ``compute()`` of the whole array on a local scheduler reads straight into
        the result; everything else is plain dask.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://from-zarr-doc", shape=(6, 8), dtype="f4", chunks=(2, 4))
    >>> a[:] = np.arange(48, dtype="f4").reshape(6, 8)
    >>> x = zarr_dask.from_zarr("memory://from-zarr-doc")
    >>> x.chunks  # 2x4 chunks merged into one block (far below array.chunk-size)
    ((6,), (8,))
    >>> float(x[1:3, 2:6].sum().compute())
    124.0
    """
    handle = handle_of(url_or_array, component, storage_options, **open_kwargs)
    dask_chunks = read_chunks(handle, chunks)
    if name is None or name is True:
        name = "from-zarr-" + tokenize(handle, chunks_token(dask_chunks), inline_array)
    elif name is False:
        name = "from-zarr-" + uuid.uuid4().hex
    graph = _graph(handle, dask_chunks, str(name), inline_array)
    meta = np.empty((0,) * handle.ndim, dtype=handle.dtype)
    out = cast(ZarrArray, cast(Any, ZarrArray)(graph, str(name), dask_chunks, meta=meta))
    out.__dict__["_zarr_handle"] = handle
    return out
