"""User codec arguments -> the JSON zarr-python writes (digest §1.2, §2.3, §2.13, §3)."""

from __future__ import annotations

import numcodecs
import pytest

from tests.codecs._helpers import dt2, dt3
from zarr_dask.codecs import pipeline_from_v2, pipeline_from_v3, v2_codecs_from_user, v3_codecs_from_user
from zarr_dask.errors import MetadataError, UnknownCodecError, UnsafeCodecError

ZSTD0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
LE = {"name": "bytes", "configuration": {"endian": "little"}}


@pytest.mark.parametrize(
    ("dt", "expected"),
    [
        (dt3("i4"), [LE, ZSTD0]),
        (dt3("f8"), [LE, ZSTD0]),
        (dt3("u1"), [{"name": "bytes"}, ZSTD0]),
        (dt3("bool"), [{"name": "bytes"}, ZSTD0]),
        (dt3("S3"), [{"name": "bytes"}, ZSTD0]),
        (dt3("U5"), [LE, ZSTD0]),
        (dt3("M8[s]"), [LE, ZSTD0]),
        (dt3(None, vlen="str"), [{"name": "vlen-utf8", "configuration": {}}, ZSTD0]),
        (dt3(None, vlen="bytes"), [{"name": "vlen-bytes", "configuration": {}}, ZSTD0]),
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_v3_auto_defaults(dt, expected):
    assert v3_codecs_from_user(data_type=dt) == expected


def test_v3_none_and_empty():
    dt = dt3("i4")
    assert v3_codecs_from_user(data_type=dt, compressors=None) == [LE]
    assert v3_codecs_from_user(data_type=dt, compressors=[], filters=[]) == [LE]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (numcodecs.Zstd(level=3), {"name": "zstd", "configuration": {"level": 3, "checksum": False}}),
        (
            numcodecs.Zstd(level=3, checksum=True),
            {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
        ),
        (numcodecs.GZip(level=4), {"name": "gzip", "configuration": {"level": 4}}),
        (
            numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "lz4",
                    "clevel": 5,
                    "shuffle": "shuffle",
                    "blocksize": 0,
                },
            },
        ),
        (
            numcodecs.Blosc(cname="zstd", clevel=3, shuffle=-1),
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "zstd",
                    "clevel": 3,
                    "shuffle": "shuffle",
                    "blocksize": 0,
                },
            },
        ),
        (
            numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2),
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "zstd",
                    "clevel": 3,
                    "shuffle": "bitshuffle",
                    "blocksize": 0,
                },
            },
        ),
        (numcodecs.CRC32C(), {"name": "crc32c"}),
        (numcodecs.Zlib(level=2), {"name": "numcodecs.zlib", "configuration": {"level": 2}}),
        (numcodecs.LZ4(), {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
        ({"id": "zstd", "level": 2}, {"name": "zstd", "configuration": {"level": 2, "checksum": False}}),
        (
            {"id": "blosc", "cname": "lz4", "clevel": 1, "shuffle": 0, "blocksize": 0},
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "lz4",
                    "clevel": 1,
                    "shuffle": "noshuffle",
                    "blocksize": 0,
                },
            },
        ),
        (
            {"name": "zstd", "configuration": {"level": 5}},
            {"name": "zstd", "configuration": {"level": 5, "checksum": False}},
        ),
        ("zstd", ZSTD0),
        ("gzip", {"name": "gzip", "configuration": {"level": 5}}),
        (
            "blosc",
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "zstd",
                    "clevel": 5,
                    "shuffle": "shuffle",
                    "blocksize": 0,
                },
            },
        ),
        ("crc32c", {"name": "crc32c"}),
    ],
    ids=repr,
)
def test_v3_compressor_translation(given, expected):
    dt = dt3("i4")
    assert v3_codecs_from_user(data_type=dt, compressors=given) == [LE, expected]
    assert v3_codecs_from_user(data_type=dt, compressors=[given]) == [LE, expected]


def test_v3_blosc_auto_shuffle_for_one_byte_types():
    got = v3_codecs_from_user(data_type=dt3("u1"), compressors=numcodecs.Blosc(shuffle=-1))
    assert got[1]["configuration"]["shuffle"] == "bitshuffle" and got[1]["configuration"]["typesize"] == 1
    got = v3_codecs_from_user(data_type=dt3(None, vlen="str"), compressors="blosc")
    assert got[1]["configuration"]["typesize"] == 1


