"""Reading and writing node metadata documents (no chunk data).

One node is read with one batched store call (every candidate document of both formats at once, so there is
never a second round trip to probe the other format). Creating a node writes its ancestors' group documents
with ``set_if_not_exists``: identical bytes, never overwriting a parent's attributes, harmless when creators
race.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

import numpy as np

from zarr_dask.errors import (
    ContainsArrayError,
    ContainsGroupError,
    MetadataError,
    ReadOnlyError,
    ZarrDaskError,
)
from zarr_dask.spec import (
    ArrayMetadataV2,
    ArrayMetadataV3,
    GroupMetadataV2,
    GroupMetadataV3,
)
from zarr_dask.spec import json as zjson
from zarr_dask.spec.consolidated import ConsolidatedMetadata, parse_consolidated_v2
from zarr_dask.spec.paths import key_prefix, parent_paths, validate_node_path
from zarr_dask.store import Store
from zarr_dask.store.versioned import conditional

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata = GroupMetadataV2 | GroupMetadataV3
NodeMetadata = ArrayMetadata | GroupMetadata
ZarrFormat = Literal[2, 3]

_log = logging.getLogger("zarr_dask.core")

V3_DOC = "zarr.json"
V2_DOCS = (".zarray", ".zgroup", ".zattrs")


def candidate_keys(path: str, zarr_format: ZarrFormat | None, *, consolidated: bool = False) -> list[str]:
    """Keys that may hold the metadata of the node at ``path``."""
    p = key_prefix(path)
    keys = []
    if zarr_format in (None, 3):
        keys.append(p + V3_DOC)
    if zarr_format in (None, 2):
        keys += [p + name for name in V2_DOCS]
        if consolidated:
            keys.append(p + ".zmetadata")
    return keys


@dataclass(frozen=True)
class ImplicitGroup:
    """A path with descendants but no group document of its own (read as a group, never written)."""

    zarr_format: ZarrFormat
    attributes: Mapping[str, Any]


def _load(doc: bytes, key: str, store: Store, path: str) -> Any:
    try:
        return zjson.loads_object(doc, key)
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=path) from None


#: Parsed array metadata by the bytes of its documents: opening the same array again (every ``from_zarr`` of a
#: URL) reparses nothing, and the metadata keeps its canonical string (dask token) and codec pipeline.
_PARSED: OrderedDict[tuple[bytes | None, ...], ArrayMetadata] = OrderedDict()
_PARSED_MAX = 256
_PARSED_MAX_BYTES = 64 << 10  # per entry: large attribute documents are parsed each time, not kept
_PARSED_LOCK = threading.Lock()


def clear_parse_cache() -> None:
    with _PARSED_LOCK:
        _PARSED.clear()


def _fresh(cached: ArrayMetadata) -> ArrayMetadata:
    """A copy of cached metadata for one caller: its own attribute containers (the cache must never see a
    change a caller makes to them), everything else shared: the immutable fields and the memo of derived
    values (canonical string, codec pipelines)."""
    out = object.__new__(type(cached))
    out.__dict__.update(cached.__dict__)
    for name in ("attributes", "extra_fields"):
        value = out.__dict__.get(name)
        if value:
            out.__dict__[name] = copy.deepcopy(value)
    return out


def parse_node(docs: Mapping[str, bytes], path: str, store: Store) -> NodeMetadata | None:
    """Parse the documents found for ``path`` (keys relative to the store root); arrays through a cache keyed
    by the documents' bytes (the parse is a pure function of them)."""
    p = key_prefix(path)
    key = tuple(docs.get(p + name) for name in (V3_DOC, ".zarray", ".zattrs"))
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
    if hit is not None:
        return _fresh(hit)
    node = _parse_node(docs, path, store)
    if isinstance(node, ArrayMetadataV2 | ArrayMetadataV3) and sum(len(d) for d in key if d) <= _PARSED_MAX_BYTES:
        node.canonical()  # creates the memo that every copy handed out shares
        if isinstance(node.fill_value, np.ndarray):
            node.fill_value.setflags(write=False)  # shared by every copy: nobody may change it in place
        with _PARSED_LOCK:
            _PARSED[key] = node
            while len(_PARSED) > _PARSED_MAX:
                _PARSED.popitem(last=False)
        return _fresh(node)
    return node


def _parse_node(docs: Mapping[str, bytes], path: str, store: Store) -> NodeMetadata | None:
    p = key_prefix(path)
    try:
        if p + V3_DOC in docs:
            doc = _load(docs[p + V3_DOC], p + V3_DOC, store, path)
            node_type = doc.get("node_type")
            if node_type == "array":
                return ArrayMetadataV3.from_json(doc)
            if node_type == "group":
                return GroupMetadataV3.from_json(doc)
            raise MetadataError(
                f"'zarr.json' has node_type {node_type!r}; expected 'array' or 'group'"
            )
        attrs = _load(docs[p + ".zattrs"], p + ".zattrs", store, path) if p + ".zattrs" in docs else None
        if p + ".zarray" in docs:
            return ArrayMetadataV2.from_json(_load(docs[p + ".zarray"], p + ".zarray", store, path), attrs)
        if p + ".zgroup" in docs:
            return GroupMetadataV2.from_json(_load(docs[p + ".zgroup"], p + ".zgroup", store, path), attrs)
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=path) from None
    return None


