"""Round-trips of every codec over the data types it accepts, v3 and v2."""

from __future__ import annotations

import numpy as np
import pytest

from tests.codecs._helpers import assert_same, dt2, dt3, roundtrip, sample, spec
from zarr_dask.codecs import pipeline_from_v2, pipeline_from_v3

FIXED_DTYPES = [
    "bool",
    "i1",
    "u1",
    "i2",
    "u2",
    "i4",
    "u4",
    "i8",
    "u8",
    "f2",
    "f4",
    "f8",
    "c8",
    "c16",
    "M8[s]",
    "m8[ms]",
    "U3",
    "S4",
    "V3",
    [("a", "<i4"), ("b", "<f8")],
]
NO_ENDIAN = {"bool", "i1", "u1", "S4", "V3"}
SHAPES = [(3, 4), (5,), (), (2, 3, 2)]

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}

BB_CHAINS = {
    "none": [],
    "zstd": [{"name": "zstd", "configuration": {"level": 0, "checksum": False}}],
    "zstd-checksum": [{"name": "zstd", "configuration": {"level": 3, "checksum": True}}],
    "gzip": [{"name": "gzip", "configuration": {"level": 5}}],
    "blosc-lz4-shuffle": [
        {
            "name": "blosc",
            "configuration": {
                "typesize": 4,
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "blocksize": 0,
            },
        }
    ],
    "blosc-zstd-bitshuffle": [
        {
            "name": "blosc",
            "configuration": {
                "typesize": 1,
                "cname": "zstd",
                "clevel": 3,
                "shuffle": "bitshuffle",
                "blocksize": 0,
            },
        }
    ],
    "blosc-noshuffle": [
        {
            "name": "blosc",
            "configuration": {"cname": "blosclz", "clevel": 1, "shuffle": "noshuffle", "blocksize": 0},
        }
    ],
    "crc32c": [{"name": "crc32c"}],
    "zstd+crc32c": [{"name": "zstd", "configuration": {"level": 0, "checksum": False}}, {"name": "crc32c"}],
    "numcodecs.blosc": [
        {
            "name": "numcodecs.blosc",
            "configuration": {"cname": "zstd", "clevel": 5, "shuffle": 2, "blocksize": 0},
        }
    ],
    "numcodecs.zstd": [{"name": "numcodecs.zstd", "configuration": {"level": 1}}],
    "numcodecs.gzip": [{"name": "numcodecs.gzip", "configuration": {"level": 1}}],
    "numcodecs.zlib": [{"name": "numcodecs.zlib", "configuration": {"level": 1}}],
    "numcodecs.lz4": [{"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}],
    "numcodecs.bz2": [{"name": "numcodecs.bz2", "configuration": {"level": 1}}],
    "numcodecs.lzma": [{"name": "numcodecs.lzma", "configuration": {}}],
    "numcodecs.shuffle": [
        {"name": "numcodecs.shuffle", "configuration": {}},
        {"name": "numcodecs.zlib", "configuration": {}},
    ],
    "numcodecs.crc32": [{"name": "numcodecs.crc32", "configuration": {}}],
    "numcodecs.crc32c": [{"name": "numcodecs.crc32c", "configuration": {}}],
    "numcodecs.adler32": [{"name": "numcodecs.adler32", "configuration": {}}],
    "numcodecs.fletcher32": [{"name": "numcodecs.fletcher32", "configuration": {}}],
    "numcodecs.jenkins_lookup3": [{"name": "numcodecs.jenkins_lookup3", "configuration": {}}],
    "lz4+crc32c": [{"name": "numcodecs.lz4", "configuration": {}}, {"name": "crc32c"}],
}


DTYPE_ENDIAN = [(d, e) for d in FIXED_DTYPES for e in ("little", "big", None) if e or str(d) in NO_ENDIAN]


@pytest.mark.parametrize(("dtype", "endian"), DTYPE_ENDIAN, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_v3_bytes_zstd_every_dtype(dtype, endian, shape):
    dt = dt3(dtype)
    ser = {"name": "bytes"} if endian is None else {"name": "bytes", "configuration": {"endian": endian}}
    p = pipeline_from_v3([ser, "zstd"], data_type=dt, chunk_shape=shape or ())
    chunk = sample(shape, dt)
    _, decoded = roundtrip(p, chunk, spec(shape, dt))
    assert_same(chunk, decoded)


@pytest.mark.parametrize("chain", sorted(BB_CHAINS))
@pytest.mark.parametrize("dtype", ["u1", "i4", "f8", "c16", "U3", [("a", "<i4"), ("b", "<f8")]], ids=str)
def test_v3_every_bytes_codec(chain, dtype):
    dt = dt3(dtype)
    for ser in (LE, BE):
        p = pipeline_from_v3([ser, *BB_CHAINS[chain]], data_type=dt, chunk_shape=(6, 5))
        chunk = sample((6, 5), dt, seed=1)
        _, decoded = roundtrip(p, chunk, spec((6, 5), dt))
        assert_same(chunk, decoded)


@pytest.mark.parametrize("order", [[1, 0], "F", "C", [0, 1]])
@pytest.mark.parametrize("chain", ["none", "zstd", "gzip"])
def test_v3_transpose(order, chain):
    dt = dt3("i4")
    codecs = [{"name": "transpose", "configuration": {"order": order}}, LE, *BB_CHAINS[chain]]
    p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(3, 4))
    chunk = sample((3, 4), dt)
    _, decoded = roundtrip(p, chunk, spec((3, 4), dt))
    np.testing.assert_array_equal(decoded, chunk)
    assert isinstance(p.to_json()[0]["configuration"]["order"], list)


def test_v3_transpose_3d_and_two_transposes():
    dt = dt3("u2")
    codecs = [
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
        {"name": "transpose", "configuration": {"order": [1, 0, 2]}},
        BE,
        "zstd",
    ]
    p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(2, 3, 4))
    chunk = sample((2, 3, 4), dt)
    encoded, decoded = roundtrip(p, chunk, spec((2, 3, 4), dt))
    np.testing.assert_array_equal(decoded, chunk)
    moved = chunk.transpose(2, 0, 1).transpose(1, 0, 2)
    plain = pipeline_from_v3([BE, "zstd"], data_type=dt, chunk_shape=moved.shape)
    assert plain.encode(moved, spec(moved.shape, dt)) == encoded


AA_CASES = [
    ("i4", {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}),
    ("i4", {"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i8"}}),
    ("f8", {"name": "numcodecs.bitround", "configuration": {"keepbits": 52}}),
    (
        "f8",
        {
            "name": "numcodecs.fixedscaleoffset",
            "configuration": {"offset": 0, "scale": 1, "dtype": "<f8", "astype": "<i4"},
        },
    ),
    (
        "f8",
        {"name": "numcodecs.fixedscaleoffset", "configuration": {"offset": 0, "scale": 1, "astype": "<i4"}},
    ),
    ("f4", {"name": "numcodecs.quantize", "configuration": {"digits": 10, "dtype": "<f4"}}),
    ("f8", {"name": "numcodecs.astype", "configuration": {"encode_dtype": "<f8", "decode_dtype": "<f8"}}),
    ("i8", {"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i4"}}),
    ("bool", {"name": "numcodecs.packbits", "configuration": {}}),
]


