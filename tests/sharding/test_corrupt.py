"""Corrupt shards: bad checksum, truncated, entries past the end or overlapping the index -> ChunkDecodeError
naming the store, the node, the shard key and the problem, on partial reads, whole-shard reads and writes."""

from __future__ import annotations

import crc32c
import numpy as np
import pytest

import zarr_dask
from zarr_dask.codecs.shard_access import Coalescing
from zarr_dask.errors import ChunkDecodeError
from zarr_dask.store import MemoryStore

N = 4  # inner chunks per shard (2 x 2)
INDEX = 16 * N + 4
PARTIAL = Coalescing(max_gap=0, whole_shard_fraction=1.0)  # never read a shard whole unless it is covered


def make(location):
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(8, 8), dtype="i4", chunks=(4, 4),
                               shards={"shape": (8, 8), "index_location": location}, compressors=None)
    a[:] = np.arange(64, dtype="i4").reshape(8, 8)
    return store


def split(raw, location):
    return (raw[:INDEX], raw[INDEX:]) if location == "start" else (raw[-INDEX:], raw[:-INDEX])


def with_index(store, location, mutate):
    """Rewrite the index of shard c/0/0 (mutate the uint64 (4, 2) entries), with a valid checksum."""
    index_bytes, payload = split(store.get("c/0/0"), location)
    entries = np.frombuffer(index_bytes[:-4], "<u8").reshape(N, 2).copy()
    mutate(entries, len(payload) + INDEX)
    body = entries.tobytes()
    index_bytes = body + crc32c.crc32c(body).to_bytes(4, "little")
    store.set("c/0/0", index_bytes + payload if location == "start" else payload + index_bytes)


def reads(store):
    """(partial read of inner chunk (0, 0), whole-shard read, partial write)."""
    partial = zarr_dask.Array.open(store, coalescing=PARTIAL)
    return [lambda: partial[0:2, 0:2], lambda: partial[:, :], lambda: partial.__setitem__((0, 0), 5)]


def check(store, match):
    for op in reads(store):
        with pytest.raises(ChunkDecodeError, match=match) as info:
            op()
        text = str(info.value)
        assert "shard 'c/0/0'" in text and store.url in text and "node '/'" in text


@pytest.mark.parametrize("location", ["start", "end"])
def test_bad_checksum(location):
    store = make(location)
    raw = bytearray(store.get("c/0/0"))
    pos = 3 if location == "start" else len(raw) - INDEX + 3
    raw[pos] ^= 0xFF
    store.set("c/0/0", bytes(raw))
    check(store, "checksum mismatch")


@pytest.mark.parametrize("location", ["start", "end"])
def test_truncated_shard(location):
    store = make(location)
    store.set("c/0/0", store.get("c/0/0")[:INDEX - 10])
    check(store, "truncated")


@pytest.mark.parametrize("location", ["start", "end"])
def test_offsets_past_the_end(location):
    store = make(location)

    def mutate(entries, size):
        entries[0] = (size + 100, 64)  # inner chunk (0, 0)

    with_index(store, location, mutate)
    check(store, "past the end")


@pytest.mark.parametrize("location", ["start", "end"])
def test_entry_overlapping_the_index(location):
    store = make(location)

    def mutate(entries, size):
        entries[0] = ((INDEX - 8, 64) if location == "start" else (size - INDEX - 8, 64))

    with_index(store, location, mutate)
    check(store, "overlapping the")


@pytest.mark.parametrize("location", ["start", "end"])
def test_absurd_sizes_do_not_allocate(location):
    store = make(location)

    def mutate(entries, size):
        entries[0] = (0 if location == "end" else INDEX, 2**63)

    with_index(store, location, mutate)
    check(store, "past the end|outside")


def test_corrupt_inner_chunk_names_the_inner_chunk():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(8, 8), dtype="f8", chunks=(4, 4), shards=(8, 8))
    a[:] = np.linspace(0, 1, 64).reshape(8, 8)
    raw = bytearray(store.get("c/0/0"))
    raw[5] ^= 0x55  # inside the first payload (inner chunk (0, 0), zstd)
    store.set("c/0/0", bytes(raw))
    with pytest.raises(ChunkDecodeError, match=r"shard 'c/0/0': inner chunk \(0, 0\)"):
        zarr_dask.Array.open(store, coalescing=PARTIAL)[0, 0]
    np.testing.assert_array_equal(a[4:, 4:], np.linspace(0, 1, 64).reshape(8, 8)[4:, 4:])  # the rest reads
