"""zarr-python's indexing on Array: oindex, vindex, masks, blocks and the __getitem__ dispatch, against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_dask
from zarr_dask.codecs.shard_access import Coalescing
from zarr_dask.core import indexing_fancy as fancy
from zarr_dask.errors import IndexingError, ReadOnlyError, ShapeMismatchError
from zarr_dask.store import MemoryStore

# ------------------------------------------------------------------------------------ strategies


@st.composite
def arrays(draw: st.DrawFn) -> tuple[zarr_dask.Array, np.ndarray[Any, Any]]:
    """A stored array (v2 or v3, chunked or sharded) and the NumPy data written into it."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, 4)) for _ in shape)
    fmt = draw(st.sampled_from([2, 3, 3]))
    shards = None
    if fmt == 3 and draw(st.booleans()):
        shards = tuple(c * draw(st.integers(1, 3)) for c in chunks)
    a = zarr_dask.create_array(MemoryStore(), shape=shape, dtype="i4", chunks=chunks, shards=shards, zarr_format=fmt, fill_value=-7)
    data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
    # leave some chunks unwritten: they read as the fill value
    data[(slice(None, shape[0] // 2),)] = -7
    a[...] = data
    return a, data


def _dim_index(draw: Any, n: int) -> Any:
    kind = draw(st.sampled_from(["int", "slice", "ints", "bools"]))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "slice":
        start = draw(st.none() | st.integers(-n - 1, n + 1))
        stop = draw(st.none() | st.integers(-n - 1, n + 1))
        step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
        return slice(start, stop, step)
    if kind == "ints":
        values = draw(st.lists(st.integers(-n, n - 1), max_size=6))
        return np.array(values, dtype=draw(st.sampled_from(["i8", "i4", "u2"])) if min(values, default=0) >= 0 else "i8")
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)


def _numpy_orthogonal(sel: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The NumPy ``np.ix_`` index of an orthogonal selection, and which axes to drop."""
    idx, keep = [], []
    for s, n in zip(sel, shape):
        positions = np.arange(n)[s]
        idx.append(np.atleast_1d(positions))
        keep.append(0 if np.ndim(positions) == 0 else slice(None))
    return np.ix_(*idx), tuple(keep)


# ------------------------------------------------------------------------------------ oindex
@settings(max_examples=150)
@given(st.data())
def test_oindex_reads_and_writes_like_numpy(data: st.DataObject) -> None:
    a, ref = data.draw(arrays())
    sel = tuple(_dim_index(data.draw, n) for n in ref.shape)
    ix, keep = _numpy_orthogonal(sel, ref.shape)
    expected = ref[ix][keep]
    np.testing.assert_array_equal(a.oindex[sel], expected)
    np.testing.assert_array_equal(a.get_orthogonal_selection(sel), expected)
    value = np.arange(expected.size, dtype="i4").reshape(expected.shape) + 1000
    a.oindex[sel] = value
    view = ref[ix]
    view[keep] = value
    ref[ix] = view
    np.testing.assert_array_equal(a[...], ref)


@settings(max_examples=150)
@given(st.data())
def test_vindex_reads_and_writes_like_numpy(data: st.DataObject) -> None:
    a, ref = data.draw(arrays())
    npoints = data.draw(st.integers(0, 12))
    out_shape = data.draw(st.sampled_from([(npoints,), (1, npoints), (npoints, 1)]))
    sel = []
    for n in ref.shape:
        if data.draw(st.integers(0, 4)) == 0:
            sel.append(data.draw(st.integers(-n, n - 1)))
        else:
            points = data.draw(st.lists(st.integers(-n, n - 1), min_size=npoints, max_size=npoints))
            sel.append(np.array(points, dtype=np.intp).reshape(out_shape))
    sel_t = tuple(sel)
    if not any(isinstance(s, np.ndarray) for s in sel_t):
        sel_t = (np.array([sel_t[0]]), *sel_t[1:])
    expected = ref[sel_t]
    np.testing.assert_array_equal(a.vindex[sel_t], expected)
    np.testing.assert_array_equal(a[sel_t], expected)  # the dispatch: integer arrays everywhere -> vindex
    value = np.arange(expected.size, dtype="i4").reshape(expected.shape) - 500
    a.vindex[sel_t] = value
    ref[sel_t] = value  # repeated points: the last value wins in both
    np.testing.assert_array_equal(a[...], ref)


@settings(max_examples=100)
@given(st.data())
def test_masks_read_and_write_like_numpy(data: st.DataObject) -> None:
    a, ref = data.draw(arrays())
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=ref.size, max_size=ref.size)), dtype=bool).reshape(ref.shape)
    np.testing.assert_array_equal(a[mask], ref[mask])
    np.testing.assert_array_equal(a.vindex[mask], ref[mask])
    np.testing.assert_array_equal(a.get_mask_selection(mask), ref[mask])
    a[mask] = 99
    ref[mask] = 99
    np.testing.assert_array_equal(a[...], ref)
    a.set_mask_selection(~mask, np.arange((~mask).sum()))
    ref[~mask] = np.arange((~mask).sum())
    np.testing.assert_array_equal(a[...], ref)


@settings(max_examples=60)
@given(st.data())
def test_blocks_are_storage_units(data: st.DataObject) -> None:
    a, ref = data.draw(arrays())
    units = a.shards or a.chunks
    sel = []
    for n, u in zip(ref.shape, units):
        nb = -(-n // u)
        if data.draw(st.booleans()):
            i = data.draw(st.integers(-nb, nb - 1))
            i = i + nb if i < 0 else i
            sel.append((i, slice(i * u, (i + 1) * u)))
        else:
            lo = data.draw(st.integers(0, nb - 1))  # a start past the grid is out of bounds (zarr-python)
            hi = data.draw(st.integers(lo, nb))
            sel.append((slice(lo, hi), slice(lo * u, hi * u)))
    block_sel = tuple(s for s, _ in sel)
    region = tuple(r for _, r in sel)
    np.testing.assert_array_equal(a.blocks[block_sel], ref[region])
    a.blocks[block_sel] = 5
    ref[region] = 5
    np.testing.assert_array_equal(a[...], ref)


# ------------------------------------------------------------------------------------ dispatch & errors
def test_getitem_dispatch_follows_zarr_python() -> None:
    ref = np.arange(20).reshape(4, 5)
    a = zarr_dask.create_array(MemoryStore(), shape=(4, 5), dtype="i8", chunks=(2, 2))
    a[:] = ref
    np.testing.assert_array_equal(a[[0, 2]], ref[[0, 2]])  # one array: orthogonal along axis 0
    np.testing.assert_array_equal(a[[0, 2], 1:3], ref[[0, 2], 1:3])
    np.testing.assert_array_equal(a[1, [0, 3]], ref[1, [0, 3]])
    np.testing.assert_array_equal(a[[0, 2], [1, 1]], ref[[0, 2], [1, 1]])  # one array per axis: points
    np.testing.assert_array_equal(a[[True, False, True, False], [0, 1]], ref[np.ix_([0, 2], [0, 1])])  # bools: outer
    np.testing.assert_array_equal(a[np.array([True, False, True, True])], ref[[0, 2, 3]])
    np.testing.assert_array_equal(a[..., [4, 0]], ref[..., [4, 0]])
    assert a.oindex[1, 2].shape == () and a.oindex[1, 2] == 7
    with pytest.raises(IndexingError, match="oindex"):
        zarr_dask.create_array(MemoryStore(), shape=(2, 2, 2), dtype="i1", chunks=(1, 1, 1))[[0, 1], :, [0, 1]]


def test_errors_name_the_array_and_the_problem() -> None:
    a = zarr_dask.create_array("memory://fancy-errors", shape=(4, 5), dtype="i4", chunks=(2, 2))
    with pytest.raises(IndexingError, match=r"memory://fancy-errors.*index 5 is out of bounds for axis 0 with size 4"):
        a.oindex[[5]]
    with pytest.raises(IndexError, match="boolean index of shape"):
        a.oindex[[True, False]]
    with pytest.raises(IndexingError, match="cannot be broadcast"):
        a.vindex[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexingError, match="one integer or integer array per dimension"):
        a.vindex[[0, 1], :]
    with pytest.raises(ShapeMismatchError, match="Attempting to set a selection of shape"):
        a.oindex[[0, 1], [0]] = [1, 2, 3]
    with pytest.raises(IndexingError, match="step 1"):
        a.blocks[::2]
    with pytest.raises(IndexingError, match="out of bounds"):
        a.blocks[2]
    ro = zarr_dask.open_array("memory://fancy-errors", mode="r")
    with pytest.raises(ReadOnlyError):
        ro.vindex[[0], [0]] = 1


def test_reads_fetch_only_the_chunks_touched_in_one_batch() -> None:
    a = zarr_dask.create_array(MemoryStore(), shape=(100, 100), dtype="f8", chunks=(10, 10))
    a[:] = np.arange(10_000.0).reshape(100, 100)
    with a.store.counters.counting() as delta:
        got = a.vindex[[5, 55, 95, 5], [5, 55, 95, 6]]
    np.testing.assert_array_equal(got, [505.0, 5555.0, 9595.0, 506.0])
    assert delta["get"] == 3  # three chunks hold the four points
    with a.store.counters.counting() as delta:
        a.oindex[[0, 99], [3, 4, 50]]
    assert delta["get"] == 4  # 2 chunk rows x 2 chunk columns


def test_sharded_reads_fetch_only_the_inner_chunks_touched() -> None:
    a = zarr_dask.create_array(MemoryStore(), shape=(64, 64), dtype="f8", chunks=(8, 8), shards=(64, 64))
    data = np.random.default_rng(0).standard_normal((64, 64))
    a[:] = data
    reader = zarr_dask.Array(a.store, "", a.metadata, coalescing=Coalescing(max_gap=0))
    with a.store.counters.counting() as delta:
        got = reader.vindex[[0, 63, 1], [0, 63, 2]]
    np.testing.assert_array_equal(got, data[[0, 63, 1], [0, 63, 2]])
    # the shard index (64 entries of 16 bytes + a checksum), then just the two inner chunks holding the points
    # (512 bytes each before compression) and, past the last one, an index's length (the end-of-shard check);
    # the whole shard is 33 KiB
    index = 2 * (64 * 16 + 4)
    assert index + 2 * 512 <= delta["bytes_read"] < index + 2 * 600
    with a.store.counters.counting() as delta:
        reader.oindex[[0, 63], 0:3]
    assert index + 2 * 512 <= delta["bytes_read"] < index + 2 * 600


def test_rectilinear_grid_and_object_dtype() -> None:
    a = zarr_dask.create_array(MemoryStore(), shape=(10,), dtype="i2", chunks=((3, 3, 4),), zarr_format=3)
    a[:] = np.arange(10)
    np.testing.assert_array_equal(a[[9, 0, 3, 2]], [9, 0, 3, 2])
    a[[2, 3]] = [-1, -2]
    np.testing.assert_array_equal(a[:5], [0, 1, -1, -2, 4])
    s = zarr_dask.create_array(MemoryStore(), shape=(5,), dtype=str, chunks=(2,))
    s[:] = ["a", "bb", "ccc", "d", "e"]
    assert list(s[[4, 1]]) == ["e", "bb"]
    s.vindex[[0, 4]] = ["x", "yy"]
    assert list(s[:]) == ["x", "bb", "ccc", "d", "yy"]


def test_writes_keep_untouched_elements_and_skip_reading_covered_chunks() -> None:
    a = zarr_dask.create_array(MemoryStore(), shape=(8, 8), dtype="u1", chunks=(4, 4), fill_value=0)
    a[:] = 1
    with a.store.counters.counting() as delta:
        a.oindex[np.arange(4), [4, 5, 6, 7]] = 2  # covers chunk (0, 1) completely: no read
    assert delta["get"] == 0
    expected = np.ones((8, 8), "u1")
    expected[:4, 4:] = 2
    np.testing.assert_array_equal(a[:], expected)
    a.vindex[np.nonzero(expected == 2)] = 0  # back to the fill value: the chunk is deleted
    assert a.nchunks_initialized == 3


def test_classify_examples() -> None:
    assert fancy.classify((slice(None), 3), 2) == "basic"
    assert fancy.classify(np.ones((2, 2), bool), 2) == "vindex"
    assert fancy.classify(([0], 1), 2) == "vindex"
    assert fancy.classify(([0], [True, False]), 2) == "oindex"
    assert fancy.classify([], 1) == "vindex"
