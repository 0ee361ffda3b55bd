"""The native reader (zarr_dask/_native.c via zarr_dask.native) against the Python path and NumPy.

Every read here runs twice: with the native reader and with ``ZARR_DASK_NATIVE=0``. The results, the errors and
the request counts must be the same; only the speed may differ.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import zarr_dask
from zarr_dask import native
from zarr_dask.errors import ZarrDaskError

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension is not built")


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chunks handed to the native reader (to prove a test takes the native path)."""
    seen: list[int] = []
    real = native.read_chunks

    def counting(paths: list[str | None], *args: Any) -> tuple[int, int, list[int]]:
        seen.append(len(paths))
        return real(paths, *args)

    monkeypatch.setattr(native, "read_chunks", counting)
    return seen


def both(read: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``read()`` with the native reader, then without it."""
    first = read()
    with monkeypatch.context() as m:
        m.setenv("ZARR_DASK_NATIVE", "0")
        second = read()
    return first, second


def outcome(read: Callable[[], Any]) -> Any:
    """The result of ``read()``, or its error's type and message."""
    try:
        return read()
    except ZarrDaskError as e:
        return type(e), str(e)


def test_the_extension_is_built_here() -> None:
    # make test builds it (setup.py); a silent build failure, or a numcodecs build whose functions no longer
    # bind, would only show as slow small-chunk reads: this fails instead, saying why
    assert os.name != "posix" or native._ext is not None
    status = native.status()
    assert status["built"] and status["enabled"]
    assert {name: c["native"] for name, c in status["codecs"].items()} == dict.fromkeys(native.CODECS, True), status


def test_status_says_why_a_codec_is_not_native(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(native, "_bound", {"raw": True})
    monkeypatch.setattr(native, "_reasons", {})
    monkeypatch.setattr(native, "extension_path", lambda name: None if name == "lz4" else "/nonexistent/zstd.so")
    with caplog.at_level("WARNING", logger="zarr_dask.native"):
        codecs = native.status()["codecs"]
    assert codecs["lz4"] == {"native": False, "reason": "numcodecs has no compiled module for 'lz4'"}
    assert not codecs["zstd"]["native"] and "were not found by name in /nonexistent/zstd.so" in codecs["zstd"]["reason"]
    assert "lz4 stays on the Python path" in caplog.text


def test_env_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZARR_DASK_NATIVE", "0")
    assert not native.available()
    assert native.codec_id("zstd") is None


COMPRESSORS: dict[str, Any] = {
    "raw": None,
    "zstd": numcodecs.Zstd(level=1),
    "blosc": numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
    "lz4": numcodecs.LZ4(),
}
DTYPES = ["<f4", "<i8", "u1", "?", "<c16", "<M8[s]", "S3", "<U2", [("a", "<i4"), ("b", "u1")]]


def _values(dtype: Any, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind == "S":
        flat = np.array([str(i % 997).encode() for i in range(n)], dtype=dt)
    elif dt.kind == "U":
        flat = np.array([chr(65 + i % 26) * 2 for i in range(n)], dtype=dt)
    elif dt.fields is not None:
        flat = np.zeros(n, dtype=dt)
        flat["a"], flat["b"] = np.arange(n), np.arange(n) % 7
    elif dt.kind == "M":
        flat = np.arange(n).astype(dt)
    else:
        flat = (np.arange(n) % 251).astype(dt)
    return flat.reshape(shape)


SELECTIONS = [
    (slice(None), slice(None)),
    (slice(3, 17), slice(5, 11)),
    (slice(1, None, 3), slice(None, None, 2)),
    (7, slice(None)),
    (slice(None), 12),
    (4, 9),
]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("codec", list(COMPRESSORS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_same_as_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[int], zarr_format: int, codec: str, dtype: Any
) -> None:
    shape, chunks = (19, 14), (4, 5)  # edge chunks along both axes
    data = _values(dtype, shape)
    url = str(tmp_path / "a.zarr")
    compressors = COMPRESSORS[codec]
    if zarr_format == 3 and codec == "lz4":
        compressors = {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}
    a = zarr_dask.create_array(
        url, shape=shape, dtype=dtype, chunks=chunks, zarr_format=zarr_format, compressors=compressors
    )
    a[...] = data
    a[8:12, 10:14] = np.zeros((), dtype=a.dtype)  # a fill-valued chunk: not stored, read back as the fill
    data[8:12, 10:14] = np.zeros((), dtype=a.dtype)
    for sel in SELECTIONS:
        fast, slow = both(lambda sel=sel: zarr_dask.open_array(url)[sel], monkeypatch)  # type: ignore[misc]
        np.testing.assert_array_equal(fast, data[sel])
        np.testing.assert_array_equal(slow, data[sel])
        assert type(fast) is type(slow)
        if isinstance(fast, np.ndarray):
            assert fast.dtype == slow.dtype == data.dtype
    assert spy, "the native reader was not used"


def test_direct_codec_rules() -> None:
    """Which chains the native reader takes: a bytes codec in native order and at most one compressor."""
    cases = {
        "v3 zstd": (dict(zarr_format=3, dtype="f4"), "zstd"),
        "v3 gzip": (dict(zarr_format=3, dtype="f4", compressors=numcodecs.GZip()), None),
        "v3 none": (dict(zarr_format=3, dtype="f4", compressors=None), "raw"),
        "v3 big-endian bytes": (dict(zarr_format=3, dtype="f4", serializer={"name": "bytes", "configuration": {"endian": "big"}}), None),
        "v3 transpose": (dict(zarr_format=3, dtype="f4", filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}]), None),
        "v3 crc32c after zstd": (dict(zarr_format=3, dtype="f4", compressors=[numcodecs.Zstd(), {"name": "crc32c"}]), None),
        "v2 blosc": (dict(zarr_format=2, dtype="f4", compressors=numcodecs.Blosc()), "blosc"),
        "v2 big-endian": (dict(zarr_format=2, dtype=">f4", compressors=None), "raw"),
        "v2 order F": (dict(zarr_format=2, dtype="f4", order="F"), None),
        "v2 delta filter": (dict(zarr_format=2, dtype="f4", filters=[numcodecs.Delta("f4")]), None),
        "v2 vlen strings": (dict(zarr_format=2, dtype=str), None),
    }
    for name, (kwargs, expected) in cases.items():
        a = zarr_dask.create_array(f"memory://direct-{name}", shape=(4, 4), chunks=(2, 2), **kwargs)  # type: ignore[arg-type]
        io = a._io
        assert io.pipeline.direct_codec(io.chunk_spec((0, 0))) == expected, name


def test_v2_order_f_and_big_endian_read_right(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.arange(12 * 10, dtype=">i4").reshape(12, 10)
    for order in ("C", "F"):
        url = str(tmp_path / f"{order}.zarr")
        a = zarr_dask.create_array(url, shape=data.shape, dtype=">i4", chunks=(5, 4), zarr_format=2, order=order)
        a[...] = data
        fast, slow = both(lambda url=url: zarr_dask.open_array(url)[1:11, ::3], monkeypatch)  # type: ignore[misc]
        np.testing.assert_array_equal(fast, data[1:11, ::3])
        np.testing.assert_array_equal(slow, data[1:11, ::3])


@pytest.mark.parametrize("fill", [np.nan, -7.5, 0.0])
def test_missing_chunks_get_the_fill_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[int], fill: float) -> None:
    url = str(tmp_path / "m.zarr")
    a = zarr_dask.create_array(url, shape=(10, 10), dtype="f8", chunks=(3, 4), fill_value=fill)
    a[0:3, 0:4] = 1.0  # one chunk stored, the rest missing (some directories too)
    expected = np.full((10, 10), fill)
    expected[0:3, 0:4] = 1.0
    fast, slow = both(lambda: zarr_dask.open_array(url)[...], monkeypatch)
    np.testing.assert_array_equal(fast, expected)
    np.testing.assert_array_equal(slow, expected)
    assert spy


def _chunk_file(url: str, key: str = "c/0/0") -> Path:
    return Path(url) / key


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "empty", "too_long", "other_codec"],
)
@pytest.mark.parametrize("codec", ["raw", "zstd", "blosc"])
def test_damaged_chunks_raise_the_python_path_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, codec: str
) -> None:
    url = str(tmp_path / "d.zarr")
    a = zarr_dask.create_array(url, shape=(8, 8), dtype="i4", chunks=(4, 4), compressors=COMPRESSORS[codec])
    a[...] = np.arange(64, dtype="i4").reshape(8, 8)
    path = _chunk_file(url)
    stored = path.read_bytes()
    damaged = {
        "garbage": b"\x01\x02not a chunk at all" * 3,
        "truncated": stored[: len(stored) // 2],
        "empty": b"",
        "too_long": stored + b"\0" * (70 * 1024),  # larger than the native read buffer
        "other_codec": numcodecs.GZip().encode(np.arange(16, dtype="i4").tobytes()),
    }[damage]
    path.write_bytes(damaged)
    fast, slow = both(lambda: outcome(lambda: zarr_dask.open_array(url)[...]), monkeypatch)
    if isinstance(slow, np.ndarray):  # e.g. a raw chunk with trailing bytes the Python path accepts
        np.testing.assert_array_equal(fast, slow)
    else:
        assert fast == slow
        assert "c/0/0" in slow[1]


def test_symbolic_links_follow_the_store_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "s.zarr")
    a = zarr_dask.create_array(url, shape=(4, 8), dtype="i2", chunks=(4, 4))
    a[...] = np.arange(32, dtype="i2").reshape(4, 8)
    inside, target = _chunk_file(url, "c/0/1"), _chunk_file(url, "c/0/0")
    inside.unlink()
    inside.symlink_to(target)  # a link inside the root is followed
    fast, slow = both(lambda: zarr_dask.open_array(url)[...], monkeypatch)
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast[:, 4:], fast[:, :4])
    outside = tmp_path / "outside"
    outside.write_bytes(target.read_bytes())
    inside.unlink()
    inside.symlink_to(outside)  # a link out of the root is refused, with the same error
    fast, slow = both(lambda: outcome(lambda: zarr_dask.open_array(url)[...]), monkeypatch)
    assert fast == slow
    assert not isinstance(fast, np.ndarray)