@pytest.mark.parametrize(("dtype", "codec"), AA_CASES, ids=lambda x: x["name"] if isinstance(x, dict) else x)
def test_v3_numcodecs_array_filters(dtype, codec):
    dt = dt3(dtype)
    p = pipeline_from_v3([codec, LE, "zstd"], data_type=dt, chunk_shape=(4, 5))
    chunk = sample((4, 5), dt)
    if dt.numpy_dtype.kind == "f":
        chunk = np.round(chunk * 7)
    _, decoded = roundtrip(p, chunk, spec((4, 5), dt))
    np.testing.assert_array_equal(decoded, chunk)


def test_v3_fixedscaleoffset_fills_dtype_from_input():
    dt = dt3("f8")
    p = pipeline_from_v3([AA_CASES[4][1], LE], data_type=dt, chunk_shape=(3,))
    assert p.to_json()[0]["configuration"]["dtype"] == "<f8"
    assert len(p.encode(np.array([1.0, 2.0, 3.0]), spec((3,), dt))) == 12  # stored as int32


@pytest.mark.parametrize("vlen", ["str", "bytes"])
@pytest.mark.parametrize("chain", ["none", "zstd", "gzip", "zstd+crc32c", "numcodecs.zlib"])
@pytest.mark.parametrize("shape", [(7,), (2, 3), ()], ids=str)
def test_v3_vlen(vlen, chain, shape):
    dt = dt3(None, vlen=vlen)
    ser = {"name": "vlen-utf8" if vlen == "str" else "vlen-bytes", "configuration": {}}
    p = pipeline_from_v3([ser, *BB_CHAINS[chain]], data_type=dt, chunk_shape=shape)
    chunk = sample(shape, dt)
    _, decoded = roundtrip(p, chunk, spec(shape, dt))
    assert decoded.tolist() == chunk.tolist()


