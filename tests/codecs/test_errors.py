"""Refusals and errors: order rules, unknown and unsafe codecs, bad configurations, corrupt chunks, bombs."""

from __future__ import annotations

import bz2
import gzip
import zlib

import numpy as np
import pytest

from tests.codecs._helpers import dt2, dt3, spec
from zarr_dask.codecs import pipeline_from_v2, pipeline_from_v3
from zarr_dask.errors import (
    ChunkDecodeError,
    ChunkEncodeError,
    MetadataError,
    UnknownCodecError,
    UnsafeCodecError,
)

LE = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
TRANSPOSE = {"name": "transpose", "configuration": {"order": [0]}}
I4 = dt3("i4")


def v3(codecs, dt=I4, shape=(4,), **kw):
    return pipeline_from_v3(codecs, data_type=dt, chunk_shape=shape, **kw)


# ----------------------------------------------------------------------------------------------- order
@pytest.mark.parametrize(
    ("codecs", "words"),
    [
        ([], ["empty"]),
        ([ZSTD], ["'zstd'", "before the array->bytes codec"]),
        ([TRANSPOSE], ["no array->bytes codec", "bytes"]),
        ([LE, LE], ["second array->bytes codec", "position 1"]),
        ([LE, TRANSPOSE], ["'transpose'", "comes after the array->bytes codec 'bytes'"]),
        ([ZSTD, LE], ["'zstd'", "position 0", "before"]),
        ([LE, ZSTD, TRANSPOSE], ["'transpose'", "position 2"]),
        ([{"name": "vlen-utf8"}, LE], ["second array->bytes"]),
    ],
)
def test_order_rules_name_codec_and_rule(codecs, words):
    with pytest.raises(MetadataError) as e:
        v3(codecs)
    for w in words:
        assert w in str(e.value)


def test_codecs_must_be_a_list():
    for bad in ("bytes", {"name": "bytes"}, None, 3):
        with pytest.raises(MetadataError, match="list"):
            v3(bad)


# ----------------------------------------------------------------------------------------- unknown / bad
def test_unknown_codec_lists_supported_names():
    with pytest.raises(UnknownCodecError, match="'foo'.*supported: bitround, blosc, bytes"):
        v3([LE, {"name": "foo"}])
    with pytest.raises(UnknownCodecError):  # must_understand false does not make it skippable
        v3([LE, {"name": "foo", "must_understand": False}])


def test_unknown_numcodecs_id_never_reaches_numcodecs_registry(monkeypatch):
    import numcodecs.registry

    def boom(*a, **k):
        raise AssertionError("get_codec must not be called")

    monkeypatch.setattr(numcodecs.registry, "get_codec", boom)
    monkeypatch.setattr(numcodecs, "get_codec", boom)
    with pytest.raises(UnknownCodecError, match="'evil'"):
        v3([LE, {"name": "numcodecs.evil", "configuration": {}}])
    with pytest.raises(UnknownCodecError, match="'evil'"):
        pipeline_from_v2(compressor={"id": "evil"}, filters=None, data_type=dt2("<i4"), order="C")
    v3([LE, {"name": "numcodecs.zlib", "configuration": {"level": 1}}])  # allowed ids work without it


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "zstd", "configuration": {"level": 0, "foo": 1}}, ["'zstd'", "'foo'"]),
        ({"name": "zstd", "configuration": {"level": "high"}}, ["'level'", "'high'"]),
        ({"name": "zstd", "configuration": {"level": 0, "checksum": 1}}, ["'checksum'"]),
        ({"name": "gzip", "configuration": {"level": 11}}, ["'gzip'", "[0, 9]"]),
        ({"name": "blosc", "configuration": {"cname": "nope"}}, ["'cname'", "'nope'"]),
        ({"name": "blosc", "configuration": {"shuffle": "sometimes"}}, ["'shuffle'"]),
        ({"name": "crc32c", "configuration": {"x": 1}}, ["'crc32c'", "'x'"]),
        ({"name": "zstd", "configuration": [1]}, ["'configuration' must be an object"]),
        ({"name": "zstd", "extra": 1}, ["unknown key", "'extra'"]),
        ({"configuration": {}}, ["'name' string"]),
        ({"name": "numcodecs.zlib", "configuration": {"bogus": 1}}, ["invalid configuration", "'zlib'"]),
    ],
)
def test_bad_configurations(entry, words):
    with pytest.raises(MetadataError) as e:
        v3([LE, entry])
    for w in words:
        assert w in str(e.value)


