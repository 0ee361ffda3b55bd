"""Writing whole hierarchies: :func:`write_spec` (``GroupSpec.to_store`` / ``ArraySpec.to_store``).

The plan is made before anything is written: every document of every node is encoded, and one batched read
fetches what is already there (each node's documents in both formats, the ancestors of ``path``, the v2
``.zmetadata``).  Nodes already as specified are left alone -- no write at all -- so a re-run is a no-op and
two processes writing the same spec at once both succeed with the same result (they write identical bytes;
local writes are atomic).  Nodes that differ are conflicts: refused, with one error listing each (path,
field, existing, new), unless ``overwrite=True``.  Then everything is written in one ``set_many`` (one
concurrent batch on remote stores): exactly one write per document.  Missing ancestors of ``path`` are
created with ``set_if_not_exists`` (never overwriting a parent's attributes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zarr_dask.core import nodes as core_nodes
from zarr_dask.errors import (
    ContainsArrayError,
    HierarchyConflictError,
    MetadataError,
    ReadOnlyError,
    ZarrDaskError,
)
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.consolidated import ConsolidatedMetadata
from zarr_dask.spec.json import canonical_json, loads
from zarr_dask.spec.paths import key_prefix, parent_paths, validate_node_path
from zarr_dask.store import Store
from zarr_dask.zom.diff import Diff, Difference, node_differences
from zarr_dask.zom.io import open_for, read_tree, root_path, spec_of, strip_consolidated
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node
from zarr_dask.zom.tree import WriteReport, connect, iter_nodes

__all__ = ["HierarchyConflictError", "WriteReport", "write_spec"]

ZarrFormat = Literal[2, 3]
NodeMetadata = ArrayMetadataV2 | ArrayMetadataV3 | GroupMetadataV2 | GroupMetadataV3
_KEEP_CHUNKS = ("attributes", "dimension_names")  # fields whose change leaves the stored chunks valid


@dataclass(frozen=True)
class _Target:
    node: Node
    meta: NodeMetadata
    docs: dict[str, bytes]


@dataclass(frozen=True)
class _Unreadable:
    problem: str


@dataclass
class _Plan:
    created: list[str] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)
    conflicts: dict[str, list[Difference]] = dataclasses.field(default_factory=dict)
    delete_prefixes: list[str] = dataclasses.field(default_factory=list)
    delete_keys: list[str] = dataclasses.field(default_factory=list)


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a and b else a or b


def _targets(spec: Node, root: str) -> dict[str, _Target]:
    out = {}
    for rel, node in iter_nodes(spec):
        path = _join(root, rel)
        meta = node.metadata
        out[path] = _Target(node, meta, core_nodes.documents(path, meta))
    return out


def _probe_keys(targets: Mapping[str, _Target], root: str, fmt: ZarrFormat) -> list[str]:
    names = ("zarr.json", ".zarray", ".zgroup") + ((".zattrs",) if fmt == 2 else ())
    keys = [key_prefix(p) + name for p in targets for name in names]
    ancestor_names = ("zarr.json", ".zarray", ".zgroup") + ((".zattrs", ".zmetadata") if fmt == 2 else ())
    keys += [key_prefix(q) + name for q in parent_paths(root) for name in ancestor_names]
    if fmt == 2 and isinstance(targets[root].node, GroupSpec):
        keys.append(key_prefix(root) + ".zmetadata")
    return keys


def _missing_parents(s: Store, found: Mapping[str, bytes], root: str) -> list[str]:
    missing = []
    for q in parent_paths(root):
        meta = core_nodes.parse_node(found, q, s)
        if isinstance(meta, ArrayMetadataV2 | ArrayMetadataV3):
            raise ContainsArrayError(
                f"cannot create a hierarchy at {'/' + root!r}: its ancestor {'/' + q!r} is an array; write it "
                "elsewhere or delete that array first",
                store=s.url,
                path=q,
            )
        if meta is None:
            missing.append(q)
    return missing


def _existing(s: Store, found: Mapping[str, bytes], path: str) -> NodeMetadata | _Unreadable | None:
    try:
        meta = core_nodes.parse_node(found, path, s)
    except ZarrDaskError as e:
        return _Unreadable(e.problem)
    return strip_consolidated(meta) if meta is not None else None


def _classify(targets: Mapping[str, _Target], existing: Mapping[str, Any], found: Mapping[str, bytes]) -> _Plan:
    plan = _Plan()
    for path, target in targets.items():
        old = existing[path]
        if old is None or (old != target.meta and _half_written(path, target, found)):
            plan.created.append(path)
        elif not isinstance(old, _Unreadable) and old == target.meta:
            plan.unchanged.append(path)
        else:
            plan.conflicts[path] = _conflict(path, old, target)
            _plan_replacement(plan, path, old, target, found)
    return plan


def _half_written(path: str, target: _Target, found: Mapping[str, bytes]) -> bool:
    """True when the node's stored documents are some of ``target``'s, byte for byte: another writer of the same
    spec is creating it right now (a v2 ``.zarray`` already there, its ``.zattrs`` not yet). Writing the same
    spec twice at once is idempotent, so the node is created (its documents only where absent)."""
    present = {k: v for k, v in found.items() if k in core_nodes.candidate_keys(path, None)}
    return bool(present) and all(target.docs.get(k) == v for k, v in present.items())


def _conflict(path: str, old: Any, target: _Target) -> list[Difference]:
    new = dataclasses.replace(target.node, members=None) if isinstance(target.node, GroupSpec) else target.node
    if isinstance(old, _Unreadable):
        return [Difference(path="/" + path, field="document", left=f"unreadable: {old.problem}", right=_kind(new))]
    before = spec_of(old)
    if isinstance(before, GroupSpec):
        before = dataclasses.replace(before, members=None)
    return node_differences(path, before, new) or [
        Difference(path="/" + path, field="document", left="different bytes", right="new document")
    ]


def _kind(node: Node) -> str:
    return "array" if isinstance(node, ArraySpec) else "group"


def _plan_replacement(plan: _Plan, path: str, old: Any, target: _Target, found: Mapping[str, bytes]) -> None:
    """What ``overwrite=True`` deletes before writing the new node."""
    new_is_array = isinstance(target.meta, ArrayMetadataV2 | ArrayMetadataV3)
    old_is_array = isinstance(old, ArrayMetadataV2 | ArrayMetadataV3)
    if new_is_array or old_is_array:
        fields = {d.field for d in plan.conflicts[path]}
        same_layout = old_is_array and new_is_array and old.zarr_format == target.meta.zarr_format
        if not (same_layout and all(f.split(".")[0] in _KEEP_CHUNKS for f in fields)):
            plan.delete_prefixes.append(path)
            return
    prefix = key_prefix(path)
    v2_found = prefix + ".zgroup" in found or prefix + ".zarray" in found
    stale = [prefix + n for n in ("zarr.json", ".zarray", ".zgroup") if prefix + n in found]
    stale += [prefix + ".zattrs"] if v2_found else []  # not probed when writing v3
    plan.delete_keys += [k for k in stale if k not in target.docs]


def _under(path: str, prefixes: list[str]) -> bool:
    return any(p == "" or path == p or path.startswith(p + "/") for p in prefixes)


def _consolidated_docs(
    s: Store, root: str, targets: Mapping[str, _Target], found: Mapping[str, bytes], plan: _Plan,
    parents: list[str], consolidated: bool,
) -> dict[str, bytes]:  # fmt: skip
    """Documents of the groups whose consolidated metadata must change: the root (if it has some, or
    ``consolidated``) and every ancestor of the root that has some -- so that it never goes stale."""
    target = targets[root].meta
    fmt: ZarrFormat = target.zarr_format
    new_nodes: dict[str, Any] = {p: strip_consolidated(t.meta) for p, t in targets.items()}
    new_nodes.update({q: core_nodes.empty_group(fmt) for q in parents})
    out: dict[str, bytes] = {}
    for q in parent_paths(root):
        old_cm = _old_consolidated(s, q, fmt, found)
        meta = strip_consolidated(core_nodes.parse_node(found, q, s)) if old_cm is not None else None
        if old_cm is not None and isinstance(meta, GroupMetadataV2 | GroupMetadataV3):
            out.update(_refreshed(q, meta, dict(old_cm.nodes), new_nodes, plan, found, force=False))
    if isinstance(target, GroupMetadataV2 | GroupMetadataV3):
        old_cm = _old_consolidated(s, root, fmt, found)
        if old_cm is not None or consolidated:
            base = dict(old_cm.nodes) if old_cm is not None else _existing_tree(s, root, fmt)
            out.update(_refreshed(root, target, base, new_nodes, plan, found, force=root in plan.conflicts))
    return out


def _existing_tree(s: Store, root: str, fmt: ZarrFormat) -> dict[str, Any]:
    found = read_tree(s, root, fmt, None)[0]
    return {rel: m for rel, m in found.items() if not isinstance(m, core_nodes.ImplicitGroup)}


def _refreshed(
    q: str, meta: GroupMetadataV2 | GroupMetadataV3, base: dict[str, Any], new_nodes: Mapping[str, Any],
    plan: _Plan, found: Mapping[str, bytes], *, force: bool,
) -> dict[str, bytes]:  # fmt: skip
    """The documents of group ``q`` with its consolidated metadata updated, or ``{}`` if nothing changes."""
    cut = len(q) + 1 if q else 0
    nodes = {rel: strip_consolidated(m) for rel, m in base.items() if not _under(_join(q, rel), plan.delete_prefixes)}
    nodes.update({p[cut:]: m for p, m in new_nodes.items() if p != q and (not q or p.startswith(q + "/"))})
    cm = ConsolidatedMetadata.from_nodes(meta.zarr_format, nodes)
    if isinstance(meta, GroupMetadataV3):
        docs = core_nodes.documents(q, dataclasses.replace(meta, consolidated_metadata=cm))
        key = key_prefix(q) + "zarr.json"
    else:
        key = key_prefix(q) + ".zmetadata"
        docs = {key: cm.to_v2_document(root=meta)}
    same = key in found and _same_json(found[key], docs[key])
    return {} if same and not force else docs


def _old_consolidated(s: Store, root: str, fmt: ZarrFormat, found: Mapping[str, bytes]) -> ConsolidatedMetadata | None:
    try:
        meta = core_nodes.parse_node(found, root, s)
        if fmt == 3 and isinstance(meta, GroupMetadataV3):
            return meta.consolidated_metadata
        zmetadata = found.get(key_prefix(root) + ".zmetadata")
        if fmt == 2 and isinstance(meta, GroupMetadataV2) and zmetadata is not None:
            return core_nodes.read_consolidated_v2(s, root, zmetadata)
    except ZarrDaskError:
        return None  # unreadable: replaced (overwrite) or refused as a conflict
    return None


def _same_json(a: bytes, b: bytes) -> bool:
    try:
        return canonical_json(loads(a)) == canonical_json(loads(b))
    except ZarrDaskError:
        return False


def write_spec(
    spec: Node,
    store: Any,
    *,
    path: str = "",
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    consolidated: bool = False,
) -> WriteReport:
    """Create the hierarchy ``spec`` at ``path`` of ``store`` (see the module docstring).

    Parameters
    ----------
    spec
        A :class:`GroupSpec` (with members) or an :class:`ArraySpec`.  Implicit groups are written as empty
        groups (the v3 spec requires a document per group); groups with ``members=None`` are written alone
        (what lies below them is not touched).
    store
        A URL, a local path or a Store.
    path
        Where the root of ``spec`` goes.
    overwrite
        Replace existing nodes that differ.  An array whose only changes are attributes / dimension names
        keeps its chunks; any other replaced array (and anything below a node replaced by another kind) is
        deleted first.  Existing nodes that the spec does not mention are never touched.
    storage_options
        fsspec options for URLs.
    consolidated
        Also write consolidated metadata at the root group (v3: inline in its ``zarr.json``; v2:
        ``.zmetadata``), covering the spec and the nodes already in the store.  Independently of this flag,
        consolidated metadata already at the root is refreshed so that it never goes stale.

    Returns
    -------
    WriteReport

    Raises
    ------
    HierarchyConflictError
        Existing nodes differ and ``overwrite`` is false; nothing was written.
    ContainsArrayError
        An ancestor of ``path`` is an array.
    ReadOnlyError, MetadataError
        A read-only store; attributes that are not JSON; consolidated metadata asked for an array.

    Examples
    --------
    >>> import numpy as np
    >>> spec = GroupSpec(members={"temp": ArraySpec.from_array(np.zeros((4, 4), "f4"))})
    >>> report = write_spec(spec, "memory://zom-write-doc")
    >>> report.written
    ('temp/zarr.json', 'zarr.json')
    >>> write_spec(spec, "memory://zom-write-doc").changed
    False
    >>> import zarr_dask; zarr_dask.open_store("memory://zom-write-doc").delete_prefix("")
    """
    s = open_for(store, storage_options)
    root = root_path(path, s)
    if s.read_only:
        raise ReadOnlyError(f"the store is read-only, cannot create nodes; {s.read_only_advice}", store=s.url, path=root)
    if not isinstance(spec, ArraySpec | GroupSpec):
        raise MetadataError(f"to_store writes an ArraySpec or a GroupSpec, got {type(spec).__name__}")
    if consolidated and isinstance(spec, ArraySpec):
        raise MetadataError("consolidated metadata belongs to a group; write the array without consolidated=True")
    try:
        validate_node_path(root, spec.zarr_format)  # the members' names are checked by the spec
        targets = _targets(spec, root)
    except ZarrDaskError as e:
        raise e.with_context(store=s.url, path=root) from None
    found = s.get_many(_probe_keys(targets, root, spec.zarr_format))
    parents = _missing_parents(s, found, root)
    existing = {p: _existing(s, found, p) for p in targets}
    plan = _classify(targets, existing, found)
    if plan.conflicts and not overwrite:
        raise _conflict_error(plan, s, root)
    return _execute(s, root, targets, found, plan, parents, consolidated)


def _conflict_error(plan: _Plan, s: Store, root: str) -> HierarchyConflictError:
    conflicts = Diff(tuple(d for ds in plan.conflicts.values() for d in ds), labels=("existing", "new"))
    return HierarchyConflictError(
        f"{len(plan.conflicts)} existing node(s) differ from the spec, so nothing was written; pass "
        "overwrite=True to replace them (an array whose shape, data type, chunks or codecs change loses its "
        "chunks; attribute changes keep them), or change the spec to match:\n" + str(conflicts),
        store=s.url,
        path=root,
        conflicts=conflicts,
    )


def _execute(
    s: Store, root: str, targets: Mapping[str, _Target], found: Mapping[str, bytes], plan: _Plan,
    parents: list[str], consolidated: bool,
) -> WriteReport:  # fmt: skip
    rewrite = [p for p in plan.unchanged if _under(p, plan.delete_prefixes)]
    to_write = [*plan.conflicts, *rewrite]
    docs = {k: v for p in to_write for k, v in targets[p].docs.items()}
    created = {k: v for p in plan.created for k, v in targets[p].docs.items()}
    docs.update(_consolidated_docs(s, root, targets, found, plan, parents, consolidated))
    for prefix in plan.delete_prefixes:
        s.delete_prefix(prefix)
    if plan.delete_keys:
        s.delete_many(plan.delete_keys)
    written = []
    fmt = next(iter(targets.values())).meta.zarr_format
    for q in parents:
        for key, data in core_nodes.documents(q, core_nodes.empty_group(fmt)).items():
            if s.set_if_not_exists(key, data):
                written.append(key)
    created = {k: v for k, v in created.items() if k not in docs}
    clashes = core_nodes.create_if_absent(s, created) if created else []  # a node created meanwhile: kept
    if clashes:
        raise HierarchyConflictError(
            f"{len(clashes)} document(s) were created by another writer with other contents while this spec was "
            f"being written ({', '.join(sorted(clashes)[:5])}); they were kept. Read the hierarchy and write "
            "again, with overwrite=True to replace them",
            store=s.url,
            path=root,
            conflicts=Diff((), labels=("existing", "new")),
        )
    if docs:
        s.set_many(docs)
    return WriteReport(
        store=s.url,
        path=root,
        written=tuple(sorted([*written, *docs, *created])),
        created=tuple(plan.created),
        unchanged=tuple(p for p in plan.unchanged if p not in rewrite),
        replaced=tuple(plan.conflicts),
    )


connect(write_spec=write_spec)