def read_node(store: Store, path: str, zarr_format: ZarrFormat | None = None) -> NodeMetadata | None:
    """The metadata of the node at ``path``, or None (one batched store call)."""
    docs = store.get_many(candidate_keys(path, zarr_format))
    node = parse_node(docs, path, store)
    _log.debug("%s /%s: %s", store.url, path, type(node).__name__ if node is not None else "no node")
    return node


def not_found_hint(store: Store, path: str, zarr_format: ZarrFormat | None) -> str:
    """Why no node was found at ``path``, for the error (costs requests: only on that error path).

    A node of the other Zarr format there, or a store root that cannot exist (a missing bucket), else ""."""
    if zarr_format is not None:
        other: ZarrFormat = 2 if zarr_format == 3 else 3
        node = parse_node(store.get_many(candidate_keys(path, other)), path, store)
        if node is not None:
            kind = "array" if is_array(node) else "group"
            return f"; there is a Zarr v{other} {kind} there: pass zarr_format={other}, or leave it out to detect it"
    problem = store.root_problem()
    return f"; {problem}" if problem else ""


def read_consolidated_v2(store: Store, path: str, data: bytes) -> ConsolidatedMetadata:
    try:
        return parse_consolidated_v2(zjson.loads_object(data, ".zmetadata"))
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=path) from None


def documents(path: str, metadata: NodeMetadata) -> dict[str, bytes]:
    """Store key → bytes of every document of a node."""
    p = key_prefix(path)
    return {p + name: data for name, data in metadata.to_documents().items()}


def empty_group(zarr_format: ZarrFormat) -> GroupMetadata:
    return GroupMetadataV3(attributes={}) if zarr_format == 3 else GroupMetadataV2(attributes={})


def _ancestor_documents(
    store: Store, path: str, zarr_format: ZarrFormat | None, extra_keys: Sequence[str] = ()
) -> dict[str, bytes]:
    """Every ancestor's metadata documents (attributes aside), and ``extra_keys``, in one batched read."""
    keys = [k for q in parent_paths(path) for k in candidate_keys(q, zarr_format) if not k.endswith(".zattrs")]
    keys += [k for k in extra_keys if k not in keys]
    return store.get_many(keys) if keys else {}


def inherited_format(store: Store, path: str) -> ZarrFormat | None:
    """The format of the nearest ancestor with a group document (None when no ancestor has one): what a new
    node at ``path`` should be when the caller does not say, so a v2 hierarchy does not get v3 members.

    Examples
    --------
    >>> import zarr_dask
    >>> g = zarr_dask.create_group("memory://doc-inherit", zarr_format=2)
    >>> inherited_format(g.store, "a/b"), inherited_format(g.store, "")
    (2, None)
    """
    found = _ancestor_documents(store, path, None)
    for q in reversed(parent_paths(path)):
        p = key_prefix(q)
        if p + ".zgroup" in found:
            return 2
        if p + V3_DOC in found and b'"group"' in found[p + V3_DOC]:
            return 3
    return None


def check_parents(
    store: Store, path: str, zarr_format: ZarrFormat | None, extra_keys: Sequence[str] = ()
) -> dict[str, bytes]:
    """Refuse to create a node below an array (one batched read of every ancestor's documents, and of
    ``extra_keys``); returns the documents read."""
    parents = parent_paths(path)
    if not parents:
        return {}
    found = _ancestor_documents(store, path, zarr_format, extra_keys)
    for q in parents:
        p = key_prefix(q)
        if p + ".zarray" in found or (p + V3_DOC in found and b'"array"' in found[p + V3_DOC]):
            node = parse_node({k: v for k, v in found.items() if k.startswith(p)}, q, store)
            if isinstance(node, ArrayMetadataV2 | ArrayMetadataV3):
                raise ContainsArrayError(
                    f"cannot create a node at {'/' + path!r}: its ancestor {'/' + q!r} is an array",
                    store=store.url,
                    path=q,
                )
    return found


def ensure_parents(store: Store, path: str, zarr_format: ZarrFormat) -> None:
    """Write a group document for every ancestor that has none (write-if-absent; never overwrites)."""
    for q in parent_paths(path):
        for key, data in documents(q, empty_group(zarr_format)).items():
            store.set_if_not_exists(key, data)


def existing_node_error(store: Store, path: str, node: NodeMetadata) -> ZarrDaskError:
    kind = "an array" if isinstance(node, ArrayMetadataV2 | ArrayMetadataV3) else "a group"
    cls = ContainsArrayError if kind == "an array" else ContainsGroupError
    return cls(
        f"{kind} already exists here; pass overwrite=True to replace it (this deletes its data), "
        "or open it instead",
        store=store.url,
        path=path,
    )


