"""Changing an array's shape in storage: the new metadata, and making everything past a new edge read as fill.

:meth:`~zarr_dask.core.array.Array.resize` and ``append`` use these under the array's append lease. Keys wholly
past the new edge are deleted; keys the edge cuts have their outside part reset to the fill value by
compare-and-swap where the store can (a region writer may be merging the inside part of the same chunk at the
same time), so growing again later shows fill, not old data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_dask.codecs.sharding import ShardingCodec
from zarr_dask.core.chunk_io import ChunkIO
from zarr_dask.core.key_writes import is_fill
from zarr_dask.errors import WriteConflictError, ZarrDaskError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.chunk_grid import RectilinearChunkGrid
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.versioned import Versioned, conditional, transact

__all__ = ["resized_metadata", "trim_chunks"]


def resized_metadata(
    meta: ArrayMetadataV2 | ArrayMetadataV3, new_shape: tuple[int, ...], sharding: ShardingCodec | None
) -> ArrayMetadataV2 | ArrayMetadataV3:
    """``meta`` with ``new_shape``: a rectilinear dimension grown past its edges gets one new edge covering the
    growth (whole inner chunks when sharded; :meth:`RectilinearChunkGrid.resized`).

    Examples
    --------
    >>> import zarr_dask
    >>> a = zarr_dask.create_array("memory://resize-doc", shape=(4,), dtype="i1", chunks=(2,), overwrite=True)
    >>> resized_metadata(a.metadata, (7,), None).shape
    (7,)
    """
    if isinstance(meta, ArrayMetadataV3) and isinstance(meta.chunk_grid, RectilinearChunkGrid):
        inner = sharding.chunk_shape if sharding is not None else None
        grid = meta.chunk_grid.resized(new_shape, multiple_of=inner)
        return dataclasses.replace(meta, shape=new_shape, chunk_grid=grid)
    return dataclasses.replace(meta, shape=new_shape)


def trim_chunks(
    store: Store, path: str, old_io: ChunkIO, old_shape: tuple[int, ...], new_shape: tuple[int, ...], dims: list[int],
    *, beyond: bool = False, write_empty_chunks: bool = False,
) -> None:  # fmt: skip
    """Make everything past ``new_shape`` along ``dims`` read as fill: delete the stored keys wholly past it and
    reset the outside part of the keys it cuts (one listing). ``beyond``: look at every stored key (data a failed
    writer left beyond the shape), not only those inside ``old_shape``'s grid."""
    grid = old_io.metadata.chunk_grid
    old_grid_shape = grid.grid_shape(old_shape)
    ndim = len(old_shape)
    stale: list[str] = []
    edge: list[tuple[int, ...]] = []
    prefix = key_prefix(path)
    for key in store.list_prefix(prefix):
        try:
            coords = old_io.metadata.chunk_key_encoding.decode(key[len(prefix) :])
        except ZarrDaskError:
            continue
        if len(coords) != ndim or (not beyond and any(c >= g for c, g in zip(coords, old_grid_shape, strict=True))):
            continue
        starts = [_start(old_io.grids[d], c) for d, c in enumerate(coords)]
        if any(starts[d] is None or starts[d] >= new_shape[d] for d in dims):  # type: ignore[operator]
            stale.append(key)
        elif any(old_io.grids[d].start(coords[d]) + old_io.grids[d].size(coords[d]) > new_shape[d] for d in dims):
            edge.append(coords)
    if stale:
        store.delete_many(stale)
    _reset_overhang(store, path, old_io, edge, new_shape, write_empty_chunks)


def _reset_overhang(
    store: Store, path: str, io: ChunkIO, edge: list[tuple[int, ...]], new_shape: tuple[int, ...], write_empty: bool
) -> None:
    """Reset the part of each chunk of ``edge`` outside ``new_shape`` to the fill value, by compare-and-swap
    where the store can."""
    pending = {io.chunk_key(coords): coords for coords in edge}
    if not pending:
        return

    def step(got: Mapping[str, Versioned]) -> dict[str, bytes | None]:
        return {
            key: _without_overhang(io, key, pending[key], found.value, new_shape, write_empty)
            for key, found in got.items()
            if found.value is not None
        }

    cas = conditional(store)
    if cas is None:  # (the append lease does not exist here: nothing else to coordinate with)
        writes = step({k: Versioned(v, None) for k, v in store.get_many(list(pending)).items()})
        store.set_many({k: v for k, v in writes.items() if v is not None})
        store.delete_many([k for k, v in writes.items() if v is None])
        return
    transact(cas, list(pending), step, independent=True, exhausted=lambda keys, n: WriteConflictError(
        f"chunk {keys[0]!r} kept changing while its part outside the new shape was being reset",
        store=store.url, path=path))  # fmt: skip


def _without_overhang(
    io: ChunkIO, key: str, coords: tuple[int, ...], data: bytes, new_shape: tuple[int, ...], write_empty: bool
) -> bytes | None:
    chunk = np.array(io.decode_chunk(key, data, coords), copy=True)
    inside = tuple(
        slice(0, max(0, min(g.size(c), n - g.start(c)))) for g, c, n in zip(io.grids, coords, new_shape, strict=True)
    )
    fresh = np.full(chunk.shape, io.fill, dtype=chunk.dtype)
    fresh[inside] = chunk[inside]
    if not write_empty and is_fill(fresh, io.fill):
        return None  # nothing left inside the array: store nothing, as a write would
    return io.encode_chunk(key, fresh, coords)


def _start(grid: Any, c: int) -> int | None:
    """Where chunk ``c`` of a dimension starts, None for a chunk beyond the grid's last edge (rectilinear)."""
    try:
        return int(grid.start(c))
    except (IndexError, ValueError, ZarrDaskError):
        return None
