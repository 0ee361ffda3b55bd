"""Consolidated metadata that never goes stale after our writes, and a cheap check for staleness elsewhere.

A write that creates, replaces, grows or writes into an array ends with :func:`refresh_consolidated`: one
batched read of the documents of the node's ancestor groups (v3 ``zarr.json``; v2 ``.zgroup``, ``.zattrs``,
``.zmetadata``), and, for every ancestor that holds consolidated metadata whose entries no longer match, one
write of that group's document with the node's entry (and the entries of the groups between them) replaced
from what the writer knows in memory. Nothing is listed and no other node is read; a hierarchy without
consolidated metadata gets none.

:func:`check_consolidated` compares consolidated metadata with the nodes' own documents (one listing, one
batched read) and reports every stale, missing and extra entry.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from zarr_dask.core import nodes
from zarr_dask.errors import GroupNotFoundError, WriteConflictError, ZarrDaskError
from zarr_dask.spec import GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec import json as zjson
from zarr_dask.spec.consolidated import ConsolidatedMetadata
from zarr_dask.spec.paths import key_prefix, normalize_path, parent_paths
from zarr_dask.store import Store, open_store
from zarr_dask.store.versioned import ConditionalStore, Versioned, conditional, transact

__all__ = [
    "ConsolidatedMismatch",
    "check_consolidated",
    "compare_consolidated",
    "consolidated_holders",
    "consolidated_entry",
    "consolidated_lock",
    "consolidated_of",
    "holder_documents",
    "refresh_consolidated",
    "refresh_keys",
    "refreshed_documents",
]

ZarrFormat = Literal[2, 3]
_V2_GROUP_DOCS = (".zgroup", ".zattrs", ".zmetadata")

_LOCKS: dict[Hashable, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


_HELD = threading.local()


@contextmanager
def consolidated_lock(store: Store) -> Iterator[None]:
    """Serialise read-modify-writes of consolidated documents of one store: between the threads of this
    process (one dask scheduler computing several writes at once), and between processes on this machine
    where the store has a process lock (local directories); reentrant."""
    key = store.__dask_tokenize__()
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(key, threading.RLock())
    with lock:
        held: set[Any] = _HELD.__dict__.setdefault("keys", set())
        if key in held:  # reentered: this thread holds the process lock already
            yield
            return
        with store.process_lock("consolidated"):
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)


# ------------------------------------------------------------------------------------------ writing
def holder_documents(path: str, group: GroupMetadataV2 | GroupMetadataV3, cm: ConsolidatedMetadata) -> dict[str, bytes]:
    """The documents that store ``cm`` as the consolidated metadata of the group at ``path``: v3 the group's
    ``zarr.json``; v2 its ``.zmetadata`` (the group's own ``.zgroup``/``.zattrs`` are left as they are).

    Examples
    --------
    >>> cm = ConsolidatedMetadata.from_nodes(3, {"g": GroupMetadataV3(attributes={"a": 1})})
    >>> list(holder_documents("root", GroupMetadataV3(), cm))
    ['root/zarr.json']
    """
    if isinstance(group, GroupMetadataV3):
        return nodes.documents(path, dataclasses.replace(group, consolidated_metadata=cm))
    return {key_prefix(path) + ".zmetadata": cm.to_v2_document(root=group)}


def refresh_keys(path: str, zarr_format: ZarrFormat, *, own: bool) -> list[str]:
    """The keys :func:`refreshed_documents` needs: the ancestors' group documents (and, with ``own``, the
    node's own documents).

    Examples
    --------
    >>> refresh_keys("a/x", 3, own=False)
    ['zarr.json', 'a/zarr.json']
    >>> refresh_keys("x", 2, own=True)
    ['.zgroup', '.zattrs', '.zmetadata', 'x/.zarray', 'x/.zgroup', 'x/.zattrs']
    """
    names = ("zarr.json",) if zarr_format == 3 else _V2_GROUP_DOCS
    keys = [key_prefix(q) + name for q in parent_paths(path) for name in names]
    return keys + (nodes.candidate_keys(path, zarr_format) if own else [])


def consolidated_of(store: Store, path: str, meta: Any, docs: Mapping[str, bytes]) -> ConsolidatedMetadata | None:
    """The consolidated metadata the group ``meta`` at ``path`` holds: v3 inline, v2 from the ``.zmetadata``
    document in ``docs`` (None if there is none, or ``meta`` is not a group)."""
    if isinstance(meta, GroupMetadataV3):
        return meta.consolidated_metadata
    zmeta = docs.get(key_prefix(path) + ".zmetadata")
    if isinstance(meta, GroupMetadataV2) and zmeta is not None:
        return nodes.read_consolidated_v2(store, path, zmeta)
    return None


def consolidated_entry(meta: Any) -> Any:
    """A node as a consolidated entry (v3 groups carry no nested consolidated metadata there)."""
    if isinstance(meta, GroupMetadataV3) and meta.consolidated_metadata is not None:
        return dataclasses.replace(meta, consolidated_metadata=None)
    return meta


def _updated(cm: ConsolidatedMetadata, rel: str, node: Any, between: Mapping[str, Any]) -> dict[str, Any]:
    """``cm``'s entries with ``node`` at ``rel`` (nothing below it if it is an array) and every explicit group
    in ``between`` (relative path -> metadata) that is missing there or listed as an array."""
    entries = dict(cm.nodes)
    if nodes.is_array(node):
        below = rel + "/"
        entries = {k: v for k, v in entries.items() if not k.startswith(below)}
    for q, meta in between.items():
        listed = entries.get(q)
        if nodes.is_group(meta) and not isinstance(meta, nodes.ImplicitGroup) and (listed is None or nodes.is_array(listed)):
            entries[q] = consolidated_entry(meta)
    entries[rel] = consolidated_entry(node)
    return entries


def refreshed_documents(
    store: Store, path: str, zarr_format: ZarrFormat, docs: Mapping[str, bytes], metadata: Any = None
) -> tuple[dict[str, bytes], list[str]]:
    """New documents for every ancestor of ``path`` whose consolidated metadata is stale for this node.

    ``docs`` holds (at least) the keys of :func:`refresh_keys`; ``metadata`` is the node as written (None:
    its own stored documents, read with ``own=True``). Returns ``(documents to write, paths of the groups
    holding consolidated metadata)``: an empty list means that no ancestor has any.
    """
    node = metadata if metadata is not None else nodes.parse_node(docs, path, store)
    ancestors = parent_paths(path)
    parsed = {q: nodes.parse_node(docs, q, store) for q in ancestors}
    out: dict[str, bytes] = {}
    holders: list[str] = []
    for i, h in enumerate(ancestors):
        group = parsed[h]
        cm = consolidated_of(store, h, group, docs) if group is not None and group.zarr_format == zarr_format else None
        if cm is None or not isinstance(group, GroupMetadataV2 | GroupMetadataV3):
            continue
        holders.append(h)
        if node is None:
            continue
        cut = len(h) + 1 if h else 0
        between = {q[cut:]: parsed[q] for q in ancestors[i + 1 :]}
        try:
            entries = _updated(cm, path[cut:], node, between)
            if entries != cm.nodes:
                out.update(holder_documents(h, group, dataclasses.replace(cm, nodes=entries)))
        except ZarrDaskError as e:
            raise e.with_context(store=store.url, path=h) from None
    return out, holders


def refresh_consolidated(
    store: Store,
    path: str,
    metadata: Any = None,
    *,
    zarr_format: ZarrFormat | None = None,
    prefetched: Mapping[str, bytes] | None = None,
) -> list[str]:
    """Bring the consolidated metadata of every enclosing group up to date for the node at ``path``.

    One batched read (skipped when ``prefetched`` holds the keys of :func:`refresh_keys`) and at most one
    batched write; nothing is written when no ancestor holds consolidated metadata or it is already right.

    Parameters
    ----------
    store, path
        The node.
    metadata
        The node's metadata as just written; None uses its stored documents (a write that changed no
        metadata, e.g. a region write, then only repairs an entry that was already stale).
    zarr_format
        The node's format (default: ``metadata``'s); consolidated metadata of the other format is ignored.
    prefetched
        Documents already read (an append's commit reads them together with its own check).

    Returns
    -------
    list of str
        Paths of the groups holding consolidated metadata (``[]``: none).

    Examples
    --------
    >>> import dataclasses, zarr_dask
    >>> root = zarr_dask.create_group("memory://refresh-doc")
    >>> a = root.create_array("x", shape=(4,), dtype="i1")
    >>> _ = zarr_dask.consolidate_metadata("memory://refresh-doc")
    >>> resized = dataclasses.replace(a.metadata, shape=(9,))
    >>> _ = nodes.write_node(a.store, "x", resized, overwrite=True)  # as a tool that ignores consolidation
    >>> zarr_dask.open_group("memory://refresh-doc")["x"].shape
    (4,)
    >>> refresh_consolidated(a.store, "x", resized)
    ['']
    >>> zarr_dask.open_group("memory://refresh-doc")["x"].shape
    (9,)
    """
    path = normalize_path(path)
    fmt: ZarrFormat = zarr_format or (metadata.zarr_format if metadata is not None else 3)
    if not path:
        return []
    with consolidated_lock(store):
        cas = conditional(store) if store.batched_io else None  # local and in-process stores: the locks suffice
        if cas is not None:
            return _refresh_conditionally(store, cas, path, fmt, metadata)
        docs = prefetched if prefetched is not None else store.get_many(refresh_keys(path, fmt, own=metadata is None))
        updates, holders = refreshed_documents(store, path, fmt, docs, metadata)
        if updates:
            store.set_many(updates)
    return holders


def _refresh_conditionally(store: Store, cas: ConditionalStore, path: str, fmt: ZarrFormat, metadata: Any) -> list[str]:
    """:func:`refresh_consolidated` on a store shared by machines (object stores): a compare-and-swap merge loop.

    Read the ancestors' documents and the node's own with versions, merge the node's entry (as stored now: a
    later change of the node makes its own refresh), write the holders' documents only if unchanged, and on a
    conflict (another process refreshed the same group meanwhile) read and merge again."""
    keys = refresh_keys(path, fmt, own=True)
    found: list[str] = []

    def step(got: Mapping[str, Versioned]) -> dict[str, bytes]:
        docs = {k: v.value for k, v in got.items() if v.value is not None}
        stored = nodes.parse_node({k: v for k, v in docs.items() if k.startswith(key_prefix(path))}, path, store)
        updates, found[:] = refreshed_documents(store, path, fmt, docs, stored if stored is not None else metadata)
        return updates

    transact(cas, keys, step, exhausted=lambda pending, n: WriteConflictError(
        f"the consolidated metadata enclosing this node kept changing under {n} conditional attempts to record "
        "it; the node itself is written. Repair the listing with zarr_dask.consolidate_metadata(url)",
        store=store.url, path=path))  # fmt: skip
    return found


def create_node(store: Store, path: str, metadata: Any, *, overwrite: bool = False) -> list[str]:
    """Write a new node (:func:`~zarr_dask.core.nodes.write_node`) and refresh its entry in the consolidated
    metadata of every enclosing group that has some. The ancestors' documents are read once, in the batch that
    checks the parents, so a hierarchy with no consolidated metadata costs no extra request. Returns the groups
    holding consolidated metadata."""
    keys = refresh_keys(path, metadata.zarr_format, own=False) if normalize_path(path) else []
    if not keys:
        nodes.write_node(store, path, metadata, overwrite=overwrite)
        return []
    with consolidated_lock(store):  # the documents read must still be current when the refresh writes
        docs = nodes.write_node(store, path, metadata, overwrite=overwrite, extra_keys=keys)
        for q in parent_paths(path):  # the groups write_node created on the way (it writes only absent ones)
            if not any(k in docs for k in nodes.candidate_keys(q, None)):
                docs.update(nodes.documents(q, nodes.empty_group(metadata.zarr_format)))
        return refresh_consolidated(store, path, metadata, prefetched=docs)


# ------------------------------------------------------------------------------------------ checking
@dataclass(frozen=True, kw_only=True, repr=False)
class ConsolidatedMismatch:
    """One entry of consolidated metadata that does not match the hierarchy.

    Attributes
    ----------
    group
        The group holding the consolidated metadata (``""`` = the store root).
    path
        The node (store-relative path).
    kind
        ``"stale"`` (listed, but its own documents differ), ``"missing"`` (a node that is not listed) or
        ``"extra"`` (listed, but there is no such node).
    detail
        What differs, e.g. ``"shape [10, 4] in the consolidated metadata, [15, 4] in its own document"``.

    Examples
    --------
    >>> ConsolidatedMismatch(group="", path="x", kind="missing", detail="not listed").kind
    'missing'
    """

    group: str
    path: str
    kind: Literal["stale", "missing", "extra"]
    detail: str

    def __repr__(self) -> str:
        return f"<{self.kind} consolidated entry /{self.path} (held by /{self.group}): {self.detail}>"

    __str__ = __repr__


def _as_json(meta: Any) -> dict[str, Any]:
    """A node's documents as one JSON object (v2: ``.zarray``/``.zgroup`` fields plus ``attributes``)."""
    out: dict[str, Any] = {}
    for name, data in consolidated_entry(meta).to_documents().items():
        doc = zjson.loads(data)
        out.update({"attributes": doc} if name == ".zattrs" else doc)
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, separators=(", ", ": "), allow_nan=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _canon(value: Any) -> str:
    return zjson.canonical_json(value)


