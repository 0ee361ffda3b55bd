"""The ML data types against tensorstore's ``zarr3`` driver (test-only oracle), both directions, bit exact.

tensorstore 0.1.86 implements bfloat16, float8_e3m4, float8_e4m3b11fnuz, float8_e4m3fn (unregistered),
float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn, int2 and int4; not the registered
float8_e4m3, the float6 types, uint2/uint4 or the complex_* variants.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import FillValueError, FillValueWarning
from zarr_dask.spec.ml_types import low_bits

ts = pytest.importorskip("tensorstore", reason="tensorstore is a test extra (not installable on this Python?)")
ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.oracle

TENSORSTORE_TYPES = ["bfloat16", "float8_e3m4", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                     "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int2", "int4"]  # fmt: skip
WIDTH = {"float4_e2m1fn": 4, "int2": 2, "int4": 4}


def bits(arr: np.ndarray) -> np.ndarray:
    """The bytes of ``arr``, upper bits of the sub-byte types cleared (the registry ignores them)."""
    return np.ascontiguousarray(low_bits(arr)).view(np.uint8)


def patterns(name: str) -> np.ndarray:
    dtype = np.dtype(getattr(ml_dtypes, name))
    if dtype.itemsize == 2:  # NaN payloads, subnormals, both zeros, infinities
        return np.concatenate([np.arange(0, 2**16, 97, dtype=np.uint16),
                               np.array([0x7FC1, 0xFF81, 0x8000, 0x0001, 0x7F80], np.uint16)]).view(dtype)  # fmt: skip
    raw = np.arange(2 ** WIDTH.get(name, 8), dtype=np.uint8)
    if name.startswith("int"):  # tensorstore stores the sign-extended byte
        raw = raw.view(dtype).astype(np.int8).view(np.uint8)
    return raw.view(dtype)


def ts_open(path, **kwargs):
    return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, **kwargs).result()


@pytest.mark.parametrize("name", TENSORSTORE_TYPES)
def test_tensorstore_writes_we_read(tmp_path, name):
    data = patterns(name)
    t = ts_open(tmp_path / "t.zarr", create=True, dtype=name, shape=data.shape,
                chunk_layout=ts.ChunkLayout(chunk_shape=[64]))  # fmt: skip
    t[...] = data
    arr = zarr_dask.open_array(tmp_path / "t.zarr")
    assert arr.dtype == np.dtype(getattr(ml_dtypes, name))
    np.testing.assert_array_equal(bits(arr[...]), bits(data))
    np.testing.assert_array_equal(bits(zarr_dask.from_zarr(tmp_path / "t.zarr").compute()), bits(data))


@pytest.mark.parametrize("name", TENSORSTORE_TYPES)
def test_we_write_tensorstore_reads(tmp_path, name):
    data = patterns(name)
    arr = zarr_dask.create_array(tmp_path / "z.zarr", shape=data.shape, chunks=(64,), dtype=getattr(ml_dtypes, name))
    arr[...] = data
    back = ts_open(tmp_path / "z.zarr").read().result()
    assert back.dtype == data.dtype
    np.testing.assert_array_equal(bits(back), bits(data))


@pytest.mark.parametrize(("name", "fill"), [
    ("bfloat16", "NaN"), ("bfloat16", "0x7fc1"), ("bfloat16", "-Infinity"), ("float8_e5m2", "0x7f"),
    ("float8_e4m3fn", "NaN"), ("float8_e4m3fnuz", "NaN"), ("float8_e8m0fnu", "NaN"), ("float8_e8m0fnu", "0x81"),
    ("float8_e8m0fnu", "0x00"), ("float4_e2m1fn", -6.0), ("int4", -8), ("int2", 1),
])  # fmt: skip
def test_fill_values_agree_both_ways(tmp_path, name, fill):
    arr = zarr_dask.create_array(tmp_path / "z.zarr", shape=(4,), chunks=(2,), dtype=name, fill_value=fill)
    ours = arr.metadata.data_type.parse_fill_value(fill)
    assert json.loads((tmp_path / "z.zarr" / "zarr.json").read_text())["fill_value"] == fill
    np.testing.assert_array_equal(bits(ts_open(tmp_path / "z.zarr").read().result()), bits(np.full(4, ours)))
    ts_open(tmp_path / "t.zarr", create=True, dtype=name, shape=[4], fill_value=np.full((), ours))
    if name == "float8_e8m0fnu" and fill not in ("NaN", "0x00"):  # tensorstore writes 4.0 as -7.4e19
        with pytest.raises(FillValueError, match="within the range of float8_e8m0fnu"):
            zarr_dask.open_array(tmp_path / "t.zarr")
        return
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "t.zarr")[...]), bits(np.full(4, ours)))


def test_tensorstore_default_e8m0fnu_fill_is_bits_zero(tmp_path):
    """tensorstore writes the e8m0fnu default fill (bits 0x00) as 0.0: we read it as bits 0x00, not NaN."""
    ts_open(tmp_path / "t.zarr", create=True, dtype="float8_e8m0fnu", shape=[3])
    assert json.loads((tmp_path / "t.zarr" / "zarr.json").read_text())["fill_value"] == 0.0
    assert bits(zarr_dask.open_array(tmp_path / "t.zarr")[...]).tolist() == [0, 0, 0]


E8M0_FILLS = [0x00, 0x01, 0x40, 0x41, 0x7F, 0x80, 0xFE, 0xFF]


@pytest.mark.parametrize("fill", E8M0_FILLS)
def test_e8m0fnu_fill_values_tensorstore_writes(tmp_path, fill):
    """tensorstore 0.1.86 writes an e8m0fnu fill value of bits ``b`` as the number ``2**(b - 63)`` (negative from
    0x80 on), the registry reads a number as its value: zarr_dask reads the registry's way and says so (or refuses
    the negative ones), naming the hex spelling that both read alike; with it, every value agrees."""
    dtype = np.dtype(ml_dtypes.float8_e8m0fnu)
    t = ts_open(tmp_path / "t.zarr", create=True, dtype="float8_e8m0fnu", shape=[320],
                chunk_layout=ts.ChunkLayout(chunk_shape=[64]), fill_value=np.array(fill, np.uint8).view(dtype))  # fmt: skip
    t[:256] = np.arange(256, dtype=np.uint8).view(dtype)  # the last chunk stays absent
    expected = bits(t.read().result())
    stored = json.loads((tmp_path / "t.zarr" / "zarr.json").read_text())["fill_value"]
    if fill in (0x00, 0xFF):  # 0.0 and "NaN": read alike
        np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "t.zarr")[...]), expected)
        return
    if fill >= 0x80:
        with pytest.raises(FillValueError, match=f"has no sign; tensorstore 0.1.86 writes the bits 0x{fill:02x}"):
            zarr_dask.open_array(tmp_path / "t.zarr")
    else:
        with pytest.warns(FillValueWarning, match=f"means bits 0x{fill:02x}. If tensorstore wrote this array, set the "
                                                  f"fill value to '0x{fill:02x}'"):  # fmt: skip
            registry = zarr_dask.open_array(tmp_path / "t.zarr")[...]
        assert bits(registry[256:]).tolist() == [round(np.log2(stored)) + 127] * 64  # the number's own value
    doc = json.loads((tmp_path / "t.zarr" / "zarr.json").read_text())
    doc["fill_value"] = f"0x{fill:02x}"  # the fix the message names
    (tmp_path / "t.zarr" / "zarr.json").write_text(json.dumps(doc))
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "t.zarr")[...]), expected)
    np.testing.assert_array_equal(bits(ts_open(tmp_path / "t.zarr").read().result()), expected)


@pytest.mark.parametrize("fill", E8M0_FILLS)
def test_e8m0fnu_fill_values_we_write_tensorstore_reads(tmp_path, fill):
    dtype = np.dtype(ml_dtypes.float8_e8m0fnu)
    value = np.array(fill, np.uint8).view(dtype).reshape(())
    arr = zarr_dask.create_array(tmp_path / "z.zarr", shape=(320,), chunks=(64,), dtype=dtype, fill_value=value)
    arr[:256] = np.arange(256, dtype=np.uint8).view(dtype)
    assert json.loads((tmp_path / "z.zarr" / "zarr.json").read_text())["fill_value"] in (f"0x{fill:02x}", "NaN")
    expected = np.concatenate([np.arange(256, dtype=np.uint8), np.full(64, fill, np.uint8)])
    np.testing.assert_array_equal(bits(ts_open(tmp_path / "z.zarr").read().result()), expected)
    np.testing.assert_array_equal(bits(zarr_dask.open_array(tmp_path / "z.zarr")[...]), expected)
