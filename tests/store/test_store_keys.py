"""Key validation and byte-range arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_dask.errors import InvalidPathError
from zarr_dask.store import normalize_key
from zarr_dask.store._keys import normalize_prefix, resolve_range


@pytest.mark.parametrize(
    "key",
    [
        "a",
        "a/b/c",
        ".zarray",
        "g/.zattrs",
        "zarr.json",
        "c/0/1",
        "ü/ß",
        "a b",
        "ab:c",
        "...",
        "a..b",
        "x/__y",
    ],
)
def test_good_keys_are_returned_unchanged(key: str) -> None:
    assert normalize_key(key) == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "empty key"),
        ("/a", "absolute"),
        ("//host/share", "absolute"),
        ("a/", "end with"),
        ("a\\b", "backslash"),
        ("\\\\host\\share", "backslash"),
        ("a\x00b", "control"),
        ("a\x7f", "control"),
        ("a\tb", "control"),
        ("a//b", "empty segments"),
        ("..", "'..'"),
        ("a/../b", "'..'"),
        ("./a", "'.'"),
        ("C:", "drive"),
        ("C:/x", "drive"),
        ("a/d:evil", "drive"),
    ],
)
def test_bad_keys_name_the_key_and_the_rule(key: str, reason: str) -> None:
    with pytest.raises(InvalidPathError, match=reason) as info:
        normalize_key(key)
    assert repr(key) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_non_string_keys_are_refused() -> None:
    with pytest.raises(InvalidPathError, match="must be str"):
        normalize_key(b"a")  # type: ignore[arg-type]


@pytest.mark.parametrize(("prefix", "expected"), [("", ""), ("a", "a"), ("a/", "a"), ("a/b/", "a/b")])
def test_prefixes(prefix: str, expected: str) -> None:
    assert normalize_prefix(prefix) == expected


@pytest.mark.parametrize("prefix", ["/", "a//", "../", "a/../", "/a/"])
def test_bad_prefixes(prefix: str) -> None:
    with pytest.raises(InvalidPathError, match="invalid prefix"):
        normalize_prefix(prefix)


@given(
    size=st.integers(0, 50),
    start=st.none() | st.integers(-80, 80),
    end=st.none() | st.integers(-80, 80),
)
def test_resolve_range_matches_python_slicing(size: int, start: int | None, end: int | None) -> None:
    data = bytes(range(size))
    offset, length = resolve_range(start, end, size)
    assert data[offset : offset + length] == data[start:end]
    assert 0 <= offset <= size and length >= 0


@given(st.text(max_size=20))
def test_normalize_key_never_accepts_traversal(key: str) -> None:
    try:
        normalize_key(key)
    except InvalidPathError:
        return
    segments = key.split("/")
    assert key and "\\" not in key and "\x00" not in key
    assert not ({"", ".", ".."} & set(segments))