def _difference(listed: Any, actual: Any) -> str | None:
    a, b = _as_json(listed), _as_json(actual)
    fields = [k for k in dict.fromkeys([*a, *b]) if (k in a) != (k in b) or _canon(a.get(k)) != _canon(b.get(k))]
    if not fields:
        return None
    if "node_type" in fields or nodes.is_array(listed) != nodes.is_array(actual):
        kind = ("an array", "a group")
        return (f"{kind[not nodes.is_array(listed)]} in the consolidated metadata, "
                f"{kind[not nodes.is_array(actual)]} in its own documents")  # fmt: skip
    parts = [f"{k} {_show(a.get(k))} in the consolidated metadata, {_show(b.get(k))} in its own documents"
             for k in fields]  # fmt: skip
    return "; ".join(parts)


def _describe(meta: Any) -> str:
    return f"an array of shape {tuple(meta.shape)}" if nodes.is_array(meta) else "a group"


def compare_consolidated(
    found: Mapping[str, Any], holders: Mapping[str, ConsolidatedMetadata]
) -> list[ConsolidatedMismatch]:
    """Every mismatch between the consolidated metadata of ``holders`` (group path -> consolidated metadata)
    and the nodes' own metadata ``found`` (store-relative path -> metadata; implicit groups, nodes of the
    other Zarr format and nodes inside arrays are not expected to be listed)."""
    out: list[ConsolidatedMismatch] = []
    arrays = [p for p, m in found.items() if nodes.is_array(m)]
    for h, cm in sorted(holders.items()):
        prefix = key_prefix(h)
        actual = {
            p[len(prefix) :]: m
            for p, m in found.items()
            if p.startswith(prefix) and p != h and m.zarr_format == cm.zarr_format
            and not isinstance(m, nodes.ImplicitGroup) and not any(p.startswith(a + "/") for a in arrays)
        }  # fmt: skip
        for rel in sorted(set(cm.nodes) | set(actual)):
            listed, real = cm.nodes.get(rel), actual.get(rel)
            if real is None:
                out.append(ConsolidatedMismatch(group=h, path=prefix + rel, kind="extra", detail=(
                    f"listed as {_describe(listed)}, but there is no such node (deleted?)")))  # fmt: skip
            elif listed is None:
                out.append(ConsolidatedMismatch(group=h, path=prefix + rel, kind="missing",
                                                detail=f"{_describe(real)}, not listed"))  # fmt: skip
            else:
                diff = _difference(listed, real)
                if diff is not None:
                    out.append(ConsolidatedMismatch(group=h, path=prefix + rel, kind="stale", detail=diff))
    return out


