"""Interop with zarr-python (test-only oracle), both directions: sharded arrays (index at the start and the
end, nested sharding, crc32c, edge shards, missing inner chunks) bit for bit, and rectilinear grids (zarr-python
>= 3.2 behind its ``array.rectilinear_chunks`` flag) including rectilinear shards and resize."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from zarr_dask.codecs.shard_access import Coalescing

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.oracle

ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2])
PARTIAL = Coalescing(max_gap=0, whole_shard_fraction=1.0)
SHAPE, CHUNKS, SHARDS = (21, 18), (3, 2), (6, 8)  # edge shards in both dimensions, some inner chunks outside

LE = {"name": "bytes", "configuration": {"endian": "little"}}
INNER = {
    "bytes": [LE],
    "zstd": [LE, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
    "crc32c": [LE, {"name": "crc32c"}],
    "nested": [{
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [1, 2], "codecs": [LE, {"name": "crc32c"}],
            "index_codecs": [LE, {"name": "crc32c"}], "index_location": "start",
        },
    }],
}


def zp_codecs(entries):
    from zarr.registry import get_codec_class

    out = []
    for e in entries:
        cls = get_codec_class(e["name"])
        out.append(cls.from_dict(e) if e["name"] == "sharding_indexed" else cls(**e.get("configuration", {})))
    return out


def sample():
    data = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE) * 7 - 300
    data[6:12, 8:16] = -1  # one whole shard equal to the fill value: not stored
    data[0:3, 0:2] = -1  # one inner chunk equal to the fill value: empty in its shard's index
    return data


def ours_kwargs(location, inner):
    ser, comps = inner[0], inner[1:]
    return dict(shape=SHAPE, dtype="<i4", chunks=CHUNKS, fill_value=-1, serializer=ser, compressors=comps or None,
                shards={"shape": SHARDS, "index_location": location})


def zp_kwargs(location, inner):
    codecs = zp_codecs(inner)
    return dict(shape=SHAPE, dtype="<i4", chunks=CHUNKS, fill_value=-1, serializer=codecs[0],
                compressors=codecs[1:] or None, shards={"shape": SHARDS, "index_location": location})


def shard_files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("inner", list(INNER))
def test_both_directions_bit_for_bit(tmp_path, location, inner):
    data = sample()
    zp_dir, our_dir = tmp_path / "zp.zarr", tmp_path / "ours.zarr"
    z = zarr.create_array(zarr.storage.LocalStore(str(zp_dir)), **zp_kwargs(location, INNER[inner]))
    z[:] = data
    a = zarr_dask.create_array(str(our_dir), **ours_kwargs(location, INNER[inner]))
    a[:] = data
    # same metadata (codecs and grid), same keys, same shard bytes
    zp_doc, our_doc = (json.loads((d / "zarr.json").read_bytes()) for d in (zp_dir, our_dir))
    for field in ("chunk_grid", "codecs", "shape", "fill_value", "data_type"):
        assert our_doc[field] == zp_doc[field], field
    zp_files, our_files = shard_files(zp_dir), shard_files(our_dir)
    zp_files.pop("zarr.json"), our_files.pop("zarr.json")
    assert sorted(our_files) == sorted(zp_files) and "c/1/1" not in our_files
    for key in zp_files:
        assert our_files[key] == zp_files[key], key
    # each reads the other's array, whole and partially
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.LocalStore(str(our_dir)))[:], data)
    theirs = zarr_dask.Array.open(str(zp_dir), coalescing=PARTIAL)
    np.testing.assert_array_equal(theirs[:], data)
    np.testing.assert_array_equal(theirs[1:20:4, 3:17:3], data[1:20:4, 3:17:3])


@pytest.mark.parametrize("location", ["start", "end"])
def test_partial_writes_on_either_side(tmp_path, location):
    data = sample()
    path = tmp_path / "x.zarr"
    z = zarr.create_array(zarr.storage.LocalStore(str(path)), **zp_kwargs(location, INNER["zstd"]))
    z[:] = data
    ours = zarr_dask.open_array(str(path))
    ours[2:9, 5:13] = 11  # crosses shards, merges partly covered inner chunks
    data[2:9, 5:13] = 11
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.LocalStore(str(path)))[:], data)
    z2 = zarr.open_array(zarr.storage.LocalStore(str(path)))
    z2[15:21, 0:3] = -1  # zarr-python empties the inner chunks it covers
    data[15:21, 0:3] = -1
    np.testing.assert_array_equal(zarr_dask.Array.open(str(path), coalescing=PARTIAL)[:], data)


def test_inner_chunk_requests_on_zarr_python_shards(tmp_path):
    path = tmp_path / "x.zarr"
    z = zarr.create_array(zarr.storage.LocalStore(str(path)), shape=(64, 64), dtype="f8", chunks=(8, 8),
                          shards=(64, 64), compressors=None)
    z[:] = np.arange(4096, dtype="f8").reshape(64, 64)
    a = zarr_dask.Array.open(str(path), coalescing=PARTIAL)
    with a.store.counters.counting() as delta:
        assert a[9, 9] == 9 * 64 + 9
    assert delta["get_range"] == 2 and delta["get"] == 0


# ------------------------------------------------------------------------------------------- rectilinear
needs_rectilinear = pytest.mark.skipif(
    ZARR_VERSION < (3, 2), reason=f"zarr-python {zarr.__version__} has no rectilinear chunk grid (3.2+ has)"
)


@pytest.fixture
def rectilinear_flag():
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


@needs_rectilinear
@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_rectilinear_both_directions(tmp_path, rectilinear_flag, sharded):
    shape = (35, 8)
    data = np.arange(280, dtype="<i4").reshape(shape)
    edges = [[10, 20, 5], [8]]
    kwargs = dict(chunks=(5, 4), shards=edges) if sharded else dict(chunks=edges)
    zp_dir, our_dir = tmp_path / "zp.zarr", tmp_path / "ours.zarr"
    z = zarr.create_array(zarr.storage.LocalStore(str(zp_dir)), shape=shape, dtype="<i4", **kwargs)
    z[:] = data
    ours_kwargs = dict(chunks=(5, 4), shards=tuple(map(tuple, edges))) if sharded else dict(
        chunks=tuple(map(tuple, edges)))
    a = zarr_dask.create_array(str(our_dir), shape=shape, dtype="<i4", **ours_kwargs)
    a[:] = data
    np.testing.assert_array_equal(zarr_dask.open_array(str(zp_dir))[:], data)
    np.testing.assert_array_equal(zarr_dask.open_array(str(zp_dir))[3:31:4, ::3], data[3:31:4, ::3])
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.LocalStore(str(our_dir)))[:], data)
    zp_files, our_files = shard_files(zp_dir), shard_files(our_dir)
    zp_doc = json.loads(zp_files.pop("zarr.json"))
    our_doc = json.loads(our_files.pop("zarr.json"))
    assert our_doc["codecs"] == zp_doc["codecs"]
    assert our_files == zp_files  # same keys, same bytes


@needs_rectilinear
def test_rectilinear_resize_matches_zarr_python(tmp_path, rectilinear_flag):
    shape, edges = (35, 4), ((10, 20, 5), (4,))
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=shape, dtype="i4", chunks=[list(e) for e in edges])
    a = zarr_dask.create_array(str(tmp_path / "a.zarr"), shape=shape, dtype="i4", chunks=edges)
    for new in ((42, 4), (12, 4), (50, 4)):
        z.resize(new)
        a.resize(new)
        zp_edges = z.metadata.to_dict()["chunk_grid"]["configuration"]["chunk_shapes"]
        ours = a.metadata.chunk_grid
        assert [list(ours.chunk_shapes[0]), list(ours.chunk_shapes[1])] == [list(e) for e in zp_edges]
    a[:] = 3
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.LocalStore(str(tmp_path / "a.zarr")))[:], 3)


@needs_rectilinear
def test_rectilinear_run_length_metadata_from_either_side(tmp_path, rectilinear_flag):
    doc_edges = [[[2, 3], 6], 3]  # RLE form + a bare repeated size
    a = zarr_dask.create_array(str(tmp_path / "a.zarr"), shape=(12, 9), dtype="u1", chunks=((2, 2, 2, 6), 3))
    assert json.loads((tmp_path / "a.zarr" / "zarr.json").read_bytes())["chunk_grid"]["configuration"][
        "chunk_shapes"] == doc_edges
    a[:] = np.arange(108, dtype="u1").reshape(12, 9)
    z = zarr.open_array(zarr.storage.LocalStore(str(tmp_path / "a.zarr")))
    np.testing.assert_array_equal(z[:], np.arange(108, dtype="u1").reshape(12, 9))
    assert [list(s) for s in z.read_chunk_sizes] == [[2, 2, 2, 6], [3, 3, 3]]
