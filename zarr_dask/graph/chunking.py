"""Dask chunkings derived from a Zarr array's storage keys (the read planner's arithmetic, no dask graphs).

The *unit* of an array is its storage key: the shard when the array is sharded, else the chunk. Default dask
blocks are whole units merged up to a byte target; user chunkings are checked for units they cut.
Everything is per dimension and vectorised, so a grid of 10^6 keys costs milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.spec import DimGrid, RegularDimGrid, VaryingDimGrid

__all__ = [
    "MAX_BLOCKS_PER_DIM",
    "Chunks",
    "Units",
    "check_block_counts",
    "chunks_token",
    "default_chunks",
    "dim_units",
    "is_regular",
    "merge_factors",
    "split_amplification",
]

#: dask-style chunks: per dimension, the block lengths.
Chunks = tuple[tuple[int, ...], ...]
IntArray = np.ndarray[Any, np.dtype[np.int64]]
#: Most dask blocks along one dimension: dask holds a tuple of every block length per dimension (32 MiB here).
MAX_BLOCKS_PER_DIM = 1 << 22


def check_block_counts(counts: Sequence[int], shape: Sequence[int], what: str) -> None:
    """Refuse a chunking with more than :data:`MAX_BLOCKS_PER_DIM` blocks along a dimension, before any
    per-block tuple is built.

    Examples
    --------
    >>> check_block_counts([2**40], [2**40], "chunks (1,)")
    Traceback (most recent call last):
    ...
    zarr_dask.errors.UnsupportedFeatureError: chunks (1,) make 1099511627776 dask blocks along dimension 0 ...
    """
    for d, n in enumerate(counts):
        if n > MAX_BLOCKS_PER_DIM:
            raise UnsupportedFeatureError(
                f"{what} make {n} dask blocks along dimension {d} of the shape {tuple(shape)}, more than the "
                f"{MAX_BLOCKS_PER_DIM} dask can hold (it keeps every block length); pass larger chunks= (e.g. "
                "chunks='auto' or whole storage units) or read a region of the array (zarr_dask.open_array(...)[...])"
            )


def is_regular(sizes: Sequence[int]) -> bool:
    """True for dask-style regular chunks: all equal but the last, which may be shorter."""
    if len(sizes) <= 2:
        return len(sizes) <= 1 or sizes[1] <= sizes[0]
    if len(sizes) > 4096:  # vectorised for huge chunk tuples
        arr = np.asarray(sizes, dtype=np.int64)
        return bool((arr[:-1] == arr[0]).all() and arr[-1] <= arr[0])
    first = sizes[0]
    return all(s == first for s in sizes[1:-1]) and sizes[-1] <= first


@dataclass(frozen=True)
class Units:
    """The storage units along one dimension: ``size`` each (the last one cut by the array's end), or
    explicit ``lengths`` (rectilinear grids). Nothing is materialised per unit for regular grids."""

    extent: int
    size: int = 0
    lengths: IntArray | None = None

    @classmethod
    def of(cls, lengths: Sequence[int]) -> Units:
        """Units from explicit lengths (regular ones are recognised)."""
        total = int(sum(lengths))
        if is_regular(lengths) and total:
            return cls(extent=total, size=int(lengths[0]))
        return cls(extent=total, lengths=np.asarray(lengths, dtype=np.int64))

    @property
    def count(self) -> int:
        if self.lengths is not None:
            return len(self.lengths)
        return max(1, -(-self.extent // self.size)) if self.size else 1

    @property
    def largest(self) -> int:
        if self.lengths is not None:
            return int(self.lengths.max()) if len(self.lengths) else 0
        return min(self.size, self.extent) if self.extent else self.size

    def bounds(self) -> IntArray:
        """End of every unit (cumulative)."""
        if self.lengths is not None:
            return np.cumsum(self.lengths)
        return np.minimum(np.arange(1, self.count + 1, dtype=np.int64) * self.size, self.extent)

    def as_chunks(self) -> tuple[int, ...]:
        if self.extent == 0:
            return (0,)
        if self.lengths is not None:
            return tuple(int(x) for x in self.lengths)
        k, r = divmod(self.extent, self.size)
        return (self.size,) * k + ((r,) if r else ())


def dim_units(grid: DimGrid, extent: int) -> Units:
    """The storage units (shards or chunks) along one dimension of an array."""
    if isinstance(grid, RegularDimGrid) or extent == 0:
        return Units(extent=extent, size=grid.size(0) if isinstance(grid, RegularDimGrid) else 1)
    n = grid.nchunks(extent)
    if isinstance(grid, VaryingDimGrid):
        ends = np.minimum(np.asarray(grid.ends[:n], dtype=np.int64), extent)
        return Units(extent=extent, lengths=np.diff(ends, prepend=0))
    return Units(extent=extent, lengths=np.asarray([grid.data_size(i) for i in range(n)], dtype=np.int64))


def merge_factors(unit: Sequence[int], count: Sequence[int], itemsize: int, target: int) -> list[int]:
    """How many units to merge per dimension so a block stays within ``target`` bytes.

    Units are merged along the trailing dimension first, then the one before it once that one is whole, and
    so on: blocks are then contiguous pieces of the C-ordered result, which dask assembles (``compute``,
    ``concatenate``) with a few large copies instead of a strided copy per row. Measured on 1 GiB of 4 MiB
    chunks: whole-row blocks assemble 2-3x faster than column strips or squares.

    Examples
    --------
    >>> merge_factors([1024, 1024], [16, 16], 4, 128 * 2**20)  # rows of whole chunks, two chunk-rows tall
    [2, 16]
    >>> merge_factors([1, 1000], [1000, 1000], 4, 128 * 2**20)
    [33, 1000]
    >>> merge_factors([10], [10**6], 4, 128 * 2**20)
    [1000000]
    """
    f = [1] * len(unit)
    block = math.prod(max(u, 1) for u in unit) * max(itemsize, 1)
    for d in reversed(range(len(unit))):
        f[d] = max(1, min(count[d], target // block))
        block *= f[d]
        if f[d] < count[d]:
            break
    return f


def _merge_dim(units: Units, factor: int) -> tuple[int, ...]:
    """Consecutive units merged ``factor`` at a time (varying units: greedily up to that many unit lengths)."""
    if units.lengths is None:
        return Units(extent=units.extent, size=units.size * max(factor, 1)).as_chunks()
    if factor <= 1 or units.count <= 1:
        return units.as_chunks()
    limit = units.largest * factor
    ends = units.bounds()
    out: list[int] = []
    pos, i = 0, 0
    while i < len(ends):
        j = max(i + 1, int(np.searchsorted(ends, pos + limit, side="right")))
        out.append(int(ends[j - 1]) - pos)
        pos, i = int(ends[j - 1]), j
    return tuple(out)


def default_chunks(units: Sequence[Units], itemsize: int, target: int) -> Chunks:
    """Whole units merged up to ``target`` bytes per block (never a unit split); as even as the same number
    of blocks allows (16 units in blocks of at most 5 -> 4 blocks of 4, not 5, 5, 5, 1)."""
    counts = [u.count for u in units]
    factors = merge_factors([u.largest for u in units], counts, itemsize, target)
    factors = [-(-k // -(-k // f)) for k, f in zip(counts, factors, strict=True)]
    blocks = [-(-k // f) for k, f in zip(counts, factors, strict=True)]
    check_block_counts(blocks, [u.extent for u in units], f"blocks of whole storage units {tuple(u.largest for u in units)}, merged up to the target size,")
    return tuple(_merge_dim(u, f) for u, f in zip(units, factors, strict=True))


def split_amplification(chunks: Chunks, units: Sequence[Units]) -> float:
    """How many times each unit is fetched on average when every block is read once (1.0: no unit split)."""
    amp = 1.0
    for block_dim, u in zip(chunks, units, strict=True):
        if u.extent == 0:
            continue
        sizes = np.asarray(block_dim, dtype=np.int64)
        ends = np.cumsum(sizes)
        starts = (ends - sizes)[sizes > 0]
        ends = ends[sizes > 0]
        if u.lengths is None:
            first, last = starts // u.size, (ends - 1) // u.size
        else:
            bounds = u.bounds()
            first = np.searchsorted(bounds, starts, side="right")
            last = np.searchsorted(bounds, ends - 1, side="right")
        amp *= float(np.sum(last - first + 1)) / u.count
    return amp


def chunks_token(chunks: Chunks) -> tuple[Any, ...]:
    """A compact, deterministic stand-in for ``chunks`` (regular dimensions need three numbers)."""
    out: list[Any] = []
    for dim in chunks:
        if is_regular(dim):
            out.append(("regular", dim[0] if dim else 0, len(dim), dim[-1] if dim else 0))
        else:
            out.append(("edges", np.asarray(dim, dtype=np.int64).tobytes()))
    return tuple(out)
