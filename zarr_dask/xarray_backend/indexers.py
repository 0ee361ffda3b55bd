"""Reading basic, outer (orthogonal) and vectorized (point-wise) selections of one array.

Every read touches only the storage units the selection needs and fetches them with batched store calls:

* **basic** (integers and slices): the chunks the selection meets, decoded straight into the output;
* **outer** (an integer array per dimension, applied independently): along each dimension the chunks holding
  a selected index are read once into a compact buffer (runs of touched chunks laid end to end), which is
  then indexed in memory, so ``[[0, 5000]]`` on a long axis reads two chunks, not the span between them;
* **vectorized** (integer arrays broadcast against each other): points are grouped by the chunk they fall
  in, and each touched chunk combination is read once -- a diagonal of a 10^4 x 10^4 array reads the 100
  chunks on the diagonal, not the 10^4 a bounding box or an orthogonal read would.

For sharded arrays the grouping unit is the inner chunk (partial shard reads fetch only those).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_dask.core.batches import run_batches
from zarr_dask.core.indexing import (
    ChunkProjection,
    DimProjection,
    DimSelection,
    finalize_output,
    normalize_selection,
    project_dim,
)
from zarr_dask.errors import IndexingError
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.spec import DimGrid, RegularDimGrid, VaryingDimGrid

__all__ = ["read_basic", "read_outer", "read_vectorized"]

IntArray = np.ndarray[Any, np.dtype[np.intp]]


def _run(handle: ArrayHandle, out: np.ndarray[Any, Any], projections: list[ChunkProjection]) -> None:
    """Read projections into ``out``: batched store calls, in parallel when there are many."""
    if out.size == 0 or not projections:
        return
    run_batches(
        lambda batch: handle.io.read_into(out, batch), projections, batched_io=handle.store.batched_io
    )


def read_basic(handle: ArrayHandle, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
    """NumPy basic indexing (integers, slices with any step) of the stored array."""
    dims = normalize_selection(key, handle.shape)
    return np.asarray(finalize_output(handle.io.read(dims), dims))


# ------------------------------------------------------------------------------------------- units
def _unit_grid(handle: ArrayHandle, axis: int) -> DimGrid:
    """The read unit along ``axis``: the inner chunk for sharded arrays, else the stored chunk."""
    sharding = handle.io.sharding
    if sharding is not None:
        return RegularDimGrid(chunk_size=int(sharding.chunk_shape[axis]), extent=handle.shape[axis])
    grid: DimGrid = handle.io.grids[axis]
    return grid


def _unit_of(grid: DimGrid, idx: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """For each index: its unit number, the unit's first index and its end (exclusive, clipped)."""
    if isinstance(grid, RegularDimGrid):
        size = grid.chunk_size
        unit = idx // size
        start = unit * size
        return unit, start, np.minimum(start + size, grid.extent)
    if isinstance(grid, VaryingDimGrid):
        ends = np.asarray(grid.ends, dtype=np.intp)
        unit = np.searchsorted(ends, idx, side="right")
        start = np.where(unit > 0, ends[np.maximum(unit - 1, 0)], 0)
        return unit, start, np.minimum(ends[unit], grid.extent)
    unit = np.array([grid.index_of(int(i)) for i in idx], dtype=np.intp)
    start = np.array([grid.start(int(u)) for u in unit], dtype=np.intp)
    stop = np.array([min(grid.start(int(u)) + grid.size(int(u)), grid.extent) for u in unit], dtype=np.intp)
    return unit, start, stop


def _positive(k: Any, extent: int, axis: int) -> IntArray:
    arr = np.asarray(k)
    if arr.dtype == bool:
        if arr.shape != (extent,):
            raise IndexingError(f"boolean index of shape {arr.shape} does not match axis {axis} of length {extent}")
        arr = np.flatnonzero(arr)
    if arr.dtype.kind not in "iu":
        raise IndexingError(f"index arrays must hold integers, got dtype {arr.dtype} on axis {axis}")
    arr = arr.astype(np.intp, copy=False)
    arr = np.where(arr < 0, arr + extent, arr)
    if arr.size and (arr.min() < 0 or arr.max() >= extent):
        bad = arr[(arr < 0) | (arr >= extent)][0]
        raise IndexingError(f"index {int(bad)} is out of bounds for axis {axis} with size {extent}")
    return arr


def _shifted(projs: list[DimProjection], offset: int) -> list[DimProjection]:
    return [
        DimProjection(p.chunk, p.chunk_sel, slice(p.out_sel.start + offset, p.out_sel.stop + offset), p.complete)
        for p in projs
    ]


def _product(per_dim: Sequence[list[DimProjection]]) -> list[ChunkProjection]:
    if not per_dim:
        return [ChunkProjection((), (), (), True)]
    return [
        ChunkProjection(
            coords=tuple(p.chunk for p in combo),
            chunk_sel=tuple(p.chunk_sel for p in combo),
            out_sel=tuple(p.out_sel for p in combo),
            complete=all(p.complete for p in combo),
        )
        for combo in itertools.product(*per_dim)
    ]


