"""Loading the metadata of a group (and, for DataTrees, of its whole hierarchy) in as few round trips as
the store allows.

* Consolidated (the default when present): the group's own ``zarr.json`` (v3) or ``.zgroup`` + ``.zattrs`` +
  ``.zmetadata`` (v2) -- one round trip, nothing else.
* Not consolidated: one listing per group level and one batched read of every child's documents per level
  (concurrent on remote stores). With ``consolidated=False`` the first listing runs concurrently with the
  read of the group's own document, so a flat dataset costs two round trips.

A ``peek`` sees the member documents of the groups the moment a batch of them arrives, before anything is
parsed (the xarray reader starts reading the dimension coordinates then, so that round trip overlaps the
parsing).

The format is detected from the group's own document: ``zarr.json`` is asked for first and the v2
documents only when it is absent, so a v3 store is never probed for v2 keys (and children are read in the
detected format only). A child whose documents cannot be parsed is recorded in :attr:`Hierarchy.skipped`
instead of failing the whole open.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from zarr_dask.core import nodes
from zarr_dask.errors import GroupNotFoundError, MetadataError, NodeNotFoundError, ZarrDaskError
from zarr_dask.spec import (
    ArrayMetadataV2,
    ArrayMetadataV3,
    ConsolidatedMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
)
from zarr_dask.spec import json as zjson
from zarr_dask.spec.consolidated import parse_consolidated_v2, parse_consolidated_v3
from zarr_dask.spec.paths import join_path, key_prefix, normalize_path
from zarr_dask.store import Store

__all__ = ["CONSOLIDATED_FALLBACK_WARNING", "Hierarchy", "Peek", "load_hierarchy"]

# array names xarray writes although they start with the reserved "__": a variable named None, a DataArray
_XARRAY_NAMES = frozenset({"__values__", "__xarray_dataarray_variable__"})

ZarrFormat = Literal[2, 3]
ArrayMeta = ArrayMetadataV2 | ArrayMetadataV3
GroupMeta = GroupMetadataV2 | GroupMetadataV3 | nodes.ImplicitGroup
NodeMeta = ArrayMeta | GroupMeta
#: ``peek({group: {member name: {document name: document}}})``: the members of every group found in one
#: batch of documents (group paths relative to the loaded group; document names ``"zarr.json"`` in v3,
#: ``".zarray"``, ``".zattrs"``, ``".zgroup"`` in v2), straight from the store and not validated: the bytes
#: read, or the decoded JSON when it came from consolidated metadata.
Peek = Callable[[Mapping[str, Mapping[str, Mapping[str, Any]]]], None]

#: xarray's own message (``xarray.backends.zarr._get_open_params``), emitted as a RuntimeWarning.
CONSOLIDATED_FALLBACK_WARNING = (
    "Failed to open Zarr store with consolidated metadata, "
    "but successfully read with non-consolidated metadata. "
    "This is typically much slower for opening a dataset. "
    "To silence this warning, consider:\n"
    "1. Consolidating metadata in this existing store with "
    "zarr.consolidate_metadata().\n"
    "2. Explicitly setting consolidated=False, to avoid trying "
    "to read consolidate metadata, or\n"
    "3. Explicitly setting consolidated=True, to raise an "
    "error in this case instead of falling back to try "
    "reading non-consolidated metadata."
)


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """The metadata of a group and of the nodes below it (relative paths; the group itself is ``""``).

    Attributes
    ----------
    store, path
        Where the group is.
    zarr_format
        Its format (every node read is of that format).
    group
        The group's own metadata (an ``ImplicitGroup`` when it has no document).
    nodes
        Relative path -> metadata of every node found below the group (down to the depth asked for).
    skipped
        Relative path -> the error that made a child unreadable (its documents could not be parsed).
    consolidated
        True when the metadata came from consolidated metadata.
    has_consolidated
        True when the group has consolidated metadata (known when it was read, or asked for with
        ``detect_consolidated``).
    """

    store: Store
    path: str
    zarr_format: ZarrFormat
    group: GroupMeta
    nodes: dict[str, NodeMeta] = field(default_factory=dict)
    skipped: dict[str, ZarrDaskError] = field(default_factory=dict)
    consolidated: bool = False
    has_consolidated: bool = False

    def children(self, rel: str = "") -> dict[str, NodeMeta]:
        """Direct members of the group at relative path ``rel``: ``{name: metadata}``."""
        prefix = rel + "/" if rel else ""
        return {
            k[len(prefix) :]: v
            for k, v in self.nodes.items()
            if k.startswith(prefix) and "/" not in k[len(prefix) :]
        }

    def group_paths(self) -> list[str]:
        """Relative paths of the group and of every group below it, parents first."""
        groups = [k for k, v in self.nodes.items() if nodes.is_group(v)]
        return ["", *sorted(groups, key=lambda p: (p.count("/"), p))]

    def group_at(self, rel: str) -> GroupMeta:
        if not rel:
            return self.group
        meta = self.nodes[rel]
        if not nodes.is_group(meta):
            raise MetadataError(f"{rel!r} is an array, not a group")
        return meta  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ parsing
def parse_docs(docs: Mapping[str, bytes], path: str, store: Store) -> NodeMeta | None:
    """The node at ``path`` from fetched documents (``None`` if it has none)."""
    return nodes.parse_node(docs, path, store)


def _loads_quiet(data: bytes | None, key: str) -> Any:
    """The decoded JSON object, or None when absent or malformed (the full parse reports those)."""
    if data is None:
        return None
    try:
        return zjson.loads_object(data, key)
    except ZarrDaskError:
        return None


@dataclass(frozen=True)
class _Peeker:
    """Hands member documents to a :data:`Peek`, one call per batch, groups down to ``max_depth``."""

    peek: Peek
    max_depth: int | None

    def flat(self, entries: Mapping[str, Mapping[str, Any]], prefix: str = "") -> None:
        """``entries``: relative node path (below ``prefix``) -> its documents."""
        groups: dict[str, dict[str, Mapping[str, Any]]] = {}
        for rel, docs in entries.items():
            if not isinstance(rel, str) or not rel.startswith(prefix) or rel == prefix:
                continue
            rel = rel[len(prefix) :]
            if self.max_depth is None or rel.count("/") < self.max_depth:
                parent, _, name = rel.rpartition("/")
                groups.setdefault(parent, {})[name] = docs
        if groups:
            self.peek(groups)

    def consolidated_v3(self, doc: Any, prefix: str) -> bool:
        cm = doc.get("consolidated_metadata") if isinstance(doc, dict) else None
        entries = cm.get("metadata") if isinstance(cm, dict) else None
        if not isinstance(entries, dict):
            return False
        self.flat({k: {"zarr.json": v} for k, v in entries.items()}, prefix)
        return True

    def consolidated_v2(self, doc: Any, prefix: str) -> None:
        entries = doc.get("metadata") if isinstance(doc, dict) else None
        if not isinstance(entries, dict):
            return
        per_node: dict[str, dict[str, Any]] = {}
        for key, value in entries.items():
            node, _, name = str(key).rpartition("/")
            if node and name in nodes.V2_DOCS:
                per_node.setdefault(node, {})[name] = value
        self.flat(per_node, prefix)


def _v2_keys(path: str, *, consolidated: bool) -> list[str]:
    p = key_prefix(path)
    return [p + ".zgroup", p + ".zattrs", p + ".zarray"] + ([p + ".zmetadata"] if consolidated else [])


def _child_keys(path: str, zarr_format: ZarrFormat) -> list[str]:
    p = key_prefix(path)
    return [p + "zarr.json"] if zarr_format == 3 else [p + ".zarray", p + ".zgroup", p + ".zattrs"]


# ------------------------------------------------------------------------------------- the group itself
@dataclass
class _Root:
    meta: NodeMeta | None
    consolidated: ConsolidatedMetadata | None
    present: bool = False  # the group has consolidated metadata (used or not)
    skipped: dict[str, ZarrDaskError] = field(default_factory=dict)  # consolidated entries that did not parse


def _parse_v3_group(docs: Mapping[str, bytes], path: str, store: Store, skipped: dict[str, ZarrDaskError]) -> NodeMeta | None:
    """The node at ``path``; a group's consolidated entries that do not parse (a data type this installation
    cannot read, such as bfloat16 without ``ml_dtypes``) go to ``skipped`` (paths from the store root)
    instead of failing the group, as a child that does not parse does when the group is listed."""
    try:
        return parse_docs(docs, path, store)
    except ZarrDaskError as err:
        key = key_prefix(path) + "zarr.json"
        doc = _loads_quiet(docs.get(key), key)
        if not isinstance(doc, dict) or doc.get("node_type") != "group" or "consolidated_metadata" not in doc:
            raise
        found: dict[str, ZarrDaskError] = {}
        try:
            group = GroupMetadataV3.from_json({k: v for k, v in doc.items() if k != "consolidated_metadata"})
            cm = parse_consolidated_v3(doc["consolidated_metadata"], skipped=found)
        except ZarrDaskError:
            raise err from None
        skipped.update({join_path(path, k): e.with_context(store=store.url, path=join_path(path, k)) for k, e in found.items()})
        return replace(group, consolidated_metadata=cm)


def _read_v2_consolidated(store: Store, path: str, data: bytes, skipped: dict[str, ZarrDaskError]) -> ConsolidatedMetadata:
    """The ``.zmetadata`` of ``path``, with the array entries that do not parse in ``skipped``."""
    found: dict[str, ZarrDaskError] = {}
    try:
        cm = parse_consolidated_v2(zjson.loads_object(data, ".zmetadata"), skipped=found)
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=path) from None
    skipped.update({join_path(path, k): e.with_context(store=store.url, path=join_path(path, k)) for k, e in found.items()})
    return cm


def _rerooted(skipped: Mapping[str, ZarrDaskError], path: str) -> dict[str, ZarrDaskError]:
    """``skipped`` (paths from the store root) relative to the group at ``path``."""
    prefix = path + "/" if path else ""
    return {k[len(prefix) :]: e for k, e in skipped.items() if k.startswith(prefix) and k != prefix}


def _consolidated_from_root(root_doc: Any, path: str) -> ConsolidatedMetadata | None:
    """The consolidated metadata of the store root re-rooted at ``path`` (None if absent or not covering it)."""
    cm = root_doc.consolidated_metadata if isinstance(root_doc, GroupMetadataV3) else root_doc
    if cm is None:
        return None
    if path and not isinstance(cm.nodes.get(path), GroupMetadataV3 | GroupMetadataV2):
        return None
    return cm.subtree(path)


def _read_v3_root(
    store: Store, path: str, use_consolidated: bool, detect: bool = False, peeker: _Peeker | None = None
) -> _Root | None:
    """One round trip: the group's ``zarr.json`` (and the store root's, for its consolidated metadata)."""
    keys = [key_prefix(path) + "zarr.json"]
    if path and use_consolidated:
        keys.append("zarr.json")
    docs = store.get_many(keys)
    if not docs:
        return None
    if peeker is not None and use_consolidated:
        own = peeker.consolidated_v3(_loads_quiet(docs.get(keys[0]), keys[0]), "")
        if not own and path:
            peeker.consolidated_v3(_loads_quiet(docs.get("zarr.json"), "zarr.json"), path + "/")
    skipped: dict[str, ZarrDaskError] = {}
    meta = _parse_v3_group(docs, path, store, skipped) if keys[0] in docs else None
    cm: ConsolidatedMetadata | None = None
    if use_consolidated:
        if isinstance(meta, GroupMetadataV3) and meta.consolidated_metadata is not None:
            cm = meta.consolidated_metadata
        elif path and "zarr.json" in docs:
            root = _parse_v3_group(docs, "", store, skipped)
            if isinstance(root, GroupMetadataV3):
                cm = _consolidated_from_root(root, path)
                if cm is not None and meta is None:
                    meta = root.consolidated_metadata.nodes[path] if root.consolidated_metadata else None
    if meta is None and cm is None:
        return None
    present = cm is not None
    if isinstance(meta, GroupMetadataV3):
        present = present or meta.consolidated_metadata is not None
        meta = replace(meta, consolidated_metadata=None)
    return _Root(meta=meta, consolidated=cm, present=present, skipped=_rerooted(skipped, path))


def _read_v2_root(
    store: Store, path: str, use_consolidated: bool, detect: bool = False, peeker: _Peeker | None = None
) -> _Root | None:
    """One round trip: the group's v2 documents (+ ``.zmetadata`` here and at the store root)."""
    keys = _v2_keys(path, consolidated=use_consolidated or detect)
    if path and use_consolidated:
        keys.append(".zmetadata")
    docs = store.get_many(keys)
    own = key_prefix(path) + ".zmetadata"
    if peeker is not None and use_consolidated:
        if own in docs:
            peeker.consolidated_v2(_loads_quiet(docs[own], own), "")
        elif path and ".zmetadata" in docs:
            peeker.consolidated_v2(_loads_quiet(docs[".zmetadata"], ".zmetadata"), path + "/")
    meta = parse_docs(docs, path, store)
    cm: ConsolidatedMetadata | None = None
    skipped: dict[str, ZarrDaskError] = {}
    if use_consolidated:
        if own in docs:
            cm = _read_v2_consolidated(store, path, docs[own], skipped)
        elif path and ".zmetadata" in docs:
            cm = _consolidated_from_root(_read_v2_consolidated(store, "", docs[".zmetadata"], skipped), path)
    if meta is None and cm is None:
        return None
    return _Root(meta=meta, consolidated=cm, present=own in docs, skipped=_rerooted(skipped, path))