def test_a_directory_at_a_chunk_key_reads_as_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "dir.zarr")
    a = zarr_dask.create_array(url, shape=(4, 8), dtype="i2", chunks=(4, 4), fill_value=-1)
    a[:, :4] = 5
    _chunk_file(url, "c/0/1").mkdir(parents=True)
    fast, slow = both(lambda: zarr_dask.open_array(url)[...], monkeypatch)
    np.testing.assert_array_equal(fast, slow)
    assert (fast[:, 4:] == -1).all()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_at_a_chunk_key_reads_as_missing_without_blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "fifo.zarr")
    a = zarr_dask.create_array(url, shape=(4, 8), dtype="i2", chunks=(4, 4), fill_value=-1)
    a[:, :4] = 5
    _chunk_file(url, "c/0/1").parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(_chunk_file(url, "c/0/1"))
    fast, slow = both(lambda: zarr_dask.open_array(url)[...], monkeypatch)
    np.testing.assert_array_equal(fast, slow)
    assert (fast[:, 4:] == -1).all()


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads unreadable files")
def test_unreadable_chunk_same_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "perm.zarr")
    a = zarr_dask.create_array(url, shape=(4, 4), dtype="i2", chunks=(4, 4))
    a[...] = 1
    _chunk_file(url).chmod(0)
    fast, slow = both(lambda: outcome(lambda: zarr_dask.open_array(url)[...]), monkeypatch)
    assert fast == slow


