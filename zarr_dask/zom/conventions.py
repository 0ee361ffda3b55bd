"""Conventions as plain functions: the value-dependent checks that static types cannot express (ZEP 6).

:func:`xarray` checks what xarray's Zarr backend needs: every group is a dataset (its arrays are the
variables) and nested groups form a DataTree.  Each problem says where it is, what xarray would do, and how to
fix it.  :func:`require` turns problems into one error.

A checker reports what it was asked to find rather than failing on it: given the ZEP 6 JSON of a hierarchy
(a dict or JSON text) or a stored hierarchy (a URL, a path, a Store) instead of a spec, a node whose document
is invalid (``dimension_names`` of the wrong length, a bad fill value, chunk grid or data type...) is one
problem of that node, and the other nodes are checked as usual.
"""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from zarr_dask.errors import MetadataError, ZarrDaskError
from zarr_dask.spec.paths import validate_node_name
from zarr_dask.store import Store
from zarr_dask.zom.array import document, is_array_document
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node
from zarr_dask.zom.stored import stored_json

__all__ = ["Problem", "ProblemKind", "require", "xarray"]

ProblemKind = Literal[
    "missing_dimensions",
    "invalid_dimensions",
    "dimension_count",
    "dimension_size_conflict",
    "coordinate_dimensions",
    "tree_alignment",
    "fill_value_encoding",
    "ignored_attribute",
    "invalid_metadata",
]


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One convention problem: the node ``path`` (``"/"``, ``"/a/temp"``), its ``kind`` and an actionable
    ``message``."""

    path: str
    kind: ProblemKind
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _path(prefix: str, name: str) -> str:
    return f"{prefix.rstrip('/')}/{name}"


def _suggest(ndim: int) -> list[str]:
    return [f"dim_{i}" for i in range(ndim)]


def _v2_dims(path: str, spec: ArraySpec) -> tuple[tuple[str, ...] | None, list[Problem]]:
    dims = spec.attributes.get("_ARRAY_DIMENSIONS")
    if dims is None:
        return None, [Problem(path=path, kind="missing_dimensions", message=(
            "the array has no _ARRAY_DIMENSIONS attribute, so xarray cannot name its dimensions (KeyError on "
            f"open); add attributes['_ARRAY_DIMENSIONS'] = {_suggest(spec.ndim)!r} (one name per dimension)"))]  # fmt: skip
    if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims):
        return None, [Problem(path=path, kind="invalid_dimensions", message=(
            f"_ARRAY_DIMENSIONS must be a list of {spec.ndim} strings, got {dims!r}; e.g. "
            f"{_suggest(spec.ndim)!r}"))]  # fmt: skip
    if len(dims) != spec.ndim:
        return None, [Problem(path=path, kind="dimension_count", message=(
            f"_ARRAY_DIMENSIONS {dims!r} names {len(dims)} dimension(s) but the array has {spec.ndim} (shape "
            f"{list(spec.shape)}); give exactly one name per dimension"))]  # fmt: skip
    return tuple(dims), []


def _v3_dims(path: str, spec: ArraySpec) -> tuple[tuple[str, ...] | None, list[Problem]]:
    names = spec.dimension_names
    problems = []
    legacy = spec.attributes.get("_ARRAY_DIMENSIONS")
    if legacy is not None:
        problems.append(Problem(path=path, kind="ignored_attribute", message=(
            f"the attribute _ARRAY_DIMENSIONS {legacy!r} is ignored by xarray for Zarr v3 arrays, which use "
            "the dimension_names field; set dimension_names and drop the attribute")))  # fmt: skip
    if spec.ndim and (names is None or any(n is None for n in names)):
        hint = legacy if isinstance(legacy, list) and len(legacy) == spec.ndim else _suggest(spec.ndim)
        what = "no dimension_names" if names is None else f"unnamed dimensions in dimension_names {list(names)!r}"
        problems.append(Problem(path=path, kind="missing_dimensions", message=(
            f"the array has {what}, so xarray cannot name its dimensions (KeyError on open); set "
            f"dimension_names={hint!r}, e.g. spec.replace(dimension_names={hint!r})")))  # fmt: skip
        return None, problems
    return (tuple(str(n) for n in names) if names is not None else ()), problems


def _fill_value_problem(path: str, spec: ArraySpec) -> list[Problem]:
    value = spec.attributes.get("_FillValue")
    if spec.zarr_format != 3 or spec.dtype.kind not in "fc" or not isinstance(value, int | float) or isinstance(value, bool):
        return []
    encoded = base64.standard_b64encode(struct.pack("<d", float(value))).decode("ascii")
    return [Problem(path=path, kind="fill_value_encoding", message=(
        f"the _FillValue attribute {value!r} is a number, but for Zarr v3 float arrays xarray expects the base64 "
        f"of a little-endian float64 and fails with TypeError; write attributes['_FillValue'] = {encoded!r}"))]  # fmt: skip


def _group_problems(path: str, group: GroupSpec, inherited: dict[str, tuple[int, str]]) -> list[Problem]:
    problems: list[Problem] = []
    sizes: dict[str, tuple[int, str]] = {}
    coords: dict[str, tuple[int, str]] = {}
    for name, node in (group.members or {}).items():
        if not isinstance(node, ArraySpec):
            continue
        apath = _path(path, name)
        dims, found = (_v2_dims if node.zarr_format == 2 else _v3_dims)(apath, node)
        problems += found + _fill_value_problem(apath, node)
        if dims is None:
            continue
        if name in dims and dims != (name,):
            problems.append(Problem(path=apath, kind="coordinate_dimensions", message=(
                f"the array is named like its dimension {name!r} but has dimensions {list(dims)!r}; xarray reserves "
                f"that name for a 1-D coordinate along {name!r} (MissingDimensionsError); rename the array or the "
                "dimension")))  # fmt: skip
        elif dims == (name,):
            coords[name] = (node.shape[0], apath)
        for dim, size in zip(dims, node.shape, strict=True):
            first = sizes.setdefault(dim, (size, apath))
            if first[0] != size:
                problems.append(Problem(path=apath, kind="dimension_size_conflict", message=(
                    f"dimension {dim!r} has length {size} here but {first[0]} in {first[1]}; xarray needs one length "
                    "per dimension within a group (a dataset); fix the shapes or rename one of the dimensions")))  # fmt: skip
            elif dim in inherited and inherited[dim][0] != size:
                problems.append(Problem(path=apath, kind="tree_alignment", message=(
                    f"dimension {dim!r} has length {size} here but the coordinate {inherited[dim][1]} of an ancestor "
                    f"group has length {inherited[dim][0]}; xarray's DataTree requires groups to align with their "
                    "parents' coordinates; rename the dimension here or fix the lengths")))  # fmt: skip
    below = {**inherited, **coords}
    for name, node in (group.members or {}).items():
        if isinstance(node, GroupSpec):
            problems += _group_problems(_path(path, name), node, below)
    return problems


def _v3_dimension_count(path: str, doc: Mapping[str, Any]) -> Problem | None:
    """The ``dimension_count`` problem of a v3 array document whose ``dimension_names`` does not match its
    shape (a document the spec layer refuses), else None."""
    names, shape = doc.get("dimension_names"), doc.get("shape")
    if doc.get("zarr_format") != 3 or not isinstance(names, list) or not isinstance(shape, list) or len(names) == len(shape):
        return None
    return Problem(path=path, kind="dimension_count", message=(
        f"dimension_names {names!r} names {len(names)} dimension(s) but the array has {len(shape)} (shape "
        f"{shape}): the document is invalid and neither xarray nor Zarr readers open the array; give exactly one "
        f"name per dimension, e.g. dimension_names={_suggest(len(shape))!r}"))  # fmt: skip


def _invalid(path: str, error: ZarrDaskError) -> Problem:
    what = error.problem.removeprefix("node '/': ")  # the path is the problem's own
    return Problem(path=path, kind="invalid_metadata", message=(
        f"the node's metadata is invalid, so xarray (and every Zarr reader) fails to open it: {what}"))  # fmt: skip


def _lenient_array(path: str, doc: dict[str, Any]) -> tuple[Node | None, list[Problem]]:
    count = _v3_dimension_count(path, doc)
    try:
        if count is None:
            return ArraySpec.from_json(doc), []
        ArraySpec.from_json({k: v for k, v in doc.items() if k != "dimension_names"})
        return None, [count]  # the names are unusable: the node's other checks would only repeat it
    except ZarrDaskError as e:
        return None, ([count] if count else []) + [_invalid(path, e)]


def _lenient(path: str, obj: Any) -> tuple[Node | None, list[Problem]]:
    """The spec of the ZEP 6 JSON ``obj`` without its invalid nodes, and one problem per invalid node."""
    try:
        doc = document(obj, "a node's ZEP 6 JSON")
    except ZarrDaskError as e:
        return None, [_invalid(path, e)]
    if is_array_document(doc):
        return _lenient_array(path, doc)
    members, problems = doc.get("members"), []
    kids: dict[str, Node] | None = None
    if isinstance(members, Mapping):
        kids = {}
        for name, member in members.items():
            node, found = _lenient(_path(path, str(name)), member)
            problems += found
            if node is not None:
                kids[str(name)] = node
    try:
        group = GroupSpec.from_json({**doc, "members": None if kids is None else {}})
    except ZarrDaskError as e:
        return None, [_invalid(path, e), *problems]
    if kids is None:
        return group, problems
    good: dict[str, Node] = {}
    for name, node in kids.items():
        try:
            validate_node_name(name, group.zarr_format)
            if node.zarr_format != group.zarr_format:
                raise MetadataError(f"a Zarr v{node.zarr_format} node inside a Zarr v{group.zarr_format} group; "
                                    "convert it (zarr-dask convert) or change the group's zarr_format")  # fmt: skip
        except ZarrDaskError as e:
            problems.append(_invalid(_path(path, name), e))
            continue
        good[name] = node
    return replace(group, members=good), problems


def _checked(spec: Any) -> tuple[Node | None, list[Problem]]:
    if isinstance(spec, ArraySpec | GroupSpec):
        return spec, []
    if isinstance(spec, Mapping | bytes | bytearray) or (isinstance(spec, str) and spec.lstrip()[:1] in ("{", "[")):
        return _lenient("/", spec)
    if isinstance(spec, str | os.PathLike | Store):  # a stored hierarchy, document by document
        doc, hidden = stored_json(spec)
        node, problems = _lenient("/", doc)
        return node, [Problem(path=p, kind="invalid_metadata", message=why) for p, why in hidden] + problems
    raise MetadataError(
        f"xarray() checks an ArraySpec, a GroupSpec, ZEP 6 JSON (a dict or JSON text) or a stored hierarchy (a URL, "
        f"a path or a Store), got {type(spec).__name__}"
    )


def xarray(spec: Node | Mapping[str, Any] | str | bytes | os.PathLike[str] | Store) -> list[Problem]:
    """Check a hierarchy against xarray's Zarr encoding (every group a dataset, nested groups a DataTree).

    Flags: arrays without dimension names (``_ARRAY_DIMENSIONS`` in v2, ``dimension_names`` in v3), names that
    are not a list of strings, a name count that differs from ``ndim``, a dimension with two lengths in one
    group, an array named like one of its dimensions that is not that 1-D coordinate, a child group whose
    dimension disagrees with an ancestor's coordinate, a v3 float ``_FillValue`` attribute stored as a number,
    and a v3 ``_ARRAY_DIMENSIONS`` attribute (ignored by xarray).

    Parameters
    ----------
    spec
        A :class:`GroupSpec` (or a single :class:`ArraySpec`), the ZEP 6 JSON of one (a dict or JSON text), or
        a stored hierarchy (a URL, a local path or a :class:`~zarr_dask.store.Store`: its documents as stored).
        From JSON or a store, every node whose document is invalid is a problem of that node
        (``dimension_count`` for v3 ``dimension_names`` of the wrong length, ``invalid_metadata`` otherwise:
        a bad fill value, data type, chunk grid, a node inside an array...) and the others are checked.

    Returns
    -------
    list of Problem
        Empty when xarray can open the hierarchy as datasets.

    Examples
    --------
    >>> import numpy as np
    >>> tree = GroupSpec(members={
    ...     "temp": ArraySpec.from_array(np.zeros((2, 3)), dimension_names=["y", "x"]),
    ...     "mask": ArraySpec.from_array(np.zeros((2, 4), bool), dimension_names=["y", "x"])})
    >>> for p in xarray(tree):
    ...     print(p.kind, p.path)
    dimension_size_conflict /mask
    >>> doc = tree.to_json()
    >>> doc["members"]["temp"]["dimension_names"] = ["y"]
    >>> [(p.kind, p.path) for p in xarray(doc)]
    [('dimension_count', '/temp')]
    """
    node, problems = _checked(spec)
    if isinstance(node, ArraySpec):
        group = GroupSpec(zarr_format=node.zarr_format, members={"array": node})
        return problems + [Problem(path="/", kind=p.kind, message=p.message) for p in _group_problems("/", group, {})]
    return problems + (_group_problems("/", node, {}) if node is not None else [])


def require(spec: Any, *conventions: Callable[[Any], Iterable[Problem]]) -> None:
    """Raise one :class:`~zarr_dask.errors.MetadataError` listing every problem the conventions find.

    Examples
    --------
    >>> import numpy as np
    >>> require(GroupSpec(members={"t": ArraySpec.from_array(np.zeros(2))}), xarray)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.MetadataError: the hierarchy breaks 1 convention rule(s):
      /t: the array has no dimension_names, ...
    """
    problems = [p for check in conventions for p in check(spec)]
    if problems:
        raise MetadataError(
            f"the hierarchy breaks {len(problems)} convention rule(s):\n" + "\n".join(f"  {p}" for p in problems)
        )
