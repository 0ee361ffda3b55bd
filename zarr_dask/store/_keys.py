"""Store key validation and byte-range arithmetic (pure functions, no I/O).

A store key is a ``/``-separated, case-sensitive string relative to the store root.  Keys come from users,
from metadata documents and from listings of storage we do not control, so every store validates every key
before it touches the backend (design §4, "path traversal").

The rules are the same on every store, so that what one store accepts can be copied to any other: besides
the forms that could escape the root, a key is at most :data:`MAX_KEY_BYTES` (1024, the object-name limit of
S3, GCS and Azure) and each segment at most :data:`MAX_SEGMENT_BYTES` (255, the file-name limit of local file
systems) bytes of UTF-8, and names of local temporary files (``.x.zd-tmp``) are reserved.  The one
exception is a platform's: ``:`` in a key on Windows, which no Windows file name may hold.
"""

from __future__ import annotations

import re

from zarr_dask.errors import InvalidPathError
from zarr_dask.store.tempfiles import TEMP_SUFFIX, is_temp_name

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_SEGMENT_BYTES",
    "check_range",
    "has_glob_magic",
    "is_valid_key",
    "normalize_key",
    "normalize_prefix",
    "resolve_range",
]

# One segment: no '/', no '\', no control characters (C0 + DEL); not '.' or '..'; not a Windows drive
# ("C:", "C:foo" would make ntpath.join drop everything before it).
_SEGMENT = r"(?![A-Za-z]:)(?!\.\.?(?:/|$))[^/\\\x00-\x1f\x7f]+"
_VALID_KEY = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_GLOB_MAGIC = re.compile(r"[*?\[]")

_HINT = "keys are '/'-separated and relative to the store root, e.g. 'group/array/zarr.json'"

#: Longest key, in bytes of UTF-8 (S3, GCS and Azure refuse longer object names).
MAX_KEY_BYTES = 1024
#: Longest key segment, in bytes of UTF-8 (NAME_MAX of local file systems: ext4, XFS, APFS; NTFS counts 255 chars).
MAX_SEGMENT_BYTES = 255
#: Keys of at most this many characters whose segments are all this short need no length check.
_SHORT = MAX_SEGMENT_BYTES // 4


def _fits(key: str) -> bool:
    """The key's length and its segments' lengths are within the limits, and no segment is reserved."""
    if TEMP_SUFFIX in key and any(is_temp_name(segment) for segment in key.split("/")):
        return False
    if len(key) <= _SHORT:
        return True
    data = key.encode("utf-8", "surrogatepass")
    return len(data) <= MAX_KEY_BYTES and all(len(segment) <= MAX_SEGMENT_BYTES for segment in data.split(b"/"))


def _show(key: str) -> str:
    """``repr(key)``, shortened for keys too long to print."""
    return repr(key) if len(key) <= 120 else f"{key[:60]!r}... ({len(key)} characters)"


def normalize_key(key: str) -> str:
    """Validate a store key and return it unchanged.

    Keys are ``/``-separated and relative to the store root.  They are *not* silently rewritten: a key
    that could mean something else on some backend is refused, so that nothing can read or write outside
    the store root.

    Parameters
    ----------
    key
        The key to check, e.g. ``"group/array/c/0/1"``.

    Returns
    -------
    str
        ``key`` itself.

    Raises
    ------
    InvalidPathError
        If the key is empty, not a string, starts or ends with ``/``, has an empty, ``.`` or ``..``
        segment, contains a backslash or a control character (NUL included), has a Windows drive
        form (``C:``), is longer than :data:`MAX_KEY_BYTES` or has a segment longer than
        :data:`MAX_SEGMENT_BYTES` (UTF-8 bytes), or names a temporary file (``.x.zd-tmp``).  The message
        names the key and the rule it breaks; stores add their URL.

    Examples
    --------
    >>> normalize_key("a/b/zarr.json")
    'a/b/zarr.json'
    >>> normalize_key("a/../../etc/passwd")
    Traceback (most recent call last):
    ...
    zarr_dask.errors.InvalidPathError: invalid key 'a/../../etc/passwd': ...
    >>> normalize_key("a/" + "b" * 300)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.InvalidPathError: invalid key 'a/bbb...'... (302 characters): the segment 'bbb...'... is 300 bytes long, more than the limit of 255 bytes ...
    """
    if isinstance(key, str) and _VALID_KEY.fullmatch(key) and _fits(key):
        return key
    raise InvalidPathError(f"invalid key {_show(key) if isinstance(key, str) else repr(key)}: {_key_problem(key)}; {_HINT}")


