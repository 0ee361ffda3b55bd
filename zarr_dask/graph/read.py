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

import math
import uuid
import warnings
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from dask import config
from dask.array.core import PerformanceWarning, normalize_chunks
from dask.base import tokenize
from dask.utils import parse_bytes

from zarr_dask.core.api import open_array
from zarr_dask.core.array import Array
from zarr_dask.errors import ZarrDaskError
from zarr_dask.graph.chunking import (
    Chunks,
    Units,
    check_block_counts,
    chunks_token,
    default_chunks,
    dim_units,
    split_amplification,
)
from zarr_dask.graph.gateway import ZarrArray, read_collection
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.inputs import is_zarr_python_node, locate
from zarr_dask.graph.witness import register
from zarr_dask.spec.paths import join_path, normalize_path

__all__ = ["ZarrArray", "from_zarr", "handle_of", "read_chunks", "unit_chunks"]


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
    if is_zarr_python_node(url_or_array):
        store, path = locate(url_or_array, component, storage_options, read_only=mode == "r")
        return handle_of(open_array(store, path=path, mode=mode, **open_kwargs))  # type: ignore[arg-type]
    path = normalize_path(join_path(open_kwargs.pop("path", "") or "", component or ""))
    try:
        array = open_array(url_or_array, path=path, mode=mode, storage_options=storage_options, **open_kwargs)  # type: ignore[arg-type]
    except TypeError as e:
        if "cannot open a store" not in str(e):
            raise
        raise TypeError(
            f"cannot read from {type(url_or_array).__name__}; pass a URL or path ('s3://bucket/x.zarr'), an "
            "fsspec mapper, a MutableMapping, a zarr_dask Store or Array, or a zarr-python store or Array"
        ) from None
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


def from_zarr(
    url_or_array: Any,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    chunks: Any = None,
    name: str | bool | None = None,
    inline_array: bool = False,
    **open_kwargs: Any,
) -> ZarrArray:
    """Load a Zarr array (v2 or v3) as a dask array; a drop-in for :func:`dask.array.from_zarr`.

    Parameters
    ----------
    url_or_array
        A URL or path (``"s3://bucket/data.zarr"``, ``"/data/x.zarr"``), an fsspec mapper, any
        ``MutableMapping`` (``{}``), a :class:`~zarr_dask.Store` or a zarr-python store; or an opened array
        (:class:`~zarr_dask.Array`, zarr-python ``Array``) or zarr-python ``Group`` (with ``component``),
        read through its store and path.
    component
        The array's path inside the store.
    storage_options
        fsspec options for URLs (credentials, endpoint...).
    chunks
        ``None`` / ``"auto"`` (default): blocks of whole storage units (the shard when the array is
        sharded, else the chunk) merged up to dask's ``array.chunk-size``; irregular for rectilinear grids.
        Anything :func:`dask.array.core.normalize_chunks` takes is honoured as given; chunks that cut
        storage units raise a :class:`~dask.array.core.PerformanceWarning` naming the cost.
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
    register(str(name), handle)  # a resumable write of it witnesses this array (zarr_dask.graph.witness)
    return cast(ZarrArray, read_collection(handle, dask_chunks, str(name), inline_array))