def test_request_counts_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "n.zarr")
    a = zarr_dask.create_array(url, shape=(20, 20), dtype="f4", chunks=(3, 3))
    a[2:17, 4:20] = 1.5

    def counted() -> dict[str, int]:
        b = zarr_dask.open_array(url)
        b[1:19, 0:17]
        return dict(b.store.counters.snapshot())

    fast, slow = both(counted, monkeypatch)
    assert fast == slow
    Path(url, "c/1/1").write_bytes(b"damaged")  # read twice (native, then Python): counted once
    with pytest.raises(ZarrDaskError):
        counted()
    b = zarr_dask.open_array(url)
    before = b.store.counters.snapshot()
    with pytest.raises(ZarrDaskError):
        b[3:6, 3:6]
    after = b.store.counters.snapshot()
    assert (after["get"] - before["get"], after["bytes_read"] - before["bytes_read"]) == (1, len(b"damaged"))


def test_zero_dimensional_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[int]) -> None:
    url = str(tmp_path / "z.zarr")
    a = zarr_dask.create_array(url, shape=(), dtype="f8")
    a[...] = 3.25
    fast, slow = both(lambda: zarr_dask.open_array(url)[...], monkeypatch)
    assert fast == slow == 3.25
    assert spy


def test_into_a_fortran_ordered_block(tmp_path: Path) -> None:
    """The dask engine may read into any strided block: the copies follow ``out``'s strides."""
    url = str(tmp_path / "f.zarr")
    data = np.arange(11 * 13, dtype="i8").reshape(11, 13)
    a = zarr_dask.create_array(url, shape=data.shape, dtype="i8", chunks=(4, 5))
    a[...] = data
    from zarr_dask.core.indexing import chunk_projections, normalize_selection

    io = zarr_dask.open_array(url)._io
    dims = normalize_selection((slice(2, 11), slice(1, 12, 2)), data.shape)
    out = np.full((9, 6), -1, dtype="i8", order="F")
    io.read_into(out, list(chunk_projections(dims, io.grids, data.shape)))
    np.testing.assert_array_equal(out, data[2:11, 1:12:2])