# ---------------------------------------------------------------------------------------- listing walk
def _list_dirs(store: Store, paths: Sequence[str], pool: ThreadPoolExecutor | None) -> list[list[str]]:
    """Child "directories" of each path, listed concurrently when there are several."""
    if len(paths) == 1 or pool is None:
        return [store.list_dir(key_prefix(p))[1] for p in paths]
    futures = [pool.submit(store.list_dir, key_prefix(p)) for p in paths]
    return [f.result()[1] for f in futures]


@dataclass
class _Walk:
    store: Store
    path: str
    zarr_format: ZarrFormat
    max_depth: int | None
    peeker: _Peeker | None = None
    nodes: dict[str, NodeMeta] = field(default_factory=dict)
    skipped: dict[str, ZarrDaskError] = field(default_factory=dict)
    implicit: set[str] = field(default_factory=set)

    def run(self, first_listing: list[str] | None, pool: ThreadPoolExecutor | None) -> None:
        frontier, depth = [""], 0
        listings: dict[str, list[str]] = {} if first_listing is None else {"": first_listing}
        while frontier and (self.max_depth is None or depth < self.max_depth):
            todo = [g for g in frontier if g not in listings]
            for g, dirs in zip(todo, _list_dirs(self.store, [join_path(self.path, g) for g in todo], pool), strict=True):
                listings[g] = dirs
            # names starting with "__" are reserved, except the arrays xarray itself names so
            children = [join_path(g, d) for g in frontier for d in listings.pop(g) if not d.startswith("__") or d in _XARRAY_NAMES]
            frontier = self._read_level(children, deeper=self.max_depth is None or depth + 1 < self.max_depth)
            depth += 1
        self._prune_implicit()

    def _read_level(self, children: list[str], *, deeper: bool) -> list[str]:
        keys = [k for c in children for k in _child_keys(join_path(self.path, c), self.zarr_format)]
        docs = self.store.get_many(keys) if keys else {}
        if self.peeker is not None:
            self._peek(children, docs)
        frontier = []
        for child in children:
            try:
                meta = parse_docs(docs, join_path(self.path, child), self.store)
            except ZarrDaskError as e:
                self.skipped[child] = e
                continue
            if meta is None:  # no document: an implicit group if anything below it has one
                if deeper:
                    self.implicit.add(child)
                    self.nodes[child] = nodes.ImplicitGroup(zarr_format=self.zarr_format, attributes={})
                    frontier.append(child)
                continue
            self.nodes[child] = meta
            if nodes.is_group(meta):
                frontier.append(child)
        return frontier

    def _peek(self, children: list[str], docs: Mapping[str, bytes]) -> None:
        names = (nodes.V3_DOC,) if self.zarr_format == 3 else nodes.V2_DOCS
        found: dict[str, dict[str, Any]] = {}
        for child in children:
            p = key_prefix(join_path(self.path, child))
            child_docs = {n: docs[p + n] for n in names if p + n in docs}
            if child_docs:
                found[child] = child_docs
        assert self.peeker is not None
        self.peeker.flat(found)

    def _prune_implicit(self) -> None:
        """Drop implicit groups with no explicit node below them (a stray directory is not a group)."""
        for child in sorted(self.implicit, key=lambda p: -p.count("/")):
            prefix = child + "/"
            if not any(k.startswith(prefix) for k in self.nodes):
                del self.nodes[child]