def test_v3_filters_and_serializer():
    dt = dt3("i4")
    got = v3_codecs_from_user(
        data_type=dt,
        filters=[numcodecs.Delta(dtype="<i4"), {"name": "transpose", "configuration": {"order": [0]}}],
        serializer={"name": "bytes", "configuration": {"endian": "big"}},
        compressors=[numcodecs.Zstd(level=1), numcodecs.CRC32C()],
    )
    assert got == [
        {"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i4"}},
        {"name": "transpose", "configuration": {"order": [0]}},
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
        {"name": "crc32c"},
    ]
    pipeline_from_v3(got, data_type=dt, chunk_shape=(3,))  # valid


def test_v3_numcodecs_filter_defaults_filled_from_dtype():
    got = v3_codecs_from_user(
        data_type=dt3("f8"),
        filters={
            "name": "numcodecs.fixedscaleoffset",
            "configuration": {"offset": 1, "scale": 10, "astype": "<i4"},
        },
    )
    assert got[0]["configuration"]["dtype"] == "<f8"


def test_v3_duck_typed_zarr_codec_objects():
    class FakeZarrCodec:
        def to_dict(self):
            return {"name": "gzip", "configuration": {"level": 2}}

    assert v3_codecs_from_user(data_type=dt3("u1"), compressors=FakeZarrCodec())[1] == {
        "name": "gzip",
        "configuration": {"level": 2},
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (
            {"compressors": numcodecs.Delta(dtype="<i4")},
            MetadataError,
            ["compressors", "'numcodecs.delta'", "'filters'"],
        ),
        ({"filters": "zstd"}, MetadataError, ["filters", "'zstd'", "'compressors'"]),
        ({"serializer": "zstd"}, MetadataError, ["serializer", "'compressors'"]),
        ({"serializer": None}, MetadataError, ["serializer"]),
        ({"compressors": "nope"}, UnknownCodecError, ["'nope'"]),
        ({"compressors": 42}, MetadataError, ["not a codec"]),
        ({"serializer": numcodecs.Pickle()}, UnsafeCodecError, ["pickle"]),
        ({"serializer": {"name": "bytes"}}, MetadataError, ["endian"]),
    ],
)
def test_v3_user_errors(kwargs, error, words):
    with pytest.raises(error) as e:
        v3_codecs_from_user(data_type=dt3("i4"), **kwargs)
    for w in words:
        assert w in str(e.value)


# ------------------------------------------------------------------------------------------------------ v2
BLOSC_DEFAULT = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}


def test_v2_auto_defaults():
    assert v2_codecs_from_user(data_type=dt2("<i4")) == (BLOSC_DEFAULT, None)
    assert v2_codecs_from_user(data_type=dt2(None, vlen="str")) == (BLOSC_DEFAULT, [{"id": "vlen-utf8"}])
    assert v2_codecs_from_user(data_type=dt2(None, vlen="bytes"), compressors=None) == (
        None,
        [{"id": "vlen-bytes"}],
    )
    assert v2_codecs_from_user(data_type=dt2("<f8"), compressors=None, filters=[]) == (None, None)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # zstd without "checksum": false, as zarr-python writes it (tensorstore refuses the extra member)
        (numcodecs.Zstd(level=3), {"id": "zstd", "level": 3}),
        ({"id": "zstd", "level": 1, "checksum": False}, {"id": "zstd", "level": 1}),
        (numcodecs.Zstd(level=2, checksum=True), {"id": "zstd", "level": 2, "checksum": True}),
        (
            numcodecs.Blosc(cname="zstd", clevel=2, shuffle=2),
            {"id": "blosc", "cname": "zstd", "clevel": 2, "shuffle": 2, "blocksize": 0},
        ),
        ({"id": "gzip", "level": 3}, {"id": "gzip", "level": 3}),
        (
            {"name": "zstd", "configuration": {"level": 4, "checksum": True}},
            {"id": "zstd", "level": 4, "checksum": True},
        ),
        ({"name": "gzip", "configuration": {"level": 4}}, {"id": "gzip", "level": 4}),
        (
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 4,
                    "cname": "lz4",
                    "clevel": 5,
                    "shuffle": "bitshuffle",
                    "blocksize": 0,
                },
            },
            {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
        ),
        ({"name": "crc32c"}, {"id": "crc32c"}),
        ({"name": "numcodecs.zlib", "configuration": {"level": 1}}, {"id": "zlib", "level": 1}),
        ("zstd", {"id": "zstd", "level": 0}),
        ({"name": "zstd", "configuration": {"level": 4, "checksum": False}}, {"id": "zstd", "level": 4}),
        ("blosc", BLOSC_DEFAULT),
        ("numcodecs.bz2", {"id": "bz2", "level": 1}),
    ],
    ids=repr,
)
def test_v2_compressor_translation(given, expected):
    compressor, filters = v2_codecs_from_user(data_type=dt2("<i4"), compressors=given)
    assert compressor == expected and filters is None
    pipeline_from_v2(compressor=compressor, filters=filters, data_type=dt2("<i4"), order="C")


