"""`Group`: a Zarr v2/v3 group — explicit, or implicit (a path with descendants but no document)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from zarr_dask.core import nodes
from zarr_dask.core.array import Array
from zarr_dask.core.consolidated import (
    consolidated_entry,
    consolidated_lock,
    consolidated_of,
    create_node,
    holder_documents,
    refresh_consolidated,
    refresh_keys,
)
from zarr_dask.core.describe import info_text
from zarr_dask.core.node import Node
from zarr_dask.errors import (
    GroupNotFoundError,
    NodeNotFoundError,
    ReadOnlyError,
    ZarrDaskError,
)
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.consolidated import ConsolidatedMetadata
from zarr_dask.spec.paths import join_path, key_prefix, normalize_path, validate_node_name
from zarr_dask.store import Store, open_store

ZarrFormat = Literal[2, 3]
GroupMeta = GroupMetadataV2 | GroupMetadataV3 | nodes.ImplicitGroup
NodeMeta = ArrayMetadataV2 | ArrayMetadataV3 | GroupMeta


@dataclass(frozen=True)
class GroupInfo:
    """What :attr:`Group.info` reports (zarr-python's ``GroupInfo`` fields, plus where the group is)."""

    name: str
    store: str
    store_type: str
    zarr_format: int
    read_only: bool
    implicit: bool
    consolidated: bool
    count_members: int
    count_arrays: int
    count_groups: int
    attributes: int

    def __repr__(self) -> str:
        return info_text([
            ("Name", self.name),
            ("Type", "Group (implicit: no metadata document)" if self.implicit else "Group"),
            ("Zarr format", self.zarr_format),
            ("Read-only", self.read_only),
            ("Store type", self.store_type),
            ("Store", self.store),
            ("Consolidated", "yes" if self.consolidated else "no"),
            ("No. members", self.count_members),
            ("No. arrays", self.count_arrays),
            ("No. groups", self.count_groups),
            ("No. attributes", self.attributes),
        ])  # fmt: skip


class Group(Node):
    """A Zarr group. Open with :func:`zarr_dask.open_group`, create with :func:`zarr_dask.create_group`.

    Members are found from consolidated metadata when the group has it (no listing at all), else with one
    listing per group level plus one batched read of the children's documents.

    Examples
    --------
    >>> import zarr_dask
    >>> root = zarr_dask.create_group("memory://doc-group")
    >>> _ = root.create_array("temp", shape=(3,), dtype="f4")
    >>> root.array_keys()
    ['temp']
    """

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: GroupMeta,
        *,
        consolidated: ConsolidatedMetadata | None = None,
        allow_unsafe_codecs: bool = False,
    ) -> None:
        self._store = store
        self._path = normalize_path(path)
        self._metadata = metadata
        self._consolidated = consolidated
        self._allow_unsafe_codecs = allow_unsafe_codecs

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(
        cls,
        store: Any,
        path: str = "",
        *,
        zarr_format: ZarrFormat | None = None,
        use_consolidated: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = False,
        allow_unsafe_codecs: bool = False,
    ) -> Group:
        s = open_store(store, storage_options=dict(storage_options or {}), read_only=read_only)
        path = normalize_path(path)
        docs = s.get_many(nodes.candidate_keys(path, zarr_format, consolidated=use_consolidated is not False))
        meta: Any = nodes.parse_node(docs, path, s)
        if meta is None:
            meta = _implicit(s, path, zarr_format)
        if not nodes.is_group(meta):
            raise GroupNotFoundError(
                "this path holds an array, not a group; open it with open_array", store=s.url, path=path
            )
        consolidated = consolidated_of(s, path, meta, docs) if use_consolidated is not False else None
        if use_consolidated is True and consolidated is None:
            raise NodeNotFoundError(
                "use_consolidated=True but the group has no consolidated metadata; run "
                "zarr_dask.consolidate_metadata on it, or pass use_consolidated=None",
                store=s.url,
                path=path,
            )
        return cls(s, path, meta, consolidated=consolidated, allow_unsafe_codecs=allow_unsafe_codecs)

    @classmethod
    def create(
        cls,
        store: Any,
        path: str = "",
        *,
        zarr_format: ZarrFormat = 3,
        attributes: Mapping[str, Any] | None = None,
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Group:
        s = open_store(store, storage_options=dict(storage_options or {}))
        path = normalize_path(path)
        meta: GroupMetadataV2 | GroupMetadataV3
        try:
            if zarr_format == 3:
                meta = GroupMetadataV3(attributes=dict(attributes or {}))
            elif zarr_format == 2:
                meta = GroupMetadataV2(attributes=dict(attributes or {}))
            else:
                raise ZarrDaskError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
            meta.to_documents()  # validates attributes (JSON-serialisable) before anything is written
        except ZarrDaskError as e:
            raise e.with_context(store=s.url, path=path) from None
        create_node(s, path, meta, overwrite=overwrite)  # and refresh enclosing consolidated metadata
        return cls(s, path, meta)

    # ------------------------------------------------------------------ properties
    @property
    def metadata(self) -> GroupMeta:
        return self._metadata

    @property
    def implicit(self) -> bool:
        """True for a group that has no document of its own (found because it has descendants)."""
        return isinstance(self._metadata, nodes.ImplicitGroup)

    @property
    def consolidated_metadata(self) -> ConsolidatedMetadata | None:
        return self._consolidated

    def _set_attributes(self, attributes: dict[str, Any]) -> None:
        """Write the new attributes, keeping the consolidated metadata as stored *now* (not as opened: a write
        since may have refreshed it), and refresh this group's entry in its ancestors' consolidated metadata
        (one batched read, then the writes)."""
        if self._store.read_only:
            raise ReadOnlyError(f"the group is read-only; {self._store.read_only_advice}", store=self._store.url, path=self._path)
        if isinstance(self._metadata, nodes.ImplicitGroup):
            meta: Any = (GroupMetadataV3 if self.zarr_format == 3 else GroupMetadataV2)(attributes=attributes)
        else:
            meta = dataclasses.replace(self._metadata, attributes=attributes)
        fmt = self.zarr_format
        own_cm = [key_prefix(self._path) + ".zmetadata"] if fmt == 2 else []
        with consolidated_lock(self._store):
            docs = self._store.get_many(refresh_keys(self._path, fmt, own=True) + own_cm)
            current = consolidated_of(self._store, self._path, nodes.parse_node(docs, self._path, self._store), docs)
            updates = nodes.documents(self._path, meta)
            if isinstance(meta, GroupMetadataV3):
                meta = dataclasses.replace(meta, consolidated_metadata=current)
                updates = nodes.documents(self._path, meta)
            elif current is not None:  # v2 .zmetadata repeats the group's own attributes
                updates.update(holder_documents(self._path, meta, current))
            self._store.set_many(updates)
            refresh_consolidated(self._store, self._path, meta, zarr_format=fmt, prefetched=docs)
        self._metadata = meta
        if self._consolidated is not None and current is not None:
            self._consolidated = current

    def __repr__(self) -> str:
        kind = "implicit group" if self.implicit else "Group"
        return f"<zarr_dask.{kind} {self._store.url} {self.name}>"

    def _repr_html_(self) -> str:
        """Notebook display: attributes and a tree of the members with shapes, chunks and shards."""
        from zarr_dask.core.html import group_html

        return group_html(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and other._store == self._store and other._path == self._path

    def __hash__(self) -> int:
        return hash((self._store, self._path))

    @property
    def info(self) -> GroupInfo:
        """A summary: format, store, consolidated or not, and the direct members counted (from consolidated
        metadata, else one listing and one batched read), as zarr-python's ``Group.info``."""
        metas = self._member_metadata(1)
        arrays = sum(1 for m in metas.values() if nodes.is_array(m))
        return GroupInfo(
            name=self.name,
            store=self._store.url,
            store_type=type(self._store).__name__,
            zarr_format=self.zarr_format,
            read_only=self._store.read_only,
            implicit=self.implicit,
            consolidated=self._consolidated is not None,
            count_members=len(metas),
            count_arrays=arrays,
            count_groups=len(metas) - arrays,
            attributes=len(self.attrs.asdict()),
        )

    # ------------------------------------------------------------------ members
    def _node(self, path: str, meta: Any) -> Array | Group:
        if nodes.is_array(meta):
            return Array(self._store, path, meta, allow_unsafe_codecs=self._allow_unsafe_codecs)
        sub = None
        if self._consolidated is not None:
            sub = self._consolidated.subtree(path[len(self._path) :].strip("/"))
        return Group(self._store, path, meta, consolidated=sub, allow_unsafe_codecs=self._allow_unsafe_codecs)

    def _member_metadata(self, max_depth: int | None) -> dict[str, Any]:
        """Relative path → metadata of every member down to ``max_depth`` (None = all)."""
        if self._consolidated is not None:
            return {
                rel: meta
                for rel, meta in self._consolidated.nodes.items()
                if max_depth is None or rel.count("/") < max_depth
            }
        return discover(self._store, self._path, self.zarr_format, max_depth)

    def members(self, max_depth: int | None = 1) -> tuple[tuple[str, Array | Group], ...]:
        """``(relative path, node)`` pairs of the members, sorted; ``max_depth=None`` walks the whole tree."""
        metas = self._member_metadata(max_depth)
        return tuple((rel, self._node(join_path(self._path, rel), m)) for rel, m in sorted(metas.items()))

    def array_keys(self) -> list[str]:
        return [name for name, m in sorted(self._member_metadata(1).items()) if nodes.is_array(m)]

    def group_keys(self) -> list[str]:
        return [name for name, m in sorted(self._member_metadata(1).items()) if nodes.is_group(m)]

    def arrays(self) -> Iterator[tuple[str, Array]]:
        for name, node in self.members():
            if isinstance(node, Array):
                yield name, node

    def groups(self) -> Iterator[tuple[str, Group]]:
        for name, node in self.members():
            if isinstance(node, Group):
                yield name, node

    def keys(self) -> list[str]:
        return sorted(self._member_metadata(1))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self[name]
        except (NodeNotFoundError, KeyError):
            return False
        return True

    def __getitem__(self, name: str) -> Array | Group:
        rel = normalize_path(name)
        path = join_path(self._path, rel)
        if self._consolidated is not None:
            meta = self._consolidated.nodes.get(rel)
        else:
            meta = nodes.read_node(self._store, path, self.zarr_format)
            if meta is None:
                meta = _implicit(self._store, path, self.zarr_format, missing_ok=True)
        if meta is None:
            raise KeyError(name)
        return self._node(path, meta)

    def tree(self, max_depth: int | None = None) -> str:
        """The hierarchy as text: groups and arrays with shape and dtype (implicit groups marked).

        Examples
        --------
        >>> import zarr_dask
        >>> g = zarr_dask.create_group("memory://doc-tree")
        >>> _ = g.create_array("a/x", shape=(2, 3), dtype="i2")
        >>> print(g.tree())
        /
        └── a
            └── x (2, 3) int16
        """
        metas = self._member_metadata(max_depth)
        children: dict[str, list[str]] = {}
        for rel in sorted(metas):
            parent = rel.rpartition("/")[0]
            children.setdefault(parent, []).append(rel)
        lines = [self.name + (" (implicit group)" if self.implicit else "")]

        def walk(parent: str, indent: str) -> None:
            kids = children.get(parent, [])
            for i, rel in enumerate(kids):
                last = i == len(kids) - 1
                meta = metas[rel]
                label = rel.rsplit("/", 1)[-1]
                if nodes.is_array(meta):
                    label += f" {tuple(meta.shape)} {meta.data_type.numpy_dtype}"
                elif isinstance(meta, nodes.ImplicitGroup):
                    label += " (implicit group)"
                lines.append(indent + ("└── " if last else "├── ") + label)
                walk(rel, indent + ("    " if last else "│   "))

        walk("", "")
        return "\n".join(lines)

    # ------------------------------------------------------------------ creation of members
    def _child_path(self, name: str) -> str:
        rel = normalize_path(name)
        try:
            for part in rel.split("/"):
                validate_node_name(part, self.zarr_format)
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None
        return join_path(self._path, rel)

    def _member_created(self, path: str, meta: Any) -> None:
        """A member was created (and the stored consolidated metadata refreshed by its creation): when this
        group was opened from consolidated metadata, bring its view up to date, so the new member is found."""
        if self._consolidated is None:
            return
        rel = path[len(key_prefix(self._path)) :]
        entries = dict(self._consolidated.nodes)
        if nodes.is_array(meta):  # an array replaces whatever was below it
            entries = {k: v for k, v in entries.items() if not k.startswith(rel + "/")}
        parts = rel.split("/")
        for i in range(1, len(parts)):  # groups created on the way (write-if-absent: existing ones stay)
            between = "/".join(parts[:i])
            if between not in entries or nodes.is_array(entries[between]):
                entries[between] = (GroupMetadataV3 if self.zarr_format == 3 else GroupMetadataV2)()
        entries[rel] = consolidated_entry(meta)
        self._consolidated = dataclasses.replace(self._consolidated, nodes=entries)

    def create_group(
        self, name: str, *, attributes: Mapping[str, Any] | None = None, overwrite: bool = False
    ) -> Group:
        group = Group.create(
            self._store, self._child_path(name), zarr_format=self.zarr_format, attributes=attributes, overwrite=overwrite
        )
        self._member_created(group.path, group.metadata)
        return group

    def require_group(self, name: str, **kwargs: Any) -> Group:
        """Open the member group ``name``, creating it if absent."""
        try:
            node = self[name]
        except KeyError:
            return self.create_group(name, **kwargs)
        if not isinstance(node, Group):
            raise GroupNotFoundError(f"member {name!r} is an array", store=self._store.url, path=self._path)
        return node

    def create_array(self, name: str, *, shape: Any, dtype: Any = "float64", **kwargs: Any) -> Array:
        kwargs.setdefault("zarr_format", self.zarr_format)
        array = Array.create(self._store, self._child_path(name), shape=shape, dtype=dtype, **kwargs)
        if array.zarr_format == self.zarr_format:
            self._member_created(array.path, array.metadata)
        return array


# ---------------------------------------------------------------------- discovery by listing
def _implicit(store: Store, path: str, zarr_format: ZarrFormat | None, *, missing_ok: bool = False) -> Any:
    """An implicit group at ``path`` if some descendant has a document, else None / an error."""
    found = discover(store, path, zarr_format, max_depth=None, stop_at_first=True)
    if found:
        fmt = next(iter(found.values())).zarr_format
        return nodes.ImplicitGroup(zarr_format=fmt, attributes={})
    if missing_ok:
        return None
    raise GroupNotFoundError(
        "no group found here (no metadata document, no descendants); check the URL and path"
        + (f" and zarr_format={zarr_format}" if zarr_format else ""),
        store=store.url,
        path=path,
    )


def discover(
    store: Store,
    path: str,
    zarr_format: ZarrFormat | None,
    max_depth: int | None,
    *,
    stop_at_first: bool = False,
) -> dict[str, Any]:
    """Walk the hierarchy under ``path`` level by level: one ``list_dir`` per group and one batched read of
    every child's documents per level. Arrays are not descended into. Returns relative path → metadata."""
    out: dict[str, Any] = {}
    frontier = [""]  # relative paths of groups (explicit or implicit) to expand
    depth = 0
    while frontier and (max_depth is None or depth < max_depth):
        children = []
        for rel in frontier:
            _, dirs = store.list_dir(key_prefix(join_path(path, rel)))
            children += [join_path(rel, d) for d in dirs if not d.startswith("__")]
        keys = [k for c in children for k in nodes.candidate_keys(join_path(path, c), zarr_format)]
        docs = store.get_many(keys) if keys else {}
        frontier = []
        for child in children:
            meta: Any = nodes.parse_node(docs, join_path(path, child), store)
            if meta is None:
                sub = discover(store, join_path(path, child), zarr_format, None, stop_at_first=True)
                if not sub:
                    continue
                meta = nodes.ImplicitGroup(zarr_format=next(iter(sub.values())).zarr_format, attributes={})
            out[child] = meta
            if stop_at_first:
                return out
            if nodes.is_group(meta):
                frontier.append(child)
        depth += 1
    return out
