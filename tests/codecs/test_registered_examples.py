"""Every example configuration of the zarr-extensions codec READMEs (registry snapshot 4da7b37, 2026-07-14) is
taken, by ``create_array`` (the arguments users pass) and in a stored ``zarr.json`` (what other writers leave),
and round-trips data (issue 38). The one registered codec refused is ``zfp``, with the reason of docs/formats.md.

Two README examples are not valid as printed, for reasons outside their codec, and are taken in their valid form:
``scale_offset``'s use a bare ``"bytes"`` for float32/uint16/float64, and the ``bytes`` codec needs ``endian`` for
multi-byte types (zarr-python refuses it too); ``conditional``'s nests a ``shuffle`` codec that is not registered
(``numcodecs.shuffle`` is the codec of that name we have).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import zarr_dask
from zarr_dask.codecs.registry import codec_from_v3
from zarr_dask.errors import UnsupportedFeatureError

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}

#: (README, data type, chunk shape, fill value, codecs), the codecs as the README prints them (but see above)
EXAMPLES = [
    ("bitround", "float32", (8,), 0, [{"name": "bitround", "configuration": {"keepbits": 10}}, LE]),
    ("cast_value", "float64", (8,), 0, [
        {"name": "cast_value", "configuration": {
            "data_type": "uint8", "rounding": "towards-zero", "out_of_range": "wrap",
            "scalar_map": {"encode": [["NaN", 0], ["+Infinity", 0], ["-Infinity", 0]]}}},
        "bytes"]),
    ("conditional", "float32", (8,), 0, [LE, {"name": "conditional", "configuration": {"codecs": [
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}, {"name": "zstd", "configuration": {"level": 5}}]}}]),
    ("n5_default", "float32", (256, 128), 0, [{"name": "n5_default", "configuration": {"codecs": [
        {"name": "transpose", "configuration": {"order": [1, 0]}}, BE,
        {"name": "zstd", "configuration": {"level": 0, "checksum": False}}]}}]),
    ("n5_default 3-d", "int16", (2, 3, 4), 0, [{"name": "n5_default", "configuration": {"codecs": [
        {"name": "transpose", "configuration": {"order": [2, 1, 0]}}, BE, {"name": "gzip", "configuration": {"level": 5}}]}}]),
    ("packbits", "uint8", (8,), 0, [{"name": "packbits", "configuration": {"padding_encoding": "start_byte",
                                                                             "start_bit": None, "end_bit": None}}]),
    ("packbits bits", "uint8", (8,), 0, [{"name": "packbits", "configuration": {"padding_encoding": "end_byte",
                                                                                  "first_bit": 0, "last_bit": 5}}]),
    ("reshape", "uint8", (10, 5, 4, 3), 0, [{"name": "reshape", "configuration": {"shape": [[0, 1], [2], 3]}}, LE,
                                            {"name": "zstd", "configuration": {"level": 1, "checksum": True}}]),
    ("reshape all", "int32", (2, 3, 4), 0, [{"name": "reshape", "configuration": {"shape": [[0, 1, 2]]}}, LE]),
    ("reshape each", "int32", (2, 3, 4), 0, [{"name": "reshape", "configuration": {"shape": [[0], [1], [2]]}}, LE]),
    ("reshape empty", "int32", (2, 3), 0, [{"name": "reshape", "configuration": {"shape": [[], [0, 1]]}}, LE]),
    ("scale_offset", "float32", (8,), 0, [{"name": "scale_offset", "configuration": {"offset": 5, "scale": 0.1}}, LE]),
    ("scale_offset cast", "uint16", (8,), 1000, [{"name": "scale_offset", "configuration": {"offset": 1000}},
                                                 {"name": "cast_value", "configuration": {"data_type": "uint8"}}, LE]),
    ("scale_offset NaN", "float64", (8,), "NaN", [
        {"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
        {"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "nearest-even",
                                                 "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
        LE]),
    ("vlen-bytes", "bytes", (8,), b"", [{"name": "vlen-bytes"}]),
    ("vlen-utf8", "string", (8,), "", [{"name": "vlen-utf8"}]),
    ("zstd", "uint8", (8,), 0, ["bytes", {"name": "zstd", "configuration": {"level": 1, "checksum": True}}]),
    ("zstd level only", "uint8", (8,), 0, ["bytes", {"name": "zstd", "configuration": {"level": 3.0}}]),
    ("transpose", "uint16", (2, 3, 4), 0, [{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, LE]),
    ("crc32c", "uint8", (8,), 0, ["bytes", "crc32c"]),
    ("sharding_indexed", "uint16", (4, 4), 0, [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 2], "codecs": [LE], "index_codecs": [LE, {"name": "crc32c"}], "index_location": "start"}}]),
]  # fmt: skip


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = math.prod(shape)
    if dtype == "string":
        return np.array([f"s{i}" for i in range(n)], dtype=object).reshape(shape)
    if dtype == "bytes":
        return np.array([b"b%d" % i for i in range(n)], dtype=object).reshape(shape)
    if dtype == "float32":
        return (np.arange(n) % 50).astype(dtype).reshape(shape)  # exact through scale_offset and bitround
    if dtype == "float64":
        return (np.arange(n) % 25 * 10.0).reshape(shape)  # exact through scale 0.1 into uint8
    return (np.arange(n) % 60 + (1000 if dtype == "uint16" else 0)).astype(dtype).reshape(shape)


def _roles(codecs: list) -> dict:
    """The codecs as create_array's ``filters`` / ``serializer`` / ``compressors``."""
    kinds = [codec_from_v3(c).kind for c in codecs]
    return {"filters": [c for c, k in zip(codecs, kinds, strict=True) if k == "array_array"],
            "serializer": next(c for c, k in zip(codecs, kinds, strict=True) if k == "array_bytes"),
            "compressors": [c for c, k in zip(codecs, kinds, strict=True) if k == "bytes_bytes"]}  # fmt: skip


