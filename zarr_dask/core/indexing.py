"""Basic (NumPy-style) indexing mapped onto a chunk grid.

A selection made of integers, slices (any step, negative too) and one ``Ellipsis`` is normalised per dimension
into a :class:`DimSelection`; :func:`chunk_projections` then yields, for every chunk the selection touches,
where the chunk's elements go in the output and whether the chunk is covered completely (a write can then
skip reading it).  Everything is computed per dimension, so the cost is the sum, not the product, of the
chunk counts until the caller iterates the product.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from zarr_dask.errors import IndexingError, ShapeMismatchError


class DimGridLike(Protocol):
    """What indexing needs of one dimension of a chunk grid."""

    def start(self, i: int) -> int: ...
    def size(self, i: int) -> int: ...
    def chunk_range(self, start: int, stop: int) -> range: ...


@dataclass(frozen=True, slots=True)
class DimSelection:
    """The selection along one dimension: the increasing range ``start, start+step, ... < stop``.

    ``flip`` marks a negative-step slice (the output is reversed along this axis after reading the
    increasing range); ``drop`` marks an integer index (the axis is removed from the output).
    """

    start: int
    stop: int
    step: int
    flip: bool = False
    drop: bool = False

    @property
    def count(self) -> int:
        return max(0, -(-(self.stop - self.start) // self.step))


def _index_error(message: str) -> IndexingError:
    return IndexingError(message)


def _int_index(i: Any, extent: int, axis: int) -> int:
    try:
        j = operator.index(i)
    except TypeError:
        raise _index_error(
            f"unsupported index {i!r} on axis {axis}: use integers, slices or Ellipsis "
            "(basic indexing); integer arrays and boolean masks go through a.oindex[...] / a.vindex[...]"
        ) from None
    if j < 0:
        j += extent
    if not 0 <= j < extent:
        raise _index_error(f"index {operator.index(i)} is out of bounds for axis {axis} with size {extent}")
    return j


def _dim_selection(sel: Any, extent: int, axis: int) -> DimSelection:
    if isinstance(sel, slice):
        try:
            start, stop, step = sel.indices(extent)
        except (TypeError, ValueError) as e:
            raise _index_error(f"invalid slice {sel!r} on axis {axis}: {e}") from None
        if step > 0:
            return DimSelection(start, max(start, stop), step)
        # negative step: read the increasing equivalent, then reverse
        n = len(range(start, stop, step))
        if n == 0:
            return DimSelection(0, 0, 1, flip=True)
        lo = start + (n - 1) * step
        return DimSelection(lo, start + 1, -step, flip=True)
    j = _int_index(sel, extent, axis)
    return DimSelection(j, j + 1, 1, drop=True)


def normalize_selection(selection: Any, shape: Sequence[int]) -> tuple[DimSelection, ...]:
    """Turn a basic-indexing key into one :class:`DimSelection` per dimension.

    Raises
    ------
    IndexingError
        For too many indices, several Ellipses, out-of-bounds integers or unsupported index types.
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    n_ellipsis = sum(1 for s in selection if s is Ellipsis)
    if n_ellipsis > 1:
        raise _index_error("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        i = next(k for k, s in enumerate(selection) if s is Ellipsis)
        fill = len(shape) - (len(selection) - 1)
        selection = selection[:i] + (slice(None),) * max(fill, 0) + selection[i + 1 :]
    if len(selection) > len(shape):
        raise _index_error(
            f"too many indices for array: array is {len(shape)}-dimensional, but {len(selection)} were indexed"
        )
    selection = selection + (slice(None),) * (len(shape) - len(selection))
    return tuple(_dim_selection(s, n, axis) for axis, (s, n) in enumerate(zip(selection, shape, strict=True)))


def selection_shape(dims: Sequence[DimSelection]) -> tuple[int, ...]:
    """Shape of the result of a selection (integer-indexed axes removed)."""
    return tuple(d.count for d in dims if not d.drop)


@dataclass(frozen=True, slots=True)
class DimProjection:
    """How one chunk along one dimension meets the selection."""

    chunk: int
    chunk_sel: slice  # positions inside the chunk
    out_sel: slice  # positions in the (unflipped, undropped) output
    complete: bool  # the selection covers every stored-and-in-bounds element of the chunk along this axis


def project_dim(dim: DimSelection, grid: DimGridLike, extent: int) -> list[DimProjection]:
    """Per-chunk projections of one dimension's selection."""
    out: list[DimProjection] = []
    if dim.count == 0:
        return out
    last = dim.start + (dim.count - 1) * dim.step
    for c in grid.chunk_range(dim.start, last + 1):
        c0 = grid.start(c)
        c1 = min(c0 + grid.size(c), extent)
        # first selected element >= c0
        first = dim.start if dim.start >= c0 else dim.start + (-(-(c0 - dim.start) // dim.step)) * dim.step
        if first >= c1 or first > last:
            continue
        stop = min(c1, last + 1)
        n = -(-(stop - first) // dim.step)
        o0 = (first - dim.start) // dim.step
        complete = dim.step == 1 and first == c0 and first + n == c1
        out.append(
            DimProjection(
                chunk=c,
                chunk_sel=slice(first - c0, first - c0 + (n - 1) * dim.step + 1, dim.step),
                out_sel=slice(o0, o0 + n),
                complete=complete,
            )
        )
    return out


class ChunkProjection(NamedTuple):
    """One chunk touched by a selection (a named tuple: reads of many small chunks make millions)."""

    coords: tuple[int, ...]
    chunk_sel: tuple[slice, ...]
    out_sel: tuple[slice, ...]
    complete: bool


def chunk_projections(
    dims: Sequence[DimSelection], grids: Sequence[DimGridLike], shape: Sequence[int]
) -> Iterator[ChunkProjection]:
    """Every chunk a selection touches, in C order of chunk coordinates."""
    per_dim = [project_dim(d, g, n) for d, g, n in zip(dims, grids, shape, strict=True)]
    if not per_dim:  # 0-d array: the single chunk
        yield ChunkProjection((), (), (), True)
        return
    # one product per field, iterated in lockstep: the tuples are built in C
    coords = itertools.product(*[[p.chunk for p in d] for d in per_dim])
    chunk_sels = itertools.product(*[[p.chunk_sel for p in d] for d in per_dim])
    out_sels = itertools.product(*[[p.out_sel for p in d] for d in per_dim])
    completes = itertools.product(*[[p.complete for p in d] for d in per_dim])
    for c, cs, os_, done in zip(coords, chunk_sels, out_sels, completes, strict=True):
        yield ChunkProjection(c, cs, os_, False not in done)


def count_chunks(dims: Sequence[DimSelection], grids: Sequence[DimGridLike], shape: Sequence[int]) -> int:
    """How many chunks a selection touches (cheap: per-dimension counts multiplied)."""
    total = 1
    for d, g, n in zip(dims, grids, shape, strict=True):
        total *= len(project_dim(d, g, n))
    return total


def finalize_output(out: Any, dims: Sequence[DimSelection]) -> Any:
    """Apply negative-step flips and drop integer-indexed axes of the internal (full-rank) result."""
    flips = tuple(slice(None, None, -1) if d.flip else slice(None) for d in dims)
    if any(d.flip for d in dims):
        out = out[flips]
    drops = tuple(0 if d.drop else slice(None) for d in dims)
    if any(d.drop for d in dims):
        out = out[(*drops, Ellipsis)]  # keeps a 0-d array (not a scalar) when every axis is dropped
    return out


def expand_value(value: Any, dims: Sequence[DimSelection]) -> Any:
    """Inverse of :func:`finalize_output` for writes: bring a value of the selection's shape to full rank,
    increasing order along every axis."""
    import numpy as np

    full = tuple(1 if d.drop else d.count for d in dims)
    v = np.asanyarray(value)
    try:
        v = np.broadcast_to(v, selection_shape(dims)) if v.shape != selection_shape(dims) else v
    except ValueError:
        raise ShapeMismatchError(
            f"Attempting to set a selection of shape {selection_shape(dims)} with a value of shape {v.shape}, which "
            "does not broadcast to it: give a value of the selection's shape (or one that broadcasts to it)"
        ) from None
    v = v.reshape(full)
    if any(d.flip for d in dims):
        v = v[tuple(slice(None, None, -1) if d.flip else slice(None) for d in dims)]
    return v
