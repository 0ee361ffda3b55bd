"""``write_empty_chunks=False``: a chunk is empty only when it holds the fill value's bits (issue 38).

-0.0 is not 0.0, a NaN of another payload is not the fill NaN: such chunks are stored, chunked or sharded, so
they read back bit for bit (before the fix the unsharded path compared values and dropped them).
"""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask

ml_dtypes = pytest.importorskip("ml_dtypes")

NAN_F4 = np.array(0x7FC00000, np.uint32).view("f4")[()]
OTHER_NAN_F4 = np.array(0x7FC00001, np.uint32).view("f4")[()]
CASES = [
    ("f4", 0.0, np.float32(-0.0)),
    ("f4", -0.0, np.float32(0.0)),
    ("f8", "NaN", np.array(0x7FF8000000000001, np.uint64).view("f8")[()]),
    ("f8", "NaN", np.array(0xFFF8000000000000, np.uint64).view("f8")[()]),  # -NaN
    ("f4", "0x7fc00001", NAN_F4),
    ("c16", [0.0, 0.0], complex(0.0, -0.0)),
    ("c16", [1.0, -0.0], complex(1.0, 0.0)),  # a fill value of unequal words
    ([("a", "<f4"), ("b", "<u1")], {"a": 0.0, "b": 0}, np.array((-0.0, 0), [("a", "<f4"), ("b", "<u1")])[()]),
    ("c8", [0.0, 0.0], np.complex64(complex(-0.0, 0.0))),
    ("bfloat16", 0.0, np.array(0x8000, np.uint16).view(ml_dtypes.bfloat16)[()]),
    ("bfloat16", "NaN", np.array(0x7FC1, np.uint16).view(ml_dtypes.bfloat16)[()]),
    ("float8_e5m2", 0.0, np.array(0x80, np.uint8).view(ml_dtypes.float8_e5m2)[()]),
    ("complex_float16", [0.0, 0.0], np.array([0, 0x8000], np.uint16).view([("real", "<f2"), ("imag", "<f2")])[0]),
]


@pytest.mark.parametrize("shards", [None, (4,)], ids=["chunked", "sharded"])
@pytest.mark.parametrize(("dtype", "fill", "value"), CASES)
def test_other_bits_than_the_fill_value_are_stored(tmp_path, dtype, fill, value, shards):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), shards=shards, dtype=dtype,
                                 fill_value=fill)  # fmt: skip
    data = np.full(4, value, dtype=arr.dtype)
    arr[...] = data
    assert zarr_dask.open_array(tmp_path / "a.zarr")[...].tobytes() == data.tobytes()
    assert zarr_dask.from_zarr(tmp_path / "a.zarr").compute().tobytes() == data.tobytes()


@pytest.mark.parametrize("shards", [None, (4,)], ids=["chunked", "sharded"])
def test_the_fill_value_bits_are_not_stored(tmp_path, shards):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(4,), chunks=(2,), shards=shards, dtype="f4",
                                 fill_value="0x7fc00001")  # fmt: skip
    arr[...] = OTHER_NAN_F4
    assert arr.nchunks_initialized == 0
    arr[...] = np.float32(-0.0)
    assert arr.nchunks_initialized > 0
    arr[...] = OTHER_NAN_F4
    assert arr.nchunks_initialized == 0
