"""Hostile geometry: limits checked when metadata is parsed, and no allocation from a declared size alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numcodecs
import numpy as np
import pytest

import zarr_dask
from zarr_dask import errors
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.limits import MAX_NDIM, get_limits, limits

ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]


def v3(shape, chunks, codecs=None, dtype="float64"):
    return {
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
    }  # fmt: skip


def v2(shape, chunks, dtype="<f8"):
    return {"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype, "compressor": None,
            "fill_value": 0, "order": "C", "filters": None}  # fmt: skip


def sharded(inner, *, codecs=None):
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}]  # fmt: skip


def open_doc(doc, fmt=3):
    store = zarr_dask.MemoryStore()
    store.set("node/zarr.json" if fmt == 3 else "node/.zarray", json.dumps(doc).encode())
    return zarr_dask.open_array(store, path="node")


CASES = [
    (v3([1] * 33, [1] * 33), "33 dimensions, more than the 32"),
    (v3([1] * 1000, [1] * 1000), "1000 dimensions, more than the 32"),
    (v3([2**40], [2**40]), "8796093022208 bytes per decoded chunk, more than the limit of 8589934592"),
    (v3([2**63 - 1], [2**63 - 1]), "73786976294838206456 bytes per decoded chunk"),
    (v3([2**62, 4], [1, 1]), "shape \\[4611686018427387904, 4\\] spans 18446744073709551616 elements"),
    (v3([2**62, 0, 4], [1, 1, 1]), "shape \\[4611686018427387904, 0, 4\\] spans 18446744073709551616 elements"),
    (v3([100], [100], sharded([7])), "shard size 100 along dimension 0 is not a multiple of the inner chunk size 7"),
    (v3([100], [100], sharded([10, 10])), "chunk_shape \\[10, 10\\] has 2 dimensions, the shard \\[100\\] has 1"),
    (v3([2**40], [2**40], sharded([1])), "holds 1099511627776 inner chunks of \\[1\\], more than the limit of 4194304"),
    (v3([2**40], [2**40], sharded([2**40])), "inner chunk shape \\[1099511627776\\] declares"),
    (v3([2**40], [2**40], sharded([2**30], codecs=sharded([1]))), "shard \\[1073741824\\] holds 1073741824 inner"),
]


@pytest.mark.parametrize("doc, match", CASES)
def test_v3_geometry_refused_at_parse(doc, match):
    with pytest.raises(errors.MetadataError, match=match) as info:
        open_doc(doc)
    assert "memory" in str(info.value) and "'/node'" in str(info.value)


@pytest.mark.parametrize(
    "doc, match",
    [
        (v2([1] * 40, [1] * 40), "40 dimensions"),
        (v2([2**40], [2**40]), "max_chunk_bytes"),
        (v2([2**62, 2**62], [1, 1]), "zero extents aside"),
    ],
)
def test_v2_geometry_refused_at_parse(doc, match):
    with pytest.raises(errors.MetadataError, match=match):
        open_doc(doc, fmt=2)


def test_rectilinear_largest_edge_is_checked():
    doc = v3([30], [10])
    doc["chunk_grid"] = {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[10, 2**40]]}}
    with pytest.raises(errors.MetadataError, match="chunk shape \\[1099511627776\\]"):
        open_doc(doc)


def test_generous_real_geometry_is_accepted():
    ArrayMetadataV3.from_json(v3([2**62], [2**20]))  # huge sparse arrays are fine
    ArrayMetadataV3.from_json(v3([1] * MAX_NDIM, [1] * MAX_NDIM))
    ArrayMetadataV3.from_json(v3([2**40], [2**22], sharded([2**10])))
    ArrayMetadataV2.from_json(v2([10**12], [10**8]))


def test_policy_limit_is_configurable():
    doc = v3([2**31], [2**31])
    with pytest.raises(errors.MetadataError, match="max_chunk_bytes"):
        ArrayMetadataV3.from_json(doc)
    with limits(max_chunk_bytes=2**40):
        ArrayMetadataV3.from_json(doc)
    assert get_limits().max_chunk_bytes == 8 * 2**30
    with limits(max_chunk_bytes=1000), pytest.raises(errors.MetadataError, match="limit of 1000 bytes"):
        ArrayMetadataV3.from_json(v3([100], [200]))
    with pytest.raises(errors.MetadataError, match="unknown limit"):
        zarr_dask.set_limits(max_chunks=3)
    with pytest.raises(errors.MetadataError, match="positive integer"):
        zarr_dask.set_limits(max_shard_chunks=0)


def test_policy_limit_from_environment():
    code = "import zarr_dask; print(zarr_dask.get_limits().max_chunk_bytes, zarr_dask.get_limits().max_shard_chunks)"
    env = {**os.environ, "ZARR_DASK_MAX_CHUNK_BYTES": "123456", "ZARR_DASK_MAX_SHARD_CHUNKS": "77"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["123456", "77"]


@pytest.mark.parametrize("url", ["memory", "file"])
def test_tiny_object_declaring_a_huge_chunk_is_refused_before_allocating(url, tmp_path):
    store = zarr_dask.MemoryStore() if url == "memory" else zarr_dask.LocalStore(str(tmp_path / "x.zarr"))
    store.set("a/zarr.json", json.dumps(v3([2**30], [2**30], ZSTD)).encode())  # 8 GiB, at the limit
    store.set("a/c/0", numcodecs.Zstd().encode(np.zeros(100)))
    with pytest.raises(errors.ChunkDecodeError) as info:
        zarr_dask.open_array(store, path="a")[:5]
    msg = str(info.value)
    assert "'a/c/0'" in msg and "has 19 bytes" in msg and "8589934592 bytes" in msg and "refused before" in msg


def test_a_selection_numpy_cannot_hold_is_an_indexing_error():
    """Found by the fuzz test: an empty axis beside one of 2**63 - 1 makes a size-0 selection whose shape
    NumPy still refuses ("array is too big"); the error names the shape and what to do instead."""
    store = zarr_dask.MemoryStore()
    store.set("a/zarr.json", json.dumps(v3([2**63 - 1, 0], [4, 28530], dtype="int32")).encode())
    a = zarr_dask.open_array(store, path="a")
    assert a.size == 0
    with pytest.raises(errors.IndexingError, match=r"shape \(9223372036854775807, 0\) of int32.*smaller region") as info:
        a[...]
    assert info.value.path == "a"
    assert a[:3].shape == (3, 0)


def test_declared_size_plausible_for_real_compression_ratios():
    store = zarr_dask.MemoryStore()
    a = zarr_dask.create_array(store, shape=(2**23,), chunks=(2**23,), dtype="u1", compressors=[{"name": "zstd"}], fill_value=1)
    a[:] = 0  # 8 MiB of zeros: zstd stores them in a few hundred bytes
    assert int(a[:].sum()) == 0