def test_dask_reads_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[int]) -> None:
    url = str(tmp_path / "dk.zarr")
    data = np.random.default_rng(1).random((64, 48)).astype("f4")
    a = zarr_dask.create_array(url, shape=data.shape, dtype="f4", chunks=(8, 8))
    a[...] = data
    x = zarr_dask.from_zarr(url)
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_array_equal(x[5:40:3, 7].compute(), data[5:40:3, 7])
    assert spy


def test_bad_arguments_are_refused() -> None:
    ext = native._ext
    assert ext is not None
    out = np.zeros((4, 4), dtype="i4")
    proj = ((0, 0), (slice(0, 4), slice(0, 4)), (slice(0, 4), slice(0, 4)), True)
    buf, chunk = bytearray(1024), bytearray(64)
    fill = bytes(4)
    with pytest.raises(ValueError, match="differ in length"):
        ext.read_chunks([None, None], [proj], out, (4, 4), 0, fill, buf, chunk, 0)
    far = ((0, 0), (slice(0, 4), slice(0, 4)), (slice(2, 6), slice(0, 4)), True)
    with pytest.raises(ValueError, match="outside out|do not match"):
        ext.read_chunks([None], [far], out, (4, 4), 0, fill, buf, chunk, 0)
    with pytest.raises(ValueError, match="do not agree"):
        ext.read_chunks([None], [proj], out, (4, 4), 0, bytes(3), buf, chunk, 0)
    with pytest.raises(ValueError, match="not bound"):
        ext.read_chunks([None], [proj], out, (4, 4), 9, fill, buf, chunk, 0)
    with pytest.raises(ValueError, match="smaller than one chunk"):
        ext.read_chunks([None], [proj], out, (4, 4), 0, fill, buf, bytearray(8), 0)
    with pytest.raises(BufferError):
        ext.read_chunks([None], [proj], out, (4, 4), 0, fill, bytes(1024), chunk, 0)  # read-only read buffer
    readonly = np.zeros((4, 4), dtype="i4")
    readonly.flags.writeable = False
    with pytest.raises((BufferError, ValueError)):
        ext.read_chunks([None], [proj], readonly, (4, 4), 0, fill, buf, chunk, 0)
    assert ext.read_chunks([None], [proj], out, (4, 4), 0, (7).to_bytes(4, "little"), buf, chunk, 0)[2] == []
    assert (out == 7).all()  # a missing chunk is filled


