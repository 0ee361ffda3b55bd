"""Array: create / open / read / write / resize / attrs / info on every store kind."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_dask
from zarr_dask.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    IndexingError,
    ReadOnlyError,
)


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def zarr_format(request):
    return request.param


def test_roundtrip_basic(tmp_path, zarr_format):
    url = str(tmp_path / "a.zarr")
    a = zarr_dask.create_array(url, shape=(5, 7), dtype="i4", chunks=(2, 3), zarr_format=zarr_format)
    data = np.arange(35, dtype="i4").reshape(5, 7)
    a[:] = data
    b = zarr_dask.open_array(url)
    assert b.zarr_format == zarr_format
    assert b.shape == (5, 7) and b.chunks == (2, 3) and b.dtype == np.dtype("i4")
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[1:4, ::2], data[1:4, ::2])
    np.testing.assert_array_equal(b[::-2, 3], data[::-2, 3])
    assert b[4, 6] == 34
    np.testing.assert_array_equal(np.asarray(b), data)


def test_missing_chunks_read_fill(zarr_format):
    a = zarr_dask.create_array(
        zarr_dask.MemoryStore(), shape=(6,), dtype="f8", chunks=(2,), fill_value=-1.5, zarr_format=zarr_format
    )
    a[2:4] = [1, 2]
    np.testing.assert_array_equal(a[:], [-1.5, -1.5, 1, 2, -1.5, -1.5])
    assert a.nchunks_initialized == 1


def test_partial_chunk_writes_merge(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(10, 10), dtype="u2", chunks=(4, 4), zarr_format=zarr_format)
    ref = np.zeros((10, 10), "u2")
    for sel, v in [((slice(1, 3), slice(2, 9)), 5), ((slice(None), 7), 9), ((slice(0, 10, 3), slice(None, None, -4)), 2)]:
        a[sel] = v
        ref[sel] = v
        np.testing.assert_array_equal(a[:], ref)


def test_write_empty_chunks(zarr_format):
    store = zarr_dask.MemoryStore()
    a = zarr_dask.create_array(store, shape=(8,), dtype="f4", chunks=(4,), fill_value=np.nan, zarr_format=zarr_format)
    a[:] = 1.0
    assert a.nchunks_initialized == 2
    a[:4] = np.nan  # back to fill: the chunk is deleted
    assert a.nchunks_initialized == 1
    b = zarr_dask.open_array(store, write_empty_chunks=True)
    b[:4] = np.nan
    assert b.nchunks_initialized == 2
    np.testing.assert_array_equal(b[:4], [np.nan] * 4)


def test_0d_and_empty(zarr_format):
    store = zarr_dask.MemoryStore()
    a = zarr_dask.create_array(store, path="s", shape=(), dtype="f8", zarr_format=zarr_format, fill_value=3.0)
    assert a[()] == 3.0
    a[()] = 4.5
    assert zarr_dask.open_array(store, path="s")[...] == 4.5
    e = zarr_dask.create_array(store, path="e", shape=(0, 3), dtype="i2", chunks=(1, 3), zarr_format=zarr_format)
    assert e[:].shape == (0, 3)


def test_resize_shrink_then_grow_shows_fill(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(10,), dtype="i8", chunks=(4,), zarr_format=zarr_format)
    a[:] = np.arange(10) + 1
    a.resize(5)
    assert a.shape == (5,)
    assert a.nchunks_initialized == 2
    a.resize(10)
    np.testing.assert_array_equal(a[:], [1, 2, 3, 4, 5, 0, 0, 0, 0, 0])
    assert zarr_dask.open_array(a.store).shape == (10,)


def test_append(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(3, 2), dtype="i4", chunks=(2, 2), zarr_format=zarr_format)
    a[:] = 1
    assert a.append(np.full((3, 2), 2)) == (6, 2)
    np.testing.assert_array_equal(a[:, 0], [1, 1, 1, 2, 2, 2])


def test_attrs_write_through(zarr_format):
    store = zarr_dask.MemoryStore()
    a = zarr_dask.create_array(store, shape=(2,), dtype="i1", attributes={"a": 1}, zarr_format=zarr_format)
    a.attrs["b"] = [1, 2]
    a.attrs.update(c="x")
    del a.attrs["a"]
    assert dict(zarr_dask.open_array(store).attrs) == {"b": [1, 2], "c": "x"}


def test_order_f_roundtrip(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(5, 4), dtype="f8", chunks=(3, 3), order="F", zarr_format=zarr_format)
    data = np.random.default_rng(0).random((5, 4))
    a[:] = data
    np.testing.assert_array_equal(zarr_dask.open_array(a.store)[:], data)


def test_strings_and_structured(zarr_format):
    store = zarr_dask.MemoryStore()
    s = zarr_dask.create_array(store, path="s", shape=(5,), dtype=str, chunks=(2,), zarr_format=zarr_format)
    s[:] = np.array(["a", "bé", "", "dddd", "e"], dtype=object)
    assert list(zarr_dask.open_array(store, path="s")[:]) == ["a", "bé", "", "dddd", "e"]
    dt = np.dtype([("x", "<f4"), ("y", "<i2")])
    r = zarr_dask.create_array(store, path="r", shape=(3,), dtype=dt, chunks=(2,), zarr_format=zarr_format)
    data = np.array([(1.5, 1), (2.5, 2), (3.5, 3)], dtype=dt)
    r[:] = data
    np.testing.assert_array_equal(zarr_dask.open_array(store, path="r")[:], data)


def test_create_errors(zarr_format):
    store = zarr_dask.MemoryStore()
    zarr_dask.create_array(store, path="x", shape=(2,), dtype="i4", zarr_format=zarr_format)
    with pytest.raises(ContainsArrayError, match="already exists"):
        zarr_dask.create_array(store, path="x", shape=(2,), dtype="i4", zarr_format=zarr_format)
    zarr_dask.create_array(store, path="x", shape=(3,), dtype="i4", zarr_format=zarr_format, overwrite=True)
    assert zarr_dask.open_array(store, path="x").shape == (3,)
    zarr_dask.create_group(store, path="g", zarr_format=zarr_format)
    with pytest.raises(ContainsGroupError):
        zarr_dask.create_array(store, path="g", shape=(2,), dtype="i4", zarr_format=zarr_format)
    with pytest.raises(ContainsArrayError, match="ancestor"):
        zarr_dask.create_array(store, path="x/y", shape=(2,), dtype="i4", zarr_format=zarr_format)
    with pytest.raises(ArrayNotFoundError, match="no array"):
        zarr_dask.open_array(store, path="nope")


def test_bad_create_writes_nothing(zarr_format):
    store = zarr_dask.MemoryStore()
    with pytest.raises(zarr_dask.errors.ZarrDaskError):
        zarr_dask.create_array(store, path="a/b", shape=(2,), dtype="i4", compressors="no-such-codec", zarr_format=zarr_format)
    with pytest.raises(zarr_dask.errors.ZarrDaskError):
        zarr_dask.create_array(store, path="a/b", shape=(2, 2), dtype="i4", chunks=(0, 1), zarr_format=zarr_format)
    assert store.list_prefix("") == []


def test_read_only(zarr_format):
    store = zarr_dask.MemoryStore()
    zarr_dask.create_array(store, shape=(2,), dtype="i4", zarr_format=zarr_format)
    a = zarr_dask.open_array(store, mode="r")
    with pytest.raises(ReadOnlyError):
        a[:] = 1
    with pytest.raises(ReadOnlyError):
        a.attrs["x"] = 1


def test_index_errors_name_the_array():
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), path="t", shape=(3,), dtype="i4")
    with pytest.raises(IndexingError, match="node '/t'.*out of bounds"):
        a[5]


def test_info(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(100,), dtype="f8", chunks=(10,), zarr_format=zarr_format)
    a[:50] = 1.0
    info = a.info
    assert info.nchunks == 10 and info.nchunks_initialized == 5
    assert info.nbytes == 800 and info.nbytes_stored > 0
    assert "Chunks initialized" in repr(info)


def test_info_shows_codecs_readably_and_group_info_counts_members(zarr_format):
    store = zarr_dask.MemoryStore()
    g = zarr_dask.create_group(store, zarr_format=zarr_format, attributes={"title": "t"})
    a = g.create_array("a", shape=(8,), dtype="f4", chunks=(4,), compressors=[{"id": "zlib", "level": 3}] if zarr_format == 2 else "auto")
    g.create_group("sub")
    text = repr(a.info)
    codecs = next(line for line in text.splitlines() if line.startswith("Codecs"))
    assert "{" not in codecs  # no raw JSON
    assert ("zlib(level=3)" if zarr_format == 2 else "bytes(endian=little) > zstd(level=0, checksum=False)") in codecs
    info = g.info
    assert (info.count_members, info.count_arrays, info.count_groups, info.zarr_format) == (2, 1, 1, zarr_format)
    text = repr(info)
    for row in ["Type                : Group", f"Zarr format         : {zarr_format}", "Read-only           : False",
                "Store type          : MemoryStore", f"Store               : {store.url}", "Consolidated        : no",
                "No. members         : 2", "No. arrays          : 1", "No. groups          : 1", "No. attributes      : 1"]:  # fmt: skip
        assert row in text.splitlines(), text


@st.composite
def write_case(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 8)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    writes = []
    for _ in range(draw(st.integers(1, 4))):
        key = tuple(
            draw(st.builds(slice, st.none() | st.integers(0, n), st.none() | st.integers(0, n), st.none() | st.integers(1, 3)))
            for n in shape
        )
        writes.append((key, draw(st.integers(-5, 5))))
    return shape, chunks, writes


@given(write_case(), st.sampled_from([2, 3]))
@settings(max_examples=60, deadline=None)
def test_writes_match_numpy(case, zarr_format):
    shape, chunks, writes = case
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=shape, dtype="i2", chunks=chunks, zarr_format=zarr_format, fill_value=0)
    ref = np.zeros(shape, "i2")
    for key, v in writes:
        a[key] = v
        ref[key] = v
    np.testing.assert_array_equal(a[...], ref)


@pytest.mark.parametrize(
    "dtype, fill",
    [("f4", np.nan), ("c8", complex(np.nan, 0)), ("M8[s]", np.datetime64("NaT", "s")), ("i2", 3), ("U2", "ab"), (str, "x")],
)
def test_fill_chunks_not_stored(dtype, fill):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(4,), dtype=dtype, chunks=(2,), fill_value=fill)
    a[:] = fill
    assert a.nchunks_initialized == 0
    a[1] = a[1] if dtype != "i2" else 4
    assert a.nchunks_initialized == (1 if dtype == "i2" else 0)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_0d_object_array_write(zarr_format):
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(), dtype=str, zarr_format=zarr_format)
    a[()] = "hello"
    assert zarr_dask.open_array(a.store)[()] == "hello"