# ------------------------------------------------------------------------------------------ public
def _missing(store: Store, path: str, zarr_format: ZarrFormat | None, explain: bool = True) -> NodeNotFoundError:
    hint = nodes.not_found_hint(store, path, zarr_format) if explain else ""
    return GroupNotFoundError(
        f"No such file or directory: {store.url + ('/' + path if path else '')!r} (no Zarr group or "
        f"consolidated metadata found there){hint or '; check the URL and the group'}",
        store=store.url,
        path=path,
    )


def _read_root(
    store: Store,
    path: str,
    zarr_format: ZarrFormat | None,
    use_consolidated: bool,
    detect: bool,
    peeker: _Peeker | None = None,
) -> tuple[_Root | None, ZarrFormat | None]:
    if zarr_format in (None, 3):
        root = _read_v3_root(store, path, use_consolidated, detect, peeker)
        if root is not None:
            return root, 3
    if zarr_format in (None, 2):
        root = _read_v2_root(store, path, use_consolidated, detect, peeker)
        if root is not None:
            return root, 2
    return None, zarr_format


def load_hierarchy(
    store: Store,
    path: str = "",
    *,
    zarr_format: ZarrFormat | None = None,
    consolidated: bool | None = None,
    max_depth: int | None = 1,
    warn: Callable[[str, type[Warning]], None] | None = None,
    detect_consolidated: bool = False,
    peek: Peek | None = None,
    explain_missing: bool = True,
) -> Hierarchy:
    """Read the metadata of the group at ``path`` and of its members down to ``max_depth`` (None = all).

    Parameters
    ----------
    store, path
        The store and the group's path in it.
    zarr_format
        2, 3, or None (detect: ``zarr.json`` first, then the v2 documents).
    consolidated
        As xarray: True requires consolidated metadata, False never reads it, None uses it when present
        and otherwise falls back to listing with xarray's RuntimeWarning.
    max_depth
        1 for a dataset (the group's direct members), None for a DataTree (every level).
    warn
        Called as ``warn(message, category)`` (default: :func:`warnings.warn`).
    detect_consolidated
        With ``consolidated=False``: still find out whether the group has consolidated metadata (v2: one
        more key in the first read), for writers that must keep it fresh.
    peek
        Called with the members of the groups down to ``max_depth`` (see :data:`Peek`) as soon as each batch
        of their documents is fetched, before anything is parsed. It must not raise.
    explain_missing
        When nothing is at ``path``, find out why for the error (a node of the other Zarr format there, a
        missing bucket: more requests). False for callers to whom a missing group is the expected answer (a
        writer about to create it).

    Raises
    ------
    GroupNotFoundError
        (a ``FileNotFoundError``) when nothing is at ``path``, or it is an array.
    NodeNotFoundError
        ``consolidated=True`` and there is no consolidated metadata.

    Examples
    --------
    >>> import zarr_dask
    >>> g = zarr_dask.create_group("memory://hierarchy-doc")
    >>> _ = g.create_array("t", shape=(3,), dtype="i2", dimension_names=["t"])
    >>> h = load_hierarchy(g.store, consolidated=False)
    >>> sorted(h.nodes), h.zarr_format
    (['t'], 3)
    """
    path = normalize_path(path)
    warn = warn or (lambda msg, cat: warnings.warn(msg, cat, stacklevel=4))
    if consolidated is None and not getattr(store, "supports_consolidated", True):
        consolidated = False  # a store with none of its own (Icechunk): listing is the way, as with xarray's engine
    peeker = None if peek is None else _Peeker(peek, max_depth)
    with ThreadPoolExecutor(8, thread_name_prefix="zarr_dask_open") as pool:
        listing: Future[tuple[list[str], list[str]]] | None = None
        if consolidated is False:  # nothing to wait for: list while the group's own document is read
            listing = pool.submit(store.list_dir, key_prefix(path))
        root, fmt = _read_root(store, path, zarr_format, consolidated is not False, detect_consolidated, peeker)
        if root is not None and isinstance(root.meta, ArrayMetadataV2 | ArrayMetadataV3):
            raise GroupNotFoundError(
                "this path holds an array, not a group; open its parent group (group=...) instead",
                store=store.url,
                path=path,
            )
        if root is not None and root.consolidated is not None:
            assert fmt is not None
            group = root.meta if root.meta is not None else nodes.ImplicitGroup(zarr_format=fmt, attributes={})
            return _from_consolidated(store, path, fmt, group, root.consolidated, max_depth, root.skipped)  # type: ignore[arg-type]
        if consolidated is True:
            raise NodeNotFoundError(
                "consolidated=True but no consolidated metadata was found; consolidate the store "
                "(zarr_dask.consolidate_metadata) or pass consolidated=None / False",
                store=store.url,
                path=path,
            )
        first = listing.result()[1] if listing is not None else None
        if root is None:
            return _implicit_root(
                store, path, zarr_format, first, max_depth, pool, warn, consolidated, peeker, explain_missing
            )
        if consolidated is None:
            warn(CONSOLIDATED_FALLBACK_WARNING, RuntimeWarning)
        assert fmt is not None
        walk = _Walk(store, path, fmt, max_depth, peeker)
        walk.run(first, pool)
        return Hierarchy(
            store=store,
            path=path,
            zarr_format=fmt,
            group=root.meta,  # type: ignore[arg-type]
            nodes=walk.nodes,
            skipped=walk.skipped,
            has_consolidated=root.present,
        )


