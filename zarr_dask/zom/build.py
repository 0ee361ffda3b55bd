"""Array specs from in-memory arrays (NumPy, dask, xarray, zarr_dask) and ``create_array``-style arguments.

dask is never imported: a dask array is recognised by its ``chunks`` (a tuple of per-axis chunk tuples).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zarr_dask.core.create import build_array_metadata
from zarr_dask.errors import MetadataError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.chunk_grid import RegularChunkGrid

__all__ = ["metadata_from_array"]

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
_OPTIONS = frozenset(
    {
        "shape", "dtype", "chunks", "shards", "fill_value", "compressors", "filters", "serializer", "order",
        "chunk_key_encoding", "dimension_separator", "dimension_names", "attributes",
    }
)  # fmt: skip


def metadata_from_array(array: Any, *, zarr_format: Literal[2, 3] | None = None, **overrides: Any) -> ArrayMetadata:
    """See :meth:`zarr_dask.zom.ArraySpec.from_array`."""
    unknown = sorted(set(overrides) - _OPTIONS)
    if unknown:
        raise MetadataError(f"unknown argument(s) {unknown} for an array spec; use {sorted(_OPTIONS)}")
    meta = getattr(array, "metadata", None)
    if not isinstance(meta, ArrayMetadataV2 | ArrayMetadataV3):
        meta = None
    if meta is not None and not overrides and zarr_format in (None, meta.zarr_format):
        return meta
    fmt: Literal[2, 3] = zarr_format or (meta.zarr_format if meta is not None else 3)
    if fmt not in (2, 3):
        raise MetadataError(f"zarr_format must be 2 or 3, got {fmt!r}")
    args = _defaults(array, meta, fmt, overrides)
    args.update(overrides)
    if "shape" not in args or "dtype" not in args:
        raise MetadataError("give the array (anything with shape and dtype), or both shape= and dtype=")
    return build_array_metadata(zarr_format=fmt, **args)


def _defaults(array: Any, meta: ArrayMetadata | None, fmt: Literal[2, 3], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """What the array itself says about shape, dtype, chunks, attributes, dimension names, fill value."""
    if array is None:
        return {}
    try:
        shape = tuple(int(s) for s in array.shape)
        dtype = np.dtype(meta.data_type.numpy_dtype if meta is not None else array.dtype)
    except (AttributeError, TypeError) as e:
        raise MetadataError(
            f"cannot describe {type(array).__name__} as a Zarr array ({e}); pass an array with shape and dtype"
        ) from None
    out: dict[str, Any] = {"shape": shape, "dtype": dtype}
    if "shape" not in overrides:
        chunks = _chunks_of(array, meta, shape, fmt, sharded="shards" in overrides)
        if chunks is not None:
            out["chunks"] = chunks
    attrs = meta.attributes if meta is not None else getattr(array, "attrs", None)
    if isinstance(attrs, Mapping):
        out["attributes"] = dict(attrs)
    dims = meta.dimension_names if meta is not None else getattr(array, "dims", None)
    if isinstance(dims, Sequence) and not isinstance(dims, str) and len(dims) == len(shape):
        out["dimension_names"] = tuple(None if d is None else str(d) for d in dims)
        if fmt == 3 and out.get("attributes", {}).get("_ARRAY_DIMENSIONS") is not None:
            out["attributes"] = {k: v for k, v in out["attributes"].items() if k != "_ARRAY_DIMENSIONS"}
        elif fmt == 2:
            out.get("attributes", {}).pop("_ARRAY_DIMENSIONS", None)  # build_array_metadata writes it
    if meta is not None and meta.fill_value is not None and "dtype" not in overrides:
        out["fill_value"] = meta.fill_value
    return out


def _chunks_of(
    array: Any, meta: ArrayMetadata | None, shape: tuple[int, ...], fmt: Literal[2, 3], *, sharded: bool
) -> Any:
    """The array's chunking as a ``chunks`` argument, or None (let ``"auto"`` decide)."""
    if meta is not None:
        grid = meta.chunk_grid
        return grid.chunk_shape if isinstance(grid, RegularChunkGrid) else grid.chunk_shapes
    chunks = getattr(array, "chunks", None)
    if not isinstance(chunks, Sequence) or len(chunks) != len(shape):
        return None
    if all(isinstance(c, int | np.integer) for c in chunks):
        return tuple(max(int(c), 1) for c in chunks)
    if all(isinstance(c, Sequence) for c in chunks):
        return _dask_chunks(chunks, shape, fmt, sharded=sharded)
    return None


def _dask_chunks(chunks: Sequence[Sequence[int]], shape: tuple[int, ...], fmt: Literal[2, 3], *, sharded: bool) -> Any:
    """dask chunks -> regular chunk sizes when every axis is uniform (last chunk may be smaller), else per-axis
    edges (a rectilinear grid, Zarr v3)."""
    per_dim: list[int | tuple[int, ...]] = []
    for axis in chunks:
        edges = tuple(int(e) for e in axis if int(e) > 0)
        if not edges:
            per_dim.append(1)
        elif len(edges) == 1 or (all(e == edges[0] for e in edges[:-1]) and edges[-1] <= edges[0]):
            per_dim.append(edges[0])
        else:
            per_dim.append(edges)
    if all(isinstance(e, int) for e in per_dim):
        return tuple(per_dim)
    irregular = {d: e for d, e in enumerate(per_dim) if not isinstance(e, int)}
    if fmt == 2 or sharded:
        where = "Zarr v2 has only regular chunks" if fmt == 2 else "inner chunks of shards must be regular"
        raise MetadataError(
            f"the dask chunks are irregular along dimension(s) {sorted(irregular)} ({irregular}) and {where}; "
            "rechunk to uniform chunks (x.rechunk(...)), pass chunks=..., or use zarr_format=3 without shards "
            "(a rectilinear chunk grid)"
        )
    return tuple(per_dim)
