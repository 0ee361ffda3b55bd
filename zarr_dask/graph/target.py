"""Where a dask write goes: resolve (and, for new arrays, build) the target array before any graph exists.

Nothing here writes, except :func:`create_metadata`, which :func:`~zarr_dask.to_zarr` calls once, up front.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zarr_dask.core import nodes
from zarr_dask.core.array import Array
from zarr_dask.core.create import build_array_metadata
from zarr_dask.core.lease import Fence
from zarr_dask.errors import (
    ArrayNotFoundError,
    IndexingError,
    MetadataError,
    UnsupportedFeatureError,
    WritePlanError,
    ZarrDaskError,
)
from zarr_dask.graph.chunking import is_regular
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.inputs import is_zarr_python_node, locate
from zarr_dask.spec import ArrayMetadata, ArrayMetadataV3, RectilinearChunkGrid
from zarr_dask.spec.paths import parent_paths
from zarr_dask.store import Store

__all__ = ["CREATE_OPTIONS", "Target", "create_metadata", "grown_metadata", "region_bounds", "resolve_target",
           "zarr_chunks_for"]

#: Keyword arguments of to_zarr that describe a new array (passed to the metadata builder).
CREATE_OPTIONS = frozenset(
    {
        "zarr_format", "chunks", "shards", "compressors", "filters", "serializer", "fill_value", "order",
        "chunk_key_encoding", "dimension_separator", "dimension_names", "attributes", "dtype", "rectilinear",
    }
)  # fmt: skip
#: Keyword arguments that change how chunks are written, for new and existing arrays alike.
IO_OPTIONS = frozenset({"write_empty_chunks", "allow_unsafe_codecs"})

Action = Literal["create", "overwrite", "region", "append"]


@dataclass(frozen=True, kw_only=True)
class Target:
    """A resolved write target (nothing written yet)."""

    handle: ArrayHandle  #: the array as it will be once written (for appends: with the grown shape)
    offsets: tuple[int, ...]  #: where the dask array's first element lands
    action: Action
    documents: dict[str, bytes]  #: metadata written before the data (create) or after it (append)
    old_documents: dict[str, bytes] = dataclasses.field(default_factory=dict)  #: append: what must still be there


def _fail(err: ZarrDaskError, store: Store, path: str) -> ZarrDaskError:
    return err.with_context(store=store.url, path=path)


def check_chunks_known(arr: Any, store: Store, path: str) -> None:
    """Unknown (NaN) block sizes cannot be mapped to storage keys."""
    if any(np.isnan(c) for dim in arr.chunks for c in dim):
        raise WritePlanError(
            f"the dask array {arr.name!r} has unknown chunk sizes {arr.chunks}, so its blocks cannot be mapped "
            "to storage keys; call arr.compute_chunk_sizes() (or arr = arr.persist()) before writing",
            store=store.url,
            path=path,
        )


def zarr_chunks_for(arr_chunks: Sequence[Sequence[int]], chunks: Any, rectilinear: bool, zarr_format: int) -> Any:
    """The chunk grid of a new array written from a dask array with ``arr_chunks``.

    ``chunks=None`` / ``"auto"``: the dask blocks. A regular dimension (equal blocks, the last may be
    shorter) gets that block length; an irregular one gets its largest block, or, with ``rectilinear=True``
    (Zarr v3 only), exactly the dask blocks as rectilinear edges. Anything else is passed on unchanged.
    """
    if rectilinear and zarr_format != 3:
        raise MetadataError("rectilinear chunk grids need zarr_format=3; drop rectilinear=True or write v3")
    if chunks is not None and not (isinstance(chunks, str) and chunks == "auto"):
        return chunks
    out: list[Any] = []
    for dim in arr_chunks:
        sizes = [int(c) for c in dim]
        if is_regular(sizes) or not rectilinear:
            out.append(max(max(sizes, default=1), 1))
        else:
            out.append(tuple(c for c in sizes if c > 0))
    return tuple(out)


def region_bounds(region: Any, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The ``(start, stop)`` per axis of ``region`` as ``to_zarr(..., region=)`` takes it (a slice, or a tuple of
    step-1 slices, one per leading axis; open-ended and negative bounds as in NumPy; axes not given: whole) in
    an array of ``shape``. The writers and the fan-out ledger both read regions through this.

    Examples
    --------
    >>> region_bounds((slice(72, None),), (96, 40))
    ((72, 96), (0, 40))
    >>> region_bounds(slice(-8, None), (96,))
    ((88, 96),)
    """
    items = list(region) if isinstance(region, tuple | list) else [region]
    if len(items) > len(shape) or not all(isinstance(s, slice) for s in items):
        raise IndexingError(
            f"region must be a tuple of slices with at most one per axis of the {len(shape)}-d array, got {region!r}"
        )
    items += [slice(None)] * (len(shape) - len(items))
    out = []
    for axis, (s, n) in enumerate(zip(items, shape, strict=True)):
        start, stop, step = s.indices(n)
        if step != 1:
            raise IndexingError(f"region slices must have step 1, got {s!r} on axis {axis}")
        out.append((start, max(stop, start)))
    return tuple(out)


