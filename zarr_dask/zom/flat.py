"""The flat form of a hierarchy (``{path: node}``) back into a tree; shared by ``from_flat`` and the readers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from zarr_dask.errors import MetadataError, ZarrDaskError
from zarr_dask.spec.paths import normalize_path
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node, from_json

__all__ = ["build_tree", "tree_from_flat"]


def tree_from_flat(data: Mapping[str, Any]) -> GroupSpec:
    """See :meth:`GroupSpec.from_flat`."""
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
