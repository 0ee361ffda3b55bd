"""``create_array(..., shards=...)``: the metadata written, the forms ``shards`` takes, and refused input."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from zarr_dask.core.create import build_array_metadata
from zarr_dask.errors import MetadataError
from zarr_dask.store import MemoryStore

LE = {"name": "bytes", "configuration": {"endian": "little"}}
INDEX = [LE, {"name": "crc32c"}]


def codecs_of(store):
    return json.loads(store.get("zarr.json"))["codecs"]


def test_shards_write_one_sharding_codec_as_zarr_python_does():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(100, 100), dtype="f4", chunks=(10, 10), shards=(50, 50))
    assert json.loads(store.get("zarr.json"))["chunk_grid"] == {
        "name": "regular", "configuration": {"chunk_shape": [50, 50]}
    }
    assert codecs_of(store) == [{
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [10, 10],
            "codecs": [LE, {"name": "zstd", "configuration": {"level": 0, "checksum": False}}],
            "index_codecs": INDEX,
            "index_location": "end",
        },
    }]
    assert (a.chunks, a.shards, a.cdata_shape, a.nchunks) == ((10, 10), (50, 50), (10, 10), 100)
    a[:] = 1
    assert a.nchunks_initialized == 100
    assert "Shard shape         : (50, 50)" in repr(a.info)


def test_shards_as_a_dict_with_index_location_and_filters_inside():
    store = MemoryStore()
    zarr_dask.create_array(store, shape=(8, 6), dtype="i2", chunks=(4, 3),
                           shards={"shape": (8, 6), "index_location": "start"},
                           filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}], compressors="gzip")
    (codec,) = codecs_of(store)
    conf = codec["configuration"]
    assert conf["index_location"] == "start"
    assert [c["name"] for c in conf["codecs"]] == ["transpose", "bytes", "gzip"]


def test_minus_one_is_the_whole_axis_in_whole_inner_chunks():
    a = zarr_dask.create_array(MemoryStore(), shape=(10, 7), dtype="u1", chunks=(4, 7), shards=(-1, 7))
    assert a.shards == (12, 7)


def test_auto_shards_and_auto_inner_chunks():
    a = zarr_dask.create_array(MemoryStore(), shape=(10000, 10000), dtype="f4", chunks=(100, 100), shards="auto")
    assert a.chunks == (100, 100)
    shard_bytes = np.prod(a.shards) * 4
    assert 32 * 2**20 <= shard_bytes <= 64 * 2**20 and all(s % 100 == 0 for s in a.shards)
    small = zarr_dask.create_array(MemoryStore(), shape=(1000, 1000), dtype="f4", chunks=(10, 10), shards="auto")
    assert small.shards == (1000, 1000)  # the whole (4 MB) array in one shard
    inner = zarr_dask.create_array(MemoryStore(), shape=(10000, 10000), dtype="f4", shards=(1000, 1000))
    assert all(s % c == 0 for s, c in zip(inner.shards, inner.chunks)) and np.prod(inner.chunks) * 4 <= 2**20
    both = zarr_dask.create_array(MemoryStore(), shape=(4096, 4096), dtype="f8", shards="auto")
    assert np.prod(both.chunks) * 8 <= 2**20 and np.prod(both.shards) * 8 <= 64 * 2**20


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shards": (10, 10), "chunks": (4, 4)}, "shard size 10 along dimension 0 is not a multiple of the inner chunk"),
        ({"shards": (10, 10), "chunks": (5, 5), "zarr_format": 2}, "Zarr v2 has no sharding"),
        ({"shards": (10,), "chunks": (5, 5)}, "one entry per dimension"),
        ({"shards": {"shape": (10, 10), "index_location": "middle"}}, "index_location"),
        ({"shards": (10, 10), "chunks": ((5, 5), (10,))}, "must be regular"),
    ],
)
def test_refused(kwargs, match):
    with pytest.raises(MetadataError, match=match):
        build_array_metadata(shape=(20, 10), dtype="i4", **kwargs)


def test_open_refuses_shards_that_are_not_multiples_of_the_inner_chunks():
    store = MemoryStore()
    zarr_dask.create_array(store, shape=(20, 10), dtype="i4", chunks=(5, 5), shards=((10, 10), (10,)))
    doc = json.loads(store.get("zarr.json"))
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = [[10, 6, 4], [10]]
    store.set("zarr.json", json.dumps(doc).encode())
    with pytest.raises(MetadataError, match=r"shard size 4 along dimension 0.*node '/'|node '/'.*shard size 4"):
        zarr_dask.open_array(store)


def test_group_create_array_takes_shards():
    g = zarr_dask.create_group(MemoryStore())
    a = g.create_array("x", shape=(6, 6), dtype="i1", chunks=(3, 3), shards=(6, 6))
    a[:] = 2
    assert g["x"].shards == (6, 6) and (g["x"][:] == 2).all()