def test_v3_vlen_accepts_numpy_string_arrays():
    dt = dt3(None, vlen="str")
    p = pipeline_from_v3([{"name": "vlen-utf8"}], data_type=dt, chunk_shape=(2,))
    encoded = p.encode(np.array(["a", "bc"]), spec((2,), dt))
    assert p.decode(encoded, spec((2,), dt)).tolist() == ["a", "bc"]


# ---------------------------------------------------------------------------------------------------- v2
V2_COMPRESSORS = {
    "none": None,
    "blosc-lz4": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "blosc-zstd-bit": {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0},
    "blosc-auto": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": -1, "blocksize": 0},
    "zstd": {"id": "zstd", "level": 1},
    "gzip": {"id": "gzip", "level": 1},
    "zlib": {"id": "zlib", "level": 1},
    "lz4": {"id": "lz4", "acceleration": 1},
    "bz2": {"id": "bz2", "level": 1},
    "lzma": {"id": "lzma"},
}
V2_DTYPES = [
    "|b1",
    "|i1",
    "<i2",
    ">i4",
    "<u8",
    "<f4",
    ">f8",
    "<c16",
    "<M8[ns]",
    ">m8[s]",
    "<U3",
    ">U2",
    "|S4",
    "|V2",
    [("x", "<f4"), ("y", ">i2")],
]


@pytest.mark.parametrize("compressor", sorted(V2_COMPRESSORS))
@pytest.mark.parametrize("dtype", V2_DTYPES, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_compressors(compressor, dtype, order):
    dt = dt2(dtype)
    p = pipeline_from_v2(compressor=V2_COMPRESSORS[compressor], filters=None, data_type=dt, order=order)
    s = spec((4, 3), dt, order=order)
    chunk = sample((4, 3), dt)
    _, decoded = roundtrip(p, chunk, s)
    assert decoded.dtype == np.dtype(dtype)
    assert_same(chunk, decoded)
    if order == "F":
        assert decoded.flags.f_contiguous


V2_FILTERS = [
    ("<i4", [{"id": "delta", "dtype": "<i4"}]),
    ("<i4", [{"id": "delta", "dtype": "<i4", "astype": "<i2"}]),
    ("<f8", [{"id": "fixedscaleoffset", "offset": 0, "scale": 1, "dtype": "<f8", "astype": "<i4"}]),
    ("<f8", [{"id": "quantize", "digits": 10, "dtype": "<f8"}]),
    ("<f8", [{"id": "bitround", "keepbits": 52}]),
    ("<f8", [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}]),
    ("|b1", [{"id": "packbits"}]),
    ("<i4", [{"id": "shuffle", "elementsize": 4}]),
    ("<i4", [{"id": "crc32c"}]),
    ("<i4", [{"id": "delta", "dtype": "<i4"}, {"id": "crc32"}]),
    (">i8", [{"id": "delta", "dtype": ">i8"}, {"id": "shuffle", "elementsize": 8}]),
]


