"""ZEP 6 hierarchy models: :class:`ArraySpec` and :class:`GroupSpec` (Zarr v2 and v3), pure (no I/O).

A hierarchy's *structure* is its tree of nodes and their metadata, without chunk data and without the store.
An :class:`ArraySpec` wraps the array metadata of the spec layer (``ArrayMetadataV2`` / ``ArrayMetadataV3``);
a :class:`GroupSpec` holds the group's attributes and its ``members`` (name -> node; ``None`` = "members
unknown").  Both are frozen, compare and hash by their JSON form (NaN-safe) and pickle.

JSON (:meth:`GroupSpec.to_json`) is the ZEP 6 form that pydantic-zarr 0.10 uses: the node's metadata fields,
``attributes`` and, for groups, ``members`` nested.  Implicit groups (a path with descendants but no document
of its own) carry ``"implicit": true``, the one key pydantic-zarr does not know
(:meth:`GroupSpec.with_explicit_groups` drops it).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from zarr_dask.errors import InvalidPathError, MetadataError, UnknownExtensionError, ZarrDaskError
from zarr_dask.spec import GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.json import JsonEquality, prefixed, to_jsonable
from zarr_dask.spec.paths import normalize_path, validate_node_name
from zarr_dask.zom.array import ArraySpec, NotebookDisplay, array_metadata, document, is_array_document
from zarr_dask.zom.diff import Diff, diff
from zarr_dask.zom.schema import json_schema
from zarr_dask.zom.tree import WriteReport, iter_nodes, port
from zarr_dask.zom.v2_to_v3 import array_to_format

__all__ = ["ArraySpec", "GroupSpec", "Node", "build_tree", "from_json", "iter_nodes", "tree_from_flat"]

ZarrFormat = Literal[2, 3]

_MEMBERS = re.compile(r"^_*members$")
_V3_GROUP_KEYS = frozenset({"zarr_format", "node_type", "attributes", "members", "implicit"})
_V2_GROUP_KEYS = frozenset({"zarr_format", "attributes", "members", "implicit"})


def _escape(key: str) -> str:
    """ZEP 6: a metadata field called ``members`` is written as ``_members`` (``_members`` as ``__members``...)."""
    return "_" + key if _MEMBERS.match(key) else key


def _unescape(key: str) -> str:
    return key[1:] if _MEMBERS.match(key) and key != "members" else key


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupSpec(NotebookDisplay, JsonEquality):
    """A Zarr group node: attributes and members (name -> :class:`ArraySpec` / :class:`GroupSpec`).

    Parameters
    ----------
    zarr_format
        2 or 3 (every member must have the same format).
    attributes
        User attributes (JSON-serialisable).
    members
        ``{name: node}``; names follow the Zarr node-name rules of the format.  ``None`` means "members
        unknown" (a hierarchy read to a limited depth; :meth:`to_store` then writes only this group).
    implicit
        A group without a document of its own (found because it has descendants); it has no attributes.
    extra_fields
        v3 only: extra ``zarr.json`` keys whose value is an object with ``"must_understand": false``.

    Examples
    --------
    >>> import numpy as np
    >>> tree = GroupSpec(attributes={"title": "t"}, members={
    ...     "temp": ArraySpec.from_array(np.zeros((2, 3), "f4"), dimension_names=["y", "x"]),
    ...     "sub": GroupSpec(members={"a": ArraySpec.from_array(np.arange(4))})})
    >>> sorted(tree.to_flat())
    ['', '/sub', '/sub/a', '/temp']
    >>> tree["sub/a"].shape
    (4,)
    >>> GroupSpec.from_json(tree.to_json()) == tree
    True
    """

    node_type: ClassVar[Literal["group"]] = "group"
    zarr_format: ZarrFormat = 3
    attributes: dict[str, Any] = field(default_factory=dict)
    members: dict[str, ArraySpec | GroupSpec] | None = field(default_factory=dict)
    implicit: bool = False
    extra_fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.zarr_format not in (2, 3) or isinstance(self.zarr_format, bool):
            raise MetadataError(f"zarr_format must be 2 or 3, got {self.zarr_format!r}")
        if not isinstance(self.attributes, Mapping) or not all(isinstance(k, str) for k in self.attributes):
            raise MetadataError(f"attributes must be a dict with string keys, got {self.attributes!r}")
        object.__setattr__(self, "attributes", copy.deepcopy(dict(self.attributes)))
        to_jsonable(self.attributes, "attributes")
        object.__setattr__(self, "extra_fields", self._checked_extra())
        if not isinstance(self.implicit, bool):
            raise MetadataError(f"implicit must be True or False, got {self.implicit!r}")
        if self.implicit and (self.attributes or self.extra_fields):
            raise MetadataError(
                "an implicit group has no document, hence no attributes; make it explicit (implicit=False) "
                "to give it attributes"
            )
        if self.members is not None:
            object.__setattr__(self, "members", self._checked_members(self.members))

    def _checked_extra(self) -> dict[str, Any]:
        extra = self.extra_fields
        if not isinstance(extra, Mapping):
            raise MetadataError(f"extra_fields must be a dict, got {type(extra).__name__}")
        if extra and self.zarr_format == 2:
            raise MetadataError("extra_fields exist only in Zarr v3 (a v2 .zgroup holds nothing but zarr_format)")
        for key in extra:
            if key in ("zarr_format", "node_type", "attributes", "consolidated_metadata", "implicit"):
                raise MetadataError(f"extra_fields key {key!r} is reserved; rename it")
        GroupMetadataV3(extra_fields=dict(extra))  # the must_understand rule, checked by the spec layer
        return copy.deepcopy(dict(extra))

    def _checked_members(self, members: Any) -> dict[str, ArraySpec | GroupSpec]:
        if not isinstance(members, Mapping):
            raise MetadataError(f"members must be a mapping of name -> ArraySpec/GroupSpec, or None, got {members!r}")
        out: dict[str, ArraySpec | GroupSpec] = {}
        for name, node in members.items():
            try:
                validate_node_name(name, self.zarr_format)
            except InvalidPathError as e:
                raise InvalidPathError(f"member {name!r}: {e.problem}") from None
            if not isinstance(node, ArraySpec | GroupSpec):
                raise MetadataError(f"member {name!r} must be an ArraySpec or a GroupSpec, got {type(node).__name__}")
            if node.zarr_format != self.zarr_format:
                raise MetadataError(
                    f"member {name!r} is a Zarr v{node.zarr_format} node inside a Zarr v{self.zarr_format} "
                    f"group; convert it with .to_format({self.zarr_format}) or change the group's zarr_format"
                )
            out[name] = node
        return out

    # ------------------------------------------------------------------ navigation
    @property
    def metadata(self) -> GroupMetadataV2 | GroupMetadataV3:
        """The group metadata to write (an implicit group is written as an empty explicit group)."""
        if self.zarr_format == 3:
            return GroupMetadataV3(attributes=self.attributes, extra_fields=self.extra_fields)
        return GroupMetadataV2(attributes=self.attributes)

    def __getitem__(self, path: str) -> ArraySpec | GroupSpec:
        """The node at relative ``path`` (``"a/b"``; ``""`` is this group)."""
        node: ArraySpec | GroupSpec = self
        for name in [p for p in normalize_path(path).split("/") if p]:
            if not isinstance(node, GroupSpec) or node.members is None or name not in node.members:
                raise KeyError(path)
            node = node.members[name]
        return node

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        try:
            self[path]
        except (KeyError, ZarrDaskError):
            return False
        return True

    def with_explicit_groups(self) -> GroupSpec:
        """A copy where every implicit group is an ordinary (empty) group, as :meth:`to_store` writes them."""
        members = None if self.members is None else {
            k: v.with_explicit_groups() if isinstance(v, GroupSpec) else v for k, v in self.members.items()
        }
        return dataclasses.replace(self, implicit=False, members=members)

    # ------------------------------------------------------------------ JSON and flat form
    @classmethod
    def from_json(cls, obj: Any) -> GroupSpec:
        """Parse the ZEP 6 JSON of a group (members nested; a dict or JSON text).

        Accepts pydantic-zarr's ``model_dump()`` and ``members: null``.  v3 extra keys must be objects with
        ``"must_understand": false``; a ``consolidated_metadata`` key (a cache, not structure) is ignored.

        Raises
        ------
        MetadataError, InvalidPathError
            For an invalid node, naming its path.
        """
        node = from_json(obj)
        if not isinstance(node, GroupSpec):
            raise MetadataError("the JSON describes an array, not a group; use ArraySpec.from_json")
        return node

    def to_json(self) -> dict[str, Any]:
        """The ZEP 6 JSON with members nested (pydantic-zarr's shape; ``"implicit": true`` on implicit groups)."""
        out: dict[str, Any] = {"zarr_format": self.zarr_format}
        if self.zarr_format == 3:
            out["node_type"] = "group"
        out["attributes"] = to_jsonable(self.attributes, "attributes")
        out["members"] = None if self.members is None else {k: v.to_json() for k, v in self.members.items()}
        if self.implicit:
            out["implicit"] = True
        out.update((_escape(k), copy.deepcopy(v)) for k, v in self.extra_fields.items())
        return out

    def _json_key(self) -> Any:
        return self.to_json()

    def to_flat(self) -> dict[str, ArraySpec | GroupSpec]:
        """``{path: node}`` with pydantic-zarr's keys (``""``, ``"/a"``, ``"/a/b"``); groups get ``members=None``.

        Examples
        --------
        >>> GroupSpec(members={"a": GroupSpec()}).to_flat()["/a"].members is None
        True
        """
        return {("/" + p if p else ""): node for p, node in iter_nodes(self, flat=True)}

    @classmethod
    def from_flat(cls, data: Mapping[str, Any]) -> GroupSpec:
        """Build a tree from ``{path: node}`` (nodes or their JSON; paths with or without a leading ``/``).

        A missing root or intermediate group becomes an implicit group.  Leaf groups get ``members={}``.

        Raises
        ------
        MetadataError
            Two entries for one path, a node below an array, a group entry with members, an array root.

        Examples
        --------
        >>> import numpy as np
        >>> tree = GroupSpec.from_flat({"/a/b": ArraySpec.from_array(np.zeros(2))})
        >>> tree["a"].implicit, tree["a/b"].shape
        (True, (2,))
        """
        return tree_from_flat(data)

    # ------------------------------------------------------------------ conversion, comparison, I/O
    def to_format(self, zarr_format: ZarrFormat, *, chunk_key_encoding: Literal["v2", "default"] = "v2") -> GroupSpec:
        """The hierarchy in another Zarr format (v2 -> v3: codecs translated, ``_ARRAY_DIMENSIONS`` ->
        ``dimension_names``, chunk bytes unchanged; see :func:`zarr_dask.zom.v2_to_v3.array_to_v3`).

        Examples
        --------
        >>> v2 = GroupSpec(zarr_format=2, members={"t": ArraySpec.build(zarr_format=2, shape=(4,), dtype="<i2",
        ...                                                            dimension_names=["x"])})
        >>> v3 = v2.to_format(3)
        >>> v3.zarr_format, v3["t"].dimension_names, v3["t"].to_json()["chunk_key_encoding"]["name"]
        (3, ('x',), 'v2')
        """
        return _to_format(self, "", zarr_format, chunk_key_encoding)

    def like(self, other: Any, *, exclude: Iterable[str] = ()) -> bool:
        """True if ``other`` (a spec or a zarr_dask Group) has the same structure, ignoring ``exclude``.

        ``exclude`` holds field names applied at every node: ``"attributes"``, ``"attributes.title"``,
        ``"codecs"``, ``"node"`` (added/removed nodes), ``"members"`` (compare this node only)...

        Examples
        --------
        >>> GroupSpec(attributes={"a": 1}).like(GroupSpec(attributes={"a": 2}), exclude={"attributes"})
        True
        """
        return not diff(self, other, exclude=exclude)

    def diff(self, other: Any, *, exclude: Iterable[str] = ()) -> Diff:
        """What differs between this hierarchy and ``other`` (see :func:`zarr_dask.zom.diff`)."""
        return diff(self, other, exclude=exclude)

    @classmethod
    def json_schema(cls, zarr_format: ZarrFormat = 3) -> dict[str, Any]:
        """The JSON Schema of a group node with nested members (ZEP 6, corrected)."""
        return json_schema(zarr_format, "group")

    @classmethod
    def from_store(
        cls,
        store: Any,
        *,
        path: str = "",
        depth: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        use_consolidated: bool | None = None,
    ) -> GroupSpec:
        """Read a whole hierarchy (see :func:`zarr_dask.zom.io.from_store`).

        Consolidated metadata, when present, gives everything in one read; otherwise one listing per group
        and level (concurrent on remote stores) plus one batched read of the documents per level.

        Examples
        --------
        >>> import zarr_dask
        >>> _ = GroupSpec(members={"a": GroupSpec(attributes={"k": 1})}).to_store("memory://zom-from-store-gs")
        >>> GroupSpec.from_store("memory://zom-from-store-gs")["a"].attributes
        {'k': 1}
        >>> GroupSpec.from_store("memory://zom-from-store-gs", depth=0).members is None
        True
        >>> zarr_dask.open_store("memory://zom-from-store-gs").delete_prefix("")
        """
        spec: GroupSpec = port("read_group")(
            store, path=path, depth=depth, storage_options=storage_options, use_consolidated=use_consolidated
        )
        return spec

    def to_store(
        self,
        store: Any,
        *,
        path: str = "",
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        consolidated: bool = False,
    ) -> WriteReport:
        """Create the whole hierarchy at ``path``: every document written once, in one concurrent batch.

        Idempotent: documents already there with the same content are not rewritten (a re-run writes
        nothing).  Existing nodes that differ are refused -- before anything is written -- with an error that
        lists every conflict, unless ``overwrite=True``.  See :func:`zarr_dask.zom.write.write_spec`.

        Examples
        --------
        >>> spec = GroupSpec(attributes={"title": "t"}, members={"g": GroupSpec()})
        >>> spec.to_store("memory://zom-to-store-gs").written
        ('g/zarr.json', 'zarr.json')
        >>> spec.to_store("memory://zom-to-store-gs").unchanged
        ('', 'g')
        >>> import zarr_dask; zarr_dask.open_store("memory://zom-to-store-gs").delete_prefix("")
        """
        report: WriteReport = port("write_spec")(
            self, store, path=path, overwrite=overwrite, storage_options=storage_options, consolidated=consolidated
        )
        return report


Node: TypeAlias = ArraySpec | GroupSpec


def from_json(obj: Any, *, _path: str = "") -> Node:
    """Parse ZEP 6 JSON (an array or a group with nested members) into an :class:`ArraySpec`/:class:`GroupSpec`.

    Raises
    ------
    MetadataError, InvalidPathError
        The message starts with the node path (``"node '/a/b': ..."``).

    Examples
    --------
    >>> from_json('{"zarr_format": 2, "attributes": {}, "members": {}}')
    GroupSpec(zarr_format=2, attributes={}, members={}, implicit=False, extra_fields={})
    """
    doc = document(obj, "the ZEP 6 JSON")
    try:
        if is_array_document(doc):
            return ArraySpec(metadata=array_metadata(doc))
        return _group_from_json(doc, _path)
    except ZarrDaskError as e:
        if e.problem.startswith("node '"):
            raise
        raise prefixed(e, f"node {'/' + _path!r}") from None


def _group_from_json(doc: dict[str, Any], path: str) -> GroupSpec:
    fmt = doc.get("zarr_format")
    if fmt not in (2, 3) or isinstance(fmt, bool):
        raise MetadataError(f"field 'zarr_format' must be 2 or 3, got {fmt!r}")
    if fmt == 3 and doc.get("node_type") != "group":
        raise MetadataError(f"field 'node_type' must be 'array' or 'group', got {doc.get('node_type')!r}")
    known = _V3_GROUP_KEYS if fmt == 3 else _V2_GROUP_KEYS
    extra = {_unescape(k): v for k, v in doc.items() if k not in known and k != "consolidated_metadata"}
    if fmt == 2 and extra:
        raise MetadataError(f"unexpected key(s) {sorted(extra)} in a v2 group; it holds attributes and members")
    for key, value in extra.items():
        if not isinstance(value, dict) or value.get("must_understand") is not False:
            raise UnknownExtensionError(
                f"unknown field {key!r}: the group uses an extension zarr_dask does not support (only objects "
                'with "must_understand": false may be ignored)'
            )
    members = doc.get("members", {})
    if members is not None and not isinstance(members, dict):
        raise MetadataError(f"field 'members' must be an object or null, got {members!r}")
    parsed = None
    if members is not None:
        parsed = {name: from_json(m, _path=f"{path}/{name}" if path else str(name)) for name, m in members.items()}
    attributes = doc.get("attributes", {})
    return GroupSpec(
        zarr_format=fmt,
        attributes={} if attributes is None else attributes,
        members=parsed,
        implicit=doc.get("implicit", False),
        extra_fields=extra,
    )


# ------------------------------------------------------------------ format conversion and the flat form
def _to_format(node: GroupSpec, path: str, fmt: ZarrFormat, keys: Literal["v2", "default"]) -> GroupSpec:
    """Every node of a hierarchy in format ``fmt`` (:mod:`zarr_dask.zom.v2_to_v3`); node paths named in errors."""
    if node.zarr_format != fmt and fmt == 2:
        raise MetadataError("converting Zarr v3 specs to v2 is not supported; keep the hierarchy in v3")
    members: dict[str, ArraySpec | GroupSpec] | None = None
    if node.members is not None:
        members = {}
        for name, child in node.members.items():
            child_path = f"{path}/{name}" if path else name
            if isinstance(child, GroupSpec):
                members[name] = _to_format(child, child_path, fmt, keys)
                continue
            try:
                members[name] = ArraySpec(metadata=array_to_format(child.metadata, fmt, chunk_key_encoding=keys))
            except ZarrDaskError as e:
                raise prefixed(e, f"node {'/' + child_path!r}") from None
    return GroupSpec(zarr_format=fmt, attributes=node.attributes, members=members, implicit=node.implicit,
                     extra_fields=node.extra_fields if fmt == node.zarr_format else {})  # fmt: skip


def tree_from_flat(data: Mapping[str, Any]) -> GroupSpec:
    """The tree of a flat form (see :meth:`GroupSpec.from_flat`)."""
    if not isinstance(data, Mapping):
        raise MetadataError(f"the flat form must be a mapping of path -> node, got {type(data).__name__}")
    nodes: dict[str, Node] = {}
    spelled: dict[str, str] = {}
    for key, value in data.items():
        try:
            path = normalize_path(key)
        except ZarrDaskError as e:
            raise e.with_context(path=str(key)) from None
        if path in nodes:
            raise MetadataError(
                f"the flat form has two entries for node {'/' + path!r} ({spelled[path]!r} and {key!r}); "
                "keep one node per path"
            )
        node = value if isinstance(value, ArraySpec | GroupSpec) else from_json(value, _path=path)
        if isinstance(node, GroupSpec) and node.members:
            raise MetadataError(
                f"flat entry {key!r} is a group with members; in the flat form every node has its own entry and "
                "groups have members=None (use GroupSpec.from_json for nested members)"
            )
        nodes[path] = node
        spelled[path] = str(key)
    root = nodes.get("")
    if isinstance(root, ArraySpec):
        raise MetadataError("the flat form's root ('') is an array; GroupSpec.from_flat needs a group root")
    formats = {n.zarr_format for n in nodes.values()}
    if len(formats) > 1:
        raise MetadataError(f"the flat form mixes Zarr formats {sorted(formats)}; use one format per hierarchy")
    fmt: Literal[2, 3] = 3 if not formats else (3 if 3 in formats else 2)
    return build_tree(nodes, fmt, unknown=set())


def build_tree(nodes: Mapping[str, Node], zarr_format: Literal[2, 3], *, unknown: set[str]) -> GroupSpec:
    """A tree from ``{relative path: node}`` (``""`` = root, missing groups implicit); groups whose path is in
    ``unknown`` get ``members=None``, other leaf groups ``members={}``.

    Raises
    ------
    MetadataError
        A node below an array.
    """
    children: dict[str, list[str]] = {}
    for path in nodes:
        while path:
            parent, _, _ = path.rpartition("/")
            kids = children.setdefault(parent, [])
            if path in kids:
                break
            kids.append(path)
            path = parent
    for parent in children:
        if isinstance(nodes.get(parent), ArraySpec):
            below = sorted(children[parent])[0]
            raise MetadataError(f"node {'/' + below!r} lies below {'/' + parent!r}, which is an array; arrays have no members")

    def make(path: str) -> Node:
        node = nodes.get(path)
        if isinstance(node, ArraySpec):
            return node
        if node is None:
            node = GroupSpec(zarr_format=zarr_format, implicit=True)
        if path in unknown and path not in children:
            return dataclasses.replace(node, members=None)
        members = {kid.rpartition("/")[2]: make(kid) for kid in sorted(children.get(path, []))}
        return dataclasses.replace(node, members=members)

    root = make("")
    if not isinstance(root, GroupSpec):  # excluded by the callers
        raise MetadataError("the root of a hierarchy must be a group")
    return root