# ------------------------------------------------------------------------------------------- outer
def _outer_array_dim(
    handle: ArrayHandle, axis: int, idx: IntArray
) -> tuple[list[DimProjection], int, IntArray]:
    """Touched units of one axis laid end to end: (projections, compact length, position of each index)."""
    grid, extent = handle.io.grids[axis], handle.shape[axis]
    uniq = np.unique(idx)
    if not uniq.size:
        return [], 0, np.zeros(idx.shape, dtype=np.intp)
    unit, start, stop = _unit_of(_unit_grid(handle, axis), uniq)
    first = np.concatenate([[True], unit[1:] != unit[:-1] + 1]) if uniq.size else np.zeros(0, bool)
    run_ids = np.cumsum(first) - 1
    run_starts, run_stops = start[first], np.zeros(int(first.sum()), dtype=np.intp)
    np.maximum.at(run_stops, run_ids, stop)
    lengths = run_stops - run_starts
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.intp)
    projs: list[DimProjection] = []
    for s, e, o in zip(run_starts.tolist(), run_stops.tolist(), offsets.tolist(), strict=True):
        projs += _shifted(project_dim(DimSelection(s, e, 1), grid, extent), o)
    where_uniq = offsets[run_ids] + (uniq - run_starts[run_ids])
    return projs, int(lengths.sum()), where_uniq[np.searchsorted(uniq, idx)]


def read_outer(handle: ArrayHandle, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
    """Orthogonal indexing: integers, slices (any step) and 1-d integer (or boolean) arrays per axis."""
    if len(key) != handle.ndim:
        raise IndexingError(f"outer indexer {key!r} must have one entry per dimension ({handle.ndim})")
    per_dim: list[list[DimProjection]] = []
    shape: list[int] = []
    post: list[Any] = []
    for axis, (k, g, n) in enumerate(zip(key, handle.io.grids, handle.shape, strict=True)):
        if isinstance(k, np.ndarray | list):
            projs, length, where = _outer_array_dim(handle, axis, _positive(k, n, axis))
            per_dim.append(projs)
            shape.append(length)
            post.append(where)
            continue
        d = normalize_selection((k,), (n,))[0]
        per_dim.append(project_dim(d, g, n))
        shape.append(d.count)
        post.append(0 if d.drop else slice(None, None, -1) if d.flip else slice(None))
    out = np.empty(tuple(shape), dtype=handle.dtype)
    _run(handle, out, _product(per_dim))
    result: np.ndarray[Any, Any] = out
    for axis in reversed(range(len(post))):  # later axes first, so integer drops keep axis numbers valid
        p = post[axis]
        index = (slice(None),) * axis + (p,)
        result = result[index]
    return result


# --------------------------------------------------------------------------------------- vectorized
def read_vectorized(handle: ArrayHandle, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
    """Vectorized (point-wise) indexing: integer arrays broadcast together, plus slices.

    The result has xarray's vectorized layout: the broadcast dimensions of the arrays first, then the sliced
    dimensions in order.
    """
    from xarray.core.indexing import NumpyIndexingAdapter, VectorizedIndexer

    if len(key) != handle.ndim:
        raise IndexingError(f"vectorized indexer {key!r} must have one entry per dimension ({handle.ndim})")
    axes = [a for a, k in enumerate(key) if not isinstance(k, slice)]
    if not axes:
        return read_basic(handle, key)
    arrays = np.broadcast_arrays(*[np.asarray(key[a]) for a in axes])
    points = [_positive(arr.ravel(), handle.shape[a], a) for a, arr in zip(axes, arrays, strict=True)]
    units = [_unit_of(_unit_grid(handle, a), p) for a, p in zip(axes, points, strict=True)]
    combos, inverse = np.unique(np.stack([u[0] for u in units], axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    first = np.zeros(len(combos), dtype=np.intp)
    first[inverse] = np.arange(len(inverse))  # one point of each combination (they share their units)
    widths = [int((u[2] - u[1]).max()) if len(p) else 0 for u, p in zip(units, points, strict=True)]
    slices = {a: normalize_selection((key[a],), (handle.shape[a],))[0] for a in range(handle.ndim) if a not in axes}
    shape = [slices[a].count if a in slices else widths[axes.index(a)] for a in range(handle.ndim)]
    shape[axes[0]] *= max(len(combos), 1)
    projections: list[ChunkProjection] = []
    for k, pt in enumerate(first.tolist()):
        per_dim = []
        for a, (g, n) in enumerate(zip(handle.io.grids, handle.shape, strict=True)):
            if a in slices:
                per_dim.append(project_dim(slices[a], g, n))
                continue
            j = axes.index(a)
            lo, hi = int(units[j][1][pt]), int(units[j][2][pt])
            per_dim.append(_shifted(project_dim(DimSelection(lo, hi, 1), g, n), k * widths[0] if j == 0 else 0))
        projections += _product(per_dim)
    out = np.empty(tuple(shape), dtype=handle.dtype)
    _run(handle, out, projections)
    local: list[Any] = []
    for a in range(handle.ndim):
        if a in slices:
            local.append(slice(None, None, -1) if slices[a].flip else slice(None))
            continue
        j = axes.index(a)
        pos = points[j] - units[j][1] + (inverse * widths[0] if j == 0 else 0)
        local.append(pos.reshape(arrays[j].shape))
    return np.asarray(NumpyIndexingAdapter(out).vindex[VectorizedIndexer(tuple(local))])  # type: ignore[no-untyped-call]