@pytest.mark.parametrize(("dtype", "filters"), V2_FILTERS, ids=str)
@pytest.mark.parametrize("compressor", ["none", "blosc-lz4", "zstd"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_filters(dtype, filters, compressor, order):
    dt = dt2(dtype)
    p = pipeline_from_v2(compressor=V2_COMPRESSORS[compressor], filters=filters, data_type=dt, order=order)
    s = spec((4, 5), dt, order=order)
    chunk = sample((4, 5), dt)
    if dt.numpy_dtype.kind == "f":
        chunk = np.round(chunk * 7)
    _, decoded = roundtrip(p, chunk, s)
    np.testing.assert_array_equal(decoded, chunk)


@pytest.mark.parametrize("vlen", ["str", "bytes"])
@pytest.mark.parametrize("where", ["filter", "compressor"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_object_codecs(vlen, where, order):
    dt = dt2(None, vlen=vlen)
    obj = {"id": "vlen-utf8" if vlen == "str" else "vlen-bytes"}
    if where == "filter":
        p = pipeline_from_v2(compressor={"id": "zstd", "level": 1}, filters=[obj], data_type=dt, order=order)
    else:
        p = pipeline_from_v2(compressor=obj, filters=None, data_type=dt, order=order)
    s = spec((3, 2), dt, order=order)
    chunk = sample((3, 2), dt)
    _, decoded = roundtrip(p, chunk, s)
    assert decoded.tolist() == chunk.tolist()


def test_decoded_arrays_may_be_read_only_but_are_correct():
    dt = dt3("i4")
    p = pipeline_from_v3([LE], data_type=dt, chunk_shape=(3,))
    out = p.decode(np.arange(3, dtype="<i4").tobytes(), spec((3,), dt))
    assert out.tolist() == [0, 1, 2]
    assert not out.flags.writeable  # zero copy view of the stored bytes
    fast = pipeline_from_v3([LE, "zstd"], data_type=dt, chunk_shape=(3,))
    decoded = fast.decode(fast.encode(out, spec((3,), dt)), spec((3,), dt))
    assert decoded.flags.writeable and decoded.flags.c_contiguous


def test_decode_accepts_memoryview_bytearray_and_ndarray():
    dt = dt3("f4")
    for chain in (
        ["zstd"],
        ["gzip"],
        [
            {
                "name": "blosc",
                "configuration": {
                    "cname": "lz4",
                    "clevel": 1,
                    "shuffle": "shuffle",
                    "typesize": 4,
                    "blocksize": 0,
                },
            }
        ],
        ["crc32c"],
        [],
    ):
        p = pipeline_from_v3([LE, *chain], data_type=dt, chunk_shape=(8,))
        s = spec((8,), dt)
        encoded = p.encode(np.arange(8, dtype="f4"), s)
        for data in (
            encoded,
            memoryview(encoded),
            bytearray(encoded),
            np.frombuffer(encoded, "u1"),
            memoryview(b"xx" + encoded)[2:],
        ):
            np.testing.assert_array_equal(p.decode(data, s), np.arange(8, dtype="f4"))


def test_rectilinear_chunk_shapes_resolve_on_first_use():
    dt = dt3("i2")
    p = pipeline_from_v3(
        [{"name": "transpose", "configuration": {"order": [1, 0]}}, LE, "zstd"],
        data_type=dt,
        chunk_shape=(4, 4),
    )
    for shape in [(4, 4), (2, 3), (1, 7), (4, 4)]:
        chunk = sample(shape, dt)
        _, decoded = roundtrip(p, chunk, spec(shape, dt))
        np.testing.assert_array_equal(decoded, chunk)


def test_vlen_directly_before_a_checksum():
    dt = dt3(None, vlen="bytes")
    p = pipeline_from_v3([{"name": "vlen-bytes"}, {"name": "crc32c"}], data_type=dt, chunk_shape=(3,))
    chunk = np.array([b"", b"a", b"bc"], dtype=object)
    _, decoded = roundtrip(p, chunk, spec((3,), dt))
    assert decoded.tolist() == chunk.tolist()