def test_v2_filters():
    compressor, filters = v2_codecs_from_user(
        data_type=dt2("<i4"),
        filters=[
            numcodecs.Delta(dtype="<i4"),
            {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
        ],
        compressors=None,
    )
    assert compressor is None
    assert filters == [{"id": "delta", "dtype": "<i4", "astype": "<i4"}, {"id": "shuffle", "elementsize": 4}]
    _, filters = v2_codecs_from_user(data_type=dt2(None, vlen="str"), filters=[numcodecs.VLenUTF8()])
    assert filters == [{"id": "vlen-utf8"}]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"compressors": ["zstd", "gzip"]}, MetadataError, ["single compressor", "2"]),
        ({"compressors": {"name": "bytes"}}, MetadataError, ["'bytes'", "no Zarr v2 equivalent"]),
        ({"filters": [{"name": "transpose", "configuration": {"order": [0]}}]}, MetadataError, ["order='F'"]),
        ({"compressors": {"id": "evil"}}, UnknownCodecError, ["'evil'"]),
        ({"filters": [numcodecs.Pickle()]}, UnsafeCodecError, ["pickle"]),
        ({"compressors": "delta"}, MetadataError, ["'delta'", "invalid configuration"]),
    ],
)
def test_v2_user_errors(kwargs, error, words):
    with pytest.raises(error) as e:
        v2_codecs_from_user(data_type=dt2("<i4"), **kwargs)
    for w in words:
        assert w in str(e.value)


def test_v2_unsafe_with_opt_in():
    got = v2_codecs_from_user(
        data_type=dt2(None, vlen="str"),
        filters=[numcodecs.Pickle()],
        compressors=None,
        allow_unsafe_codecs=True,
    )
    assert got == (None, [{"id": "pickle", "protocol": numcodecs.Pickle().protocol}])


def test_created_codecs_build_working_pipelines():
    for dt in (dt3("i4"), dt3("u1"), dt3(None, vlen="str"), dt3("f8")):
        codecs = v3_codecs_from_user(data_type=dt, compressors=["blosc", "crc32c"])
        p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(4,))
        assert p.to_json() == codecs


def test_v3_with_chunk_shape_resolves_shape_dependent_codecs():
    dt = dt3("f4")
    sharded = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, "blosc"],
        },
    }
    got = v3_codecs_from_user(
        data_type=dt,
        filters=[{"name": "transpose", "configuration": {"order": "F"}}],
        serializer=sharded,
        compressors=None,
        chunk_shape=(4, 6),
    )
    assert got[0] == {"name": "transpose", "configuration": {"order": [1, 0]}}
    inner = got[1]["configuration"]
    assert inner["codecs"][1] == {
        "name": "blosc",
        "configuration": {"typesize": 4, "cname": "zstd", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
    }
    assert inner["index_codecs"] == [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "crc32c"},
    ]
    assert inner["index_location"] == "end"
    with pytest.raises(MetadataError, match="must divide"):
        v3_codecs_from_user(data_type=dt, serializer=sharded, chunk_shape=(3, 3))