@pytest.fixture(scope="module")
def grid_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
    url = str(tmp_path_factory.mktemp("native") / "h.zarr")
    data = np.random.default_rng(7).integers(0, 1000, size=(37, 29, 5)).astype("<u2")
    a = zarr_dask.create_array(url, shape=data.shape, dtype="u2", chunks=(6, 7, 2), fill_value=3)
    a[...] = data
    a[0:6, 0:7, 0:2] = 3  # one missing chunk
    data[0:6, 0:7, 0:2] = 3
    yield url, data


@given(
    st.tuples(*[st.tuples(st.integers(0, n), st.integers(0, n), st.integers(1, 4)) for n in (37, 29, 5)])
)
def test_random_selections(grid_store: tuple[str, np.ndarray[Any, Any]], sel: Any) -> None:
    url, data = grid_store
    key = tuple(slice(lo, hi, step) for lo, hi, step in sel)
    np.testing.assert_array_equal(zarr_dask.open_array(url)[key], data[key])


# ------------------------------------------------------------------------------------- shards' inner chunks
@pytest.fixture
def inner_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the inner chunks handed to the native batch decode."""
    seen: list[int] = []
    real = native.decode_chunks

    def counting(sources: list[Any], *args: Any) -> list[int]:
        seen.append(len(sources))
        return real(sources, *args)

    monkeypatch.setattr(native, "decode_chunks", counting)
    return seen


INNER_CODECS: dict[str, Any] = {
    "raw": None,
    "zstd": "zstd",
    "blosc": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
}
SHARD_SELECTIONS = [
    (slice(None), slice(None)),  # whole shards
    (slice(2, 3), slice(0, 30)),  # index + coalesced ranges
    (slice(1, 25, 4), slice(3, None, 5)),  # strided, across shards
    (23, 29),  # one element of an edge shard
]


@pytest.mark.parametrize("codec", list(INNER_CODECS))
@pytest.mark.parametrize("where", ["local", "memory"])
def test_sharded_inner_chunks_same_as_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inner_spy: list[int], codec: str, where: str
) -> None:
    url = str(tmp_path / "sh.zarr") if where == "local" else f"memory://native-shards-{codec}-{os.getpid()}"
    shape = (26, 31)  # edge shards and edge inner chunks
    data = _values("<i4", shape)
    a = zarr_dask.create_array(
        url, shape=shape, dtype="i4", chunks=(3, 5), shards=(6, 10), compressors=INNER_CODECS[codec],
        fill_value=-3, overwrite=True,
    )
    a[...] = data
    a[0:6, 10:20] = -3  # a whole shard of fill values: not stored
    a[6:9, 0:5] = -3  # one inner chunk of fill values: not stored in its shard
    data[0:6, 10:20] = data[6:9, 0:5] = -3
    for sel in SHARD_SELECTIONS:
        fast, slow = both(lambda sel=sel: zarr_dask.open_array(url)[sel], monkeypatch)  # type: ignore[misc]
        np.testing.assert_array_equal(fast, data[sel])
        np.testing.assert_array_equal(slow, data[sel])
    assert inner_spy, "the native batch decode was not used"
    np.testing.assert_array_equal(zarr_dask.from_zarr(url).compute(), data)


def test_inner_chains_it_cannot_decode_stay_on_the_python_path(
    tmp_path: Path, inner_spy: list[int]
) -> None:
    url = str(tmp_path / "crc.zarr")
    data = _values("<f8", (12, 12))
    a = zarr_dask.create_array(
        url, shape=data.shape, dtype="f8", chunks=(3, 3), shards=(6, 6), compressors=[numcodecs.GZip()]
    )
    a[...] = data
    np.testing.assert_array_equal(zarr_dask.open_array(url)[...], data)
    assert not inner_spy


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_inner_chunk_same_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    url = str(tmp_path / "bad.zarr")
    a = zarr_dask.create_array(url, shape=(8, 8), dtype="i4", chunks=(4, 4), shards=(8, 8), compressors="zstd")
    a[...] = np.arange(64, dtype="i4").reshape(8, 8)
    io = zarr_dask.open_array(url)._io
    shard = Path(url, "c/0/0")
    raw = bytearray(shard.read_bytes())
    index = io.shard_codec((0, 0)).decode_index(
        bytes(raw[len(raw) - io.shard_codec((0, 0)).index_size() :]), len(raw)
    )
    off, nb = (int(v) for v in index[1, 0])
    raw[off : off + nb] = (b"\x07" * nb) if damage == "garbage" else (bytes(raw[off : off + nb // 2]) + b"\0" * (nb - nb // 2))
    shard.write_bytes(bytes(raw))
    fast, slow = both(lambda: outcome(lambda: zarr_dask.open_array(url)[...]), monkeypatch)
    assert fast == slow
    assert not isinstance(fast, np.ndarray) and "(1, 0)" in fast[1] and "c/0/0" in fast[1]


def test_a_codec_that_fails_its_self_test_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """After binding, each codec decodes a sample numcodecs encoded; one that gets it wrong stays unused."""
    monkeypatch.setattr(native, "_bound", {"raw": True})
    monkeypatch.setattr(native, "encoded_sample", lambda name: (b"\1" * 64, numcodecs.Zstd().encode(b"\2" * 64)))
    assert native.codec_id("zstd") is None
    monkeypatch.setattr(native, "_bound", {"raw": True})
    monkeypatch.undo()
    assert native.codec_id("zstd") == native.CODECS["zstd"]


@pytest.mark.parametrize("codec", list(INNER_CODECS))
def test_fetched_chunks_decode_in_place_as_the_python_path(
    monkeypatch: pytest.MonkeyPatch, inner_spy: list[int], codec: str
) -> None:
    """Unsharded chunks a store fetched (memory here; HTTP, S3 ... the same path) are decoded by the native batch
    decode: the same values as the Python path, missing chunks filled, edge chunks and selections placed."""
    url = f"memory://native-fetched-{codec}-{os.getpid()}"
    shape = (26, 31)
    data = _values("<i4", shape)
    a = zarr_dask.create_array(url, shape=shape, dtype="i4", chunks=(6, 10), compressors=INNER_CODECS[codec],
                               fill_value=-3, overwrite=True)  # fmt: skip
    a[...] = data
    a[0:6, 10:20] = -3  # a chunk of fill values: not stored
    data[0:6, 10:20] = -3
    for sel in SHARD_SELECTIONS:
        fast, slow = both(lambda sel=sel: zarr_dask.open_array(url)[sel], monkeypatch)  # type: ignore[misc]
        np.testing.assert_array_equal(fast, data[sel])
        np.testing.assert_array_equal(slow, data[sel])
    assert inner_spy, "the native batch decode was not used"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_fetched_chunk_same_error(monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    url = f"memory://native-fetched-damaged-{damage}-{os.getpid()}"
    a = zarr_dask.create_array(url, shape=(8, 8), dtype="i4", chunks=(4, 4), compressors="zstd", overwrite=True)
    a[...] = np.arange(64, dtype="i4").reshape(8, 8)
    store = a.store
    stored = store.get("c/1/0")
    assert stored is not None
    store.set("c/1/0", b"\x01\x02not a chunk" if damage == "garbage" else bytes(stored)[: len(stored) // 2])
    fast, slow = both(lambda: outcome(lambda: zarr_dask.open_array(url)[...]), monkeypatch)
    assert fast == slow
    assert "c/1/0" in slow[1]