def _check(arr, dtype, shape):
    data = _data(dtype, shape)
    arr[...] = data
    back = zarr_dask.open_array(arr.store, path=arr.path)[...]
    if dtype.startswith("float") or dtype.startswith("uint"):
        np.testing.assert_array_equal(back, data)
    else:
        assert back.tolist() == data.tolist()


@pytest.mark.parametrize(("readme", "dtype", "chunks", "fill", "codecs"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_create_array_takes_the_example(tmp_path, readme, dtype, chunks, fill, codecs):
    shards = chunks if readme == "sharding_indexed" else None
    roles = _roles(codecs)
    if shards:  # create_array spells sharding as shards= and the inner codecs
        roles = {"serializer": LE, "compressors": [], "filters": []}
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=tuple(2 * c for c in chunks), dtype=dtype,
                                 chunks=(2, 2) if shards else chunks, shards=shards, fill_value=fill,
                                 **roles)  # fmt: skip
    written = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["codecs"]
    assert [c if isinstance(c, str) else c["name"] for c in written] == [
        c if isinstance(c, str) else c["name"] for c in codecs
    ]
    _check(arr, dtype, tuple(2 * c for c in chunks))


@pytest.mark.parametrize(("readme", "dtype", "chunks", "fill", "codecs"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_stored_document_with_the_example_opens(tmp_path, readme, dtype, chunks, fill, codecs):
    doc = {"zarr_format": 3, "node_type": "array", "shape": [2 * c for c in chunks], "data_type": dtype,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": "" if fill == b"" else fill,
           "codecs": codecs}  # fmt: skip
    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps(doc))
    arr = zarr_dask.open_array(tmp_path / "a.zarr", mode="r+")
    assert [c if isinstance(c, str) else c["name"] for c in arr.metadata.to_json()["codecs"]] == [
        c if isinstance(c, str) else c["name"] for c in codecs
    ]
    _check(arr, dtype, tuple(2 * c for c in chunks))


def test_n5_default_readme_array_verbatim(tmp_path):
    """codecs/n5_default/examples/zstd_array/zarr.json, as printed."""
    doc = {"zarr_format": 3, "node_type": "array", "shape": [256, 128], "data_type": "float32",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [256, 128]}},
           "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}}, "fill_value": 0,
           "codecs": [{"name": "n5_default", "configuration": {"codecs": [
               {"name": "transpose", "configuration": {"order": [1, 0]}},
               {"name": "bytes", "configuration": {"endian": "big"}},
               {"name": "zstd", "configuration": {"level": 0, "checksum": False}}]}}]}  # fmt: skip
    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps(doc))
    arr = zarr_dask.open_array(tmp_path / "a.zarr", mode="r+")
    assert arr[...].shape == (256, 128) and not arr[...].any()
    data = np.arange(256 * 128, dtype="f4").reshape(256, 128)
    arr[...] = data
    np.testing.assert_array_equal(zarr_dask.from_zarr(tmp_path / "a.zarr").compute(), data)
    block = (tmp_path / "a.zarr" / "0" / "0").read_bytes()
    assert block[:12] == bytes.fromhex("0000 0002 00000100 00000080".replace(" ", ""))  # N5's header


@pytest.mark.parametrize("mode", [
    {"mode": "reversible"}, {"mode": "fixed_rate", "rate": 10.5}, {"mode": "fixed_precision", "precision": 19},
    {"mode": "fixed_accuracy", "tolerance": 0.05}, {"mode": "expert", "minbits": 1, "maxbits": 13, "maxprec": 64,
                                                    "minexp": -1074},
])  # fmt: skip
def test_zfp_alone_is_refused_with_its_reason(mode):
    with pytest.raises(UnsupportedFeatureError, match="codec 'zfp' is registered but not implemented: its library"):
        codec_from_v3({"name": "zfp", "configuration": mode})
