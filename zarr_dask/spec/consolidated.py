"""Consolidated metadata: the metadata of every node below a group, gathered in one document.

* v2: a separate ``.zmetadata`` document next to the group's ``.zgroup``::

      {"metadata": {".zgroup": {...}, ".zattrs": {...}, "a/.zattrs": {...}, "a/.zarray": {...}},
       "zarr_consolidated_format": 1}

* v3: an inline ``consolidated_metadata`` object inside the group's ``zarr.json``; keys are flat relative
  paths and nested group entries carry an empty inner ``consolidated_metadata``.

Both parse into :class:`ConsolidatedMetadata`, a flat ``{relative path: metadata}`` mapping.  Keys come from
the store, so every one is re-validated with :func:`~zarr_dask.spec.paths.normalize_path` (``..`` and other
unsafe forms are errors) and must already be in normal form.  The documents written are byte-identical to
those of zarr-python's ``consolidate_metadata`` (same key order; v2 ``.zmetadata`` on one line, including
zarr-python 3's empty ``consolidated_metadata`` object inside nested ``.zgroup`` entries, which v2 readers
ignore).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from zarr_dask.errors import InvalidPathError, MetadataError, UnknownExtensionError, ZarrDaskError
from zarr_dask.spec.json import JsonEquality, dumps, prefixed, require_object
from zarr_dask.spec.paths import normalize_path, parent_paths
from zarr_dask.spec.v2 import ArrayMetadataV2, GroupMetadataV2
from zarr_dask.spec.v3 import ArrayMetadataV3, GroupMetadataV3

__all__ = ["ConsolidatedMetadata", "NodeMetadata", "parse_consolidated_v2", "parse_consolidated_v3"]

NodeMetadata = ArrayMetadataV2 | ArrayMetadataV3 | GroupMetadataV2 | GroupMetadataV3

_V2_DOCS = (".zarray", ".zgroup", ".zattrs")
_ZP_V2_GROUP_QUIRK = {"metadata": {}, "must_understand": False, "kind": "inline"}


def _check_key(key: Any, where: str) -> str:
    if not isinstance(key, str):
        raise InvalidPathError(f"{where}: key {key!r} is not a string")
    try:
        normal = normalize_path(key)
    except InvalidPathError as e:
        raise InvalidPathError(f"{where}: key {key!r} is not a safe node path: {e.problem}") from None
    if normal != key or not key:
        raise InvalidPathError(
            f"{where}: key {key!r} is not a normalised relative node path (expected {normal!r}); "
            "rebuild the consolidated metadata"
        )
    return key


def _sort_key(path: str) -> tuple[int, str, str]:
    return (path.count("/"), unicodedata.normalize("NFKC", path).casefold(), path)


def _is_array(node: NodeMetadata) -> bool:
    return isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)


@dataclass(frozen=True, kw_only=True, eq=False)
class ConsolidatedMetadata(JsonEquality):
    """Metadata of all nodes below a group: ``nodes`` maps relative paths (``"a"``, ``"a/b"``) to metadata.

    The mapping is flat (v3 group entries have ``consolidated_metadata=None``); the consolidating group
    itself is not in it.  Build one from discovered nodes with :meth:`from_nodes`.

    Examples
    --------
    >>> cm = ConsolidatedMetadata.from_nodes(2, {"sub": GroupMetadataV2(attributes={"a": 1})})
    >>> cm.to_v2_document(root=GroupMetadataV2())[:82]
    b'{"metadata": {".zgroup": {"zarr_format": 2}, ".zattrs": {}, "sub/.zattrs": {"a": 1'
    """

    zarr_format: Literal[2, 3]
    nodes: dict[str, NodeMetadata] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.zarr_format not in (2, 3):
            raise MetadataError(f"zarr_format must be 2 or 3, got {self.zarr_format!r}")
        if not isinstance(self.nodes, Mapping):
            raise MetadataError(f"nodes must be a mapping of relative path -> metadata, got {self.nodes!r}")
        object.__setattr__(self, "nodes", dict(self.nodes))
        for key, node in self.nodes.items():
            _check_key(key, "consolidated metadata")
            if not isinstance(node, NodeMetadata) or node.zarr_format != self.zarr_format:
                raise MetadataError(
                    f"consolidated metadata entry {key!r} must be Zarr v{self.zarr_format} node metadata, got {node!r}"
                )
            if isinstance(node, GroupMetadataV3) and node.consolidated_metadata is not None:
                raise MetadataError(
                    f"consolidated metadata entry {key!r} holds nested consolidated metadata; "
                    "build the flat mapping with ConsolidatedMetadata.from_nodes"
                )
        for key in self.nodes:
            for parent in parent_paths(key)[1:]:
                ancestor = self.nodes.get(parent)
                if ancestor is not None and _is_array(ancestor):
                    raise MetadataError(
                        f"consolidated metadata lists {key!r} below {parent!r}, which is an array; "
                        "arrays have no children"
                    )

    # ------------------------------------------------------------------ building and navigating
    @classmethod
    def from_nodes(
        cls, zarr_format: Literal[2, 3], nodes: Mapping[str, NodeMetadata]
    ) -> ConsolidatedMetadata:
        """Build from ``{relative path: metadata}`` (paths are normalised; nested v3 consolidated metadata
        of groups is flattened into the mapping).

        Raises
        ------
        InvalidPathError
            For an unsafe path, or ``""`` (the consolidating group is not one of its members).
        MetadataError
            For two paths that normalise to the same one, or metadata of the other Zarr format.
        """
        flat: dict[str, NodeMetadata] = {}
        for key, node in nodes.items():
            path = normalize_path(key)
            if not path:
                raise InvalidPathError(
                    "consolidated metadata cannot hold the consolidating group itself (path '')"
                )
            _add(flat, path, node, "from_nodes")
        return cls(zarr_format=zarr_format, nodes=flat)

    def subtree(self, path: str) -> ConsolidatedMetadata:
        """The consolidated metadata of the group at relative ``path`` (keys re-rooted at that group)."""
        p = normalize_path(path)
        if not p:
            return self
        node = self.nodes.get(p)
        if node is not None and _is_array(node):
            raise MetadataError(f"{p!r} is an array in the consolidated metadata, not a group")
        prefix = p + "/"
        return replace(
            self, nodes={k[len(prefix) :]: v for k, v in self.nodes.items() if k.startswith(prefix)}
        )

    def children(self, path: str = "") -> dict[str, NodeMetadata]:
        """Direct members of the group at relative ``path``: ``{name: metadata}``."""
        p = normalize_path(path)
        prefix = p + "/" if p else ""
        return {
            k[len(prefix) :]: v
            for k, v in self.nodes.items()
            if k.startswith(prefix) and "/" not in k[len(prefix) :]
        }

    # ------------------------------------------------------------------ writing
    def _sorted(self) -> list[tuple[str, NodeMetadata]]:
        return sorted(self.nodes.items(), key=lambda kv: _sort_key(kv[0]))

    def to_json(self, root: GroupMetadataV2 | None = None) -> dict[str, Any]:
        """v3: the inline ``consolidated_metadata`` object; v2: the ``.zmetadata`` object (see
        :meth:`to_v2_document`; ``root`` is the consolidating group, written as ``.zgroup``/``.zattrs``)."""
        if self.zarr_format == 2:
            return self._zmetadata_json(root)
        metadata: dict[str, Any] = {}
        for key, node in self._sorted():
            if isinstance(node, GroupMetadataV3):
                node = replace(node, consolidated_metadata=ConsolidatedMetadata(zarr_format=3))
            metadata[key] = node.to_json()
        return {"kind": "inline", "must_understand": False, "metadata": metadata}

    def _zmetadata_json(self, root: GroupMetadataV2 | None) -> dict[str, Any]:
        docs: dict[str, Any] = {}
        if root is not None:
            docs[".zgroup"] = root.to_json()
            docs[".zattrs"] = root.attributes
        for key, node in self._sorted():
            if not isinstance(node, ArrayMetadataV2 | GroupMetadataV2):  # excluded by __post_init__
                raise MetadataError(f"entry {key!r} is not Zarr v2 metadata")
            docs[f"{key}/.zattrs"] = node.attributes
            if isinstance(node, ArrayMetadataV2):
                docs[f"{key}/.zarray"] = node.to_json()
            else:  # zarr-python 3 adds an (empty, meaningless) inline consolidated_metadata here; readers ignore it
                docs[f"{key}/.zgroup"] = {**node.to_json(), "consolidated_metadata": _ZP_V2_GROUP_QUIRK}
        return {"metadata": docs, "zarr_consolidated_format": 1}

    def to_v2_document(self, root: GroupMetadataV2 | None = None) -> bytes:
        """The bytes of the v2 ``.zmetadata`` document (single line, as zarr-python writes it).

        Parameters
        ----------
        root
            The consolidating group; zarr-python always includes its ``.zgroup`` and ``.zattrs``.
        """
        if self.zarr_format != 2:
            raise MetadataError(
                "v3 consolidated metadata lives inside the group's zarr.json; "
                "use GroupMetadataV3(consolidated_metadata=...).to_documents()"
            )
        return dumps(self._zmetadata_json(root), indent=None, where=".zmetadata")

    def to_documents(self, root: GroupMetadataV2 | None = None) -> dict[str, bytes]:
        """v2 only: ``{".zmetadata": bytes}`` (see :meth:`to_v2_document`)."""
        return {".zmetadata": self.to_v2_document(root)}

    def _json_key(self) -> Any:
        return [self.zarr_format, [[k, v._json_key()] for k, v in self._sorted()]]


def _add(flat: dict[str, NodeMetadata], path: str, node: NodeMetadata, where: str) -> None:
    """Insert ``node`` at ``path``, flattening nested v3 consolidated metadata."""
    if isinstance(node, GroupMetadataV3) and node.consolidated_metadata is not None:
        inner = node.consolidated_metadata.nodes
        node = replace(node, consolidated_metadata=None)
        for sub, sub_node in inner.items():
            _add(flat, f"{path}/{sub}", sub_node, where)
    existing = flat.get(path)
    if existing is not None and existing != node:
        raise MetadataError(f"{where}: two different metadata documents for {path!r}")
    flat[path] = node


def parse_consolidated_v2(obj: Any, *, skipped: dict[str, ZarrDaskError] | None = None) -> ConsolidatedMetadata:
    """Parse a decoded v2 ``.zmetadata`` document.

    The consolidating group's own ``.zgroup``/``.zattrs`` entries are ignored (as zarr-python does: they
    are read from their own documents).  zarr-python 3's extra ``consolidated_metadata`` key in nested
    ``.zgroup`` entries is tolerated, and so is the missing ``zarr_consolidated_format`` of kerchunk's parquet
    references (a ``.zmetadata`` with ``metadata`` and ``record_size``), which xarray's engine opens too.

    ``skipped``: when given, an array entry that does not parse (a data type or codec this installation
    cannot read) is recorded there under its path and left out, instead of failing the whole document
    (readers open the other nodes and say which was left out).

    Raises
    ------
    MetadataError, InvalidPathError
        For a malformed document, an unsafe or non-normalised key, or an invalid entry (named).
    """
    doc = require_object(obj, ".zmetadata")
    fmt = doc.get("zarr_consolidated_format")
    if fmt is None and "record_size" in doc:
        fmt = 1  # kerchunk's parquet references: their .zmetadata holds the documents and the record size only
    if type(fmt) is not int or fmt != 1:
        raise MetadataError(f".zmetadata field 'zarr_consolidated_format' must be 1, got {fmt!r}")
    entries = require_object(doc.get("metadata"), ".zmetadata field 'metadata'")
    per_path: dict[str, dict[str, Any]] = {}
    for key, value in entries.items():
        path, _, name = str(key).rpartition("/")
        if name not in _V2_DOCS:
            raise MetadataError(
                f".zmetadata key {key!r} does not name a .zarray, .zgroup or .zattrs document"
            )
        if path:
            _check_key(path, ".zmetadata")
            per_path.setdefault(path, {})[name] = value
    nodes: dict[str, NodeMetadata] = {}
    for path, docs in per_path.items():
        try:
            nodes[path] = _v2_node(path, docs)
        except ZarrDaskError as e:
            if skipped is None or ".zarray" not in docs:
                raise
            skipped[path] = e
    return ConsolidatedMetadata(zarr_format=2, nodes=nodes)


def _v2_node(path: str, docs: dict[str, Any]) -> NodeMetadata:
    try:
        if ".zarray" in docs and ".zgroup" in docs:
            raise MetadataError("has both a .zarray and a .zgroup document")
        if ".zarray" in docs:
            return ArrayMetadataV2.from_json(docs[".zarray"], docs.get(".zattrs"))
        if ".zgroup" in docs:
            zgroup = docs[".zgroup"]
            if isinstance(zgroup, dict) and "consolidated_metadata" in zgroup:  # zarr-python 3 writes this
                zgroup = {k: v for k, v in zgroup.items() if k != "consolidated_metadata"}
            return GroupMetadataV2.from_json(zgroup, docs.get(".zattrs"))
        raise MetadataError("has a .zattrs document but neither .zarray nor .zgroup")
    except ZarrDaskError as e:
        raise prefixed(e, f"consolidated metadata entry {path!r}") from e


def parse_consolidated_v3(obj: Any, *, skipped: dict[str, ZarrDaskError] | None = None) -> ConsolidatedMetadata:
    """Parse the inline v3 ``consolidated_metadata`` object of a group's ``zarr.json``.

    ``skipped``: as for :func:`parse_consolidated_v2` (array entries that do not parse are recorded there).

    Raises
    ------
    MetadataError, InvalidPathError
        For a malformed object, an unsafe or non-normalised key, or an invalid entry (named).
    UnknownExtensionError
        For a ``kind`` other than ``"inline"`` (or an entry using an unsupported extension).
    """
    doc = require_object(obj, "consolidated_metadata")
    extra = sorted(set(doc) - {"kind", "must_understand", "metadata"})
    if extra:
        raise MetadataError(f"consolidated_metadata has unexpected key(s) {extra}")
    if doc.get("kind") != "inline":
        raise UnknownExtensionError(
            f"consolidated_metadata kind {doc.get('kind')!r} is not supported; zarr_dask reads kind 'inline'"
        )
    if not isinstance(doc.get("must_understand", False), bool):
        raise MetadataError(
            f"consolidated_metadata.must_understand must be a boolean, got {doc['must_understand']!r}"
        )
    entries = require_object(doc.get("metadata"), "consolidated_metadata.metadata")
    flat: dict[str, NodeMetadata] = {}
    for key, value in entries.items():
        path = _check_key(key, "consolidated_metadata")
        try:
            node = _v3_node(path, value)
        except ZarrDaskError as e:
            if skipped is None or not (isinstance(value, dict) and value.get("node_type") == "array"):
                raise
            skipped[path] = e
            continue
        _add(flat, path, node, "consolidated_metadata")
    return ConsolidatedMetadata(zarr_format=3, nodes=flat)


def _v3_node(path: str, value: Any) -> NodeMetadata:
    try:
        entry = require_object(value, "the entry")
        if entry.get("zarr_format") != 3:
            raise MetadataError(f"field 'zarr_format' must be 3, got {entry.get('zarr_format')!r}")
        if entry.get("node_type") == "array":
            return ArrayMetadataV3.from_json(entry)
        return GroupMetadataV3.from_json(entry)
    except ZarrDaskError as e:
        raise prefixed(e, f"consolidated metadata entry {path!r}") from e