def write_node(
    store: Store,
    path: str,
    metadata: NodeMetadata,
    *,
    overwrite: bool = False,
    extra_keys: Sequence[str] = (),
    known_absent: bool = False,
) -> dict[str, bytes]:
    """Create a node: refuse a name the format reserves (:func:`~zarr_dask.spec.paths.validate_node_path`) and an
    existing node unless ``overwrite``; then parents, then the node's documents. ``known_absent``: the caller
    has just read the path and found no node (one round trip less on a remote store).

    Returns the ancestors' documents as read before the write, with ``extra_keys`` (read in the same batch):
    what a caller needs to refresh consolidated metadata without another round trip."""
    if store.read_only:
        raise ReadOnlyError(f"the store is read-only, cannot create a node; {store.read_only_advice}", store=store.url, path=path)
    zarr_format: ZarrFormat = metadata.zarr_format
    try:
        validate_node_path(path, zarr_format)  # the names every creation is checked against
    except ZarrDaskError as e:
        raise e.with_context(store=store.url, path=path) from None
    existing = None if known_absent else read_node(store, path)
    if existing is not None:
        if not overwrite:
            raise existing_node_error(store, path, existing)
        delete_node(store, path)
    found = check_parents(store, path, None, extra_keys)
    ensure_parents(store, path, zarr_format)
    if overwrite:
        store.set_many(documents(path, metadata))
    else:
        create_documents(store, path, documents(path, metadata), strict=is_array(metadata))
    _log.debug("%s /%s: created %s (zarr_format %d)", store.url, path, type(metadata).__name__, zarr_format)
    return found


def create_documents(store: Store, path: str, docs: Mapping[str, bytes], *, strict: bool = True) -> None:
    """Write a new node's documents only where absent (conditional creates on stores that make conditional
    writes), so two creators racing for one path cannot both succeed: the loser gets
    :func:`existing_node_error` and has written nothing. The node's main document (``zarr.json``,
    ``.zarray``, ``.zgroup``) goes first. ``strict=False`` (groups, hierarchy specs: no data) takes a document
    another creator wrote first with the same bytes as created (creating the same node twice is idempotent)."""
    cas = conditional(store)
    if cas is None:
        store.set_many(docs)
        return
    main = [k for k in docs if k.rsplit("/", 1)[-1] in (V3_DOC, ".zarray", ".zgroup")][:1]
    for batch in (main, [k for k in docs if k not in main]):
        if not batch:
            continue
        won = cas.set_if_unchanged({k: (docs[k], None) for k in batch})
        lost = [k for k, ok in won.items() if not ok]
        if not lost:
            continue
        current = _settled(store, lost)
        if (not strict or batch is not main) and all(current.get(k) == docs[k] for k in lost):
            continue
        node = read_node(store, path)
        raise existing_node_error(store, path, node if node is not None else empty_group(3))


def _settled(store: Store, keys: Sequence[str]) -> dict[str, bytes]:
    """The values of ``keys`` that a conditional create just lost to: a key can read as absent for a moment when
    the winner's write is still in flight (S3 answers ``409 ConditionalRequestConflict`` then), so wait for it
    a little (up to about 2 s)."""
    found = store.get_many(keys)
    for _ in range(40):
        if all(k in found for k in keys):
            break
        time.sleep(0.05)
        found = store.get_many(keys)
    return found


def create_if_absent(store: Store, docs: Mapping[str, bytes]) -> list[str]:
    """Write ``docs`` (of any number of nodes) only where absent, in one batched conditional create (a plain
    batch on stores without conditional writes); returns the keys that another writer had written first with
    other bytes (the same bytes count as created: creating the same node twice is idempotent)."""
    cas = conditional(store)
    if cas is None:
        store.set_many(docs)
        return []
    won = cas.set_if_unchanged({k: (v, None) for k, v in docs.items()})
    lost = [k for k, ok in won.items() if not ok]
    current = _settled(store, lost) if lost else {}
    return [k for k in lost if current.get(k) != docs[k]]


def delete_node(store: Store, path: str) -> None:
    """Delete a node with all its documents and descendants."""
    store.delete_prefix(key_prefix(path))


def is_array(node: Any) -> TypeGuard[ArrayMetadata]:
    return isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)


def is_group(node: Any) -> bool:
    return isinstance(node, GroupMetadataV2 | GroupMetadataV3 | ImplicitGroup)


def list_documents(keys: Iterable[str]) -> dict[str, list[str]]:
    """Group metadata document keys by node path (``{"a/b": ["a/b/zarr.json"], ...}``)."""
    nodes: dict[str, list[str]] = {}
    for key in keys:
        head, _, name = key.rpartition("/")
        if name == V3_DOC or name in V2_DOCS:
            nodes.setdefault(head, []).append(key)
    return nodes
