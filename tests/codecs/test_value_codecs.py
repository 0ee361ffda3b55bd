"""The zarr-extensions value codecs ``scale_offset`` and ``cast_value``: configurations, the cast rules, fill
values through the chain, and arrays using them (zarr-python interop: tests/compat/test_value_codecs_oracle.py)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from dask.base import tokenize
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import zarr_dask
from tests.codecs._helpers import dt3, spec
from zarr_dask.codecs import pipeline_from_v3
from zarr_dask.codecs.cast import CastError, cast_values
from zarr_dask.codecs.registry import codec_from_v3
from zarr_dask.errors import ChunkDecodeError, ChunkEncodeError, MetadataError

ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
NAN_TO_U8 = [
    {"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
    {"name": "cast_value", "configuration": {"data_type": "uint8",
                                             "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
    {"name": "bytes"},
    ZSTD,
]  # fmt: skip


# ----------------------------------------------------------------------------------------- configurations
@pytest.mark.parametrize(
    ("entry", "written"),
    [
        ({"name": "scale_offset"}, {"name": "scale_offset"}),
        ({"name": "scale_offset", "configuration": {"offset": 0, "scale": 1.0}}, {"name": "scale_offset"}),
        ({"name": "scale_offset", "configuration": {"scale": 0.5}}, {"name": "scale_offset", "configuration": {"scale": 0.5}}),
        ({"name": "cast_value", "configuration": {"data_type": {"name": "uint8"}, "rounding": "nearest-even"}},
         {"name": "cast_value", "configuration": {"data_type": "uint8"}}),
        ({"name": "cast_value", "configuration": {"data_type": "int16", "rounding": "towards-zero", "out_of_range": "wrap"}},
         {"name": "cast_value", "configuration": {"data_type": "int16", "rounding": "towards-zero", "out_of_range": "wrap"}}),
    ],
)  # fmt: skip
def test_written_as_zarr_python_writes_them(entry: dict, written: dict) -> None:
    assert codec_from_v3(entry).to_json() == written


@pytest.mark.parametrize(
    ("codecs", "dtype", "match"),
    [
        ([{"name": "scale_offset", "configuration": {"offset": 1, "factor": 2}}], "f4", "unknown configuration key"),
        ([{"name": "scale_offset", "configuration": {"scale": 0}}], "f4", "must not be zero"),
        ([{"name": "scale_offset", "configuration": {"scale": 0.5}}], "i4", "not a value of int32"),
        ([{"name": "scale_offset", "configuration": {"offset": True}}], "f4", "must be a number"),
        ([{"name": "scale_offset"}], "c8", "integer or float data type"),
        ([{"name": "cast_value"}], "f4", "needs a 'configuration' with a 'data_type'"),
        ([{"name": "cast_value", "configuration": {"data_type": "bfloat16"}}], "f4", "not supported by zarr_dask"),
        ([{"name": "cast_value", "configuration": {"data_type": "complex64"}}], "f4", "integer or float"),
        ([{"name": "cast_value", "configuration": {"data_type": "float16", "out_of_range": "wrap"}}], "f4", "'wrap' needs an integer"),
        ([{"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "up"}}], "f4", "'rounding' must be one of"),
        ([{"name": "cast_value", "configuration": {"data_type": "uint8", "scalar_map": {"encode": [[1, 2, 3]]}}}], "f4", "must be a pair"),
        ([{"name": "cast_value", "configuration": {"data_type": "uint8", "scalar_map": {"encode": [["NaN", 0]]}}}], "i4", "not a value of int32"),
        ([{"name": "cast_value", "configuration": {"data_type": "uint8", "scalar_map": {"both": []}}}], "f4", "'encode' / 'decode'"),
    ],
)  # fmt: skip
def test_bad_configurations_are_refused(codecs: list, dtype: str, match: str) -> None:
    with pytest.raises(MetadataError, match=match):
        pipeline_from_v3([*codecs, {"name": "bytes", "configuration": {"endian": "little"}}], data_type=dt3(dtype),
                         chunk_shape=(2,))  # fmt: skip


# --------------------------------------------------------------------------------------------- cast rules
# expectations checked against cast-value-rs (zarr-python's backend) in the oracle tests
@pytest.mark.parametrize(
    ("values", "src", "target", "kwargs", "expected"),
    [
        ([2.5, 3.5, -2.5, -0.4], "f8", "i1", {}, [2, 4, -2, 0]),
        ([2.5, 3.5, -2.5, 255.4], "f8", "u1", {"rounding": "nearest-away", "out_of_range": "clamp"}, [3, 4, 0, 255]),
        ([2.5, -2.5, 255.6], "f8", "i1", {"rounding": "towards-zero", "out_of_range": "clamp"}, [2, -2, 127]),
        ([2.1, -2.1], "f4", "i2", {"rounding": "towards-positive"}, [3, -2]),
        ([2.1, -2.1], "f4", "i2", {"rounding": "towards-negative"}, [2, -3]),
        ([255.5, 300.7, -3.2, 1e300], "f8", "u1", {"out_of_range": "wrap"}, [0, 45, 253, 0]),
        ([300, -5], "i4", "u1", {"out_of_range": "clamp"}, [255, 0]),
        ([300, -5], "i4", "u1", {"out_of_range": "wrap"}, [44, 251]),
        ([2**64 - 1, 2**63], "u8", "i8", {"out_of_range": "clamp"}, [2**63 - 1, 2**63 - 1]),
        ([2**24 + 1, 2**63 - 1], "i8", "f4", {}, [2.0**24, 2.0**63]),
        ([2**24 + 1, 2**63 - 1], "i8", "f4", {"rounding": "towards-zero"}, [2.0**24, 2.0**63 - 2.0**39]),
        ([65519.0, 1e-8, -0.0, np.inf, np.nan], "f8", "f2", {}, [65504.0, 0.0, -0.0, np.inf, np.nan]),
        ([65520.0, 1e39], "f8", "f2", {"rounding": "towards-zero", "out_of_range": "clamp"}, [65504.0, np.inf]),
        ([70000, -70000], "i4", "f2", {"out_of_range": "clamp"}, [np.inf, -np.inf]),
    ],
)  # fmt: skip
def test_cast_rules(values: list, src: str, target: str, kwargs: dict, expected: list) -> None:
    out = cast_values(np.array(values, dtype=src), np.dtype(target), **kwargs)
    assert out.dtype == np.dtype(target)
    np.testing.assert_array_equal(out, np.array(expected, dtype=target))
    assert np.signbit(out).tolist() == np.signbit(np.array(expected, dtype=target)).tolist()


@pytest.mark.parametrize(
    ("values", "src", "target", "kwargs", "match"),
    [
        ([np.nan], "f8", "u1", {}, "cannot cast nan"),
        ([np.inf], "f8", "u1", {"out_of_range": "clamp"}, "cannot cast inf"),
        ([300], "i4", "u1", {}, "out of the range"),
        ([-2.5], "f8", "u1", {"rounding": "nearest-away"}, "out of the range"),
        ([65520.0], "f8", "f2", {}, "out of the range"),
        ([1e39], "f8", "f4", {"rounding": "towards-zero"}, "out of the range"),
    ],
)  # fmt: skip
def test_cast_refusals(values: list, src: str, target: str, kwargs: dict, match: str) -> None:
    with pytest.raises(CastError, match=match):
        cast_values(np.array(values, dtype=src), np.dtype(target), **kwargs)


def test_scalar_map_first_match_wins_and_covers_nan() -> None:
    pairs = [(np.array(2.5, "f4"), np.array(7, "i2")), (np.array(2.5, "f4"), np.array(9, "i2")),
             (np.array(np.nan, "f4"), np.array(-1, "i2"))]  # fmt: skip
    out = cast_values(np.array([1.5, 2.5, np.nan], "f4"), np.dtype("i2"), scalar_map=pairs)
    assert out.tolist() == [2, 7, -1]


def test_cast_takes_any_byte_order_and_layout() -> None:
    x = np.arange(12, dtype=">i4").reshape(3, 4).T
    np.testing.assert_array_equal(cast_values(x, np.dtype("u1")), x.astype("u1"))


# ---------------------------------------------------------------------------------------- scale_offset
def _so(dtype: str, **config: object):  # type: ignore[no-untyped-def]
    return codec_from_v3({"name": "scale_offset", "configuration": config}).bind(spec((4,), dt3(dtype)))


def test_scale_offset_integer_arithmetic_is_exact_and_checked() -> None:
    c = _so("i1", offset=-100, scale=2)
    enc = c.encode(np.array([-100, -50, -37, -41], "i1"), spec((4,), dt3("i1")))
    assert enc.dtype == np.dtype("i1") and enc.tolist() == [0, 100, 126, 118]
    assert c.decode(enc, spec((4,), dt3("i1"))).tolist() == [-100, -50, -37, -41]
    with pytest.raises(ChunkEncodeError, match="out of the range"):
        c.encode(np.array([0, 0, 0, 1], "i1"), spec((4,), dt3("i1")))
    with pytest.raises(ChunkDecodeError, match="not divisible"):
        c.decode(np.array([1, 2, 3, 4], "i1"), spec((4,), dt3("i1")))
    big = _so("u8", offset=2**63, scale=1)
    x = np.array([2**64 - 1, 2**63, 2**63 + 5, 2**63 + 1], "u8")
    assert big.encode(x, spec((4,), dt3("u8"))).tolist() == [2**63 - 1, 0, 5, 1]
    neg = _so("i8", scale=-3)
    assert neg.decode(neg.encode(np.array([1, -2, 3, 0], "i8"), spec((4,), dt3("i8"))), spec((4,), dt3("i8"))).tolist() == [1, -2, 3, 0]


@given(hnp.arrays(np.float32, 6, elements=st.floats(-1e6, 1e6, width=32)), st.floats(-100, 100, width=32),
       st.floats(0.0625, 100, width=32))  # fmt: skip
def test_scale_offset_float_arithmetic_stays_in_the_type(x: np.ndarray, offset: float, scale: float) -> None:
    c = _so("f4", offset=float(offset), scale=float(scale))
    enc = c.encode(x, spec((6,), dt3("f4")))
    assert enc.dtype == np.float32
    np.testing.assert_array_equal(enc, (x - np.float32(offset)) * np.float32(scale))
    np.testing.assert_array_equal(c.decode(enc, spec((6,), dt3("f4"))), enc / np.float32(scale) + np.float32(offset))


# ------------------------------------------------------------------------------------ pipelines and arrays
def test_pipeline_golden_bytes_and_fill_through_the_chain() -> None:
    """The zarr-extensions example (float64 -> uint8, NaN <-> 0): the bytes zarr-python 3.4 writes."""
    p = pipeline_from_v3(NAN_TO_U8, data_type=dt3("f8"), chunk_shape=(2,))
    s = spec((2,), dt3("f8"), fill=np.nan)
    assert p.encode(np.array([0.0, 2540.0]), s) == b"(\xb5/\xfd \x02\x11\x00\x00\x01\xff"
    assert p.encode(np.array([10.0, np.nan]), s) == b"(\xb5/\xfd \x02\x11\x00\x00\x02\x00"
    np.testing.assert_array_equal(p.decode(b"(\xb5/\xfd \x02\x11\x00\x00\x02\x00", s), [10.0, np.nan])
    assert p.to_json() == NAN_TO_U8
    assert pickle.loads(pickle.dumps(p)) == p and tokenize(p) == tokenize(pickle.loads(pickle.dumps(p)))
    scale, cast = p.codecs[:2]
    after_scale = scale.resolve(s)
    assert after_scale.dtype == np.float64 and np.isnan(after_scale.fill_value)
    after_cast = cast.resolve(after_scale)
    assert after_cast.dtype == np.uint8 and after_cast.fill_value == 0


def test_create_array_writes_the_serializer_for_the_cast_type(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a = zarr_dask.create_array(str(tmp_path / "a"), shape=(5,), chunks=(2,), dtype="f8", fill_value=np.nan,
                               filters=NAN_TO_U8[:2])  # fmt: skip
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["codecs"] == NAN_TO_U8
    a[:4] = [0.0, 2540.0, 5.0, np.nan]
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path / "a"))[:], [0.0, 2540.0, 10.0, np.nan, np.nan])
    assert (tmp_path / "a" / "c" / "0").read_bytes() == b"(\xb5/\xfd \x02\x11\x00\x00\x01\xff"


def test_a_fill_value_the_codecs_cannot_carry_is_refused() -> None:
    filters = [{"name": "scale_offset", "configuration": {"offset": 1000}}, {"name": "cast_value", "configuration": {"data_type": "uint8"}}]
    with pytest.raises(MetadataError, match="cannot encode the fill value 0"):
        zarr_dask.create_array("memory://value-codecs-bad-fill", shape=(4,), chunks=(2,), dtype="u2", filters=filters)
    with pytest.raises(MetadataError, match="cast_value. cannot encode the fill value 300"):
        zarr_dask.create_array("memory://value-codecs-bad-fill", shape=(4,), chunks=(2,), dtype="u2", filters=filters,
                               fill_value=1300)  # fmt: skip


def test_sharded_array_with_value_codecs_inside(tmp_path) -> None:  # type: ignore[no-untyped-def]
    filters = [{"name": "scale_offset", "configuration": {"offset": 1000}}, {"name": "cast_value", "configuration": {"data_type": "uint8"}}]
    a = zarr_dask.create_array(str(tmp_path / "s"), shape=(8,), chunks=(2,), shards=(4,), dtype="u2", fill_value=1000,
                               filters=filters)  # fmt: skip
    a[1:3] = [1255, 1001]
    np.testing.assert_array_equal(a[:], [1000, 1255, 1001, 1000, 1000, 1000, 1000, 1000])
    with pytest.raises(ChunkEncodeError, match="out of the range"):
        a[5] = 1256