def _from_consolidated(
    store: Store,
    path: str,
    fmt: ZarrFormat,
    group: GroupMeta,
    cm: ConsolidatedMetadata,
    max_depth: int | None,
    skipped: Mapping[str, ZarrDaskError],
) -> Hierarchy:
    def within(k: str) -> bool:
        return max_depth is None or k.count("/") < max_depth

    found: dict[str, NodeMeta] = {k: v for k, v in cm.nodes.items() if within(k)}
    return Hierarchy(
        store=store,
        path=path,
        zarr_format=fmt,
        group=group,
        nodes=found,
        skipped={k: e for k, e in skipped.items() if within(k)},
        consolidated=True,
        has_consolidated=True,
    )


def _implicit_root(
    store: Store,
    path: str,
    zarr_format: ZarrFormat | None,
    first: list[str] | None,
    max_depth: int | None,
    pool: ThreadPoolExecutor,
    warn: Callable[[str, type[Warning]], None],
    consolidated: bool | None,
    peeker: _Peeker | None,
    explain: bool = True,
) -> Hierarchy:
    """No document at ``path``: an implicit group if some child has one (format from the children)."""
    dirs = first if first is not None else store.list_dir(key_prefix(path))[1]
    for fmt in (3, 2) if zarr_format is None else (zarr_format,):
        walk = _Walk(store, path, fmt, max_depth, peeker)
        walk.run(list(dirs), pool)
        if walk.nodes or walk.skipped:
            if consolidated is None:
                warn(CONSOLIDATED_FALLBACK_WARNING, RuntimeWarning)
            group = nodes.ImplicitGroup(zarr_format=fmt, attributes={})
            return Hierarchy(store=store, path=path, zarr_format=fmt, group=group, nodes=walk.nodes, skipped=walk.skipped)
    raise _missing(store, path, zarr_format, explain)
