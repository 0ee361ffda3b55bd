"""Tiles: how an orthogonal or coordinate selection is read from and written to the chunks it touches.

Such a selection touches an arbitrary set of elements, so it goes through an intermediate buffer of *tiles*:
for every chunk it touches (inner chunk if sharded), the smallest box of that chunk holding the selected
elements. Tiles are ordinary :class:`~zarr_dask.core.indexing.ChunkProjection` objects over the buffer, so
:class:`~zarr_dask.core.chunk_io.ChunkIO` fetches them as it fetches a basic selection (batched store calls,
shards read partially: index first, then the inner chunks' coalesced byte ranges), and a gather from the
buffer gives the result. Writes tile whole chunks: the chunks the selection leaves partly untouched are read,
the values scattered in, and every touched storage key written once.

* orthogonal: the tiles are a product over dimensions (each dimension cut into one segment per chunk);
* coordinate: one tile per chunk holding a point, stacked along the first axis of the buffer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.codecs.shard_access import InnerPart
from zarr_dask.core.batches import run_batches
from zarr_dask.core.chunk_io import ChunkIO
from zarr_dask.core.indexing import ChunkProjection, DimGridLike
from zarr_dask.core.indexing_fancy import CoordinateSelection, IntArray, OrthogonalSelection
from zarr_dask.errors import ShapeMismatchError


# ------------------------------------------------------------------------------------------ tiles
@dataclass(frozen=True)
class TilePlan:
    """Tiles over an intermediate buffer, and how the selection's elements sit in it.

    ``projections`` map chunks of the read grid (inner chunks if sharded) onto the buffer of shape
    ``buffer_shape``; ``take`` indexes the buffer (NumPy advanced indexing) to give the selection in the shape
    ``out_shape``; ``dense[i]`` says projection ``i`` covers every element of its chunk inside the array
    (a write need not read it first).
    """

    projections: list[ChunkProjection]
    buffer_shape: tuple[int, ...]
    take: tuple[IntArray, ...]
    out_shape: tuple[int, ...]
    dense: list[bool]


def _chunk_of(grid: DimGridLike, x: IntArray) -> IntArray:
    size = getattr(grid, "chunk_size", None)
    if size is not None:
        return np.asarray(x // size, dtype=np.intp)
    ends = np.asarray(grid.ends)  # type: ignore[attr-defined]
    return np.searchsorted(ends, x, side="right").astype(np.intp)


def _chunk_bounds(grid: DimGridLike, chunks: IntArray, extent: int) -> tuple[IntArray, IntArray]:
    """Start and in-array end of each chunk."""
    starts = np.array([grid.start(int(c)) for c in chunks], dtype=np.intp)
    ends = np.array([min(grid.start(int(c)) + grid.size(int(c)), extent) for c in chunks], dtype=np.intp)
    return starts, ends


@dataclass(frozen=True)
class _Segments:
    chunks: IntArray
    lo: IntArray  # first buffer element's array index, per chunk
    span: IntArray
    offset: IntArray  # where each segment starts in the buffer
    covers: IntArray  # bool: the segment spans the chunk's in-array part
    dense: IntArray  # bool: every element of the chunk's in-array part is selected
    pos: IntArray  # buffer position of each selected index


def _segments(idx: IntArray, grid: DimGridLike, extent: int, whole: bool) -> _Segments:
    u = np.unique(idx)
    cu = _chunk_of(grid, u)
    first = np.flatnonzero(np.r_[True, cu[1:] != cu[:-1]]) if len(u) else np.zeros(0, np.intp)
    last = np.r_[first[1:], len(u)] - 1 if len(u) else np.zeros(0, np.intp)
    chunks = cu[first]
    starts, ends = _chunk_bounds(grid, chunks, extent)
    lo, hi = (starts, ends - 1) if whole else (u[first], u[last])
    span = hi - lo + 1
    offset = np.r_[0, np.cumsum(span)[:-1]].astype(np.intp) if len(span) else span
    k = np.searchsorted(chunks, _chunk_of(grid, idx))
    return _Segments(
        chunks=chunks,
        lo=lo,
        span=span,
        offset=offset,
        covers=(lo == starts) & (hi + 1 == ends),
        dense=(last - first + 1) == (ends - starts),
        pos=(offset[k] + idx - lo[k]).astype(np.intp),
    )


def plan_orthogonal(
    sel: OrthogonalSelection, grids: Sequence[DimGridLike], shape: Sequence[int], *, whole: bool = False
) -> TilePlan:
    """Tiles for an orthogonal selection: the product over dimensions of one segment per chunk touched.

    ``whole`` makes every tile a whole chunk (what a write needs).

    Examples
    --------
    Positions 9, 1, 2 of a dimension cut in chunks of 4: two tiles (chunk 0 from 1 to 3, chunk 2 at 1), a
    buffer of 3 elements, gathered back in the order asked for:

    >>> from zarr_dask.core.indexing_fancy import orthogonal_selection
    >>> from zarr_dask.spec.chunk_grid import RegularDimGrid
    >>> t = plan_orthogonal(orthogonal_selection(([9, 1, 2],), (10,)), [RegularDimGrid(chunk_size=4, extent=10)], (10,))
    >>> [(p.coords, p.chunk_sel[0]) for p in t.projections], t.buffer_shape, t.take[0].tolist()
    ([((0,), slice(1, 3, 1)), ((2,), slice(1, 2, 1))], (3,), [2, 0, 1])
    """
    segs = [_segments(i, g, n, whole) for i, g, n in zip(sel.indices, grids, shape, strict=True)]
    projections: list[ChunkProjection] = []
    dense: list[bool] = []
    if all(len(s.chunks) for s in segs):
        per_dim = [
            [
                (int(c), slice(int(lo - g.start(int(c))), int(lo - g.start(int(c)) + sp), 1), slice(int(o), int(o + sp)),
                 bool(cov), bool(dn))
                for c, lo, sp, o, cov, dn in zip(s.chunks, s.lo, s.span, s.offset, s.covers, s.dense, strict=True)
            ]
            for s, g in zip(segs, grids, strict=True)
        ]
        for combo in itertools.product(*per_dim):
            projections.append(
                ChunkProjection(
                    tuple(d[0] for d in combo), tuple(d[1] for d in combo), tuple(d[2] for d in combo),
                    all(d[3] for d in combo),
                )
            )
            dense.append(all(d[4] for d in combo))
    buffer_shape = tuple(int(s.span.sum()) for s in segs)
    take = np.ix_(*[s.pos for s in segs]) if segs else ()
    keep = tuple(0 if d else slice(None) for d in sel.drop)
    return TilePlan(projections, buffer_shape, _drop(take, keep), sel.shape, dense)


def _drop(take: tuple[Any, ...], keep: tuple[Any, ...]) -> tuple[IntArray, ...]:
    """The ``np.ix_`` index arrays with integer-indexed axes removed (each such axis has length 1)."""
    return tuple(np.asarray(t)[keep] for t in take)


def plan_coordinates(
    sel: CoordinateSelection, grids: Sequence[DimGridLike], shape: Sequence[int], *, whole: bool = False
) -> TilePlan:
    """Tiles for points: one tile per chunk holding a point, stacked along the buffer's first axis."""
    ndim = len(shape)
    pts = sel.points
    n = len(pts[0]) if pts else 0
    if n == 0:
        return TilePlan([], (0,) * ndim, tuple(np.zeros(0, np.intp) for _ in range(ndim)), sel.shape, [])
    coords = np.stack([_chunk_of(g, p) for g, p in zip(grids, pts, strict=True)], axis=1)
    tiles, inv = np.unique(coords, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    t = len(tiles)
    bounds = [_chunk_bounds(g, tiles[:, d], shape[d]) for d, g in enumerate(grids)]
    lo, hi = [], []
    for d in range(ndim):
        if whole:
            lo.append(bounds[d][0])
            hi.append(bounds[d][1] - 1)
        else:
            a = np.full(t, np.iinfo(np.intp).max, dtype=np.intp)
            b = np.full(t, -1, dtype=np.intp)
            np.minimum.at(a, inv, pts[d])
            np.maximum.at(b, inv, pts[d])
            lo.append(a)
            hi.append(b)
    span = [h - lo_ + 1 for lo_, h in zip(lo, hi, strict=True)]
    tile_shape = [int(s.max()) for s in span]
    flat = np.ravel_multi_index(pts, tuple(shape))
    uniq_tile = inv[np.unique(flat, return_index=True)[1]]
    counts = np.bincount(uniq_tile, minlength=t)
    sizes = np.prod([b[1] - b[0] for b in bounds], axis=0)
    projections = []
    for i in range(t):
        chunk_sel = tuple(
            slice(int(lo[d][i] - bounds[d][0][i]), int(lo[d][i] - bounds[d][0][i] + span[d][i]), 1) for d in range(ndim)
        )
        out_sel = (slice(i * tile_shape[0], i * tile_shape[0] + int(span[0][i])),) + tuple(
            slice(0, int(span[d][i])) for d in range(1, ndim)
        )
        covers = all(lo[d][i] == bounds[d][0][i] and hi[d][i] + 1 == bounds[d][1][i] for d in range(ndim))
        projections.append(ChunkProjection(tuple(int(c) for c in tiles[i]), chunk_sel, out_sel, covers))
    take = (inv * tile_shape[0] + pts[0] - lo[0][inv],) + tuple(pts[d] - lo[d][inv] for d in range(1, ndim))
    buffer_shape = (t * tile_shape[0], *tile_shape[1:])
    return TilePlan(projections, buffer_shape, take, sel.shape, [bool(c == s) for c, s in zip(counts, sizes, strict=True)])


# ------------------------------------------------------------------------------------------ shards
def read_grids(grids: Sequence[DimGridLike], inner: Sequence[int] | None, shape: Sequence[int]) -> tuple[DimGridLike, ...]:
    """The grid tiles are cut on: the inner chunks of a sharded array (regular: every shard edge is a multiple
    of the inner chunk shape), else the chunk grid itself."""
    if inner is None:
        return tuple(grids)
    from zarr_dask.spec.chunk_grid import RegularDimGrid

    return tuple(RegularDimGrid(chunk_size=c, extent=n) for c, n in zip(inner, shape, strict=True))


def shard_units(
    projections: Sequence[ChunkProjection],
    shard_grids: Sequence[DimGridLike],
    inner: Sequence[int],
    shape: Sequence[int],
) -> list[tuple[tuple[int, ...], list[InnerPart], bool]]:
    """Group tiles over inner chunks by shard: ``(shard coords, inner parts, covers every inner chunk)``."""
    units: dict[tuple[int, ...], list[InnerPart]] = {}
    for p in projections:
        starts = [c * n for c, n in zip(p.coords, inner, strict=True)]
        shard = tuple(g.chunk_range(s, s + 1)[0] for g, s in zip(shard_grids, starts, strict=True))
        local = tuple(
            (s - g.start(k)) // n for s, g, k, n in zip(starts, shard_grids, shard, inner, strict=True)
        )
        inside = all(s + n <= e for s, n, e in zip(starts, inner, shape, strict=True))
        units.setdefault(shard, []).append(InnerPart(local, p.chunk_sel, p.out_sel, p.complete, inside))
    out = []
    for shard, parts in sorted(units.items()):
        data = [
            min(g.size(k), e - g.start(k)) for g, k, e in zip(shard_grids, shard, shape, strict=True)
        ]
        n_inner = int(np.prod([-(-d // n) for d, n in zip(data, inner, strict=True)]))
        out.append((shard, parts, len(parts) == n_inner and all(p.complete for p in parts)))
    return out


# ------------------------------------------------------------------------------------------ IO
def _tile_grids(io: ChunkIO) -> tuple[DimGridLike, ...]:
    inner = io.sharding.chunk_shape if io.sharding is not None else None
    return read_grids(io.grids, inner, io.metadata.shape)


def plan(io: ChunkIO, sel: OrthogonalSelection | CoordinateSelection, *, whole: bool = False) -> TilePlan:
    """The tiles of ``sel`` on the array of ``io`` (whole chunks with ``whole``, for writes)."""
    grids = _tile_grids(io)
    if isinstance(sel, OrthogonalSelection):
        return plan_orthogonal(sel, grids, io.metadata.shape, whole=whole)
    return plan_coordinates(sel, grids, io.metadata.shape, whole=whole)


def read_tiles(io: ChunkIO, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
    """Read tiles into the buffer ``out``: batched store calls, shards read partially (index, then ranges)."""
    if io.sharding is None:
        io.read_projections(out, projections)
        return
    units = shard_units(projections, io.grids, io.sharding.chunk_shape, io.metadata.shape)
    run_batches(lambda batch: io.read_shard_units(out, batch), units, batched_io=io.store.batched_io)


def write_tiles(io: ChunkIO, value: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
    """Write whole-chunk tiles from the buffer ``value`` (each storage key written once)."""
    if io.sharding is None:
        run_batches(lambda batch: io.write_from(value, batch), projections, batched_io=io.store.batched_io)
        return
    units = shard_units(projections, io.grids, io.sharding.chunk_shape, io.metadata.shape)
    run_batches(lambda batch: io.write_shard_units(value, batch), units, batched_io=io.store.batched_io)


def get_selection(io: ChunkIO, sel: OrthogonalSelection | CoordinateSelection) -> np.ndarray[Any, Any]:
    """Read a selection: only the chunks it touches, each only as far as it needs."""
    tiles = plan(io, sel)
    buf = np.empty(tiles.buffer_shape, dtype=io.dtype)
    if buf.size:
        read_tiles(io, buf, tiles.projections)
    out: np.ndarray[Any, Any] = buf[tiles.take] if tiles.take else buf
    return out.reshape(tiles.out_shape)


def set_selection(io: ChunkIO, sel: OrthogonalSelection | CoordinateSelection, value: np.ndarray[Any, Any]) -> None:
    """Write ``value`` (broadcast to the selection's shape) into a selection: the chunks it leaves partly
    untouched are read (one batched call), then every touched chunk is written once (repeated positions: the
    last value wins, as in NumPy)."""
    tiles = plan(io, sel, whole=True)
    try:
        v = np.broadcast_to(value, tiles.out_shape)
    except ValueError:
        raise ShapeMismatchError(
            f"Attempting to set a selection of shape {tiles.out_shape} with a value of shape {np.shape(value)}, "
            "which does not broadcast to it: give a value of the selection's shape (or one that broadcasts to it)"
        ) from None
    if not tiles.projections:
        return
    buf = np.empty(tiles.buffer_shape, dtype=io.dtype)
    partial = [p for p, d in zip(tiles.projections, tiles.dense, strict=True) if not d]
    if partial:
        read_tiles(io, buf, partial)
    take_shape = np.broadcast_shapes(*[t.shape for t in tiles.take])
    buf[tiles.take] = v.reshape(take_shape)
    write_tiles(io, buf, tiles.projections)