def is_valid_key(key: str) -> bool:
    """True if :func:`normalize_key` accepts ``key`` (used to skip foreign names found by listings)."""
    return _VALID_KEY.fullmatch(key) is not None and _fits(key)


def normalize_prefix(prefix: str) -> str:
    """Validate a listing/deletion prefix; ``""`` is the store root and one trailing ``/`` is allowed.

    Parameters
    ----------
    prefix
        ``""`` or a key-like path, optionally ending with ``/`` (``"a/b"`` and ``"a/b/"`` are equal).

    Returns
    -------
    str
        The prefix without its trailing ``/``.

    Raises
    ------
    InvalidPathError
        For the same reasons as :func:`normalize_key`.

    Examples
    --------
    >>> normalize_prefix("a/b/")
    'a/b'
    >>> normalize_prefix("")
    ''
    """
    if isinstance(prefix, str) and prefix.endswith("/") and prefix != "/":
        prefix = prefix[:-1]
    if prefix == "":
        return ""
    try:
        return normalize_key(prefix)
    except InvalidPathError as err:
        raise InvalidPathError(err.problem.replace("invalid key", "invalid prefix", 1)) from None


def _key_problem(key: object) -> str:
    """Say which key rule ``key`` breaks (only called for invalid keys)."""
    if not isinstance(key, str):
        return f"keys must be str, not {type(key).__name__}"
    if key == "":
        return "the empty key is not a key"
    if key.startswith("/"):
        return "absolute keys (leading '/') are not allowed"
    if key.endswith("/"):
        return "keys may not end with '/'"
    if "\\" in key:
        return "backslashes are not allowed (use '/')"
    if _CONTROL.search(key):
        return "NUL and other control characters are not allowed"
    segments = key.split("/")
    if "" in segments:
        return "empty segments ('//') are not allowed"
    if "." in segments or ".." in segments:
        return "'.' and '..' segments are not allowed"
    if any(_DRIVE.match(segment) for segment in segments):
        return "Windows drive forms such as 'C:' are not allowed"
    return _length_problem(key, segments)


def _length_problem(key: str, segments: list[str]) -> str:
    """Say which length or reserved-name rule ``key`` breaks."""
    for segment in segments:
        if is_temp_name(segment):
            return f"names like '.x{TEMP_SUFFIX}' are reserved for temporary files of local stores; rename {segment!r}"
        size = len(segment.encode("utf-8", "surrogatepass"))
        if size > MAX_SEGMENT_BYTES:
            return (f"the segment {segment[:40]!r}{'...' if len(segment) > 40 else ''} is {size} bytes long, more than the limit of {MAX_SEGMENT_BYTES} "
                    "bytes (UTF-8) that local file systems allow and every store keeps to; use a shorter name")  # fmt: skip
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        return (f"the key is {size} bytes long, more than the limit of {MAX_KEY_BYTES} bytes (UTF-8) that object "
                "stores allow and every store keeps to; use shorter names or a shallower hierarchy")  # fmt: skip
    return "not a valid key"


def has_glob_magic(key: str) -> bool:
    """True if ``key`` holds a character fsspec would treat as a glob (``*``, ``?``, ``[``)."""
    return _GLOB_MAGIC.search(key) is not None


def resolve_range(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """Turn an fsspec-style byte range into ``(offset, length)`` for a value of ``size`` bytes.

    ``start=None`` means 0, a negative ``start`` counts from the end (``-n`` with ``end=None`` is the
    last ``n`` bytes), ``end=None`` means the end, a negative ``end`` counts from the end.  Out-of-range
    bounds are clipped like Python slices, so the result always lies inside the value.

    Parameters
    ----------
    start, end
        The requested bounds.
    size
        The size of the value in bytes.

    Returns
    -------
    tuple of int
        ``(offset, length)``, ``length >= 0``.

    Examples
    --------
    >>> resolve_range(-3, None, 10)
    (7, 3)
    >>> resolve_range(8, 20, 10)
    (8, 2)
    """
    begin, stop, _ = slice(start, end).indices(size)
    return begin, max(0, stop - begin)


def check_range(key: str, start: object, end: object) -> None:
    """Refuse bounds that are not ``int`` or ``None`` (``bool`` included) with a clear message."""
    for name, bound in (("start", start), ("end", end)):
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
            raise TypeError(
                f"byte range for key {key!r}: {name} must be an int or None, not {type(bound).__name__}; "
                "pass (key, start, end) tuples"
            )