def region_offsets(region: Any, arr_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The start of ``region`` (see :func:`region_bounds`) in an array of ``shape``; the region must have the
    dask array's shape."""
    if region is None:
        if arr_shape != shape:
            raise IndexingError(
                f"the dask array has shape {arr_shape} but the target array has shape {shape}; pass "
                "region=(slice(a, b), ...) to write into part of it"
            )
        return (0,) * len(shape)
    bounds = region_bounds(region, shape)
    items = list(region) if isinstance(region, tuple | list) else [region]
    for axis, ((start, stop), n, m) in enumerate(zip(bounds, shape, arr_shape, strict=True)):
        if stop - start != m:
            s = items[axis] if axis < len(items) else slice(None)
            raise IndexingError(
                f"region {s!r} on axis {axis} selects {stop - start} elements of {n}, but the dask array "
                f"has {m} there; the region must have the dask array's shape {arr_shape}"
            )
    return tuple(start for start, _ in bounds)


def _split_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    unknown = sorted(set(kwargs) - CREATE_OPTIONS - IO_OPTIONS)
    if unknown:
        hint = ""
        if {"read_only", "readonly"} & set(unknown):
            hint = "; to open the store for writing use mode= ('a', 'w', 'w-', 'r+')"
        raise TypeError(
            f"unexpected keyword argument(s) {unknown}; to_zarr takes mode= ('a', 'w', 'w-', 'r+'), "
            f"overwrite=, consolidated= and the array options {sorted(CREATE_OPTIONS | IO_OPTIONS)}{hint}"
        )
    create = {k: v for k, v in kwargs.items() if k in CREATE_OPTIONS}
    io = {k: bool(v) for k, v in kwargs.items() if k in IO_OPTIONS}
    return create, io


def _build_metadata(arr: Any, create: dict[str, Any]) -> ArrayMetadata:
    create = dict(create)
    rectilinear = bool(create.pop("rectilinear", False))
    zarr_format = create.setdefault("zarr_format", 3)
    create["chunks"] = zarr_chunks_for(arr.chunks, create.get("chunks"), rectilinear, zarr_format)
    create.setdefault("dtype", arr.dtype)
    if create.get("shards") is not None and "shards" not in inspect.signature(build_array_metadata).parameters:
        raise UnsupportedFeatureError(
            "shards= is not supported by this version of zarr_dask's array creation yet; write unsharded "
            "(drop shards=) or pass a sharding_indexed serializer= explicitly"
        )
    if create.get("shards", 0) is None:
        create.pop("shards")
    return build_array_metadata(shape=arr.shape, **create)


def _locate(
    url: Any, component: str | None, storage_options: Mapping[str, Any] | None, region: Any
) -> tuple[Store, str, ArrayMetadata | None]:
    """Store, path and (for writes into an existing array: ``region=``, an opened array) its metadata."""
    if isinstance(url, Array):
        if component or storage_options:
            raise TypeError("component= and storage_options= apply to URLs, not to an opened Array; drop them")
        return url.store, url.path, url.metadata
    try:
        store, path = locate(url, component, storage_options)
    except TypeError as e:
        if "cannot open a store" not in str(e):
            raise
        raise TypeError(
            f"cannot write to {type(url).__name__}; pass a URL or path ('s3://bucket/x.zarr'), an fsspec mapper, "
            "a MutableMapping, a zarr_dask Store or Array, or a zarr-python store, Array or Group"
        ) from None
    into_array = is_zarr_python_node(url) and not component and hasattr(url, "shape")  # a zarr-python Array
    return store, path, (_existing(store, path) if region is not None or into_array else None)


def resolve_target(
    arr: Any,
    url: Any,
    component: str | None,
    storage_options: Mapping[str, Any] | None,
    overwrite: bool,
    region: Any,
    kwargs: Mapping[str, Any],
    fence: Fence | None = None,
) -> Target:
    """Work out what :func:`~zarr_dask.to_zarr` will write, without writing; ``fence``: a region of a dataset
    append written under its group's lease (see :mod:`zarr_dask.core.lease`)."""
    create, io = _split_kwargs(kwargs)
    store, path, existing = _locate(url, component, storage_options, region)
    check_chunks_known(arr, store, path)
    if existing is not None:
        if create or overwrite:
            raise TypeError(
                f"{sorted(create) + (['overwrite'] if overwrite else [])} describe a new array, but the write goes "
                "into an existing one (region= or an opened Array); drop them"
            )
        handle = ArrayHandle(store, path, existing, fence=fence, **io)
        try:
            offsets = region_offsets(region, tuple(arr.shape), handle.shape)
        except ZarrDaskError as e:
            raise _fail(e, store, path) from None
        return Target(handle=handle, offsets=offsets, action="region", documents={})
    return _new_target(arr, store, path, create, overwrite, io)


def _new_target(
    arr: Any, store: Store, path: str, create: dict[str, Any], overwrite: bool, io: dict[str, Any]
) -> Target:
    found = nodes.read_node(store, path)
    if found is not None and not overwrite:
        raise nodes.existing_node_error(store, path, found)
    if create.get("zarr_format") is None:  # follow the hierarchy: a v2 store gets v2 members
        inherited = found.zarr_format if found is not None else nodes.inherited_format(store, path)
        create = {**create, "zarr_format": inherited or 3}
    try:
        metadata = _build_metadata(arr, create)
    except ZarrDaskError as e:
        raise _fail(e, store, path) from None
    handle = ArrayHandle(store, path, metadata, fresh=True, **io)  # its edge keys: created only if absent
    try:
        handle.io.pipeline  # noqa: B018 - unknown or unsafe codecs fail here, before anything is written
    except ZarrDaskError as e:
        raise _fail(e, store, path) from None
    return Target(
        handle=handle,
        offsets=(0,) * len(arr.shape),
        action="overwrite" if found is not None else "create",
        documents=nodes.documents(path, metadata),
    )


def _existing(store: Store, path: str) -> ArrayMetadata:
    node = nodes.read_node(store, path)
    if not nodes.is_array(node):
        raise ArrayNotFoundError(
            "region= writes into an existing array, and there is none here; create it first (to_zarr without "
            "region=) or check the URL and component",
            store=store.url,
            path=path,
        )
    return node


def create_metadata(target: Target) -> None:
    """Write a new array's metadata, once, before any data (idempotent: same bytes again are a no-op)."""
    h = target.handle
    nodes.write_node(h.store, h.path, h.metadata, overwrite=target.action == "overwrite",
                     known_absent=target.action == "create")  # resolve_target read it just before  # fmt: skip


def metadata_request_count(path: str, documents: Mapping[str, bytes]) -> int:
    """Documents a creation writes: the node's own plus one write-if-absent per ancestor group."""
    return len(documents) + len(parent_paths(path))


def grown_metadata(metadata: ArrayMetadata, axis: int, added: int, added_chunks: Sequence[int]) -> ArrayMetadata:
    """``metadata`` with ``added`` elements more along ``axis``; explicit rectilinear edges are extended
    with the appended dask blocks (the part that fills the last existing chunk first)."""
    old = metadata.shape[axis]
    shape = tuple(n + added if d == axis else n for d, n in enumerate(metadata.shape))
    grid = metadata.chunk_grid
    if isinstance(metadata, ArrayMetadataV3) and isinstance(grid, RectilinearChunkGrid):
        spec = grid.chunk_shapes[axis]
        if not isinstance(spec, int) and sum(spec) < old + added:
            room = sum(spec) - old
            edges = list(spec)
            for c in added_chunks:
                take = min(room, c)
                room -= take
                if c - take > 0:
                    edges.append(c - take)
            shapes = tuple(tuple(edges) if d == axis else s for d, s in enumerate(grid.chunk_shapes))
            return dataclasses.replace(
                metadata, shape=shape, chunk_grid=RectilinearChunkGrid(chunk_shapes=shapes)
            )
    return dataclasses.replace(metadata, shape=shape)