def test_bytes_codec_endian_rules():
    with pytest.raises(MetadataError, match="needs 'endian'.*'int32'"):
        v3([{"name": "bytes"}])
    with pytest.raises(MetadataError, match="'endian'"):
        v3([{"name": "bytes", "configuration": {"endian": "middle"}}])
    v3([{"name": "bytes"}], dt=dt3("u1"))
    v3(["bytes"], dt=dt3("S3"))
    assert v3([{"name": "endian", "configuration": {"endian": "big"}}]).to_json() == [
        {"name": "bytes", "configuration": {"endian": "big"}}
    ]


def test_transpose_order_must_be_a_permutation():
    with pytest.raises(MetadataError, match=r"not a permutation of 0..1"):
        v3([{"name": "transpose", "configuration": {"order": [0, 0]}}, LE], shape=(2, 2))
    with pytest.raises(MetadataError, match="'order'"):
        v3([{"name": "transpose", "configuration": {"order": "X"}}, LE], shape=(2, 2))
    with pytest.raises(MetadataError, match="'order'"):
        v3(["transpose", LE], shape=(2, 2))


def test_vlen_and_type_mismatches():
    with pytest.raises(MetadataError, match="vlen-utf8"):
        v3([LE], dt=dt3(None, vlen="str"))
    with pytest.raises(MetadataError, match="use 'vlen-bytes'"):
        v3([{"name": "vlen-utf8"}], dt=dt3(None, vlen="bytes"))
    with pytest.raises(MetadataError, match="'vlen-utf8'"):
        v3([{"name": "vlen-utf8"}])
    with pytest.raises(MetadataError, match="filters"):
        pipeline_from_v2(compressor={"id": "zstd"}, filters=None, data_type=dt2(None, vlen="str"), order="C")
    with pytest.raises(MetadataError, match="packbits.*bool"):
        v3([{"name": "numcodecs.packbits"}, LE])


def test_v2_bad_inputs():
    with pytest.raises(MetadataError, match="'order'"):
        pipeline_from_v2(compressor=None, filters=None, data_type=dt2("<i4"), order="K")
    with pytest.raises(MetadataError, match="'id'"):
        pipeline_from_v2(compressor={"name": "zstd"}, filters=None, data_type=dt2("<i4"), order="C")
    with pytest.raises(MetadataError, match="list"):
        pipeline_from_v2(compressor=None, filters={"id": "zstd"}, data_type=dt2("<i4"), order="C")
    with pytest.raises(MetadataError, match="cannot follow"):
        pipeline_from_v2(
            compressor=None,
            filters=[{"id": "zlib"}, {"id": "delta", "dtype": "<i4"}],
            data_type=dt2("<i4"),
            order="C",
        )


# ---------------------------------------------------------------------------------------------- unsafe
UNSAFE_V2 = [
    (None, [{"id": "pickle"}]),
    ({"id": "pickle"}, None),
    (None, [{"id": "json2"}]),
    (None, [{"id": "msgpack2"}]),
    (None, [{"id": "vlen-array", "dtype": "<i4"}]),
]


@pytest.mark.parametrize(("compressor", "filters"), UNSAFE_V2)
def test_unsafe_v2_codecs_refused(compressor, filters):
    with pytest.raises(UnsafeCodecError, match="allow_unsafe_codecs=True"):
        pipeline_from_v2(compressor=compressor, filters=filters, data_type=dt2(None, vlen="str"), order="C")


@pytest.mark.parametrize("codec_id", ["pickle", "json2", "msgpack2", "vlen-array"])
def test_unsafe_v3_numcodecs_refused(codec_id):
    with pytest.raises(UnsafeCodecError, match=codec_id):
        v3([{"name": f"numcodecs.{codec_id}", "configuration": {}}])


