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
_TARGET_INNER_BYTES = 2**20  # inner chunks of a sharded array chosen by "auto"
_TARGET_SHARD_BYTES = 64 * 2**20  # shards chosen by "auto"
_INDEX_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


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


def guess_chunks(shape: tuple[int, ...], itemsize: int, target: int = _TARGET_CHUNK_BYTES) -> tuple[int, ...]:
    """Chunks of at most ~4 MiB, halving the largest dimension first (C order keeps trailing dims whole)."""
    chunks = [max(1, s) for s in shape]
    itemsize = max(itemsize, 1)
    while math.prod(chunks) * itemsize > target:
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


def _smallest_factor(n: int) -> int:
    return next((f for f in range(2, math.isqrt(n) + 1) if n % f == 0), n)


def _inner_for_shards(units: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Inner chunks of at most ~1 MiB that divide ``units`` (the shard shape, or the gcd of its edges)."""
    inner = list(units)
    while math.prod(inner) * max(itemsize, 1) > _TARGET_INNER_BYTES:
        d = max((i for i in range(len(inner)) if inner[i] > 1), key=lambda i: inner[i], default=None)
        if d is None:
            break
        inner[d] //= _smallest_factor(inner[d])
    return tuple(inner)


def _auto_shards(inner: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Shards of up to ~64 MiB made of whole inner chunks, grown on the smallest axis that has room."""
    factors = [1] * len(inner)
    limits = [max(1, -(-s // c)) for s, c in zip(shape, inner, strict=True)]
    nbytes = math.prod(inner) * max(itemsize, 1)
    while True:
        room = [d for d in range(len(inner)) if factors[d] < limits[d]]
        if not room:
            break
        d = min(room, key=lambda k: factors[k] * inner[k])
        grow = min(2, limits[d] / factors[d])
        if nbytes * grow > _TARGET_SHARD_BYTES:
            break
        new = min(factors[d] * 2, limits[d])
        nbytes = nbytes // factors[d] * new
        factors[d] = new
    return tuple(f * c for f, c in zip(factors, inner, strict=True))


def _shard_units(shards: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Per axis what inner chunks must divide: the shard size, or the gcd of the shard edges."""
    units = []
    for spec, n in zip(shards, shape, strict=True):
        if isinstance(spec, Sequence):
            units.append(math.gcd(*(int(e) for e in spec)))
        else:
            units.append(max(n, 1) if int(spec) == -1 else int(spec))
    return tuple(units)


def _parse_shards(shards: Any) -> tuple[Any, Literal["start", "end"]]:
    if not isinstance(shards, Mapping):
        return shards, "end"
    unknown = sorted(set(shards) - {"shape", "index_location"})
    location = shards.get("index_location", "end")
    if unknown or "shape" not in shards or location not in ("start", "end"):
        raise MetadataError(
            f"shards {dict(shards)!r} must be a shape, 'auto', or {{'shape': ..., 'index_location': 'start' | "
            "'end'}"
        )
    return shards["shape"], "start" if location == "start" else "end"


def resolve_shards(
    shards: Any, chunks: Any, shape: tuple[int, ...], itemsize: int
) -> tuple[RegularChunkGrid | RectilinearChunkGrid, tuple[int, ...], Literal["start", "end"]]:
    """``shards`` and ``chunks`` as zarr-python takes them -> (shard grid, inner chunk shape, index location).

    ``shards``: a shape (``-1`` = the whole axis), per-axis edge tuples (a rectilinear shard grid), ``"auto"``
    (shards of up to ~64 MiB), or ``{"shape": ..., "index_location": "start" | "end"}``. ``chunks`` is then the
    inner chunk shape (regular); ``"auto"`` picks inner chunks of at most ~1 MiB that divide the shards.
    Every shard edge must be a multiple of the inner chunk size.

    Raises
    ------
    MetadataError
        Shards that are not whole multiples of the inner chunks, irregular inner chunks, a bad index location.

    Examples
    --------
    >>> grid, inner, location = resolve_shards({"shape": (-1, 64), "index_location": "start"}, (8, 8), (100, 200), 4)
    >>> grid.chunk_shape, inner, location
    ((104, 64), (8, 8), 'start')
    >>> resolve_shards(((16, 48), (64,)), (16, 32), (64, 64), 4)[0].to_json()["configuration"]["chunk_shapes"]
    [[16, 48], [64]]
    """
    spec, location = _parse_shards(shards)
    auto_chunks = chunks is None or chunks is True or (isinstance(chunks, str) and chunks == "auto")
    if isinstance(spec, str) and spec == "auto":
        if auto_chunks:
            inner = guess_chunks(shape, itemsize, _TARGET_INNER_BYTES)
        else:
            inner = _inner_grid(chunks, shape, itemsize)
        return RegularChunkGrid(chunk_shape=_auto_shards(inner, shape, itemsize)), inner, location
    if isinstance(spec, int | np.integer):
        spec = (int(spec),) * len(shape)
    if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) != len(shape):
        raise MetadataError(f"shards {spec!r} must have one entry per dimension of shape {shape!r}")
    spec = tuple(spec)
    inner = _inner_for_shards(_shard_units(spec, shape), itemsize) if auto_chunks else _inner_grid(chunks, shape, itemsize)
    # -1: the whole axis, rounded up to whole inner chunks
    spec = tuple(
        -(-max(n, 1) // c) * c if not isinstance(e, Sequence) and int(e) == -1 else e
        for e, n, c in zip(spec, shape, inner, strict=True)
    )
    grid = resolve_chunks(spec, shape, itemsize)
    for d, (e, c) in enumerate(zip(spec, inner, strict=True)):
        edges = [int(x) for x in e] if isinstance(e, Sequence) else [int(e)]
        bad = [x for x in edges if x % c]
        if bad:
            raise MetadataError(
                f"shard size {bad[0]} along dimension {d} is not a multiple of the inner chunk size {c}; pick "
                f"shards that are whole multiples of chunks={inner} (or chunks that divide the shards)"
            )
    return grid, inner, location


def _inner_grid(chunks: Any, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    grid = resolve_chunks(chunks, shape, itemsize)
    if not isinstance(grid, RegularChunkGrid):
        raise MetadataError(
            f"with shards=..., chunks {chunks!r} is the inner chunk shape and must be regular; give irregular "
            "edges to shards instead (a rectilinear shard grid), e.g. shards=((20, 40), (100,))"
        )
    return grid.chunk_shape


def _sharding_codec(inner: tuple[int, ...], inner_codecs: list[dict[str, Any]], location: str) -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(inner),
            "codecs": inner_codecs,
            "index_codecs": _INDEX_CODECS,
            "index_location": location,
        },
    }


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
    shards: Any = None,
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
    """Validate user arguments and build the metadata of a new array (nothing is written here).

    With ``shards`` (v3 only; see :func:`resolve_shards`) the chunk grid is the shard grid and the codecs
    (``filters``, ``serializer``, ``compressors``) apply to the inner chunks of shape ``chunks``, inside one
    ``sharding_indexed`` codec with a ``bytes`` + ``crc32c`` index, as zarr-python writes it.
    """
    if zarr_format not in (2, 3):
        raise MetadataError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    shape_t = _shape(shape)
    data_type = data_type_from_numpy(dtype, zarr_format=zarr_format)
    if shards is not None and zarr_format == 2:
        raise MetadataError("Zarr v2 has no sharding; use zarr_format=3 (or leave shards=None)")
    if shards is not None:
        grid, inner, location = resolve_shards(shards, chunks, shape_t, data_type.itemsize or 16)
    else:
        grid, inner, location = resolve_chunks(chunks, shape_t, data_type.itemsize or 16), None, "end"
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
            shape=shape_t, chunks=grid.chunk_shape, data_type=data_type, fill_value=fill, order=order or "C",
            compressor=compressor, filters=tuple(v2_filters) if v2_filters else None,
            dimension_separator=encoding.separator, attributes=attrs,
        )
    codecs = v3_codecs_from_user(
        data_type=data_type, filters=filters, serializer=serializer, compressors=compressors, chunk_shape=inner,
        fill_value=fill,
    )
    if inner is not None:  # the codecs above go inside one sharding codec, checked on the first shard
        codecs = v3_codecs_from_user(
            data_type=data_type,
            serializer=_sharding_codec(inner, codecs, location),
            compressors=None,
            chunk_shape=tuple(g.size(0) for g in grid.dim_grids(shape_t)),
        )
    return ArrayMetadataV3(
        shape=shape_t, data_type=data_type, chunk_grid=grid, chunk_key_encoding=encoding, fill_value=fill,
        codecs=tuple(codecs), attributes=attrs, dimension_names=dimension_names,
    )
