"""Rectilinear (irregular) chunk grids end to end: create, read, write, indexing, resize, rectilinear shards."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_dask
from zarr_dask.errors import MetadataError
from zarr_dask.spec.chunk_grid import RectilinearChunkGrid, RegularChunkGrid
from zarr_dask.store import MemoryStore


def grid_json(store, path="zarr.json"):
    return json.loads(store.get(path))["chunk_grid"]


def test_create_irregular_chunks_and_keys():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(35, 100), dtype="i4", chunks=((10, 20, 5), (100,)))
    assert grid_json(store) == {
        "name": "rectilinear",
        "configuration": {"kind": "inline", "chunk_shapes": [[10, 20, 5], [100]]},
    }
    data = np.arange(3500, dtype="i4").reshape(35, 100)
    a[:] = data
    assert sorted(store.list_prefix("c")) == ["c/0/0", "c/1/0", "c/2/0"]
    assert len(store.get("c/1/0")) > 0
    np.testing.assert_array_equal(a[8:33:4, ::7], data[8:33:4, ::7])
    assert a.chunks == (20, 100) and a.shards is None
    assert a.read_chunk_sizes == a.write_chunk_sizes == ((10, 20, 5), (100,))
    assert a._io.write_unit_shape == ((10, 20, 5), (100,))
    assert a.cdata_shape == (3, 1) and a.nchunks == 3


def test_run_length_grid_is_written_compressed_and_read_back():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(12, 9), dtype="u1", chunks=((2, 2, 2, 6), (3, 3, 3)))
    assert grid_json(store)["configuration"]["chunk_shapes"] == [[[2, 3], 6], [[3, 3]]]
    a[:] = 1
    b = zarr_dask.open_array(store)
    assert b.metadata.chunk_grid == RectilinearChunkGrid(chunk_shapes=((2, 2, 2, 6), (3, 3, 3)))
    np.testing.assert_array_equal(b[:], 1)


def test_resize_appends_one_edge_and_shrinking_keeps_edges():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(35, 4), dtype="i4", chunks=((10, 20, 5), (4,)), fill_value=-1)
    data = np.arange(140, dtype="i4").reshape(35, 4)
    a[:] = data
    a.resize(42, 4)
    assert a.metadata.chunk_grid.chunk_shapes == ((10, 20, 5, 7), (4,))
    a[35:] = 9
    np.testing.assert_array_equal(a[:35], data)
    np.testing.assert_array_equal(a[35:], 9)
    a.resize(12, 4)  # shrink: edges stay, chunks beyond are deleted, the cut chunk is reset past the edge
    assert a.metadata.chunk_grid.chunk_shapes == ((10, 20, 5, 7), (4,))
    assert sorted(store.list_prefix("c")) == ["c/0/0", "c/1/0"]
    a.resize(50, 4)
    assert a.metadata.chunk_grid.chunk_shapes == ((10, 20, 5, 7, 8), (4,))
    expect = np.full((50, 4), -1, dtype="i4")
    expect[:12] = data[:12]
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expect)


def test_append_along_a_rectilinear_axis_makes_one_chunk_per_append():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(31, 3), dtype="f4", chunks=((31,), (3,)))
    for days in (28, 31, 30):
        a.append(np.full((days, 3), days, dtype="f4"))
    assert a.metadata.chunk_grid.chunk_shapes == ((31, 28, 31, 30), (3,))
    assert a.shape == (120, 3)
    np.testing.assert_array_equal(a[31:59, 0], 28)


def test_regular_dimension_of_a_rectilinear_grid_never_changes_on_resize():
    g = RectilinearChunkGrid(chunk_shapes=((3, 4), 5))
    assert g.resized((20, 100)).chunk_shapes == ((3, 4, 13), 5)
    assert RegularChunkGrid(chunk_shape=(2,)).resized((99,)) == RegularChunkGrid(chunk_shape=(2,))


def test_rectilinear_shards():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(35, 8), dtype="i4", chunks=(5, 4), shards=((10, 20, 5), (8,)))
    assert a.chunks == (5, 4) and a.shards == (20, 8)
    assert a.write_chunk_sizes == ((10, 20, 5), (8,))
    assert a.read_chunk_sizes == ((5,) * 7, (4, 4))
    assert a.cdata_shape == (7, 2)
    data = np.arange(280, dtype="i4").reshape(35, 8)
    a[:] = data
    a[12:14, 1:7] = 0
    data[12:14, 1:7] = 0
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(a[3:33:4, 1::3], data[3:33:4, 1::3])
    assert a.nchunks_initialized == 14  # 2 + 4 + 1 shards' inner chunks x 2
    a.resize(43, 8)  # growth of 8 rounded up to whole inner chunks
    assert a.metadata.chunk_grid.chunk_shapes == ((10, 20, 5, 10), (8,))
    a[35:] = 4
    np.testing.assert_array_equal(a[35:], 4)


def test_rectilinear_shards_must_be_multiples_of_the_inner_chunks():
    with pytest.raises(MetadataError, match="shard size 10 along dimension 0 is not a multiple of the inner chunk"):
        zarr_dask.create_array(MemoryStore(), shape=(35, 8), dtype="i4", chunks=(4, 4), shards=((10, 20, 5), (8,)))


def test_edges_must_cover_the_array():
    with pytest.raises(MetadataError, match="sums to 30, less than the array length 35"):
        zarr_dask.create_array(MemoryStore(), shape=(35,), dtype="i4", chunks=((10, 20),))


EDGES = st.lists(st.integers(1, 7), min_size=1, max_size=6)


@settings(max_examples=30, deadline=None)
@given(
    edges0=EDGES,
    edges1=EDGES,
    over=st.integers(0, 3),
    write=st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 4)),
    read=st.tuples(st.integers(-40, 40), st.integers(-40, 40), st.sampled_from([1, 2, 3, -1, -2])),
)
def test_rectilinear_indexing_matches_numpy(edges0, edges1, over, write, read):
    shape = (max(1, sum(edges0) - over), sum(edges1))
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=shape, dtype="i8", chunks=(tuple(edges0), tuple(edges1)), fill_value=-7)
    expect = np.full(shape, -7, dtype="i8")
    sel = (slice(*write), slice(None, None, write[2]))
    value = np.arange(expect[sel].size, dtype="i8").reshape(expect[sel].shape)
    a[sel] = value
    expect[sel] = value
    rsel = (slice(*read), slice(read[1], None))
    np.testing.assert_array_equal(a[rsel], expect[rsel])
    np.testing.assert_array_equal(a[...], expect)
