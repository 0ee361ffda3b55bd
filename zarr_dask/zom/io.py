"""Reading whole hierarchies into specs: :func:`from_store` (and the write side in :mod:`zarr_dask.zom.write`).

Round trips: the root's documents come in one batched read (every candidate document of both formats, plus
the v2 ``.zmetadata``).  With consolidated metadata that is all.  Otherwise the tree is walked level by
level: one ``list_dir`` per group of the level (run concurrently on remote stores) and one batched read of
every child's documents.  Directories without a document are kept as *implicit groups* when something below
them is a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal

from zarr_dask.core import nodes as core_nodes
from zarr_dask.core.consolidated import consolidated_of
from zarr_dask.errors import (
    ArrayNotFoundError,
    GroupNotFoundError,
    InvalidPathError,
    MetadataError,
    NodeNotFoundError,
    ZarrDaskError,
)
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.consolidated import ConsolidatedMetadata
from zarr_dask.spec.paths import key_prefix, normalize_path, validate_node_name
from zarr_dask.store import Store, open_store
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node, build_tree
from zarr_dask.zom.tree import connect

__all__ = ["array_from_store", "from_store", "group_from_store", "open_for", "read_tree", "root_path", "spec_of", "strip_consolidated"]

ZarrFormat = Literal[2, 3]
_MAX_LISTING_THREADS = 64


def open_for(store: Any, storage_options: Mapping[str, Any] | None) -> Store:
    """``open_store`` that tolerates empty ``storage_options`` with a Store or a local path."""
    return open_store(store, storage_options=dict(storage_options) if storage_options else None)


def root_path(path: str, store: Store) -> str:
    try:
        return normalize_path(path)
    except ZarrDaskError as e:
        raise e.with_context(store=store.url) from None


def spec_of(meta: Any) -> Node:
    """The spec of one node's metadata (groups get ``members={}``; consolidated metadata is dropped)."""
    if isinstance(meta, ArrayMetadataV2 | ArrayMetadataV3):
        return ArraySpec(metadata=meta)
    if isinstance(meta, GroupMetadataV3):
        return GroupSpec(zarr_format=3, attributes=meta.attributes, extra_fields=meta.extra_fields)
    if isinstance(meta, GroupMetadataV2):
        return GroupSpec(zarr_format=2, attributes=meta.attributes)
    if isinstance(meta, core_nodes.ImplicitGroup):
        return GroupSpec(zarr_format=meta.zarr_format, implicit=True)
    raise MetadataError(f"not node metadata: {type(meta).__name__}")


def _depth(depth: int | None) -> int | None:
    if depth is None or depth == -1:
        return None
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise MetadataError(f"depth must be None (everything), -1 (the same) or an integer >= 0, got {depth!r}")
    return depth


def from_store(
    store: Any,
    *,
    path: str = "",
    depth: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    use_consolidated: bool | None = None,
) -> Node:
    """The spec of the node at ``path``: an :class:`ArraySpec`, or a :class:`GroupSpec` with its members.

    Parameters
    ----------
    store
        A URL, a local path or a :class:`~zarr_dask.store.Store`.
    path
        The node inside the store (``""`` = the root).
    depth
        How many levels of members to read: ``None`` (or ``-1``) = all; ``0`` = the group alone
        (``members=None``, "unknown"); ``1`` = its direct members, whose own members are unknown...
    storage_options
        fsspec options for URLs.
    use_consolidated
        ``None``: use consolidated metadata when the group has it; ``True``: require it; ``False``: ignore it
        and list the store.

    Raises
    ------
    NodeNotFoundError
        Nothing at ``path`` (no document and no descendants), or ``use_consolidated=True`` without
        consolidated metadata.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> g = zarr_dask.create_group("memory://zom-from-store-doc")
    >>> _ = g.create_array("a/b", shape=(3,), dtype="i2")
    >>> spec = from_store("memory://zom-from-store-doc")
    >>> spec["a"].implicit, spec["a/b"].shape
    (False, (3,))
    >>> g.store.delete_prefix("")
    """
    s = open_for(store, storage_options)
    root = root_path(path, s)
    limit = _depth(depth)
    docs = s.get_many(core_nodes.candidate_keys(root, None, consolidated=use_consolidated is not False))
    meta: Any = core_nodes.parse_node(docs, root, s)
    if isinstance(meta, ArrayMetadataV2 | ArrayMetadataV3):
        return ArraySpec(metadata=meta)
    consolidated = None
    if meta is not None and use_consolidated is not False:
        consolidated = consolidated_of(s, root, meta, docs)
    if use_consolidated is True and consolidated is None:
        raise NodeNotFoundError(
            "use_consolidated=True but the group has no consolidated metadata; consolidate it "
            "(zarr_dask.consolidate_metadata) or pass use_consolidated=None",
            store=s.url,
            path=root,
        )
    if consolidated is not None:
        found, unknown = _from_consolidated(consolidated, limit)
        fmt: ZarrFormat | None = meta.zarr_format
    else:
        found, unknown, fmt = read_tree(s, root, None if meta is None else meta.zarr_format, limit)
    if meta is None:
        if limit == 0 and _implicit(s, root, {}, [""], {""}, None):
            unknown = {""}
        if not found and not unknown:
            raise GroupNotFoundError(
                "no array or group here (no metadata document, nothing below); check the URL and the path",
                store=s.url,
                path=root,
            )
        meta = core_nodes.ImplicitGroup(zarr_format=fmt or 3, attributes={})
    specs = {rel: spec_of(m) for rel, m in found.items()}
    specs[""] = spec_of(meta)
    return build_tree(specs, meta.zarr_format, unknown=unknown | ({""} if limit == 0 else set()))


