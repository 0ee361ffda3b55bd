"""The zarr-extensions codecs of 2025-26 by their registered names: bitround, packbits, reshape, conditional,
n5_default. tensorstore 0.1.86 implements none of them ("... is not registered"), so the interop legs are the
registry's sample data (bitround) and numcodecs where it implements the algorithm."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import MetadataError

LE = {"name": "bytes", "configuration": {"endian": "little"}}
REGISTRY = Path("/work/.mirror/zarr-developers+zarr-extensions/repo")  # a fetched snapshot, when present


def _array(tmp_path, data, codecs, chunks=None, fill_value=None, name="a.zarr"):
    doc = {"zarr_format": 3, "node_type": "array", "shape": list(data.shape), "data_type": _name(data.dtype),
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks or data.shape)}},
           "chunk_key_encoding": {"name": "default"}, "codecs": codecs,
           "fill_value": 0 if fill_value is None else fill_value}  # fmt: skip
    (tmp_path / name).mkdir()
    (tmp_path / name / "zarr.json").write_text(json.dumps(doc))
    arr = zarr_dask.open_array(tmp_path / name, mode="r+")
    arr[...] = data
    return arr


def _name(dtype):
    return zarr_dask.create_array("memory://names", shape=(1,), dtype=dtype, overwrite=True).metadata.data_type.to_json()


# ------------------------------------------------------------------------------------------------ bitround
#: the registry's sample data (codecs/bitround/sample_data/README.md): keepbits 3
SAMPLE_F4 = ([0.0, 0.1, 1.2, 12.3, 123.4, 1234.5, np.nan, np.inf, -np.inf],
             [0.0, 0.1015625, 1.25, 12.0, 120.0, 1280.0, np.nan, np.inf, -np.inf])  # fmt: skip
SAMPLE_U1 = ([0, 1, 10, 11, 100, 123, 200, 208, 209, 255], [0, 1, 10, 12, 96, 128, 192, 192, 224, 224])
BITROUND3 = {"name": "bitround", "configuration": {"keepbits": 3}}


@pytest.mark.parametrize(("dtype", "sample"), [("f4", SAMPLE_F4), ("u1", SAMPLE_U1)])
def test_bitround_matches_the_registry_sample_data(tmp_path, dtype, sample):
    original, rounded = (np.array(v, dtype=dtype) for v in sample)
    arr = _array(tmp_path, original, [BITROUND3, LE])
    assert (tmp_path / "a.zarr" / "c" / "0").read_bytes() == rounded.tobytes()
    np.testing.assert_array_equal(arr[...], rounded)


@pytest.mark.parametrize("sample", ["bitround_float32.zarr", "bitround_uint8.zarr"])
def test_bitround_reads_the_registry_sample_arrays(tmp_path, sample):
    """The sample arrays themselves, read from a fetched snapshot of zarr-extensions (skipped without one)."""
    where = f"codecs/bitround/sample_data/{sample}"
    if not (REGISTRY / "HEAD").exists():
        pytest.skip("no snapshot of zarr-developers/zarr-extensions on this machine")
    for part in ("zarr.json", "c/0"):
        out = tmp_path / sample / part
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(subprocess.run(["git", "-C", str(REGISTRY), "show", f"HEAD:{where}/{part}"],
                                       capture_output=True, check=True).stdout)  # fmt: skip
    arr = zarr_dask.open_array(tmp_path / sample)
    expected = SAMPLE_F4[1] if arr.dtype == np.float32 else SAMPLE_U1[1]
    np.testing.assert_array_equal(arr[...], np.array(expected, dtype=arr.dtype))
    assert arr.metadata.codecs[0] == BITROUND3


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c8", "c16"])
def test_bitround_floats_are_numcodecs_bitround(tmp_path, dtype):
    numcodecs = pytest.importorskip("numcodecs")
    data = (np.random.default_rng(0).normal(size=(6, 7)) * 100).astype(dtype)
    if dtype.startswith("c"):
        data = data + 1j * data[::-1]
    _array(tmp_path, data, [{"name": "bitround", "configuration": {"keepbits": 5}}, LE])
    part = f"f{np.dtype(dtype).itemsize // (2 if dtype.startswith('c') else 1)}"
    expected = np.asarray(numcodecs.BitRound(keepbits=5).encode(data.copy().view(part)))
    assert (tmp_path / "a.zarr" / "c" / "0" / "0").read_bytes() == expected.tobytes()


def test_bitround_bfloat16_rounds_as_its_float32_widening():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from zarr_dask.codecs.bitround import BitroundCodec

    data = np.random.default_rng(1).normal(size=500).astype(ml_dtypes.bfloat16)
    codec = BitroundCodec(3)
    np.testing.assert_array_equal(codec.round(data).astype("f4").view("u4"), codec.round(data.astype("f4")).view("u4"))


def test_bitround_keeps_everything_at_full_precision_and_rounds_ints_saturating():
    from zarr_dask.codecs.bitround import BitroundCodec

    f = np.array([0.1, np.nan], "f2")
    assert BitroundCodec(10).round(f).tobytes() == f.tobytes()
    assert BitroundCodec(1).round(np.array([3, 65535], "u2")).tolist() == [4, 32768]  # a tie rounds to even; saturates
    assert BitroundCodec(2).round(np.array([0], "M8[s]")).view("i8").tolist() == [0]


@pytest.mark.parametrize(("config", "match"), [
    (None, "'keepbits' must be an integer"), ({"keepbits": 0}, "from 1 to 64"), ({"keepbits": True}, "integer"),
    ({"keepbits": 3, "x": 1}, "unknown configuration key"),
])  # fmt: skip
def test_bitround_bad_configurations(tmp_path, config, match):
    entry = {"name": "bitround", **({"configuration": config} if config is not None else {})}
    with pytest.raises(MetadataError, match=match):
        _array(tmp_path, np.zeros(3, "f4"), [entry, LE])


def test_bitround_refuses_strings(tmp_path):
    with pytest.raises(MetadataError, match="does not take the data type"):
        zarr_dask.create_array(tmp_path / "s.zarr", shape=(2,), dtype="U3", filters=[BITROUND3])


# ------------------------------------------------------------------------------------------------ packbits
def _packbits(tmp_path, data, dtype, **config):
    arr = zarr_dask.create_array(tmp_path / "p.zarr", shape=data.shape, chunks=data.shape, dtype=dtype,
                                 serializer={"name": "packbits", "configuration": config}, compressors=None)  # fmt: skip
    arr[...] = data
    stored = (tmp_path / "p.zarr" / "c" / "0").read_bytes()
    back = zarr_dask.open_array(tmp_path / "p.zarr")[...]
    return stored, back


@pytest.mark.parametrize(("dtype", "values", "config", "stored"), [
    ("uint4", [1, 2, 3, 4], {}, "2143"),  # least significant bits first
    ("int2", [-2, -1, 0, 1], {}, "4e"),  # 10 11 00 01 -> 0b01001110
    ("bool", [True, False, False, True, False], {"padding_encoding": "first_byte"}, "0309"),
    ("bool", [True, False, False, True, False], {"padding_encoding": "last_byte"}, "0903"),
    ("int4", [-8, 7, -1], {"padding_encoding": "start_byte"}, "04780f"),  # schema.json's spelling
    ("float4_e2m1fn", [0.5, -6.0], {}, "f1"),  # 0b0001 (0.5), 0b1111 (-6)
    ("i2", [-1024, 1022, 4], {"first_bit": 1, "last_bit": 11}, "00fe8f0000"),  # 11-bit -512, 511, 2; sign-extended
])  # fmt: skip
def test_packbits_layout(tmp_path, dtype, values, config, stored):
    if dtype not in ("bool", "i2"):
        pytest.importorskip("ml_dtypes")
    data = np.array(values, dtype=zarr_dask.create_array("memory://t", shape=(1,), dtype=dtype, overwrite=True).dtype)
    got, back = _packbits(tmp_path, data, dtype, **config)
    assert got.hex() == stored
    np.testing.assert_array_equal(back.astype("f8"), np.array(values, dtype="f8"))


@pytest.mark.parametrize("dtype", ["f4", "<i8", "bfloat16", "complex_float16", "c8"])
def test_packbits_full_width_is_the_little_endian_bytes(tmp_path, dtype):
    if dtype in ("bfloat16", "complex_float16"):
        pytest.importorskip("ml_dtypes")
    arr = zarr_dask.create_array("memory://t", shape=(1,), dtype=dtype, overwrite=True)
    data = np.frombuffer(np.random.default_rng(2).bytes(12 * arr.dtype.itemsize), dtype=arr.dtype)
    got, back = _packbits(tmp_path, data, dtype)
    assert got == np.ascontiguousarray(data).tobytes()
    assert back.tobytes() == data.tobytes()


@pytest.mark.parametrize("dtype", ["int2", "uint2", "int4", "uint4", "float4_e2m1fn", "float6_e2m3fn",
                                   "float6_e3m2fn", "complex_float6_e3m2fn", "bool"])
@pytest.mark.parametrize("padding", ["none", "first_byte", "last_byte"])
def test_packbits_sub_byte_round_trips_every_value(tmp_path, dtype, padding):
    from zarr_dask.spec.ml_types import low_bits

    if dtype != "bool":
        pytest.importorskip("ml_dtypes")
    arr = zarr_dask.create_array("memory://t", shape=(1,), dtype=dtype, overwrite=True)
    raw = np.resize(np.arange(256, dtype=np.uint8), 37 * arr.dtype.itemsize)
    data = (raw % 2 == 1) if dtype == "bool" else low_bits(raw.view(arr.dtype))
    got, back = _packbits(tmp_path, data, dtype, padding_encoding=padding)
    bits = {"int2": 2, "uint2": 2, "bool": 1}.get(dtype, 6 if "6" in dtype else 4) * (2 if "complex" in dtype else 1)
    assert len(got) == -(-37 * bits // 8) + (padding != "none")
    assert back.tobytes() == np.ascontiguousarray(data).tobytes()


@pytest.mark.parametrize(("config", "match"), [
    ({"padding_encoding": "both"}, "'padding_encoding' must be"), ({"first_bit": -1}, "non-negative integer"),
    ({"last_bit": 16}, "not within the 16 bits"), ({"first_bit": 5, "last_bit": 4}, "first_bit <= last_bit"),
    ({"bits": 3}, "unknown configuration key"),
])  # fmt: skip
def test_packbits_bad_configurations(tmp_path, config, match):
    with pytest.raises(MetadataError, match=match):
        _packbits(tmp_path, np.zeros(3, "i2"), "i2", **config)


def test_packbits_corrupt_chunks_are_decode_errors(tmp_path):
    from zarr_dask.errors import ChunkDecodeError

    _packbits(tmp_path, np.arange(5) == 0, "bool", padding_encoding="first_byte")
    chunk = tmp_path / "p.zarr" / "c" / "0"
    chunk.write_bytes(b"\x05\x00")
    with pytest.raises(ChunkDecodeError, match="padding bits"):
        zarr_dask.open_array(tmp_path / "p.zarr")[...]
    chunk.write_bytes(b"\x03\x00\x00")
    with pytest.raises(ChunkDecodeError, match="packbits"):
        zarr_dask.open_array(tmp_path / "p.zarr")[...]


# ------------------------------------------------------------------------------------------------- reshape
@pytest.mark.parametrize(("shape", "chunks"), [
    ([[0, 1], [2], 3], (10, 5, 4, 3)), ([-1], (6, 4)), ([2, -1, [2]], (4, 3, 5)), ([[0], 12], (6, 3, 4)),
    ([[], [0, 1]], (6, 4)),
])  # fmt: skip
def test_reshape_round_trips_and_stores_the_c_order_elements(tmp_path, shape, chunks):
    data = np.arange(2 * math.prod(chunks), dtype="i4").reshape(2 * chunks[0], *chunks[1:])
    reshape = {"name": "reshape", "configuration": {"shape": shape}}
    arr = _array(tmp_path, data, [reshape, LE, {"name": "zstd", "configuration": {"level": 1}}], chunks=chunks)
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(zarr_dask.from_zarr(tmp_path / "a.zarr")[1:, ..., :2].compute(), data[1:, ..., :2])
    assert arr.metadata.codecs[0] == reshape
    plain = _array(tmp_path, data, [LE, {"name": "zstd", "configuration": {"level": 1}}], chunks=chunks,
                   name="b.zarr")  # fmt: skip
    key = "c/" + "/".join("1" if i == 0 else "0" for i in range(data.ndim))
    assert plain.store.get(key) == arr.store.get(key)  # reshaping keeps the C-order bytes


def test_reshape_with_transpose(tmp_path):
    data = np.arange(4 * 6, dtype="u2").reshape(4, 6)
    codecs = [{"name": "transpose", "configuration": {"order": [1, 0]}},
              {"name": "reshape", "configuration": {"shape": [-1]}}, LE]  # fmt: skip
    _array(tmp_path, data, codecs, chunks=(2, 3))
    assert np.frombuffer((tmp_path / "a.zarr" / "c" / "0" / "0").read_bytes(), "<u2").tolist() == [0, 6, 1, 7, 2, 8]


@pytest.mark.parametrize(("shape", "match"), [
    ([[1], [0]], "strictly increasing"), ([[1, 0], 2], "strictly increasing"), ([5, -1], "no size for -1"),
    ([-1, -1], "at most once"), ([7], "does not hold"), ([0], "positive size"), ("x", "must be a list"),
    ([[2]], "strictly increasing order and below 2"), ([[1], 6], "does not line up"),
])  # fmt: skip
def test_reshape_refuses_what_the_registry_forbids(tmp_path, shape, match):
    with pytest.raises(MetadataError, match=match):
        _array(tmp_path, np.zeros((6, 4), "i4"), [{"name": "reshape", "configuration": {"shape": shape}}, LE])


# --------------------------------------------------------------------------------------------- conditional
ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}


def _conditional(*codecs, **extra):
    return {"name": "conditional", "configuration": {"codecs": list(codecs), **extra}}


def test_conditional_compresses_only_what_shrinks(tmp_path):
    data = np.zeros((2, 64), "u2")
    data[1] = np.random.default_rng(3).integers(0, 2**16, 64)  # incompressible
    data[0, 0] = 1
    arr = _array(tmp_path, data, [LE, _conditional(ZSTD)], chunks=(1, 64))
    first, second = ((tmp_path / "a.zarr" / "c" / str(i) / "0").read_bytes() for i in (0, 1))
    assert first[0] == 1 and len(first) < 40  # zstd applied
    assert second[0] == 0 and second[1:] == data[1].astype("<u2").tobytes()  # stored raw behind the header
    np.testing.assert_array_equal(arr[...], data)


def test_conditional_reads_hand_written_chunks_in_reverse_order(tmp_path):
    numcodecs = pytest.importorskip("numcodecs")
    data = np.arange(32, dtype="<u4")
    gzip = {"name": "gzip", "configuration": {"level": 5}}
    _array(tmp_path, data + 1, [LE, _conditional(ZSTD, gzip, header_bits=16)], chunks=(32,))
    chunk = tmp_path / "a.zarr" / "c" / "0"
    both = numcodecs.GZip(5).encode(numcodecs.Zstd(1).encode(data.tobytes()))
    for mask, body in ((0b11, both), (0b10, numcodecs.GZip(5).encode(data.tobytes())), (0, data.tobytes())):
        chunk.write_bytes(mask.to_bytes(2, "little") + bytes(body))
        np.testing.assert_array_equal(zarr_dask.open_array(tmp_path / "a.zarr")[...], data)


def test_conditional_corrupt_headers_are_decode_errors(tmp_path):
    from zarr_dask.errors import ChunkDecodeError

    _array(tmp_path, np.ones(8, "u1"), ["bytes", _conditional(ZSTD)])
    chunk = tmp_path / "a.zarr" / "c" / "0"
    for raw, match in ((b"\x02" + bytes(8), "beyond its 1 codecs"), (b"", "fewer than"), (b"\x00" + bytes(7), "7 bytes")):
        chunk.write_bytes(raw)
        with pytest.raises(ChunkDecodeError, match=match):
            zarr_dask.open_array(tmp_path / "a.zarr")[...]


@pytest.mark.parametrize(("config", "match"), [
    ({"codecs": []}, "non-empty list"), ({"codecs": [ZSTD], "header_bits": 4}, "multiple of 8"),
    ({"codecs": [LE]}, "not a bytes->bytes"), ({"codecs": [ZSTD], "x": 1}, "unknown configuration"),
    ({"codecs": [{"name": "numcodecs.pickle"}]}, "pickle"),
])  # fmt: skip
def test_conditional_bad_configurations(tmp_path, config, match):
    with pytest.raises((MetadataError, zarr_dask.errors.UnsafeCodecError), match=match):
        _array(tmp_path, np.zeros(3, "u1"), ["bytes", {"name": "conditional", "configuration": config}])


# ---------------------------------------------------------------------------------------------- n5_default
def _n5_zarr_json(shape, chunks, dtype, compressor=None):
    inner = [{"name": "transpose", "configuration": {"order": list(range(len(shape)))[::-1]}},
             {"name": "bytes", "configuration": {"endian": "big"}}, *([compressor] if compressor else [])]  # fmt: skip
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}}, "fill_value": 0,
            "codecs": [{"name": "n5_default", "configuration": {"codecs": inner}}]}  # fmt: skip


@pytest.mark.oracle
@pytest.mark.parametrize(("compression", "codec"), [
    ({"type": "raw"}, None), ({"type": "gzip"}, {"name": "gzip", "configuration": {"level": 6}}),
])  # fmt: skip
def test_n5_default_reads_and_writes_tensorstore_n5(tmp_path, compression, codec):
    ts = pytest.importorskip("tensorstore")
    data = np.arange(5 * 7, dtype="u2").reshape(5, 7) * 3
    spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(tmp_path / "n5")}}
    t = ts.open({**spec, "metadata": {"dimensions": [5, 7], "blockSize": [2, 3], "dataType": "uint16",
                                      "compression": compression}}, create=True).result()  # fmt: skip
    t[...] = data
    # the same directory, readable as Zarr v3 (the registry's N5-and-Zarr layout): zarr.json beside attributes.json
    (tmp_path / "n5" / "zarr.json").write_text(json.dumps(_n5_zarr_json((5, 7), (2, 3), "uint16", codec)))
    arr = zarr_dask.open_array(tmp_path / "n5", mode="r+")
    np.testing.assert_array_equal(arr[...], data)
    arr[1:4, 2:6] = 999  # we write blocks tensorstore reads back
    data[1:4, 2:6] = 999
    np.testing.assert_array_equal(ts.open(spec).result().read().result(), data)
    assert (tmp_path / "n5" / "1" / "1").read_bytes()[:16].hex().startswith("00000002" "00000002" "00000003")


def test_n5_default_pads_truncated_edge_blocks_and_checks_headers(tmp_path):
    from zarr_dask.errors import ChunkDecodeError

    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps(_n5_zarr_json((3, 5), (2, 4), "int16")))
    block = tmp_path / "a.zarr" / "1" / "1"
    block.parent.mkdir()
    body = np.array([[7]], ">i2").T.tobytes()  # a 1x1 edge block, as Java N5 writes it
    block.write_bytes(bytes.fromhex("0000" "0002" "00000001" "00000001") + body)
    out = zarr_dask.open_array(tmp_path / "a.zarr")[...]
    assert out[2, 4] == 7 and out.sum() == 7
    for header, match in (("0001000200000001", "mode 1"), ("0000000300000001", "3 dimensions"),
                          ("0000000200000003" "00000001", "larger than the chunk"), ("0000", "fewer than")):  # fmt: skip
        raw = bytes.fromhex(header) + (bytes.fromhex("00000001") if len(header) == 16 else b"") + body
        block.write_bytes(raw)
        with pytest.raises(ChunkDecodeError, match=match):
            zarr_dask.open_array(tmp_path / "a.zarr")[...]


@pytest.mark.parametrize(("codecs", "match"), [
    ([LE], "first nested codec must be a transpose"),
    ([{"name": "transpose", "configuration": {"order": [1, 0]}}, LE], "endian 'big'"),
    ([{"name": "transpose", "configuration": {"order": [1, 0]}}, {"name": "bytes", "configuration": {"endian": "big"}},
      ZSTD, ZSTD], "at most one"),
])  # fmt: skip
def test_n5_default_bad_chains(tmp_path, codecs, match):
    doc = _n5_zarr_json((4, 4), (2, 2), "int16")
    doc["codecs"][0]["configuration"]["codecs"] = codecs
    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=match):
        zarr_dask.open_array(tmp_path / "a.zarr")


def test_zfp_is_a_clear_error_naming_why() -> None:
    """zfp is registered but cannot be implemented here (docs/formats.md): a clear error, never a bare one."""
    from zarr_dask.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="codec 'zfp' is registered but not implemented: its library zfpy"):
        zarr_dask.create_array("memory://zfp-refused", shape=(4,), dtype="f4", chunks=(4,),
                               serializer={"name": "zfp", "configuration": {"mode": "fixed_rate", "rate": 8}})  # fmt: skip
