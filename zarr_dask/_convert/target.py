"""What a conversion writes: the selected part of the source hierarchy, re-described for the target.

Per array the target metadata keeps the data type, the fill value, the attributes and the dimension names,
and changes what was asked: the Zarr format, the (inner) chunk shape, the shard shape and the compressors.
Filters and the serializer are carried over (translated between formats). Arrays that look like xarray
variables (they have dimension names) keep their CF missing-value meaning across formats: xarray masks the
Zarr ``fill_value`` of v2 arrays but the ``_FillValue`` attribute of v3 arrays, so a v2 fill value becomes a
``_FillValue`` attribute in v3 (encoded as xarray does) and back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zarr_dask._convert.dims import LayoutChange
from zarr_dask.codecs import ArrayArrayCodec, ArrayBytesCodec, v2_codecs_from_user, v3_codecs_from_user
from zarr_dask.codecs.registry import codec_from_v3
from zarr_dask.core.create import build_array_metadata, resolve_chunks, resolve_shards
from zarr_dask.errors import MetadataError, ZarrDaskError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.chunk_grid import RectilinearChunkGrid, RegularChunkGrid
from zarr_dask.spec.json import prefixed
from zarr_dask.spec.layout import flat_codecs, sharding_of
from zarr_dask.zom import ArraySpec, GroupSpec
from zarr_dask.zom.v2_to_v3 import array_to_format

__all__ = ["TargetOptions", "inner_chunks", "select", "shard_shape", "target_array", "target_tree"]

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
ZarrFormat = Literal[2, 3]
_INDEX_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    """What to change. ``"keep"`` keeps the source's choice.

    Attributes
    ----------
    zarr_format
        2, 3 or None (keep each node's format).
    chunks
        ``"keep"``, ``"auto"``, ``{dimension name or axis: size}`` (-1 = whole dimension; unnamed dimensions
        keep their size) or a tuple (arrays of that many dimensions only). The inner chunks when sharded.
    shards
        ``"keep"``, None (unsharded), ``"auto"``, ``{dimension: size}`` (unnamed dimensions keep their shard
        size, or get one chunk when the source is not sharded) or a tuple.
    compressors
        ``"keep"``, None (no compression) or anything :func:`zarr_dask.create_array` takes.
    """

    zarr_format: ZarrFormat | None = None
    chunks: Any = "keep"
    shards: Any = "keep"
    compressors: Any = "keep"


# ------------------------------------------------------------------------------------------ selection
def _matches(path: str, patterns: Sequence[str]) -> bool:
    parts = path.split("/")
    chain = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(p, pat.strip("/")) for p in chain for pat in patterns)


def select(node: GroupSpec, include: Sequence[str] = (), exclude: Sequence[str] = (), prefix: str = "") -> GroupSpec:
    """The part of a hierarchy selected by shell patterns on node paths (``"fields/*"``, ``"*/temp"``).

    A node is selected when it or an ancestor matches an ``include`` pattern (every node, without any) and
    neither it nor an ancestor matches an ``exclude`` pattern; groups on the way to a selected node are kept.
    """
    members: dict[str, ArraySpec | GroupSpec] = {}
    for name, child in (node.members or {}).items():
        path = f"{prefix}/{name}" if prefix else name
        if exclude and _matches(path, exclude):
            continue
        if isinstance(child, GroupSpec):
            sub = select(child, include, exclude, path)
            if sub.members or not include or _matches(path, include):
                members[name] = sub
        elif not include or _matches(path, include):
            members[name] = child
    return dataclasses.replace(node, members=members)


# ------------------------------------------------------------------------------------------ hierarchy
def _is_dimension_coordinate(name: str, meta: ArrayMetadata) -> bool:
    return len(meta.shape) == 1 and meta.dimension_names is not None and meta.dimension_names[0] == name


def target_tree(
    node: ArraySpec | GroupSpec, options: TargetOptions, path: str = "",
    changes: dict[str, list[LayoutChange]] | None = None,
) -> ArraySpec | GroupSpec:  # fmt: skip
    """The target spec of a (selected) source spec; errors name the node.

    Dimension coordinates (1-D arrays named like their dimension, xarray's indexes, read whole) keep their
    chunks and shards when those are given per dimension name. ``changes`` (when given) receives, per array
    path, the layout changes made without being asked (:class:`~zarr_dask._convert.dims.LayoutChange`).
    """
    if isinstance(node, ArraySpec):
        if _is_dimension_coordinate(path.rpartition("/")[2], node.metadata):
            options = dataclasses.replace(
                options,
                chunks=options.chunks if not isinstance(options.chunks, Mapping) else "keep",
                shards=options.shards if not isinstance(options.shards, Mapping) else "keep",
            )
        found: list[LayoutChange] = []
        try:
            spec = ArraySpec(metadata=target_array(node.metadata, options, changes=found))
        except ZarrDaskError as e:
            raise prefixed(e, f"array {'/' + path!r}") from None
        if changes is not None and found:
            changes[path] = found
        return spec
    fmt = options.zarr_format or node.zarr_format
    members = {
        name: target_tree(child, options, f"{path}/{name}" if path else name, changes)
        for name, child in (node.members or {}).items()
    }
    return GroupSpec(
        zarr_format=fmt,
        attributes=dict(node.attributes),
        members=members,
        extra_fields=node.extra_fields if fmt == node.zarr_format else {},
    )


# ------------------------------------------------------------------------------------------ one array
def _split_codecs(codecs: Sequence[Any]) -> tuple[list[Any], Any, list[Any]]:
    """v3 codec JSON -> (array->array, array->bytes, bytes->bytes)."""
    filters: list[Any] = []
    serializer: Any = None
    compressors: list[Any] = []
    for entry in codecs:
        codec = codec_from_v3(entry, allow_unsafe=True)  # what is there already passed the open checks
        if isinstance(codec, ArrayArrayCodec):
            filters.append(entry)
        elif isinstance(codec, ArrayBytesCodec):
            serializer = entry
        else:
            compressors.append(entry)
    return filters, serializer, compressors


def inner_chunks(meta: ArrayMetadata) -> tuple[int, ...]:
    """The chunk shape of the array: the inner chunk of a sharded array, else the (largest) chunk."""
    sharding = sharding_of(meta)
    if sharding is not None and sharding.leading:
        return sharding.inner_chunk_shape
    grids = meta.chunk_grid.dim_grids(meta.shape)
    return tuple(max((g.size(i) for i in range(g.nchunks())), default=1) for g in grids)


def shard_shape(meta: ArrayMetadata) -> tuple[int, ...] | None:
    if sharding_of(meta) is not None:
        grids = meta.chunk_grid.dim_grids(meta.shape)
        return tuple(max((g.size(i) for i in range(g.nchunks())), default=1) for g in grids)
    return None


def _per_dim(spec: Any, meta: ArrayMetadata, default: Sequence[int | None], what: str) -> tuple[int | None, ...]:
    """Per-dimension sizes from a ``{name or axis: size}`` mapping or a tuple (-1 = whole dimension)."""
    shape = meta.shape
    if isinstance(spec, tuple | list):
        if len(spec) != len(shape):
            raise MetadataError(
                f"{what} {tuple(spec)} has {len(spec)} entries but the array has {len(shape)} dimensions; "
                "name the dimensions instead (e.g. 'time=24,lat=90'), which applies to every array that has them"
            )
        items: list[Any] = list(spec)
    else:
        names = meta.dimension_names or (None,) * len(shape)
        items = [spec.get(n, spec.get(d, default[d])) if n is not None else spec.get(d, default[d]) for d, n in enumerate(names)]
    return tuple(None if v is None else (max(n, 1) if int(v) == -1 else int(v)) for v, n in zip(items, shape, strict=True))


def _clip(sizes: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(max(1, min(int(c), max(n, 1))) for c, n in zip(sizes, shape, strict=True))


def _new_chunks(meta: ArrayMetadata, options: TargetOptions) -> Any:
    """The (inner) chunk argument: a tuple, "auto", or the kept rectilinear grid."""
    spec = options.chunks
    if isinstance(spec, str) and spec == "auto":
        return "auto"
    if spec is None or (isinstance(spec, str) and spec == "keep"):
        if isinstance(meta.chunk_grid, RectilinearChunkGrid) and shard_shape(meta) is None:
            return meta.chunk_grid
        return inner_chunks(meta)
    sizes = _per_dim(spec, meta, inner_chunks(meta), "--chunks")
    return _clip([s if s is not None else 1 for s in sizes], meta.shape)


def _new_shards(meta: ArrayMetadata, options: TargetOptions, chunks: Any) -> Any:
    """The shards argument of the target (None = unsharded)."""
    spec = options.shards
    if isinstance(spec, str) and spec == "keep":
        return shard_shape(meta) if options.zarr_format != 2 else None
    if spec is None or (isinstance(spec, str) and spec == "auto"):
        return spec
    if not isinstance(chunks, tuple):
        chunks = inner_chunks(meta)
    sizes = _per_dim(spec, meta, (None,) * len(meta.shape), "--shards")
    kept = shard_shape(meta)
    if isinstance(spec, Mapping) and all(s is None for s in sizes) and kept is None:
        return None  # the array has none of the named dimensions: no sharding
    default = kept or chunks  # dimensions not named keep their shard size (one chunk if unsharded)
    return tuple(d if s is None else s for s, d in zip(sizes, default, strict=True))


def _fit_chunks(meta: ArrayMetadata, options: TargetOptions, chunks: Any, shards: Any, changes: list[LayoutChange]) -> Any:
    """Kept (not asked for) inner chunk sizes shrink to divide the asked shard sizes: ``--shards lat=6`` over
    chunks of 12 gives inner chunks of 6 (the gcd), recorded in ``changes``; chunk sizes given explicitly are
    never changed."""
    if not isinstance(chunks, tuple) or not isinstance(shards, tuple):
        return chunks
    spec = options.chunks
    names = meta.dimension_names or (None,) * len(chunks)
    explicit = [
        isinstance(spec, tuple | list) or (isinstance(spec, Mapping) and (d in spec or (n is not None and n in spec)))
        for d, n in enumerate(names)
    ]
    fitted = tuple(c if e or s % c == 0 else math.gcd(c, s) for c, s, e in zip(chunks, shards, explicit, strict=True))
    changes += [
        LayoutChange(dimension=d if n is None else n, kept=c, shard=s, used=f)
        for d, (n, c, s, f) in enumerate(zip(names, chunks, shards, fitted, strict=True)) if f != c
    ]  # fmt: skip
    return fitted


def _clip_shards(shape: Sequence[int], chunks: Any, shards: Any) -> Any:
    """Shards no longer than their dimension (rounded up to whole chunks)."""
    if not isinstance(chunks, tuple) or not isinstance(shards, tuple):
        return shards
    return tuple(min(s, -(-max(n, 1) // c) * c) for s, c, n in zip(shards, chunks, shape, strict=True))


def _xarray_fill_to_v3(meta: ArrayMetadataV2, attributes: dict[str, Any]) -> dict[str, Any]:
    """v2 xarray variables mask the Zarr fill value; v3 ones the ``_FillValue`` attribute."""
    if meta.dimension_names is None or meta.fill_value is None or "_FillValue" in attributes:
        return attributes
    from zarr_dask.xarray_backend.encoding import encode_fill_value_attr

    value = meta.fill_value[()]
    with contextlib.suppress(TypeError, ValueError):  # a fill value xarray cannot express either: none to carry
        attributes["_FillValue"] = encode_fill_value_attr(value, meta.data_type.numpy_dtype, meta.data_type.vlen)
    return attributes


def _v3(meta: ArrayMetadata, options: TargetOptions, changes: list[LayoutChange]) -> ArrayMetadataV3:
    m3: Any = meta if isinstance(meta, ArrayMetadataV3) else array_to_format(meta, 3, chunk_key_encoding="default")
    attributes = dict(m3.attributes)
    if isinstance(meta, ArrayMetadataV2):
        attributes = _xarray_fill_to_v3(meta, attributes)
    sharding = sharding_of(m3)
    filters, serializer, compressors = _split_codecs(flat_codecs(m3.codecs))
    if not (isinstance(options.compressors, str) and options.compressors == "keep"):
        compressors = options.compressors
    chunks = _new_chunks(meta, options)
    shards = _new_shards(meta, options, chunks)
    chunks = _fit_chunks(meta, options, chunks, shards, changes)
    shards = _clip_shards(meta.shape, chunks, shards)
    itemsize = m3.data_type.itemsize or 16
    if shards is not None:
        location = sharding.configuration.get("index_location", "end") if sharding else "end"
        spec = shards if isinstance(shards, str) else {"shape": shards, "index_location": location}
        try:
            grid, inner, location = resolve_shards(spec, chunks, m3.shape, itemsize)
        except MetadataError as e:
            raise MetadataError(e.problem + _shard_fix(m3, shards, chunks)) from None
        inner_codecs = v3_codecs_from_user(
            data_type=m3.data_type, filters=filters, serializer=serializer, compressors=compressors, chunk_shape=inner,
            allow_unsafe_codecs=True,
        )
        config = {"chunk_shape": list(inner), "codecs": inner_codecs, "index_codecs": _INDEX_CODECS, "index_location": location}
        new_codecs = v3_codecs_from_user(
            data_type=m3.data_type, serializer={"name": "sharding_indexed", "configuration": config}, compressors=None,
            chunk_shape=tuple(g.size(0) for g in grid.dim_grids(m3.shape)), allow_unsafe_codecs=True,
        )
    else:
        grid = chunks if isinstance(chunks, RectilinearChunkGrid) else resolve_chunks(chunks, m3.shape, itemsize)
        unit = tuple(g.size(0) for g in grid.dim_grids(m3.shape))
        new_codecs = v3_codecs_from_user(
            data_type=m3.data_type, filters=filters, serializer=serializer, compressors=compressors, chunk_shape=unit,
            allow_unsafe_codecs=True,
        )
    out: ArrayMetadataV3 = dataclasses.replace(m3, chunk_grid=grid, codecs=tuple(new_codecs), attributes=attributes)
    return out


def _shard_fix(meta: ArrayMetadataV3, shards: Any, chunks: Any) -> str:
    """The options that fix shards the inner chunks do not divide, per dimension by name (or "" if unknown)."""
    if not all(isinstance(x, Sequence) and not isinstance(x, str) for x in (shards, chunks)):
        return ""
    names = meta.dimension_names or (None,) * len(meta.shape)
    fixes = []
    for d, (s, c, name) in enumerate(zip(shards, chunks, names, strict=True)):
        if isinstance(s, int) and isinstance(c, int) and c > 0 and s % c:
            key = name if name is not None else str(d)
            fixes.append(f"--shards {key}=N with N a multiple of {c}, or --chunks {key}=N with N dividing {s} "
                         f"(in Python: shards={{{key!r}: N}} / chunks={{{key!r}: N}})")  # fmt: skip
    return "; fix: give " + "; ".join(fixes) if fixes else ""


def _v3_to_v2_codecs(meta: ArrayMetadataV3) -> tuple[list[Any], list[Any], Literal["C", "F"], np.dtype[Any]]:
    filters, serializer, compressors = _split_codecs(flat_codecs(meta.codecs))
    order: Literal["C", "F"] = "C"
    kept = []
    for f in filters:
        if isinstance(f, Mapping) and f.get("name") == "transpose":
            perm = list((f.get("configuration") or {}).get("order", []))
            if perm != list(range(len(meta.shape)))[::-1]:
                raise MetadataError(f"a transpose codec with order {perm} has no Zarr v2 equivalent; keep Zarr v3")
            order = "F"
        else:
            kept.append(f)
    dtype = meta.data_type.numpy_dtype
    endian = ((serializer or {}).get("configuration") or {}).get("endian") if isinstance(serializer, Mapping) else None
    if endian == "big" and dtype.byteorder != "|":
        dtype = dtype.newbyteorder(">")
    return kept, compressors, order, dtype


def _v2(meta: ArrayMetadata, options: TargetOptions) -> ArrayMetadataV2:
    if options.shards is not None and not (isinstance(options.shards, str) and options.shards == "keep"):
        raise MetadataError("Zarr v2 has no sharding; drop --shards or convert to --zarr-format 3")
    chunks = _new_chunks(meta, options)
    if isinstance(chunks, RectilinearChunkGrid):
        raise MetadataError("Zarr v2 has only regular chunks; give --chunks (e.g. 'auto') to convert this array")
    keep_comp = isinstance(options.compressors, str) and options.compressors == "keep"
    if isinstance(meta, ArrayMetadataV2):
        grid = resolve_chunks(chunks, meta.shape, meta.data_type.itemsize or 16)
        compressor, filters = meta.compressor, meta.filters
        if not keep_comp:
            compressor, flist = v2_codecs_from_user(
                data_type=meta.data_type, filters=list(meta.filters or []), compressors=options.compressors,
                allow_unsafe_codecs=True,
            )
            filters = tuple(flist) if flist else None
        assert isinstance(grid, RegularChunkGrid)
        return dataclasses.replace(meta, chunks=grid.chunk_shape, compressor=compressor, filters=filters)
    filters_v3, compressors, order, dtype = _v3_to_v2_codecs(meta)
    attributes = dict(meta.attributes)
    fill: Any = None if meta.fill_value is None else meta.fill_value[()]
    xarray_var = meta.dimension_names is not None and all(n is not None for n in meta.dimension_names)
    if xarray_var:  # xarray masks a v2 fill value: only the CF _FillValue may become one
        fill = None
        if "_FillValue" in attributes:
            from zarr_dask.xarray_backend.encoding import decode_fill_value_attr

            fill = decode_fill_value_attr(attributes.pop("_FillValue"), dtype, meta.data_type.vlen)
    out = build_array_metadata(
        shape=meta.shape, dtype=dtype if meta.data_type.vlen is None else (str if meta.data_type.vlen == "str" else bytes),
        zarr_format=2, chunks=chunks,
        fill_value=fill, compressors=compressors if keep_comp else options.compressors, filters=filters_v3 or None,
        order=order, dimension_names=meta.dimension_names if xarray_var else None, attributes=attributes,
    )
    assert isinstance(out, ArrayMetadataV2)
    return dataclasses.replace(out, fill_value=None) if xarray_var and fill is None else out


def target_array(meta: ArrayMetadata, options: TargetOptions, *, changes: list[LayoutChange] | None = None) -> ArrayMetadata:
    """The metadata of the converted array (see the module docstring); ``changes`` (when given) receives the
    layout changes made without being asked (kept chunks reduced to divide the asked shards).

    Examples
    --------
    >>> from zarr_dask.core.create import build_array_metadata
    >>> src = build_array_metadata(shape=(48, 90), dtype="f4", zarr_format=2, chunks=(24, 45),
    ...                            fill_value=float("nan"), dimension_names=["time", "lat"])
    >>> dst = target_array(src, TargetOptions(zarr_format=3, chunks={"time": 48, "lat": 15}, shards={"lat": 90}))
    >>> dst.chunk_grid.chunk_shape, dst.codecs[0]["configuration"]["chunk_shape"], dst.dimension_names
    ((48, 90), [48, 15], ('time', 'lat'))
    >>> dst.attributes["_FillValue"]
    'AAAAAAAA+H8='
    >>> changes = []
    >>> dst = target_array(src, TargetOptions(zarr_format=3, shards={"time": 36}), changes=changes)
    >>> dst.codecs[0]["configuration"]["chunk_shape"], [str(c) for c in changes]
    ([12, 45], ["inner chunks along 'time' reduced from 24 to 12 so that they divide the shards of 36 (2x more chunks); give --chunks time=N with N dividing 36, or shards that are a multiple of 24"])
    """
    fmt = options.zarr_format or meta.zarr_format
    if fmt == 3:
        return _v3(meta, options, changes if changes is not None else [])
    return _v2(meta, options)
