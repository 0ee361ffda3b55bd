"""Compare two hierarchies node by node and field by field: :func:`diff` and its :class:`Diff` report."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from zarr_dask.errors import MetadataError
from zarr_dask.spec.json import canonical_json, to_jsonable
from zarr_dask.zom.tree import is_group, iter_nodes, port

__all__ = ["MISSING", "Diff", "Difference", "diff", "node_differences"]

_WIDTH = 48


class _Missing:
    """The value of a field (or node) that one side does not have."""

    def __repr__(self) -> str:
        return "(missing)"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, kw_only=True)
class Difference:
    """One difference: at node ``path`` (``"/"``, ``"/a/b"``), ``field`` has ``left`` on one side and ``right``
    on the other.  ``field`` is a metadata field (``"shape"``), ``"attributes.<name>"`` for one attribute, or
    ``"node"`` for a node that exists on one side only (the values are then ``"array"`` / ``"group"`` /
    :data:`MISSING`)."""

    path: str
    field: str
    left: Any
    right: Any

    def __str__(self) -> str:
        return f"{self.path}  {self.field}: {_show(self.left)} != {_show(self.right)}"


@dataclass(frozen=True)
class Diff:
    """The differences between two hierarchies; falsy when there are none, prints as a table.

    Examples
    --------
    >>> from zarr_dask.zom import GroupSpec
    >>> d = diff(GroupSpec(attributes={"title": "a"}), GroupSpec(attributes={"title": "b"}))
    >>> bool(d), len(d)
    (True, 1)
    >>> print(d)
    path  field             left  right
    /     attributes.title  "a"   "b"
    """

    differences: tuple[Difference, ...] = ()
    labels: tuple[str, str] = ("left", "right")

    def __bool__(self) -> bool:
        return bool(self.differences)

    def __len__(self) -> int:
        return len(self.differences)

    def __iter__(self) -> Iterator[Difference]:
        return iter(self.differences)

    def __getitem__(self, index: int) -> Difference:
        return self.differences[index]

    def __str__(self) -> str:
        return self.table(*self.labels)

    def table(self, left: str = "left", right: str = "right") -> str:
        """The report as aligned columns ``path field <left> <right>`` (``"no differences"`` if empty)."""
        if not self.differences:
            return "no differences"
        rows = [("path", "field", left, right)]
        rows += [(d.path, f, _show(a), _show(b)) for d in self.differences for f, a, b in _narrowed(d)]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)) + "  " + r[3] for r in rows
        )

    def to_json(self) -> list[dict[str, Any]]:
        """The differences as JSON objects (``MISSING`` becomes ``null`` with ``"left_missing": true``...)."""
        out = []
        for d in self.differences:
            item: dict[str, Any] = {"path": d.path, "field": d.field}
            for side, value in (("left", d.left), ("right", d.right)):
                item[side] = None if value is MISSING else to_jsonable(value)
                if value is MISSING:
                    item[f"{side}_missing"] = True
            out.append(item)
        return out


def _narrowed(d: Difference) -> list[tuple[str, Any, Any]]:
    """The rows that show one difference: the parts of two JSON objects (or of two lists of one length) that
    differ, each under its field path, so that a table cell shows what differs rather than a cut-off prefix
    (``chunk_grid.configuration.chunk_shape  [10, 20]  [20, 20]``). Objects of another ``name`` (another
    codec, another grid) are shown whole."""
    if d.left is MISSING or d.right is MISSING:
        return [(d.field, d.left, d.right)]
    try:
        a, b = to_jsonable(d.left), to_jsonable(d.right)
    except (MetadataError, TypeError, ValueError):
        return [(d.field, d.left, d.right)]
    return _parts(d.field, a, b)


def _parts(field: str, a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict) and a.get("name") == b.get("name"):
        keys = [k for k in [*a, *(k for k in b if k not in a)] if (k in a) != (k in b) or canonical_json(a[k]) != canonical_json(b[k])]
        return [row for k in keys for row in _parts(f"{field}.{k}", a.get(k, MISSING), b.get(k, MISSING))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and a and not all(isinstance(x, int | float) for x in a):
        index = [i for i in range(len(a)) if canonical_json(a[i]) != canonical_json(b[i])]
        return [row for i in index for row in _parts(f"{field}[{i}]", a[i], b[i])]
    return [(field, a, b)]


def _show(value: Any) -> str:
    if value is MISSING:
        return "(missing)"
    try:
        text = json.dumps(to_jsonable(value), allow_nan=True, separators=(", ", ": "))
    except (MetadataError, TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _as_spec(obj: Any) -> Any:
    """A spec, or the spec read from a zarr_dask ``Array`` / ``Group`` (its store and path)."""
    store, path = getattr(obj, "store", None), getattr(obj, "path", None)
    if store is not None and isinstance(path, str) and getattr(obj, "metadata", None) is not None:
        return port("read_node")(store, path=path)
    if hasattr(obj, "to_json") and hasattr(obj, "zarr_format") and (is_group(obj) or hasattr(obj, "metadata")):
        return obj
    raise MetadataError(f"cannot compare {type(obj).__name__}: pass an ArraySpec, a GroupSpec or a zarr_dask node")


def _kind(node: Any) -> Any:
    if node is None:
        return MISSING
    if not is_group(node):
        return "array"
    return "implicit group" if node.implicit else "group"


def _fields(node: Any) -> dict[str, Any]:
    doc: dict[str, Any] = node.to_json()
    for key in ("members", "implicit", "zarr_format", "node_type"):
        doc.pop(key, None)
    return doc


def node_differences(path: str, left: Any, right: Any) -> list[Difference]:
    """The differences between two single nodes (members are not compared)."""
    shown = "/" + path
    if left is None or right is None or is_group(left) != is_group(right):
        return [Difference(path=shown, field="node", left=_kind(left), right=_kind(right))]
    if left.zarr_format != right.zarr_format:
        return [Difference(path=shown, field="zarr_format", left=left.zarr_format, right=right.zarr_format)]
    out = []
    if _kind(left) != _kind(right):
        out.append(Difference(path=shown, field="node", left=_kind(left), right=_kind(right)))
    a, b = _fields(left), _fields(right)
    for key in [*a, *(k for k in b if k not in a)]:
        if key == "attributes":
            out += _attribute_differences(shown, a.get(key, {}), b.get(key, {}))
        elif canonical_json(a.get(key, None)) != canonical_json(b.get(key, None)) or (key in a) != (key in b):
            out.append(Difference(path=shown, field=key, left=a.get(key, MISSING), right=b.get(key, MISSING)))
    return out


def _attribute_differences(path: str, a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    out = []
    for key in [*a, *(k for k in b if k not in a)]:
        if key not in a or key not in b or canonical_json(a[key]) != canonical_json(b[key]):
            out.append(Difference(path=path, field=f"attributes.{key}", left=a.get(key, MISSING),
                                  right=b.get(key, MISSING)))  # fmt: skip
    return out


def _structural_change(a: Any, b: Any) -> bool:
    """Nothing below is compared: a node missing, array vs group, other format, or members unknown."""
    if a is None or b is None or is_group(a) != is_group(b) or a.zarr_format != b.zarr_format:
        return True
    return any(is_group(n) and n.members is None for n in (a, b))


def _excluded(field: str, exclude: frozenset[str]) -> bool:
    return any(field == e or field.startswith(e + ".") for e in exclude)


def diff(left: Any, right: Any, *, exclude: Iterable[str] = ()) -> Diff:
    """What differs between two hierarchies (or arrays): one row per node and field.

    Parameters
    ----------
    left, right
        :class:`ArraySpec` / :class:`GroupSpec`, or zarr_dask ``Array`` / ``Group`` objects (read with
        :func:`zarr_dask.zom.io.from_store`).
    exclude
        Fields to ignore at every node: ``"attributes"`` (all attributes), ``"attributes.history"`` (one),
        ``"shape"``, ``"codecs"``, ``"node"`` (nodes present on one side only), ``"members"`` (compare the
        top nodes only).

    Returns
    -------
    Diff
        Falsy when the hierarchies agree.  Below a group whose ``members`` are unknown (``None``) on either
        side, nothing is compared.  Below nodes of different kinds or formats, nothing more is reported.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.zom import ArraySpec, GroupSpec
    >>> a = GroupSpec(members={"x": ArraySpec.from_array(np.zeros(3, "f4"))})
    >>> b = GroupSpec(members={"x": ArraySpec.from_array(np.zeros(4, "f4"), chunks=(3,)), "y": GroupSpec()})
    >>> print(diff(a, b))
    path  field  left       right
    /x    shape  [3]        [4]
    /y    node   (missing)  "group"
    >>> bool(diff(a, b, exclude={"shape", "node"}))
    False
    """
    excluded = frozenset(exclude)
    a_nodes = dict(iter_nodes(_as_spec(left)))
    b_nodes = dict(iter_nodes(_as_spec(right)))
    paths = [*a_nodes, *(p for p in b_nodes if p not in a_nodes)]
    blocked: list[str] = []  # subtrees not compared: members unknown, kind/format changed, "members" excluded
    out: list[Difference] = []
    for path in paths:
        if any(path.startswith(top + "/") or (top == "" and path) for top in blocked):
            continue
        a, b = a_nodes.get(path), b_nodes.get(path)
        out += [d for d in node_differences(path, a, b) if not _excluded(d.field, excluded)]
        if "members" in excluded or _structural_change(a, b):
            blocked.append(path)
    return Diff(tuple(out))
