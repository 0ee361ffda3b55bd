"""Writes into sharded arrays: whole shards without reads, read-merge-write of partial shards, empty shards."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask
from tests.sharding._helpers import RecordingStore, noise
from zarr_dask.codecs.sharding import EMPTY
from zarr_dask.core.indexing import chunk_projections, normalize_selection
from zarr_dask.store import MemoryStore


def index_of(store, key, n):
    raw = store.get(key)
    return np.frombuffer(raw[-(16 * n + 4) : -4], "<u8").reshape(n, 2)


def test_whole_shards_are_written_without_reading_one_set_each():
    store = RecordingStore()
    a = zarr_dask.create_array(store, shape=(40, 30), dtype="f8", chunks=(5, 5), shards=(20, 15))
    store.reset()
    a[:] = noise((40, 30), "f8")
    snap = store.counters.snapshot()
    assert snap["get"] == 0 and snap["get_range"] == 0
    assert snap["set"] == 4 and sorted(store.list_prefix("c")) == ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]


def test_a_partial_shard_is_read_merged_and_rewritten_once():
    store = RecordingStore()
    a = zarr_dask.create_array(store, shape=(40, 30), dtype="i4", chunks=(5, 5), shards=(20, 15), fill_value=-1)
    data = np.arange(1200, dtype="i4").reshape(40, 30)
    a[:] = data
    store.reset()
    a[3:12, 4:9] = 0
    data[3:12, 4:9] = 0
    snap = store.counters.snapshot()
    assert snap["get"] == 1 and snap["set"] == 1  # shard c/0/0: one read, one write
    np.testing.assert_array_equal(a[:], data)


def test_untouched_inner_chunks_are_copied_as_bytes():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(8, 8), dtype="u2", chunks=(4, 4), shards=(8, 8), compressors=None)
    a[:] = 1
    before = store.get("c/0/0")
    a[0, 0] = 2
    after = store.get("c/0/0")
    # Morton order (0,0) (1,0) (0,1) (1,1): only the first payload changed
    assert after[32:128] == before[32:128] and after[:32] != before[:32]


def test_inner_chunks_equal_to_fill_are_not_stored_and_empty_shards_are_deleted():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(8, 8), dtype="u2", chunks=(4, 4), shards=(8, 8), fill_value=7)
    a[:4, :4] = 1
    assert [tuple(e) for e in index_of(store, "c/0/0", 4)][1:] == [(EMPTY, EMPTY)] * 3
    a[:4, :4] = 7  # the only stored inner chunk goes back to fill: the shard goes away
    assert store.get("c/0/0") is None
    a[:] = 7  # a complete write of fill into a missing shard stores nothing
    assert store.list_prefix("c") == []
    np.testing.assert_array_equal(a[:], 7)


def test_write_empty_chunks_stores_every_inner_chunk_written():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(8, 8), dtype="u2", chunks=(4, 4), shards=(8, 8), fill_value=7,
                               write_empty_chunks=True)
    a[:] = 7
    assert all(e[0] != EMPTY for e in index_of(store, "c/0/0", 4))


def test_edge_shards_and_inner_chunks_outside_the_array():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(10, 7), dtype="i8", chunks=(3, 2), shards=(6, 4), fill_value=0)
    data = np.arange(1, 71, dtype="i8").reshape(10, 7)
    a[:] = data
    np.testing.assert_array_equal(a[:], data)
    # shard (1, 1) covers rows 6..11, cols 4..7: inner chunks at row 9..11 / col 6..7 overhang the array
    a[8:, 5:] = -1
    data[8:, 5:] = -1
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(zarr_dask.open_array(store)[6:, 4:], data[6:, 4:])


def test_write_from_contract_with_projections_over_the_shard_grid():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(12, 12), dtype="f4", chunks=(3, 3), shards=(6, 6))
    dims = normalize_selection((slice(2, 11), slice(0, 12, 2)), a.shape)
    projections = list(chunk_projections(dims, a._io.grids, a.shape))
    assert {p.coords for p in projections} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    value = np.arange(9 * 6, dtype="f4").reshape(9, 6)
    a._io.write_from(value, projections)
    expect = np.zeros((12, 12), dtype="f4")
    expect[2:11, 0:12:2] = value
    np.testing.assert_array_equal(a[:], expect)
    assert a._io.write_unit_shape == (6, 6)


def test_strings_in_shards():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(5, 6), dtype=str, chunks=(2, 3), shards=(4, 6))
    data = np.array([[f"s{i}{j}" * (i % 3) for j in range(6)] for i in range(5)], dtype=object)
    a[:] = data
    a[1:3, 2:5] = "x"
    data[1:3, 2:5] = "x"
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(a[::2, 1::2], data[::2, 1::2])


def test_nested_sharding():
    store = MemoryStore()
    nested = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "start",
        },
    }
    a = zarr_dask.create_array(store, shape=(16, 16), dtype="i4", chunks=(4, 4), shards=(8, 16),
                               serializer=nested, compressors=None)
    data = np.arange(256, dtype="i4").reshape(16, 16)
    a[:] = data
    a[5:7, 1:13] = -3
    data[5:7, 1:13] = -3
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], data)
    np.testing.assert_array_equal(a[3:14:3, ::5], data[3:14:3, ::5])


def test_codecs_around_the_sharding_codec_fall_back_to_whole_shards():
    store = RecordingStore()
    codecs = [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end"}},
    ]
    from zarr_dask.spec import ArrayMetadataV3, data_type_from_numpy
    from zarr_dask.spec.chunk_grid import RegularChunkGrid
    from zarr_dask.spec.chunk_keys import DefaultChunkKeyEncoding

    dt = data_type_from_numpy(np.dtype("i2"), zarr_format=3)
    meta = ArrayMetadataV3(shape=(8, 6), data_type=dt, chunk_grid=RegularChunkGrid(chunk_shape=(4, 6)),
                           chunk_key_encoding=DefaultChunkKeyEncoding(separator="/"),
                           fill_value=np.zeros((), "i2"), codecs=tuple(codecs), attributes={})
    a = zarr_dask.Array(store, "", meta)
    # sharded (the keys hold shards: zarr_dask.spec.layout), read and written as whole shards; the public
    # attributes answer as zarr-python's (shards only when sharding_indexed is the whole chain)
    assert a._io.sharding is None and a.shards is None and a.chunks == (4, 6) and a.write_chunk_sizes == ((4, 4), (6,))
    data = np.arange(48, dtype="i2").reshape(8, 6)
    a[:] = data
    a[1:3, 1:4] = 9
    data[1:3, 1:4] = 9
    store.reset()
    np.testing.assert_array_equal(a[1:3, :], data[1:3])
    assert store.counters.snapshot()["get"] == 1  # whole shard


@pytest.mark.parametrize("location", ["start", "end"])
def test_concurrent_batches_of_one_write(location):
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(64, 64), dtype="f4", chunks=(8, 8),
                               shards={"shape": (16, 32), "index_location": location})
    data = noise((64, 64))
    a._io.write(normalize_selection(Ellipsis, a.shape), data, threads=4)
    np.testing.assert_array_equal(a._io.read(normalize_selection(Ellipsis, a.shape), threads=4), data)


def test_resize_a_sharded_array_resets_the_cut_shards():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(20, 20), dtype="i2", chunks=(2, 5), shards=(8, 10), fill_value=-1)
    data = np.arange(400, dtype="i2").reshape(20, 20)
    a[:] = data
    a.resize(5, 20)  # shard row 0 is cut at 5, rows 1 and 2 go away
    assert sorted(store.list_prefix("c")) == ["c/0/0", "c/0/1"]
    a.resize(20, 20)
    expect = np.full((20, 20), -1, dtype="i2")
    expect[:5] = data[:5]
    np.testing.assert_array_equal(a[:], expect)
    a.resize(5, 20)
    a[:] = -1  # everything back to fill: the shards go away
    a.resize(1, 1)
    assert store.list_prefix("c") == []
