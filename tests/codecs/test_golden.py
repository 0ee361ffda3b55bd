"""Golden bytes: layouts fixed by the spec (digest §2.13, §2.15, §1.6)."""

from __future__ import annotations

import numpy as np

from tests.codecs._helpers import dt2, dt3, spec
from zarr_dask.codecs import pipeline_from_v2, pipeline_from_v3

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}


def test_crc32c_check_value():
    # RFC 3720 / the Castagnoli check value: CRC-32C("123456789") = 0xE3069283, stored u32 little-endian
    dt = dt3("u1")
    p = pipeline_from_v3([{"name": "bytes"}, {"name": "crc32c"}], data_type=dt, chunk_shape=(9,))
    chunk = np.frombuffer(b"123456789", dtype="u1")
    assert p.encode(chunk, spec((9,), dt)) == b"123456789" + bytes.fromhex("839206e3")


def test_vlen_utf8_layout_from_digest():
    dt = dt3(None, vlen="str")
    p = pipeline_from_v3([{"name": "vlen-utf8", "configuration": {}}], data_type=dt, chunk_shape=(2,))
    s = spec((2,), dt)
    encoded = p.encode(np.array(["hé", ""], dtype=object), s)
    assert encoded == bytes.fromhex("020000000300000068c3a900000000")
    assert p.decode(encoded, s).tolist() == ["hé", ""]


def test_vlen_bytes_layout():
    dt = dt3(None, vlen="bytes")
    p = pipeline_from_v3([{"name": "vlen-bytes", "configuration": {}}], data_type=dt, chunk_shape=(2,))
    encoded = p.encode(np.array([b"ab", b""], dtype=object), spec((2,), dt))
    assert encoded == bytes.fromhex("0200000002000000616200000000")


def test_bytes_endianness_layout():
    dt = dt3("u2")
    chunk = np.array([1, 0x0203], dtype="u2")
    little = pipeline_from_v3([LE], data_type=dt, chunk_shape=(2,))
    big = pipeline_from_v3([BE], data_type=dt, chunk_shape=(2,))
    assert little.encode(chunk, spec((2,), dt)) == bytes.fromhex("01000302")
    assert big.encode(chunk, spec((2,), dt)) == bytes.fromhex("00010203")
    decoded = big.decode(bytes.fromhex("00010203"), spec((2,), dt))
    assert decoded.dtype == np.dtype("u2") and decoded.tolist() == [1, 0x0203]


def test_bool_and_complex_layout():
    dt = dt3("bool")
    p = pipeline_from_v3([{"name": "bytes"}], data_type=dt, chunk_shape=(3,))
    assert p.encode(np.array([True, False, True]), spec((3,), dt)) == b"\x01\x00\x01"
    dc = dt3("c8")
    p = pipeline_from_v3([LE], data_type=dc, chunk_shape=(1,))
    assert p.encode(np.array([1 + 2j], dtype="c8"), spec((1,), dc)) == np.array([1.0, 2.0], "<f4").tobytes()


def test_transpose_stores_fortran_order():
    dt = dt3("u1")
    p = pipeline_from_v3(
        [{"name": "transpose", "configuration": {"order": [1, 0]}}, {"name": "bytes"}],
        data_type=dt,
        chunk_shape=(2, 3),
    )
    chunk = np.arange(6, dtype="u1").reshape(2, 3)
    assert p.encode(chunk, spec((2, 3), dt)) == bytes([0, 3, 1, 4, 2, 5])


def test_v2_order_f_layout():
    dt = dt2("<i2")
    p = pipeline_from_v2(compressor=None, filters=None, data_type=dt, order="F")
    chunk = np.arange(6, dtype="<i2").reshape(2, 3)
    s = spec((2, 3), dt, order="F")
    assert p.encode(chunk, s) == np.array([0, 3, 1, 4, 2, 5], "<i2").tobytes()
    np.testing.assert_array_equal(p.decode(p.encode(chunk, s), s), chunk)


def test_v2_blosc_header_typesize_from_dtype():
    # numcodecs Blosc records the itemsize of the buffer it is given (byte 3 of the header)
    for typestr, size in [("<i4", 4), ("<f8", 8), ("|u1", 1), ("<i2", 2)]:
        dt = dt2(typestr)
        p = pipeline_from_v2(
            compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
            filters=None,
            data_type=dt,
            order="C",
        )
        encoded = p.encode(np.arange(64).astype(typestr), spec((64,), dt))
        assert encoded[0] == 2 and encoded[3] == size, typestr
        assert int.from_bytes(encoded[4:8], "little") == 64 * size


def test_v3_blosc_header_typesize_from_configuration():
    dt = dt3("f8")
    codecs = [
        LE,
        {
            "name": "blosc",
            "configuration": {
                "typesize": 8,
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "blocksize": 0,
            },
        },
    ]
    p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(16,))
    assert p.encode(np.arange(16, dtype="f8"), spec((16,), dt))[3] == 8


def test_zstd_frame_magic_and_gzip_magic():
    dt = dt3("u1")
    zstd = pipeline_from_v3(
        [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
        data_type=dt,
        chunk_shape=(8,),
    )
    gzip = pipeline_from_v3(
        [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}], data_type=dt, chunk_shape=(8,)
    )
    chunk = np.arange(8, dtype="u1")
    z = zstd.encode(chunk, spec((8,), dt))
    assert z[:4] == bytes.fromhex("28b52ffd") and z[4] & 0x04  # content checksum flag
    assert gzip.encode(chunk, spec((8,), dt))[:2] == bytes.fromhex("1f8b")


def test_fixed_length_utf32_little_endian():
    dt = dt3("U2")
    p = pipeline_from_v3([LE], data_type=dt, chunk_shape=(1,))
    assert p.encode(np.array(["ab"], dtype="U2"), spec((1,), dt)) == "ab".encode("utf-32-le")
    pb = pipeline_from_v3([BE], data_type=dt, chunk_shape=(1,))
    assert pb.encode(np.array(["ab"], dtype="U2"), spec((1,), dt)) == "ab".encode("utf-32-be")
    assert pb.decode("ab".encode("utf-32-be"), spec((1,), dt)).tolist() == ["ab"]
