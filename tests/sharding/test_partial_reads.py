"""Partial reads of sharded arrays: request counts, batching, coalescing, whole-shard reads, every store."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_dask
from tests.sharding._helpers import RecordingStore, noise
from zarr_dask.codecs.shard_access import Coalescing, coalesce, inner_parts
from zarr_dask.core.indexing import chunk_projections, normalize_selection
from zarr_dask.errors import MetadataError
from zarr_dask.store import open_store

# 64 KiB inner chunks (16 x 4 of them per 4 MiB shard), stored uncompressed: sizes are exact
INNER, SHARD = (64, 256), (1024, 1024)


def big_array(store, location="end", shape=(2048, 1024), **kwargs):
    a = zarr_dask.create_array(
        store, shape=shape, dtype="f4", chunks=INNER, compressors=None,
        shards={"shape": SHARD, "index_location": location}, **kwargs,
    )
    data = noise(shape)
    a[:] = data
    return a, data


@pytest.mark.parametrize("location", ["start", "end"])
def test_one_inner_chunk_of_a_cold_shard_costs_two_requests(location):
    store = RecordingStore()
    a, data = big_array(store, location)
    store.reset()
    np.testing.assert_array_equal(a[70:100, 300:400], data[70:100, 300:400])
    assert store.counters.snapshot()["get_range"] == 2
    assert store.counters.snapshot()["get"] == 0
    index, payload = store.range_calls
    start, end = index[0][1:]
    assert (start, end) == ((0, 16 * 64 + 4) if location == "start" else (-(16 * 64 + 4), None))
    nbytes = 64 * 256 * 4
    assert len(payload) == 1
    # the data range holds one inner chunk (plus, for an end index, the index length to validate offsets)
    assert payload[0][2] - payload[0][1] == nbytes + (16 * 64 + 4 if location == "end" else 0)


@pytest.mark.parametrize("location", ["start", "end"])
def test_ten_adjacent_inner_chunks_of_one_shard_cost_two_requests(location):
    store = RecordingStore()
    a, data = big_array(store, location)
    store.reset()
    np.testing.assert_array_equal(a[0:640, 0:256], data[0:640, 0:256])  # inner chunks (0..9, 0)
    assert store.counters.snapshot()["get_range"] == 2
    assert store.counters.snapshot()["bytes_read"] < 4 * 2**20  # not the whole 4 MiB shard


def test_indexes_and_data_of_many_shards_in_one_batched_call_each():
    store = RecordingStore()
    a, data = big_array(store, shape=(4096, 2048))
    store.reset()
    dims = normalize_selection((slice(10, 3000, 700), slice(5, 2000, 900)), a.shape)
    projections = list(chunk_projections(dims, a._io.grids, a.shape))
    assert len({p.coords for p in projections}) == 6  # 3 x 2 shards
    out = np.empty(tuple(d.count for d in dims), dtype="f4")
    a._io.read_into(out, projections)
    np.testing.assert_array_equal(out, data[10:3000:700, 5:2000:900])
    assert len(store.range_calls) == 2 and not store.many_calls
    indexes, payloads = store.range_calls
    assert len(indexes) == 6 and len({r[0] for r in indexes}) == 6  # every index read once
    assert all(r[1] < 0 for r in indexes)
    # 15 inner chunks needed (5 rows x 3 columns); those less than 1 MiB apart share a request
    assert 6 <= len(payloads) < 15 and {r[0] for r in payloads} == {r[0] for r in indexes}


def test_a_covered_shard_is_fetched_whole_in_one_request():
    store = RecordingStore()
    a, data = big_array(store)
    store.reset()
    np.testing.assert_array_equal(a[0:1024, :], data[0:1024])
    assert store.counters.snapshot()["get_range"] == 1
    assert store.range_calls == [[("c/0/0", None, None)]]


def test_most_of_a_shard_is_fetched_whole():
    store = RecordingStore()
    a, data = big_array(store)
    store.reset()
    np.testing.assert_array_equal(a[0:1000, 3:1000], data[0:1000, 3:1000])  # every inner chunk, partly
    assert store.counters.snapshot()["get_range"] == 1


def test_small_shards_are_fetched_whole_when_the_rest_is_within_the_gap():
    store = RecordingStore()
    a = zarr_dask.create_array(store, shape=(64, 64), dtype="f4", chunks=(8, 8), shards=(64, 64))
    a[:] = 1.5
    store.reset()
    assert a[9, 9] == 1.5
    assert store.counters.snapshot()["get_range"] == 1


def test_missing_shard_and_empty_inner_chunks_read_as_fill():
    store = RecordingStore()
    a = zarr_dask.create_array(store, shape=(2048, 1024), dtype="f4", chunks=INNER, shards=SHARD,
                               fill_value=-1, compressors=None)
    a[0:64, 0:256] = 7
    store.reset()
    got = a[0:200, 0:300]
    expect = np.full((200, 300), -1, dtype="f4")
    expect[0:64, 0:256] = 7
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(a[1024:, :], -1)  # a shard that is not stored: one request, no data
    assert store.counters.snapshot()["get_range"] == 2 + 1


def test_coalescing_is_configurable():
    store = RecordingStore()
    big_array(store)
    a = zarr_dask.Array.open(store, coalescing=Coalescing(max_gap=0, whole_shard_fraction=1.0))
    store.reset()
    a[0:640, 0:256]
    # (0..9, 0) are stored at Morton positions 0-1, 4-5, 16-17, 20-21, 32-33: five runs without gaps
    assert store.counters.snapshot()["get_range"] == 1 + 5
    tight = zarr_dask.Array.open(store, coalescing=Coalescing(max_request=64 * 256 * 4))
    store.reset()
    tight[0:640, 0:256]
    assert store.counters.snapshot()["get_range"] == 1 + 10  # no merged request may exceed one inner chunk


def test_coalescing_validation_and_planning():
    with pytest.raises(MetadataError, match="max_gap"):
        Coalescing(max_gap=-1)
    with pytest.raises(MetadataError, match="whole_shard_fraction"):
        Coalescing(whole_shard_fraction=0)
    groups = coalesce([(0, 10), (15, 20), (100, 110), (108, 120)], Coalescing(max_gap=5, max_request=1000))
    assert [(g.start, g.end, g.members) for g in groups] == [(0, 20, [0, 1]), (100, 120, [2, 3])]
    groups = coalesce([(0, 10), (10, 20), (20, 30)], Coalescing(max_gap=5, max_request=20))
    assert [(g.start, g.end) for g in groups] == [(0, 20), (20, 30)]


def test_inner_parts_with_steps_and_edges():
    # shard of 12 (data 8 inside the array), inner 4: elements 1, 4, 7 (step 3) -> inner 0 and 1 only
    parts = inner_parts((slice(1, 8, 3),), (slice(0, 3),), (4,), (8,))
    assert [(p.coords, p.inner_sel, p.out_sel) for p in parts] == [
        ((0,), (slice(1, 2, 3),), (slice(0, 1),)),
        ((1,), (slice(0, 4, 3),), (slice(1, 3),)),
    ]
    full = inner_parts((slice(4, 7, 1),), (slice(0, 3),), (4,), (7,))
    assert full[0].complete and not full[0].inside  # covers every element inside the array


def test_every_store_kind_round_trips_with_partial_reads(any_store_url):
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    a = zarr_dask.create_array(store, shape=(300, 200), dtype="i4", chunks=(25, 40), shards=(100, 200),
                               fill_value=-5)
    data = np.arange(60000, dtype="i4").reshape(300, 200)
    a[:] = data
    a[130:170, 10:50] = -5  # one inner chunk back to fill
    data[130:170, 10:50] = -5
    np.testing.assert_array_equal(a[:], data)
    b = zarr_dask.Array.open(store, read_only=True, coalescing=Coalescing(max_gap=0, whole_shard_fraction=1.0))
    with b.store.counters.counting() as delta:
        np.testing.assert_array_equal(b[112:120, 45:75:3], data[112:120, 45:75:3])
    assert delta["get_range"] == 2  # index suffix + one inner chunk, on every kind of store
    np.testing.assert_array_equal(b[::7, ::-3], data[::7, ::-3])


SELECTION = st.one_of(
    st.integers(0, 40).map(lambda i: slice(i, None)),
    st.tuples(st.integers(-45, 45), st.integers(-45, 45), st.integers(1, 9)).map(lambda t: slice(*t)),
    st.tuples(st.integers(-45, 45), st.integers(-45, 45), st.integers(-9, -1)).map(lambda t: slice(*t)),
)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 37), st.integers(1, 29)),
    inner=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    per_shard=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    location=st.sampled_from(["start", "end"]),
    gap=st.sampled_from([0, 64, 1 << 20]),
    write=st.tuples(SELECTION, SELECTION),
    read=st.tuples(SELECTION, SELECTION),
)
def test_sharded_indexing_matches_numpy(shape, inner, per_shard, location, gap, write, read):
    store = zarr_dask.store.MemoryStore()
    shards = tuple(i * k for i, k in zip(inner, per_shard))
    a = zarr_dask.create_array(store, shape=shape, dtype="i2", chunks=inner,
                               shards={"shape": shards, "index_location": location}, fill_value=3)
    expect = np.full(shape, 3, dtype="i2")
    a[:] = expect
    value = np.arange(expect[write].size, dtype="i2").reshape(expect[write].shape)
    a[write] = value
    expect[write] = value
    b = zarr_dask.Array.open(store, coalescing=Coalescing(max_gap=gap, whole_shard_fraction=1.0))
    np.testing.assert_array_equal(b[read], expect[read])
    np.testing.assert_array_equal(b[...], expect)


@pytest.mark.parametrize("location", ["start", "end"])
def test_a_large_shard_on_a_local_store_is_read_in_pieces(location, monkeypatch):
    """Stores without batched I/O read a shard larger than LOCAL_SHARD_PIECE_BYTES piece by piece (its index,
    then each piece's byte range, decoded before the next is fetched), so a whole read never holds whole shards."""
    from zarr_dask.core import chunk_io

    monkeypatch.setattr(chunk_io, "LOCAL_SHARD_PIECE_BYTES", 1 << 20)  # 16 inner chunks of 64 KiB per piece
    store = RecordingStore()
    a, data = big_array(store, location)  # 2 shards of 4 MiB: 64 inner chunks each
    store.reset()
    np.testing.assert_array_equal(a[:], data)
    fetched = [r for call in store.range_calls for r in call]
    index = 64 * 16 + 4  # 64 inner chunks per shard, 16 bytes each, and a CRC32C
    indexes = [r for r in fetched if r[1:] in ((0, index), (-index, None))]
    payload = [r for r in fetched if r not in indexes]
    assert len(indexes) == len(payload) == 2 * 4  # 4 pieces per shard: an index read and one coalesced range each
    assert max(r[2] - r[1] for r in payload) <= (1 << 20) + index  # one piece (plus an end index's length)
    assert store.counters.snapshot()["get"] == 0  # never a whole shard
    # a shard within one piece keeps the whole-shard read (one request, no index first)
    monkeypatch.setattr(chunk_io, "LOCAL_SHARD_PIECE_BYTES", 8 << 20)
    store.reset()
    np.testing.assert_array_equal(a[:1024], data[:1024])
    assert len(store.range_calls) == 1 and len(store.range_calls[0]) == 1