def group_from_store(store: Any, **options: Any) -> GroupSpec:
    """:func:`from_store` for a group (``GroupNotFoundError`` if the node is an array)."""
    spec = from_store(store, **options)
    if not isinstance(spec, GroupSpec):
        raise GroupNotFoundError(
            "this path holds an array, not a group; use ArraySpec.from_store", store=_url(store), path=options.get("path", "")
        )
    return spec


def array_from_store(store: Any, *, path: str = "", storage_options: Mapping[str, Any] | None = None) -> ArraySpec:
    """The spec of the array at ``path`` (one batched read of its documents)."""
    s = open_for(store, storage_options)
    root = root_path(path, s)
    meta = core_nodes.read_node(s, root)
    if not isinstance(meta, ArrayMetadataV2 | ArrayMetadataV3):
        what = "a group" if meta is not None else "nothing"
        raise ArrayNotFoundError(f"no array here ({what} found); check the path", store=s.url, path=root)
    return ArraySpec(metadata=meta)


def _url(store: Any) -> str:
    return store.url if isinstance(store, Store) else str(store)


def _from_consolidated(cm: ConsolidatedMetadata, limit: int | None) -> tuple[dict[str, Any], set[str]]:
    if limit is None:
        return dict(cm.nodes), set()
    found = {rel: m for rel, m in cm.nodes.items() if rel.count("/") < limit}
    unknown = {rel for rel, m in found.items() if rel.count("/") == limit - 1 and core_nodes.is_group(m)}
    return found, unknown


def _list_dirs(s: Store, paths: Sequence[str]) -> list[list[str]]:
    """The child directories of each path; concurrent listings on stores where a call is a round trip."""

    def dirs(path: str) -> list[str]:
        return s.list_dir(key_prefix(path))[1]

    if len(paths) > 1 and s.batched_io:
        with ThreadPoolExecutor(max_workers=min(_MAX_LISTING_THREADS, len(paths))) as pool:
            return list(pool.map(dirs, paths))
    return [dirs(p) for p in paths]


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def _is_name(name: str) -> bool:
    """A listed directory that may be a node: not reserved (``__*``), not a document name, a valid name."""
    if name.startswith("__") or name == "zarr.json":
        return False
    try:
        validate_node_name(name, 2)
    except InvalidPathError:
        return False
    return True


def read_tree(
    s: Store, root: str, zarr_format: ZarrFormat | None, depth: int | None
) -> tuple[dict[str, Any], set[str], ZarrFormat | None]:
    """Walk the hierarchy below ``root`` level by level.

    Returns
    -------
    tuple
        ``({relative path: metadata}, {relative paths of groups whose members were not read}, format)``;
        implicit groups appear as :class:`~zarr_dask.core.nodes.ImplicitGroup`.
    """
    fmt = zarr_format
    found: dict[str, Any] = {}
    bare: list[str] = []  # directories without a document of their own
    frontier, level = [""], 0
    while frontier and (depth is None or level < depth):
        listings = _list_dirs(s, [_join(root, rel) for rel in frontier])
        children = [_join(rel, d) for rel, ds in zip(frontier, listings, strict=True) for d in ds if _is_name(d)]
        keys = [k for c in children for k in core_nodes.candidate_keys(_join(root, c), fmt)]
        docs = s.get_many(keys) if keys else {}
        frontier = []
        for child in children:
            meta = core_nodes.parse_node(docs, _join(root, child), s)
            if meta is None:
                bare.append(child)
                frontier.append(child)
                continue
            fmt = fmt or meta.zarr_format
            if meta.zarr_format == fmt:  # nodes of the other format are invisible, as in zarr-python
                found[child] = meta
                if core_nodes.is_group(meta):
                    frontier.append(child)
        level += 1
    unknown = {rel for rel in frontier if rel in found}
    implicit = _implicit(s, root, found, bare, set(frontier), fmt)
    found.update({rel: core_nodes.ImplicitGroup(zarr_format=fmt or 3, attributes={}) for rel in implicit})
    unknown |= {rel for rel in implicit if rel in frontier}
    return found, unknown, fmt


def _implicit(
    s: Store, root: str, found: Mapping[str, Any], bare: list[str], cut: set[str], fmt: ZarrFormat | None
) -> set[str]:
    """The bare directories that are implicit groups: something below them is a node."""
    ancestors = {rel.rsplit("/", i)[0] for rel in found for i in range(1, rel.count("/") + 1)}
    out = {rel for rel in bare if rel in ancestors}
    pending = [rel for rel in bare if rel in cut and rel not in out]  # not explored: depth limit
    names = {"zarr.json"} if fmt == 3 else {".zarray", ".zgroup"} if fmt == 2 else {"zarr.json", ".zarray", ".zgroup"}

    def has_node(rel: str) -> bool:
        return any(k.rpartition("/")[2] in names for k in s.list_prefix(key_prefix(_join(root, rel))))

    if pending and s.batched_io:
        with ThreadPoolExecutor(max_workers=min(_MAX_LISTING_THREADS, len(pending))) as pool:
            out |= {rel for rel, yes in zip(pending, pool.map(has_node, pending), strict=True) if yes}
    else:
        out |= {rel for rel in pending if has_node(rel)}
    return out


def strip_consolidated(meta: Any) -> Any:
    """Group metadata without its (cache) consolidated metadata."""
    if isinstance(meta, GroupMetadataV3) and meta.consolidated_metadata is not None:
        return replace(meta, consolidated_metadata=None)
    return meta


connect(read_node=from_store, read_group=group_from_store, read_array=array_from_store)
