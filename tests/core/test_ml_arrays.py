"""The ML data types through every layer: arrays, dask, xarray, the ZOM, the CLI and the HTML reprs.

Values are compared as bit patterns, so NaN payloads, signed zeros and subnormals count.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from tests.cli._helpers import run
from zarr_dask import zom
from zarr_dask.errors import DataTypeError

ml_dtypes = pytest.importorskip("ml_dtypes")

SCALARS = ["bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
           "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
           "int2", "int4", "uint2", "uint4"]  # fmt: skip
WIDTH = {"float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6, "int2": 2, "uint2": 2, "int4": 4, "uint4": 4}


def bits(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr).view(np.uint8)


def patterns(dtype: np.dtype, name: str) -> np.ndarray:
    """Every bit pattern of a 1-byte type (a spread of them for bfloat16), as a 2-d array."""
    if dtype.itemsize == 2:
        return np.arange(0, 2**16, 61, dtype=np.uint16)[:1060].view(dtype).reshape(20, 53)
    raw = np.arange(2 ** WIDTH.get(name, 8), dtype=np.uint8)
    return np.resize(raw, 20 * 13).view(dtype).reshape(20, 13)


@pytest.mark.parametrize("name", SCALARS)
@pytest.mark.parametrize("by", ["name", "object"])
def test_round_trip_bit_exact(tmp_path, name, by):
    dtype = np.dtype(getattr(ml_dtypes, name))
    data = patterns(dtype, name)
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=(7, 5),
                                 dtype=name if by == "name" else getattr(ml_dtypes, name))  # fmt: skip
    arr[...] = data
    meta = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    assert meta["data_type"] == name  # never raw_bytes
    back = zarr_dask.open_array(tmp_path / "a.zarr")
    assert back.dtype == dtype
    np.testing.assert_array_equal(bits(back[...]), bits(data))
    np.testing.assert_array_equal(bits(back[3:17, 2:9]), bits(data[3:17, 2:9]))
    lazy = zarr_dask.from_zarr(tmp_path / "a.zarr")
    assert lazy.dtype == dtype
    np.testing.assert_array_equal(bits(lazy.compute()), bits(data))


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("name", ["bfloat16", "complex_bfloat16", "complex_float16", "complex_float8_e5m2"])
def test_both_byte_orders(tmp_path, name, endian, compressed):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(6,), chunks=(4,), dtype=name,
                                 compressors="auto" if compressed else None,
                                 serializer={"name": "bytes", "configuration": {"endian": endian}})  # fmt: skip
    data = np.arange(6 * arr.dtype.itemsize, dtype=np.uint8).view(arr.dtype).reshape(6) if name != "bfloat16" \
        else np.array([0x7FC1, 1, 0x8001, 0x3F80, 0xFF80, 0], np.uint16).view(arr.dtype)  # fmt: skip
    arr[...] = data
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "a.zarr")[...]), bits(data))
    if compressed:
        return
    stored = (tmp_path / "a.zarr" / "c" / "0").read_bytes()
    size = arr.dtype.fields["real"][0].itemsize if arr.dtype.fields else arr.dtype.itemsize
    words = bits(data[:4]).reshape(-1, size)
    assert stored == (words if endian == "little" or size == 1 else words[:, ::-1]).tobytes()


@pytest.mark.parametrize(("name", "stored", "values"), [
    ("float6_e2m3fn", [0x43, 0xC3, 0x08], [0.375, 0.375, 1.0]), ("float4_e2m1fn", [0x17, 0xF7, 0x8F], [6, 6, -6]),
    ("int4", [0xF8, 0x08, 0x17], [-8, -8, 7]), ("uint2", [0xFF, 0x03, 0x04], [3, 3, 0]),
])  # fmt: skip
def test_the_upper_bits_of_sub_byte_types_are_ignored(tmp_path, name, stored, values):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(3,), chunks=(3,), dtype=name, compressors=None)
    (tmp_path / "a.zarr" / "c").mkdir()
    (tmp_path / "a.zarr" / "c" / "0").write_bytes(bytes(stored))
    assert arr[...].astype("f8").tolist() == values
    arr[...] = arr[...]
    assert (tmp_path / "a.zarr" / "c" / "0").read_bytes() == bytes(b & (0xF if "4" in name else 0x3F if "6" in name
                                                                          else 0x3) for b in stored)  # fmt: skip


@pytest.mark.parametrize("name", ["complex_bfloat16", "complex_float4_e2m1fn", "complex_float8_e8m0fnu"])
def test_complex_types_with_fill_values(tmp_path, name):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(5,), chunks=(2,), dtype=name, fill_value=[1.0, 0.5])
    arr[1:2] = np.frombuffer(bytes(range(arr.dtype.itemsize)), dtype=arr.dtype)
    meta = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    assert meta["data_type"] == name
    back = zarr_dask.open_array(tmp_path / "a.zarr")[...]
    assert back.dtype.names == ("real", "imag")
    assert back["real"][4].astype("f8") == 1.0 and back["imag"][4].astype("f8") == 0.5
    assert bits(back[1:2]).tobytes() == bytes(range(arr.dtype.itemsize))


@pytest.mark.parametrize(("name", "fill", "json_fill"), [
    ("bfloat16", np.array(0x7FC1, np.uint16).view(ml_dtypes.bfloat16).reshape(()), "0x7fc1"),
    ("float8_e4m3", "NaN", "NaN"), ("float8_e8m0fnu", 4.0, "0x81"), ("int4", -8, -8), ("uint2", 3, 3),
])  # fmt: skip
def test_fill_values_fill_unwritten_chunks(tmp_path, name, fill, json_fill):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype=name, fill_value=fill)
    assert json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["fill_value"] == json_fill
    expected = arr.metadata.data_type.parse_fill_value(json_fill)
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "a.zarr")[...]),
                                  bits(np.full(4, expected, dtype=arr.dtype)))  # fmt: skip


@pytest.mark.parametrize("name", ["bfloat16", "float6_e3m2fn", "int4", "complex_float8_e4m3"])
def test_sharded(tmp_path, name):
    dtype = zarr_dask.create_array(tmp_path / "x.zarr", shape=(1,), dtype=name).dtype
    raw = np.arange(8 * 9 * dtype.itemsize, dtype=np.uint8) & (0x3F if "6" in name else 0x0F if "4" in name else 0xFF)
    data = raw.view(dtype).reshape(8, 9)
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(8, 9), chunks=(2, 3), shards=(4, 9), dtype=name)
    arr[...] = data
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "a.zarr")[1:7, 2:8]), bits(data[1:7, 2:8]))
    np.testing.assert_array_equal(bits(zarr_dask.from_zarr(tmp_path / "a.zarr").compute()), bits(data))


def test_zarr_v2_refuses_ml_types(tmp_path):
    with pytest.raises(DataTypeError, match="only in Zarr v3"):
        zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), dtype=ml_dtypes.bfloat16, zarr_format=2)
    assert not (tmp_path / "a.zarr").exists()


def test_dask_write_and_read(tmp_path):
    da = pytest.importorskip("dask.array")
    data = patterns(np.dtype(ml_dtypes.bfloat16), "bfloat16")
    zarr_dask.to_zarr(da.from_array(data, chunks=(5, 11)), tmp_path / "a.zarr")
    meta = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    assert meta["data_type"] == "bfloat16"
    np.testing.assert_array_equal(bits(zarr_dask.from_zarr(tmp_path / "a.zarr").compute()), bits(data))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "int4"])
def test_xarray_round_trip(tmp_path, name):
    xr = pytest.importorskip("xarray")
    dtype = np.dtype(getattr(ml_dtypes, name))
    data = patterns(dtype, name)
    ds = xr.Dataset({"w": (("y", "x"), data)}, coords={"y": np.arange(data.shape[0])})
    zarr_dask.to_zarr_dataset(ds, tmp_path / "d.zarr")
    meta = json.loads((tmp_path / "d.zarr" / "w" / "zarr.json").read_text())
    assert meta["data_type"] == name
    back = xr.open_dataset(tmp_path / "d.zarr", engine="zarr_dask")
    assert back["w"].dtype == dtype
    np.testing.assert_array_equal(bits(back["w"].values), bits(data))


def test_zom_cli_and_html_name_the_type(tmp_path):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4, 4), chunks=(2, 2), dtype=ml_dtypes.float8_e5m2)
    spec = zom.ArraySpec.from_store(tmp_path / "a.zarr")
    assert spec.to_json()["data_type"] == "float8_e5m2"
    built = zom.ArraySpec.build(shape=(4, 4), dtype="bfloat16", chunks=(2, 2))
    assert built.to_json()["data_type"] == "bfloat16" and built.to_json()["fill_value"] == 0.0
    built.to_store(tmp_path / "b.zarr")
    assert zarr_dask.open_array(tmp_path / "b.zarr").dtype == np.dtype(ml_dtypes.bfloat16)
    assert "float8_e5m2" in arr._repr_html_() and "float8_e5m2" in spec._repr_html_()
    out = run("info", str(tmp_path / "a.zarr")).stdout
    assert "float8_e5m2" in out and "raw" not in out


def test_complex_types_are_shown_by_their_registered_name(tmp_path):
    group = zarr_dask.create_group(tmp_path / "g.zarr")
    zarr_dask.create_array(tmp_path / "g.zarr", name="w", shape=(4,), chunks=(2,), dtype="complex_bfloat16")
    assert "complex_bfloat16" in group._repr_html_() and "real" not in group._repr_html_()
    for command in ("tree", "info"):
        out = run(command, str(tmp_path / "g.zarr" / "w") if command == "info" else str(tmp_path / "g.zarr")).stdout
        assert "complex_bfloat16" in out and "real" not in out, out