def test_pickle_with_opt_in_roundtrips(monkeypatch):
    import numcodecs.pickles

    dt = dt2(None, vlen="str")
    p = pipeline_from_v2(
        compressor=None, filters=[{"id": "pickle"}], data_type=dt, order="C", allow_unsafe_codecs=True
    )
    chunk = np.array(["a", "bc"], dtype=object)
    encoded = p.encode(chunk, spec((2,), dt))
    if hasattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE"):  # numcodecs' own process-wide lock
        monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", False)
        with pytest.raises(UnsafeCodecError, match="NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE"):
            p.decode(encoded, spec((2,), dt))
        monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True)
    assert p.decode(encoded, spec((2,), dt)).tolist() == ["a", "bc"]
    j = pipeline_from_v2(
        compressor=None, filters=[{"id": "json2"}], data_type=dt, order="C", allow_unsafe_codecs=True
    )
    assert j.decode(j.encode(chunk, spec((2,), dt)), spec((2,), dt)).tolist() == ["a", "bc"]


# -------------------------------------------------------------------------------------- corrupt chunks
def _encoded(codecs, dt=I4, shape=(64,)):
    p = v3(codecs, dt=dt, shape=shape)
    chunk = np.arange(int(np.prod(shape))).astype(dt.numpy_dtype).reshape(shape)
    return p, p.encode(chunk, spec(shape, dt)), spec(shape, dt)