def group_without_consolidated(raw: bytes | None) -> GroupMetadataV3 | None:
    """The metadata of a v3 group from its ``zarr.json`` bytes with the ``consolidated_metadata`` left out,
    or None where there is none to leave out or the rest does not parse either: a group whose consolidated
    metadata holds a bad entry is still a group, which ``consolidate_metadata`` can rebuild and ``validate``
    can check."""
    try:
        doc = json.loads(raw) if raw is not None else None
        if not isinstance(doc, dict) or doc.get("node_type") != "group" or doc.pop("consolidated_metadata", None) is None:
            return None
        return GroupMetadataV3.from_json(doc)
    except ValueError:  # not JSON, or a MetadataError (a ValueError) of the group's own fields
        return None


def consolidated_holders(store: Store, found: Mapping[str, Any], docs: Mapping[str, bytes]) -> dict[str, ConsolidatedMetadata]:
    """Group path -> consolidated metadata, for every group in ``found`` that holds some (v2 ``.zmetadata``
    documents are taken from ``docs``)."""
    out = {}
    for path, meta in found.items():
        cm = consolidated_of(store, path, meta, docs)
        if cm is not None:
            out[path] = cm
    return out


def read_documents(store: Store, root: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Every node under ``root`` (path -> metadata) and the raw documents: one listing, one batched read."""
    keys = store.list_prefix(key_prefix(root))
    wanted = [k for k in keys if k.rpartition("/")[2] in ("zarr.json", ".zarray", *_V2_GROUP_DOCS)]
    docs = store.get_many(wanted)
    found: dict[str, Any] = {}
    for path in sorted({k.rpartition("/")[0] for k in wanted}):
        meta = nodes.parse_node({k: v for k, v in docs.items() if k.rpartition("/")[0] == path}, path, store)
        if meta is not None:
            found[path] = meta
    return found, docs


def check_consolidated(
    url: Any, path: str = "", *, storage_options: Mapping[str, Any] | None = None
) -> list[ConsolidatedMismatch]:
    """Compare the consolidated metadata of the group at ``path`` (and of every group below it that holds
    some) with the nodes' own documents; one listing of the store under ``path`` and one batched read.

    A hierarchy without consolidated metadata has nothing stale: the result is ``[]``. The fix for any
    mismatch is ``zarr_dask.consolidate_metadata(url, path=group)`` (``zarr-dask consolidate URL``).

    Parameters
    ----------
    url
        A URL, path or Store.
    path
        The group to check (default: the root).
    storage_options
        fsspec options for URLs.

    Returns
    -------
    list of ConsolidatedMismatch
        One per stale, missing or extra entry, sorted by holding group and node path.

    Raises
    ------
    GroupNotFoundError
        When there is no node at all under ``path``.

    Examples
    --------
    >>> import zarr_dask
    >>> root = zarr_dask.create_group("memory://check-doc")
    >>> _ = root.create_array("x", shape=(4,), dtype="i1")
    >>> _ = zarr_dask.consolidate_metadata("memory://check-doc")
    >>> zarr_dask.check_consolidated("memory://check-doc")
    []
    >>> from zarr_dask.core.create import build_array_metadata
    >>> y = build_array_metadata(shape=(2,), dtype="i1")
    >>> _ = nodes.write_node(root.store, "y", y)  # as a tool that ignores consolidated metadata
    >>> zarr_dask.check_consolidated("memory://check-doc")
    [<missing consolidated entry /y (held by /): an array of shape (2,), not listed>]
    """
    store = url if isinstance(url, Store) else open_store(url, storage_options=dict(storage_options or {}), read_only=True)
    root = normalize_path(path)
    found, docs = read_documents(store, root)
    if not found:
        raise GroupNotFoundError("no group or array here (no metadata document below); check the URL and path",
                                 store=store.url, path=root)  # fmt: skip
    try:
        return compare_consolidated(found, consolidated_holders(store, found, docs))
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=root) from None
