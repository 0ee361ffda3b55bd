"""The ML data types of zarr-extensions (bfloat16, float8/6/4, (u)int2/4, complex_*): names, dtypes, fill values.

Values are compared as bit patterns (NaN payloads, signed zeros and subnormals included).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from zarr_dask.errors import DataTypeError, FillValueError, FillValueWarning
from zarr_dask.spec.dtypes import data_type_from_numpy, parse_data_type
from zarr_dask.spec.ml_types import ML_NAMES

ml_dtypes = pytest.importorskip("ml_dtypes")

FLOATS = ["bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
          "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]  # fmt: skip
INTS = ["int2", "int4", "uint2", "uint4"]
COMPLEX = [f"complex_{n}" for n in FLOATS if n != "float8_e4m3fn"] + ["complex_float16"]
#: the registry's "NaN" constant per type (None: the type has no NaN)
NAN_BITS = {"bfloat16": 0x7FC0, "float8_e3m4": 0x78, "float8_e4m3": 0x7C, "float8_e4m3b11fnuz": 0x80,
            "float8_e4m3fn": 0x7F, "float8_e4m3fnuz": 0x80, "float8_e5m2": 0x7E, "float8_e5m2fnuz": 0x80,
            "float8_e8m0fnu": 0xFF, "float4_e2m1fn": None, "float6_e2m3fn": None, "float6_e3m2fn": None}  # fmt: skip
WIDTH = {"float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6}


def bits(arr: np.ndarray) -> np.ndarray:
    """The bit patterns of ``arr`` (same shape; the bytes of each record for complex types)."""
    if arr.dtype.fields is not None:
        return arr.reshape(-1).view(np.uint8)
    return arr.reshape(-1).view(f"u{arr.dtype.itemsize}").reshape(arr.shape)


def test_the_registry_names_are_all_known():
    registered = set(FLOATS + INTS + COMPLEX) - {"float8_e4m3fn"}
    assert len(registered) == 27  # with complex_float32/64 (aliases of complex64/128): the registry's 29
    assert set(FLOATS + INTS + COMPLEX) == set(ML_NAMES)
    for alias in ("complex_float32", "complex_float64"):
        assert parse_data_type(alias, zarr_format=3).numpy_dtype.kind == "c"


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_by_name_and_by_dtype_object(name):
    dt = parse_data_type(name, zarr_format=3)
    assert dt.numpy_dtype == np.dtype(getattr(ml_dtypes, name))
    assert dt.to_json() == name
    for given in (getattr(ml_dtypes, name), np.dtype(getattr(ml_dtypes, name)), name, {"name": name}):
        assert data_type_from_numpy(given, zarr_format=3) == dt
    assert parse_data_type({"name": name, "configuration": {}}, zarr_format=3) == dt


@pytest.mark.parametrize("name", FLOATS + INTS)
def test_zarr_v2_refuses_instead_of_writing_raw_bytes(name):
    with pytest.raises(DataTypeError, match="only in Zarr v3"):
        data_type_from_numpy(getattr(ml_dtypes, name), zarr_format=2)


def test_a_configuration_is_refused():
    with pytest.raises(DataTypeError, match="takes no configuration"):
        parse_data_type({"name": "bfloat16", "configuration": {"x": 1}}, zarr_format=3)


@pytest.mark.parametrize("name", COMPLEX)
def test_complex_types_are_real_imag_records(name):
    dt = parse_data_type(name, zarr_format=3)
    part = name.removeprefix("complex_")
    expected = np.dtype("f2") if part == "float16" else np.dtype(getattr(ml_dtypes, part))
    assert dt.numpy_dtype.names == ("real", "imag")
    assert dt.numpy_dtype.fields["real"][0] == expected and dt.numpy_dtype.itemsize == 2 * expected.itemsize
    assert dt.to_json() == name
    assert dt.has_endianness == (expected.itemsize > 1)


def _all_patterns(name: str) -> np.ndarray:
    dtype = np.dtype(getattr(ml_dtypes, name))
    if dtype.itemsize == 2:
        return np.arange(0, 2**16, 7, dtype=np.uint16).view(dtype)
    return np.arange(2 ** WIDTH.get(name, 8), dtype=np.uint8).view(dtype)


@pytest.mark.parametrize("name", FLOATS)
def test_every_bit_pattern_survives_the_json_round_trip(name):
    dt = parse_data_type(name, zarr_format=3)
    for value in _all_patterns(name):
        arr = np.asarray(value).reshape(())
        encoded = dt.fill_value_to_json(arr)
        assert bits(dt.parse_fill_value(encoded)) == bits(arr), (name, encoded)


@pytest.mark.parametrize("name", FLOATS)
def test_nan_and_infinity_constants(name):
    dt = parse_data_type(name, zarr_format=3)
    if NAN_BITS[name] is None:
        with pytest.raises(FillValueError, match="not valid for data type"):
            dt.parse_fill_value("NaN")
    else:
        assert int(bits(dt.parse_fill_value("NaN"))) == NAN_BITS[name]
        assert dt.fill_value_to_json(dt.parse_fill_value("NaN")) == "NaN"
    has_inf = name in ("bfloat16", "float8_e3m4", "float8_e4m3", "float8_e5m2")
    if has_inf:
        assert float(dt.parse_fill_value("-Infinity").astype("f8")) == -np.inf
    else:
        with pytest.raises(FillValueError):
            dt.parse_fill_value("Infinity")


def test_non_canonical_nan_payloads_and_subnormals_are_hex():
    dt = parse_data_type("bfloat16", zarr_format=3)
    assert dt.fill_value_to_json(np.array(0x7FC1, np.uint16).view(dt.numpy_dtype).reshape(())) == "0x7fc1"
    assert int(bits(dt.parse_fill_value("0xffc1"))) == 0xFFC1
    subnormal = np.array(0x0001, np.uint16).view(dt.numpy_dtype).reshape(())
    assert dt.fill_value_to_json(subnormal) == float(subnormal.astype("f8")) != 0
    assert int(bits(dt.parse_fill_value(float(subnormal.astype("f8"))))) == 1
    assert int(bits(dt.parse_fill_value(-0.0))) == 0x8000


def test_float8_e8m0fnu_zero_is_its_smallest_value_and_written_as_hex():
    dt = parse_data_type("float8_e8m0fnu", zarr_format=3)
    assert int(bits(dt.parse_fill_value(0.0))) == 0  # what tensorstore writes for its default fill
    assert dt.fill_value_to_json(dt.default_fill_value()) == "0x00"
    assert dt.fill_value_to_json(dt.cast_fill_value(1.0)) == "0x7f"
    with pytest.warns(FillValueWarning, match="bits 0x80.*tensorstore 0.1.86.*means bits 0x40.*'0x40'"):
        assert int(bits(dt.parse_fill_value(2.0))) == 0x80  # the registry's reading of a number: its value


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("float4_e2m1fn", "0x10", "4-bit pattern"), ("float6_e2m3fn", "0x40", "6-bit pattern"),
    ("bfloat16", "0x7fc", "4 hex digits"), ("float4_e2m1fn", 7.0, "range"), ("float8_e4m3fn", 1e6, "range"),
    ("bfloat16", True, "a number"), ("bfloat16", "1.5", "a number"),
])  # fmt: skip
def test_bad_float_fill_values_name_the_type(name, value, expected):
    with pytest.raises(FillValueError, match=expected) as info:
        parse_data_type(name, zarr_format=3).parse_fill_value(value)
    assert name in str(info.value)


@pytest.mark.parametrize("name", INTS)
def test_integer_fill_values(name):
    dt = parse_data_type(name, zarr_format=3)
    info = ml_dtypes.iinfo(dt.numpy_dtype)
    for value in range(int(info.min), int(info.max) + 1):
        parsed = dt.parse_fill_value(value)
        assert dt.fill_value_to_json(parsed) == value
        assert dt.fill_value_to_json(dt.cast_fill_value(np.int64(value))) == value
    for bad in (int(info.max) + 1, int(info.min) - 1, 0.5, "1", False):
        with pytest.raises(FillValueError, match=f"integer in \\[{int(info.min)}, {int(info.max)}\\]"):
            dt.parse_fill_value(bad)


@pytest.mark.parametrize("name", COMPLEX)
def test_complex_fill_values(name):
    dt = parse_data_type(name, zarr_format=3)
    imag = 0.5 if name.endswith("fnu") else -0.5  # e8m0fnu is unsigned
    with warnings.catch_warnings():
        if name == "complex_float8_e8m0fnu":  # tensorstore reads e8m0fnu numbers as other bits
            warnings.simplefilter("ignore", FillValueWarning)
        value = dt.parse_fill_value([1.0, imag])
    assert float(value["real"].astype("f8")) == 1.0 and float(value["imag"].astype("f8")) == imag
    assert dt.fill_value_to_json(value) == [1.0, imag] or name == "complex_float8_e8m0fnu"
    assert bits(dt.cast_fill_value(complex(1.0, imag))).tobytes() == bits(value).tobytes()
    assert dt.fill_value_to_json(dt.default_fill_value()) in ([0.0, 0.0], ["0x00", "0x00"])
    with pytest.raises(FillValueError, match=r"\[real, imaginary\] pair"):
        dt.parse_fill_value(1.0)


def test_complex_nan_payloads_are_kept():
    dt = parse_data_type("complex_bfloat16", zarr_format=3)
    value = dt.parse_fill_value(["NaN", "0xffc3"])
    assert bits(value).tobytes() == bytes.fromhex("c07fc3ff")
    assert dt.fill_value_to_json(value) == ["NaN", "0xffc3"]


def test_without_ml_dtypes_the_error_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now raises ImportError
    with pytest.raises(DataTypeError, match=r"needs the 'ml_dtypes' package.*zarr-dask\[ml\]"):
        parse_data_type("bfloat16", zarr_format=3)
    with pytest.raises(DataTypeError, match="ml_dtypes"):
        parse_data_type("complex_bfloat16", zarr_format=3)
    assert parse_data_type("complex_float16", zarr_format=3).numpy_dtype.itemsize == 4  # NumPy's float16


def test_struct_fields_of_ml_types_are_refused_not_written_as_bytes():
    bf16 = np.dtype(ml_dtypes.bfloat16)
    with pytest.raises(DataTypeError, match="complex_<type>"):
        data_type_from_numpy([("x", bf16), ("y", bf16)], zarr_format=3)
    # the record a complex_bfloat16 array reads as is that type (so from_zarr -> to_zarr keeps it)
    assert data_type_from_numpy([("real", bf16), ("imag", bf16)], zarr_format=3).name == "complex_bfloat16"
    with pytest.raises(DataTypeError, match="field 'x' has the ML type"):
        parse_data_type({"name": "struct", "configuration": {"fields": [{"name": "x", "data_type": "int4"}]}},
                        zarr_format=3)  # fmt: skip
