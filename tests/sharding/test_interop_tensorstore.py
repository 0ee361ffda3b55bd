"""Interop with tensorstore's ``zarr3`` driver (test-only oracle) for sharded arrays, both directions."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask
from zarr_dask.codecs.shard_access import Coalescing

ts = pytest.importorskip("tensorstore", reason="tensorstore is a test extra (not installable on this Python?)")
pytestmark = pytest.mark.oracle

LE = {"name": "bytes", "configuration": {"endian": "little"}}
SHAPE, SHARDS, INNER = (21, 18), (6, 8), (3, 2)


def sharding(location, inner_codecs):
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(INNER),
            "codecs": inner_codecs,
            "index_codecs": [LE, {"name": "crc32c"}],
            "index_location": location,
        },
    }


def ts_open(path, **kwargs):
    return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, **kwargs).result()


def sample():
    data = np.arange(np.prod(SHAPE), dtype="<f8").reshape(SHAPE) / 7
    data[6:12, 8:16] = 0  # a shard of fill values
    return data


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("compressed", [False, True], ids=["bytes", "zstd"])
def test_tensorstore_writes_we_read(tmp_path, location, compressed):
    inner = [LE, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}] if compressed else [LE]
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "t.zarr")},
        "metadata": {
            "shape": list(SHAPE),
            "data_type": "float64",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(SHARDS)}},
            "codecs": [sharding(location, inner)],
            "fill_value": 0,
        },
        "create": True,
    }
    t = ts.open(spec).result()
    data = sample()
    t[...] = data
    t[2:5, 3:9] = 0.5
    data[2:5, 3:9] = 0.5
    a = zarr_dask.Array.open(str(tmp_path / "t.zarr"), coalescing=Coalescing(max_gap=0, whole_shard_fraction=1.0))
    assert a.shards == SHARDS and a.chunks == INNER
    np.testing.assert_array_equal(a[:], data)
    np.testing.assert_array_equal(a[1:20:3, 17:0:-4], data[1:20:3, 17:0:-4])


@pytest.mark.parametrize("location", ["start", "end"])
def test_we_write_tensorstore_reads(tmp_path, location):
    path = tmp_path / "ours.zarr"
    a = zarr_dask.create_array(str(path), shape=SHAPE, dtype="<f8", chunks=INNER, fill_value=0,
                               shards={"shape": SHARDS, "index_location": location})
    data = sample()
    a[:] = data
    a[10:13, 1:17] = -2  # partial shards: read, merged, rewritten
    data[10:13, 1:17] = -2
    np.testing.assert_array_equal(ts_open(path).read().result(), data)
    np.testing.assert_array_equal(ts_open(path)[4:9, 5:11].read().result(), data[4:9, 5:11])
