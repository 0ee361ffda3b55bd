"""User arguments → array metadata (validated completely before anything is written)."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zarr_dask.codecs import v2_codecs_from_user, v3_codecs_from_user
from zarr_dask.errors import MetadataError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, data_type_from_numpy
from zarr_dask.spec.chunk_grid import RectilinearChunkGrid, RegularChunkGrid
from zarr_dask.spec.chunk_keys import (
    DefaultChunkKeyEncoding,
    V2ChunkKeyEncoding,
    parse_chunk_key_encoding,
)

ZarrFormat = Literal[2, 3]
_TARGET_CHUNK_BYTES = 4 * 2**20


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        out = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise MetadataError(f"shape must be a sequence of non-negative integers, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise MetadataError(f"shape must be a sequence of non-negative integers, got {shape!r}")
    return out


def guess_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunks of at most ~4 MiB, halving the largest dimension first (C order keeps trailing dims whole)."""
    chunks = [max(1, s) for s in shape]
    itemsize = max(itemsize, 1)
    while math.prod(chunks) * itemsize > _TARGET_CHUNK_BYTES:
        i = int(np.argmax(chunks))
        if chunks[i] == 1:
            break
        chunks[i] = -(-chunks[i] // 2)
    return tuple(chunks)


def resolve_chunks(
    chunks: Any, shape: tuple[int, ...], itemsize: int
) -> RegularChunkGrid | RectilinearChunkGrid:
    """``chunks`` as zarr-python takes them: "auto"/None, an int (every dim), a tuple of ints (-1 = whole
    dimension), or a tuple of per-dimension edge tuples (a rectilinear grid)."""
    if chunks is None or chunks == "auto" or chunks is True:
        return RegularChunkGrid(chunk_shape=guess_chunks(shape, itemsize))
    if isinstance(chunks, int | np.integer):
        chunks = (int(chunks),) * len(shape)
    chunks = tuple(chunks)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks {chunks!r} must have one entry per dimension of shape {shape!r}")
    if any(isinstance(c, Sequence) for c in chunks):
        per_dim = tuple(tuple(int(e) for e in c) if isinstance(c, Sequence) else int(c) for c in chunks)
        return RectilinearChunkGrid(chunk_shapes=per_dim)
    out = []
    for c, s in zip(chunks, shape, strict=True):
        c = operator.index(c)
        if c == -1 or c is None:
            c = max(s, 1)
        if c < 1:
            raise MetadataError(f"chunk sizes must be positive integers (or -1 for the whole axis), got {chunks!r}")
        out.append(c)
    return RegularChunkGrid(chunk_shape=tuple(out))


def _key_encoding(chunk_key_encoding: Any, zarr_format: ZarrFormat, dimension_separator: str | None) -> Any:
    if zarr_format == 2:
        sep = dimension_separator
        if isinstance(chunk_key_encoding, Mapping):
            sep = chunk_key_encoding.get("configuration", {}).get("separator", sep)
        if sep not in (None, ".", "/"):
            raise MetadataError(f"dimension_separator must be '.' or '/', got {sep!r}")
        return V2ChunkKeyEncoding(separator="/" if sep == "/" else ".")
    if chunk_key_encoding is None:
        return DefaultChunkKeyEncoding(separator="." if dimension_separator == "." else "/")
    if isinstance(chunk_key_encoding, tuple) and len(chunk_key_encoding) == 2:
        chunk_key_encoding = {"name": chunk_key_encoding[0], "configuration": {"separator": chunk_key_encoding[1]}}
    return parse_chunk_key_encoding(chunk_key_encoding)


def build_array_metadata(
    *,
    shape: Any,
    dtype: Any,
    zarr_format: ZarrFormat = 3,
    chunks: Any = "auto",
    fill_value: Any = None,
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    order: Literal["C", "F"] | None = None,
    chunk_key_encoding: Any = None,
    dimension_separator: Literal[".", "/"] | None = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> ArrayMetadataV2 | ArrayMetadataV3:
    """Validate user arguments and build the metadata of a new array (nothing is written here)."""
    if zarr_format not in (2, 3):
        raise MetadataError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    shape_t = _shape(shape)
    data_type = data_type_from_numpy(dtype, zarr_format=zarr_format)
    grid = resolve_chunks(chunks, shape_t, data_type.itemsize or 16)
    fill = data_type.default_fill_value() if fill_value is None else data_type.cast_fill_value(fill_value)
    attrs = dict(attributes or {})
    if dimension_names is not None:
        dimension_names = tuple(dimension_names)
        if len(dimension_names) != len(shape_t):
            raise MetadataError(
                f"dimension_names {list(dimension_names)!r} must have one entry per dimension ({len(shape_t)})"
            )
    if order not in (None, "C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}")
    encoding = _key_encoding(chunk_key_encoding, zarr_format, dimension_separator)
    if zarr_format == 2:
        if not isinstance(grid, RegularChunkGrid):
            raise MetadataError("Zarr v2 supports only regular chunks; use zarr_format=3 for irregular chunks")
        if dimension_names is not None:
            attrs["_ARRAY_DIMENSIONS"] = list(dimension_names)
        compressor, v2_filters = v2_codecs_from_user(data_type=data_type, filters=filters, compressors=compressors)
        return ArrayMetadataV2(
            shape=shape_t,
            chunks=grid.chunk_shape,
            data_type=data_type,
            fill_value=fill,
            order=order or "C",
            compressor=compressor,
            filters=tuple(v2_filters) if v2_filters else None,
            dimension_separator=encoding.separator,
            attributes=attrs,
        )
    codecs = v3_codecs_from_user(
        data_type=data_type, filters=filters, serializer=serializer, compressors=compressors
    )
    return ArrayMetadataV3(
        shape=shape_t,
        data_type=data_type,
        chunk_grid=grid,
        chunk_key_encoding=encoding,
        fill_value=fill,
        codecs=tuple(codecs),
        attributes=attrs,
        dimension_names=dimension_names,
    )
