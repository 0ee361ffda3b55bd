"""zarr_dask.spec.paths: normalisation (digest §1.8 + §4), node names, keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_dask.errors import InvalidPathError
from zarr_dask.spec.paths import (
    join_path,
    key_prefix,
    name_of,
    normalize_path,
    parent_paths,
    validate_node_name,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", ""),
        ("/", ""),
        ("a", "a"),
        ("/a/b/", "a/b"),
        ("a//b///c", "a/b/c"),
        ("a\\b", "a/b"),
        ("\\a\\b\\", "a/b"),
        ("a/.../b", "a/.../b"),
        ("a/.b/c.", "a/.b/c."),
        ("ü/名前", "ü/名前"),
        ("a b/c", "a b/c"),
    ],
)
def test_normalize_path(path: str, expected: str) -> None:
    assert normalize_path(path) == expected


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ("..", r"'\.\.' segment"),
        ("a/../b", r"'\.\.' segment"),
        ("./a", r"'\.' segment"),
        ("a/.", r"'\.' segment"),
        ("a\\..\\b", r"'\.\.' segment"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("a\x7fb", "control character"),
        ("C:/data", "Windows drive"),
        ("c:", "Windows drive"),
        ("a/D:x", "Windows drive"),
        ("\\\\host\\share", "UNC"),
        ("//host/share", "UNC"),
    ],
)
def test_normalize_path_rejects(path: str, match: str) -> None:
    with pytest.raises(InvalidPathError, match=match):
        normalize_path(path)


def test_normalize_path_rejects_non_string() -> None:
    with pytest.raises(InvalidPathError, match="must be a string"):
        normalize_path(b"a")  # type: ignore[arg-type]


def test_invalid_path_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        normalize_path("..")


@given(st.lists(st.text(alphabet="ab.\\/_", max_size=5), max_size=5).map("/".join))
def test_normalize_path_idempotent_and_safe(path: str) -> None:
    try:
        p = normalize_path(path)
    except InvalidPathError:
        return
    assert normalize_path(p) == p
    assert not p.startswith("/") and not p.endswith("/") and "//" not in p and "\\" not in p
    assert all(seg not in (".", "..", "") for seg in p.split("/")) or p == ""


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", ["a", "temp", "x.y", ".hidden", "a-b_c", "ü", "1", "zarr.jsonx"])
def test_valid_node_names(name: str, fmt: int) -> None:
    validate_node_name(name, fmt)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("", "empty"),
        ("a/b", "separator"),
        ("a\\b", "separator"),
        (".", "only of '.'"),
        ("..", "only of '.'"),
        ("...", "only of '.'"),
        ("a\x00", "control"),
        ("C:", "drive"),
    ],
)
def test_invalid_node_names_both_formats(name: str, match: str, fmt: int) -> None:
    with pytest.raises(InvalidPathError, match=match):
        validate_node_name(name, fmt)


@pytest.mark.parametrize(
    ("name", "match"), [("__x", "reserves"), ("__", "reserves"), ("zarr.json", "v3 metadata")]
)
def test_invalid_v3_names(name: str, match: str) -> None:
    with pytest.raises(InvalidPathError, match=match):
        validate_node_name(name, 3)
    validate_node_name(name, 2)


@pytest.mark.parametrize("name", [".zarray", ".zgroup", ".zattrs", ".zmetadata"])
def test_invalid_v2_names(name: str) -> None:
    with pytest.raises(InvalidPathError, match="v2 metadata document"):
        validate_node_name(name, 2)
    validate_node_name(name, 3)


def test_validate_node_name_bad_arguments() -> None:
    with pytest.raises(InvalidPathError, match="must be a string"):
        validate_node_name(1, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidPathError, match="zarr_format must be 2 or 3"):
        validate_node_name("a", 4)


def test_join_path() -> None:
    assert join_path() == ""
    assert join_path("", "") == ""
    assert join_path("", "a") == "a"
    assert join_path("", "", "a") == "a"
    assert join_path("a/b", "c") == "a/b/c"
    assert join_path("/a/", "/b/", "c/d") == "a/b/c/d"
    with pytest.raises(InvalidPathError):
        join_path("a", "..")


def test_key_prefix() -> None:
    assert key_prefix("") == ""
    assert key_prefix("/") == ""
    assert key_prefix("a/b") == "a/b/"
    assert key_prefix("/a/b/") == "a/b/"


def test_parent_paths() -> None:
    assert parent_paths("") == []
    assert parent_paths("a") == [""]
    assert parent_paths("a/b/c") == ["", "a", "a/b"]


def test_name_of() -> None:
    assert name_of("") == ""
    assert name_of("a") == "a"
    assert name_of("a/b/c/") == "c"
