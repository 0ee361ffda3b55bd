"""Complex values into the complex ML types (issue 38): the real and imaginary parts land in their own fields on
every write path, and ml_dtypes' ``bcomplex32`` / ``complex32`` are the registered types of the same layout.

NumPy casts a complex number to the record ``[("real", T), ("imag", T)]`` by copying its real part into both
fields (a real number too); these tests fail on code that lets NumPy make that cast.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import DataTypeError
from zarr_dask.spec.ml_types import cast_values, ml_dtype

ml_dtypes = pytest.importorskip("ml_dtypes")

COMPLEX = ["complex_float16", "complex_bfloat16", "complex_float8_e3m4", "complex_float8_e4m3",
           "complex_float8_e4m3b11fnuz", "complex_float8_e4m3fnuz", "complex_float8_e5m2", "complex_float8_e5m2fnuz",
           "complex_float6_e2m3fn", "complex_float6_e3m2fn", "complex_float4_e2m1fn"]  # fmt: skip
#: values every one of these types holds exactly (float4_e2m1fn: 0, 0.5, 1, 1.5, 2, 3, 4, 6)
VALUES = np.array([1 + 2j, 3 - 4j, -0.5 + 1.5j, 6 - 0.5j])


def parts(arr: np.ndarray) -> list[tuple[float, float]]:
    return [(float(r), float(i)) for r, i in zip(arr["real"].astype("f8"), arr["imag"].astype("f8"), strict=True)]


def expected(values: np.ndarray) -> list[tuple[float, float]]:
    return [(float(v.real), float(v.imag)) for v in values]


@pytest.mark.parametrize("name", COMPLEX)
def test_setitem_keeps_the_imaginary_part(tmp_path, name):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype=name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's ComplexWarning of the old cast
        arr[:] = VALUES.astype("c8")
    assert parts(zarr_dask.open_array(tmp_path / "a.zarr")[...]) == expected(VALUES)


@pytest.mark.parametrize("name", ["complex_float16", "complex_float4_e2m1fn"])
def test_every_setter(tmp_path, name):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4, 4), chunks=(2, 2), dtype=name)
    arr[0] = VALUES
    arr.oindex[[1], :] = VALUES[None, ::-1]
    arr.vindex[[2, 2, 2, 2], [0, 1, 2, 3]] = VALUES
    arr.blocks[1, :] = np.full((2, 4), 1 + 1j)  # rows 2 and 3
    arr[3, 3] = 2j
    arr.set_mask_selection(np.eye(4, dtype=bool) & (np.arange(4) == 1)[:, None], 0.5j)  # [1, 1]
    back = arr[...]
    assert parts(back[0]) == expected(VALUES)
    assert parts(back[1]) == expected(np.array([VALUES[3], 0.5j, VALUES[1], VALUES[0]]))
    assert parts(back[2]) == [(1.0, 1.0)] * 4
    assert parts(back[3]) == [(1.0, 1.0)] * 3 + [(0.0, 2.0)]


@pytest.mark.parametrize("name", ["complex_float16", "complex_float8_e5m2"])
def test_real_numbers_have_imaginary_part_zero(tmp_path, name):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype=name)
    arr[:2] = 1.5
    arr[2:] = np.array([2, 3], dtype="i4")
    assert parts(arr[...]) == [(1.5, 0.0), (1.5, 0.0), (2.0, 0.0), (3.0, 0.0)]
    arr[:] = [(1.0, 2.0), (3.0, 4.0), (0.5, 0.5), (1.0, 1.0)]  # NumPy's record spelling stays records
    assert parts(arr[...]) == [(1.0, 2.0), (3.0, 4.0), (0.5, 0.5), (1.0, 1.0)]


def test_append_and_fill_value(tmp_path):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(2,), chunks=(2,), dtype="complex_bfloat16",
                                 fill_value=np.complex64(3 - 1j))  # fmt: skip
    assert parts(arr[...]) == [(3.0, -1.0)] * 2
    arr.append(VALUES)
    assert parts(arr[...]) == [(3.0, -1.0)] * 2 + expected(VALUES)
    assert json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["fill_value"] == [3.0, -1.0]


#: ml_dtypes' complex types came with 0.6 (the minimum-versions leg has 0.5)
needs_ml_complex = pytest.mark.skipif(
    not hasattr(ml_dtypes, "bcomplex32"), reason=f"ml_dtypes {ml_dtypes.__version__} has no bcomplex32 / complex32 (0.6 has)"
)


@needs_ml_complex
@pytest.mark.parametrize(("ml", "name"), [("bcomplex32", "complex_bfloat16"), ("complex32", "complex_float16")])
def test_ml_dtypes_complex_types_are_the_registered_types(tmp_path, ml, name):
    dtype = np.dtype(getattr(ml_dtypes, ml))
    data = VALUES.astype(dtype)
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype=dtype,
                                 fill_value=np.array(1j).astype(dtype))  # fmt: skip
    assert json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["data_type"] == name
    assert arr.dtype == ml_dtype(name)
    assert parts(arr[...]) == [(0.0, 1.0)] * 4
    arr[:] = data
    back = arr[...]
    assert parts(back) == expected(VALUES)
    assert back.tobytes() == data.tobytes()  # the same layout: bcomplex32 data is a view of what we read
    with pytest.raises(DataTypeError, match="only in Zarr v3"):
        zarr_dask.create_array(tmp_path / "v2.zarr", shape=(4,), dtype=dtype, zarr_format=2)


@needs_ml_complex
def test_ml_dtypes_complex_nan_payloads_are_bit_exact():
    raw = np.array([0x7FC1, 0xFF81, 0x8000, 0x0001], dtype=np.uint16)
    data = raw.view(ml_dtypes.bcomplex32)
    assert cast_values(data, ml_dtype("complex_bfloat16")).view(np.uint16).tolist() == raw.tolist()


@needs_ml_complex
def test_dask_writes(tmp_path):
    da = pytest.importorskip("dask.array")
    zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), dtype="complex_float16")
    zarr_dask.to_zarr(da.from_array(VALUES.astype("c8"), chunks=3), tmp_path / "a.zarr", region=(slice(0, 4),))
    assert parts(zarr_dask.from_zarr(tmp_path / "a.zarr").compute()) == expected(VALUES)
    zarr_dask.to_zarr(da.from_array(VALUES, chunks=4), tmp_path / "b.zarr", dtype="complex_float8_e4m3", chunks=(2,))
    assert parts(zarr_dask.open_array(tmp_path / "b.zarr")[...]) == expected(VALUES)
    bc = da.from_array(VALUES.astype(ml_dtypes.bcomplex32), chunks=3)
    zarr_dask.to_zarr(bc, tmp_path / "c.zarr", chunks=(2,))
    arr = zarr_dask.open_array(tmp_path / "c.zarr")
    assert arr.metadata.data_type.name == "complex_bfloat16" and parts(arr[...]) == expected(VALUES)


@needs_ml_complex
def test_xarray_writes(tmp_path):
    xr = pytest.importorskip("xarray")
    da = pytest.importorskip("dask.array")
    ds = xr.Dataset({"v": ("x", VALUES), "w": ("x", da.from_array(VALUES.astype(ml_dtypes.bcomplex32), chunks=3))})
    zarr_dask.to_zarr_dataset(ds, tmp_path / "a.zarr", encoding={"v": {"dtype": ml_dtypes.complex32}})
    for var, name in (("v", "complex_float16"), ("w", "complex_bfloat16")):
        arr = zarr_dask.open_array(tmp_path / "a.zarr", path=var)
        assert arr.metadata.data_type.name == name and parts(arr[...]) == expected(VALUES)
    assert parts(xr.open_dataset(tmp_path / "a.zarr", engine="zarr_dask")["w"].values) == expected(VALUES)


@pytest.mark.parametrize("name", ["complex_float16", "complex_bfloat16", "complex_float8_e4m3", "complex_float4_e2m1fn"])
def test_what_we_read_writes_back_as_the_same_type(tmp_path, name):
    """from_zarr -> to_zarr and open_dataset -> to_zarr_dataset keep the complex type (the record a complex_*
    array reads as is that type again, not a struct, nor refused for its ml_dtypes fields)."""
    xr = pytest.importorskip("xarray")
    arr = zarr_dask.create_array(tmp_path / "g.zarr", name="v", shape=(4,), chunks=(2,), dtype=name,
                                 dimension_names=["x"])  # fmt: skip
    arr[...] = VALUES
    zarr_dask.to_zarr(zarr_dask.from_zarr(tmp_path / "g.zarr", component="v"), tmp_path / "d.zarr")
    ds = xr.open_dataset(tmp_path / "g.zarr", engine="zarr_dask", consolidated=False)
    zarr_dask.to_zarr_dataset(ds, tmp_path / "x.zarr")
    for url, path in ((tmp_path / "d.zarr", ""), (tmp_path / "x.zarr", "v")):
        back = zarr_dask.open_array(url, path=path)
        assert back.metadata.data_type.name == name and parts(back[...]) == expected(VALUES)
    struct = zarr_dask.create_array(tmp_path / "s.zarr", shape=(1,), dtype=[("real", "f4"), ("imag", "f4")])
    assert struct.metadata.data_type.name == "struct"  # float32 parts: a struct (complex64 is NumPy's c8)


@pytest.mark.parametrize("name", ["complex_float16", "complex_bfloat16", "complex_float8_e4m3"])
@pytest.mark.parametrize("lazy", [False, True])
def test_xarray_encoding_names_the_complex_type(tmp_path, name, lazy):
    xr = pytest.importorskip("xarray")
    da = pytest.importorskip("dask.array")
    ds = xr.Dataset({"v": ("x", da.from_array(VALUES, chunks=3) if lazy else VALUES)})
    zarr_dask.to_zarr_dataset(ds, tmp_path / "a.zarr", encoding={"v": {"dtype": name}})
    arr = zarr_dask.open_array(tmp_path / "a.zarr", path="v")
    assert arr.metadata.data_type.name == name and parts(arr[...]) == expected(VALUES)
