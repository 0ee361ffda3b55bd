"""Key and node-name rules are the same on every store kind: key and segment lengths, temporary-file names,
names Zarr v3 reserves for nodes (``__x``). What one store refuses, every store refuses, with the same
message, before anything is written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import InvalidPathError
from zarr_dask.store import open_store
from zarr_dask.store._keys import MAX_KEY_BYTES, MAX_SEGMENT_BYTES, is_valid_key, normalize_key
from zarr_dask.zom import GroupSpec

_SEGMENT = "the segment .* is {n} bytes long, more than the limit of 255 bytes \\(UTF-8\\)"
REFUSED = [
    pytest.param("x/" + "a" * 5000, _SEGMENT.format(n=5000), id="5000-characters"),
    pytest.param("a" * 256, _SEGMENT.format(n=256), id="256-byte-segment"),
    pytest.param("g/" + "é" * 128, _SEGMENT.format(n=256), id="256-byte-utf8-segment"),
    pytest.param("/".join(["b" * 255] * 4) + "/zarr.json", "the key is 1033 bytes long, more than the limit of 1024",
                 id="1033-byte-key"),  # fmt: skip
    pytest.param("a/.0.1f2e3d.zd-tmp", "names like '.x.zd-tmp' are reserved for temporary files", id="temp-name"),
    pytest.param(".zarr.json.zd-tmp", "reserved for temporary files of local stores; rename '.zarr.json.zd-tmp'",
                 id="temp-name-at-root"),  # fmt: skip
]
ACCEPTED = [
    "a" * MAX_SEGMENT_BYTES,
    "g/" + "é" * 127,  # 254 bytes
    "/".join(["b" * 255] * 3 + ["b" * 252]) + "/c.j",  # 1024 bytes
    "/".join(["b" * 200] * 5) + "/c",  # 1003 bytes
    "a/0.zd-tmp",  # not a temporary file's name (no leading dot)
    "a/.zd-tmp.0",
]


@pytest.mark.parametrize(("key", "message"), REFUSED)
def test_refused_keys_on_every_store(any_store_url: tuple[Any, Any], key: str, message: str) -> None:
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    calls = {
        "set": lambda: store.set(key, b"1"),
        "set_many": lambda: store.set_many({"ok": b"1", key: b"1"}),
        "get": lambda: store.get(key),
        "get_many": lambda: store.get_many([key]),
        "exists": lambda: store.exists(key),
        "delete": lambda: store.delete(key),
        "list_prefix": lambda: store.list_prefix(key + "/"),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidPathError, match=message) as info:
            call()
        assert info.value.store == store.url, name
        assert len(str(info.value)) < 600, name  # a 5000-character key is shown shortened
    assert store.list_prefix("") == []  # set_many refused the whole batch


@pytest.mark.parametrize("key", ACCEPTED)
def test_keys_at_the_limits_work_on_every_store(any_store_url: tuple[Any, Any], key: str) -> None:
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    assert len(key.encode()) <= MAX_KEY_BYTES
    store.set(key, b"value")
    assert store.get(key) == b"value" and store.list_prefix("") == [key]
    store.delete(key)
    assert store.get(key) is None


def test_one_rule_for_normalize_key_and_listings() -> None:
    for param in REFUSED:
        key, message = param.values
        assert isinstance(key, str) and isinstance(message, str) and not is_valid_key(key)
        with pytest.raises(InvalidPathError, match=message):
            normalize_key(key)
    assert all(is_valid_key(k) and normalize_key(k) == k for k in ACCEPTED)


@pytest.mark.parametrize(
    ("create", "node"),
    [
        (lambda s: zarr_dask.create_array(s, path="__x", shape=(2,), dtype="i1"), "/__x"),
        (lambda s: zarr_dask.create_array(s, name="g/__x", shape=(2,), dtype="i1"), "/g/__x"),
        (lambda s: zarr_dask.create_group(s, path="__g/a"), "/__g/a"),
        (lambda s: zarr_dask.open_group(s, path="__g", mode="w"), "/__g"),
        (lambda s: zarr_dask.create_group(s).create_array("__x", shape=(2,), dtype="i1"), "/"),
        (lambda s: GroupSpec(members={}).to_store(s, path="a/__g"), "/a/__g"),
    ],
)
def test_reserved_node_names_are_refused_on_every_store(any_store_url: tuple[Any, Any], create: Any, node: str) -> None:
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    with pytest.raises(InvalidPathError, match=r"node name '__[xg]' starts with '__', which Zarr v3 reserves; rename it") as info:
        create(store)
    assert info.value.store == store.url and str(info.value).startswith(f"store {store.url!r}, node {node!r}: ")
    assert not [k for k in store.list_prefix("") if "__" in k]  # nothing written for it


def test_reserved_names_of_each_format(any_store_url: tuple[Any, Any]) -> None:
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    v2 = zarr_dask.create_array(store, path="__x", shape=(2,), dtype="i1", zarr_format=2)  # v2 reserves no '__'
    v2[:] = np.array([1, 2], dtype="i1")
    assert zarr_dask.open_array(store, path="__x")[:].tolist() == [1, 2]
    with pytest.raises(InvalidPathError, match="node name '.zattrs' is the name of a Zarr v2 metadata document"):
        zarr_dask.create_group(store, path="g/.zattrs", zarr_format=2)
    with pytest.raises(InvalidPathError, match="node name 'zarr.json' is the name of the Zarr v3 metadata document"):
        zarr_dask.create_array(store, path="g/zarr.json", shape=(2,), dtype="i1")
    assert not [k for k in store.list_prefix("") if k.startswith("g/")]


def test_dask_writes_refuse_reserved_names(any_store_url: tuple[Any, Any]) -> None:
    import dask.array as da

    url, options = any_store_url
    store = open_store(url, storage_options=options)
    with pytest.raises(InvalidPathError, match="node name '__x' starts with '__'"):
        zarr_dask.to_zarr(da.zeros((4,), chunks=2), store, component="__x")
    assert store.list_prefix("") == []
