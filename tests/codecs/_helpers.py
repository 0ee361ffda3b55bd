"""Helpers for the codec tests: data types, chunk specs, sample data per dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_dask.codecs import ChunkSpec, CodecPipeline
from zarr_dask.spec.dtypes import DataType, data_type_from_numpy


def dt3(dtype: Any, vlen: str | None = None) -> DataType:
    """A v3 data type (native byte order in memory)."""
    if vlen is not None:
        return data_type_from_numpy(str if vlen == "str" else bytes, zarr_format=3)
    return data_type_from_numpy(np.dtype(dtype), zarr_format=3)


def dt2(dtype: Any, vlen: str | None = None) -> DataType:
    """A v2 data type (the stored typestr)."""
    if vlen is not None:
        return data_type_from_numpy(str if vlen == "str" else bytes, zarr_format=2)
    return data_type_from_numpy(np.dtype(dtype), zarr_format=2)


def spec(shape: tuple[int, ...], data_type: DataType, order: str = "C", fill: Any = None) -> ChunkSpec:
    d = data_type.numpy_dtype
    fv = np.zeros((), dtype=d) if fill is None else np.array(fill, dtype=d)
    return ChunkSpec(shape=shape, data_type=data_type, fill_value=fv, order=order)  # type: ignore[arg-type]


def sample(shape: tuple[int, ...], data_type: DataType, seed: int = 0) -> np.ndarray[Any, Any]:
    """Deterministic, compressible-ish data of ``shape`` for ``data_type``."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    d = data_type.numpy_dtype
    if data_type.vlen == "str":
        return np.array([f"s{i % 7}é" * (i % 4) for i in range(n)], dtype=object).reshape(shape)
    if data_type.vlen == "bytes":
        return np.array([bytes([i % 256]) * (i % 5) for i in range(n)], dtype=object).reshape(shape)
    if d.fields is not None:
        out = np.zeros(n, dtype=d)
        for name in d.names or ():
            out[name] = rng.integers(0, 100, n).astype(d[name])
        return out.reshape(shape)
    if d.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if d.kind in "iu":
        return rng.integers(0, min(100, np.iinfo(d).max), n).astype(d).reshape(shape)
    if d.kind == "f":
        return (np.arange(n) / 7).astype(d).reshape(shape)
    if d.kind == "c":
        return (np.arange(n) + 1j * np.arange(n)[::-1]).astype(d).reshape(shape)
    if d.kind in "Mm":
        return np.arange(n).astype("i8").view(d).reshape(shape)
    if d.kind == "U":
        return np.array([f"u{i}"[: d.itemsize // 4] for i in range(n)], dtype=d).reshape(shape)
    if d.kind == "S":
        return np.array([f"b{i}".encode()[: d.itemsize] for i in range(n)], dtype=d).reshape(shape)
    return rng.integers(0, 256, n * d.itemsize).astype("u1").view(d).reshape(shape)


def roundtrip(
    pipeline: CodecPipeline, chunk: np.ndarray[Any, Any], s: ChunkSpec
) -> tuple[bytes, np.ndarray[Any, Any]]:
    encoded = pipeline.encode(chunk, s)
    assert isinstance(encoded, bytes)
    decoded = pipeline.decode(encoded, s)
    assert decoded.shape == s.shape
    assert decoded.dtype == s.data_type.numpy_dtype
    return encoded, decoded


def assert_same(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> None:
    if a.dtype.kind == "O" or b.dtype.kind == "O":
        assert a.shape == b.shape and a.tolist() == b.tolist()
    elif a.dtype.kind in "fc":
        np.testing.assert_array_equal(a, b)
    else:
        assert a.dtype == b.dtype or a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=")
        assert a.tobytes() == np.ascontiguousarray(b).astype(a.dtype).tobytes()
