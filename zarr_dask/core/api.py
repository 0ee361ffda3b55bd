"""Top-level functions: open and create arrays and groups, consolidate metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from zarr_dask.core import nodes
from zarr_dask.core.array import Array
from zarr_dask.core.consolidated import consolidated_entry, group_without_consolidated, holder_documents
from zarr_dask.core.group import Group, discover
from zarr_dask.core.lease import complete_interrupted
from zarr_dask.errors import InvalidModeError, MetadataError, NodeNotFoundError, ZarrDaskError
from zarr_dask.spec import GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.consolidated import ConsolidatedMetadata
from zarr_dask.spec.paths import key_prefix, normalize_path
from zarr_dask.store import open_store

ZarrFormat = Literal[2, 3]
Mode = Literal["r", "r+", "a", "w", "w-"]
MODES: dict[str, str] = {
    "r": "read only, must exist",
    "r+": "read/write, must exist",
    "a": "read/write, created if missing",
    "w": "create, replacing what is there",
    "w-": "create, fail if something exists",
}


def check_mode(mode: Any, store: Any = None) -> Mode:
    """``mode`` itself when it is one of :data:`MODES`, else :class:`~zarr_dask.errors.InvalidModeError`.

    Examples
    --------
    >>> check_mode("r+")
    'r+'
    >>> check_mode("rw")
    Traceback (most recent call last):
    ...
    zarr_dask.errors.InvalidModeError: mode 'rw' is not a mode zarr_dask accepts: 'r' (read only, must exist), ...
    """
    if isinstance(mode, str) and mode in MODES:
        return mode  # type: ignore[return-value]
    known = ", ".join(f"{m!r} ({what})" for m, what in MODES.items())
    url = store.url if isinstance(getattr(store, "url", None), str) else store if isinstance(store, str) else None
    raise InvalidModeError(f"mode {mode!r} is not a mode zarr_dask accepts: {known}", store=url)


def open_array(
    store: Any,
    *,
    path: str = "",
    zarr_format: ZarrFormat | None = None,
    mode: Mode = "a",
    storage_options: Mapping[str, Any] | None = None,
    allow_unsafe_codecs: bool = False,
    write_empty_chunks: bool = False,
) -> Array:
    """Open an existing array (v2 or v3, detected in one batched read).

    Parameters
    ----------
    store
        A URL (``"file:///x.zarr"``, ``"s3://bucket/x.zarr"``, ``"memory://x"``), a local path, or a Store.
    path
        The node path inside the store.
    mode
        ``"r"`` opens read-only; ``"r+"``, ``"a"``, ``"w"`` and ``"w-"`` allow writes (the array must exist:
        :func:`create_array` creates one); anything else is an :class:`~zarr_dask.errors.InvalidModeError`.
    allow_unsafe_codecs
        Allow codecs that can run code or build arbitrary objects on decode (pickle & co.). Off by default.

    Returns
    -------
    Array

    Examples
    --------
    >>> import zarr_dask
    >>> _ = zarr_dask.create_array("memory://doc-open-array", shape=(4,), dtype="i4", chunks=(2,), fill_value=7)
    >>> a = zarr_dask.open_array("memory://doc-open-array", mode="r")
    >>> a.shape, a[:].tolist()
    ((4,), [7, 7, 7, 7])
    """
    check_mode(mode, store)
    return Array.open(
        store,
        path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        read_only=mode == "r",
        allow_unsafe_codecs=allow_unsafe_codecs,
        write_empty_chunks=write_empty_chunks,
    )


def create_array(
    store: Any,
    *,
    name: str | None = None,
    path: str = "",
    shape: Any,
    dtype: Any = "float64",
    chunks: Any = "auto",
    shards: Any = None,
    fill_value: Any = None,
    zarr_format: ZarrFormat = 3,
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    order: Literal["C", "F"] | None = None,
    chunk_key_encoding: Any = None,
    dimension_separator: Literal[".", "/"] | None = None,
    dimension_names: Any = None,
    attributes: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    write_empty_chunks: bool = False,
    allow_unsafe_codecs: bool = False,
) -> Array:
    """Create an array; everything is validated before anything is written.

    Spelled as in zarr-python: ``compressors`` / ``filters`` / ``serializer`` take numcodecs objects, v3 codec
    dicts (``{"name": "zstd", "configuration": {"level": 3}}``), v2 dicts (``{"id": "blosc"}``), names
    (``"zstd"``), ``None`` or ``"auto"`` (zstd for v3, blosc-lz4 for v2). ``chunks`` may be "auto", an int,
    a tuple, or a tuple of per-dimension chunk edges (an irregular, rectilinear grid; v3 only).
    ``shards`` (v3) stores many chunks per object: a shard shape that is a multiple of ``chunks`` (then the
    inner chunk shape), ``{"shape": ..., "index_location": "start"}``, ``"auto"`` (~64 MiB shards), or
    per-dimension shard edges (a rectilinear shard grid); the codecs apply to the inner chunks.
    ``write_empty_chunks=False`` (default) skips storing chunks equal to the fill value everywhere.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://doc-shards", shape=(8, 8), dtype="i2", chunks=(2, 2), shards=(4, 8))
    >>> a.chunks, a.shards
    ((2, 2), (4, 8))
    >>> a[:] = np.arange(64).reshape(8, 8)
    >>> int(a[5, 3])
    43
    """
    return Array.create(
        store,
        normalize_path(path if name is None else name),
        shape=shape,
        dtype=dtype,
        zarr_format=zarr_format,
        overwrite=overwrite,
        storage_options=storage_options,
        allow_unsafe_codecs=allow_unsafe_codecs,
        write_empty_chunks=write_empty_chunks,
        chunks=chunks,
        shards=shards,
        fill_value=fill_value,
        compressors=compressors,
        filters=filters,
        serializer=serializer,
        order=order,
        chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator,
        dimension_names=dimension_names,
        attributes=attributes,
    )


def open_group(
    store: Any,
    *,
    path: str = "",
    mode: Mode = "a",
    zarr_format: ZarrFormat | None = None,
    use_consolidated: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Group:
    """Open a group (explicit, or implicit: a path with descendants but no document).

    ``mode="a"`` creates the group when nothing is there, ``"w"`` always creates (replacing what is there),
    ``"w-"`` creates and fails if something exists, ``"r"``/``"r+"`` require it to exist.
    ``use_consolidated=None`` uses consolidated metadata when present. Any other mode is an
    :class:`~zarr_dask.errors.InvalidModeError`.

    Returns
    -------
    Group

    Examples
    --------
    >>> import zarr_dask
    >>> g = zarr_dask.open_group("memory://doc-open-group", mode="a", attributes={"title": "t"})
    >>> zarr_dask.open_group("memory://doc-open-group", mode="r").attrs["title"]
    't'
    """
    check_mode(mode, store)
    if mode in ("w", "w-"):
        return create_group(
            store,
            path=path,
            zarr_format=zarr_format or 3,
            attributes=attributes,
            overwrite=mode == "w",
            storage_options=storage_options,
        )
    try:
        return Group.open(
            store,
            path,
            zarr_format=zarr_format,
            use_consolidated=use_consolidated,
            storage_options=storage_options,
            read_only=mode == "r",
        )
    except NodeNotFoundError:
        if mode != "a":
            raise
    return create_group(
        store, path=path, zarr_format=zarr_format or 3, attributes=attributes, storage_options=storage_options
    )


def create_group(
    store: Any,
    *,
    path: str = "",
    zarr_format: ZarrFormat = 3,
    attributes: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Group:
    """Create a group (and, write-if-absent, every missing ancestor group).

    Returns
    -------
    Group

    Examples
    --------
    >>> import zarr_dask
    >>> g = zarr_dask.create_group("memory://doc-create-group", path="a/b", attributes={"n": 1})
    >>> g.path, g.attrs["n"]
    ('a/b', 1)
    """
    return Group.create(
        store,
        path,
        zarr_format=zarr_format,
        attributes=attributes,
        overwrite=overwrite,
        storage_options=storage_options,
    )


def open(  # noqa: A001 - the zarr-python name
    store: Any,
    *,
    path: str = "",
    mode: Mode = "a",
    zarr_format: ZarrFormat | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Array | Group:
    """Open whatever node is at ``path``: an Array or a Group (``mode`` as for :func:`open_group`).

    Examples
    --------
    >>> import zarr_dask
    >>> _ = zarr_dask.create_array("memory://doc-open", path="x", shape=(3,), dtype="u1")
    >>> type(zarr_dask.open("memory://doc-open", path="x")).__name__, type(zarr_dask.open("memory://doc-open")).__name__
    ('Array', 'Group')
    """
    check_mode(mode, store)
    s = open_store(store, storage_options=dict(storage_options or {}), read_only=mode == "r")
    p = normalize_path(path)
    node = nodes.read_node(s, p, zarr_format)
    if nodes.is_array(node):
        return Array.open(s, p, zarr_format=zarr_format, **kwargs)
    return open_group(s, path=p, mode=mode, zarr_format=zarr_format, **kwargs)


def _group_to_consolidate(s: Any, p: str, zarr_format: ZarrFormat | None) -> Group:
    """The group at ``p``; a v3 group whose consolidated metadata does not parse (a bad entry) is opened
    without it, since rebuilding that is what was asked."""
    try:
        return Group.open(s, p, zarr_format=zarr_format, use_consolidated=False)
    except MetadataError:
        key = key_prefix(p) + "zarr.json"
        meta = None if zarr_format == 2 else group_without_consolidated(s.get_many([key]).get(key))
        if meta is None:
            raise
        return Group(s, p, meta)


def consolidate_metadata(
    store: Any,
    *,
    path: str = "",
    zarr_format: ZarrFormat | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Group:
    """Gather the metadata of every node below the group at ``path`` into its consolidated metadata
    (v2: ``.zmetadata``; v3: ``consolidated_metadata`` inside its ``zarr.json``) and return the group,
    opened with it. One walk of the hierarchy; the children's own documents are untouched. A dataset append
    that died between its commits (or is committing now) is completed first
    (:func:`~zarr_dask.core.lease.complete_interrupted`), so the listing never shows it half done. A store
    that keeps no consolidated metadata (an Icechunk repository) is left as it is. Consolidated metadata that
    does not parse (a bad entry in a v3 group's ``zarr.json``) is rebuilt, as ``zarr-dask validate`` advises.

    Returns
    -------
    Group

    Examples
    --------
    >>> import zarr_dask
    >>> _ = zarr_dask.create_array("memory://doc-consolidate", path="a", shape=(3,), dtype="u1")
    >>> g = zarr_dask.consolidate_metadata("memory://doc-consolidate")
    >>> sorted(g.consolidated_metadata.nodes)
    ['a']
    """
    s = open_store(store, storage_options=dict(storage_options or {}))
    p = normalize_path(path)
    group = _group_to_consolidate(s, p, zarr_format)
    if not getattr(s, "supports_consolidated", True):  # Icechunk keeps none (as zarr-python: nothing written)
        return group
    members = discover(s, p, group.zarr_format, None)
    groups = [p, *(f"{p}/{rel}" if p else rel for rel, m in members.items() if not nodes.is_array(m))]
    if complete_interrupted(s, groups):  # an append that died between its commits: completed, not half listed
        members = discover(s, p, group.zarr_format, None)
    # a member group's own (possibly stale) consolidated metadata is not copied: its members are listed anyway
    explicit = {rel: consolidated_entry(m) for rel, m in members.items() if not isinstance(m, nodes.ImplicitGroup)}
    try:
        consolidated = ConsolidatedMetadata.from_nodes(group.zarr_format, explicit)
        meta = group.metadata
        if isinstance(meta, nodes.ImplicitGroup):
            meta = (GroupMetadataV3 if group.zarr_format == 3 else GroupMetadataV2)(attributes={})
        if isinstance(meta, GroupMetadataV2):
            s.set_many(nodes.documents(p, meta))  # an implicit v2 group gets its .zgroup first
        s.set_many(holder_documents(p, meta, consolidated))
    except ZarrDaskError as e:
        raise e.with_context(store=s.url, path=p) from None
    return Group.open(s, p, zarr_format=group.zarr_format)
