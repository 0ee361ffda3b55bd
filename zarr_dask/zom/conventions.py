"""Conventions as plain functions: the value-dependent checks that static types cannot express (ZEP 6).

:func:`xarray` checks what xarray's Zarr backend needs: every group is a dataset (its arrays are the
variables) and nested groups form a DataTree.  Each problem says where it is, what xarray would do, and how to
fix it.  :func:`require` turns problems into one error.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from zarr_dask.errors import MetadataError
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node

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


def xarray(spec: Node) -> list[Problem]:
    """Check a hierarchy against xarray's Zarr encoding (every group a dataset, nested groups a DataTree).

    Flags: arrays without dimension names (``_ARRAY_DIMENSIONS`` in v2, ``dimension_names`` in v3), names that
    are not a list of strings, a name count that differs from ``ndim``, a dimension with two lengths in one
    group, an array named like one of its dimensions that is not that 1-D coordinate, a child group whose
    dimension disagrees with an ancestor's coordinate, a v3 float ``_FillValue`` attribute stored as a number,
    and a v3 ``_ARRAY_DIMENSIONS`` attribute (ignored by xarray).

    Parameters
    ----------
    spec
        A :class:`GroupSpec` (or a single :class:`ArraySpec`).

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
    """
    if isinstance(spec, ArraySpec):
        spec = GroupSpec(zarr_format=spec.zarr_format, members={"array": spec})
        return [Problem(path="/", kind=p.kind, message=p.message) for p in _group_problems("/", spec, {})]
    if not isinstance(spec, GroupSpec):
        raise MetadataError(f"xarray() checks an ArraySpec or a GroupSpec, got {type(spec).__name__}")
    return _group_problems("/", spec, {})


def require(spec: Node, *conventions: Callable[[Node], Iterable[Problem]]) -> None:
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
