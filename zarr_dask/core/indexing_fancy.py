"""Orthogonal (``oindex``), coordinate / mask (``vindex``) and block (``blocks``) selections: parsing.

Each kind of key is normalised here into per-dimension integer positions (:class:`OrthogonalSelection`,
:class:`CoordinateSelection`) or a region (:func:`block_selection`); :mod:`zarr_dask.core.indexing_tiles` reads and
writes them. The meaning of each selection follows zarr-python 3 (``Array.oindex``, ``Array.vindex``, ``Array.blocks``,
and the dispatch of ``Array.__getitem__``); integer arrays may be unsorted, repeat and be negative.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.core.indexing import DimGridLike
from zarr_dask.errors import IndexingError

IntArray = np.ndarray[Any, np.dtype[np.intp]]


# ------------------------------------------------------------------------------------------ classify
def _is_int(x: Any) -> bool:
    if isinstance(x, bool | np.bool_):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _kind(x: Any) -> str:
    """``"int"``, ``"ints"`` (an integer array or list), ``"bools"``, ``"slice"``, ``"ellipsis"`` or ``"other"``."""
    if x is Ellipsis:
        return "ellipsis"
    if isinstance(x, slice):
        return "slice"
    if _is_int(x):
        return "int"
    if isinstance(x, np.ndarray | list | tuple):
        try:
            arr = np.asarray(x)
        except ValueError:
            return "other"
        if arr.ndim == 0:
            return "other"
        if arr.dtype == bool:
            return "bools"
        if arr.dtype.kind in "ui" or arr.size == 0:
            return "ints"
    return "other"


def _as_tuple(selection: Any) -> tuple[Any, ...]:
    return selection if isinstance(selection, tuple) else (selection,)


def classify(selection: Any, ndim: int) -> str:
    """Which kind of indexing ``Array[selection]`` means, as zarr-python 3 dispatches it.

    ``"vindex"`` for a boolean array of the array's shape or a tuple of integers and integer arrays, one per
    dimension, at least one an array (NumPy's vectorized indexing); ``"oindex"`` for at most one integer or
    boolean array among integers, slices and ``...``, or one array per dimension (a boolean one among them);
    ``"basic"`` when there is no array.

    Examples
    --------
    >>> classify((slice(None), 3), 2), classify(([0, 2], [1, 1]), 2), classify(([0, 2], slice(None)), 2)
    ('basic', 'vindex', 'oindex')
    """
    if isinstance(selection, np.ndarray) and selection.dtype == bool:
        return "vindex" if selection.ndim == ndim else "oindex"
    sel = _as_tuple(selection)
    kinds = [_kind(s) for s in sel]
    if ndim > 1 and kinds == ["bools"] and np.asarray(sel[0]).ndim == ndim:  # a[(mask,)], a[mask.tolist()]
        return "vindex"
    n_arrays = sum(k in ("ints", "bools") for k in kinds)
    if not n_arrays:
        return "basic"
    if len(sel) == ndim and all(k in ("int", "ints") for k in kinds):
        return "vindex"
    if len(sel) == ndim and all(k in ("ints", "bools") for k in kinds):
        return "oindex"
    if n_arrays == 1 and "other" not in kinds:
        return "oindex"
    raise IndexingError(
        f"unsupported selection {_short(selection)}: several index arrays mixed with slices; use "
        "a.oindex[...] for orthogonal (outer) indexing or a.vindex[...] with one integer array per dimension"
    )


def _is_bool_like(x: Any) -> bool:
    return _kind(x) == "bools"


def _short(selection: Any) -> str:
    text = repr(selection)
    return text if len(text) <= 80 else text[:77] + "..."


# ------------------------------------------------------------------------------------------ normalise
def _int_array(sel: Any, extent: int, axis: int) -> IntArray:
    """An integer (or boolean) index array for one dimension, wrapped into ``[0, extent)`` and bounds-checked."""
    arr = np.asarray(sel)
    if arr.dtype == bool:
        if arr.ndim != 1 or arr.shape[0] != extent:
            raise IndexingError(
                f"boolean index of shape {arr.shape} does not match axis {axis} of length {extent}"
            )
        return np.flatnonzero(arr).astype(np.intp)
    if arr.size == 0 and arr.dtype.kind not in "ui":
        arr = arr.astype(np.intp)
    if arr.dtype.kind not in "ui":
        raise IndexingError(
            f"unsupported index {_short(sel)} on axis {axis}: use integers, slices, integer or boolean arrays"
        )
    # bounds-checked in the index's own type: a huge unsigned index made signed first would wrap into range
    bad = (arr >= extent) if arr.dtype.kind == "u" else (arr < -extent) | (arr >= extent)
    if bad.any():
        raise IndexingError(f"index {arr[bad][0]} is out of bounds for axis {axis} with size {extent}")
    arr = arr.astype(np.intp, copy=False)
    return np.where(arr < 0, arr + extent, arr)


def _expand_ellipsis(sel: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    n = sum(1 for s in sel if s is Ellipsis)
    if n > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    if n:
        i = next(k for k, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * max(ndim - (len(sel) - 1), 0) + sel[i + 1 :]
    if len(sel) > ndim:
        raise IndexingError(f"too many indices for array: array is {ndim}-dimensional, but {len(sel)} were indexed")
    return sel + (slice(None),) * (ndim - len(sel))


@dataclass(frozen=True)
class OrthogonalSelection:
    """Per dimension the (wrapped, in-bounds) positions selected, and whether the axis is dropped (an int)."""

    indices: tuple[IntArray, ...]
    drop: tuple[bool, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(i) for i, d in zip(self.indices, self.drop, strict=True) if not d)


def orthogonal_selection(selection: Any, shape: Sequence[int]) -> OrthogonalSelection:
    """Normalise an ``oindex`` key: integers, slices (any step), ``...``, integer and boolean arrays.

    Examples
    --------
    >>> s = orthogonal_selection(([2, -1], slice(None, None, 2), 0), (4, 5, 3))
    >>> [i.tolist() for i in s.indices], s.shape
    ([[2, 3], [0, 2, 4], [0]], (2, 3))
    """
    if isinstance(selection, np.ndarray) and selection.dtype == bool and selection.ndim > 1:
        raise IndexingError("a multi-dimensional boolean mask selects points: use a.vindex[mask] (or a[mask])")
    sel = _expand_ellipsis(_as_tuple(selection), len(shape))
    indices: list[IntArray] = []
    drop: list[bool] = []
    for axis, (s, n) in enumerate(zip(sel, shape, strict=True)):
        if isinstance(s, slice):
            try:
                indices.append(np.arange(*s.indices(n), dtype=np.intp))
            except (TypeError, ValueError) as e:
                raise IndexingError(f"invalid slice {s!r} on axis {axis}: {e}") from None
            drop.append(False)
        elif _is_int(s):
            indices.append(_int_array(np.asarray([operator.index(s)]), n, axis))
            drop.append(True)
        else:
            arr = np.asarray(s)
            if arr.ndim != 1:
                raise IndexingError(
                    f"orthogonal index arrays must be 1-dimensional; axis {axis} got shape {arr.shape}"
                )
            indices.append(_int_array(arr, n, axis))
            drop.append(False)
    return OrthogonalSelection(tuple(indices), tuple(drop))


@dataclass(frozen=True)
class CoordinateSelection:
    """Points: one flat integer array per dimension (wrapped, in bounds) and the shape of the result."""

    points: tuple[IntArray, ...]
    shape: tuple[int, ...]


def coordinate_selection(selection: Any, shape: Sequence[int]) -> CoordinateSelection:
    """Normalise a ``vindex`` key: one integer (array) per dimension, broadcast together, or a boolean mask of
    the array's shape (its ``nonzero()`` points).

    Examples
    --------
    >>> s = coordinate_selection(([[0, 1]], [2, -1]), (3, 4))
    >>> [p.tolist() for p in s.points], s.shape
    ([[0, 1], [2, 3]], (1, 2))
    """
    sel = _as_tuple(selection)
    if len(sel) == 1 and _is_bool_like(sel[0]) and np.asarray(sel[0]).ndim == len(shape):
        mask = np.asarray(sel[0])
        if mask.shape != tuple(shape):
            raise IndexingError(f"boolean mask of shape {mask.shape} does not match the array's shape {tuple(shape)}")
        nz = mask.nonzero()
        return CoordinateSelection(tuple(p.astype(np.intp) for p in nz), (len(nz[0]) if nz else 0,))
    if len(sel) != len(shape) or any(isinstance(s, slice) or s is Ellipsis for s in sel):
        raise IndexingError(
            f"vindex needs one integer or integer array per dimension ({len(shape)}) or a boolean mask of the "
            f"array's shape, got {_short(selection)}; use a.oindex[...] to mix slices and arrays"
        )
    try:
        arrays = np.broadcast_arrays(*[np.asarray(s) for s in sel])
    except ValueError as e:
        raise IndexingError(f"vindex index arrays cannot be broadcast together: {e}") from None
    out_shape = arrays[0].shape if arrays else ()
    points = tuple(_int_array(a.reshape(-1), n, axis) for axis, (a, n) in enumerate(zip(arrays, shape, strict=True)))
    return CoordinateSelection(points, tuple(out_shape))


def block_selection(selection: Any, grids: Sequence[DimGridLike], shape: Sequence[int]) -> tuple[slice, ...]:
    """The array region of ``blocks[selection]``: integers and unit-step slices over the chunk grid.

    Examples
    --------
    >>> from zarr_dask.spec.chunk_grid import RegularDimGrid
    >>> block_selection((1, slice(-2, None)), [RegularDimGrid(chunk_size=2, extent=5)] * 2, (5, 5))
    (slice(2, 4, None), slice(2, 5, None))
    """
    sel = _expand_ellipsis(_as_tuple(selection), len(shape))
    out: list[slice] = []
    for axis, (s, g, n) in enumerate(zip(sel, grids, shape, strict=True)):
        nblocks = len(g.chunk_range(0, n))
        if _is_int(s):
            i = operator.index(s)
            i = i + nblocks if i < 0 else i
            if not 0 <= i < nblocks:
                raise IndexingError(f"block index {operator.index(s)} is out of bounds for axis {axis} with {nblocks} blocks")
            start, stop = i, i + 1
        elif isinstance(s, slice):
            if s.step not in (None, 1):
                raise IndexingError(f"block selections take integers and slices with step 1; axis {axis} got {s!r}")
            start, stop = _block_slice(s, nblocks, axis)
        else:
            raise IndexingError(f"block selections take integers and slices; axis {axis} got {_short(s)}")
        if stop <= start:
            out.append(slice(0, 0))
        else:
            out.append(slice(g.start(start), min(n, g.start(stop - 1) + g.size(stop - 1))))
    return tuple(out)




def _block_slice(s: slice, nblocks: int, axis: int) -> tuple[int, int]:
    """The block range of a unit-step slice: negative ends count from the end once; a start outside the grid
    is out of bounds (zarr-python's ``BoundsCheckError``), not an empty selection; the stop is clipped."""
    try:
        start = 0 if s.start is None else operator.index(s.start)
        stop = nblocks if s.stop is None else operator.index(s.stop)
    except TypeError:
        raise IndexingError(f"block selections take integer slice bounds; axis {axis} got {s!r}") from None
    start = start + nblocks if start < 0 else start
    stop = stop + nblocks if stop < 0 else stop
    if nblocks and not 0 <= start < nblocks:
        raise IndexingError(
            f"block slice {s.start}:{s.stop} is out of bounds for axis {axis} with {nblocks} blocks: its start "
            f"must be a block in -{nblocks}..{nblocks - 1}"
        )
    return start, max(start, min(stop, nblocks))