BLOSC = {
    "name": "blosc",
    "configuration": {"typesize": 4, "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
}
CHAINS = {
    "bytes": [LE],
    "zstd": [LE, ZSTD],
    "zstd-checksum": [LE, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
    "gzip": [LE, {"name": "gzip", "configuration": {"level": 1}}],
    "blosc": [LE, BLOSC],
    "crc32c": [LE, {"name": "crc32c"}],
    "lz4": [LE, {"name": "numcodecs.lz4", "configuration": {}}],
    "zlib": [LE, {"name": "numcodecs.zlib", "configuration": {}}],
    "bz2": [LE, {"name": "numcodecs.bz2", "configuration": {}}],
    "lzma": [LE, {"name": "numcodecs.lzma", "configuration": {}}],
    "vlen": [{"name": "vlen-utf8"}],
    "vlen+zstd": [{"name": "vlen-utf8"}, ZSTD],
}


def _chain(name):
    dt = dt3(None, vlen="str") if name.startswith("vlen") else I4
    p = v3(CHAINS[name], dt=dt, shape=(64,))
    chunk = np.array([str(i) for i in range(64)], dtype=object) if dt.vlen else np.arange(64, dtype="i4")
    return p, p.encode(chunk, spec((64,), dt)), spec((64,), dt)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_truncated_chunks_raise_chunk_decode_error(name):
    p, encoded, s = _chain(name)
    for cut in (1, 5, len(encoded) // 2, len(encoded) - 1):
        with pytest.raises(ChunkDecodeError):
            p.decode(encoded[:cut], s)
    with pytest.raises(ChunkDecodeError):
        p.decode(b"", s)


@pytest.mark.parametrize("name", ["zstd-checksum", "crc32c", "gzip", "zlib", "bz2", "lzma"])
def test_flipped_bytes_are_detected_by_checksummed_or_framed_codecs(name):
    p, encoded, s = _chain(name)
    bad = bytearray(encoded)
    bad[-5] ^= 0xFF
    with pytest.raises(ChunkDecodeError):
        p.decode(bytes(bad), s)


@pytest.mark.parametrize("name", ["bytes", "zstd", "gzip", "blosc", "lz4", "zlib", "bz2", "lzma"])
def test_wrong_decoded_size_is_reported(name):
    p, _, s = _chain(name)
    other = v3(CHAINS[name], shape=(32,))
    small = other.encode(np.arange(32, dtype="i4"), spec((32,), I4))
    with pytest.raises(ChunkDecodeError, match=r"decodes to|expected 256|corrupt|truncated"):
        p.decode(small, s)
    bigger = v3(CHAINS[name], shape=(128,)).encode(np.arange(128, dtype="i4"), spec((128,), I4))
    with pytest.raises(ChunkDecodeError):
        p.decode(bigger, s)


def test_wrong_size_message():
    p, _, s = _chain("bytes")
    with pytest.raises(
        ChunkDecodeError, match="chunk decodes to 12 bytes, expected 256: truncated or corrupt"
    ):
        p.decode(b"\x00" * 12, s)


def test_crc32c_mismatch_message():
    p, encoded, s = _chain("crc32c")
    with pytest.raises(ChunkDecodeError, match="checksum mismatch"):
        p.decode(encoded[:-1] + bytes([encoded[-1] ^ 1]), s)


def test_vlen_count_and_lengths_checked():
    p, encoded, s = _chain("vlen")
    with pytest.raises(ChunkDecodeError, match="holds 63 elements, expected 64"):
        p.decode((63).to_bytes(4, "little") + encoded[4:], s)
    huge = (64).to_bytes(4, "little") + (2**31).to_bytes(4, "little") + b"x" * 300
    with pytest.raises(ChunkDecodeError):
        p.decode(huge, s)
    with pytest.raises(ChunkDecodeError, match="cannot hold"):
        p.decode((64).to_bytes(4, "little") + b"\x00" * 20, s)
    with pytest.raises(ChunkDecodeError):  # invalid UTF-8
        p.decode(
            (64).to_bytes(4, "little") + b"".join((1).to_bytes(4, "little") + b"\xff" for _ in range(64)), s
        )


def test_encode_errors():
    p = v3([{"name": "vlen-utf8"}], dt=dt3(None, vlen="str"), shape=(2,))
    with pytest.raises(ChunkEncodeError, match="vlen-utf8"):
        p.encode(np.array(["a", 3], dtype=object), spec((2,), dt3(None, vlen="str")))
    with pytest.raises(ChunkEncodeError, match="shape"):
        v3([LE]).encode(np.zeros(3, "i4"), spec((4,), I4))


# -------------------------------------------------------------------------------------- decompression bombs
def _zstd_frame_without_size(payload: bytes) -> bytes:
    """A valid zstd frame (raw block) whose header does not declare the content size."""
    header = (len(payload) << 3) | 1  # last block, raw
    return bytes.fromhex("28b52ffd") + bytes([0x00, 0x58]) + header.to_bytes(3, "little") + payload


def test_zstd_bomb_declared_size_refused_before_allocating():
    import numcodecs

    p, _, s = _chain("zstd")  # expects 256 bytes
    bomb = numcodecs.Zstd(level=1).encode(np.zeros(50_000_000, "u1"))
    assert len(bomb) < 10_000
    with pytest.raises(ChunkDecodeError, match="50000000 bytes, expected 256"):
        p.decode(bomb, s)


def test_zstd_frame_without_content_size_is_bounded():
    p, _, s = _chain("zstd")
    ok = _zstd_frame_without_size(np.arange(64, dtype="<i4").tobytes())
    np.testing.assert_array_equal(p.decode(ok, s), np.arange(64))
    with pytest.raises(ChunkDecodeError):
        p.decode(_zstd_frame_without_size(b"\x00" * 100_000), s)
    with pytest.raises(ChunkDecodeError):
        p.decode(_zstd_frame_without_size(b"\x00" * 100), s)


def test_blosc_header_nbytes_checked_before_decompressing():
    import numcodecs

    p, _, s = _chain("blosc")
    bomb = numcodecs.Blosc(cname="lz4", clevel=9, shuffle=0).encode(np.zeros(10_000_000, "u1"))
    with pytest.raises(ChunkDecodeError, match="10000000 bytes, expected 256"):
        p.decode(bomb, s)
    with pytest.raises(ChunkDecodeError, match="16-byte header"):
        p.decode(bomb[:10], s)


@pytest.mark.parametrize(
    ("name", "compress"),
    [("gzip", lambda b: gzip.compress(b, mtime=0)), ("zlib", zlib.compress), ("bz2", bz2.compress)],
)
def test_stream_bombs_stop_at_expected_size(name, compress):
    p, _, s = _chain(name)
    with pytest.raises(ChunkDecodeError, match="more than the expected 256 bytes"):
        p.decode(compress(b"\x00" * 20_000_000), s)


def test_gzip_multi_member_and_zlib_streams_accepted():
    p, _, s = _chain("gzip")
    data = np.arange(64, dtype="<i4").tobytes()
    np.testing.assert_array_equal(
        p.decode(gzip.compress(data[:100]) + gzip.compress(data[100:]), s), np.arange(64)
    )
    np.testing.assert_array_equal(p.decode(zlib.compress(data), s), np.arange(64))


def test_lz4_size_prefix_checked():
    p, encoded, s = _chain("lz4")
    with pytest.raises(ChunkDecodeError, match="expected 256"):
        p.decode((10**9).to_bytes(4, "little") + encoded[4:], s)


def test_errors_chain_the_library_exception():
    p, encoded, s = _chain("zstd")
    with pytest.raises(ChunkDecodeError) as e:
        p.decode(encoded[:20], s)
    assert e.value.__cause__ is not None or "zstd" in str(e.value)
