"""Answers that must match NumPy / zarr-python (issue 38): huge unsigned indices, full-shape masks, arrays used
as indices, block slices past the grid, values that do not fit, and zarr-python's ``Array`` API."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import IndexingError, MetadataError, ShapeMismatchError
from zarr_dask.store import MemoryStore


@pytest.fixture
def a() -> zarr_dask.Array:
    arr = zarr_dask.create_array(MemoryStore(), shape=(4, 4), dtype="i4", chunks=(2, 2))
    arr[:] = np.arange(16).reshape(4, 4)
    return arr


HUGE = np.array([0, 2**64 - 1], dtype="uint64")


@pytest.mark.parametrize("how", ["vindex", "oindex", "getitem"])
def test_huge_unsigned_indices_are_out_of_bounds_not_wrapped(a: zarr_dask.Array, how: str) -> None:
    sel = (np.array([0, 1]), HUGE) if how != "oindex" else (slice(None), HUGE)
    index = {"vindex": a.vindex, "oindex": a.oindex, "getitem": a}[how]
    with pytest.raises(IndexingError, match="18446744073709551615 is out of bounds for axis 1"):
        index[sel]
    with pytest.raises(IndexError):
        index[sel] = 99
    np.testing.assert_array_equal(a[...], np.arange(16).reshape(4, 4))  # nothing written (a[1, 3] kept)


def test_unsigned_indices_in_bounds_still_select(a: zarr_dask.Array) -> None:
    u = np.array([3, 0], dtype="uint64")
    np.testing.assert_array_equal(a.vindex[u, u], [15, 0])
    np.testing.assert_array_equal(a.oindex[u, :], np.arange(16).reshape(4, 4)[[3, 0]])


def test_a_full_shape_mask_selects_like_numpy(a: zarr_dask.Array) -> None:
    ref = np.arange(16).reshape(4, 4)
    mask = ref % 3 == 0
    for sel in ((mask,), mask.tolist(), mask):
        np.testing.assert_array_equal(a[sel], ref[sel if not isinstance(sel, list) else np.asarray(sel)])
    a[(mask,)] = -1
    ref[mask] = -1
    np.testing.assert_array_equal(a[...], ref)


def test_an_array_used_as_an_index_is_read_first(a: zarr_dask.Array) -> None:
    ref = np.arange(16).reshape(4, 4)
    ix = zarr_dask.create_array(MemoryStore(), shape=(2,), dtype="i8", chunks=(1,))
    ix[:] = [3, 1]
    np.testing.assert_array_equal(a[ix], ref[[3, 1]])
    np.testing.assert_array_equal(a.vindex[ix, ix], ref[[3, 1], [3, 1]])
    np.testing.assert_array_equal(a.oindex[ix, ix], ref[np.ix_([3, 1], [3, 1])])
    mask = zarr_dask.create_array(MemoryStore(), shape=(4, 4), dtype="bool", chunks=(2, 2))
    mask[:] = ref % 5 == 0
    np.testing.assert_array_equal(a.vindex[mask], ref[ref % 5 == 0])
    np.testing.assert_array_equal(a[mask], ref[ref % 5 == 0])
    a.vindex[ix, ix] = -2
    assert a[3, 3] == -2 and a[1, 1] == -2
    floats = zarr_dask.create_array(MemoryStore(), shape=(2,), dtype="f8", chunks=(2,))
    with pytest.raises(IndexingError, match="integers or booleans"):
        a[floats]


def test_block_slices_past_the_grid_are_out_of_bounds() -> None:
    b = zarr_dask.create_array(MemoryStore(), shape=(9, 9), dtype="i4", chunks=(3, 3))
    with pytest.raises(IndexingError, match="out of bounds for axis 0 with 3 blocks"):
        b.blocks[15:20]
    with pytest.raises(IndexingError, match="out of bounds"):
        b.blocks[15:20] = 1
    with pytest.raises(IndexingError, match="out of bounds"):
        b.blocks[:, 3:]
    assert b.blocks[-2:].shape == (6, 9) and b.blocks[1:1].shape == (0, 9) and b.blocks[2:9].shape == (3, 9)
    assert not b.nchunks_initialized


def test_a_value_that_does_not_fit_is_a_value_error(a: zarr_dask.Array) -> None:
    for index in (a, a.oindex):
        with pytest.raises(ShapeMismatchError, match=r"selection of shape \(2, 4\) with a value of shape \(3, 4\)") as e:
            index[0:2, :] = np.zeros((3, 4))
        assert isinstance(e.value, ValueError) and "memory-store://" in str(e.value)
    with pytest.raises(ValueError, match="Attempting to set a selection of shape"):
        a.vindex[[0, 1], [0, 1]] = np.zeros(3)
    with pytest.raises(ShapeMismatchError, match=r"shape \(2, 3\) along axis 0 to an array of shape \(4, 4\)"):
        a.append(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="every other dimension"):
        a.append(np.zeros(4))
    assert a.shape == (4, 4)
    assert a.append(np.ones((4, 1)), axis=-1) == (4, 5)


def test_zarr_python_array_api(a: zarr_dask.Array) -> None:
    stored = a.nbytes_stored()
    assert isinstance(stored, int) and stored > 0 and a.info.nbytes_stored == stored
    assert a.info_complete().nbytes_stored == stored and a.info_complete().nchunks_initialized == 4
    a.shape = (6, 4)
    assert a.shape == (6, 4) and zarr_dask.open_array(a.store, mode="r").shape == (6, 4)
    f = a.with_config({"order": "F"})
    assert f.order == "F" and a.order == "C" and f[...].flags.f_contiguous
    w = a.with_config({"write_empty_chunks": True})
    assert w.order == "C"
    w[4:6, :2] = 0
    assert w.nchunks_initialized == 5
    with pytest.raises(MetadataError, match="with_config takes"):
        a.with_config({"ordre": "F"})


def _trailing_gzip(path: zarr_dask.store.Store, codecs: list[object]) -> zarr_dask.Array:
    import json

    doc = {
        "zarr_format": 3, "node_type": "array", "shape": [16, 24], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 12]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": codecs,
    }  # fmt: skip
    path.set_many({"zarr.json": json.dumps(doc).encode()})
    return zarr_dask.open_array(path)


SHARD = {"name": "sharding_indexed", "configuration": {"chunk_shape": [4, 4], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}


def test_a_codec_after_the_shard_codec_reports_chunks_as_zarr_python() -> None:
    a = _trailing_gzip(MemoryStore(), [SHARD, {"name": "gzip", "configuration": {"level": 1}}])
    assert a.chunks == (8, 12) and a.shards is None
    a[:] = np.arange(16 * 24).reshape(16, 24)
    np.testing.assert_array_equal(a[3:13, 5:20], np.arange(16 * 24).reshape(16, 24)[3:13, 5:20])
    assert a.write_chunk_sizes == ((8, 8), (12, 12))  # the engine still knows its storage units
    only = _trailing_gzip(MemoryStore(), [SHARD])
    assert only.chunks == (4, 4) and only.shards == (8, 12)


def test_out_takes_the_result(a: zarr_dask.Array) -> None:
    ref = np.arange(16).reshape(4, 4)
    out = np.zeros((2, 4), dtype="i4")
    assert a.get_basic_selection(slice(1, 3), out=out) is out
    np.testing.assert_array_equal(out, ref[1:3])
    pts = np.zeros(2, dtype="i4")
    a.get_coordinate_selection(([0, 3], [1, 2]), out=pts)
    np.testing.assert_array_equal(pts, [1, 14])
    grid = np.zeros((2, 2), dtype="i4")
    a.get_orthogonal_selection(([0, 3], [1, 2]), out=grid)
    np.testing.assert_array_equal(grid, ref[np.ix_([0, 3], [1, 2])])
    blk = np.zeros((2, 2), dtype="i4")
    a.get_block_selection((1, 0), out=blk)
    np.testing.assert_array_equal(blk, ref[2:, :2])
    with pytest.raises(TypeError, match="out= must be a NumPy array"):
        a.get_basic_selection(Ellipsis, out=[])
    with pytest.raises(ShapeMismatchError, match=r"out= has shape \(2, 4\), the selection has shape \(4, 4\)"):
        a.get_basic_selection(Ellipsis, out=out)


def test_codec_roles_as_zarr_python_names_them() -> None:
    gz = {"name": "gzip", "configuration": {"level": 1}}
    v3 = zarr_dask.create_array(MemoryStore(), shape=(4, 4), dtype="i4", chunks=(2, 2), compressors=[gz],
                                filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}])  # fmt: skip
    assert [f["name"] for f in v3.filters] == ["transpose"] and v3.serializer["name"] == "bytes"
    assert v3.compressors == (gz,) and [c["name"] for c in v3.codecs] == ["transpose", "bytes", "gzip"]
    with pytest.raises(NotImplementedError, match="compressors"):
        v3.compressor
    v2 = zarr_dask.create_array(MemoryStore(), shape=(4,), dtype="i4", chunks=(2,), zarr_format=2,
                                compressors=[{"id": "zlib", "level": 1}])  # fmt: skip
    assert v2.compressors == ({"id": "zlib", "level": 1},) == (v2.compressor,)
    assert v2.filters == () and v2.serializer is None


def test_config_and_with_config_take_each_other(a: zarr_dask.Array) -> None:
    assert a.config.to_dict() == {"order": "C", "write_empty_chunks": False}
    f = a.with_config(a.with_config({"order": "F"}).config)
    assert f.config == a.with_config({"order": "F"}).config and f.config.order == "F"
