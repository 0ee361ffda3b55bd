"""Logical node paths: normalisation, node-name rules and the store keys derived from them.

A normalised path has no leading or trailing ``/``, no empty segments and no ``.``/``..`` segments; the root
is ``""``.  Every path that comes from outside (user arguments, consolidated-metadata keys, xarray names,
hierarchy descriptions) goes through :func:`normalize_path` before a store key is formed from it.
"""

from __future__ import annotations

import re
import unicodedata

from zarr_dask.errors import InvalidPathError

__all__ = [
    "join_path",
    "key_prefix",
    "name_of",
    "normalize_path",
    "parent_paths",
    "validate_node_name",
    "validate_node_path",
]

_RUNS_OF_SLASHES = re.compile(r"/{2,}")
_DRIVE = re.compile(r"^[A-Za-z]:")
_V2_METADATA_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def _control_char(text: str) -> str | None:
    for ch in text:
        if unicodedata.category(ch) == "Cc":
            return ch
    return None


def normalize_path(path: str) -> str:
    """Normalise a logical node path (v2 spec rules, as zarr-python) and reject unsafe forms.

    ``\\`` becomes ``/``; leading/trailing ``/`` are stripped and runs of ``/`` collapsed.

    Parameters
    ----------
    path
        A node path such as ``"/a/b/"`` (``""`` or ``"/"`` is the root).

    Returns
    -------
    str
        The normalised path (``"a/b"``; ``""`` for the root).

    Raises
    ------
    InvalidPathError
        For ``.``/``..`` segments, control characters (NUL included), Windows drive (``C:``) or UNC
        (``\\\\host``) forms, or a non-string.

    Examples
    --------
    >>> normalize_path("/a//b/")
    'a/b'
    >>> normalize_path("a\\\\b")
    'a/b'
    """
    if not isinstance(path, str):
        raise InvalidPathError(f"a node path must be a string, got {type(path).__name__} {path!r}")
    bad = _control_char(path)
    if bad is not None:
        raise InvalidPathError(
            f"path {path!r} contains the control character {bad!r}; remove it from the path"
        )
    unified = path.replace("\\", "/")
    if unified.startswith("//"):
        raise InvalidPathError(
            f"path {path!r} looks like a UNC network path (\\\\host\\share); use a path relative to the store"
        )
    result = _RUNS_OF_SLASHES.sub("/", unified.strip("/"))
    if not result:
        return ""
    for segment in result.split("/"):
        if segment in (".", ".."):
            raise InvalidPathError(
                f"path {path!r} contains a {segment!r} segment; paths are relative to the store root "
                "and may not navigate with '.' or '..'"
            )
        if _DRIVE.match(segment):
            raise InvalidPathError(
                f"path {path!r} contains the Windows drive form {segment!r}; use a path relative to the store"
            )
    return result


def validate_node_name(name: str, zarr_format: int, *, allow_reserved: bool = False) -> None:
    """Check a single (non-root) node name against the spec rules.

    v3 (spec "node names"): not empty, no ``/``, not made only of ``.``, not starting with ``__``
    (reserved), not ``zarr.json``.  v2: not empty, no ``/``, not only dots, not a metadata document name
    (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``).  Both: no ``\\`` (a path separator on Windows),
    no control characters, no drive form (``C:``).

    Parameters
    ----------
    name
        The name to check.
    zarr_format
        2 or 3.
    allow_reserved
        Accept v3 names starting with ``__`` (xarray writes ``__xarray_dataarray_variable__`` itself).

    Raises
    ------
    InvalidPathError
        Saying which rule the name breaks and how to fix it.

    Examples
    --------
    >>> validate_node_name("temperature", 3)
    >>> validate_node_name("__meta", 3)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.InvalidPathError: node name '__meta' starts with '__', which Zarr v3 reserves; rename it
    """
    if not isinstance(name, str):
        raise InvalidPathError(f"a node name must be a string, got {type(name).__name__} {name!r}")
    problem = _name_problem(name, zarr_format, allow_reserved=allow_reserved)
    if problem is not None:
        raise InvalidPathError(f"node name {name!r} {problem}")


def validate_node_path(path: str, zarr_format: int) -> str:
    """Normalise the path of a node to be created and check each of its names (:func:`validate_node_name`):
    the one place creation checks names, whatever the store (``InvalidPathError`` documents ``__x`` as
    reserved, and it is, in Zarr v3). Existing nodes are opened whatever their names.

    Returns
    -------
    str
        The normalised path.

    Examples
    --------
    >>> validate_node_path("/group/temperature", 3)
    'group/temperature'
    >>> validate_node_path("group/__x", 3)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.InvalidPathError: node name '__x' starts with '__', which Zarr v3 reserves; rename it
    >>> validate_node_path("group/__x", 2)
    'group/__x'
    """
    result = normalize_path(path)
    if result:
        for name in result.split("/"):
            validate_node_name(name, zarr_format)
    return result


def _name_problem(name: str, zarr_format: int, *, allow_reserved: bool = False) -> str | None:
    if zarr_format not in (2, 3):
        return f"cannot be checked: zarr_format must be 2 or 3, got {zarr_format!r}"
    if not name:
        return "is empty; give the node a name"
    if "/" in name or "\\" in name:
        return "contains a path separator ('/' or '\\'); a name is one path segment"
    bad = _control_char(name)
    if bad is not None:
        return f"contains the control character {bad!r}; remove it"
    if name.strip(".") == "":
        return "is made only of '.' characters, which the Zarr spec forbids; rename it"
    if _DRIVE.match(name):
        return "looks like a Windows drive ('C:'); rename it"
    if zarr_format == 3:
        if name.startswith("__") and not allow_reserved:
            return "starts with '__', which Zarr v3 reserves; rename it"
        if name == "zarr.json":
            return "is the name of the Zarr v3 metadata document; rename it"
    elif name in _V2_METADATA_NAMES:
        return "is the name of a Zarr v2 metadata document; rename it"
    return None


def join_path(*parts: str) -> str:
    """Join path parts with ``/`` and normalise the result (empty parts are skipped).

    Examples
    --------
    >>> join_path("", "a/b", "c")
    'a/b/c'
    """
    return "/".join(q for q in (normalize_path(p) for p in parts) if q)


def key_prefix(path: str) -> str:
    """The store key prefix of a node: ``""`` for the root, else ``path + "/"``.

    Examples
    --------
    >>> key_prefix("")
    ''
    >>> key_prefix("a/b")
    'a/b/'
    """
    p = normalize_path(path)
    return p + "/" if p else ""


def parent_paths(path: str) -> list[str]:
    """The ancestors of a node, root (``""``) first; ``[]`` for the root itself.

    Examples
    --------
    >>> parent_paths("a/b/c")
    ['', 'a', 'a/b']
    """
    p = normalize_path(path)
    if not p:
        return []
    segments = p.split("/")
    return [""] + ["/".join(segments[:i]) for i in range(1, len(segments))]


def name_of(path: str) -> str:
    """The last segment of a path (``""`` for the root).

    Examples
    --------
    >>> name_of("a/b/c")
    'c'
    """
    return normalize_path(path).rpartition("/")[2]
